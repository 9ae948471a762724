package rocm

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/loomgraph/loom/exec/rocm/hip"
)

// CacheDirEnv names the kernel cache directory; "off" disables the disk
// cache. Unset, the cache lives in os.UserCacheDir()/loom/kernels.
const CacheDirEnv = "LOOM_CACHE_DIR"

// DumpEnv names a directory that receives every generated kernel source
// (<kernel name>.hip) and its compile log (<kernel name>.log).
const DumpEnv = "LOOM_DUMP"

// CacheDir returns the kernel cache directory ("" when disabled or when no
// user cache directory is known).
func CacheDir() string {
	switch d := os.Getenv(CacheDirEnv); d {
	case "off":
		return ""
	case "":
	default:
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "loom", "kernels")
}

// KernelStats counts where compiled kernels came from and how long that
// took. Compile, disk and memory counts are those of the process-wide code
// cache; module loads and launches are the executor's own.
type KernelStats struct {
	Compiles     int64         // sources compiled (a batch of kernels counts once)
	Batched      int64         // kernels compiled as members of a batch
	CompileTime  time.Duration // total time in the compiler (and disk write)
	DiskHits     int64         // code objects read from the disk cache
	DiskTime     time.Duration // total time of disk hits (read, check)
	MemHits      int64         // code objects found in memory
	MemTime      time.Duration // total time of memory hits (hash, lookup)
	Corrupt      int64         // disk entries that failed their check and were recompiled
	DiskErrors   int64         // failed disk-cache writes (the cache is best effort)
	LastDiskErr  string        // the last such failure
	ModuleLoads  int64         // modules loaded on this executor
	ModuleTime   time.Duration // total time loading them
	KernelsReady int64         // kernels prepared (code generated, code object found, function looked up)
	Launches     int64         // kernel launches on this executor
}

// codeCache holds compiled code objects: in memory for the process, and on
// disk. Concurrent requests for one key compile once.
type codeCache struct {
	mu  sync.Mutex
	mem map[memKey]*codeObject
	// byKey holds batch code objects read from disk by their own key, so
	// that the members of one batch share one object (and one module).
	byKey map[string]*codeObject
	sf    singleflight.Group

	compiles, compileNs atomic.Int64
	diskHits, diskNs    atomic.Int64
	memHits, memNs      atomic.Int64
	corrupt, diskErrs   atomic.Int64
	batched             atomic.Int64 // kernels compiled as members of a batch
	lastDiskErr         atomic.Value // string
}

// codeObject is a compiled kernel source.
type codeObject struct {
	key  string
	code []byte
	log  string // compiler log ("" for disk hits)
}

// How a code object was found.
const (
	fromMemory  = "memory"
	fromDisk    = "disk"
	fromCompile = "compile"
)

// shared is the process-wide code cache every executor uses.
var shared = newCodeCache()

func newCodeCache() *codeCache {
	return &codeCache{mem: map[memKey]*codeObject{}, byKey: map[string]*codeObject{}}
}

// memKey is the in-memory key: the source itself rather than its SHA-256,
// because Go's map hash of a 20 KB string costs about a microsecond, ten
// times less than SHA-256 (which only misses pay, for the disk key).
type memKey struct{ src, arch, compiler, opts string }

// cacheKey identifies a code object: the source's SHA-256, the target
// architecture, the compiler and its version, and the options.
func cacheKey(src, arch, compiler string, opts []string) string {
	h := sha256.Sum256([]byte(src))
	return hex.EncodeToString(h[:]) + "|" + arch + "|" + compiler + "|" + strings.Join(opts, " ")
}

// compileError is a failed compile: the error shows the source, with line
// numbers, and the compiler log.
type compileError struct {
	name, arch, compiler, src, log string
	err                            error
}

func (e *compileError) Error() string {
	cause := e.err
	var he *hip.Error
	if errors.As(e.err, &he) {
		cause = he // the log follows on its own
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rocm: compiling kernel %s for %s with %s failed: %v\n", e.name, e.arch, e.compiler, cause)
	fmt.Fprintf(&b, "--- source %s.hip ---\n", e.name)
	for i, line := range strings.Split(strings.TrimRight(e.src, "\n"), "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	fmt.Fprintf(&b, "--- compiler log ---\n%s", e.log)
	if e.log == "" {
		b.WriteString("(empty)")
	}
	return b.String()
}

func (e *compileError) Unwrap() error { return e.err }

// get returns the code object of src compiled by comp for arch with opts,
// from memory, from the disk cache under dir ("" for none) or by compiling
// it, and says which.
func (c *codeCache) get(comp hip.Compiler, dir, src, name, arch string, opts []string) (*codeObject, string, error) {
	start := time.Now()
	mk := memKey{src, arch, comp.Version(), strings.Join(opts, " ")}
	c.mu.Lock()
	obj := c.mem[mk]
	c.mu.Unlock()
	if obj != nil {
		c.memHits.Add(1)
		c.memNs.Add(int64(time.Since(start)))
		return obj, fromMemory, nil
	}
	type result struct {
		obj *codeObject
		how string
	}
	key := cacheKey(src, arch, comp.Version(), opts)
	v, err, _ := c.sf.Do(key, func() (any, error) {
		c.mu.Lock()
		obj := c.mem[mk]
		c.mu.Unlock()
		if obj != nil { // a flight that just finished stored it
			return result{obj, fromMemory}, nil
		}
		how := fromDisk
		t0 := time.Now()
		obj = c.resolveAlias(dir, c.readDisk(dir, key))
		if obj != nil {
			c.diskHits.Add(1)
			c.diskNs.Add(int64(time.Since(t0)))
		} else {
			how = fromCompile
			code, log, err := comp.Compile(src, name, arch, opts)
			if err != nil {
				return nil, &compileError{name: name, arch: arch, compiler: comp.Version(), src: src, log: log, err: err}
			}
			obj = &codeObject{key: key, code: code, log: log}
			c.writeDisk(dir, key, code)
			c.compiles.Add(1)
			c.compileNs.Add(int64(time.Since(t0)))
		}
		c.mu.Lock()
		c.mem[mk] = obj
		c.mu.Unlock()
		return result{obj, how}, nil
	})
	if err != nil {
		return nil, "", err
	}
	r := v.(result)
	if r.how == fromMemory {
		c.memHits.Add(1)
		c.memNs.Add(int64(time.Since(start)))
	}
	return r.obj, r.how, nil
}

// forget drops the in-memory entries (tests: force a disk hit).
func (c *codeCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.mem)
	clear(c.byKey)
}

func (c *codeCache) stats() KernelStats {
	s := KernelStats{
		Compiles: c.compiles.Load(), Batched: c.batched.Load(), CompileTime: time.Duration(c.compileNs.Load()),
		DiskHits: c.diskHits.Load(), DiskTime: time.Duration(c.diskNs.Load()),
		MemHits: c.memHits.Load(), MemTime: time.Duration(c.memNs.Load()),
		Corrupt: c.corrupt.Load(), DiskErrors: c.diskErrs.Load(),
	}
	if e, ok := c.lastDiskErr.Load().(string); ok {
		s.LastDiskErr = e
	}
	return s
}

// Disk entries: one file per key, named by the key's SHA-256, holding
//
//	magic    8 bytes  "LOOMKC01"
//	keyLen   4 bytes  little-endian
//	codeLen  8 bytes  little-endian
//	sum     32 bytes  SHA-256 of key ‖ code
//	key, code
//
// An entry whose magic, lengths, key or checksum do not match is corrupt:
// it is counted, recompiled and overwritten. Entries are written to a
// temporary file in the same directory and renamed into place, so readers
// never see a partial entry.
const diskMagic = "LOOMKC01"

const diskHeader = len(diskMagic) + 4 + 8 + sha256.Size

func entryPath(dir, key string) string {
	h := sha256.Sum256([]byte(key))
	return filepath.Join(dir, hex.EncodeToString(h[:20])+".co")
}

func entrySum(key string, code []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(key))
	h.Write(code)
	var s [sha256.Size]byte
	h.Sum(s[:0])
	return s
}

// readDisk returns the entry for key, or nil when there is none or it is
// corrupt (counted).
func (c *codeCache) readDisk(dir, key string) *codeObject {
	if dir == "" {
		return nil
	}
	data, err := os.ReadFile(entryPath(dir, key))
	if err != nil {
		return nil // missing (or unreadable): compile
	}
	code, ok := decodeEntry(data, key)
	if !ok {
		c.corrupt.Add(1)
		return nil
	}
	return &codeObject{key: key, code: code}
}

func decodeEntry(data []byte, key string) ([]byte, bool) {
	if len(data) < diskHeader || string(data[:8]) != diskMagic {
		return nil, false
	}
	keyLen := int(binary.LittleEndian.Uint32(data[8:12]))
	codeLen := binary.LittleEndian.Uint64(data[12:20])
	rest := data[diskHeader:]
	if keyLen != len(key) || codeLen == 0 || uint64(len(rest)) != uint64(keyLen)+codeLen {
		return nil, false
	}
	if string(rest[:keyLen]) != key {
		return nil, false
	}
	code := rest[keyLen:]
	sum := entrySum(key, code)
	if !bytes.Equal(sum[:], data[20:diskHeader]) {
		return nil, false
	}
	return code, true
}

func encodeEntry(key string, code []byte) []byte {
	b := make([]byte, diskHeader, diskHeader+len(key)+len(code))
	copy(b, diskMagic)
	binary.LittleEndian.PutUint32(b[8:12], uint32(len(key)))
	binary.LittleEndian.PutUint64(b[12:20], uint64(len(code)))
	sum := entrySum(key, code)
	copy(b[20:], sum[:])
	b = append(b, key...)
	return append(b, code...)
}

// writeDisk stores an entry atomically (temporary file, then rename).
// Failures are counted, not returned: the disk cache is an optimisation.
func (c *codeCache) writeDisk(dir, key string, code []byte) {
	if dir == "" {
		return
	}
	if err := writeAtomic(entryPath(dir, key), encodeEntry(key, code)); err != nil {
		c.diskErrs.Add(1)
		c.lastDiskErr.Store(err.Error())
	}
}

// writeAtomic writes data to path through a temporary file in the same
// directory and a rename, creating the directory if needed.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
	}
	return werr
}

// ForgetCompiled drops the process-wide in-memory code cache, so that the
// next preparation of a kernel reads the disk cache or compiles: what a new
// process sees. Benchmarks of compile and disk-cache times use it; kernels
// already prepared in a plan keep their loaded functions.
func ForgetCompiled() { shared.forget() }

package rocm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomgraph/loom/exec/rocm/hip"
)

// fakeCompiler "compiles" a source into its bytes, slowly, and counts calls.
type fakeCompiler struct {
	calls atomic.Int64
	delay time.Duration
}

func (c *fakeCompiler) Platform() string { return "fake" }
func (c *fakeCompiler) Version() string  { return "fakecc 1.0" }
func (c *fakeCompiler) Compile(src, name, arch string, opts []string) ([]byte, string, error) {
	c.calls.Add(1)
	time.Sleep(c.delay)
	if strings.Contains(src, "syntax error") {
		log := name + "(3): error: expected a \";\""
		return nil, log, errors.New("fake: compile failed (" + name + "):\n" + log)
	}
	return []byte("CODE:" + src), "fine", nil
}

func TestCodeCacheFake(t *testing.T) {
	dir := t.TempDir()
	c := newCodeCache()
	comp := &fakeCompiler{delay: 20 * time.Millisecond}
	src := "extern \"C\" __global__ void k() {}\n"

	// Concurrent first requests compile once.
	var wg sync.WaitGroup
	objs := make([]*codeObject, 16)
	for i := range objs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, _, err := c.get(comp, dir, src, "k", "arch1", []string{"-O3"})
			if err != nil {
				t.Error(err)
			}
			objs[i] = o
		}()
	}
	wg.Wait()
	if n := comp.calls.Load(); n != 1 {
		t.Fatalf("16 concurrent requests compiled %d times", n)
	}
	for _, o := range objs {
		if o == nil || string(o.code) != "CODE:"+src {
			t.Fatalf("bad code object %+v", o)
		}
	}
	// Memory hit.
	if _, how, _ := c.get(comp, dir, src, "k", "arch1", []string{"-O3"}); how != fromMemory {
		t.Errorf("second request: %s, want memory hit", how)
	}
	// Other arch, options or compiler version: different keys.
	if _, how, _ := c.get(comp, dir, src, "k", "arch2", []string{"-O3"}); how != fromCompile {
		t.Errorf("other arch: %s", how)
	}
	if _, how, _ := c.get(comp, dir, src, "k", "arch1", nil); how != fromCompile {
		t.Errorf("other options: %s", how)
	}
	// Disk hit: a fresh process-wide cache (another process) with the same dir.
	c2 := newCodeCache()
	o, how, err := c2.get(comp, dir, src, "k", "arch1", []string{"-O3"})
	if err != nil || how != fromDisk || string(o.code) != "CODE:"+src {
		t.Fatalf("fresh cache: %s, %v", how, err)
	}
	// Corrupt entries (flipped byte, truncated, empty, wrong magic) are
	// detected, recompiled and rewritten.
	path := entryPath(dir, cacheKey(src, "arch1", comp.Version(), []string{"-O3"}))
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, bad := range [][]byte{
		flip(good, len(good)-1), flip(good, diskHeader+3), flip(good, 25), good[:len(good)-1], good[:10], nil, append([]byte("XXXXXXXX"), good[8:]...),
	} {
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		c3 := newCodeCache()
		before := comp.calls.Load()
		o, how, err := c3.get(comp, dir, src, "k", "arch1", []string{"-O3"})
		if err != nil || how != fromCompile || comp.calls.Load() != before+1 || string(o.code) != "CODE:"+src {
			t.Errorf("corruption %d: %s, %v", i, how, err)
		}
		if c3.stats().Corrupt != 1 {
			t.Errorf("corruption %d not counted: %+v", i, c3.stats())
		}
		if again, _ := os.ReadFile(path); string(again) != string(good) {
			t.Errorf("corruption %d: entry not rewritten", i)
		}
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("leftover temporary file %s", e.Name())
		}
	}
	// Compile errors show the source and the log and are not cached.
	bad := "line one\nline two\nsyntax error here\n"
	_, _, err = c.get(comp, dir, bad, "broken", "arch1", nil)
	if err == nil {
		t.Fatal("bad source compiled")
	}
	for _, want := range []string{"broken", "   3  syntax error here", "--- compiler log ---", "expected a \";\""} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("compile error lacks %q:\n%v", want, err)
		}
	}
	before := comp.calls.Load()
	c.get(comp, dir, bad, "broken", "arch1", nil)
	if comp.calls.Load() != before+1 {
		t.Error("a failed compile was cached")
	}
	st := c.stats()
	t.Logf("stats: %+v", st)
	if st.Compiles != 3 || st.MemHits < 1 || st.DiskHits != 0 {
		t.Errorf("stats %+v", st)
	}
	// An unwritable cache directory is counted, not fatal.
	c4 := newCodeCache()
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, _, err := c4.get(comp, filepath.Join(file, "sub"), src, "k", "arch1", nil); err != nil {
		t.Errorf("unwritable cache dir: %v", err)
	}
	if s := c4.stats(); s.DiskErrors != 1 || s.LastDiskErr == "" {
		t.Errorf("disk error not counted: %+v", s)
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

func TestCacheDir(t *testing.T) {
	t.Setenv(CacheDirEnv, "/x/y")
	if d := CacheDir(); d != "/x/y" {
		t.Errorf("CacheDir() = %q", d)
	}
	t.Setenv(CacheDirEnv, "off")
	if d := CacheDir(); d != "" {
		t.Errorf("CacheDir() with off = %q", d)
	}
	t.Setenv(CacheDirEnv, "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	if d := CacheDir(); d != "/cache/loom/kernels" {
		t.Errorf("default CacheDir() = %q", d)
	}
}

// realCompiler returns the compiler and arch of the GPU when there is one,
// else hiprtc for gfx90a (compile-only), else skips.
func realCompiler(t testing.TB) (hip.Compiler, string, string) {
	if p, err := hip.Load(); err == nil {
		n, _ := p.DeviceCount()
		if n > 0 {
			info, err := p.DeviceInfo(0)
			if err == nil {
				c, err := p.Compiler()
				if err == nil {
					return c, info.Arch, info.Platform
				}
			}
		}
	}
	c, err := hip.LoadCompiler(hip.AMD)
	if err != nil {
		t.Skipf("no GPU and no hiprtc: %v", err)
	}
	return c, "gfx90a", hip.AMD
}

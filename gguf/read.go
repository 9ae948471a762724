package gguf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/loomgraph/loom/quant"
)

// Format constants and the reader's limits.
const (
	// Magic is the first four bytes of every GGUF file.
	Magic = "GGUF"
	// Version is the version the writer produces; the reader takes 2 and 3
	// (identical on little-endian files: 3 only added big-endian support).
	Version = 3
	// DefaultAlignment applies when general.alignment is absent.
	DefaultAlignment = 32
	// AlignmentKey is the metadata key that sets the alignment.
	AlignmentKey = "general.alignment"

	// Limits, as llama.cpp (gguf.cpp) and Candle (gguf_file.rs) apply them:
	// a string or array longer than this is refused before anything is
	// allocated for it, as are arrays nested deeper than MaxNesting.
	MaxStringLen = 1 << 30
	MaxArrayLen  = 1 << 30
	MaxNesting   = 64
	// MaxDims is ggml's GGML_MAX_DIMS.
	MaxDims = 4
	// MaxKeyLen is the spec's limit on a metadata key (2^16−1 bytes).
	MaxKeyLen = 1<<16 - 1
	// MaxNameLen is the spec's limit on a tensor name when reading; the
	// writer allows one byte less (ggml keeps names NUL-terminated in
	// GGML_MAX_NAME = 64 bytes and refuses a 64-byte name).
	MaxNameLen = 64

	headerSize  = 24            // magic, version, tensor count, metadata count
	minKVSize   = 8 + 1 + 4 + 1 // key length, a 1-byte key, value type, a 1-byte value
	minInfoSize = 8 + 4 + 4 + 8 // name length (empty name), n_dims (0), type, offset
)

// FormatError reports a malformed (or unreadable) file: the field at
// fault, its byte offset in the file, and why. Truncation wraps
// io.ErrUnexpectedEOF; a failed read wraps the reader's error.
type FormatError struct {
	Path   string // set by Open
	Offset int64
	Field  string // e.g. `tensor "blk.0.attn_q.weight" dims[1]`
	Reason string
	Err    error
}

func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString("gguf: ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, "%s at offset %d: %s", e.Field, e.Offset, e.Reason)
	return b.String()
}

func (e *FormatError) Unwrap() error { return e.Err }

// ErrNotFound is wrapped by the errors for a missing metadata key or
// tensor name.
var ErrNotFound = errors.New("not found")

// KV is one metadata key and its value.
type KV struct {
	Key   string
	Value Value
	// Offset is where the entry (its key's length field) starts in the
	// file; 0 for entries not read from a file.
	Offset int64
}

// Metadata is a file's key-value section, in file order.
type Metadata struct {
	kvs   []KV
	index map[string]int
}

// Len is the number of entries.
func (m *Metadata) Len() int { return len(m.kvs) }

// KVs returns the entries in file order (a copy).
func (m *Metadata) KVs() []KV { return slices.Clone(m.kvs) }

// Get returns the value of key.
func (m *Metadata) Get(key string) (Value, bool) {
	i, ok := m.index[key]
	if !ok {
		return Value{}, false
	}
	return m.kvs[i].Value, true
}

func (m *Metadata) lookup(key string) (KV, error) {
	i, ok := m.index[key]
	if !ok {
		return KV{}, fmt.Errorf("gguf: metadata key %q: %w", key, ErrNotFound)
	}
	return m.kvs[i], nil
}

// typed wraps a conversion error with the key and where it is.
func typed[T any](m *Metadata, key string, as func(Value) (T, error)) (T, error) {
	kv, err := m.lookup(key)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := as(kv.Value)
	if err != nil {
		return v, fmt.Errorf("gguf: metadata key %q (offset %d): %s", key, kv.Offset, strings.TrimPrefix(err.Error(), "gguf: "))
	}
	return v, nil
}

// Uint returns key's value as a uint64: any integer type holding a
// non-negative value is accepted (counts are "by convention uint64" but
// readers must take uint32, as the spec says). A missing key wraps
// ErrNotFound; another type or a negative value is an error naming both.
func (m *Metadata) Uint(key string) (uint64, error) { return typed(m, key, Value.AsUint) }

// Int returns key's value as an int64: any integer type whose value fits.
func (m *Metadata) Int(key string) (int64, error) { return typed(m, key, Value.AsInt) }

// Float returns a float32 or float64 value as a float64.
func (m *Metadata) Float(key string) (float64, error) { return typed(m, key, Value.AsFloat) }

// Bool returns a bool value.
func (m *Metadata) Bool(key string) (bool, error) { return typed(m, key, Value.AsBool) }

// String returns a string value.
func (m *Metadata) String(key string) (string, error) { return typed(m, key, Value.AsString) }

// Array returns an array value.
func (m *Metadata) Array(key string) (Array, error) { return typed(m, key, Value.AsArray) }

// Strings returns an array of strings (a tokenizer's vocabulary, say).
func (m *Metadata) Strings(key string) ([]string, error) {
	return typed(m, key, func(v Value) ([]string, error) {
		a, err := v.AsArray()
		if err != nil {
			return nil, err
		}
		return Elems[string](a)
	})
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name string
	Type quant.Type
	// Dims is the shape as stored: Dims[0] is the innermost, contiguous
	// axis (ggml's ne order). Shape gives it row-major.
	Dims []int64
	// Offset is where the data starts relative to the tensor data section,
	// as stored; FileOffset is the same place in the file.
	Offset     int64
	FileOffset int64
	// Size is the data's length in bytes, from Type's block layout.
	Size int64
	// InfoOffset is where this tensor's info (its name) starts in the file.
	InfoOffset int64

	offsetField int64 // where the stored offset is, for errors
}

// Shape returns the dims row-major (outermost first), as Loom shapes and
// Candle order them: a ggml weight stored as [k, n] has shape [n, k]. A
// tensor stored with no dims is a scalar: shape [].
func (t *TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(s)-1-i] = int(d) // the reader checked every dim ≤ MaxInt
	}
	return s
}

// Elements is the number of elements (1 for a tensor with no dims).
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d // the reader checked the product fits
	}
	return n
}

// File is a parsed GGUF file. Open maps the file and Data hands out slices
// of the mapping; Read reads through an io.ReaderAt and Data copies.
type File struct {
	Version   uint32
	Alignment int64
	// DataOffset is where the tensor data section starts in the file:
	// the end of the tensor infos rounded up to the alignment.
	DataOffset int64
	Size       int64 // the file's length in bytes
	Metadata   Metadata
	Tensors    []TensorInfo // in file order

	byName map[string]int
	src    *source
	path   string
	unmap  func() error
	closed bool
}

// Tensor returns the named tensor's info; a missing name wraps ErrNotFound.
func (f *File) Tensor(name string) (*TensorInfo, error) {
	i, ok := f.byName[name]
	if !ok {
		return nil, fmt.Errorf("gguf: %stensor %q: %w (the file has %d tensors)", f.pathPrefix(), name, ErrNotFound, len(f.Tensors))
	}
	return &f.Tensors[i], nil
}

func (f *File) pathPrefix() string {
	if f.path == "" {
		return ""
	}
	return f.path + ": "
}

// Data returns the named tensor's bytes. For a file from Open they are a
// slice of the read-only mapping, not a copy: valid until Close, and
// writing into them faults. For a file from Read they are read into a new
// slice on each call.
func (f *File) Data(name string) ([]byte, error) {
	t, err := f.Tensor(name)
	if err != nil {
		return nil, err
	}
	return f.TensorData(t)
}

// TensorData is Data for a TensorInfo of this file.
func (f *File) TensorData(t *TensorInfo) ([]byte, error) {
	if f.closed {
		return nil, fmt.Errorf("gguf: %stensor %q: the file is closed", f.pathPrefix(), t.Name)
	}
	// Read checked FileOffset+Size ≤ Size; check again in case t was
	// built or changed by the caller, so no read ever leaves the file.
	if t.FileOffset < 0 || t.Size < 0 || t.FileOffset > f.Size || t.Size > f.Size-t.FileOffset {
		return nil, fmt.Errorf("gguf: %stensor %q: data at offset %d, %d bytes, lies outside the file (%d bytes)", f.pathPrefix(), t.Name, t.FileOffset, t.Size, f.Size)
	}
	if f.src.inMem {
		end := t.FileOffset + t.Size
		return f.src.mem[t.FileOffset:end:end], nil
	}
	b := make([]byte, t.Size)
	if err := readFull(f.src.ra, b, t.FileOffset); err != nil {
		return nil, fmt.Errorf("gguf: %stensor %q: reading %d bytes at offset %d: %w", f.pathPrefix(), t.Name, t.Size, t.FileOffset, err)
	}
	return b, nil
}

// Close releases the mapping of a file from Open (slices from Data are
// invalid afterwards); for a file from Read it only marks the File closed.
// Closing twice is not an error.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	f.src = &source{inMem: true}
	if f.unmap != nil {
		err := f.unmap()
		f.unmap = nil
		return err
	}
	return nil
}

// Read parses a GGUF file of size bytes from r. Tensor data is not read
// until Data asks for it; r must stay usable until then.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("gguf: negative file size %d", size)
	}
	return parse(&source{ra: r, size: size}, "")
}

// parseBytes parses a file held in memory (a mapping); Data slices it.
func parseBytes(b []byte, path string) (*File, error) {
	return parse(&source{inMem: true, mem: b, size: int64(len(b))}, path)
}

// source gives the parser the file's bytes: slices of the whole file when
// it is in memory, else reads through r into a window so that a metadata
// section of 150k small strings costs a few dozen reads, not 300k.
type source struct {
	inMem  bool
	mem    []byte
	ra     io.ReaderAt
	size   int64
	win    []byte
	winOff int64
}

const window = 64 << 10

// at returns the n bytes at off, which the caller has checked lie in the
// file. The slice is valid until the next call.
func (s *source) at(off, n int64) ([]byte, error) {
	if s.inMem {
		return s.mem[off : off+n], nil
	}
	if off >= s.winOff && off+n <= s.winOff+int64(len(s.win)) {
		return s.win[off-s.winOff : off-s.winOff+n], nil
	}
	if n > window {
		b := make([]byte, n) // n ≤ the file's remaining bytes: checked
		return b, readFull(s.ra, b, off)
	}
	if cap(s.win) < window {
		s.win = make([]byte, window)
	}
	// Fill the window as far as the reader goes; only the n bytes asked
	// for must be there (the header of a file whose size was overstated
	// still parses, and its data reads fail in Data).
	got, err := s.ra.ReadAt(s.win[:min(window, s.size-off)], off)
	s.win, s.winOff = s.win[:got], off
	if int64(got) < n {
		s.win = s.win[:0]
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return s.win[:n], nil
}

// readFull reads len(b) bytes at off; a short read is io.ErrUnexpectedEOF.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil // io.ReaderAt may report io.EOF with a full read at the end
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// parser reads the header, metadata and tensor infos in order. what and
// path name the item being read, so errors say which field is at fault;
// they are only formatted when an error happens.
type parser struct {
	src  *source
	path string
	off  int64
	what string // `metadata key "x"`, `tensor "y"`, …
	idx  []int  // array element indices within the current value
}

func (p *parser) field(name string) string {
	var b strings.Builder
	b.WriteString(p.what)
	for _, i := range p.idx {
		fmt.Fprintf(&b, "[%d]", i)
	}
	if name != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(name)
	}
	return b.String()
}

func (p *parser) errAt(off int64, name string, err error, format string, a ...any) *FormatError {
	return &FormatError{Path: p.path, Offset: off, Field: p.field(name), Reason: fmt.Sprintf(format, a...), Err: err}
}

func (p *parser) left() int64 { return p.src.size - p.off }

// take returns the next n bytes (valid until the next take) and advances.
func (p *parser) take(n int64, name string) ([]byte, error) {
	if n > p.left() {
		return nil, p.errAt(p.off, name, io.ErrUnexpectedEOF, "the file is truncated: %s needs %d bytes, %d are left of %d", name, n, p.left(), p.src.size)
	}
	b, err := p.src.at(p.off, n)
	if err != nil {
		return nil, p.errAt(p.off, name, err, "reading %d bytes: %v", n, err)
	}
	p.off += n
	return b, nil
}

func (p *parser) u32(name string) (uint32, error) {
	b, err := p.take(4, name)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (p *parser) u64(name string) (uint64, error) {
	b, err := p.take(8, name)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a string of at most limit bytes; its length is checked against
// the limit and the rest of the file before anything is allocated.
func (p *parser) str(name string, limit uint64) (string, error) {
	at := p.off
	n, err := p.u64(name + " length")
	if err != nil {
		return "", err
	}
	if n > limit {
		return "", p.errAt(at, name, nil, "length %d exceeds the limit of %d bytes", n, limit)
	}
	if n > uint64(p.left()) {
		return "", p.errAt(at, name, io.ErrUnexpectedEOF, "the file is truncated: length %d, but only %d bytes are left of %d", n, p.left(), p.src.size)
	}
	b, err := p.take(int64(n), name)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func parse(src *source, path string) (*File, error) {
	p := &parser{src: src, path: path}
	f := &File{src: src, path: path, Size: src.size, byName: map[string]int{}}

	magic, err := p.take(4, "magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, p.errAt(0, "magic", nil, "%q is not %q: not a GGUF file", magic, Magic)
	}
	if f.Version, err = p.u32("version"); err != nil {
		return nil, err
	}
	switch v := f.Version; {
	case v == 2 || v == 3:
	case v == 1:
		return nil, p.errAt(4, "version", nil, "GGUF version 1 (32-bit counts and dims) is not supported; convert the file with a current llama.cpp")
	case v&0xffff == 0:
		return nil, p.errAt(4, "version", nil, "version %#08x looks byte-swapped: big-endian GGUF files are not supported", v)
	default:
		return nil, p.errAt(4, "version", nil, "version %d is not 2 or 3, the versions this reader knows", v)
	}
	nTensors, err := p.u64("tensor_count")
	if err != nil {
		return nil, err
	}
	nKV, err := p.u64("metadata_kv_count")
	if err != nil {
		return nil, err
	}
	// Each entry takes some minimum number of bytes, so counts the rest of
	// the file cannot hold are refused before anything is allocated.
	rest := uint64(p.left())
	if nKV > rest/minKVSize {
		return nil, p.errAt(16, "metadata_kv_count", nil, "%d entries need at least %d bytes each, the file has %d bytes after the header", nKV, minKVSize, rest)
	}
	rest -= nKV * minKVSize
	if nTensors > rest/minInfoSize {
		return nil, p.errAt(8, "tensor_count", nil, "%d tensor infos need at least %d bytes each, the file has %d bytes after the header and %d metadata entries", nTensors, minInfoSize, rest, nKV)
	}

	if err := p.metadata(f, int(nKV)); err != nil {
		return nil, err
	}
	if err := p.alignment(f); err != nil {
		return nil, err
	}
	infos := make([]TensorInfo, 0, min(nTensors, 1024))
	for i := range int(nTensors) {
		t, err := p.tensorInfo(i, f.byName)
		if err != nil {
			return nil, err
		}
		f.byName[t.Name] = len(infos)
		infos = append(infos, t)
	}
	f.Tensors = infos
	p.what = ""
	if p.off > math.MaxInt64-f.Alignment {
		return nil, p.errAt(p.off, "tensor data section", nil, "its start overflows")
	}
	f.DataOffset = alignUp(p.off, f.Alignment)
	if len(f.Tensors) > 0 && f.DataOffset > f.Size {
		return nil, p.errAt(p.off, "tensor data section", io.ErrUnexpectedEOF, "the file is truncated: the data section starts at %d (the end of the tensor infos aligned to %d), past the end of the file (%d bytes)", f.DataOffset, f.Alignment, f.Size)
	}
	if err := p.placeTensors(f); err != nil {
		return nil, err
	}
	return f, nil
}

func alignUp(off, a int64) int64 { return (off + a - 1) / a * a }

func (p *parser) metadata(f *File, n int) error {
	m := &f.Metadata
	m.kvs = make([]KV, 0, min(n, 1024))
	m.index = map[string]int{}
	for i := range n {
		at := p.off
		p.what = fmt.Sprintf("metadata[%d]", i)
		key, err := p.str("key", MaxKeyLen)
		if err != nil {
			return err
		}
		if key == "" {
			return p.errAt(at, "key", nil, "the key is empty")
		}
		p.what = fmt.Sprintf("metadata key %q", key)
		if j, dup := m.index[key]; dup {
			return p.errAt(at, "", nil, "duplicate key (first at offset %d)", m.kvs[j].Offset)
		}
		typeAt := p.off
		t, err := p.u32("value type")
		if err != nil {
			return err
		}
		if !ValueType(t).valid() {
			return p.errAt(typeAt, "value type", nil, "unknown value type %d (the spec has 0…12)", t)
		}
		v, err := p.value(ValueType(t), 0)
		if err != nil {
			return err
		}
		m.index[key] = len(m.kvs)
		m.kvs = append(m.kvs, KV{Key: key, Value: v, Offset: at})
	}
	return nil
}

// value reads one value of type t (already checked valid); depth counts
// the arrays it is nested in.
func (p *parser) value(t ValueType, depth int) (Value, error) {
	switch t {
	case TypeString:
		s, err := p.str("value", MaxStringLen)
		return String(s), err
	case TypeArray:
		a, err := p.array(depth + 1)
		return ArrayValue(a), err
	}
	at := p.off
	b, err := p.take(int64(t.fixedSize()), "value")
	if err != nil {
		return Value{}, err
	}
	v := Value{typ: t}
	switch len(b) {
	case 1:
		v.bits = uint64(b[0])
		if t == TypeBool && b[0] > 1 {
			return Value{}, p.errAt(at, "value", nil, "bool byte is %d, not 0 or 1", b[0])
		}
	case 2:
		v.bits = uint64(binary.LittleEndian.Uint16(b))
	case 4:
		v.bits = uint64(binary.LittleEndian.Uint32(b))
	case 8:
		v.bits = binary.LittleEndian.Uint64(b)
	}
	return v, nil
}

func (p *parser) array(depth int) (Array, error) {
	at := p.off
	if depth > MaxNesting {
		return Array{}, p.errAt(at, "array", nil, "arrays are nested more than %d deep", MaxNesting)
	}
	et, err := p.u32("array element type")
	if err != nil {
		return Array{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Array{}, p.errAt(at, "array element type", nil, "unknown value type %d (the spec has 0…12)", et)
	}
	n, err := p.u64("array length")
	if err != nil {
		return Array{}, err
	}
	if n > MaxArrayLen {
		return Array{}, p.errAt(at+4, "array length", nil, "%d elements exceed the limit of %d", n, MaxArrayLen)
	}
	if least := elem.minSize(); n > uint64(p.left())/uint64(least) {
		return Array{}, p.errAt(at+4, "array length", io.ErrUnexpectedEOF, "the file is truncated: %d elements of %v need at least %d bytes each, %d bytes are left of %d", n, elem, least, p.left(), p.src.size)
	}
	count := int(n)
	if size := elem.fixedSize(); size > 0 {
		// The whole array is in the file (checked above): decode it at once.
		b, err := p.take(int64(count*size), "array elements")
		if err != nil {
			return Array{}, err
		}
		return decodeFixed(elem, b, count, func(i int) error {
			p.idx = append(p.idx, i)
			defer func() { p.idx = p.idx[:len(p.idx)-1] }()
			return p.errAt(at+12+int64(i), "", nil, "bool byte is %d, not 0 or 1", b[i])
		})
	}
	// Strings: the file can hold count lengths (checked above), so the
	// slice costs at most twice the bytes left, and a false count ends the
	// parse before anything else is allocated. Arrays of arrays grow only
	// as elements are read: each level preallocating its count before its
	// first element (the next level) is read would multiply a false count
	// by the nesting depth.
	p.idx = append(p.idx, 0)
	defer func() { p.idx = p.idx[:len(p.idx)-1] }()
	k := len(p.idx) - 1
	switch elem {
	case TypeString:
		xs := make([]string, 0, count)
		for i := range count {
			p.idx[k] = i
			s, err := p.str("value", MaxStringLen)
			if err != nil {
				return Array{}, err
			}
			xs = append(xs, s)
		}
		return Array{Elem: elem, data: xs}, nil
	default: // TypeArray
		var xs []Array
		for i := range count {
			p.idx[k] = i
			a, err := p.array(depth + 1)
			if err != nil {
				return Array{}, err
			}
			xs = append(xs, a)
		}
		if xs == nil {
			xs = []Array{}
		}
		return Array{Elem: elem, data: xs}, nil
	}
}

// decodeEach decodes n elements of size bytes each from b with one.
func decodeEach[T any](b []byte, n, size int, one func([]byte) T) []T {
	xs := make([]T, n)
	for i := range xs {
		xs[i] = one(b[size*i:])
	}
	return xs
}

// decodeFixed decodes n little-endian elements of a fixed-size type; badBool
// makes the error for a bool byte other than 0 or 1 at element i.
func decodeFixed(t ValueType, b []byte, n int, badBool func(i int) error) (Array, error) {
	le := binary.LittleEndian
	var data any
	switch t {
	case TypeUint8:
		data = slices.Clone(b)
	case TypeInt8:
		xs := make([]int8, n)
		for i := range xs {
			xs[i] = int8(b[i])
		}
		data = xs
	case TypeBool:
		xs := make([]bool, n)
		for i := range xs {
			if b[i] > 1 {
				return Array{}, badBool(i)
			}
			xs[i] = b[i] == 1
		}
		data = xs
	case TypeUint16:
		data = decodeEach(b, n, 2, func(p []byte) uint16 { return le.Uint16(p) })
	case TypeInt16:
		data = decodeEach(b, n, 2, func(p []byte) int16 { return int16(le.Uint16(p)) })
	case TypeUint32:
		data = decodeEach(b, n, 4, le.Uint32)
	case TypeInt32:
		data = decodeEach(b, n, 4, func(p []byte) int32 { return int32(le.Uint32(p)) })
	case TypeFloat32:
		data = decodeEach(b, n, 4, func(p []byte) float32 { return math.Float32frombits(le.Uint32(p)) })
	case TypeUint64:
		data = decodeEach(b, n, 8, le.Uint64)
	case TypeInt64:
		data = decodeEach(b, n, 8, func(p []byte) int64 { return int64(le.Uint64(p)) })
	case TypeFloat64:
		data = decodeEach(b, n, 8, func(p []byte) float64 { return math.Float64frombits(le.Uint64(p)) })
	}
	return Array{Elem: t, data: data}, nil
}

// alignment reads general.alignment. ggml wants a uint32 power of two,
// the spec a multiple of 8; a file either of them accepts is accepted
// (any integer type, as Candle reads it), up to 2^32−1.
func (p *parser) alignment(f *File) error {
	f.Alignment = DefaultAlignment
	kv, err := f.Metadata.lookup(AlignmentKey)
	if err != nil {
		return nil
	}
	p.what = fmt.Sprintf("metadata key %q", AlignmentKey)
	p.idx = p.idx[:0]
	a, err := kv.Value.AsUint()
	if err != nil {
		return p.errAt(kv.Offset, "", nil, "%s", strings.TrimPrefix(err.Error(), "gguf: "))
	}
	if a == 0 || a > math.MaxUint32 || (bits.OnesCount64(a) != 1 && a%8 != 0) {
		return p.errAt(kv.Offset, "", nil, "alignment %d is neither a power of two (as ggml requires) nor a positive multiple of 8 (as the spec says) up to 2^32-1", a)
	}
	f.Alignment = int64(a)
	return nil
}

func (p *parser) tensorInfo(i int, seen map[string]int) (TensorInfo, error) {
	t := TensorInfo{InfoOffset: p.off}
	p.what = fmt.Sprintf("tensor[%d]", i)
	p.idx = p.idx[:0]
	name, err := p.str("name", MaxNameLen)
	if err != nil {
		return t, err
	}
	t.Name = name
	p.what = fmt.Sprintf("tensor[%d] %q", i, name)
	if _, dup := seen[name]; dup {
		return t, p.errAt(t.InfoOffset, "name", nil, "duplicate tensor name")
	}
	at := p.off
	nd, err := p.u32("n_dimensions")
	if err != nil {
		return t, err
	}
	if nd > MaxDims {
		return t, p.errAt(at, "n_dimensions", nil, "%d dimensions, more than the %d ggml allows", nd, MaxDims)
	}
	t.Dims = make([]int64, nd)
	// Every dim must fit an int (Shape) and the element count an int64;
	// ggml allows a dim of 0 (an empty tensor), so the overflow check
	// multiplies the others as if it were 1.
	prod := uint64(1)
	for j := range t.Dims {
		at := p.off
		name := "dims[" + strconv.Itoa(j) + "]"
		d, err := p.u64(name)
		if err != nil {
			return t, err
		}
		if d > math.MaxInt {
			return t, p.errAt(at, name, nil, "dimension %d is negative as an int64 or too large", d)
		}
		t.Dims[j] = int64(d)
		if d > 0 {
			hi, lo := bits.Mul64(prod, d)
			if hi != 0 || lo > math.MaxInt64 {
				return t, p.errAt(at, name, nil, "dims %v: the element count overflows int64", t.Dims[:j+1])
			}
			prod = lo
		}
	}
	at = p.off
	typ, err := p.u32("type")
	if err != nil {
		return t, err
	}
	t.Type = quant.Type(typ)
	tr, ok := t.Type.Traits()
	if !ok {
		return t, p.errAt(at, "type", nil, "unknown ggml type %d", typ)
	}
	row := int64(1) // elements of the innermost axis
	if nd > 0 {
		row = t.Dims[0]
	}
	if row%int64(tr.Block) != 0 {
		return t, p.errAt(at, "type", nil, "dims %v: rows of %d elements are not a whole number of %d-element %v blocks", t.Dims, row, tr.Block, t.Type)
	}
	// Bytes = blocks × block size, multiplied with an overflow check
	// (as quant.Type.RowBytes also does).
	hi, lo := bits.Mul64(uint64(t.Elements()/int64(tr.Block)), uint64(tr.Size))
	if hi != 0 || lo > math.MaxInt64 {
		return t, p.errAt(at, "type", nil, "dims %v of %v: the size in bytes overflows int64", t.Dims, t.Type)
	}
	t.Size = int64(lo)
	t.offsetField = p.off
	off, err := p.u64("offset")
	if err != nil {
		return t, err
	}
	if off > math.MaxInt64 {
		return t, p.errAt(t.offsetField, "offset", nil, "offset %d is past any file", off)
	}
	t.Offset = int64(off)
	return t, nil
}

// placeTensors checks each tensor's offset (aligned, inside the file) and
// that no two tensors' bytes overlap. ggml's own reader further insists the
// tensors be packed in file order; other writers need not, so this does not.
func (p *parser) placeTensors(f *File) error {
	data := f.Size - f.DataOffset
	order := make([]int, 0, len(f.Tensors))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		p.what = fmt.Sprintf("tensor[%d] %q", i, t.Name)
		if t.Offset%f.Alignment != 0 {
			return p.errAt(t.offsetField, "offset", nil, "offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
		}
		if t.Offset > data || t.Size > data-t.Offset {
			return p.errAt(t.offsetField, "offset", io.ErrUnexpectedEOF, "%d bytes at data offset %d (file offset %d) run past the end of the file (%d bytes; data section from %d)", t.Size, t.Offset, f.DataOffset+t.Offset, f.Size, f.DataOffset)
		}
		t.FileOffset = f.DataOffset + t.Offset
		if t.Size > 0 {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(f.Tensors[a].Offset, f.Tensors[b].Offset) })
	for k := 1; k < len(order); k++ {
		prev, t := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if t.Offset < prev.Offset+prev.Size {
			p.what = fmt.Sprintf("tensor[%d] %q", order[k], t.Name)
			return p.errAt(t.offsetField, "offset", nil, "its data [%d, %d) overlaps tensor %q [%d, %d) (offsets in the data section)", t.Offset, t.Offset+t.Size, prev.Name, prev.Offset, prev.Offset+prev.Size)
		}
	}
	return nil
}

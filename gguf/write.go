package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"

	"github.com/loomgraph/loom/quant"
)

// Writer builds a GGUF version 3 file: metadata entries and tensors are
// added in the order they will appear, then WriteTo or WriteFile writes
// them out. Tensor data is kept by reference, not copied, until then;
// AddTensorFunc instead takes a function that produces a tensor's bytes
// while the file is written, so that a converter need not hold every
// tensor's output at once.
//
// The alignment is the general.alignment entry if one is Set (it must be
// a uint32 power of two ≥ 8, so that both ggml's reader and the spec's
// "multiple of 8" accept it), else 32. Tensors are laid out in the order
// added, each at the next multiple of the alignment, with zero padding
// between them and after the last, as ggml lays them out (its reader
// insists on that packing).
//
// Everything a Writer accepts, Read reads back: the writer applies the
// reader's limits, and stricter ones where llama.cpp is stricter than the
// spec (tensor names of at most 63 bytes; ASCII keys).
type Writer struct {
	kvs     []KV
	keys    map[string]bool
	align   int64
	tensors []wtensor
	names   map[string]bool
}

type wtensor struct {
	name string
	typ  quant.Type
	dims []int64 // innermost first, as stored
	size int64   // bytes of data
	data []byte
	fill func() ([]byte, error) // AddTensorFunc's producer; data is nil then
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{keys: map[string]bool{}, names: map[string]bool{}, align: DefaultAlignment}
}

// Set adds the metadata entry key = v. The key must be non-empty ASCII of
// at most 65535 bytes and not already set; strings and arrays must be
// within the reader's limits.
func (w *Writer) Set(key string, v Value) error {
	if key == "" {
		return errors.New("gguf: Writer.Set: empty key")
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("gguf: Writer.Set: key of %d bytes exceeds the limit of %d", len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] >= 0x80 {
			return fmt.Errorf("gguf: Writer.Set: key %q: byte %d is not ASCII (the spec wants ASCII keys)", key, i)
		}
	}
	if w.keys[key] {
		return fmt.Errorf("gguf: Writer.Set: key %q is already set", key)
	}
	if err := checkValue(v, 0); err != nil {
		return fmt.Errorf("gguf: Writer.Set: key %q: %w", key, err)
	}
	if key == AlignmentKey {
		a, err := alignmentOf(v)
		if err != nil {
			return fmt.Errorf("gguf: Writer.Set: key %q: %w", key, err)
		}
		if len(w.tensors) > 0 {
			return fmt.Errorf("gguf: Writer.Set: key %q: set the alignment before adding tensors", key)
		}
		w.align = a
	}
	w.keys[key] = true
	w.kvs = append(w.kvs, KV{Key: key, Value: v})
	return nil
}

func alignmentOf(v Value) (int64, error) {
	if v.Type() != TypeUint32 {
		return 0, fmt.Errorf("the alignment must be a uint32 (ggml refuses other types), not %s", v.TypeName())
	}
	a := v.bits
	if a < 8 || bits.OnesCount64(a) != 1 {
		return 0, fmt.Errorf("alignment %d is not a power of two ≥ 8", a)
	}
	return int64(a), nil
}

// checkValue checks v against the reader's limits; depth counts the arrays
// v is inside.
func checkValue(v Value, depth int) error {
	switch v.typ {
	case TypeString:
		if len(v.str) > MaxStringLen {
			return fmt.Errorf("string of %d bytes exceeds the limit of %d", len(v.str), MaxStringLen)
		}
	case TypeArray:
		return checkArray(v.arr, depth+1)
	}
	return nil
}

func checkArray(a Array, depth int) error {
	if depth > MaxNesting {
		return fmt.Errorf("arrays are nested more than %d deep", MaxNesting)
	}
	if !a.Elem.valid() {
		return fmt.Errorf("array of unknown value type %d", uint32(a.Elem))
	}
	if n := a.Len(); n > MaxArrayLen {
		return fmt.Errorf("array of %d elements exceeds the limit of %d", n, MaxArrayLen)
	}
	switch xs := a.data.(type) {
	case []string:
		for i, s := range xs {
			if len(s) > MaxStringLen {
				return fmt.Errorf("element %d: string of %d bytes exceeds the limit of %d", i, len(s), MaxStringLen)
			}
		}
	case []Array:
		for i, x := range xs {
			if err := checkArray(x, depth+1); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	}
	return nil
}

// AddTensor adds a tensor of type t whose row-major shape (outermost
// first, as Loom shapes are) is shape; it is stored innermost first, as
// GGUF requires. data holds the tensor's bytes in t's layout (the caller
// quantizes) and must be exactly as long as the shape needs; it is kept,
// not copied, until the file is written. At most 4 dims; the last
// (innermost) must be a whole number of t's blocks.
func (w *Writer) AddTensor(name string, t quant.Type, shape []int, data []byte) error {
	wt, err := w.checkTensor("AddTensor", name, t, shape)
	if err != nil {
		return err
	}
	if int64(len(data)) != wt.size {
		return fmt.Errorf("gguf: Writer.AddTensor %q (%v, shape %v): %d bytes of data, the shape needs %d", name, t, shape, len(data), wt.size)
	}
	wt.data = data
	w.names[name] = true
	w.tensors = append(w.tensors, wt)
	return nil
}

// AddTensorFunc adds a tensor as AddTensor does, except that its bytes
// come from data, which WriteTo calls once per write, in tensor order,
// just before the tensor's bytes go out. data must return exactly the
// bytes the shape needs (WriteTo fails otherwise, naming the tensor); the
// slice is written and dropped before the next tensor's data is called,
// so a caller may return the same buffer every time. A converter that
// quantizes inside data holds one tensor's output at a time rather than
// the whole file's. An error from data stops the write and is returned
// wrapped.
func (w *Writer) AddTensorFunc(name string, t quant.Type, shape []int, data func() ([]byte, error)) error {
	wt, err := w.checkTensor("AddTensorFunc", name, t, shape)
	if err != nil {
		return err
	}
	if data == nil {
		return fmt.Errorf("gguf: Writer.AddTensorFunc %q (%v, shape %v): nil data function", name, t, shape)
	}
	wt.fill = data
	w.names[name] = true
	w.tensors = append(w.tensors, wt)
	return nil
}

// checkTensor checks a tensor's name, type and shape for the method op and
// returns its entry with the dims (innermost first) and size filled in.
func (w *Writer) checkTensor(op, name string, t quant.Type, shape []int) (wtensor, error) {
	fail := func(format string, a ...any) (wtensor, error) {
		return wtensor{}, fmt.Errorf("gguf: Writer.%s %q (%v, shape %v): %s", op, name, t, shape, fmt.Sprintf(format, a...))
	}
	switch {
	case name == "":
		return fail("empty name")
	case len(name) >= MaxNameLen:
		return fail("name of %d bytes; ggml takes at most %d", len(name), MaxNameLen-1)
	case w.names[name]:
		return fail("a tensor of that name was already added")
	case !t.Known():
		return fail("unknown ggml type")
	case len(shape) > MaxDims:
		return fail("%d dims; GGUF allows at most %d", len(shape), MaxDims)
	}
	dims := make([]int64, len(shape))
	prod := uint64(1)
	for i, d := range shape {
		if d < 0 {
			return fail("dim %d is negative", i)
		}
		dims[len(shape)-1-i] = int64(d)
		if d > 0 {
			hi, lo := bits.Mul64(prod, uint64(d))
			if hi != 0 || lo > math.MaxInt64 {
				return fail("the element count overflows int64")
			}
			prod = lo
		}
	}
	info := TensorInfo{Name: name, Type: t, Dims: dims}
	row := int64(1)
	if len(dims) > 0 {
		row = dims[0]
	}
	tr, _ := t.Traits()
	if row%int64(tr.Block) != 0 {
		return fail("rows of %d elements are not a whole number of %d-element blocks", row, tr.Block)
	}
	hi, lo := bits.Mul64(uint64(info.Elements()/int64(tr.Block)), uint64(tr.Size))
	if hi != 0 || lo > math.MaxInt64 {
		return fail("the size in bytes overflows int64")
	}
	return wtensor{name: name, typ: t, dims: dims, size: int64(lo)}, nil
}

// WriteTo writes the file to out and returns the bytes written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	e := &encoder{w: bufio.NewWriterSize(out, 1<<20)}
	e.bytes([]byte(Magic))
	e.u32(Version)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.typ))
		e.value(kv.Value)
	}
	var off int64
	for _, t := range w.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			e.u64(uint64(d))
		}
		e.u32(uint32(t.typ))
		e.u64(uint64(off))
		off = alignUp(off+t.size, w.align)
	}
	e.pad(w.align) // as ggml does, even with no tensors
	for _, t := range w.tensors {
		data := t.data
		if t.fill != nil && e.err == nil {
			data, e.err = t.fill()
			if e.err != nil {
				e.err = fmt.Errorf("tensor %q: %w", t.name, e.err)
			} else if int64(len(data)) != t.size {
				info := TensorInfo{Dims: t.dims}
				e.err = fmt.Errorf("tensor %q (%v, shape %v): the data function returned %d bytes, the shape needs %d", t.name, t.typ, info.Shape(), len(data), t.size)
			}
		}
		e.bytes(data)
		e.pad(w.align)
	}
	if e.err == nil {
		e.err = e.w.Flush()
	}
	return e.n, e.err
}

// WriteFile writes the file to path (created or truncated); on an error
// the partial file is removed.
func (w *Writer) WriteFile(path string) error {
	fd, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	_, err = w.WriteTo(fd)
	if cerr := fd.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	return nil
}

// encoder writes little-endian fields, keeping the first error and the
// byte count (which the padding needs).
type encoder struct {
	w       *bufio.Writer
	n       int64
	err     error
	scratch [8]byte
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	var n int
	n, e.err = e.w.Write(b)
	e.n += int64(n)
}

func (e *encoder) u8(v uint8) { e.scratch[0] = v; e.bytes(e.scratch[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.scratch[:], v)
	e.bytes(e.scratch[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.scratch[:], v)
	e.bytes(e.scratch[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.scratch[:], v)
	e.bytes(e.scratch[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		var n int
		n, e.err = e.w.WriteString(s)
		e.n += int64(n)
	}
}

var zeros [256]byte

func (e *encoder) pad(align int64) {
	for k := (align - e.n%align) % align; k > 0; {
		m := min(k, int64(len(zeros)))
		e.bytes(zeros[:m])
		k -= m
	}
}

// value writes v's payload (its type was written by the caller).
func (e *encoder) value(v Value) {
	switch v.typ {
	case TypeString:
		e.str(v.str)
	case TypeArray:
		e.array(v.arr)
	default:
		e.fixed(v.typ, v.bits)
	}
}

func (e *encoder) fixed(t ValueType, b uint64) {
	switch t.fixedSize() {
	case 1:
		e.u8(uint8(b))
	case 2:
		e.u16(uint16(b))
	case 4:
		e.u32(uint32(b))
	case 8:
		e.u64(b)
	}
}

func (e *encoder) array(a Array) {
	e.u32(uint32(a.Elem))
	e.u64(uint64(a.Len()))
	switch xs := a.data.(type) {
	case []uint8:
		e.bytes(xs)
	case []string:
		for _, s := range xs {
			e.str(s)
		}
	case []Array:
		for _, x := range xs {
			e.array(x)
		}
	default:
		for i := range a.Len() {
			v := a.Index(i)
			e.fixed(v.typ, v.bits)
		}
	}
}

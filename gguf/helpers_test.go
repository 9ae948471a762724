package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loomgraph/loom/quant"
)

// raw assembles GGUF bytes field by field, straight from the spec and with
// no help from the package, so tests can make files the Writer never
// would (malformed ones included) and check the Writer's bytes against it.
type raw struct{ b []byte }

func (r *raw) pos() int64      { return int64(len(r.b)) }
func (r *raw) bytes(p ...byte) { r.b = append(r.b, p...) }
func (r *raw) u8(v uint8)      { r.b = append(r.b, v) }
func (r *raw) u16(v uint16)    { r.b = binary.LittleEndian.AppendUint16(r.b, v) }
func (r *raw) u32(v uint32)    { r.b = binary.LittleEndian.AppendUint32(r.b, v) }
func (r *raw) u64(v uint64)    { r.b = binary.LittleEndian.AppendUint64(r.b, v) }
func (r *raw) str(s string)    { r.u64(uint64(len(s))); r.b = append(r.b, s...) }
func (r *raw) pad(align int)   { r.zeros((align - len(r.b)%align) % align) }
func (r *raw) zeros(n int)     { r.b = append(r.b, make([]byte, n)...) }
func (r *raw) header(v uint32, tensors, kvs uint64) {
	r.bytes('G', 'G', 'U', 'F')
	r.u32(v)
	r.u64(tensors)
	r.u64(kvs)
}

// tensorInfo appends one tensor info; dims innermost first.
func (r *raw) tensorInfo(name string, t quant.Type, dims []uint64, off uint64) {
	r.str(name)
	r.u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	r.u32(uint32(t))
	r.u64(off)
}

// readBoth parses b through Read (io.ReaderAt) and through the in-memory
// path Open uses, and fails unless they agree.
func readBoth(t *testing.T, b []byte) (*File, error) {
	t.Helper()
	f1, err1 := Read(bytes.NewReader(b), int64(len(b)))
	f2, err2 := parseBytes(b, "")
	switch {
	case (err1 == nil) != (err2 == nil):
		t.Fatalf("Read and the in-memory parser disagree: %v / %v", err1, err2)
	case err1 != nil:
		if err1.Error() != err2.Error() {
			t.Fatalf("Read and the in-memory parser disagree:\n%v\n%v", err1, err2)
		}
		var fe *FormatError
		if !errors.As(err1, &fe) {
			t.Fatalf("error %v (%T) is not a *FormatError", err1, err1)
		}
		return nil, err1
	}
	sameFile(t, f1, f2)
	return f2, nil
}

// sameFile fails unless a and b hold the same header, metadata, tensor
// infos and tensor bytes.
func sameFile(t *testing.T, a, b *File) {
	t.Helper()
	if a.Version != b.Version || a.Alignment != b.Alignment || a.DataOffset != b.DataOffset || a.Size != b.Size {
		t.Fatalf("headers differ: v%d align %d data %d size %d / v%d align %d data %d size %d",
			a.Version, a.Alignment, a.DataOffset, a.Size, b.Version, b.Alignment, b.DataOffset, b.Size)
	}
	sameMetadata(t, a.Metadata.KVs(), b.Metadata.KVs(), true)
	if len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("%d tensors / %d", len(a.Tensors), len(b.Tensors))
	}
	for i := range a.Tensors {
		x, y := &a.Tensors[i], &b.Tensors[i]
		if x.Name != y.Name || x.Type != y.Type || !slices.Equal(x.Dims, y.Dims) || x.Offset != y.Offset || x.FileOffset != y.FileOffset || x.Size != y.Size || x.InfoOffset != y.InfoOffset {
			t.Fatalf("tensor %d differs: %+v / %+v", i, *x, *y)
		}
		dx, err := a.TensorData(x)
		if err != nil {
			t.Fatal(err)
		}
		dy, err := b.TensorData(y)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dx, dy) {
			t.Fatalf("tensor %q: data differs", x.Name)
		}
	}
}

func sameMetadata(t *testing.T, a, b []KV, offsets bool) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d metadata entries / %d", len(a), len(b))
	}
	for i := range a {
		if a[i].Key != b[i].Key || !a[i].Value.Equal(b[i].Value) || (offsets && a[i].Offset != b[i].Offset) {
			t.Fatalf("metadata entry %d differs: %s %s = %v (offset %d) / %s %s = %v (offset %d)", i,
				a[i].Key, a[i].Value.TypeName(), a[i].Value, a[i].Offset, b[i].Key, b[i].Value.TypeName(), b[i].Value, b[i].Offset)
		}
	}
}

// allValues is one metadata entry of every value type, with edge values:
// integer extremes, NaN/-0/Inf floats, empty and non-ASCII strings, empty
// arrays, arrays of every element type and arrays of arrays that differ in
// element type and length.
func allValues() []KV {
	nested := NewArray([]Array{
		NewArray([]uint8{1, 2, 3}),
		NewArray([]string{"a", ""}),
		NewArray([]Array{NewArray([]float64{math.Pi}), NewArray([]int64{})}),
		{Elem: TypeBool}, // empty array of bool, built without NewArray
	})
	long := make([]int32, 1000)
	for i := range long {
		long[i] = int32(i*7919 - 3_000_000)
	}
	return []KV{
		{Key: "general.architecture", Value: String("llama")},
		{Key: "t.u8", Value: Uint8(math.MaxUint8)},
		{Key: "t.i8", Value: Int8(math.MinInt8)},
		{Key: "t.u16", Value: Uint16(math.MaxUint16)},
		{Key: "t.i16", Value: Int16(math.MinInt16)},
		{Key: "t.u32", Value: Uint32(math.MaxUint32)},
		{Key: "t.i32", Value: Int32(math.MinInt32)},
		{Key: "t.f32", Value: Float32(-0.0001)},
		{Key: "t.f32_nan", Value: Float32(float32(math.NaN()))},
		{Key: "t.f32_neg_zero", Value: Float32(float32(math.Copysign(0, -1)))},
		{Key: "t.bool_true", Value: Bool(true)},
		{Key: "t.bool_false", Value: Bool(false)},
		{Key: "t.string_empty", Value: String("")},
		{Key: "t.string_utf8", Value: String("héllo, 世界 \x00 \n \"q\"")},
		{Key: "t.u64", Value: Uint64(math.MaxUint64)},
		{Key: "t.i64", Value: Int64(math.MinInt64)},
		{Key: "t.f64", Value: Float64(math.Inf(-1))},
		{Key: "a.u8", Value: ArrayValue(NewArray([]uint8{0, 255}))},
		{Key: "a.i8", Value: ArrayValue(NewArray([]int8{-128, 127}))},
		{Key: "a.u16", Value: ArrayValue(NewArray([]uint16{0, 65535}))},
		{Key: "a.i16", Value: ArrayValue(NewArray([]int16{-32768, 32767}))},
		{Key: "a.u32", Value: ArrayValue(NewArray([]uint32{1, 4294967295}))},
		{Key: "a.i32", Value: ArrayValue(NewArray(long))},
		{Key: "a.f32", Value: ArrayValue(NewArray([]float32{1.5, float32(math.Inf(1))}))},
		{Key: "a.bool", Value: ArrayValue(NewArray([]bool{true, false, true}))},
		{Key: "a.string", Value: ArrayValue(NewArray([]string{"<unk>", "", "▁the"}))},
		{Key: "a.u64", Value: ArrayValue(NewArray([]uint64{math.MaxUint64}))},
		{Key: "a.i64", Value: ArrayValue(NewArray([]int64{math.MinInt64, -1}))},
		{Key: "a.f64", Value: ArrayValue(NewArray([]float64{math.SmallestNonzeroFloat64, -2.5}))},
		{Key: "a.empty", Value: ArrayValue(NewArray([]string{}))},
		{Key: "a.nested", Value: ArrayValue(nested)},
	}
}

// tensorCase is a tensor for the round trips: row-major shape, random bytes.
type tensorCase struct {
	name  string
	typ   quant.Type
	shape []int
}

var tensorCases = []tensorCase{
	{"f32.matrix", quant.F32, []int{3, 5}},
	{"f16.matrix", quant.F16, []int{4, 2}},
	{"bf16.vector", quant.BF16, []int{7}},
	{"q4_0.weight", quant.Q4_0, []int{3, 64}},
	{"q8_0.weight", quant.Q8_0, []int{32}},
	{"q4_k.weight", quant.Q4_K, []int{2, 256}},
	{"q6_k.4d", quant.Q6_K, []int{2, 1, 3, 256}},
	{"i8.3d", quant.I8, []int{2, 3, 5}},
	{"f64.scalar", quant.F64, []int{}},
	{"q4_0.empty", quant.Q4_0, []int{0, 32}},
	{"iq4_xs.weight", quant.IQ4_XS, []int{256}},
}

func tensorBytes(t *testing.T, rng *rand.Rand, c tensorCase) []byte {
	t.Helper()
	n := int64(1)
	for _, d := range c.shape {
		n *= int64(d)
	}
	size, err := c.typ.RowBytes(n)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func writeTemp(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

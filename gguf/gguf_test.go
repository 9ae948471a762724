package gguf

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/quant"
)

// TestSpecLayout checks the Writer's bytes against a file assembled field
// by field from the spec (raw), and the reader on those bytes, for
// versions 2 and 3.
func TestSpecLayout(t *testing.T) {
	data := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24} // f32 [2][3]
	half := []byte{0xaa, 0xbb, 0xcc, 0xdd}                                                                // f16 [2]
	build := func(version uint32) []byte {
		var r raw
		r.header(version, 2, 3)
		r.str("general.architecture")
		r.u32(uint32(TypeString))
		r.str("test")
		r.str(AlignmentKey)
		r.u32(uint32(TypeUint32))
		r.u32(16)
		r.str("a")
		r.u32(uint32(TypeArray))
		r.u32(uint32(TypeArray))
		r.u64(2)
		r.u32(uint32(TypeInt16))
		r.u64(1)
		r.u16(0xfffe) // -2
		r.u32(uint32(TypeBool))
		r.u64(0)
		r.tensorInfo("w", quant.F32, []uint64{3, 2}, 0) // row-major [2, 3]
		r.tensorInfo("h", quant.F16, []uint64{2}, 32)   // 24 bytes padded to 32
		r.pad(16)
		r.bytes(data...)
		r.pad(16)
		r.bytes(half...)
		r.pad(16)
		return r.b
	}
	w := NewWriter()
	must(t, w.Set("general.architecture", String("test")))
	must(t, w.Set(AlignmentKey, Uint32(16)))
	must(t, w.Set("a", ArrayValue(NewArray([]Array{NewArray([]int16{-2}), {Elem: TypeBool}}))))
	must(t, w.AddTensor("w", quant.F32, []int{2, 3}, data))
	must(t, w.AddTensor("h", quant.F16, []int{2}, half))
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo: %d, %v (wrote %d)", n, err, buf.Len())
	}
	if want := build(3); !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("Writer's bytes differ from the spec layout:\n got %x\nwant %x", buf.Bytes(), want)
	}
	for _, version := range []uint32{2, 3} {
		f, err := readBoth(t, build(version))
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		if f.Version != version || f.Alignment != 16 || f.DataOffset%16 != 0 || len(f.Tensors) != 2 {
			t.Fatalf("v%d: version %d alignment %d data offset %d, %d tensors", version, f.Version, f.Alignment, f.DataOffset, len(f.Tensors))
		}
		wt, err := f.Tensor("w")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(wt.Dims, []int64{3, 2}) || !slices.Equal(wt.Shape(), []int{2, 3}) || wt.Elements() != 6 || wt.Size != 24 || wt.Type != quant.F32 {
			t.Errorf("w: dims %v shape %v elements %d size %d type %v", wt.Dims, wt.Shape(), wt.Elements(), wt.Size, wt.Type)
		}
		if got, _ := f.Data("w"); !bytes.Equal(got, data) {
			t.Errorf("w data %v", got)
		}
		ht, _ := f.Tensor("h")
		if got, _ := f.Data("h"); !bytes.Equal(got, half) || ht.Offset != 32 || ht.FileOffset != f.DataOffset+32 {
			t.Errorf("h: data %v offset %d file offset %d (data section at %d)", got, ht.Offset, ht.FileOffset, f.DataOffset)
		}
		a, err := f.Metadata.Array("a")
		if err != nil || a.Elem != TypeArray || a.Len() != 2 {
			t.Fatalf("a: %v, %v", a, err)
		}
		inner, _ := Elems[Array](a)
		if xs, err := Elems[int16](inner[0]); err != nil || len(xs) != 1 || xs[0] != -2 {
			t.Errorf("a[0] = %v, %v", xs, err)
		}
		if inner[1].Elem != TypeBool || inner[1].Len() != 0 {
			t.Errorf("a[1] = %v of %v", inner[1], inner[1].Elem)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRoundTrip writes every value type and tensors of many types at
// several alignments, reads them back through Read, the in-memory parser
// and Open (mmap), and checks every value, info, byte and padding.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 4))
	for _, align := range []uint32{0, 8, 32, 64, 256, 4096} { // 0: no key, default 32
		w := NewWriter()
		kvs := allValues()
		if align != 0 {
			kvs = append(kvs[:1], append([]KV{{Key: AlignmentKey, Value: Uint32(align)}}, kvs[1:]...)...)
		}
		for _, kv := range kvs {
			must(t, w.Set(kv.Key, kv.Value))
		}
		datas := map[string][]byte{}
		for _, c := range tensorCases {
			datas[c.name] = tensorBytes(t, rng, c)
			must(t, w.AddTensor(c.name, c.typ, c.shape, datas[c.name]))
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		f, err := readBoth(t, b)
		if err != nil {
			t.Fatalf("align %d: %v", align, err)
		}
		path := writeTemp(t, b)
		mf, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sameFile(t, f, mf)
		want := int64(align)
		if align == 0 {
			want = DefaultAlignment
		}
		if f.Version != Version || f.Alignment != want || f.DataOffset%want != 0 || int64(len(b))%want != 0 {
			t.Fatalf("align %d: version %d alignment %d data offset %d size %d", align, f.Version, f.Alignment, f.DataOffset, len(b))
		}
		sameMetadata(t, f.Metadata.KVs(), kvs, false)
		// Every byte outside the tensors' data, after the infos, is padding: zero.
		used := make([]bool, len(b))
		for i, c := range tensorCases {
			ti := &f.Tensors[i]
			if ti.Name != c.name || ti.Type != c.typ || !slices.Equal(ti.Shape(), c.shape) || ti.FileOffset%want != 0 {
				t.Fatalf("align %d: tensor %d is %q %v shape %v at %d; want %q %v %v", align, i, ti.Name, ti.Type, ti.Shape(), ti.FileOffset, c.name, c.typ, c.shape)
			}
			got, err := mf.Data(c.name)
			if err != nil || !bytes.Equal(got, datas[c.name]) {
				t.Fatalf("align %d: tensor %q: data differs (%v)", align, c.name, err)
			}
			if cap(got) != len(got) {
				t.Errorf("tensor %q: Data's slice has capacity %d beyond its length %d: an append would scribble on the next tensor", c.name, cap(got), len(got))
			}
			for k := ti.FileOffset; k < ti.FileOffset+ti.Size; k++ {
				used[k] = true
			}
		}
		last := &f.Tensors[len(f.Tensors)-1]
		infosEnd := last.InfoOffset + 8 + int64(len(last.Name)) + 4 + 8*int64(len(last.Dims)) + 4 + 8
		for k := infosEnd; k < int64(len(b)); k++ {
			if !used[k] && b[k] != 0 {
				t.Fatalf("align %d: padding byte at %d is %#x", align, k, b[k])
			}
		}
		must(t, mf.Close())
		if _, err := mf.Data(tensorCases[0].name); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("Data after Close: %v", err)
		}
		must(t, mf.Close())
	}
}

func TestMetadataAccessors(t *testing.T) {
	w := NewWriter()
	for _, kv := range []KV{
		{Key: "n.u8", Value: Uint8(7)}, {Key: "n.u16", Value: Uint16(7)}, {Key: "n.u32", Value: Uint32(7)}, {Key: "n.u64", Value: Uint64(7)}, {Key: "n.i32", Value: Int32(7)},
		{Key: "n.neg", Value: Int32(-3)}, {Key: "n.big", Value: Uint64(math.MaxUint64)}, {Key: "s", Value: String("x")}, {Key: "f32", Value: Float32(0.5)},
		{Key: "f64", Value: Float64(0.25)}, {Key: "b", Value: Bool(true)}, {Key: "toks", Value: ArrayValue(NewArray([]string{"a", "b"}))},
		{Key: "ids", Value: ArrayValue(NewArray([]uint16{1, 2}))},
	} {
		must(t, w.Set(kv.Key, kv.Value))
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := readBoth(t, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	m := &f.Metadata
	for _, k := range []string{"n.u8", "n.u16", "n.u32", "n.u64", "n.i32"} {
		if v, err := m.Uint(k); err != nil || v != 7 {
			t.Errorf("Uint(%s) = %d, %v", k, v, err)
		}
		if v, err := m.Int(k); err != nil || v != 7 {
			t.Errorf("Int(%s) = %d, %v", k, v, err)
		}
	}
	if v, err := m.Int("n.neg"); err != nil || v != -3 {
		t.Errorf("Int(n.neg) = %d, %v", v, err)
	}
	if v, err := m.Uint("n.big"); err != nil || v != math.MaxUint64 {
		t.Errorf("Uint(n.big) = %d, %v", v, err)
	}
	if v, err := m.Float("f32"); err != nil || v != 0.5 {
		t.Errorf("Float(f32) = %g, %v", v, err)
	}
	if v, err := m.Float("f64"); err != nil || v != 0.25 {
		t.Errorf("Float(f64) = %g, %v", v, err)
	}
	if v, err := m.String("s"); err != nil || v != "x" {
		t.Errorf("String(s) = %q, %v", v, err)
	}
	if v, err := m.Bool("b"); err != nil || !v {
		t.Errorf("Bool(b) = %v, %v", v, err)
	}
	if v, err := m.Strings("toks"); err != nil || !slices.Equal(v, []string{"a", "b"}) {
		t.Errorf("Strings(toks) = %v, %v", v, err)
	}
	if a, err := m.Array("ids"); err != nil {
		t.Error(err)
	} else if v, err := a.Ints(); err != nil || !slices.Equal(v, []int64{1, 2}) {
		t.Errorf("ids.Ints() = %v, %v", v, err)
	}
	// Mismatches: errors naming the key, where it is, the type found and
	// what was wanted. "s" starts at 24 + 17 + 19 + 21 + 25 + 21 + 21 + 25
	// (the header and the seven entries before it).
	for _, c := range []struct {
		call func() error
		want string
	}{
		{func() error { _, err := m.Uint("n.neg"); return err }, `"n.neg" (offset`},
		{func() error { _, err := m.Uint("s"); return err }, `"s" (offset 173): value is string, not an integer`},
		{func() error { _, err := m.Int("n.big"); return err }, "does not fit an int64"},
		{func() error { _, err := m.Float("n.u32"); return err }, "value is uint32, not a float"},
		{func() error { _, err := m.String("n.u8"); return err }, "value is uint8, not string"},
		{func() error { _, err := m.Bool("s"); return err }, "value is string, not bool"},
		{func() error { _, err := m.Array("b"); return err }, "value is bool, not an array"},
		{func() error { _, err := m.Strings("ids"); return err }, "array of uint16, not of string"},
		{func() error { _, err := m.Strings("s"); return err }, "not an array"},
		{func() error { _, err := m.Uint("absent"); return err }, `metadata key "absent": not found`},
	} {
		err := c.call()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
	if _, err := m.Float("absent"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing key: %v does not wrap ErrNotFound", err)
	}
	if _, err := f.Tensor("absent"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing tensor: %v does not wrap ErrNotFound", err)
	}
	if _, ok := m.Get("absent"); ok {
		t.Error("Get found an absent key")
	}
}

func TestValueString(t *testing.T) {
	xs := make([]uint32, 20)
	for i := range xs {
		xs[i] = uint32(i)
	}
	for _, c := range []struct {
		v    Value
		want string
	}{
		{Int8(-5), "-5"},
		{Uint64(math.MaxUint64), "18446744073709551615"},
		{Float32(0.1), "0.1"},
		{Float64(1e-300), "1e-300"},
		{Bool(false), "false"},
		{String("a\"b\n"), `"a\"b\n"`},
		{ArrayValue(NewArray(xs)), "[0, 1, 2, 3, 4, 5, 6, 7, ... 12 more]"},
		{ArrayValue(NewArray([]Array{NewArray([]string{"x"}), {Elem: TypeInt8}})), `[["x"], []]`},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%s value formats as %s, want %s", c.v.TypeName(), got, c.want)
		}
	}
	if got := ArrayValue(NewArray(xs)).TypeName(); got != "array[uint32]" {
		t.Errorf("TypeName = %s", got)
	}
}

func TestWriterErrors(t *testing.T) {
	w := NewWriter()
	must(t, w.Set("k", Uint8(1)))
	deep := NewArray([]int8{})
	for range MaxNesting {
		deep = NewArray([]Array{deep})
	}
	for _, c := range []struct {
		key  string
		v    Value
		want string
	}{
		{"", Uint8(0), "empty key"},
		{"k", Uint8(0), `key "k" is already set`},
		{"kéy", Uint8(0), "not ASCII"},
		{strings.Repeat("k", MaxKeyLen+1), Uint8(0), "exceeds the limit"},
		{AlignmentKey, Uint64(32), "must be a uint32"},
		{AlignmentKey, Uint32(4), "not a power of two ≥ 8"},
		{AlignmentKey, Uint32(24), "not a power of two ≥ 8"},
		{"deep", ArrayValue(deep), "nested more than 64 deep"},
		{"bad", ArrayValue(Array{Elem: 13}), "unknown value type 13"},
	} {
		if err := w.Set(c.key, c.v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Set(%.20q, %s): %v, want an error containing %q", c.key, c.v.TypeName(), err, c.want)
		}
	}
	must(t, w.AddTensor("t", quant.F32, []int{2}, make([]byte, 8)))
	if err := w.Set(AlignmentKey, Uint32(64)); err == nil || !strings.Contains(err.Error(), "before adding tensors") {
		t.Errorf("alignment after a tensor: %v", err)
	}
	for _, c := range []struct {
		name  string
		typ   quant.Type
		shape []int
		n     int
		want  string
	}{
		{"", quant.F32, []int{1}, 4, "empty name"},
		{strings.Repeat("n", 64), quant.F32, []int{1}, 4, "ggml takes at most 63"},
		{"t", quant.F32, []int{1}, 4, "already added"},
		{"u", quant.Type(4), []int{1}, 4, "unknown ggml type"},
		{"u", quant.F32, []int{1, 1, 1, 1, 1}, 4, "at most 4"},
		{"u", quant.F32, []int{-1}, 0, "dim 0 is negative"},
		{"u", quant.Q4_0, []int{2, 48}, 0, "rows of 48 elements are not a whole number of 32-element blocks"},
		{"u", quant.Q4_0, []int{2, 64}, 71, "71 bytes of data, the shape needs 72"},
		{"u", quant.I8, []int{math.MaxInt32, math.MaxInt32, 4, math.MaxInt32}, 0, "the element count overflows int64"},
		{"u", quant.F64, []int{math.MaxInt32, math.MaxInt32}, 0, "the size in bytes overflows int64"}, // 2^62 elements, 2^65 bytes
	} {
		err := w.AddTensor(c.name, c.typ, c.shape, make([]byte, c.n))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Writer.AddTensor") {
			t.Errorf("AddTensor(%.20q, %v, %v): %v, want an error containing %q", c.name, c.typ, c.shape, err, c.want)
		}
	}
	// A name of 63 bytes is the longest ggml loads.
	must(t, w.AddTensor(strings.Repeat("n", 63), quant.F32, []int{1}, make([]byte, 4)))
}

// TestAddTensorFunc: tensors whose bytes come from a function make the
// same file, byte for byte, as the same tensors given as slices, with the
// functions called once each, in tensor order, while the file is written;
// a function may hand back the same buffer every time. A wrong length or an
// error from the function fails the write, naming the tensor.
func TestAddTensorFunc(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 41))
	datas := map[string][]byte{}
	for _, c := range tensorCases {
		datas[c.name] = tensorBytes(t, rng, c)
	}
	build := func(lazy bool, calls *[]string) *Writer {
		w := NewWriter()
		must(t, w.Set("general.architecture", String("llama")))
		must(t, w.Set(AlignmentKey, Uint32(64)))
		var buf []byte // shared by every function
		for i, c := range tensorCases {
			if !lazy || i%3 == 0 { // mix both kinds
				must(t, w.AddTensor(c.name, c.typ, c.shape, datas[c.name]))
				continue
			}
			must(t, w.AddTensorFunc(c.name, c.typ, c.shape, func() ([]byte, error) {
				*calls = append(*calls, c.name)
				buf = append(buf[:0], datas[c.name]...)
				return buf, nil
			}))
		}
		return w
	}
	var want, got bytes.Buffer
	if _, err := build(false, nil).WriteTo(&want); err != nil {
		t.Fatal(err)
	}
	var calls, wantCalls []string
	for i, c := range tensorCases {
		if i%3 != 0 {
			wantCalls = append(wantCalls, c.name)
		}
	}
	w := build(true, &calls)
	if len(calls) != 0 {
		t.Fatalf("data functions called before WriteTo: %v", calls)
	}
	n, err := w.WriteTo(&got)
	if err != nil || n != int64(got.Len()) {
		t.Fatalf("WriteTo: %d, %v (wrote %d)", n, err, got.Len())
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("AddTensorFunc file (%d bytes) differs from the AddTensor file (%d bytes)", got.Len(), want.Len())
	}
	if !slices.Equal(calls, wantCalls) {
		t.Errorf("data functions called %v, want %v", calls, wantCalls)
	}

	// Errors: a nil function; a short result; the function's own error.
	w = NewWriter()
	if err := w.AddTensorFunc("n", quant.F32, []int{2}, nil); err == nil || !strings.Contains(err.Error(), "Writer.AddTensorFunc") || !strings.Contains(err.Error(), "nil data function") {
		t.Errorf("nil function: %v", err)
	}
	if err := w.AddTensorFunc("b", quant.Q4_0, []int{2, 48}, func() ([]byte, error) { return nil, nil }); err == nil || !strings.Contains(err.Error(), "Writer.AddTensorFunc") || !strings.Contains(err.Error(), "not a whole number of 32-element blocks") {
		t.Errorf("bad shape: %v", err)
	}
	boom := errors.New("boom")
	for _, c := range []struct {
		fn   func() ([]byte, error)
		want string
	}{
		{func() ([]byte, error) { return make([]byte, 71), nil }, `tensor "q" (q4_0, shape [2 64]): the data function returned 71 bytes, the shape needs 72`},
		{func() ([]byte, error) { return nil, boom }, `tensor "q": boom`},
	} {
		w := NewWriter()
		must(t, w.AddTensor("first", quant.F32, []int{1}, make([]byte, 4)))
		must(t, w.AddTensorFunc("q", quant.Q4_0, []int{2, 64}, c.fn))
		path := filepath.Join(t.TempDir(), "bad.gguf")
		err := w.WriteFile(path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("WriteFile: %v, want an error containing %q", err, c.want)
		}
		if c.fn != nil && errors.Is(err, boom) != strings.Contains(c.want, "boom") {
			t.Errorf("WriteFile: %v does not wrap the function's error", err)
		}
		if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("the partial file is left behind: %v", serr)
		}
	}
}

package gguf

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loomgraph/loom/quant"
)

// FuzzRead parses arbitrary bytes. Without -fuzz it runs the seeds below
// and the checked-in corpus (testdata/fuzz/FuzzRead) as a plain test. Any
// input must give a *FormatError or a File whose every tensor lies inside
// the input; the two parser paths (Read and in-memory) must agree; and a
// File the Writer can re-write must read back the same.
//
//	go test ./gguf -run '^$' -fuzz FuzzRead -fuzztime 2m
func FuzzRead(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := readBoth(t, b) // fails on disagreement or a non-FormatError
		if err != nil {
			return
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			if ti.FileOffset < file.DataOffset || ti.Size < 0 || ti.FileOffset+ti.Size > int64(len(b)) || ti.Offset%file.Alignment != 0 {
				t.Fatalf("tensor %q: %d bytes at %d, outside the data section [%d, %d) or unaligned", ti.Name, ti.Size, ti.FileOffset, file.DataOffset, len(b))
			}
			tr, _ := ti.Type.Traits()
			if ti.Size != ti.Elements()/int64(tr.Block)*int64(tr.Size) || len(ti.Shape()) != len(ti.Dims) {
				t.Fatalf("tensor %q: size %d for %d elements of %v", ti.Name, ti.Size, ti.Elements(), ti.Type)
			}
			d, err := file.TensorData(ti)
			if err != nil || !bytes.Equal(d, b[ti.FileOffset:ti.FileOffset+ti.Size]) {
				t.Fatalf("tensor %q: Data wrong (%v)", ti.Name, err)
			}
		}
		for _, kv := range file.Metadata.KVs() {
			_ = kv.Value.String()
		}
		// Re-write what the Writer accepts (it is stricter: uint32
		// power-of-two alignment, ASCII keys, names under 64 bytes).
		w := NewWriter()
		for _, kv := range file.Metadata.KVs() {
			if w.Set(kv.Key, kv.Value) != nil {
				return
			}
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			d, _ := file.TensorData(ti)
			if w.AddTensor(ti.Name, ti.Type, ti.Shape(), d) != nil {
				return
			}
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		again, err := readBoth(t, buf.Bytes())
		if err != nil {
			t.Fatalf("the Writer's re-write does not read: %v", err)
		}
		sameMetadata(t, file.Metadata.KVs(), again.Metadata.KVs(), false)
		for i := range file.Tensors {
			x, y := &file.Tensors[i], &again.Tensors[i]
			dx, _ := file.TensorData(x)
			dy, _ := again.TensorData(y)
			if x.Name != y.Name || x.Type != y.Type || !slices.Equal(x.Dims, y.Dims) || !bytes.Equal(dx, dy) {
				t.Fatalf("tensor %d re-written differs: %+v / %+v", i, *x, *y)
			}
		}
	})
}

// fuzzSeeds are small files that reach every part of the parser: every
// value type, nesting, several tensor types, an alignment key, version 2,
// tensors out of file order, an empty tensor, and a few broken files.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	w := NewWriter()
	for _, kv := range []KV{
		{Key: "general.architecture", Value: String("llama")},
		{Key: AlignmentKey, Value: Uint32(8)},
		{Key: "u8", Value: Uint8(1)}, {Key: "i8", Value: Int8(-1)}, {Key: "u16", Value: Uint16(2)}, {Key: "i16", Value: Int16(-2)},
		{Key: "u32", Value: Uint32(3)}, {Key: "i32", Value: Int32(-3)}, {Key: "f32", Value: Float32(0.5)}, {Key: "b", Value: Bool(true)},
		{Key: "u64", Value: Uint64(4)}, {Key: "i64", Value: Int64(-4)}, {Key: "f64", Value: Float64(0.25)},
		{Key: "toks", Value: ArrayValue(NewArray([]string{"<s>", "a"}))},
		{Key: "ids", Value: ArrayValue(NewArray([]int32{1, -1}))},
		{Key: "flags", Value: ArrayValue(NewArray([]bool{true, false}))},
		{Key: "nest", Value: ArrayValue(NewArray([]Array{NewArray([]uint16{7}), NewArray([]Array{NewArray([]float64{1})})}))},
	} {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			panic(err)
		}
	}
	for _, c := range []tensorCase{{"w", quant.F32, []int{2, 3}}, {"q", quant.Q4_0, []int{32}}, {"h", quant.F16, []int{1, 1, 1, 2}}} {
		n := 1
		for _, d := range c.shape {
			n *= d
		}
		size, _ := c.typ.RowBytes(int64(n))
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i*37 + 11)
		}
		if err := w.AddTensor(c.name, c.typ, c.shape, data); err != nil {
			panic(err)
		}
	}
	var buf bytes.Buffer
	w.WriteTo(&buf)
	full := buf.Bytes()
	seeds = append(seeds, full)
	v2 := bytes.Clone(full)
	v2[4] = 2
	seeds = append(seeds, v2, full[:len(full)-3], full[:100])

	var r raw
	tensorFile(&r, func(r *raw) {
		r.tensorInfo("b", quant.F32, []uint64{8}, 32)
		r.tensorInfo("a", quant.BF16, []uint64{16}, 0)
		r.tensorInfo("e", quant.Q8_0, []uint64{32, 0}, 0)
		r.tensorInfo("s", quant.I32, nil, 64)
	}, 4, 96)
	seeds = append(seeds, r.b)

	r = raw{}
	r.header(3, 0, 0)
	seeds = append(seeds, r.b)

	r = raw{}
	tensorFile(&r, func(r *raw) {
		r.tensorInfo("a", quant.F32, []uint64{8}, 0)
		r.tensorInfo("b", quant.F32, []uint64{8}, 0)
	}, 2, 64)
	seeds = append(seeds, r.b) // overlapping

	r = raw{}
	kvFile(&r, 0)
	r.u32(uint32(TypeArray))
	r.u32(uint32(TypeString))
	r.u64(1 << 20)
	seeds = append(seeds, r.b) // a count the file cannot hold
	return seeds
}

// TestWriteFuzzCorpus rewrites testdata/fuzz/FuzzRead from fuzzSeeds when
// LOOM_GGUF_WRITE_CORPUS=1 (run it after changing the seeds; inputs the
// fuzzer found are kept there beside them).
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("LOOM_GGUF_WRITE_CORPUS") != "1" {
		t.Skip("set LOOM_GGUF_WRITE_CORPUS=1 to rewrite testdata/fuzz/FuzzRead from the seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range fuzzSeeds() {
		name := fmt.Sprintf("seed-%x", sha256.Sum256(s))[:21]
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/quant"
)

// ggufTensor is a tensor the inspect tests write: its row-major shape and
// the float64 value of every element (exactly representable in its type).
type ggufTensor struct {
	name  string
	typ   quant.Type
	shape []int
	want  []float64
	data  []byte
}

// writeGGUF writes a file with metadata of several types (one array long
// enough to be abbreviated) and the given tensors; it returns the path.
func writeGGUF(t *testing.T, tensors []ggufTensor) string {
	t.Helper()
	w := gguf.NewWriter()
	tokens := make([]string, 20)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("tok%d", i)
	}
	for _, kv := range []gguf.KV{
		{Key: "general.architecture", Value: gguf.String("llama")},
		{Key: "general.alignment", Value: gguf.Uint32(64)},
		{Key: "llama.block_count", Value: gguf.Uint64(2)},
		{Key: "llama.rope.freq_base", Value: gguf.Float32(10000)},
		{Key: "x.flag", Value: gguf.Bool(true)},
		{Key: "x.offset", Value: gguf.Int8(-7)},
		{Key: "x.quote", Value: gguf.String("say \"hi\"\n")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(gguf.NewArray(tokens))},
		{Key: "x.nested", Value: gguf.ArrayValue(gguf.NewArray([]gguf.Array{gguf.NewArray([]int16{1, -2}), gguf.NewArray([]bool{})}))},
	} {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tensors {
		if err := w.AddTensor(tt.name, tt.typ, tt.shape, tt.data); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// floatTensor makes a tensor of t (f32, f16 or bf16) with random values
// (and, for f32, a few special ones) rounded to t, keeping each element's
// exact value as a float64.
func floatTensor(rng *rand.Rand, name string, t quant.Type, shape ...int) ggufTensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	tt := ggufTensor{name: name, typ: t, shape: shape, want: make([]float64, n)}
	le := binary.LittleEndian
	for i := range n {
		x := float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(7)-3)))
		if t == quant.F32 && i < 4 {
			x = []float32{float32(math.Inf(-1)), float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, math.MaxFloat32}[i]
		}
		switch t {
		case quant.F32:
			tt.data = le.AppendUint32(tt.data, math.Float32bits(x))
			tt.want[i] = float64(x)
		case quant.F16:
			h := dtype.ToF16(x)
			tt.data = le.AppendUint16(tt.data, uint16(h))
			tt.want[i] = h.Float64()
		case quant.BF16:
			b := dtype.ToBF16(x)
			tt.data = le.AppendUint16(tt.data, uint16(b))
			tt.want[i] = b.Float64()
		}
	}
	return tt
}

func TestGGUFInspect(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 26))
	tensors := []ggufTensor{
		floatTensor(rng, "f32.matrix", quant.F32, 3, 5),
		floatTensor(rng, "f16.matrix", quant.F16, 4, 7),
		floatTensor(rng, "bf16.3d", quant.BF16, 2, 3, 4),
		floatTensor(rng, "f32.scalar", quant.F32),
		floatTensor(rng, "f32.empty", quant.F32, 0, 4),
		{name: "q4_0.weight", typ: quant.Q4_0, shape: []int{2, 64}, data: make([]byte, 2*2*18)},
	}
	path := writeGGUF(t, tensors)

	status, out, errs := loom(t, "gguf", "inspect", path)
	if status != exitOK || errs != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", status, out, errs)
	}
	// Metadata: key, type and value on one line, in file order.
	var lines []string
	for _, want := range [][]string{
		{"general.architecture", "string", `"llama"`},
		{"general.alignment", "uint32", "64"},
		{"llama.block_count", "uint64", "2"},
		{"llama.rope.freq_base", "float32", "10000"},
		{"x.flag", "bool", "true"},
		{"x.offset", "int8", "-7"},
		{"x.quote", "string", `"say \"hi\"\n"`},
		{"tokenizer.ggml.tokens", "array[string]", `20 elements: ["tok0", "tok1", "tok2", "tok3", "tok4", "tok5", "tok6", "tok7", ... 12 more]`},
		{"x.nested", "array[array]", "2 elements: [[1, -2], []]"},
	} {
		lines = append(lines, strings.Join(want, " "))
	}
	// Tensors: name, type, dims as stored, row-major shape, offset in the
	// data section and in the file, bytes. Offsets follow the layout: each
	// tensor at the next multiple of 64 after the previous one.
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := int64(0)
	for _, tt := range tensors {
		size := int64(len(tt.data))
		dims := make([]int, len(tt.shape))
		for i, d := range tt.shape {
			dims[len(dims)-1-i] = d
		}
		lines = append(lines, fmt.Sprintf("%s %v %v %v %d %d %d", tt.name, tt.typ, dims, tt.shape, off, f.DataOffset+off, size))
		off += (size + 63) / 64 * 64
	}
	squeezed := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		squeezed[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, want := range lines {
		if !squeezed[want] {
			t.Errorf("no line %q in\n%s", want, out)
		}
	}
	for _, want := range []string{"version:    3", "alignment:  64", fmt.Sprintf("data from:  byte %d", f.DataOffset), "metadata: 9 keys", "tensors: 6"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// -tensor: the values row-major, one row of the innermost axis per
	// line, each reading back to the element's exact value.
	for _, tt := range tensors[:5] {
		for _, args := range [][]string{{"gguf", "inspect", "-tensor", tt.name, path}, {"gguf", "inspect", path, "-tensor", tt.name}} {
			status, out, errs := loom(t, args...)
			if status != exitOK || errs != "" {
				t.Fatalf("%v: exit %d, stderr:\n%s", args, status, errs)
			}
			row := 1
			if len(tt.shape) > 0 {
				row = tt.shape[len(tt.shape)-1]
			}
			got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(tt.want) == 0 {
				got = nil
				if out != "" {
					t.Errorf("%s: empty tensor printed %q", tt.name, out)
				}
			}
			if len(got)*row != len(tt.want) {
				t.Fatalf("%s: %d lines of %d values for %d elements:\n%s", tt.name, len(got), row, len(tt.want), out)
			}
			for r, line := range got {
				fields := strings.Fields(line)
				if len(fields) != row {
					t.Fatalf("%s: line %d has %d values, want %d: %q", tt.name, r, len(fields), row, line)
				}
				for c, s := range fields {
					v, err := strconv.ParseFloat(s, 32)
					want := tt.want[r*row+c]
					if err != nil || v != want || math.Signbit(v) != math.Signbit(want) {
						t.Fatalf("%s: element [%d][%d] printed %q, want %v (%v)", tt.name, r, c, s, want, err)
					}
				}
			}
		}
	}
}

func TestGGUFInspectErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	path := writeGGUF(t, []ggufTensor{
		floatTensor(rng, "w", quant.F32, 2),
		{name: "q", typ: quant.IQ4_NL, shape: []int{32}, data: make([]byte, 18)},
	})
	garbage := filepath.Join(t.TempDir(), "garbage.gguf")
	if err := os.WriteFile(garbage, []byte("GGML and then some bytes that are not a header"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"gguf", "inspect", "-tensor", "q", path}, []string{`tensor "q" (iq4_nl, shape [32])`, "quant.Dequantize(iq4_nl): no codec for this type"}},
		{[]string{"gguf", "inspect", "-tensor", "nope", path}, []string{`tensor "nope": not found`}},
		{[]string{"gguf", "inspect", filepath.Join(t.TempDir(), "missing.gguf")}, []string{"missing.gguf", "no such file"}},
		{[]string{"gguf", "inspect", garbage}, []string{"garbage.gguf: magic at offset 0", `"GGML" is not "GGUF"`}},
	} {
		status, out, errs := loom(t, c.args...)
		if status != exitFail || out != "" {
			t.Errorf("loom %s: exit %d, stdout %q; want %d and nothing on stdout", strings.Join(c.args, " "), status, out, exitFail)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) || !strings.HasPrefix(errs, "loom gguf inspect: ") {
				t.Errorf("loom %s: stderr %q lacks %q", strings.Join(c.args, " "), errs, w)
			}
		}
	}
	for _, args := range [][]string{
		{"gguf"},
		{"gguf", "quantize", path},
		{"gguf", "inspect"},
		{"gguf", "inspect", path, path},
		{"gguf", "inspect", "-bogus", path},
	} {
		status, out, errs := loom(t, args...)
		if status != exitUsage || out != "" || !strings.Contains(errs, "usage: loom gguf inspect [-tensor NAME] FILE") {
			t.Errorf("loom %s: exit %d, stdout %q, stderr:\n%s\nwant exit %d and usage on stderr", strings.Join(args, " "), status, out, errs, exitUsage)
		}
	}
	if status, out, _ := loom(t, "help", "gguf"); status != exitOK || !strings.Contains(out, "-tensor") {
		t.Errorf("help gguf: exit %d:\n%s", status, out)
	}
	if status, out, _ := loom(t, "gguf", "-h"); status != exitOK || !strings.Contains(out, "-tensor") {
		t.Errorf("gguf -h: exit %d:\n%s", status, out)
	}
}

// TestGGUFInspectQuantized: -tensor prints a quantized tensor's values as
// package quant dequantizes them, one row per line.
func TestGGUFInspectQuantized(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		tr, _ := typ.Traits()
		rows, k := 3, tr.Block
		src := make([]float32, rows*k)
		for i := range src {
			src[i] = float32(rng.NormFloat64())
		}
		raw := make([]byte, rows*tr.Size)
		if err := quant.Quantize(typ, src, raw); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, rows*k)
		if err := quant.Dequantize(typ, raw, want); err != nil {
			t.Fatal(err)
		}
		path := writeGGUF(t, []ggufTensor{{name: "q", typ: typ, shape: []int{rows, k}, data: raw}})
		status, out, errs := loom(t, "gguf", "inspect", "-tensor", "q", path)
		if status != exitOK {
			t.Fatalf("%v: exit %d: %s", typ, status, errs)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != rows {
			t.Fatalf("%v: %d lines, want %d", typ, len(lines), rows)
		}
		for r, line := range lines {
			fields := strings.Fields(line)
			if len(fields) != k {
				t.Fatalf("%v row %d: %d values, want %d", typ, r, len(fields), k)
			}
			for i, f := range fields {
				v, err := strconv.ParseFloat(f, 32)
				if err != nil || float32(v) != want[r*k+i] {
					t.Fatalf("%v [%d][%d] = %q, want %v", typ, r, i, f, want[r*k+i])
				}
			}
		}
	}
}

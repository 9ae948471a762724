package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/safetensors"
)

// llamaFtype is llama.cpp's enum llama_ftype (include/llama.h), written
// out here independently of the command's table: the general.file_type
// each -type must produce.
var llamaFtype = map[string]uint32{
	"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9,
	"q2_k": 10, "q3_k": 11 /* Q3_K_S */, "q4_k": 14 /* Q4_K_S */, "q5_k": 16 /* Q5_K_S */, "q6_k": 18, "bf16": 32,
}

// qcase is an input tensor of a quantize test and what the output must
// hold: its type (the target, or the input's own type when kept) and, for
// kept tensors, a phrase of the reason printed.
type qcase struct {
	name  string
	typ   quant.Type
	shape []int
	data  []byte
	kept  string // "" when the tensor must be converted
}

// randTensor fills a tensor of a float type with values of random scale
// per row (and an all-zero first block, which the quantizers treat
// apart), rounded to the type; other types get random bytes.
func randTensor(rng *rand.Rand, name string, typ quant.Type, kept string, shape ...int) qcase {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	size, err := typ.RowBytes(n)
	if err != nil {
		panic(err)
	}
	c := qcase{name: name, typ: typ, shape: shape, data: make([]byte, size), kept: kept}
	switch typ {
	case quant.F32, quant.F16, quant.BF16:
		vals := make([]float32, n)
		row := int64(1)
		if len(shape) > 0 {
			row = int64(max(1, shape[len(shape)-1]))
		}
		scale := 1.0
		for i := range vals {
			if int64(i)%row == 0 {
				scale = math.Pow(10, float64(rng.IntN(5)-2))
			}
			if i >= 32 {
				vals[i] = float32(rng.NormFloat64() * scale)
			}
		}
		if err := quant.Quantize(typ, vals, c.data); err != nil {
			panic(err)
		}
	default:
		for i := range c.data {
			c.data[i] = byte(rng.Uint32())
		}
	}
	return c
}

// wantData is what the output must hold for c quantized to to: the input
// widened to f32 (exactly) and quant.Quantize'd as one slice; kept
// tensors, their input bytes.
func wantData(t *testing.T, c qcase, to quant.Type) []byte {
	t.Helper()
	if c.kept != "" {
		return c.data
	}
	tr, _ := c.typ.Traits()
	vals := make([]float32, len(c.data)/tr.Size)
	if err := quant.Dequantize(c.typ, c.data, vals); err != nil {
		t.Fatal(err)
	}
	size, err := to.RowBytes(int64(len(vals)))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, size)
	if err := quant.Quantize(to, vals, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkQuantized opens the output with gguf.Open and checks its tensors,
// in order, against the cases: name, type, shape and bytes (bit-exact).
// It returns the file (closed by the test's cleanup) and the tensor bytes
// before and after.
func checkQuantized(t *testing.T, out string, cases []qcase, to quant.Type) (f *gguf.File, in, outBytes int64) {
	t.Helper()
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatalf("gguf.Open(output): %v", err)
	}
	t.Cleanup(func() { f.Close() })
	if len(f.Tensors) != len(cases) {
		t.Fatalf("%s: %d tensors, want %d", out, len(f.Tensors), len(cases))
	}
	for i, c := range cases {
		ti := &f.Tensors[i]
		wantType := to
		if c.kept != "" {
			wantType = c.typ
		}
		if ti.Name != c.name || ti.Type != wantType || !reflect.DeepEqual(ti.Shape(), c.shape) && !(len(c.shape) == 0 && len(ti.Shape()) == 0) {
			t.Errorf("tensor %d: %q %v shape %v; want %q %v shape %v", i, ti.Name, ti.Type, ti.Shape(), c.name, wantType, c.shape)
			continue
		}
		got, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		want := wantData(t, c, to)
		if string(got) != string(want) {
			t.Errorf("tensor %q (%v → %v): %d bytes differ from quant.Quantize's %d", c.name, c.typ, ti.Type, len(got), len(want))
		}
		in += int64(len(c.data))
		outBytes += int64(len(got))
	}
	return f, in, outBytes
}

// checkReport checks the printed lines: one per tensor with its name,
// types and byte counts (and, for kept tensors, the reason), then the
// totals with the ratio.
func checkReport(t *testing.T, stdout string, cases []qcase, f *gguf.File, in, out int64, to quant.Type) {
	t.Helper()
	lines := strings.Split(stdout, "\n")
	converted := 0
	for i, c := range cases {
		ti := &f.Tensors[i]
		var line string
		for _, l := range lines {
			if strings.HasPrefix(l, fmt.Sprintf("[%*d/%d] %s ", len(strconv.Itoa(len(cases))), i+1, len(cases), c.name)) {
				line = l
			}
		}
		want := fmt.Sprintf("%d/%d] %s %v → %v %v %d → %d bytes", i+1, len(cases), c.name, c.typ, ti.Type, c.shape, len(c.data), ti.Size)
		if squeezed := strings.Join(strings.Fields(line), " "); !strings.Contains(squeezed, want) {
			t.Errorf("tensor %q: line %q; want %q (spaces squeezed)", c.name, line, want)
		}
		if c.kept == "" {
			converted++
			if strings.Contains(line, "kept") {
				t.Errorf("tensor %q converted but reported kept: %q", c.name, line)
			}
		} else if !strings.Contains(line, "kept: ") || !strings.Contains(line, c.kept) {
			t.Errorf("tensor %q: line %q does not say it is kept because of %q", c.name, line, c.kept)
		}
	}
	ratio := fmt.Sprintf("%.2f× smaller", float64(in)/float64(out))
	if out > in {
		ratio = fmt.Sprintf("%.2f× larger", float64(out)/float64(in))
	}
	total := fmt.Sprintf("total: %d tensors, %d converted to %v, %d kept: %d → %d bytes of tensor data (%s); wrote ",
		len(cases), converted, to, len(cases)-converted, in, out, ratio)
	if !strings.Contains(stdout, total) {
		t.Errorf("no line %q in\n%s", total, stdout)
	}
}

// ggufMetadata returns the key → value map of f's metadata, and its keys
// in order.
func ggufMetadata(f *gguf.File) (map[string]gguf.Value, []string) {
	m := map[string]gguf.Value{}
	var keys []string
	for _, kv := range f.Metadata.KVs() {
		m[kv.Key] = kv.Value
		keys = append(keys, kv.Key)
	}
	return m, keys
}

func checkQuantKeys(t *testing.T, m map[string]gguf.Value, to quant.Type) {
	t.Helper()
	if v := m["general.quantization_version"]; v.Type() != gguf.TypeUint32 || v.String() != "2" {
		t.Errorf("general.quantization_version = %s %s, want uint32 2", v.TypeName(), v)
	}
	if v := m["general.file_type"]; v.Type() != gguf.TypeUint32 || v.String() != fmt.Sprint(llamaFtype[to.String()]) {
		t.Errorf("general.file_type = %s %s, want uint32 %d for %v", v.TypeName(), v, llamaFtype[to.String()], to)
	}
}

// noLeftovers checks that dir holds exactly the named files (no
// temporary file of a failed or finished write).
func noLeftovers(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !reflect.DeepEqual(got, names) && !(len(got) == 0 && len(names) == 0) {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

// TestGGUFQuantize quantizes a GGUF file of f32, f16 and bf16 weights
// (one large enough to be split among goroutines), a norm, tensors whose
// rows do not fit Q4_K's 256-value blocks, tensors llama.cpp keeps by
// name, an already-quantized tensor and an integer one, and checks every
// tensor of the output bit for bit against quant.Quantize, the metadata,
// and the report.
func TestGGUFQuantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 14))
	to := quant.Q4_K
	cases := []qcase{
		randTensor(rng, "token_embd.weight", quant.F16, "", 600, 256), // 3 chunks of 64K values
		randTensor(rng, "blk.0.attn_norm.weight", quant.F32, "rank 1", 512),
		randTensor(rng, "blk.0.attn_q.weight", quant.F32, "", 8, 512),
		randTensor(rng, "blk.0.ffn_up.weight", quant.BF16, "", 3, 256),
		randTensor(rng, "blk.0.ffn_down_exps.weight", quant.F16, "", 2, 3, 256),
		randTensor(rng, "blk.0.ffn_odd.weight", quant.F16, "rows of 96 values are not a whole number of q4_k's 256-value blocks", 4, 96),
		randTensor(rng, "blk.0.ffn_gate_inp.weight", quant.F32, "expert router", 4, 256),
		randTensor(rng, "blk.0.q_norm.weight", quant.F32, "a norm", 2, 256),
		randTensor(rng, "blk.0.ssm_a", quant.F32, "not a weight", 4, 256),
		randTensor(rng, "blk.0.row.weight", quant.F32, "rank 1", 1, 1, 512), // ggml_n_dims: a vector
		randTensor(rng, "blk.0.attn_k.weight", quant.Q8_0, "already q8_0", 2, 256),
		randTensor(rng, "blk.0.ids", quant.I32, "i32: only f32, f16 and bf16", 3, 256),
		randTensor(rng, "blk.0.empty.weight", quant.F32, "", 0, 256),
		randTensor(rng, "scalar", quant.F32, "rank 0"),
	}
	w := gguf.NewWriter()
	tokens := []string{"a", "b", "c"}
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: gguf.String("llama")},
		{Key: "general.alignment", Value: gguf.Uint32(64)},
		{Key: "general.file_type", Value: gguf.Uint32(1)}, // overwritten in place
		{Key: "llama.block_count", Value: gguf.Uint64(1)},
		{Key: "llama.rope.freq_base", Value: gguf.Float32(10000)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(gguf.NewArray(tokens))},
	}
	for _, kv := range kvs {
		must(t, w.Set(kv.Key, kv.Value))
	}
	for _, c := range cases {
		must(t, w.AddTensor(c.name, c.typ, c.shape, c.data))
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "model-f16.gguf")
	must(t, w.WriteFile(in))
	out := filepath.Join(dir, "model-q4_k.gguf")

	status, stdout, stderr := loom(t, "gguf", "quantize", "-type", "Q4_K", in, out)
	if status != exitOK || stderr != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", status, stdout, stderr)
	}
	f, inBytes, outBytes := checkQuantized(t, out, cases, to)
	checkReport(t, stdout, cases, f, inBytes, outBytes, to)
	noLeftovers(t, dir, "model-f16.gguf", "model-q4_k.gguf")
	if st, err := os.Stat(out); err != nil || !strings.Contains(stdout, fmt.Sprintf("; wrote %s, %d bytes\n", out, st.Size())) {
		t.Errorf("the report does not give the output's size (%v):\n%s", err, stdout)
	}

	// Metadata: every entry in order, general.file_type overwritten where
	// it was, general.quantization_version added at the end; the
	// alignment kept.
	m, keys := ggufMetadata(f)
	wantKeys := []string{"general.architecture", "general.alignment", "general.file_type", "llama.block_count", "llama.rope.freq_base", "tokenizer.ggml.tokens", "general.quantization_version"}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Errorf("metadata keys %v, want %v", keys, wantKeys)
	}
	for _, kv := range kvs {
		if kv.Key != "general.file_type" && !reflect.DeepEqual(m[kv.Key], kv.Value) {
			t.Errorf("metadata %q = %s, want %s", kv.Key, m[kv.Key], kv.Value)
		}
	}
	checkQuantKeys(t, m, to)
	if f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("alignment %d, data at %d; want 64", f.Alignment, f.DataOffset)
	}
	if !strings.Contains(stdout, "metadata: 5 keys copied; general.quantization_version = 2, general.file_type = 14 (LLAMA_FTYPE_MOSTLY_Q4_K_S)") {
		t.Errorf("no metadata line in\n%s", stdout)
	}

	// loom gguf inspect -tensor prints a converted tensor's values as
	// quant.Dequantize decodes the output's bytes.
	ti, err := f.Tensor("blk.0.attn_q.weight")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := f.TensorData(ti)
	want := make([]float32, ti.Elements())
	must(t, quant.Dequantize(ti.Type, raw, want))
	status, printed, stderr := loom(t, "gguf", "inspect", "-tensor", ti.Name, out)
	if status != exitOK {
		t.Fatalf("inspect: exit %d: %s", status, stderr)
	}
	fields := strings.Fields(printed)
	if len(fields) != len(want) || strings.Count(printed, "\n") != 8 {
		t.Fatalf("inspect printed %d values on %d lines, want %d on 8", len(fields), strings.Count(printed, "\n"), len(want))
	}
	for i, s := range fields {
		if v, err := strconv.ParseFloat(s, 32); err != nil || float32(v) != want[i] {
			t.Fatalf("inspect value %d = %q, want %v", i, s, want[i])
		}
	}
}

// TestGGUFQuantizeTypes converts f32, f16 and bf16 weights to every
// -type (case-insensitive) and checks the bytes and general.file_type.
func TestGGUFQuantizeTypes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 15))
	base := []qcase{
		randTensor(rng, "a.weight", quant.F32, "", 2, 256),
		randTensor(rng, "b.weight", quant.F16, "", 3, 512),
		randTensor(rng, "c.weight", quant.BF16, "", 2, 2, 256),
	}
	w := gguf.NewWriter()
	must(t, w.Set("general.architecture", gguf.String("llama")))
	for _, c := range base {
		must(t, w.AddTensor(c.name, c.typ, c.shape, c.data))
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.gguf")
	must(t, w.WriteFile(in))
	for name := range llamaFtype {
		to, err := quant.ParseType(name)
		if err != nil {
			t.Fatal(err)
		}
		cases := append([]qcase(nil), base...)
		for i := range cases {
			if cases[i].typ == to {
				cases[i].kept = "already " + name
			}
		}
		out := filepath.Join(dir, name+".gguf")
		arg := name
		if len(name)%2 == 0 {
			arg = strings.ToUpper(name)
		}
		status, stdout, stderr := loom(t, "gguf", "quantize", in, out, "-type", arg)
		if status != exitOK {
			t.Fatalf("-type %s: exit %d: %s", arg, status, stderr)
		}
		f, inBytes, outBytes := checkQuantized(t, out, cases, to)
		checkReport(t, stdout, cases, f, inBytes, outBytes, to)
		m, _ := ggufMetadata(f)
		checkQuantKeys(t, m, to)
		if a, ok := m["general.architecture"]; !ok || a.String() != `"llama"` {
			t.Errorf("-type %s: general.architecture = %s", name, a)
		}
	}
}

// stTensor turns a case into a safetensors tensor of the same bytes.
func stTensor(c qcase) safetensors.WriteTensor {
	d := map[quant.Type]safetensors.DType{
		quant.F32: safetensors.F32, quant.F16: safetensors.F16, quant.BF16: safetensors.BF16,
		quant.F64: safetensors.F64, quant.I64: safetensors.I64, quant.I8: safetensors.I8,
	}[c.typ]
	return safetensors.WriteTensor{Name: c.name, DType: d, Shape: c.shape, Data: c.data}
}

// orderLike reorders cases into the order names lists them.
func orderLike(t *testing.T, cases []qcase, names []string) []qcase {
	t.Helper()
	var out []qcase
	for _, n := range names {
		for _, c := range cases {
			if c.name == n {
				out = append(out, c)
			}
		}
	}
	if len(out) != len(cases) {
		t.Fatalf("names %v do not match the cases", names)
	}
	return out
}

// TestGGUFQuantizeSafetensors quantizes a safetensors file (found by its
// content: the name has no extension) and a directory of shards with an
// index: names and row-major shapes unchanged, tensors in file order,
// float weights converted, the rest kept (I64 as GGUF's i64), and the
// __metadata__ entries copied as strings.
func TestGGUFQuantizeSafetensors(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 16))
	to := quant.Q4_0
	cases := []qcase{
		randTensor(rng, "model.layers.0.mlp.up_proj.weight", quant.F32, "", 4, 256),
		randTensor(rng, "model.layers.0.self_attn.q_proj.weight", quant.BF16, "", 2, 512),
		randTensor(rng, "model.norm.weight", quant.F16, "rank 1", 256),
		randTensor(rng, "model.position_ids", quant.I64, "i64: only f32, f16 and bf16", 1, 3),
		randTensor(rng, "model.f64.weight", quant.F64, "f64: only f32, f16 and bf16", 2, 32),
		randTensor(rng, "lm_head.weight", quant.F16, "rows of 100 values are not a whole number of q4_0's 32-value blocks", 5, 100),
		randTensor(rng, "model.layers.0.mlp.down_proj.bias", quant.F32, "not a weight", 2, 64),
	}
	var sts []safetensors.WriteTensor
	for _, c := range cases {
		sts = append(sts, stTensor(c))
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "model")
	must(t, safetensors.WriteFile(in, sts, map[string]string{"format": "pt", "note": "x"}))
	sf, err := safetensors.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	order := sf.Names()
	sf.Close()
	out := filepath.Join(dir, "model.gguf")
	status, stdout, stderr := loom(t, "gguf", "quantize", "-type", "q4_0", in, out)
	if status != exitOK || stderr != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", status, stdout, stderr)
	}
	cases = orderLike(t, cases, order)
	f, inBytes, outBytes := checkQuantized(t, out, cases, to)
	checkReport(t, stdout, cases, f, inBytes, outBytes, to)
	m, keys := ggufMetadata(f)
	wantKeys := []string{"safetensors.metadata.format", "safetensors.metadata.note", "general.quantization_version", "general.file_type"}
	if !reflect.DeepEqual(keys, wantKeys) || m["safetensors.metadata.format"].String() != `"pt"` || m["safetensors.metadata.note"].String() != `"x"` {
		t.Errorf("metadata %v, want keys %v with format \"pt\", note \"x\"", m, wantKeys)
	}
	checkQuantKeys(t, m, to)
	if f.Alignment != gguf.DefaultAlignment {
		t.Errorf("alignment %d, want the default", f.Alignment)
	}

	// A directory of two shards and an index; the shards disagree on one
	// __metadata__ entry (the first file's value is kept, with a note).
	shards := t.TempDir()
	one, two := []safetensors.WriteTensor{sts[0], sts[2], sts[3]}, []safetensors.WriteTensor{sts[1], sts[5], sts[4], sts[6]}
	must(t, safetensors.WriteFile(filepath.Join(shards, "model-00001-of-00002.safetensors"), one, map[string]string{"format": "pt", "shard": "1"}))
	must(t, safetensors.WriteFile(filepath.Join(shards, "model-00002-of-00002.safetensors"), two, map[string]string{"format": "pt", "shard": "2"}))
	index := `{"metadata": {}, "weight_map": {`
	for i, st := range append(append([]safetensors.WriteTensor(nil), one...), two...) {
		file := "model-00001-of-00002.safetensors"
		if i >= len(one) {
			file = "model-00002-of-00002.safetensors"
		}
		if i > 0 {
			index += ", "
		}
		index += fmt.Sprintf("%q: %q", st.Name, file)
	}
	must(t, os.WriteFile(filepath.Join(shards, safetensors.IndexFile), []byte(index+"}}"), 0o644))
	d, err := safetensors.OpenDir(shards)
	if err != nil {
		t.Fatal(err)
	}
	order = nil
	for _, sf := range d.Files() {
		order = append(order, sf.Names()...)
	}
	d.Close()
	out = filepath.Join(t.TempDir(), "sharded.gguf")
	status, stdout, stderr = loom(t, "gguf", "quantize", "-type", "Q4_0", shards, out)
	if status != exitOK || stderr != "" {
		t.Fatalf("dir: exit %d\nstdout:\n%s\nstderr:\n%s", status, stdout, stderr)
	}
	cases = orderLike(t, cases, order)
	f, inBytes, outBytes = checkQuantized(t, out, cases, to)
	checkReport(t, stdout, cases, f, inBytes, outBytes, to)
	m, _ = ggufMetadata(f)
	if m["safetensors.metadata.shard"].String() != `"1"` || m["safetensors.metadata.format"].String() != `"pt"` {
		t.Errorf("dir metadata %v", m)
	}
	checkQuantKeys(t, m, to)
	if !strings.Contains(stdout, `metadata: __metadata__ "shard" is "1" in `) || !strings.Contains(stdout, "kept the first") {
		t.Errorf("no note on the disagreeing shards in\n%s", stdout)
	}
	if !strings.Contains(stdout, "(safetensors directory, 2 files, 7 tensors)") {
		t.Errorf("no input line in\n%s", stdout)
	}
	noLeftovers(t, shards, "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", safetensors.IndexFile)
}

// TestGGUFQuantizeErrors: every failure exits non-zero with a message
// naming the file (or flag) and the problem, and leaves no OUT behind.
func TestGGUFQuantizeErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 17))
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	w := gguf.NewWriter()
	c := randTensor(rng, "w.weight", quant.F32, "", 2, 256)
	must(t, w.AddTensor(c.name, c.typ, c.shape, c.data))
	must(t, w.WriteFile(good))
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, b, 0o644))
		return p
	}
	badMagic := write("bad.gguf", []byte("GGML and then some bytes that are not a header"))
	neither := write("weights.bin", []byte("PK\x03\x04 a zip, say"))
	truncated := write("cut.safetensors", []byte{0x40, 0, 0, 0, 0, 0, 0, 0, '{'})
	u8 := filepath.Join(dir, "u8.safetensors")
	must(t, safetensors.WriteFile(u8, []safetensors.WriteTensor{
		{Name: "ok.weight", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)},
		{Name: "mask", DType: safetensors.U8, Shape: []int{2, 3}, Data: make([]byte, 6)},
	}, nil))
	long := filepath.Join(dir, "long.safetensors")
	must(t, safetensors.WriteFile(long, []safetensors.WriteTensor{
		{Name: strings.Repeat("x", 70) + ".weight", DType: safetensors.F32, Shape: []int{1, 32}, Data: make([]byte, 128)},
	}, nil))
	out := filepath.Join(dir, "out.gguf")
	for _, c := range []struct {
		args   []string
		status int
		want   []string
	}{
		{[]string{"-type", "q4_3", good, out}, exitUsage, []string{`-type "q4_3": unknown type; want one of f32, f16, q4_0, q4_1, q8_0, q5_0, q5_1, q2_k, q3_k, q3_k_s, q3_k_m, q3_k_l, q4_k, q4_k_s, q4_k_m, q5_k, q5_k_s, q5_k_m, q6_k, bf16`}},
		{[]string{"-type", "q8_k", good, out}, exitUsage, []string{"-type q8_k: it is an activation format"}},
		{[]string{"-type", "Q8_1", good, out}, exitUsage, []string{"-type q8_1: it is an activation format"}},
		{[]string{"-type", "iq4_xs", good, out}, exitUsage, []string{"-type iq4_xs: Loom has no quantizer for it"}},
		{[]string{"-type", "q4_0", filepath.Join(dir, "missing.gguf"), out}, exitFail, []string{"missing.gguf", "no such file"}},
		{[]string{"-type", "q4_0", badMagic, out}, exitFail, []string{"bad.gguf", `"GGML" is not "GGUF"`}},
		{[]string{"-type", "q4_0", neither, out}, exitFail, []string{"weights.bin is neither a GGUF file (it starts with \"PK\\x03\\x04\", not \"GGUF\") nor a safetensors file"}},
		{[]string{"-type", "q4_0", truncated, out}, exitFail, []string{"cut.safetensors"}},
		{[]string{"-type", "q4_0", u8, out}, exitFail, []string{"u8.safetensors", `tensor "mask" (U8, shape [2 3])`, "GGUF has no type for safetensors dtype U8"}},
		{[]string{"-type", "q4_0", long, out}, exitFail, []string{"long.safetensors", "xxxx.weight", "ggml takes at most 63"}},
		{[]string{"-type", "q4_0", t.TempDir(), out}, exitFail, []string{"holds no *.safetensors file"}},
		{[]string{"-type", "q4_0", good, good}, exitFail, []string{"output " + good + " is the input file"}},
		{[]string{"-type", "q4_0", good, dir}, exitFail, []string{"output " + dir + " is a directory"}},
		{[]string{"-type", "q4_0", good, filepath.Join(dir, "no", "such", "dir.gguf")}, exitFail, []string{"writing " + filepath.Join(dir, "no", "such", "dir.gguf"), "no such file or directory"}},
		{[]string{good, out}, exitUsage, []string{"quantize needs -type TYPE"}},
		{[]string{"-type", "q4_0", good}, exitUsage, []string{"quantize wants IN and OUT, got 1 file names"}},
		{[]string{"-type", "q4_0", "-tensor", "w.weight", good, out}, exitUsage, []string{"-tensor is a flag of inspect"}},
	} {
		args := append([]string{"gguf", "quantize"}, c.args...)
		status, stdout, stderr := loom(t, args...)
		if status != c.status {
			t.Errorf("loom %s: exit %d, want %d\nstderr: %s", strings.Join(args, " "), status, c.status, stderr)
		}
		prefix := "loom gguf quantize: "
		if c.status == exitUsage {
			prefix = "loom gguf: "
			if !strings.Contains(stderr, "usage: loom gguf") {
				t.Errorf("loom %s: no usage in stderr %q", strings.Join(args, " "), stderr)
			}
		}
		if !strings.HasPrefix(stderr, prefix) {
			t.Errorf("loom %s: stderr %q does not start with %q", strings.Join(args, " "), stderr, prefix)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("loom %s: stderr %q lacks %q", strings.Join(args, " "), stderr, w)
			}
		}
		if c.status == exitUsage && stdout != "" {
			t.Errorf("loom %s: stdout %q", strings.Join(args, " "), stdout)
		}
	}
	noLeftovers(t, dir, "bad.gguf", "cut.safetensors", "good.gguf", "long.safetensors", "u8.safetensors", "weights.bin")
	if status, _, stderr := loom(t, "gguf", "inspect", "-type", "q4_0", good); status != exitUsage || !strings.Contains(stderr, "-type is a flag of quantize") {
		t.Errorf("inspect -type: exit %d, %q", status, stderr)
	}
	if status, out, _ := loom(t, "help", "gguf"); status != exitOK || !strings.Contains(out, "quantize -type TYPE IN OUT") || !strings.Contains(out, "-type") {
		t.Errorf("help gguf: exit %d:\n%s", status, out)
	}
}

// must fails the test on an error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

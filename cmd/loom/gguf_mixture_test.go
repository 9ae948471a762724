package main

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/safetensors"
)

// The expected types below are worked out by hand from llama.cpp's
// llama_tensor_get_type_impl (src/llama-quant.cpp) for a llama model, not
// by the command's code:
//   - output.weight, and token_embd.weight when there is no output.weight
//     (tied embeddings), get Q6_K; Q8_0 when their rows are not a whole
//     number of 256 values;
//   - attn_v (and attn_qkv) and ffn_down get Q6_K in the layers
//     use_more_bits picks, i < n/8 || i >= 7n/8 || (i − n/8) % 3 == 2,
//     counting the attn_v-like tensors (n = how many) and the ffn_down
//     ones (n = llama.block_count) in llama.cpp's visiting order;
//   - for an 80-layer model with fewer kv heads than heads (70B), Q4_K_M's
//     other attn_v layers get Q5_K;
//   - everything else quantizable gets the base type (Q4_K, Q5_K);
//   - rows that are not whole 256-value blocks fall back: Q4_K → Q5_0,
//     Q5_K → Q5_1, Q6_K → Q8_0, and to F16 when 32 does not divide them.

// moreBits16 and moreBits8 are use_more_bits's layers for 16 and 8
// layers, by hand: n/8 = 2, 7n/8 = 14 → 0, 1, 14, 15 and 2+2, 2+5, …;
// n/8 = 1, 7n/8 = 7 → 0, 7 and 1+2, 1+5.
var (
	moreBits16 = []int{0, 1, 4, 7, 10, 13, 14, 15}
	moreBits8  = []int{0, 3, 6, 7}
	// moreBits80: 0–9, 70–79, and 10+2, 10+5, … up to 69.
	moreBits80 = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 42, 45, 48, 51, 54, 57, 60, 63, 66, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79}
)

// mixCase is an input tensor and the type each mixture must give it; a
// kept tensor has its input type and kept says why.
type mixCase struct {
	qcase
	q4, q5 quant.Type
	// more: the types of other mixtures (q3_k_m, …), by -type name.
	more map[string]quant.Type
}

// mixRTBound is the relative RMS round-trip error accepted per type: the
// bounds of quant's roundtrip_test.go with a margin for tensors of a few
// blocks.
var mixRTBound = map[quant.Type]float64{
	quant.F16: 6e-4, quant.Q8_0: 0.009, quant.Q6_K: 0.03, quant.Q5_K: 0.06,
	quant.Q5_0: 0.075, quant.Q5_1: 0.07, quant.Q4_K: 0.12, quant.Q4_0: 0.13, quant.Q3_K: 0.24,
}

// gaussTensor is a float tensor of N(0, 1) values, rounded to typ.
func gaussTensor(rng *rand.Rand, name string, typ quant.Type, shape ...int) qcase {
	n := 1
	for _, d := range shape {
		n *= d
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(rng.NormFloat64())
	}
	size, err := typ.RowBytes(int64(n))
	if err != nil {
		panic(err)
	}
	c := qcase{name: name, typ: typ, shape: shape, data: make([]byte, size)}
	if err := quant.Quantize(typ, vals, c.data); err != nil {
		panic(err)
	}
	return c
}

// writeMixInput writes a GGUF file of kvs and the cases' tensors, in the
// order given.
func writeMixInput(t *testing.T, path string, kvs []gguf.KV, cases []mixCase) {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range kvs {
		must(t, w.Set(kv.Key, kv.Value))
	}
	for _, c := range cases {
		must(t, w.AddTensor(c.name, c.typ, c.shape, c.data))
	}
	must(t, w.WriteFile(path))
}

// llamaKVs is a llama model's metadata: architecture and layer count,
// with extra entries.
func llamaKVs(layers int, extra ...gguf.KV) []gguf.KV {
	return append([]gguf.KV{
		{Key: "general.architecture", Value: gguf.String("llama")},
		{Key: "general.file_type", Value: gguf.Uint32(0)},
		{Key: "llama.block_count", Value: gguf.Uint32(uint32(layers))},
	}, extra...)
}

// checkMixture runs -type arg on in and checks the output: every
// tensor's type (q4 for q4_k_m, q5 for q5_k_m, more[arg] for the others), its bytes against
// quant.Quantize of the input values (kept ones unchanged), its
// round-trip error, general.file_type, and the report.
func checkMixture(t *testing.T, in, arg string, cases []mixCase) string {
	t.Helper()
	mix := strings.ToLower(arg)
	ftype, ftName := kMixtures[mix].id, kMixtures[mix].ftype
	out := filepath.Join(t.TempDir(), mix+".gguf")
	status, stdout, stderr := loom(t, "gguf", "quantize", "-type", arg, in, out)
	if status != exitOK || stderr != "" {
		t.Fatalf("-type %s: exit %d\nstdout:\n%s\nstderr:\n%s", arg, status, stdout, stderr)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if len(f.Tensors) != len(cases) {
		t.Fatalf("-type %s: %d tensors, want %d", arg, len(f.Tensors), len(cases))
	}
	lines := strings.Split(stdout, "\n")
	converted := map[quant.Type]int{}
	for i, c := range cases {
		want := c.q4
		if mix == "q5_k_m" {
			want = c.q5
		}
		if w, ok := c.more[mix]; ok {
			want = w
		}
		ti := &f.Tensors[i]
		if ti.Name != c.name || ti.Type != want || !reflect.DeepEqual(ti.Shape(), c.shape) {
			t.Errorf("-type %s: tensor %d: %q %v %v; want %q %v %v", arg, i, ti.Name, ti.Type, ti.Shape(), c.name, want, c.shape)
			continue
		}
		got, err := f.TensorData(ti)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(wantData(t, c.qcase, want)) {
			t.Errorf("-type %s: tensor %q (%v → %v): bytes differ from quant.Quantize's", arg, c.name, c.typ, want)
		}
		var line string
		for _, l := range lines {
			if strings.Contains(l, "] "+c.name+" ") {
				line = l
			}
		}
		if c.kept != "" {
			if want != c.typ || !strings.Contains(line, "kept: ") || !strings.Contains(line, c.kept) {
				t.Errorf("-type %s: tensor %q: line %q does not say it is kept because of %q", arg, c.name, line, c.kept)
			}
			continue
		}
		converted[want]++
		if strings.Contains(line, "kept") {
			t.Errorf("-type %s: tensor %q converted but reported kept: %q", arg, c.name, line)
		}
		if !strings.Contains(strings.Join(strings.Fields(line), " "), fmt.Sprintf("%v → %v", c.typ, want)) {
			t.Errorf("-type %s: tensor %q: line %q lacks %v → %v", arg, c.name, line, c.typ, want)
		}
		// The values come back within the format's error.
		src := make([]float32, elements(c.shape))
		must(t, quant.Dequantize(c.typ, c.data, src))
		back := make([]float32, len(src))
		must(t, quant.Dequantize(want, got, back))
		var se, ss float64
		for j := range src {
			se += math.Pow(float64(back[j])-float64(src[j]), 2)
			ss += float64(src[j]) * float64(src[j])
		}
		if e := math.Sqrt(se / ss); !(e <= mixRTBound[want]) {
			t.Errorf("-type %s: tensor %q as %v: relative RMS error %.4f > %.4f", arg, c.name, want, e, mixRTBound[want])
		}
	}
	m, _ := ggufMetadata(f)
	if v := m["general.file_type"]; v.Type() != gguf.TypeUint32 || v.String() != fmt.Sprint(ftype) {
		t.Errorf("-type %s: general.file_type = %s %s, want uint32 %d", arg, v.TypeName(), v, ftype)
	}
	if v := m["general.quantization_version"]; v.String() != "2" {
		t.Errorf("-type %s: general.quantization_version = %s", arg, v)
	}
	if !strings.Contains(stdout, fmt.Sprintf("general.file_type = %d (LLAMA_FTYPE_%s)", ftype, ftName)) || !strings.Contains(stdout, "as "+mix+"\n") {
		t.Errorf("-type %s: no header lines for %s in\n%s", arg, mix, stdout)
	}
	var parts []string
	n := 0
	for _, typ := range slices.Sorted(maps.Keys(converted)) {
		parts = append(parts, fmt.Sprintf("%v %d", typ, converted[typ]))
		n += converted[typ]
	}
	total := fmt.Sprintf("total: %d tensors, %d converted to %s (%s), %d kept: ", len(cases), n, mix, strings.Join(parts, ", "), len(cases)-n)
	if !strings.Contains(stdout, total) {
		t.Errorf("-type %s: no line %q in\n%s", arg, total, stdout)
	}
	return stdout
}

// TestGGUFQuantizeMixtures quantizes llama-shaped models with -type
// q4_k_m and q5_k_m and checks every tensor's type against the table
// worked out by hand from llama.cpp's rules (see the comment at the top),
// its bytes, its round-trip error and general.file_type. The tensors are
// written in a shuffled order: llama.cpp counts attn_v and ffn_down
// layers in its own order (by layer number, then name), not the file's.
func TestGGUFQuantizeMixtures(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 18))
	const embd, ff = 256, 288 // ffn_down's rows of 288 values are not whole 256-value blocks

	// 16 layers, a separate output.weight. Layer 2's attn_v is already
	// Q8_0 (kept, but counted as llama.cpp counts it); blk.3.odd's rows of
	// 48 fit neither Q4_K/Q5_K nor Q5_0/Q5_1 (F16); blk.5.odd16 is F16
	// already.
	var untied []mixCase
	add := func(cs *[]mixCase, c qcase, q4, q5 quant.Type) {
		*cs = append(*cs, mixCase{qcase: c, q4: q4, q5: q5})
	}
	floats := []quant.Type{quant.F32, quant.F16, quant.BF16}
	add(&untied, gaussTensor(rng, "token_embd.weight", quant.F16, 8, embd), quant.Q4_K, quant.Q5_K)
	add(&untied, gaussTensor(rng, "output.weight", quant.F16, 8, embd), quant.Q6_K, quant.Q6_K)
	add(&untied, qcase{name: "output_norm.weight", typ: quant.F32, shape: []int{embd}, data: make([]byte, 4*embd), kept: "rank 1"}, quant.F32, quant.F32)
	for l := range 16 {
		more := slices.Contains(moreBits16, l)
		p := fmt.Sprintf("blk.%d.", l)
		typ := floats[l%3]
		add(&untied, qcase{name: p + "attn_norm.weight", typ: quant.F32, shape: []int{embd}, data: make([]byte, 4*embd), kept: "rank 1"}, quant.F32, quant.F32)
		add(&untied, gaussTensor(rng, p+"attn_q.weight", typ, 4, embd), quant.Q4_K, quant.Q5_K)
		add(&untied, gaussTensor(rng, p+"attn_k.weight", typ, 2, embd), quant.Q4_K, quant.Q5_K)
		switch {
		case l == 2:
			c := randTensor(rng, p+"attn_v.weight", quant.Q8_0, "already q8_0", 2, embd)
			add(&untied, c, quant.Q8_0, quant.Q8_0)
		case more:
			add(&untied, gaussTensor(rng, p+"attn_v.weight", typ, 2, embd), quant.Q6_K, quant.Q6_K)
		default:
			add(&untied, gaussTensor(rng, p+"attn_v.weight", typ, 2, embd), quant.Q4_K, quant.Q5_K)
		}
		add(&untied, gaussTensor(rng, p+"attn_output.weight", typ, 4, embd), quant.Q4_K, quant.Q5_K)
		add(&untied, qcase{name: p + "ffn_norm.weight", typ: quant.F32, shape: []int{embd}, data: make([]byte, 4*embd), kept: "rank 1"}, quant.F32, quant.F32)
		add(&untied, gaussTensor(rng, p+"ffn_gate.weight", typ, 2, embd), quant.Q4_K, quant.Q5_K)
		add(&untied, gaussTensor(rng, p+"ffn_up.weight", typ, 2, embd), quant.Q4_K, quant.Q5_K)
		if more { // Q6_K, whose fallback is Q8_0
			add(&untied, gaussTensor(rng, p+"ffn_down.weight", typ, 2, ff), quant.Q8_0, quant.Q8_0)
		} else {
			add(&untied, gaussTensor(rng, p+"ffn_down.weight", typ, 2, ff), quant.Q5_0, quant.Q5_1)
		}
	}
	add(&untied, gaussTensor(rng, "blk.3.odd.weight", quant.F32, 2, 48), quant.F16, quant.F16)
	c := gaussTensor(rng, "blk.5.odd16.weight", quant.F16, 2, 48)
	c.kept = "already f16"
	add(&untied, c, quant.F16, quant.F16)
	rng.Shuffle(len(untied), func(i, j int) { untied[i], untied[j] = untied[j], untied[i] })

	dir := t.TempDir()
	in := filepath.Join(dir, "untied.gguf")
	writeMixInput(t, in, llamaKVs(16), untied)
	stdout := checkMixture(t, in, "q4_k_m", untied)
	for _, want := range []string{
		"(q4_k_m: attn_v 0 of 16, use_more_bits)",
		"(q4_k_m: ffn_down 13 of 16, use_more_bits; rows of 288 values are not whole q6_k blocks)",
		"(q4_k_m: rows of 288 values are not whole q4_k blocks)",
		"(q4_k_m: the output)",
		"(q4_k_m: rows of 48 values are not whole q4_k blocks, nor q5_0 ones)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("q4_k_m: no %q in\n%s", want, stdout)
		}
	}
	checkMixture(t, in, "Q5_K_M", untied)

	// 8 layers, tied embeddings (no output.weight: token_embd is the
	// output), and a fused attn_qkv, which the attn_v rule covers.
	var tied []mixCase
	add(&tied, gaussTensor(rng, "token_embd.weight", quant.BF16, 8, embd), quant.Q6_K, quant.Q6_K)
	for l := range 8 {
		p := fmt.Sprintf("blk.%d.", l)
		if slices.Contains(moreBits8, l) {
			add(&tied, gaussTensor(rng, p+"attn_qkv.weight", quant.F32, 6, embd), quant.Q6_K, quant.Q6_K)
		} else {
			add(&tied, gaussTensor(rng, p+"attn_qkv.weight", quant.F32, 6, embd), quant.Q4_K, quant.Q5_K)
		}
		add(&tied, gaussTensor(rng, p+"attn_output.weight", quant.F16, 2, embd), quant.Q4_K, quant.Q5_K)
		if slices.Contains(moreBits8, l) {
			add(&tied, gaussTensor(rng, p+"ffn_down.weight", quant.F16, 2, 512), quant.Q6_K, quant.Q6_K)
		} else {
			add(&tied, gaussTensor(rng, p+"ffn_down.weight", quant.F16, 2, 512), quant.Q4_K, quant.Q5_K)
		}
	}
	in = filepath.Join(dir, "tied.gguf")
	writeMixInput(t, in, llamaKVs(8), tied)
	stdout = checkMixture(t, in, "Q4_K_M", tied)
	if !strings.Contains(stdout, "(q4_k_m: the output (tied: no output.weight))") {
		t.Errorf("no note on the tied token_embd in\n%s", stdout)
	}
	checkMixture(t, in, "q5_k_m", tied)

	// Rows of 96 values (a multiple of 32, not of 256): the tied
	// token_embd gets Q8_0, the rest the 32-value fallbacks.
	var narrow []mixCase
	add(&narrow, gaussTensor(rng, "token_embd.weight", quant.F32, 4, 96), quant.Q8_0, quant.Q8_0)
	// use_more_bits(i, 2): n/8 = 0, 7n/8 = 1; i = 0: 0 < 0 no, 0 ≥ 1 no,
	// (0 − 0) % 3 = 0 no → the base type, falling back to Q5_0/Q5_1;
	// i = 1: 1 ≥ 1 → Q6_K, falling back to Q8_0.
	add(&narrow, gaussTensor(rng, "blk.0.attn_v.weight", quant.F32, 2, 96), quant.Q5_0, quant.Q5_1)
	add(&narrow, gaussTensor(rng, "blk.1.attn_v.weight", quant.BF16, 2, 96), quant.Q8_0, quant.Q8_0)
	add(&narrow, gaussTensor(rng, "blk.1.attn_q.weight", quant.F16, 2, 96), quant.Q5_0, quant.Q5_1)
	in = filepath.Join(dir, "narrow.gguf")
	writeMixInput(t, in, llamaKVs(2), narrow)
	checkMixture(t, in, "q4_k_m", narrow)
	checkMixture(t, in, "q5_k_m", narrow)
}

// TestGGUFQuantizeMixture70B: for 80 layers with fewer kv heads than
// heads (LLM_TYPE_70B), Q4_K_M gives the attn_v layers that do not get
// Q6_K Q5_K rather than Q4_K; Q5_K_M keeps Q5_K; with as many kv heads as
// heads (65B) Q4_K stays.
func TestGGUFQuantizeMixture70B(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 19))
	var base []mixCase
	for l := range 80 {
		c := gaussTensor(rng, fmt.Sprintf("blk.%d.attn_v.weight", l), quant.F16, 2, 256)
		if slices.Contains(moreBits80, l) {
			base = append(base, mixCase{qcase: c, q4: quant.Q6_K, q5: quant.Q6_K})
		} else {
			base = append(base, mixCase{qcase: c, q4: quant.Q5_K, q5: quant.Q5_K})
		}
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "70b.gguf")
	writeMixInput(t, in, llamaKVs(80,
		gguf.KV{Key: "llama.attention.head_count", Value: gguf.Uint32(64)},
		gguf.KV{Key: "llama.attention.head_count_kv", Value: gguf.Uint32(8)}), base)
	stdout := checkMixture(t, in, "q4_k_m", base)
	if !strings.Contains(stdout, "(q4_k_m: attn_v of a 70B llama)") {
		t.Errorf("no 70B note in\n%s", stdout)
	}
	checkMixture(t, in, "q5_k_m", base)

	in = filepath.Join(dir, "65b.gguf")
	for i := range base {
		if base[i].q4 == quant.Q5_K {
			base[i].q4 = quant.Q4_K
		}
	}
	writeMixInput(t, in, llamaKVs(80, gguf.KV{Key: "llama.attention.head_count", Value: gguf.Uint32(64)}), base)
	checkMixture(t, in, "q4_k_m", base)
}

// TestGGUFQuantizeMixtureRefused: the mixtures refuse files whose rules
// are not implemented (other architectures, experts, safetensors names)
// and a tensor llama.cpp's quantizer fails on, naming why, and leave no
// OUT.
func TestGGUFQuantizeMixtureRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 20))
	dir := t.TempDir()
	write := func(name string, kvs []gguf.KV, cases ...qcase) string {
		var mc []mixCase
		for _, c := range cases {
			mc = append(mc, mixCase{qcase: c})
		}
		p := filepath.Join(dir, name)
		writeMixInput(t, p, kvs, mc)
		return p
	}
	v := gaussTensor(rng, "blk.0.attn_v.weight", quant.F32, 2, 256)
	qwen := write("qwen.gguf", []gguf.KV{{Key: "general.architecture", Value: gguf.String("qwen2")}, {Key: "qwen2.block_count", Value: gguf.Uint32(1)}}, v)
	noArch := write("noarch.gguf", nil, v)
	moe := write("moe.gguf", llamaKVs(1, gguf.KV{Key: "llama.expert_count", Value: gguf.Uint32(8)}), v)
	noBlocks := write("noblocks.gguf", []gguf.KV{{Key: "general.architecture", Value: gguf.String("llama")}}, v)
	odd := write("odd.gguf", llamaKVs(1), v, gaussTensor(rng, "token_embd.weight", quant.F32, 2, 40))
	st := filepath.Join(dir, "model.safetensors")
	must(t, safetensors.WriteFile(st, []safetensors.WriteTensor{stTensor(v)}, nil))
	out := filepath.Join(dir, "out.gguf")
	for _, c := range []struct {
		typ, in string
		want    []string
	}{
		{"q4_k_m", qwen, []string{"qwen.gguf", `general.architecture is "qwen2"`, `-type q4_k_m follows llama.cpp's rules for "llama" only`, "use -type q4_k"}},
		{"Q5_K_M", noArch, []string{"noarch.gguf", "general.architecture is (none)", "-type q5_k_m", "use -type q5_k"}},
		{"q4_k_m", moe, []string{"llama.expert_count is 8", "mixtures of experts"}},
		{"q4_k_m", noBlocks, []string{"needs llama.block_count"}},
		{"q5_k_m", odd, []string{`tensor "token_embd.weight" (shape [2 40])`, "q5_k_m gives it q8_0", "no fallback from q8_0", "llama.cpp's quantizer"}},
		{"q4_k_m", st, []string{"model.safetensors", "a safetensors input has neither", "use -type q4_k"}},
	} {
		status, stdout, stderr := loom(t, "gguf", "quantize", "-type", c.typ, c.in, out)
		if status != exitFail || !strings.HasPrefix(stderr, "loom gguf quantize: ") {
			t.Errorf("-type %s %s: exit %d, stderr %q, stdout %q", c.typ, c.in, status, stderr, stdout)
		}
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("-type %s %s: stderr %q lacks %q", c.typ, c.in, stderr, w)
			}
		}
	}
	noLeftovers(t, dir, "model.safetensors", "moe.gguf", "noarch.gguf", "noblocks.gguf", "odd.gguf", "qwen.gguf")
}

// TestMixtureVisitOrder: llama.cpp visits tensors by the number after
// "blk." (−1 without one), then by name; blkLayer reads that number as
// sscanf("blk.%d.") does.
func TestMixtureVisitOrder(t *testing.T) {
	for name, want := range map[string]int{
		"blk.0.attn_v.weight": 0, "blk.10.ffn_down.weight": 10, "blk.7": 7, "blk.+3.x": 3,
		"blk.-2.x": -2, "blk. 4.x": 4, "blk.x.y": -1, "token_embd.weight": -1, "blk.": -1, "xblk.1.a": -1,
	} {
		if got := blkLayer(name); got != want {
			t.Errorf("blkLayer(%q) = %d, want %d", name, got, want)
		}
	}
}

// TestGGUFQuantizeSmallMixtures quantizes a 16-layer llama model (tied
// embeddings) with -type q3_k_s, q3_k_m, q3_k_l, q4_k_s and q5_k_s and
// checks every tensor against types worked out by hand from
// llama_tensor_get_type_impl (src/llama-quant.cpp) for a dense llama:
//   - the tied token_embd.weight: Q6_K, as the output;
//   - attn_v: Q3_K_M Q5_K in the first two (by llama.cpp's count), Q4_K
//     after; Q3_K_L Q5_K; Q4_K_S Q5_K in the first four; Q3_K_S and
//     Q5_K_S the base type;
//   - ffn_down: Q3_K_M Q5_K in layer 0 (i < 16/16), Q4_K after; Q3_K_L
//     Q5_K; Q4_K_S Q5_K in layers 0 and 1 (i < 16/8);
//   - attn_output: Q3_K_M Q4_K, Q3_K_L Q5_K;
//   - everything else the base type (Q3_K, Q4_K, Q5_K); blk.7's attn_q,
//     with rows of 288 values, falls back: Q3_K → Q4_0, Q4_K → Q5_0,
//     Q5_K → Q5_1.
//
// An 80-layer model with fewer key/value heads (70B) gives Q3_K_S's
// attn_v Q5_K (Q3_K and Q4_K take Q5_K there).
func TestGGUFQuantizeSmallMixtures(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 21))
	const embd = 256
	mixes := []string{"q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q5_k_s"}
	var cases []mixCase
	// add: a tensor and its type under each of mixes, in that order.
	add := func(c qcase, types ...quant.Type) {
		m := map[string]quant.Type{}
		for i, mix := range mixes {
			m[mix] = types[i]
		}
		cases = append(cases, mixCase{qcase: c, more: m})
	}
	const q3, q4, q5, q6 = quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K
	add(gaussTensor(rng, "token_embd.weight", quant.F16, 8, embd), q6, q6, q6, q6, q6)
	for l := range 16 {
		p := fmt.Sprintf("blk.%d.", l)
		norm := qcase{name: p + "attn_norm.weight", typ: quant.F32, shape: []int{embd}, data: make([]byte, 4*embd), kept: "rank 1"}
		add(norm, quant.F32, quant.F32, quant.F32, quant.F32, quant.F32)
		if l == 7 {
			add(gaussTensor(rng, p+"attn_q.weight", quant.F32, 2, 288), quant.Q4_0, quant.Q4_0, quant.Q4_0, quant.Q5_0, quant.Q5_1)
		} else {
			add(gaussTensor(rng, p+"attn_q.weight", quant.F32, 4, embd), q3, q3, q3, q4, q5)
		}
		add(gaussTensor(rng, p+"attn_k.weight", quant.BF16, 2, embd), q3, q3, q3, q4, q5)
		v3m, v4s := q4, q4
		if l < 2 {
			v3m = q5
		}
		if l < 4 {
			v4s = q5
		}
		add(gaussTensor(rng, p+"attn_v.weight", quant.F16, 2, embd), q3, v3m, q5, v4s, q5)
		add(gaussTensor(rng, p+"attn_output.weight", quant.F32, 4, embd), q3, q4, q5, q4, q5)
		add(gaussTensor(rng, p+"ffn_gate.weight", quant.F16, 2, embd), q3, q3, q3, q4, q5)
		add(gaussTensor(rng, p+"ffn_up.weight", quant.F16, 2, embd), q3, q3, q3, q4, q5)
		d3m, d4s := q4, q4
		if l < 1 {
			d3m = q5
		}
		if l < 2 {
			d4s = q5
		}
		add(gaussTensor(rng, p+"ffn_down.weight", quant.F16, 2, embd), q3, d3m, q5, d4s, q5)
	}
	rng.Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
	in := filepath.Join(t.TempDir(), "tied.gguf")
	writeMixInput(t, in, llamaKVs(16), cases)
	for _, mix := range mixes {
		stdout := checkMixture(t, in, mix, cases)
		if mix == "q3_k_m" {
			for _, want := range []string{
				"(q3_k_m: attn_v 1 of 16, one of the first two)",
				"(q3_k_m: ffn_down 0 of 16, in the first sixteenth)",
				"(q3_k_m: attn_output)",
				"(q3_k_m: rows of 288 values are not whole q3_k blocks)",
				"(q3_k_m: the output (tied: no output.weight))",
			} {
				if !strings.Contains(stdout, want) {
					t.Errorf("q3_k_m: no %q in\n%s", want, stdout)
				}
			}
		}
	}

	// 70B: attn_v's Q3_K becomes Q5_K (q3_k_s); one layer is enough to
	// see it, with block_count 80 and fewer key/value heads.
	big := []mixCase{}
	for _, c := range []mixCase{
		{qcase: gaussTensor(rng, "blk.0.attn_v.weight", quant.F16, 2, embd), more: map[string]quant.Type{"q3_k_s": q5}},
		{qcase: gaussTensor(rng, "blk.0.attn_q.weight", quant.F16, 2, embd), more: map[string]quant.Type{"q3_k_s": q3}},
		{qcase: gaussTensor(rng, "output.weight", quant.F16, 2, embd), more: map[string]quant.Type{"q3_k_s": q6}},
	} {
		big = append(big, c)
	}
	in70 := filepath.Join(t.TempDir(), "70b.gguf")
	writeMixInput(t, in70, llamaKVs(80, gguf.KV{Key: "llama.attention.head_count", Value: gguf.Uint32(64)},
		gguf.KV{Key: "llama.attention.head_count_kv", Value: gguf.Uint32(8)}), big)
	if stdout := checkMixture(t, in70, "q3_k_s", big); !strings.Contains(stdout, "(q3_k_s: attn_v of a 70B llama)") {
		t.Errorf("q3_k_s 70B: no attn_v note in\n%s", stdout)
	}
}

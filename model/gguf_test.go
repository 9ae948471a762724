package model

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// prefillAll runs a fresh session's PrefillAll, then decode steps feeding
// more ids; it returns the logits of every prompt position followed by
// one row per decode step.
func prefillDecode(t *testing.T, m *Model, prompt, more []int) [][]float32 {
	t.Helper()
	rows, err := prefillDecodeRows(m, prompt, more)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// prefillDecodeRows is prefillDecode returning its error, for goroutines
// (the ranks of a tensor-parallel model) that must not fail the test.
func prefillDecodeRows(m *Model, prompt, more []int) ([][]float32, error) {
	s, err := m.NewSession(1)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	all, err := s.PrefillAll(ctx, [][]int{prompt})
	if err != nil {
		return nil, err
	}
	var rows [][]float32
	add := func(x *tensor.Tensor, i int) error {
		v, err := tensor.Values[float32](x)
		if err != nil {
			return err
		}
		n := x.Shape()[len(x.Shape())-1]
		rows = append(rows, slices.Clone(v[i*n:(i+1)*n]))
		return nil
	}
	for p := range prompt {
		if err := add(all, p); err != nil {
			return nil, err
		}
	}
	for _, id := range more {
		l, err := s.Decode(ctx, []int{id})
		if err != nil {
			return nil, err
		}
		if err := add(l, 0); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// TestGGUFEqualsSafetensors: the same f32 weights written as GGUF (names,
// metadata and Q/K row permutation as llama.cpp's converter writes them)
// load into the same graph as the safetensors checkpoint, so every logit
// is bit-identical.
func TestGGUFEqualsSafetensors(t *testing.T) {
	dir, w, _ := tiny(t)
	path := filepath.Join(t.TempDir(), "tiny-f32.gguf")
	if err := WriteGGUF(path, TinyConfig(), w, quant.F32); err != nil {
		t.Fatal(err)
	}
	hf, gg := load(t, dir, Options{}), load(t, path, Options{})
	// GGUF stores ε as float32, as llama.cpp does; both graphs add it to a
	// float32 mean, as PyTorch adds the Python float, so both compute with
	// float32(1e-5) and the logits can be bit-identical.
	hc := hf.Config()
	hc.RMSEps = float64(float32(hc.RMSEps))
	if gg.Config() != hc {
		t.Errorf("GGUF config %+v\nsafetensors config %+v", gg.Config(), hc)
	}
	if len(gg.Quantized()) != 0 {
		t.Errorf("quantized weights in an f32 file: %v", gg.Quantized())
	}
	prompt, more := randomIDs(20, 12, 1024), randomIDs(21, 6, 1024)
	a, b := prefillDecode(t, hf, prompt, more), prefillDecode(t, gg, prompt, more)
	for p := range a {
		if !slices.Equal(a[p], b[p]) {
			t.Errorf("position %d: GGUF and safetensors logits differ (error %.3g)", p, relErr(b[p], f64s(a[p])))
		}
	}
}

// dequantized returns the weights as a GGUF file of format holds them,
// in Hugging Face's layout: every matrix whose rows are whole blocks
// quantized and dequantized row by row (quantization is per row, so the
// row permutation of Q and K does not change any row's values).
func dequantized(t *testing.T, w []NamedTensor, format quant.Type) []NamedTensor {
	t.Helper()
	return dequantizedFunc(t, w, func(string) quant.Type { return format })
}

// dequantizedFunc is dequantized with each matrix's format chosen by its
// GGUF name, as NewGGUFWriterFunc chooses it.
func dequantizedFunc(t *testing.T, w []NamedTensor, formatOf func(name string) quant.Type) []NamedTensor {
	t.Helper()
	var out []NamedTensor
	for _, nt := range w {
		s := nt.T.Shape()
		format := formatOf(ggufName(nt.Name))
		tr, _ := format.Traits()
		if len(s) != 2 || s[1]%tr.Block != 0 {
			out = append(out, nt)
			continue
		}
		vals := make([]float32, nt.T.Numel())
		for i := range vals {
			vals[i] = float32(nt.T.Float64(i))
		}
		rb, _ := format.RowBytes(int64(s[1]))
		raw := make([]byte, int(rb)*s[0])
		if err := quant.Quantize(format, vals, raw); err != nil {
			t.Fatal(err)
		}
		if err := quant.Dequantize(format, raw, vals); err != nil {
			t.Fatal(err)
		}
		dq, _ := tensor.FromFloat32s(dtype.F32, vals, s...)
		out = append(out, NamedTensor{nt.Name, dq})
	}
	return out
}

// TestGGUFQuantized loads Q8_0 and Q4_K files (every matrix with whole
// blocks quantized, the embedding and LM head included; ffn_down's rows of
// 688 are not whole blocks and stay f32) and checks the logits against the
// float64 reference over the dequantized weights. What is left is the
// quantized matmul's own rounding: like GGML it quantizes the activations
// to Q8_0 / Q8_K (8 bits per value, one scale per block) before the integer
// dot products: Q8_0 blocks of 32 for Q8_0 weights, Q8_K blocks of 256 for
// Q4_K (one scale per 256 values, so a coarser grid). That is about 1% of
// a product's size, and through 4 layers 1.5% (Q8_0) and 2.5% (Q4_K) of
// the largest logit here; a wrong weight layout or dequantization is tens
// of percent.
func TestGGUFQuantized(t *testing.T) {
	_, w, _ := tiny(t)
	prompt, more := randomIDs(22, 16, 1024), randomIDs(23, 8, 1024)
	for _, c := range []struct {
		format quant.Type
		tol    float64
	}{{quant.Q8_0, 3e-2}, {quant.Q4_K, 4e-2}} {
		t.Run(c.format.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tiny.gguf")
			if err := WriteGGUF(path, TinyConfig(), w, c.format); err != nil {
				t.Fatal(err)
			}
			m := load(t, path, Options{})
			q := m.Quantized()
			if q["blk.0.attn_q.weight"] != c.format || q["token_embd.weight"] != c.format || q["output.weight"] != c.format {
				t.Errorf("quantized weights %v", q)
			}
			if _, ok := q["blk.0.ffn_down.weight"]; ok || m.DType() != dtype.F32 {
				t.Errorf("ffn_down (rows of 688) quantized, or dtype %v", m.DType())
			}
			ref := newRef(TinyConfig(), dequantized(t, w, c.format))
			want := ref.forward(append(slices.Clone(prompt), more...))
			got := prefillDecode(t, m, prompt, more)
			worst := 0.0
			for p := range got {
				e := relErr(got[p], want[p])
				worst = math.Max(worst, e)
				if e > c.tol {
					t.Errorf("position %d: error %.3g, want ≤ %g", p, e, c.tol)
				}
			}
			t.Logf("%v: largest error %.3g against the dequantized float64 reference", c.format, worst)
		})
	}
}

// mixedLayers are the weights a mixed tiny file (writeMixedTiny) stores in
// its other format: layers 1 and 3's values, as llama.cpp's k-quant
// mixtures give some layers' attn_v a type of their own.
var mixedLayers = map[string]bool{"blk.1.attn_v.weight": true, "blk.3.attn_v.weight": true}

// writeMixedTiny writes the tiny model's weights w as a GGUF file, every
// matrix in base but mixedLayers in other, and returns its path and each
// weight's format.
func writeMixedTiny(t testing.TB, w []NamedTensor, base, other quant.Type) (string, func(string) quant.Type) {
	t.Helper()
	formatOf := func(name string) quant.Type {
		if mixedLayers[name] {
			return other
		}
		return base
	}
	gw, err := NewGGUFWriterFunc(TinyConfig(), w, formatOf)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("tiny-%v-%v.gguf", base, other))
	if err := gw.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path, formatOf
}

// TestGGUFMixedFormats loads a file whose layers store their projections
// in different formats, as llama.cpp's Q4_K_M does (Q6_K for some layers'
// attn_v, Q4_K for the rest): where a layer's values are stored otherwise
// than its queries and keys, the queries and keys are still one product
// (attn_qk) and the values one of their own; where all three are alike,
// one (attn_qkv). The logits match the float64 reference over the
// dequantized weights, prefill and decode, and a decode step runs one
// product more for each mixed layer than for the others.
func TestGGUFMixedFormats(t *testing.T) {
	_, w, _ := tiny(t)
	cfg := TinyConfig()
	mixed := mixedLayers
	path, formatOf := writeMixedTiny(t, w, quant.Q4_K, quant.Q6_K)
	m := load(t, path, Options{})
	if q := m.Quantized(); q["blk.1.attn_v.weight"] != quant.Q6_K || q["blk.0.attn_v.weight"] != quant.Q4_K || q["blk.1.attn_q.weight"] != quant.Q4_K {
		t.Errorf("quantized weights %v", q)
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		_, qkv := m.fused[p+"attn_qkv.weight"]
		_, qk := m.fused[p+"attn_qk.weight"]
		wantQK, wantQKV := mixed[p+"attn_v.weight"] && !noQKFusion, !mixed[p+"attn_v.weight"]
		if qk != wantQK || qkv != wantQKV || (wantQK || wantQKV) && !m.ropePaired[p+map[bool]string{true: "attn_qk", false: "attn_qkv"}[wantQK]+".weight"] {
			t.Errorf("layer %d: attn_qkv fused %v, attn_qk fused %v, want attn_qk %v (rotation paired)", l, qkv, qk, wantQK)
		}
	}
	prompt, more := randomIDs(24, 16, cfg.Vocab), randomIDs(25, 8, cfg.Vocab)
	want := newRef(cfg, dequantizedFunc(t, w, formatOf)).forward(append(slices.Clone(prompt), more...))
	got := prefillDecode(t, m, prompt, more)
	worst := 0.0
	for p := range got {
		e := relErr(got[p], want[p])
		worst = math.Max(worst, e)
		if e > 4e-2 {
			t.Errorf("position %d: error %.3g, want ≤ 0.04", p, e)
		}
	}
	t.Logf("largest error %.3g against the dequantized float64 reference", worst)
	// Products a decode step: per layer q/k/v (or q/k and v), the output
	// projection, gate/up and down; then the LM head.
	p, _, err := m.decodeProgram(ctx, decodeKey{1, m.decodeWindow(16)})
	if err != nil {
		t.Fatal(err)
	}
	products := 0
	for _, s := range p.Plan().Steps {
		for _, in := range s.Kernel.Instrs {
			if in.Node.Op == ir.OpMatmul || in.Node.Op == ir.OpQMatmul {
				products++
				break
			}
		}
	}
	wantProducts := 4*cfg.Layers + len(mixed) + 1
	if noQKFusion { // LOOM_QK_FUSION=0: the mixed layers' queries and keys two products
		wantProducts += len(mixed)
	}
	if products != wantProducts {
		t.Errorf("%d products in a decode step, want %d", products, wantProducts)
	}
}

// TestGGUFWidenedFusion loads a file laid out as llama.cpp's Q4_K_M of a
// model whose rows are not whole super-blocks (SmolLM-135M's): every
// matrix Q5_0, except layers 1 and 3's attn_v in Q8_0. Those layers'
// queries and keys are re-encoded as Q8_0 (quant.WidenToQ8_0, lossless) so
// that all three projections are still one product (attn_qkv), unless
// LOOM_WIDEN_FUSION=0; the stored formats are still reported as the file
// has them, and the logits match the float64 reference over the file's
// dequantized weights, prefill and decode.
func TestGGUFWidenedFusion(t *testing.T) {
	_, w, _ := tiny(t)
	cfg := TinyConfig()
	mixed := mixedLayers
	path, formatOf := writeMixedTiny(t, w, quant.Q5_0, quant.Q8_0)
	m := load(t, path, Options{})
	if q := m.Quantized(); q["blk.1.attn_v.weight"] != quant.Q8_0 || q["blk.1.attn_q.weight"] != quant.Q5_0 || q["blk.0.attn_v.weight"] != quant.Q5_0 {
		t.Errorf("quantized weights %v", q)
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		_, qkv := m.fused[p+"attn_qkv.weight"]
		_, qk := m.fused[p+"attn_qk.weight"]
		want := quant.Q5_0
		if mixed[p+"attn_v.weight"] {
			want = quant.Q8_0
		}
		if noWidenFusion && mixed[p+"attn_v.weight"] {
			if qkv || !qk {
				t.Errorf("layer %d (LOOM_WIDEN_FUSION=0): attn_qkv fused %v, attn_qk %v", l, qkv, qk)
			}
			continue
		}
		if !qkv || qk || m.quant[p+"attn_qkv.weight"] != want {
			t.Errorf("layer %d: attn_qkv fused %v (%v), attn_qk %v; want attn_qkv in %v", l, qkv, m.quant[p+"attn_qkv.weight"], qk, want)
		}
	}
	prompt, more := randomIDs(26, 16, cfg.Vocab), randomIDs(27, 8, cfg.Vocab)
	want := newRef(cfg, dequantizedFunc(t, w, formatOf)).forward(append(slices.Clone(prompt), more...))
	got := prefillDecode(t, m, prompt, more)
	worst := 0.0
	for p := range got {
		e := relErr(got[p], want[p])
		worst = math.Max(worst, e)
		if e > 4e-2 {
			t.Errorf("position %d: error %.3g, want ≤ 0.04", p, e)
		}
	}
	t.Logf("largest error %.3g against the dequantized float64 reference", worst)
}

// variantConfig exercises what the tiny config does not: tied embeddings,
// biases on every projection, llama3 rope scaling (an original context of
// 64 puts the tiny model's frequencies in all three bands), and a group of
// 2 query heads per key/value head.
func variantConfig() Config {
	c := TinyConfig()
	c.Layers, c.KVHeads = 2, 4
	c.TieEmbeddings, c.AttentionBias, c.MLPBias = true, true, true
	c.RopeScaling = RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 64}
	return c
}

func TestVariant(t *testing.T) {
	cfg := variantConfig()
	w, err := RandomWeights(cfg, 3, dtype.F32)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteHF(dir, cfg, w); err != nil {
		t.Fatal(err)
	}
	hf := load(t, dir, Options{})
	if got := hf.Config(); got != cfg {
		t.Fatalf("config read back %+v\nwritten %+v", got, cfg)
	}
	for _, nt := range w {
		if nt.Name == "lm_head.weight" {
			t.Fatal("tied embeddings written with an lm_head")
		}
	}
	prompt, more := randomIDs(30, 40, 1024), randomIDs(31, 8, 1024)
	want := newRef(cfg, w).forward(append(slices.Clone(prompt), more...))
	got := prefillDecode(t, hf, prompt, more)
	for p := range got {
		if e := relErr(got[p], want[p]); e > tolF32 {
			t.Errorf("position %d: error %.3g", p, e)
		}
	}
	// The GGUF form carries llama3 scaling as rope_freqs.weight and the
	// biases permuted like their matrices; the frequencies differ from
	// the safetensors path's by rounding only.
	path := filepath.Join(t.TempDir(), "variant.gguf")
	if err := WriteGGUF(path, cfg, w, quant.F32); err != nil {
		t.Fatal(err)
	}
	gg := load(t, path, Options{})
	if gc := gg.Config(); gc.RopeScaling.Type != "" || !gc.TieEmbeddings {
		t.Errorf("GGUF config %+v: want llama3 scaling as rope_freqs and tied embeddings", gc)
	}
	got2 := prefillDecode(t, gg, prompt, more)
	for p := range got2 {
		if e := relErr(got2[p], f64s(got[p])); e > 1e-5 {
			t.Errorf("position %d: GGUF and safetensors differ by %.3g", p, e)
		}
	}
	// Quantized and tied: the LM head is the quantized embedding table.
	qpath := filepath.Join(t.TempDir(), "variant-q8.gguf")
	if err := WriteGGUF(qpath, cfg, w, quant.Q8_0); err != nil {
		t.Fatal(err)
	}
	qm := load(t, qpath, Options{})
	qwant := newRef(cfg, dequantized(t, w, quant.Q8_0)).forward(prompt)
	qgot := prefillDecode(t, qm, prompt, nil)
	for p := range qgot {
		if e := relErr(qgot[p], qwant[p]); e > 3e-2 {
			t.Errorf("Q8_0, position %d: error %.3g", p, e)
		}
	}
}

func TestInvFreq(t *testing.T) {
	for _, cfg := range []Config{TinyConfig(), variantConfig(), Llama1BConfig(),
		func() Config { c := TinyConfig(); c.RopeScaling = RopeScaling{Type: "linear", Factor: 4}; return c }()} {
		got, err := invFreq(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := newRef(cfg, nil).inv
		for i := range want {
			if e := math.Abs(float64(got[i])-want[i]) / want[i]; e > 1e-6 {
				t.Errorf("%+v: inv_freq[%d] = %g, want %g", cfg.RopeScaling, i, got[i], want[i])
			}
		}
		// llama.cpp's form: the default frequencies divided by rope_freqs.
		if cfg.RopeScaling.Type == "llama3" {
			plain := cfg
			plain.RopeScaling = RopeScaling{}
			viaFactors, err := invFreq(plain, llama3Factors(cfg))
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if e := math.Abs(float64(viaFactors[i])-want[i]) / want[i]; e > 1e-6 {
					t.Errorf("via rope_freqs: inv_freq[%d] = %g, want %g", i, viaFactors[i], want[i])
				}
			}
		}
	}
	if _, err := invFreq(TinyConfig(), make([]float32, 3)); err == nil {
		t.Error("rope_freqs of the wrong length accepted")
	}
}

// TestPermute checks llama.cpp's Q/K row permutation on a head of 4 rows
// by hand (rows (half, i) = r0 r1 | r2 r3 go to row 2i+half: r0 r2 r1 r3)
// and that undoPermute inverts it for rows of any width.
func TestPermute(t *testing.T) {
	got := permuteRows([]float32{0, 0, 1, 1, 2, 2, 3, 3}, []int{4, 2}, 1)
	if want := []float32{0, 0, 2, 2, 1, 1, 3, 3}; !slices.Equal(got, want) {
		t.Errorf("permuteRows: %v, want %v", got, want)
	}
	got = permuteRows([]float32{0, 1, 2, 3, 4, 5, 6, 7}, []int{8}, 2) // two heads of 4, a bias
	if want := []float32{0, 2, 1, 3, 4, 6, 5, 7}; !slices.Equal(got, want) {
		t.Errorf("permuteRows of a bias: %v, want %v", got, want)
	}
	data := make([]byte, 12*34) // 12 rows of one Q8_0 block
	for i := range data {
		data[i] = byte(i * 7)
	}
	rows := make([]float32, 12)
	for i := range rows {
		rows[i] = float32(i)
	}
	perm := permuteRows(rows, []int{12}, 3)
	var stored []byte
	for _, r := range perm {
		stored = append(stored, data[int(r)*34:(int(r)+1)*34]...)
	}
	if back := undoPermute(stored, []int{12, 32}, 3); !bytes.Equal(back, data) {
		t.Error("undoPermute does not invert permuteRows")
	}
	// interleaveHalves (the fused projection's queries and keys) is
	// llama.cpp's permutation again: 3 heads of 4 rows.
	raw, err := tensor.New(slices.Clone(data), 12, 34)
	if err != nil {
		t.Fatal(err)
	}
	il, err := interleaveHalves(raw, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(il.Bytes(), stored) {
		t.Error("interleaveHalves does not permute rows as llama.cpp's converter does")
	}
	if _, err := interleaveHalves(raw, 5); err == nil {
		t.Error("interleaveHalves of 12 rows in heads of 5: no error")
	}
}

package model

import (
	"context"
	"fmt"
	"github.com/loomgraph/loom/ir"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// The tiny model, written once per test binary (f32, seed 1), and its
// weights.
var tinyFixture struct {
	once sync.Once
	dir  string
	w    []NamedTensor
	ref  *refModel
	err  error
}

var fixtureRoot string

func TestMain(m *testing.M) {
	var err error
	fixtureRoot, err = os.MkdirTemp("", "loom-model-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(fixtureRoot)
	os.Exit(code)
}

const tinySeed = 1

// tiny returns the tiny f32 model's directory, weights and reference.
func tiny(t testing.TB) (string, []NamedTensor, *refModel) {
	t.Helper()
	f := &tinyFixture
	f.once.Do(func() {
		f.dir = filepath.Join(fixtureRoot, "tiny")
		if f.w, f.err = RandomWeights(TinyConfig(), tinySeed, dtype.F32); f.err == nil {
			f.err = WriteHF(f.dir, TinyConfig(), f.w)
			f.ref = newRef(TinyConfig(), f.w)
		}
	})
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f.dir, f.w, f.ref
}

func load(t testing.TB, path string, opts Options) *Model {
	t.Helper()
	m, err := Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// randomIDs returns n token ids below vocab from a seeded generator.
func randomIDs(seed uint64, n, vocab int) []int {
	r := rand.New(rand.NewPCG(seed, 99))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = r.IntN(vocab)
	}
	return ids
}

var ctx = context.Background()

// f32 tolerance against the float64 reference, relative to the largest
// logit of the position: float32 rounding through 4 layers of sums of 256
// to 688 terms stays near 1e-6; 1e-4 is the brief's bound.
const tolF32 = 1e-4

func TestPrefillMatchesReference(t *testing.T) {
	dir, _, ref := tiny(t)
	m := load(t, dir, Options{})
	if m.DType() != dtype.F32 || m.MaxSeqLen() != 2048 {
		t.Fatalf("dtype %v, max seq %d; want f32, 2048", m.DType(), m.MaxSeqLen())
	}
	prompt := randomIDs(1, 32, 1024)
	want := ref.forward(prompt)
	s, _ := m.NewSession(1)
	defer s.Close()
	got, err := s.PrefillAll(ctx, [][]int{prompt})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Shape(), []int{1, 32, 1024}) || got.DType() != dtype.F32 {
		t.Fatalf("logits %v%v, want f32[1 32 1024]", got.DType(), got.Shape())
	}
	worst := 0.0
	for p := range prompt {
		e := relErr(row(t, got, p), want[p])
		worst = math.Max(worst, e)
		if e > tolF32 {
			t.Errorf("position %d: error %.3g relative to the largest logit, want ≤ %g", p, e, tolF32)
		}
	}
	t.Logf("prefill of 32 tokens: largest error %.3g", worst)
	// The last-position program gives the last row of the all-position one.
	last, err := s.Prefill(ctx, [][]int{prompt})
	if err != nil {
		t.Fatal(err)
	}
	if e := relErr(row(t, last, 0), want[31]); e > tolF32 {
		t.Errorf("Prefill's last position: error %.3g", e)
	}
	if s.Pos() != 32 || s.CacheBytes() != 2*4*2*2048*32*4 {
		t.Errorf("Pos %d, CacheBytes %d", s.Pos(), s.CacheBytes())
	}
}

func TestDecodeMatchesReference(t *testing.T) {
	dir, _, ref := tiny(t)
	m := load(t, dir, Options{})
	seq := randomIDs(2, 56, 1024) // 8 prompt tokens, then 48 decoded (teacher forcing)
	want := ref.forward(seq)
	s, _ := m.NewSession(1)
	defer s.Close()
	logits, err := s.Prefill(ctx, [][]int{seq[:8]})
	if err != nil {
		t.Fatal(err)
	}
	worst := relErr(row(t, logits, 0), want[7])
	decoded := map[int][]float32{}
	for p := 8; p < len(seq); p++ {
		logits, err := s.Decode(ctx, []int{seq[p]})
		if err != nil {
			t.Fatalf("decode at position %d: %v", p, err)
		}
		got := row(t, logits, 0)
		decoded[p] = got
		e := relErr(got, want[p])
		worst = math.Max(worst, e)
		if e > tolF32 {
			t.Errorf("decode at position %d: error %.3g relative to the largest logit, want ≤ %g", p, e, tolF32)
		}
	}
	t.Logf("8-token prefill then 48 decode steps: largest error %.3g", worst)
	// Decode after prefill computes what a prefill of the longer prompt
	// computes at its last position: the same sums in other GEMM shapes,
	// so equal to float32 rounding.
	for _, n := range []int{9, 33, 56} {
		s2, _ := m.NewSession(1)
		long, err := s2.Prefill(ctx, [][]int{seq[:n]})
		s2.Close()
		if err != nil {
			t.Fatal(err)
		}
		if e := relErr(decoded[n-1], f64s(row(t, long, 0))); e > 1e-5 {
			t.Errorf("position %d: decode and prefill of %d tokens differ by %.3g", n-1, n, e)
		}
	}
}

func f64s(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// TestBatch runs two sequences at once: each row is that sequence's
// reference, so neither the batched products nor the per-sequence
// positions, rope rows and masks mix them.
func TestBatch(t *testing.T) {
	dir, _, ref := tiny(t)
	m := load(t, dir, Options{})
	a, b := randomIDs(3, 20, 1024), randomIDs(4, 20, 1024)
	wa, wb := ref.forward(a), ref.forward(b)
	s, _ := m.NewSession(2)
	defer s.Close()
	logits, err := s.Prefill(ctx, [][]int{a[:12], b[:12]})
	if err != nil {
		t.Fatal(err)
	}
	check := func(p int, logits *tensor.Tensor) {
		t.Helper()
		if e := relErr(row(t, logits, 0), wa[p]); e > tolF32 {
			t.Errorf("sequence 0, position %d: error %.3g", p, e)
		}
		if e := relErr(row(t, logits, 1), wb[p]); e > tolF32 {
			t.Errorf("sequence 1, position %d: error %.3g", p, e)
		}
	}
	check(11, logits)
	for p := 12; p < 20; p++ {
		if logits, err = s.Decode(ctx, []int{a[p], b[p]}); err != nil {
			t.Fatal(err)
		}
		check(p, logits)
	}
}

// TestGreedy: greedy generation is deterministic and each token is the
// reference's argmax after the prompt and the tokens before it.
func TestGreedy(t *testing.T) {
	dir, _, ref := tiny(t)
	m := load(t, dir, Options{})
	prompt := randomIDs(5, 16, 1024)
	g1, err := m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 24})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 24})
	if err != nil {
		t.Fatal(err)
	}
	if len(g1.Tokens) != 24 || !slices.Equal(g1.Tokens, g2.Tokens) || g1.StopReason != StopMaxTokens {
		t.Fatalf("greedy runs differ or stop early: %v (%s) and %v", g1.Tokens, g1.StopReason, g2.Tokens)
	}
	if g1.PromptTokens != 16 || g1.DecodeSteps != 23 || g1.PromptTokensPerSecond() <= 0 || g1.DecodeTokensPerSecond() <= 0 {
		t.Errorf("stats: %+v", g1)
	}
	want := ref.forward(append(slices.Clone(prompt), g1.Tokens...))
	for i, id := range g1.Tokens {
		w := want[len(prompt)-1+i]
		if best := argmax64(w); id != best {
			t.Errorf("token %d: %d, the reference's argmax is %d (logits %g vs %g)", i, id, best, w[id], w[best])
		}
	}
	t.Logf("greedy: %v; prompt %.0f tok/s, decode %.0f tok/s", g1.Tokens, g1.PromptTokensPerSecond(), g1.DecodeTokensPerSecond())
}

func TestSamplingReproducible(t *testing.T) {
	dir, _, _ := tiny(t)
	m := load(t, dir, Options{})
	prompt := randomIDs(6, 10, 1024)
	gen := func(seed uint64, k int, p float64) []int {
		t.Helper()
		g, err := m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 20, Temperature: 0.8, TopK: k, TopP: p, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return g.Tokens
	}
	a, b, c := gen(7, 50, 0.9), gen(7, 50, 0.9), gen(8, 50, 0.9)
	if !slices.Equal(a, b) {
		t.Errorf("seed 7 twice: %v and %v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 gave the same tokens %v", a)
	}
	greedy, err := m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 20})
	if err != nil {
		t.Fatal(err)
	}
	if k1 := gen(9, 1, 0); !slices.Equal(k1, greedy.Tokens) {
		t.Errorf("top-k 1 sampling %v, greedy %v", k1, greedy.Tokens)
	}
}

func TestStopAndCallback(t *testing.T) {
	dir, _, _ := tiny(t)
	m := load(t, dir, Options{})
	prompt := randomIDs(10, 8, 1024)
	full, err := m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	stop := full.Tokens[5]
	first := slices.Index(full.Tokens, stop)
	g, err := m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 12, StopTokens: []int{stop}})
	if err != nil {
		t.Fatal(err)
	}
	if g.StopReason != StopToken || !slices.Equal(g.Tokens, full.Tokens[:first+1]) {
		t.Errorf("stop token %d: %v (%s), want %v", stop, g.Tokens, g.StopReason, full.Tokens[:first+1])
	}
	var seen []int
	g, err = m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 12, OnToken: func(id int) bool {
		seen = append(seen, id)
		return len(seen) < 3
	}})
	if err != nil {
		t.Fatal(err)
	}
	if g.StopReason != StopCallback || !slices.Equal(g.Tokens, full.Tokens[:3]) || !slices.Equal(seen, g.Tokens) {
		t.Errorf("callback: %v (%s), saw %v, want %v", g.Tokens, g.StopReason, seen, full.Tokens[:3])
	}
	// A context of 12 positions holds the 8-token prompt and 4 decoded
	// tokens: 5 tokens come out (the last needs no cache slot).
	small := load(t, dir, Options{MaxSeqLen: 12})
	g, err = small.Generate(ctx, prompt, GenerateOptions{MaxTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	if g.StopReason != StopContextFull || !slices.Equal(g.Tokens, full.Tokens[:5]) {
		t.Errorf("context of 12: %v (%s), want %v", g.Tokens, g.StopReason, full.Tokens[:5])
	}
	if g, err := m.Generate(ctx, prompt, GenerateOptions{}); err != nil || len(g.Tokens) != 0 {
		t.Errorf("MaxTokens 0: %v, %v", g, err)
	}
}

// TestBF16 computes in bf16 from the f32 checkpoint: the reference gets the
// weights rounded to bf16 as Load rounds them, so what is left is the
// bf16 rounding of activations at every op (8 significant bits; through 4
// layers a few percent of the largest logit).
func TestBF16(t *testing.T) {
	dir, w, _ := tiny(t)
	m := load(t, dir, Options{DType: dtype.BF16})
	if m.DType() != dtype.BF16 {
		t.Fatalf("dtype %v", m.DType())
	}
	var rounded []NamedTensor
	for _, nt := range w {
		vals := make([]float32, nt.T.Numel())
		for i := range vals {
			vals[i] = dtype.ToBF16(float32(nt.T.Float64(i))).Float32()
		}
		r, _ := tensor.FromFloat32s(dtype.F32, vals, nt.T.Shape()...)
		rounded = append(rounded, NamedTensor{nt.Name, r})
	}
	ref := newRef(TinyConfig(), rounded)
	prompt := randomIDs(11, 24, 1024)
	want := ref.forward(prompt)
	s, _ := m.NewSession(1)
	defer s.Close()
	got, err := s.PrefillAll(ctx, [][]int{prompt})
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for p := range prompt {
		e := relErr(row(t, got, p), want[p])
		worst = math.Max(worst, e)
		if e > 5e-2 {
			t.Errorf("position %d: error %.3g, want ≤ 5e-2", p, e)
		}
	}
	if _, err := s.Decode(ctx, []int{prompt[0]}); err != nil {
		t.Fatal(err)
	}
	t.Logf("bf16 prefill: largest error %.3g", worst)
}

// TestF16 stores the weights in f16 (safetensors and GGUF): the compute
// dtype follows the checkpoint, both files give the same logits, and they
// match the reference over the same f16 weights within f16's rounding of
// every op (11 significant bits).
func TestF16(t *testing.T) {
	cfg := TinyConfig()
	cfg.Layers = 2
	w, err := RandomWeights(cfg, 2, dtype.F16)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteHF(dir, cfg, w); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f16.gguf")
	if err := WriteGGUF(path, cfg, w, quant.F16); err != nil {
		t.Fatal(err)
	}
	hf, gg := load(t, dir, Options{}), load(t, path, Options{})
	if hf.DType() != dtype.F16 || gg.DType() != dtype.F16 {
		t.Fatalf("compute dtypes %v and %v, want f16", hf.DType(), gg.DType())
	}
	prompt, more := randomIDs(12, 16, 1024), randomIDs(13, 4, 1024)
	want := newRef(cfg, w).forward(append(slices.Clone(prompt), more...))
	a, b := prefillDecode(t, hf, prompt, more), prefillDecode(t, gg, prompt, more)
	worst := 0.0
	for p := range a {
		if !slices.Equal(a[p], b[p]) {
			t.Errorf("position %d: the f16 GGUF and safetensors logits differ", p)
		}
		e := relErr(a[p], want[p])
		worst = math.Max(worst, e)
		if e > 1e-2 {
			t.Errorf("position %d: error %.3g, want ≤ 1e-2", p, e)
		}
	}
	t.Logf("f16: largest error %.3g", worst)
}

// TestConcurrentSessions: sessions of one model run at once (one compiling
// the programs while the other waits for them) and give what they give
// alone.
func TestConcurrentSessions(t *testing.T) {
	dir, _, _ := tiny(t)
	m := load(t, dir, Options{})
	prompts := [][]int{randomIDs(14, 9, 1024), randomIDs(15, 9, 1024), randomIDs(16, 5, 1024)}
	got := make([][]int, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			var g *Generation
			g, errs[i] = m.Generate(ctx, p, GenerateOptions{MaxTokens: 8})
			if g != nil {
				got[i] = g.Tokens
			}
		})
	}
	wg.Wait()
	for i, p := range prompts {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		alone, err := load(t, dir, Options{}).Generate(ctx, p, GenerateOptions{MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[i], alone.Tokens) {
			t.Errorf("prompt %d: concurrently %v, alone %v", i, got[i], alone.Tokens)
		}
	}
}

// TestFusedProjections: the tiny model's q/k/v and gate/up matrices are
// stacked into one weight each per layer (the parts are not graph inputs),
// the decode step runs 4 products a layer plus the LM head and one
// attention step a layer (CausalAttention), and the
// logits are those of the reference (TestDecodeMatchesReference checks
// every position; here one decode step of a fresh session).
func TestFusedProjections(t *testing.T) {
	dir, _, ref := tiny(t)
	m := load(t, dir, Options{})
	cfg := m.Config()
	names := map[string]bool{}
	for _, w := range m.weights {
		names[w.name] = true
	}
	for l := range cfg.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		if !names[p+"attn_qkv.weight"] || !names[p+"ffn_gate_up.weight"] || names[p+"attn_q.weight"] || names[p+"ffn_up.weight"] {
			t.Fatalf("layer %d weights: %v", l, names)
		}
	}
	p, err := m.buildDecode(decodeKey{1, 16})
	if err != nil {
		t.Fatal(err)
	}
	products, attention, ropes := 0, 0, 0
	for _, s := range p.Plan().Steps {
		if s.Kernel.IsMatmul() || s.Kernel.IsFusedMatmul() {
			products++
		}
		if s.Kernel.PairKeep {
			ropes++
		}
		if in := s.Kernel.Instrs; len(in) == 1 && in[0].Node.Op == ir.OpAttention {
			attention++
		}
	}
	if want := 4*cfg.Layers + 1; products != want || attention != cfg.Layers {
		t.Errorf("%d products and %d attention steps in a decode step, want %d and %d", products, attention, want, cfg.Layers)
	}
	// The rotation joins each layer's query/key/value product (its rows
	// interleaved per head at load: interleaveHalves).
	if len(m.ropePaired) != cfg.Layers || ropes != cfg.Layers {
		t.Errorf("%d layers' projections with interleaved halves, %d products rotating as they store; want %d", len(m.ropePaired), ropes, cfg.Layers)
	}
	seq := randomIDs(9, 6, cfg.Vocab)
	want := ref.forward(seq)
	s, _ := m.NewSession(1)
	defer s.Close()
	if _, err := s.Prefill(ctx, [][]int{seq[:5]}); err != nil {
		t.Fatal(err)
	}
	logits, err := s.Decode(ctx, []int{seq[5]})
	if err != nil {
		t.Fatal(err)
	}
	if e := relErr(row(t, logits, 0), want[5]); e > tolF32 {
		t.Errorf("decode after fusion: error %.3g, want ≤ %g", e, tolF32)
	}
}

// TestGreedyNaN: a greedy decode step whose logits are NaN is an error
// naming the token, not a token: the step's one output carries the check
// (argmax + Vocab where the largest logit is NaN). Token 7's embedding row
// is NaN, so the step that reads it has NaN logits everywhere (the first
// index, 0, is the argmax) while the prompt, which lacks it, does not.
func TestGreedyNaN(t *testing.T) {
	cfg := TinyConfig()
	dir := nanModel(t)
	m := load(t, dir, Options{})
	s, err := m.NewSession(1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prompt := []int{1, 2, 3, 4, 5}
	if _, err := s.Prefill(ctx, [][]int{prompt}); err != nil {
		t.Fatal(err)
	}
	next, err := s.decodeGreedy(ctx, []int{9})
	if err != nil || next[0] < 0 || next[0] >= cfg.Vocab {
		t.Fatalf("a finite step: %v, %v", next, err)
	}
	if next, err := s.decodeGreedy(ctx, []int{7}); err == nil || !strings.Contains(err.Error(), "the logit of token 0 is NaN") {
		t.Fatalf("a step with NaN logits gave %v, %v; want the NaN error naming token 0", next, err)
	}
}

// TestDecodeWindow: a decode program's attention window is the smallest of
// 16, 24, 32, 48, 64, … that holds the positions, capped at MaxSeqLen, and
// the windows from 1 to MaxSeqLen are 2·log₂(MaxSeqLen/16) + 1 programs.
func TestDecodeWindow(t *testing.T) {
	m := &Model{maxSeq: 2048}
	for _, c := range []struct{ n, want int }{
		{1, 16}, {16, 16}, {17, 24}, {24, 24}, {25, 32}, {33, 48}, {49, 64}, {65, 96},
		{512, 512}, {513, 768}, {640, 768}, {768, 768}, {769, 1024}, {1025, 1536}, {1537, 2048}, {2048, 2048},
	} {
		if got := m.decodeWindow(c.n); got != c.want {
			t.Errorf("decodeWindow(%d) = %d, want %d", c.n, got, c.want)
		}
	}
	seen := map[int]bool{}
	for n := 1; n <= m.maxSeq; n++ {
		w := m.decodeWindow(n)
		if w < n || w > m.maxSeq {
			t.Fatalf("decodeWindow(%d) = %d: does not hold the positions or passes MaxSeqLen %d", n, w, m.maxSeq)
		}
		seen[w] = true
	}
	if len(seen) != 15 {
		t.Errorf("%d windows for MaxSeqLen 2048, want 15", len(seen))
	}
	m.maxSeq = 100
	if got := m.decodeWindow(97); got != 100 {
		t.Errorf("decodeWindow(97) with MaxSeqLen 100 = %d, want 100", got)
	}
}

// TestMappedFloat: a stored float tensor in the compute dtype is wrapped
// in place where its bytes are aligned to its elements; a misaligned one,
// or one in another dtype, is not (Load copies it).
func TestMappedFloat(t *testing.T) {
	buf := make([]byte, 4*6+2)
	for i := range buf {
		buf[i] = byte(i)
	}
	tt, ok := mappedFloat(buf[:24], quant.F32, dtype.F32, []int{2, 3})
	if !ok || &tt.Bytes()[0] != &buf[0] || len(tt.Bytes()) != 24 {
		t.Fatalf("aligned f32: ok %v, not the stored bytes in place", ok)
	}
	tt, ok = mappedFloat(buf[2:14], quant.BF16, dtype.BF16, []int{6})
	if !ok || &tt.Bytes()[0] != &buf[2] || tt.Shape()[0] != 6 {
		t.Fatalf("aligned bf16: ok %v, not the stored bytes in place", ok)
	}
	if _, ok := mappedFloat(buf[1:25], quant.F32, dtype.F32, []int{6}); ok {
		t.Error("misaligned f32 wrapped in place")
	}
	if _, ok := mappedFloat(buf[1:13], quant.F16, dtype.F16, []int{6}); ok {
		t.Error("misaligned f16 wrapped in place")
	}
	if _, ok := mappedFloat(buf[:24], quant.BF16, dtype.F32, []int{12}); ok {
		t.Error("bf16 bytes wrapped as f32")
	}
	if _, ok := mappedFloat(buf[:24], quant.F32, dtype.F32, []int{7}); ok {
		t.Error("24 bytes wrapped as 7 f32s")
	}
}

package model

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/rocm"
	"github.com/loomgraph/loom/quant"
)

// GPU tests: the same checks on the GPU executor (weights uploaded once,
// the cache resident between runs), the 1B-shaped reference, memory that
// stays flat over 1,000 decode steps, and (on request) speed. Each skips
// with a message where no GPU opens.

var gpu struct {
	once sync.Once
	e    *rocm.Executor
	err  error
}

func openGPU(t testing.TB) *rocm.Executor {
	t.Helper()
	gpu.once.Do(func() { gpu.e, gpu.err = rocm.Open() })
	if gpu.err != nil {
		t.Skipf("no GPU device; this test needs one and is skipped: %v", gpu.err)
	}
	return gpu.e
}

// TestGPUTiny: on the GPU the tiny model matches the float64 reference as
// on the CPU (prefill of every position, then decode steps), in f32 and
// bf16, and the weights live on the device.
func TestGPUTiny(t *testing.T) {
	e := openGPU(t)
	dir, w, ref := tiny(t)
	prompt, more := randomIDs(50, 24, 1024), randomIDs(51, 16, 1024)
	want := ref.forward(append(append([]int(nil), prompt...), more...))
	m := load(t, dir, Options{Executor: e})
	for name, v := range m.values {
		if _, ok := v.(*rocm.Tensor); !ok {
			t.Fatalf("input %q is a %T, not resident on the GPU", name, v)
		}
	}
	got := prefillDecode(t, m, prompt, more)
	for p := range got {
		if err := relErr(got[p], want[p]); err > tolF32 {
			t.Errorf("f32, position %d: error %.3g", p, err)
		}
	}
	noFallback(t, m)
	cpu := prefillDecode(t, load(t, dir, Options{}), prompt, more)
	for p := range got {
		if err := relErr(got[p], f64s(cpu[p])); err > 1e-5 {
			t.Errorf("position %d: GPU and CPU differ by %.3g", p, err)
		}
	}
	// bf16 against the reference with bf16-rounded weights (as TestBF16).
	var rounded []NamedTensor
	for _, nt := range w {
		vals := make([]float32, nt.T.Numel())
		for i := range vals {
			vals[i] = dtype.ToBF16(float32(nt.T.Float64(i))).Float32()
		}
		r := nt.T.Clone()
		for i, v := range vals {
			r.SetFloat64(i, float64(v))
		}
		rounded = append(rounded, NamedTensor{nt.Name, r})
	}
	bwant := newRef(TinyConfig(), rounded).forward(prompt)
	bgot := prefillDecode(t, load(t, dir, Options{Executor: e, DType: dtype.BF16}), prompt, nil)
	for p := range bgot {
		if err := relErr(bgot[p], bwant[p]); err > 5e-2 {
			t.Errorf("bf16, position %d: error %.3g", p, err)
		}
	}
}

// TestGPUPipelinedGreedy: on the GPU, where a pipelined step is queued
// before the previous step's token is read (exec.Start), Generate yields
// the step-by-step loop's tokens and stops; a NaN token is reported as
// such, and the bad id the step after it reads comes from that step's
// wait.
func TestGPUPipelinedGreedy(t *testing.T) {
	e := openGPU(t)
	checkPipeline(t, e)
	checkPipelineNaN(t, e)
}

// noFallback reports every step of m's programs that the GPU executor
// hands to the CPU (exec.Fallbacker): each would cost two transfers per
// run.
func noFallback(t *testing.T, m *Model) {
	t.Helper()
	for name, p := range m.Programs() {
		for _, line := range strings.Split(p.Placement(m.Executor()), "\n") {
			if strings.Contains(line, "(fallback:") {
				t.Errorf("%s: %s", name, line)
			}
		}
	}
}

// TestGPUQuantized: a Q4_K file on the GPU against the dequantized
// reference. Prefill dequantizes weight chunks and multiplies in f32
// (exec/rocm/quant.go), so the prompt's positions have float32 rounding
// only and the f32 tolerance applies. Decode's mat-vecs quantize the
// activations to 8 bits per 32 values, as the CPU does (GGML's Q8_K), so
// the decoded positions get the CPU's Q4_K tolerance
// (TestGGUFQuantized).
//
// "mixed" is the same with layers 1 and 3's attn_v in Q6_K (a Q4_K_M-like
// file: those layers' queries and keys one product, attn_qk, the values
// one of their own; TestGGUFMixedFormats on the CPU). "widened" is every
// matrix Q5_0 but those two attn_v, Q8_0: the queries and keys widened to
// Q8_0 at load, the three one product (TestGGUFWidenedFusion on the CPU).
func TestGPUQuantized(t *testing.T) {
	e := openGPU(t)
	_, w, _ := tiny(t)
	for _, c := range []struct {
		name          string
		base, other   quant.Type // layers 1 and 3's attn_v in other (mixedLayers)
		fused, fusedQ string     // layer 1's projections: the fused weights' names
	}{
		{"q4_k", quant.Q4_K, quant.Q4_K, "attn_qkv", ""},
		{"mixed", quant.Q4_K, quant.Q6_K, "attn_qk", ""},
		// Q5_0 with Q8_0 values (SmolLM's Q4_K_M): layers 1 and 3's queries
		// and keys widened to Q8_0, the three one product.
		{"widened", quant.Q5_0, quant.Q8_0, "attn_qkv", "q8_0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, formatOf := writeMixedTiny(t, w, c.base, c.other)
			m := load(t, path, Options{Executor: e})
			if _, ok := m.fused["blk.1."+c.fused+".weight"]; !ok && !(noQKFusion && c.fused == "attn_qk") && !(noWidenFusion && c.fusedQ != "") {
				t.Errorf("blk.1.%s not fused", c.fused)
			}
			if f := m.quant["blk.1."+c.fused+".weight"]; c.fusedQ != "" && !noWidenFusion && f.String() != c.fusedQ {
				t.Errorf("blk.1.%s in %v, want %s", c.fused, f, c.fusedQ)
			}
			prompt, more := randomIDs(52, 16, 1024), randomIDs(53, 8, 1024)
			want := newRef(TinyConfig(), dequantizedFunc(t, w, formatOf)).forward(append(append([]int(nil), prompt...), more...))
			got := prefillDecode(t, m, prompt, more)
			noFallback(t, m)
			for p := range got {
				tol := tolF32
				if p >= len(prompt) {
					tol = 4e-2
				}
				if err := relErr(got[p], want[p]); err > tol {
					t.Errorf("position %d: error %.3g, want ≤ %g", p, err, tol)
				}
			}
		})
	}
}

// TestGPUMemoryFlat: 1,000 decode steps allocate nothing new from the
// driver and end with the bytes in use they started with (weights, rope
// tables and one KV cache: each step's new cache replaces the old one).
func TestGPUMemoryFlat(t *testing.T) {
	e := openGPU(t)
	dir, _, _ := tiny(t)
	m := load(t, dir, Options{Executor: e})
	s, _ := m.NewSession(1)
	defer s.Close()
	// A prompt of 1025 tokens: the 1010 decode steps all attend over the
	// one window of 2048 positions (the last), so one decode program runs
	// them. (Each smaller window is a program of its own whose first run
	// allocates its temporaries' size classes once.)
	logits, err := s.Prefill(ctx, [][]int{randomIDs(54, 1025, 1024)})
	if err != nil {
		t.Fatal(err)
	}
	sampler, _ := NewSampler(GenerateOptions{})
	step := func() {
		id, err := sample(sampler, logits)
		if err != nil {
			t.Fatal(err)
		}
		if logits, err = s.Decode(ctx, []int{id}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		step()
	}
	before := e.Stats().Memory
	start := time.Now()
	for range 1000 {
		step()
	}
	took := time.Since(start)
	after := e.Stats().Memory
	t.Logf("weights %d bytes, KV cache %d bytes; in use %d before and %d after 1000 steps (%.0f tokens/s); driver allocations %d → %d",
		m.WeightBytes(), s.CacheBytes(), before.InUse, after.InUse, 1000/took.Seconds(), before.Mallocs, after.Mallocs)
	// No block from the driver, and the same bytes in use (up to which
	// cached block of a size class served a request: 1/64 of slack).
	if after.Mallocs != before.Mallocs || math.Abs(float64(after.InUse-before.InUse)) > float64(before.InUse)/64 {
		t.Errorf("memory grew over 1000 decode steps:\nbefore %v\nafter  %v", before, after)
	}
	if least := m.WeightBytes() + s.CacheBytes(); before.InUse < least {
		t.Errorf("%d bytes in use, less than the weights and cache (%d)", before.InUse, least)
	}
	// The pipelined greedy loop (two steps' outputs alive at a time)
	// holds flat too: the memory at the 10th and the 1000th token.
	var at10, at1000 rocm.AllocStats
	n := 0
	g, err := m.Generate(ctx, randomIDs(55, 1025, 1024), GenerateOptions{MaxTokens: 1000, StopTokens: []int{}, OnToken: func(int) bool {
		switch n++; n {
		case 10:
			at10 = e.Stats().Memory
		case 1000:
			at1000 = e.Stats().Memory
		}
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pipelined greedy: in use %d at the 10th token and %d at the 1000th (%.0f tokens/s); driver allocations %d → %d",
		at10.InUse, at1000.InUse, g.DecodeTokensPerSecond(), at10.Mallocs, at1000.Mallocs)
	if len(g.Tokens) != 1000 || at1000.Mallocs != at10.Mallocs || math.Abs(float64(at1000.InUse-at10.InUse)) > float64(at10.InUse)/64 {
		t.Errorf("pipelined greedy: %d tokens; memory grew from the 10th token to the 1000th:\nbefore %v\nafter  %v", len(g.Tokens), at10, at1000)
	}
}

// TestHFReferenceGPU compares both reference models on the GPU: the tiny
// one and the Llama-3.2-1B-shaped one (bf16 as stored, and in f32 for the
// greedy tokens).
func TestHFReferenceGPU(t *testing.T) {
	e := openGPU(t)
	for _, c := range refCases {
		t.Run(c.name, func(t *testing.T) {
			r := readRef(t, c.name)
			dir, _, _ := tiny(t)
			if c.name != "tiny" {
				dir = filepath.Join(t.TempDir(), c.name)
				start := time.Now()
				if err := WriteTestModel(dir, c.cfg, c.seed, c.dt); err != nil {
					t.Fatal(err)
				}
				t.Logf("wrote the %s weights in %s", c.name, time.Since(start).Round(time.Millisecond))
			}
			checkAgainstRef(t, c, r, dir, e)
		})
	}
}

// TestGPUSpeed1B measures the 1B-shaped model: prefill of 512 tokens and
// 128 decode steps, in bf16 and with Q4_K weights, against the bound that
// reading every weight once per token at the measured copy bandwidth sets.
// It takes minutes (random weights, the Q4_K quantization, two loads), so
// it runs only with LOOM_LLAMA_SPEED=1.
func TestGPUSpeed1B(t *testing.T) {
	e := openGPU(t)
	if os.Getenv("LOOM_LLAMA_SPEED") != "1" {
		t.Skip("set LOOM_LLAMA_SPEED=1 to measure the 1B-shaped model's speed")
	}
	cfg := Llama1BConfig()
	w, err := RandomWeights(cfg, 1, dtype.BF16)
	if err != nil {
		t.Fatal(err)
	}
	// LOOM_LLAMA_SPEED_DIR names a folder that keeps the bf16 checkpoint
	// between runs (written on the first), for A/B runs of one binary.
	dir := filepath.Join(t.TempDir(), "llama1b")
	if d := os.Getenv("LOOM_LLAMA_SPEED_DIR"); d != "" {
		dir = d
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		if err := WriteHF(dir, cfg, w); err != nil {
			t.Fatal(err)
		}
	}
	// LOOM_LLAMA_SPEED_ONLY picks configurations by key, a comma-separated
	// list of bf16, q4_k, bf16-nopipeline, bf16-sampled and bf16-noreplay
	// (default: all); the Q4_K file is written only when q4_k is among them.
	only := map[string]bool{}
	for _, k := range strings.Split(os.Getenv("LOOM_LLAMA_SPEED_ONLY"), ",") {
		if k = strings.TrimSpace(k); k != "" {
			only[k] = true
		}
	}
	q4 := filepath.Join(t.TempDir(), "llama1b-q4k.gguf")
	if len(only) == 0 || only["q4_k"] {
		if err := WriteGGUF(q4, cfg, w, quant.Q4_K); err != nil {
			t.Fatal(err)
		}
	}
	w = nil
	gbps, err := e.CopyGBps(1<<30, 10)
	if err != nil {
		t.Fatal(err)
	}
	prompt := randomIDs(60, 512, cfg.Vocab)
	for _, c := range []struct {
		key, name, path string
		dt              dtype.DType
		noReplay        bool
		noPipeline      bool
		sampled         bool
	}{
		{"bf16", "bf16", dir, dtype.BF16, false, false, false}, {"q4_k", "q4_k", q4, dtype.BF16, false, false, false},
		{"bf16-nopipeline", "bf16", dir, dtype.BF16, false, true, false}, {"bf16-sampled", "bf16", dir, dtype.BF16, false, false, true},
		{"bf16-noreplay", "bf16", dir, dtype.BF16, true, false, false},
	} {
		if len(only) > 0 && !only[c.key] {
			continue
		}
		opts := GenerateOptions{MaxTokens: 129, StopTokens: []int{}}
		switch {
		case c.noReplay:
			c.name += " (step by step: Options.NoReplay)"
		case c.noPipeline:
			c.name += " (not pipelined: Options.NoPipeline)"
		case c.sampled:
			// Sampled: the logits come to the host and the Sampler draws
			// there, every step.
			c.name += " (sampled: temperature 0.8, top-k 50, top-p 0.9)"
			opts.Temperature, opts.TopK, opts.TopP, opts.Seed = 0.8, 50, 0.9, 1
		}
		// Load's cost on the host: its wall time and the bytes it allocated.
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		t0 := time.Now()
		// LOOM_LLAMA_PROBE: one of the decode graph's measurement probes
		// (Options.probe: tiny-step, no-attn-output, no-attention, no-norm, one-layer).
		probe := os.Getenv("LOOM_LLAMA_PROBE")
		if probe != "" {
			c.name += " (probe " + probe + ")"
		}
		m := load(t, c.path, Options{Executor: e, DType: c.dt, NoReplay: c.noReplay, NoPipeline: c.noPipeline, probe: probe})
		took := time.Since(t0)
		runtime.ReadMemStats(&ms1)
		t.Logf("%s: Load %v, %d MB allocated on the host", c.name, took.Round(time.Millisecond), (ms1.TotalAlloc-ms0.TotalAlloc)>>20)
		// A first run compiles and warms up; the second is measured; a
		// third shows whether its bindings repeat the second's.
		for i := range 3 {
			l0, r0 := e.Stats().Kernels.Launches, e.ReplayStats()
			// Each token's arrival, for the spread of the decode steps.
			var at []time.Time
			onToken := func(int) bool { at = append(at, time.Now()); return true }
			opts.OnToken = onToken
			g, err := m.Generate(ctx, prompt, opts)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 {
				r1 := e.ReplayStats()
				steps := make([]time.Duration, 0, len(at))
				for j := 1; j < len(at); j++ {
					steps = append(steps, at[j].Sub(at[j-1]))
				}
				t.Logf("%s: call %d: %d new bindings, %d recorded; the first decode steps %v", c.name, i+1,
					r1.Bindings-r0.Bindings, r1.Recorded-r0.Recorded, steps[:min(6, len(steps))])
			}
			if i == 1 {
				bound := gbps * 1e9 / float64(m.WeightBytes())
				t.Logf("%s: weights %.2f GB; prefill of 512 tokens %s (%.0f tokens/s); decode %.1f tokens/s, %.0f%% of the copy bound %.1f tokens/s (%.0f GB/s); memory %v",
					c.name, float64(m.WeightBytes())/1e9, g.Prefill.Round(time.Microsecond), g.PromptTokensPerSecond(),
					g.DecodeTokensPerSecond(), 100*g.DecodeTokensPerSecond()/bound, bound, gbps, e.Stats().Memory)
				t.Logf("%s: %.1f kernel launches a token (prefill included); replays so far %+v", c.name, float64(e.Stats().Kernels.Launches-l0)/129, e.ReplayStats())
				var steps []time.Duration
				for j := 1; j < len(at); j++ {
					steps = append(steps, at[j].Sub(at[j-1]))
				}
				// The first steps in order: a binding's first run goes step
				// by step and its second is recorded (exec/rocm/replay.go),
				// which the rate counts and the median does not.
				first := steps[:min(6, len(steps))]
				t.Logf("%s: the first decode steps %v", c.name, first)
				slices.Sort(steps)
				if n := len(steps); n > 0 {
					t.Logf("%s: decode steps (token to token) fastest %v, median %v, 90th percentile %v, slowest %v",
						c.name, steps[0], steps[n/2], steps[n*9/10], steps[n-1])
				}
			}
		}
		m.Close()
	}
}

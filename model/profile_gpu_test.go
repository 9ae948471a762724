package model

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUDecodeProfile breaks a 1B-shaped bf16 decode step down: its wall
// time as Decode and as a greedy step (Generate's) run it, the device time of the same step's work (queued
// behind a long spin, inputs already on the device, so the host's queueing
// is hidden), and the host time of every kind of driver call during the
// timed steps (hip.TraceCalls). It runs only with LOOM_LLAMA_PROFILE=1.
func TestGPUDecodeProfile(t *testing.T) {
	e := openGPU(t)
	if os.Getenv("LOOM_LLAMA_PROFILE") != "1" {
		t.Skip("set LOOM_LLAMA_PROFILE=1 to profile the 1B-shaped model's decode step")
	}
	ctx := context.Background()
	cfg := Llama1BConfig()
	w, err := RandomWeights(cfg, 1, dtype.BF16)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "llama1b")
	if err := WriteHF(dir, cfg, w); err != nil {
		t.Fatal(err)
	}
	// LOOM_LLAMA_PROFILE_WEIGHTS=q4_k profiles the model with Q4_K weights.
	path := dir
	if os.Getenv("LOOM_LLAMA_PROFILE_WEIGHTS") == "q4_k" {
		path = filepath.Join(t.TempDir(), "llama1b-q4k.gguf")
		if err := WriteGGUF(path, cfg, w, quant.Q4_K); err != nil {
			t.Fatal(err)
		}
	}
	w = nil
	m := load(t, path, Options{Executor: e, DType: dtype.BF16})
	// LOOM_LLAMA_PROFILE_BATCH=B profiles a step of B sequences (default 1).
	batch := 1
	if b, err := strconv.Atoi(os.Getenv("LOOM_LLAMA_PROFILE_BATCH")); err == nil && b > 0 {
		batch = b
	}
	t.Logf("batch %d", batch)
	s, err := m.NewSession(batch)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	prompts := make([][]int, batch)
	for i := range prompts {
		prompts[i] = randomIDs(3, 512, cfg.Vocab)
	}
	sevens := slices.Repeat([]int{7}, batch)
	if _, err := s.Prefill(ctx, prompts); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := s.Decode(ctx, slices.Repeat([]int{5}, batch)); err != nil {
			t.Fatal(err)
		}
	}
	const steps = 50
	decode := func() error { _, err := s.Decode(ctx, sevens); return err }
	// greedy is the step Generate runs: the token picked on the device,
	// 4 bytes down.
	greedy := func() error { _, err := s.decodeGreedy(ctx, sevens); return err }
	repeat := func(n int, f func() error) {
		for range n {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// traceSteps runs steps steps of f with the driver calls traced and
	// logs the wall time, launches and each call per step.
	traceSteps := func(label string, f func() error) {
		l0 := e.Stats().Kernels.Launches
		hip.TraceCalls(true)
		start := time.Now()
		repeat(steps, f)
		wall := time.Since(start) / steps
		calls := hip.TraceCalls(false)
		t.Logf("%s: %v wall, %.1f launches", label, wall, float64(e.Stats().Kernels.Launches-l0)/steps)
		var traced time.Duration
		for _, c := range calls {
			traced += c.Total
			t.Logf("  %-28s %7.1f calls/step %9v/step %7v/call", c.Name, float64(c.Count)/steps, c.Total/steps, c.Total/time.Duration(c.Count))
		}
		t.Logf("  traced driver calls %v/step of %v", traced/steps, wall)
	}
	traceSteps("greedy decode step", greedy)
	// piped is Generate's pipelined greedy step: the step after is queued
	// before this one's token is read.
	var cur *greedyStep
	piped := func() error {
		if cur == nil {
			var err error
			if cur, err = s.startGreedy(ctx, sevens, nil); err != nil {
				return err
			}
		}
		next, err := s.startGreedy(ctx, nil, cur)
		if err != nil {
			return err
		}
		_, err = cur.tokens()
		cur.free()
		cur = next
		return err
	}
	traceSteps("pipelined greedy step", piped)
	if _, err := cur.tokens(); err != nil {
		t.Fatal(err)
	}
	cur.free()
	traceSteps("decode step", decode)
	// LOOM_LLAMA_CPUPROF=FILE: a CPU profile of LOOM_LLAMA_CPUPROF_STEPS
	// greedy steps (default 300; the context holds ~1,250 more), and an execution trace of 100 more in
	// FILE.trace (go tool trace -pprof=syscall|sched|sync). The profile asks
	// for 1 kHz; a kernel that ticks slower (the GPU machine's: 250 Hz)
	// takes fewer samples, each still weighed as 1 ms: read its shares, not
	// its times.
	if f := os.Getenv("LOOM_LLAMA_CPUPROF"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		n := 300
		if v, err := strconv.Atoi(os.Getenv("LOOM_LLAMA_CPUPROF_STEPS")); err == nil && v > 0 {
			n = v
		}
		runtime.SetCPUProfileRate(1000)
		if err := pprof.StartCPUProfile(out); err != nil {
			t.Log(err)
		}
		repeat(n, greedy)
		pprof.StopCPUProfile()
		out.Close()
		tf, err := os.Create(f + ".trace")
		if err != nil {
			t.Fatal(err)
		}
		if err := trace.Start(tf); err != nil {
			t.Fatal(err)
		}
		repeat(100, greedy)
		trace.Stop()
		tf.Close()
	}

	// The same step's device time: ids and pos already on the device.
	prog, _, err := m.decodeProgram(ctx, decodeKey{batch, m.decodeWindow(s.pos + 1)})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := tensor.New(slices.Repeat([]uint32{7}, batch), batch)
	pos, _ := tensor.New(slices.Repeat([]uint32{uint32(s.pos)}, batch), batch)
	idv, err := placeTensor(e, ids)
	if err != nil {
		t.Fatal(err)
	}
	posv, err := placeTensor(e, pos)
	if err != nil {
		t.Fatal(err)
	}
	defer freeValue(idv)
	defer freeValue(posv)
	in := map[string]exec.Value{}
	for _, b := range prog.Plan().Inputs {
		switch b.Name {
		case inIDs:
			in[b.Name] = idv
		case inPos:
			in[b.Name] = posv
		default:
			if v, ok := m.values[b.Name]; ok {
				in[b.Name] = v
			} else {
				in[b.Name] = s.cache[b.Name]
			}
		}
	}
	// run is one decode step as the session runs it: the cache donated
	// (written in place), the returned cache kept as the next input.
	run := func() error {
		args := map[string]exec.Value{}
		for name, v := range in {
			if _, ok := s.cache[name]; ok {
				v = exec.Donate(v)
			}
			args[name] = v
		}
		out, err := prog.RunValues(ctx, e, args, true)
		if err != nil {
			return err
		}
		for l := range cfg.Layers {
			freeValue(s.cache[inCache(l)]) // emptied by the donation: nothing to free
			s.cache[inCache(l)] = out[outCache(l)]
			in[inCache(l)] = out[outCache(l)]
			delete(out, outCache(l))
		}
		for _, v := range out {
			freeValue(v)
		}
		return nil
	}
	for i := range 3 {
		var host time.Duration
		ms, err := e.DeviceTimeSpin(200_000_000, func() error {
			t0 := time.Now()
			err := run()
			host = time.Since(t0)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: device time of one decode step %.3f ms (RunValues behind a ~100 ms spin took %v)", i, ms, host)
	}
	// Where the device time goes, step by step (rocm.Executor.ProfileSteps),
	// with the step's work queued behind a spin so that the events time
	// the device alone, not the host's queueing.
	if err := e.ProfileSteps(true); err != nil {
		t.Fatal(err)
	}
	const profiled = 5
	for range profiled {
		if _, err := e.DeviceTimeSpin(200_000_000, run); err != nil {
			t.Fatal(err)
		}
	}
	prof, err := e.Profile()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ProfileSteps(false); err != nil {
		t.Fatal(err)
	}
	t.Logf("profiled steps:\n%s", profileTable(prof, profiled, 30))
}

// profileTable formats a step profile (rocm.Executor.Profile) of n decode
// steps: the device time a step, then the rows costliest kinds of step, a
// line each (time a step, share, launches a step, label).
func profileTable(prof []rocm.StepTime, n, rows int) string {
	var total float64
	for _, st := range prof {
		total += st.Ms
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %.3f ms of device time a decode step\n", total/float64(n))
	for i, st := range prof {
		if i == rows {
			fmt.Fprintf(&b, "  … %d more labels\n", len(prof)-i)
			break
		}
		fmt.Fprintf(&b, "  %7.1f µs/step %5.1f%% %5.1f×/step  %s\n", 1000*st.Ms/float64(n), 100*st.Ms/total, float64(st.Count)/float64(n), st.Label)
	}
	return b.String()
}

// TestGPUFirstPrefill: where a process's first prefill spends its time.
// `loom generate` reported 110–126 ms for SmolLM-135M's first prefill of
// 64 tokens (bf16, H200, session 57) against 7.5 ms for the same prefill
// warm, with the programs compiled and prepared before the clock starts,
// and CUDA_MODULE_LOADING=EAGER no faster. This runs the model at
// LOOM_FIRST_PREFILL_MODEL (a GGUF file or a safetensors directory; the
// test skips without it) the way Generate does: the prefill program
// prepared, then three prefills of 64 tokens in new sessions, each with
// its wall time and its driver and library calls traced (hip.TraceCalls).
//
// Found (session 57, H200, SmolLM-135M in bf16): the first prefill 116.8
// ms, of which 103.2 in its 180 cuBLAS calls (573 µs each); the next two
// 10.0 and 10.1 ms, cuBLAS 2.8 and 2.7 (15 µs each); no compile and no
// module load in any. cuBLAS's first call of each shape is the cost:
// since session 58 Prepare makes each vendor call once
// (exec/rocm/gemmwarm.go), and the first prefill took 15.5 and 11.6 ms
// against 135.7 and 132.4 with LOOM_GEMM_WARM=0 (Prepare 300.6 and 266.3
// ms against 168.0 and 171.7).
func TestGPUFirstPrefill(t *testing.T) {
	e := openGPU(t)
	path := os.Getenv("LOOM_FIRST_PREFILL_MODEL")
	if path == "" {
		t.Skip("set LOOM_FIRST_PREFILL_MODEL to a model to trace its first prefill")
	}
	ctx := context.Background()
	m := load(t, path, Options{Executor: e, DType: dtype.BF16})
	prompt := randomIDs(5, 64, m.cfg.Vocab)
	if _, took, err := m.prefillProgram(ctx, prefillKey{batch: 1, tokens: len(prompt)}); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("prefill program compiled and prepared in %v", took)
	}
	for round := range 3 {
		s, err := m.NewSession(1)
		if err != nil {
			t.Fatal(err)
		}
		l0 := e.Stats()
		hip.TraceCalls(true)
		start := time.Now()
		_, err = s.Prefill(ctx, [][]int{prompt})
		wall := time.Since(start)
		calls := hip.TraceCalls(false)
		l1 := e.Stats()
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("prefill %d: %v wall; %d launches, %d compiles, %d module loads", round, wall,
			l1.Kernels.Launches-l0.Kernels.Launches, l1.Kernels.Compiles-l0.Kernels.Compiles, l1.Kernels.ModuleLoads-l0.Kernels.ModuleLoads)
		for i, c := range calls {
			if i == 12 {
				break
			}
			t.Logf("  %-36s %6d calls %10v %9v/call", c.Name, c.Count, c.Total, c.Total/time.Duration(c.Count))
		}
	}
}

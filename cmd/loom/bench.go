package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
	"github.com/loomgraph/loom/workloads"
)

type benchFlags struct {
	fs        *flag.FlagSet
	device    *string
	workloads *string
	elems     *int
	rows      *int
	cols      *int
	reps      *int
	json      *string
	gemmN     *int
	convN     *int
	convC     *int
	convHW    *int
	compile   *int
	reruns    *int
	model     *string
	modelDT   *string
	promptLen *int
	decode    *int
	modelDir  *string
}

func newBenchFlags(w io.Writer) *benchFlags {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(w)
	return &benchFlags{
		fs:        fs,
		device:    fs.String("device", "auto", "executor: "+devices),
		workloads: fs.String("workloads", "", "comma-separated workload ids (shared/workloads.md; default W1–W8 and W-cumsum, then W9-f32,W9-f16,W9-bf16,W10,W11,W12,W12-bf16,W12-crb,W12-crb-bf16,W12b,W12c,W12d,W12e,W12f on a GPU or W9-f32,block-mm,block-bcast,W12,W12-crb on the CPU; on request W13… (quantized decode) and the models llama-tiny[-FORMAT] and llama1b-bf16 / llama1b-FORMAT (random weights; FORMAT a block format such as q4_k, or a llama.cpp mixture such as q4_k_m, q5_k_m or q3_k_m))"),
		elems:     fs.Int("elems", 0, "elements of the flat workloads (default 2^24 on the CPU, 2^28 on a GPU)"),
		rows:      fs.Int("rows", 0, "rows of the row workloads (default 2048 on the CPU, 8192 on a GPU; W8 uses 8192)"),
		cols:      fs.Int("cols", 0, "columns of the row workloads (default 8192; W8 uses 1024)"),
		reps:      fs.Int("reps", 10, "timed runs per configuration (the median is reported)"),
		json:      fs.String("json", "", "also write the results as JSON to this file"),
		gemmN:     fs.Int("gemm-n", 0, "size of the W9 GEMMs (default 4096 on a GPU, 1024 on the CPU)"),
		convN:     fs.Int("conv-n", 0, "images of the W12 convolutions (default 32 on a GPU, 8 on the CPU)"),
		convC:     fs.Int("conv-c", 0, "channels in and out of the W12 convolutions (default 256 on a GPU, 64 on the CPU)"),
		convHW:    fs.Int("conv-hw", 0, "height and width of the W12 convolutions (default 56)"),
		compile:   fs.Int("compile-reps", 5, "GPU: time kernel preparation (cold and from the disk cache) over this many reps; 0 skips it"),
		reruns:    fs.Int("reruns", 0, "instead of the table: time each of N runs of the fused workloads on one executor, first run included (Run, then RunInto)"),
		model:     fs.String("model", "", "also bench this checkpoint (a GGUF file, or a directory with config.json and safetensors) as the model workloads are"),
		modelDT:   fs.String("dtype", "", "-model: the compute dtype, f32, f16 or bf16 (default: the weights')"),
		modelDir:  fs.String("model-dir", "", "model workloads: keep each written model under this folder (DIR/ID) and bench the one there on later runs (default: a temporary folder, removed after)"),
		promptLen: fs.Int("prompt-len", 0, "model workloads: prompt tokens (default 512 on a GPU, 64 on the CPU)"),
		decode:    fs.Int("decode-steps", 0, "model workloads: tokens generated after the prompt's (default 128 on a GPU, 32 on the CPU)"),
	}
}

// benchResult is one row of the table and one object of the JSON output.
type benchResult struct {
	Workload string  `json:"workload"`
	Device   string  `json:"device"`
	Fusion   bool    `json:"fusion"`
	Kernels  int     `json:"kernels"`
	MedianMS float64 `json:"median_ms"`
	GBps     float64 `json:"gbps"`
	Bytes    int     `json:"bytes"`
	TFLOPs   float64 `json:"tflops,omitempty"` // dense workloads: TFLOP/s
	Skipped  string  `json:"skipped,omitempty"`
	// ReadPct (CPU mat-vecs, W13…): the workload's GB/s as a percentage
	// of the read bandwidth measured just before each of its runs, the
	// median of the reps' ratios. A machine whose memory bandwidth moves
	// between runs (a shared VM's moved 26–52 GB/s) compares each run with
	// the read beside it, not with one read at the start.
	ReadPct float64 `json:"read_pct,omitempty"`
}

// copyBencher is implemented by executors that can time a plain
// device-to-device copy of n bytes (read + write counted), the ceiling every
// workload's bandwidth is compared with.
type copyBencher interface {
	CopyGBps(bytes, reps int) (float64, error)
}

func runBench(args []string, stdout, stderr io.Writer) int {
	f := newBenchFlags(stderr)
	if err := f.fs.Parse(args); err != nil {
		return exitUsage
	}
	if *f.reps < 1 {
		fmt.Fprintln(stderr, "loom bench: -reps must be at least 1")
		return exitUsage
	}
	modelDT, ok := parseComputeDType(*f.modelDT)
	if !ok {
		return usageErr(f.fs, "-dtype %q: want f32, f16 or bf16", *f.modelDT)
	}
	e, why, err := openExecutor(*f.device)
	if err != nil {
		fmt.Fprintln(stderr, "loom bench:", err)
		return exitFail
	}
	gpu := e.Name() != "cpu"
	sz := workloads.Size{Elems: 1 << 24, Rows: 2048, Cols: 8192, GemmN: 1024, Conv: workloads.CPUConv}
	list := "W1,W2,W3,W4,W5,W6,W7,W8,W-cumsum,W9-f32,block-mm,block-bcast,W12,W12-crb"
	if gpu {
		sz = workloads.Size{Elems: 1 << 28, Rows: 8192, Cols: 8192, GemmN: 4096, Conv: workloads.GPUConv}
		list = "W1,W2,W3,W4,W5,W6,W7,W8,W-cumsum,W9-f32,W9-f16,W9-bf16,W10,W11,W12,W12-bf16,W12-crb,W12-crb-bf16,W12b,W12c,W12d,W12e,W12f"
	}
	if *f.workloads != "" {
		list = *f.workloads
	}
	if *f.gemmN > 0 {
		sz.GemmN = *f.gemmN
	}
	if *f.elems > 0 {
		sz.Elems = *f.elems
	}
	for _, c := range []struct {
		flag int
		dst  *int
	}{{*f.convN, &sz.Conv.N}, {*f.convC, &sz.Conv.C}, {*f.convHW, &sz.Conv.HW}} {
		if c.flag > 0 {
			*c.dst = c.flag
		}
	}
	if *f.rows > 0 {
		sz.Rows = *f.rows
	}
	if *f.cols > 0 {
		sz.Cols = *f.cols
	}
	if *f.reruns > 0 {
		fmt.Fprintf(stdout, "loom bench -reruns on %s (%s); GOMAXPROCS=%d; elems=%d rows=%d cols=%d\n", e.Name(), why, runtime.GOMAXPROCS(0), sz.Elems, sz.Rows, sz.Cols)
		if err := benchReruns(stdout, e, rerunList(*f.workloads), sz, *f.reruns); err != nil {
			fmt.Fprintln(stderr, "loom bench:", err)
			return exitFail
		}
		return exitOK
	}
	timing := "host clock per run"
	if gpu {
		timing = "device events per run, launches queued ahead"
	}
	fmt.Fprintf(stdout, "loom bench on %s (%s); GOMAXPROCS=%d; elems=%d rows=%d cols=%d conv=%dx%dx%d² reps=%d; timing: %s\n", e.Name(), why, runtime.GOMAXPROCS(0), sz.Elems, sz.Rows, sz.Cols, sz.Conv.N, sz.Conv.C, sz.Conv.HW, *f.reps, timing)
	if bn, ok := e.(exec.BLASNamer); ok {
		fmt.Fprintf(stdout, "matmul on %s: %s\n", e.Name(), bn.BLAS())
	}
	if l, ok := e.(interface{ Launches() string }); ok {
		fmt.Fprintf(stdout, "kernels on %s: %s\n", e.Name(), l.Launches())
	}
	var results []benchResult
	copyGBps, err := measureCopy(e, 4*sz.Elems, *f.reps)
	if err != nil {
		fmt.Fprintln(stderr, "loom bench: copy:", err)
		return exitFail
	}
	results = append(results, benchResult{Workload: "copy", Device: e.Name(), GBps: copyGBps, Bytes: 2 * 4 * sz.Elems})
	// What a pass that only reads (a mat-vec streaming its weights) can
	// reach: issue 14's CPU figure of merit, and the pass each CPU mat-vec
	// run follows (benchOne). It reads at least 64 MiB, so that it streams
	// from memory whatever -elems says (and leaves no weight in a
	// last-level cache for the run after it).
	var read func()
	readBytes := max(4*sz.Elems, 64<<20)
	if !gpu {
		read = newReader(readBytes)
		results = append(results, benchResult{Workload: "read", Device: e.Name(), GBps: float64(readBytes) / medianSeconds(*f.reps, read) / 1e9, Bytes: readBytes})
	}
	promptLen, decode := 64, 32
	if gpu {
		promptLen, decode = 512, 128
	}
	if *f.promptLen > 0 {
		promptLen = *f.promptLen
	}
	if *f.decode > 0 {
		decode = *f.decode
	}
	var models []modelResult
	for _, id := range strings.Split(list, ",") {
		if id = strings.TrimSpace(id); isModelWorkload(id) {
			r, err := runModelWorkload(e, id, *f.modelDir, promptLen, decode, copyGBps)
			if err != nil {
				fmt.Fprintf(stderr, "loom bench: %s: %v\n", id, err)
				return exitFail
			}
			models = append(models, r)
			continue
		}
		w, err := workloads.ByID(id)
		if err != nil {
			fmt.Fprintln(stderr, "loom bench:", err)
			return exitUsage
		}
		if w.Skip != "" {
			results = append(results, benchResult{Workload: w.ID, Device: e.Name(), Skipped: w.Skip})
			continue
		}
		// Both fusion modes time the same inputs: on the CPU the weights'
		// memory is the inputs' own, and two sets (one a mode) timed
		// differently by the age of their memory alone — W13-q4_0 on a
		// 2-core VM: the mode timed first read at 50–60% of the read
		// bandwidth, the second at 63–76%, whichever mode came first.
		var in map[string]*tensor.Tensor
		for _, fused := range []bool{true, false} {
			var between func() // CPU mat-vecs: a read before each run
			if strings.HasPrefix(w.ID, "W13") {
				between = read
			}
			r, err := benchOne(e, w, sz, fused, *f.reps, between, readBytes, &in)
			if err != nil {
				fmt.Fprintf(stderr, "loom bench: %s: %v\n", w.ID, err)
				return exitFail
			}
			results = append(results, r)
		}
	}
	if !gpu && strings.Contains(","+list+",", ",W9-f32,") {
		// The same library called directly, in this run: what Loom's
		// matmul step costs on top of it.
		r, err := directSgemm(e, sz.GemmN, *f.reps)
		if err != nil {
			fmt.Fprintln(stderr, "loom bench: direct sgemm:", err)
			return exitFail
		}
		results = append(results, r)
	}
	if *f.model != "" {
		r, err := benchModel(e, filepath.Base(*f.model), *f.model, modelDT, promptLen, decode, copyGBps)
		if err != nil {
			fmt.Fprintf(stderr, "loom bench: %s: %v\n", *f.model, err)
			return exitFail
		}
		models = append(models, r)
	}
	printBench(stdout, results, copyGBps)
	printModels(stdout, models)
	var compiles []compileResult
	if g, ok := e.(*rocm.Executor); ok && *f.compile > 0 {
		compiles, err = benchCompile(g, *f.compile)
		if err != nil {
			fmt.Fprintln(stderr, "loom bench: compile:", err)
			return exitFail
		}
		printCompile(stdout, compiles, e)
	}
	if *f.json != "" {
		b, _ := json.MarshalIndent(struct {
			Workloads []benchResult   `json:"workloads"`
			Models    []modelResult   `json:"models,omitempty"`
			Compile   []compileResult `json:"compile,omitempty"`
		}{results, models, compiles}, "", "  ")
		if err := os.WriteFile(*f.json, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "loom bench:", err)
			return exitFail
		}
	}
	return exitOK
}

// benchOne compiles and times one workload in one fusion mode: one warm-up
// run (compiles kernels, fills caches), then reps timed runs; the median.
// With read (a pass reading readBytes of host memory), each run follows a
// timed read, and the result has the median ratio of the two (ReadPct).
// The inputs are *ins, or fresh random ones put there when *ins is nil
// (the caller times both modes on one set).
func benchOne(e exec.Executor, w workloads.Workload, sz workloads.Size, fused bool, reps int, read func(), readBytes int, ins *map[string]*tensor.Tensor) (benchResult, error) {
	g, err := w.Build(sz)
	if err != nil {
		return benchResult{}, err
	}
	p, err := g.Compile(graph.Options{NoFusion: !fused})
	if err != nil {
		return benchResult{}, err
	}
	if *ins == nil {
		if *ins, err = workloads.Inputs(g, uint64(time.Now().UnixNano())); err != nil {
			return benchResult{}, err
		}
	}
	in := *ins
	run, cleanup, err := runner(e, p, in)
	if err != nil {
		return benchResult{}, err
	}
	defer cleanup()
	if err := run(); err != nil {
		return benchResult{}, err
	}
	bytes := workloads.Bytes(g)
	times, ratios := make([]float64, reps), make([]float64, reps)
	for i := range times {
		var readS float64
		if read != nil {
			start := time.Now()
			read()
			readS = time.Since(start).Seconds()
		}
		ms, err := timeRun(e, run)
		if err != nil {
			return benchResult{}, err
		}
		times[i] = ms
		if read != nil {
			ratios[i] = (float64(bytes) / ms / 1e6) / (float64(readBytes) / readS / 1e9)
		}
	}
	slices.Sort(times)
	med := times[len(times)/2]
	r := benchResult{Workload: w.ID, Device: e.Name(), Fusion: fused, Kernels: len(p.Plan().Steps), MedianMS: med, GBps: float64(bytes) / med / 1e6, Bytes: bytes}
	if read != nil {
		slices.Sort(ratios)
		r.ReadPct = 100 * ratios[len(ratios)/2]
	}
	if w.Flops != nil {
		r.TFLOPs = w.Flops(sz) / med / 1e9
	}
	return r, nil
}

// timeRun times one run in milliseconds: on the GPU with device events
// around the run's work queued ahead of the device (rocm.DeviceTime, as
// the peers are timed), elsewhere with the host clock.
func timeRun(e exec.Executor, run func() error) (float64, error) {
	if g, ok := e.(*rocm.Executor); ok {
		return g.DeviceTime(run)
	}
	start := time.Now()
	if err := run(); err != nil {
		return 0, err
	}
	return float64(time.Since(start).Nanoseconds()) / 1e6, nil
}

// measureCopy times a copy of n bytes on the executor: its own device copy
// when it has one, else a Go copy of host memory spread over all cores.
func measureCopy(e exec.Executor, n, reps int) (float64, error) {
	if cb, ok := e.(copyBencher); ok {
		return cb.CopyGBps(n, reps)
	}
	src := make([]byte, n)
	dst := make([]byte, n)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	workers := runtime.GOMAXPROCS(0)
	chunk := (n + workers - 1) / workers
	copyAll := func() {
		done := make(chan struct{}, workers)
		for w := range workers {
			go func() {
				lo, hi := min(w*chunk, n), min((w+1)*chunk, n)
				copy(dst[lo:hi], src[lo:hi])
				done <- struct{}{}
			}()
		}
		for range workers {
			<-done
		}
	}
	return 2 * float64(n) / medianSeconds(reps, copyAll) / 1e9, nil
}

// medianSeconds runs f once to warm up, then reps times, and returns the
// median time of a run in seconds.
func medianSeconds(reps int, f func()) float64 {
	f()
	times := make([]float64, reps)
	for i := range times {
		start := time.Now()
		f()
		times[i] = time.Since(start).Seconds()
	}
	slices.Sort(times)
	return times[len(times)/2]
}

// newReader returns a pass that reads n bytes of host memory spread over
// all cores (four independent sums of 8-byte words a core, more than a
// core's share of the memory bandwidth can feed).
func newReader(n int) func() {
	words := make([]uint64, n/8)
	for i := range words {
		words[i] = uint64(i)
	}
	workers := runtime.GOMAXPROCS(0)
	chunk := (len(words) + workers - 1) / workers
	sums := make([]uint64, workers)
	readAll := func() {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := words[min(w*chunk, len(words)):min((w+1)*chunk, len(words))]
				var a, b, c, d uint64
				for len(p) >= 4 {
					a, b, c, d = a+p[0], b+p[1], c+p[2], d+p[3]
					p = p[4:]
				}
				for _, v := range p {
					a += v
				}
				sums[w] = a + b + c + d
			}()
		}
		wg.Wait()
	}
	return readAll
}

func printBench(w io.Writer, rs []benchResult, copyGBps float64) {
	fmt.Fprintf(w, "%-11s %-6s %-6s %7s %10s %8s %7s %9s %8s\n", "workload", "device", "fusion", "kernels", "median_ms", "GB/s", "%copy", "speed-up", "TFLOP/s")
	unfused := map[string]float64{}
	for _, r := range rs {
		if !r.Fusion && r.Skipped == "" && r.Workload != "copy" && r.Workload != "read" {
			unfused[r.Workload] = r.MedianMS
		}
	}
	for _, r := range rs {
		switch {
		case r.Workload == "copy":
			fmt.Fprintf(w, "%-11s %-6s %-6s %7s %10s %8.1f %7s %9s %8s\n", "copy", r.Device, "-", "-", "-", r.GBps, "100%", "-", "-")
		case r.Workload == "read":
			fmt.Fprintf(w, "%-11s %-6s %-6s %7s %10s %8.1f %6.0f%% %9s %8s\n", "read", r.Device, "-", "-", "-", r.GBps, 100*r.GBps/copyGBps, "-", "-")
		case r.Skipped != "":
			fmt.Fprintf(w, "%-11s %-6s skipped: %s\n", r.Workload, r.Device, r.Skipped)
		default:
			speed := "-"
			if r.Fusion && unfused[r.Workload] > 0 {
				speed = fmt.Sprintf("%.2fx", unfused[r.Workload]/r.MedianMS)
			}
			mode := "off"
			if r.Fusion {
				mode = "on"
			}
			gbs, pct, tf := fmt.Sprintf("%8.1f", r.GBps), fmt.Sprintf("%6.0f%%", 100*r.GBps/copyGBps), "-"
			if r.TFLOPs > 0 { // dense: bytes moved mean little
				gbs, pct, tf = "-", "-", fmt.Sprintf("%.3f", r.TFLOPs)
			}
			fmt.Fprintf(w, "%-11s %-6s %-6s %7d %10.3f %8s %7s %9s %8s\n", r.Workload, r.Device, mode, r.Kernels, r.MedianMS, gbs, pct, speed, tf)
		}
	}
	for _, r := range rs {
		if r.ReadPct > 0 {
			mode := "off"
			if r.Fusion {
				mode = "on"
			}
			fmt.Fprintf(w, "%s (fusion %s): %.0f%% of the read bandwidth measured just before each run (median of the runs' ratios)\n", r.Workload, mode, r.ReadPct)
		}
	}
}

// directSgemm times the CPU executor's host BLAS on an n³ f32 product
// called directly (no graph, no executor): the reference W9-f32 is
// compared with on the CPU.
func directSgemm(e exec.Executor, n, reps int) (benchResult, error) {
	h, _ := blas.Open(runtime.GOMAXPROCS(0))
	a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	for i := range a {
		a[i], b[i] = float32(i%7)-3, float32(i%5)-2
	}
	call := blas.Call{M: n, N: n, K: n, LDA: n, LDB: n, LDC: n, Batch: 1, StrideA: n * n, StrideB: n * n, StrideC: n * n, Alpha: 1}
	times := make([]float64, reps+1)
	for i := range times {
		t0 := time.Now()
		if err := h.Sgemm(call, a, b, c); err != nil {
			return benchResult{}, err
		}
		times[i] = float64(time.Since(t0).Nanoseconds()) / 1e6
	}
	med := median(times[1:])
	return benchResult{Workload: "sgemm-" + strings.TrimSuffix(strings.Fields(h.Name())[0], ":"), Device: e.Name(), Fusion: true, Kernels: 1, MedianMS: med, TFLOPs: 2 * float64(n) * float64(n) * float64(n) / med / 1e9}, nil
}

// rerunList is -reruns' workload list: the flag's, or W1.
func rerunList(flagList string) string {
	if flagList == "" {
		return "W1"
	}
	return flagList
}

// runner returns a function that runs the program once. On a GPU the
// inputs are uploaded once and kept resident, and the outputs stay resident
// (freed after each run), so the time measured is the plan's device work and
// launches, not host transfers; the run waits for the device before
// returning. On the CPU, inputs are used in place.
func runner(e exec.Executor, p *graph.Program, in map[string]*tensor.Tensor) (func() error, func(), error) {
	g, ok := e.(*rocm.Executor)
	if !ok {
		// The CPU writes into output tensors allocated once (RunInto): the
		// allocation-free loop a user who times runs would write.
		outs := map[string]*tensor.Tensor{}
		for _, b := range p.Plan().Outputs {
			t, err := tensor.Zeros(b.DType, b.Shape...)
			if err != nil {
				return nil, nil, err
			}
			outs[b.Name] = t
		}
		return func() error {
			return p.RunInto(context.Background(), e, in, outs)
		}, func() {}, nil
	}
	vals := map[string]exec.Value{}
	var held []*rocm.Tensor
	cleanup := func() {
		for _, t := range held {
			t.Free()
		}
	}
	for name, t := range in {
		d, err := g.FromHost(t)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		held = append(held, d)
		vals[name] = d
	}
	return func() error {
		out, err := p.RunValues(context.Background(), e, vals, true)
		for _, v := range out {
			if t, ok := v.(*rocm.Tensor); ok {
				t.Free()
			}
		}
		return err
	}, cleanup, nil
}

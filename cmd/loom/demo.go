package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// Demo sizes and checking rules.
const (
	demoRows = 1024
	demoCols = 1024
	// maxDemoElems bounds -n × -m: the inputs and every run's output are
	// held at once (10 bytes per element per run), and a typo should not
	// take the machine's memory.
	maxDemoElems = 1 << 27
	// demoRuns is how many timed runs follow the first one; the median of
	// them is reported, since the first run also builds the executor's
	// per-kernel programs.
	demoRuns = 5
	// The reference check: |got − want| ≤ max(relTol·|want|, absTol).
	relTol = 1e-5
	absTol = 1e-6
	// maxReported is how many mismatching elements are printed.
	maxReported = 5
)

// demoGraph builds the demo program for x f16[n m] and y f32[n m]:
//
//	out = where(y > 0, a, −a),  a = silu(f32(x))·2 + 1.
//
// It is one elementwise chain with a cast, a transcendental, a comparison
// and a select, which fusion turns into a single kernel. demo and dump share
// it so that a dump shows exactly what the demo runs.
func demoGraph(n, m int) *graph.Graph {
	g := graph.New()
	x := g.Input("x", dtype.F16, n, m)
	y := g.Input("y", dtype.F32, n, m)
	a := x.Cast(dtype.F32).Silu().Affine(2, 1)
	g.Output("out", graph.Where(y.Gt(graph.Scalar(0.0)), a, a.Neg()))
	return g
}

// demoFlags are the demo subcommand's flags.
type demoFlags struct {
	fs     *flag.FlagSet
	n, m   *int
	device *string
	seed   *uint64
}

func newDemoFlags(stderr io.Writer) *demoFlags {
	fs := newFlagSet("demo", stderr)
	return &demoFlags{
		fs:     fs,
		n:      fs.Int("n", demoRows, "`ROWS` of x and y"),
		m:      fs.Int("m", demoCols, "`COLS` of x and y"),
		device: fs.String("device", "auto", "the `executor`: "+devices),
		seed:   fs.Uint64("seed", 0, "random seed for the inputs (default: from the clock; the seed used is printed)"),
	}
}

// runDemo is the demo subcommand.
func runDemo(args []string, stdout, stderr io.Writer) int {
	f := newDemoFlags(stderr)
	if status, ok := parseFlags(f.fs, args); !ok {
		return status
	}
	n, m := *f.n, *f.m
	if n < 1 || m < 1 || n > maxDemoElems/m {
		return usageErr(f.fs, "-n %d -m %d: want both ≥ 1 and at most %d elements in all", n, m, maxDemoElems)
	}
	e, why, err := openExecutor(*f.device)
	if err != nil {
		return usageErr(f.fs, "-device: %v", err)
	}
	seed := uint64(time.Now().UnixNano())
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "seed" {
			seed = *f.seed
		}
	})

	// Ctrl-C cancels a run between steps rather than killing the process
	// mid-kernel; Program.Run reports the cancellation as an error.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if err := demo(ctx, stdout, e, why, n, m, seed); err != nil {
		fmt.Fprintf(stderr, "loom demo: %v\n", err)
		return exitFail
	}
	return exitOK
}

// demo builds, compiles, runs and checks the demo graph, reporting to w. A
// mismatch is an error (after the report of what was measured).
func demo(ctx context.Context, w io.Writer, e exec.Executor, why string, n, m int, seed uint64) error {
	numel := n * m
	fmt.Fprintf(w, "graph:    out = where(y > 0, a, -a), a = silu(f32(x))*2 + 1;  x f16[%d %d], y f32[%d %d]\n", n, m, n, m)
	fmt.Fprintf(w, "seed:     %d (repeat with -seed %d)\n", seed, seed)
	fmt.Fprintf(w, "executor: %s (%s)\n", e.Name(), why)

	x, y := demoInputs(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), n, m)

	g := demoGraph(n, m)
	built := len(g.IR().Nodes)
	t0 := time.Now()
	prog, err := g.Compile(graph.Options{})
	compileTime := time.Since(t0)
	if err != nil {
		return err
	}
	plan := prog.Plan()
	fusion := "off"
	if plan.Fused {
		fusion = "on"
	}
	fmt.Fprintf(w, "nodes:    %d built, %d after compile (fusion %s)\n", built, len(plan.Graph.Nodes), fusion)
	fmt.Fprintf(w, "plan:     %s, %s\n", plural(len(plan.Steps), "step"), plural(len(plan.Buffers), "buffer"))
	for i, s := range plan.Steps {
		fmt.Fprintf(w, "  step %d: kernel %s (%s)\n", i, s.Kernel.Name, strings.Join(s.Kernel.OpNames(), " "))
	}
	fmt.Fprintf(w, "compile:  %v\n", round(compileTime))

	inputs := map[string]*tensor.Tensor{"x": x, "y": y}
	var (
		times []time.Duration
		worst checkResult
	)
	for i := range 1 + demoRuns {
		t0 := time.Now()
		out, err := prog.Run(ctx, e, inputs)
		d := time.Since(t0)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		times = append(times, d)
		// Every run is checked, not just the first: a later run reuses the
		// executor's cached programs and pooled memory, which the first run
		// does not exercise.
		r, err := checkDemo(x, y, out["out"])
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		worst.merge(r, i+1)
	}
	first := times[0]
	rest := slices.Clone(times[1:])
	slices.Sort(rest)
	median := rest[len(rest)/2]
	fmt.Fprintf(w, "run:      first %v, median of %d %v, %s elements/s\n", round(first), demoRuns, round(median), si(float64(numel)/median.Seconds()))
	fmt.Fprintf(w, "check:    %d elements × %d runs against float64 in plain Go: max abs error %.3g, max rel error %.3g (tolerance %g rel, %g abs floor)\n",
		numel, len(times), worst.maxAbs, worst.maxRel, relTol, absTol)
	if worst.bad > 0 {
		for _, s := range worst.report {
			fmt.Fprintf(w, "  mismatch: %s\n", s)
		}
		return fmt.Errorf("%d of %d checked elements out of tolerance", worst.bad, numel*len(times))
	}
	fmt.Fprintln(w, "OK")
	return nil
}

// demoInputs returns x f16[n m] and y f32[n m] with random values that are
// non-zero as stored: x in [−8, 8), which covers silu's curved part and both
// tails, and y in [−1, 1), so that y > 0 splits the elements about evenly.
// Zero is avoided so that no element sits on the y > 0 boundary.
func demoInputs(r *rand.Rand, n, m int) (x, y *tensor.Tensor) {
	xs := make([]dtype.Float16, n*m)
	ys := make([]float32, n*m)
	for i := range xs {
		for xs[i].Float64() == 0 {
			xs[i] = dtype.ToF16From64(r.Float64()*16 - 8)
		}
		for ys[i] == 0 {
			ys[i] = float32(r.Float64()*2 - 1)
		}
	}
	// The slices fill the shapes exactly, so New cannot fail.
	x, _ = tensor.New(xs, n, m)
	y, _ = tensor.New(ys, n, m)
	return x, y
}

// demoWant is the demo's value for one element, computed directly in
// float64 from the stored inputs.
func demoWant(x, y float64) float64 {
	a := x/(1+math.Exp(-x))*2 + 1
	if y <= 0 {
		return -a
	}
	return a
}

// checkResult summarises a comparison with the reference.
type checkResult struct {
	maxAbs, maxRel float64
	bad            int      // elements out of tolerance
	report         []string // the first maxReported of them
}

// merge folds r, the check of run number run, into c.
func (c *checkResult) merge(r checkResult, run int) {
	c.maxAbs = max(c.maxAbs, r.maxAbs)
	c.maxRel = max(c.maxRel, r.maxRel)
	c.bad += r.bad
	for _, s := range r.report {
		if len(c.report) < maxReported {
			c.report = append(c.report, fmt.Sprintf("run %d: %s", run, s))
		}
	}
}

// checkDemo compares every element of out with demoWant. It returns an
// error only when out is not the f32[n m] tensor the graph declares; value
// mismatches are counted in the result.
func checkDemo(x, y, out *tensor.Tensor) (checkResult, error) {
	var c checkResult
	if out == nil {
		return c, fmt.Errorf("no output %q", "out")
	}
	if out.DType() != dtype.F32 || !slices.Equal(out.Shape(), x.Shape()) {
		return c, fmt.Errorf("output is %v%v, want %v%v", out.DType(), out.Shape(), dtype.F32, x.Shape())
	}
	got, err := tensor.Values[float32](out)
	if err != nil {
		return c, err
	}
	for i, g := range got {
		want := demoWant(x.Float64(i), y.Float64(i))
		d := math.Abs(float64(g) - want)
		if d != d { // NaN: never within tolerance
			d = math.Inf(1)
		}
		c.maxAbs = max(c.maxAbs, d)
		c.maxRel = max(c.maxRel, d/math.Abs(want))
		if d > max(relTol*math.Abs(want), absTol) {
			c.bad++
			if len(c.report) < maxReported {
				c.report = append(c.report, fmt.Sprintf("element %d: x=%g y=%g got %g want %g", i, x.Float64(i), y.Float64(i), g, want))
			}
		}
	}
	return c, nil
}

// round shortens a duration for printing.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// si formats v with an SI prefix: 1.23G, 456M, 7.8k.
func si(v float64) string {
	for _, p := range []struct {
		scale  float64
		suffix string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= p.scale {
			return fmt.Sprintf("%.3g%s", v/p.scale, p.suffix)
		}
	}
	return fmt.Sprintf("%.3g", v)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

package rocm

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// Fault tests of the GPU executor (issue 12): a run cancelled while the
// device works returns at once, a plan larger than the device and a device
// allocation that fails part-way are errors that leave nothing allocated,
// and the executor gives right answers afterwards.

// negChain compiles x → neg applied steps times, unfused: one launch per
// step, so the device has steps × (read + write of x) bytes of work.
func negChain(t *testing.T, n, steps int) *graph.Program {
	t.Helper()
	g := graph.New()
	y := g.Input("x", dtype.F32, n)
	for range steps {
		y = y.Neg()
	}
	g.Output("y", y)
	p, err := g.Compile(graph.Options{NoFusion: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(p.Plan().Steps); got != steps {
		t.Fatalf("the chain compiled to %d steps, want %d (one launch each)", got, steps)
	}
	return p
}

// settledGoroutines waits (up to 2 s) for the goroutine count to drop to at
// most want and returns it.
func settledGoroutines(want int) int {
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(2 * time.Second); n > want && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	return n
}

// TestGPUCancelWhileWaiting: a run whose kernels take hundreds of
// milliseconds is cancelled after its launches are queued; it returns the
// context's error within a small fraction of the work's time, the device
// finishes the abandoned kernels, the memory the run took is free again, no
// goroutine is left, and the next run is right.
func TestGPUCancelWhileWaiting(t *testing.T) {
	e := freshGPU(t)
	const n, steps = 1 << 27, 1200 // 512 MiB, even: the chain is the identity
	p := negChain(t, n, steps)
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(i%1000) - 499.5
	}
	xt, _ := tensor.New(xs, n)
	x, err := e.FromHost(xt)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	in := map[string]exec.Value{"x": x}

	check := func(what string, out map[string]exec.Value) {
		t.Helper()
		y := out["y"].(*Tensor)
		defer y.Free()
		h, err := y.ToHost()
		if err != nil {
			t.Fatal(err)
		}
		ys, _ := tensor.Values[float32](h)
		for _, i := range []int{0, 1, 499, 500, n / 2, n - 1} {
			if ys[i] != xs[i] {
				t.Fatalf("%s: y[%d] = %v, want %v", what, i, ys[i], xs[i])
			}
		}
	}
	// The whole chain, for its time (the first run also compiles).
	out, err := p.RunValues(ctx, e, in, true)
	if err != nil {
		t.Fatal(err)
	}
	check("first run", out)
	t0 := time.Now()
	out, err = p.RunValues(ctx, e, in, true)
	full := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	check("second run", out)
	if full < 100*time.Millisecond {
		t.Fatalf("the chain ran in %v; the test needs work of at least 100 ms to cancel", full)
	}
	base := e.Stats().Memory
	g0 := runtime.NumGoroutine()

	c, cancel := context.WithCancel(ctx)
	type result struct {
		err error
		at  time.Time
	}
	res := make(chan result, 1)
	t0 = time.Now()
	go func() {
		_, err := p.RunValues(c, e, in, true)
		res <- result{err, time.Now()}
	}()
	// Cancel once every launch is queued: the launch counter says so.
	launches0 := e.Stats().Kernels.Launches
	for e.Stats().Kernels.Launches < launches0+steps && time.Since(t0) < full/2 {
		time.Sleep(time.Millisecond)
	}
	cancelled := time.Now()
	cancel()
	r := <-res
	latency := r.at.Sub(cancelled)
	t.Logf("full run %v; launches queued after %v; cancelled run returned %v after the cancel: %v", full, cancelled.Sub(t0), latency, r.err)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled run: %v, want context.Canceled", r.err)
	}
	if latency > full/4 {
		t.Errorf("the cancelled run returned %v after the cancel; the work takes %v", latency, full)
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats().Memory; st.InUse != base.InUse || st.Live != base.Live {
		t.Errorf("after the cancelled run: %v; before: %v", st, base)
	}
	if g := settledGoroutines(g0); g > g0 {
		t.Errorf("%d goroutines after the cancelled run drained, %d before", g, g0)
	}
	out, err = p.RunValues(ctx, e, in, true)
	if err != nil {
		t.Fatal(err)
	}
	check("run after the cancel", out)
}

// TestGPUCancelStorm: 200 runs cancelled at random moments (before, during
// and after their launches) each return their outputs or the context's
// error; afterwards nothing is allocated and no goroutine remains.
func TestGPUCancelStorm(t *testing.T) {
	e := freshGPU(t)
	const n, steps = 1 << 22, 64
	p := negChain(t, n, steps)
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(i % 977)
	}
	xt, _ := tensor.New(xs, n)
	in := map[string]*tensor.Tensor{"x": xt}
	if _, err := p.Run(ctx, e, in); err != nil {
		t.Fatal(err)
	}
	base := e.Stats().Memory
	g0 := runtime.NumGoroutine()
	r := rand.New(rand.NewPCG(12, 1))
	ok, cancelled := 0, 0
	for i := range 200 {
		c, cancel := context.WithTimeout(ctx, time.Duration(r.IntN(4000))*time.Microsecond)
		out, err := p.Run(c, e, in)
		cancel()
		switch {
		case err == nil:
			ok++
			if y := out["y"]; y.Float64(n-1) != float64(xs[n-1]) {
				t.Fatalf("run %d: y[%d] = %v", i, n-1, y.Float64(n-1))
			}
		case errors.Is(err, context.DeadlineExceeded):
			cancelled++
		default:
			t.Fatalf("run %d: %v", i, err)
		}
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d runs finished, %d cancelled", ok, cancelled)
	if cancelled == 0 {
		t.Errorf("no run was cancelled: the storm tested nothing")
	}
	if st := e.Stats().Memory; st.InUse != base.InUse || st.Live != base.Live {
		t.Errorf("after the storm: %v; before: %v", st, base)
	}
	if g := settledGoroutines(g0); g > g0 {
		t.Errorf("%d goroutines after the storm, %d before", g, g0)
	}
}

// TestGPUPlanTooLarge: a plan whose peak exceeds the device's memory fails
// before allocating anything, naming its size; the executor works after.
func TestGPUPlanTooLarge(t *testing.T) {
	e := freshGPU(t)
	_, total, err := e.dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	n := int(total/4) + 1<<20 // f32: each buffer alone is larger than the device
	g := graph.New()
	g.Output("y", g.Full(dtype.F32, 1, n).Exp())
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := e.Stats().Memory
	_, err = p.Run(ctx, e, nil)
	t.Logf("plan of %d bytes on a %d-byte device: %v", 4*n, total, err)
	if err == nil || !strings.Contains(err.Error(), "needs") || !strings.Contains(err.Error(), "available") {
		t.Fatalf("run of a plan larger than the device: %v, want an error naming its peak bytes", err)
	}
	if st := e.Stats().Memory; st.Mallocs != base.Mallocs || st.InUse != base.InUse {
		t.Errorf("the refused run allocated: %v; before: %v", st, base)
	}
	g2 := graph.New()
	g2.Output("y", g2.Full(dtype.F32, 2, 1000).Exp())
	p2, _ := g2.Compile(graph.Options{})
	out, err := p2.Run(ctx, e, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := out["y"].Float64(999); float32(got) != float32(7.389056) {
		t.Errorf("after the refusal: exp(2) = %v", got)
	}
}

// failingDriver fails every device allocation after the first ok ones.
type failingDriver struct {
	driver
	ok, done int
}

var errInjected = errors.New("injected allocation failure (cudaErrorMemoryAllocation)")

func (f *failingDriver) Malloc(n uint64) (hip.DevPtr, error) {
	if f.done >= f.ok {
		return 0, errInjected
	}
	f.done++
	return f.driver.Malloc(n)
}

// TestGPUAllocFailsMidPlan: with the device refusing the k-th allocation
// of a run (inputs, temporaries, outputs, for every k), the run fails with
// the out-of-memory error, and every block the run took is back: nothing
// in use, nothing live. With the device working again the run is right.
func TestGPUAllocFailsMidPlan(t *testing.T) {
	e := freshGPU(t)
	const n = 1 << 20
	g := graph.New()
	x, y := g.Input("x", dtype.F32, n), g.Input("y", dtype.F32, n)
	a := x.Mul(y).Exp()
	b := a.Add(x).Sqrt()
	g.Output("s", a.Sum(0))
	g.Output("b", b)
	g.Output("c", b.Mul(a).Neg())
	p, err := g.Compile(graph.Options{NoFusion: true})
	if err != nil {
		t.Fatal(err)
	}
	xs, ys := make([]float32, n), make([]float32, n)
	for i := range xs {
		xs[i], ys[i] = float32(i%101)/100, float32(i%37)/50
	}
	xt, _ := tensor.New(xs, n)
	yt, _ := tensor.New(ys, n)
	in := map[string]*tensor.Tensor{"x": xt, "y": yt}
	want, err := p.Run(ctx, e, in)
	if err != nil {
		t.Fatal(err)
	}
	// How many driver allocations a run from an empty cache makes.
	if _, err := e.Trim(); err != nil {
		t.Fatal(err)
	}
	m0 := e.Stats().Memory.Mallocs
	if _, err := p.Run(ctx, e, in); err != nil {
		t.Fatal(err)
	}
	allocs := int(e.Stats().Memory.Mallocs - m0)
	if allocs < 5 {
		t.Fatalf("a run makes %d device allocations; the test wants several", allocs)
	}
	real := e.alloc.drv
	defer func() { e.alloc.drv = real }()
	for k := range allocs {
		if _, err := e.Trim(); err != nil {
			t.Fatal(err)
		}
		e.alloc.drv = &failingDriver{driver: real, ok: k}
		_, err := p.Run(ctx, e, in)
		e.alloc.drv = real
		if err == nil || !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "out of device memory") {
			t.Fatalf("allocation %d of %d refused: run returned %v, want the out-of-memory error", k+1, allocs, err)
		}
		if k == 0 || k == allocs-1 {
			t.Logf("allocation %d of %d refused: %v", k+1, allocs, err)
		}
		if st := e.Stats().Memory; st.InUse != 0 || st.Live != 0 {
			t.Fatalf("allocation %d of %d refused: %v left in use", k+1, allocs, st)
		}
	}
	got, err := p.Run(ctx, e, in)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		for _, i := range []int{0, 1, 100, n / 3, n - 1} {
			if i >= w.Numel() {
				continue
			}
			if g, wv := got[name].Float64(i), w.Float64(i); g != wv {
				t.Errorf("%s[%d] after the failures = %v, want %v", name, i, g, wv)
			}
		}
	}
	if st := e.Stats().Memory; st.InUse != 0 {
		t.Errorf("after the last run: %v", st)
	}
}

package fuzz

import (
	"context"
	"flag"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

var longRuns = flag.Int("loom.runs", 10000, "runs of TestLongRunHeapFlat (cancelled runs: a tenth)")

// longProgram is a small program with a fused kernel, a row kernel and a
// matmul step, and its input.
func longProgram(t *testing.T) (*graph.Program, map[string]*tensor.Tensor) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 16, 32)
	y := x.Affine(2, 1).Silu().Softmax(1)
	g.Output("y", y.Matmul(x.T()).Add(graph.Scalar(1)))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]float32, 16*32)
	for i := range vals {
		vals[i] = float32(i%7) - 3
	}
	xs, err := tensor.New(vals, 16, 32)
	if err != nil {
		t.Fatal(err)
	}
	return p, map[string]*tensor.Tensor{"x": xs}
}

// rss is the process's resident set in KiB (Linux; 0 elsewhere), logged
// beside the heap because executor arenas may live outside the Go heap.
func rss() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

func heapInUse() uint64 {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestLongRunHeapFlat runs one program 10,000 times (-loom.runs), each on a
// fresh CPU executor that is then dropped (not closed): the Go heap after
// the runs must be within 4 MiB of the heap after a warm-up, so neither the
// program nor the package keeps executors or their arenas alive.
func TestLongRunHeapFlat(t *testing.T) {
	p, in := longProgram(t)
	ctx := context.Background()
	n := *longRuns
	if testing.Short() {
		n = 1000
	}
	for range 50 { // warm-up: BLAS, worker pools, package caches
		if _, err := p.Run(ctx, cpu.New(), in); err != nil {
			t.Fatal(err)
		}
	}
	before, rssBefore := heapInUse(), rss()
	start := time.Now()
	for range n {
		if _, err := p.Run(ctx, cpu.New(), in); err != nil {
			t.Fatal(err)
		}
	}
	after := heapInUse()
	growth := int64(after) - int64(before)
	t.Logf("%d runs in %v: heap %d → %d bytes (%+d); resident set %d → %d KiB (arenas are not Go heap)", n, time.Since(start).Round(time.Millisecond), before, after, growth, rssBefore, rss())
	if growth > 4<<20 {
		t.Errorf("heap grew by %d bytes over %d runs with a fresh executor each (%d bytes a run)", growth, n, growth/int64(n))
	}
}

// TestCancelledRunsNoGoroutineLeak runs the program 1,000 times with a
// context that is cancelled before the run, during it, or right after it
// starts, on an executor with several workers: afterwards the number of
// goroutines must settle back to what it was.
func TestCancelledRunsNoGoroutineLeak(t *testing.T) {
	p, in := longProgram(t)
	e := cpu.NewWithWorkers(4)
	defer e.Close()
	if _, err := p.Run(context.Background(), e, in); err != nil {
		t.Fatal(err)
	}
	settle := func(want int) int {
		n := runtime.NumGoroutine()
		for i := 0; i < 200 && n > want; i++ {
			time.Sleep(5 * time.Millisecond)
			n = runtime.NumGoroutine()
		}
		return n
	}
	before := settle(0)
	n := max(*longRuns/10, 100)
	cancelled := 0
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		switch i % 3 {
		case 0:
			cancel()
		case 1:
			go cancel()
		default:
			time.AfterFunc(time.Duration(i%50)*time.Microsecond, cancel)
		}
		if _, err := p.Run(ctx, e, in); err != nil {
			cancelled++
		}
		cancel()
	}
	if after := settle(before); after > before {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before %d cancelled runs, %d after:\n%s", before, n, after, buf[:runtime.Stack(buf, true)])
	}
	t.Logf("%d runs, %d returned an error (cancelled)", n, cancelled)
}

package cpu_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// windowBenches are the CPU benchmarks of the window steps: issue 13's pool
// and upsampling workloads at a CPU size (batch 4 instead of 32 and 8).
var windowBenches = []struct {
	name  string
	dt    dtype.DType
	shape []int
	build func(x *graph.Tensor) *graph.Tensor
}{
	{"max_pool2d_3x3s2p1_f32_4x256x112x112", dtype.F32, []int{4, 256, 112, 112}, func(x *graph.Tensor) *graph.Tensor {
		return x.MaxPool2d(3, 3, graph.PoolStride(2), graph.PoolPadding(1))
	}},
	{"avg_pool2d_2x2_f32_4x256x112x112", dtype.F32, []int{4, 256, 112, 112}, func(x *graph.Tensor) *graph.Tensor { return x.AvgPool2d(2, 2) }},
	{"max_pool2d_3x3s2p1_bf16_4x256x112x112", dtype.BF16, []int{4, 256, 112, 112}, func(x *graph.Tensor) *graph.Tensor {
		return x.MaxPool2d(3, 3, graph.PoolStride(2), graph.PoolPadding(1))
	}},
	{"upsample_bilinear2d_x2_f32_1x256x112x112", dtype.F32, []int{1, 256, 112, 112}, func(x *graph.Tensor) *graph.Tensor {
		return x.UpsampleBilinear2dScale(2, 2, false)
	}},
	{"upsample_nearest2d_x2_f32_1x256x112x112", dtype.F32, []int{1, 256, 112, 112}, func(x *graph.Tensor) *graph.Tensor {
		return x.UpsampleNearest2dScale(2, 2)
	}},
}

// BenchmarkWindow runs each window workload into caller-held outputs on
// all cores; the bytes are those read (the input once) and written.
func BenchmarkWindow(b *testing.B) {
	for _, w := range windowBenches {
		b.Run(w.name, func(b *testing.B) {
			g := graph.New()
			g.Output("y", w.build(g.Input("x", w.dt, w.shape...)))
			p, err := g.Compile(graph.Options{})
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			x, _ := tensor.Zeros(w.dt, w.shape...)
			for i := range x.Numel() {
				x.SetFloat64(i, r.NormFloat64())
			}
			out, _ := tensor.Zeros(w.dt, p.Plan().Outputs[0].Shape...)
			e := cpu.New()
			in, outs := map[string]*tensor.Tensor{"x": x}, map[string]*tensor.Tensor{"y": out}
			b.SetBytes(int64(len(x.Bytes()) + len(out.Bytes())))
			for b.Loop() {
				if err := p.RunInto(context.Background(), e, in, outs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCancelWindowStep: a long pool step on one worker stops within a few
// items of a cancel, and the executor then runs it to the end. The step is
// long by its window (21 × 21), not by its size: 34 MB in and out, so that
// the run's memory is not what a loaded machine stalls on (CI at 671aed2
// saw 1.2 s with 64 × 64 × 128 × 128 and a 5 × 5 window, 268 MB each way,
// beside the other packages' tests; 0.1–30 ms on its own, loaded or not).
func TestCancelWindowStep(t *testing.T) {
	if testing.Short() {
		t.Skip("large inputs")
	}
	g := graph.New()
	g.Output("y", g.Input("x", dtype.F32, 8, 64, 128, 128).AvgPool2d(21, 21, graph.PoolStride(1), graph.PoolPadding(10)))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := tensor.Zeros(dtype.F32, 8, 64, 128, 128)
	in := map[string]*tensor.Tensor{"x": x}
	e := cpu.NewWithWorkers(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancelledAt := make(chan time.Time, 1)
	time.AfterFunc(20*time.Millisecond, func() { cancelledAt <- time.Now(); cancel() })
	_, err = p.Run(ctx, e, in)
	end := time.Now()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run returned %v, want context.Canceled", err)
	}
	// An item is about a millisecond of work; 1 s allows a machine loaded
	// by the rest of the test run (500 ms was seen there), while the whole
	// step takes over two seconds on one worker.
	if late := end.Sub(<-cancelledAt); late > time.Second {
		t.Errorf("returned %v after the cancel", late)
	} else {
		t.Logf("returned %v after the cancel", late)
	}
	out, err := p.Run(context.Background(), e, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(out["y"].Shape()); got != "[8 64 128 128]" {
		t.Errorf("shape %s", got)
	}
}

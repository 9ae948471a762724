package cpu_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestCancelInsideLongStep: a run cancelled shortly after it starts
// returns context.Canceled promptly even when one step is long (argsort of
// f64 rows, index_select of 2^23 ids, a fused step on one worker), and the
// executor then runs the same program to the end.
func TestCancelInsideLongStep(t *testing.T) {
	if testing.Short() {
		t.Skip("large inputs")
	}
	zeros := func(dt dtype.DType, shape ...int) *tensor.Tensor {
		z, err := tensor.Zeros(dt, shape...)
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	f64 := zeros(dtype.F64, 16, 1<<19)
	for i := range f64.Numel() {
		f64.SetFloat64(i, float64((i*7919)%100003))
	}
	cases := []struct {
		name    string
		workers int
		build   func(g *graph.Graph) *graph.Tensor
		inputs  map[string]*tensor.Tensor
	}{
		{"argsort_f64", 0, func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F64, 16, 1<<19).Argsort(false) }, map[string]*tensor.Tensor{"x": f64}},
		{"index_select", 0, func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 1024, 2).IndexSelect(g.Input("ids", dtype.I64, 1<<23), 0)
		}, map[string]*tensor.Tensor{"x": zeros(dtype.F32, 1024, 2), "ids": zeros(dtype.I64, 1<<23)}},
		{"fused_one_worker", 1, func(g *graph.Graph) *graph.Tensor {
			x := g.Input("x", dtype.F32, 1<<24)
			return x.Exp().Sin().Exp().Cos().Exp().Sin()
		}, map[string]*tensor.Tensor{"x": zeros(dtype.F32, 1<<24)}},
	}
	for _, c := range cases {
		g := graph.New()
		g.Output("y", c.build(g))
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		e := cpu.New()
		if c.workers > 0 {
			e = cpu.NewWithWorkers(c.workers)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancelledAt := make(chan time.Time, 1)
		time.AfterFunc(20*time.Millisecond, func() { cancelledAt <- time.Now(); cancel() })
		start := time.Now()
		_, err = p.Run(ctx, e, c.inputs)
		end := time.Now()
		cancelled := <-cancelledAt
		full := time.Now()
		got, err2 := p.Run(context.Background(), e, c.inputs)
		whole := time.Since(full)
		// The cancel must cut the step short: the run returns within
		// 300 ms of it, or, on a machine so loaded that everything takes
		// many times longer (CI's compile beside the tests), within a
		// quarter of the whole run's time measured just after. A step
		// that ran to its end would return whole − 20 ms after it.
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: cancelled run returned %v after %v, want context.Canceled", c.name, err, end.Sub(start))
		} else if late := end.Sub(cancelled); late > 300*time.Millisecond && late > whole/4 {
			t.Errorf("%s: returned %v after the cancel (the whole run: %v)", c.name, late, whole)
		} else {
			t.Logf("%s: returned %v after the cancel (the whole run: %v)", c.name, late, whole)
		}
		if err2 != nil {
			t.Fatalf("%s: run after a cancelled one: %v", c.name, err2)
		}
		want, err := p.Run(context.Background(), cpu.New(), c.inputs)
		if err != nil {
			t.Fatal(err)
		}
		sameBytes(t, c.name+" after a cancelled run", got["y"], want["y"])
	}
}

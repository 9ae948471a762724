package cpu_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
		// The cancel must cut the step short: the run returns within 300
		// ms of it, or within a quarter of a whole run timed just before
		// (a step that ran to its end would return whole − 20 ms after
		// it). Timing on a shared machine is noisy (CI compiles kernels
		// for AMD beside the tests), so each case has up to four
		// attempts and fails only if every one returns late; a step that
		// never looks at its context is late every time.
		var report []string
		ok := false
		for attempt := range 4 {
			full := time.Now()
			if _, err := p.Run(context.Background(), e, c.inputs); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			whole := time.Since(full)
			ctx, cancel := context.WithCancel(context.Background())
			cancelledAt := make(chan time.Time, 1)
			time.AfterFunc(20*time.Millisecond, func() { cancelledAt <- time.Now(); cancel() })
			start := time.Now()
			_, err = p.Run(ctx, e, c.inputs)
			end := time.Now()
			cancelled := <-cancelledAt
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: cancelled run returned %v after %v, want context.Canceled", c.name, err, end.Sub(start))
			}
			late := end.Sub(cancelled)
			report = append(report, fmt.Sprintf("attempt %d: whole run %v, returned %v after the cancel", attempt, whole, late))
			if late <= 300*time.Millisecond || late <= whole/4 {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("%s: every cancelled run returned late:\n%s", c.name, strings.Join(report, "\n"))
		}
		t.Logf("%s: %s", c.name, strings.Join(report, "; "))
		// A run after a cancelled one computes what a fresh executor does.
		got, err2 := p.Run(context.Background(), e, c.inputs)
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

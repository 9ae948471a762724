package exec_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// replayer is the CPU executor as an exec.Replayer that counts the step
// loops handed to it and runs them as they are (or fails them).
type replayer struct {
	*cpu.Executor
	calls int
	fail  error
}

func (r *replayer) RunSteps(ctx context.Context, p *plan.Plan, mem []exec.Memory, steps func(context.Context) error) error {
	r.calls++
	if r.fail != nil {
		return r.fail
	}
	return steps(ctx)
}

func (r *replayer) Forget(*plan.Plan) {}

// TestReplayHandOff: the runner hands its step loop to a Replayer only
// under exec.WithReplay(ctx, true), the results are the loop's, and an
// error from RunSteps fails the run.
func TestReplayHandOff(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 2, 3)
	g.Output("y", x.Exp().Sum(1))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	xt, _ := tensor.New([]float32{0, 1, 2, 3, 4, 5}, 2, 3)
	want, err := p.Run(context.Background(), cpu.New(), map[string]*tensor.Tensor{"x": xt})
	if err != nil {
		t.Fatal(err)
	}
	r := &replayer{Executor: cpu.New()}
	for _, c := range []struct {
		ctx   context.Context
		calls int
	}{
		{context.Background(), 0},
		{exec.WithReplay(context.Background(), false), 0},
		{exec.WithReplay(context.Background(), true), 1},
		{exec.WithReplay(exec.WithReplay(context.Background(), true), false), 0},
	} {
		r.calls = 0
		got, err := p.Run(c.ctx, r, map[string]*tensor.Tensor{"x": xt})
		if err != nil {
			t.Fatal(err)
		}
		if r.calls != c.calls {
			t.Errorf("RunSteps called %d times, want %d", r.calls, c.calls)
		}
		if !slices.Equal(got["y"].Float64s(), want["y"].Float64s()) {
			t.Errorf("y = %v, want %v", got["y"].Float64s(), want["y"].Float64s())
		}
	}
	r.fail = errors.New("replay failed")
	if _, err := p.Run(exec.WithReplay(context.Background(), true), r, map[string]*tensor.Tensor{"x": xt}); !errors.Is(err, r.fail) {
		t.Errorf("a failing RunSteps: %v", err)
	}
	ctx, cancel := context.WithCancel(exec.WithReplay(context.Background(), true))
	cancel()
	r.fail, r.calls = nil, 0
	if _, err := p.Run(ctx, r, map[string]*tensor.Tensor{"x": xt}); !errors.Is(err, context.Canceled) || r.calls != 0 {
		t.Errorf("a cancelled run: %v (RunSteps called %d times)", err, r.calls)
	}
}

package exec_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestDonateOnHost: on an executor whose memory is host memory (the CPU,
// an exec.OutputBinder), a donated host tensor takes the in-place output:
// the run computes the same, and the output tensor is the donated tensor's
// own bytes with the new elements written. Not donated, or passed under
// a second name too, the input is left as it was and the output has its
// own memory. (RunInto takes no donations: its inputs are host tensors.)
func TestDonateOnHost(t *testing.T) {
	g := graph.New()
	cache := g.Input("cache", dtype.F32, 3, 2)
	ids := g.Input("ids", dtype.U32, 1, 2)
	src := g.Input("src", dtype.F32, 1, 2)
	g.Output("next", cache.Scatter(ids, src, 0))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Plan().InPlace()) != 1 {
		t.Fatalf("InPlace = %v, want the scatter's output", p.Plan().InPlace())
	}
	want := []float64{1, 8, 3, 4, 9, 6}
	i, _ := tensor.New([]uint32{2, 0}, 1, 2)
	s, _ := tensor.New([]float32{9, 8}, 1, 2)
	fresh := func() *tensor.Tensor {
		c, _ := tensor.New([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
		return c
	}
	same := func(a, b *tensor.Tensor) bool { return &a.Bytes()[0] == &b.Bytes()[0] }
	run := func(in map[string]exec.Value) *tensor.Tensor {
		t.Helper()
		out, err := p.RunValues(context.Background(), cpu.New(), in, true)
		if err != nil {
			t.Fatal(err)
		}
		next := out["next"].(*tensor.Tensor)
		if got := next.Float64s(); !slices.Equal(got, want) {
			t.Errorf("next = %v, want %v", got, want)
		}
		return next
	}

	c := fresh()
	if next := run(map[string]exec.Value{"cache": exec.Donate(c), "ids": i, "src": s}); !same(next, c) {
		t.Errorf("donated: the output has memory of its own")
	}
	if got := c.Float64s(); !slices.Equal(got, want) {
		t.Errorf("donated: the cache's bytes hold %v, want the output's %v", got, want)
	}

	c = fresh()
	if next := run(map[string]exec.Value{"cache": c, "ids": i, "src": s}); same(next, c) {
		t.Errorf("not donated: the output is the input's memory")
	}
	if !slices.Equal(c.Float64s(), []float64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("not donated: the input changed: %v", c.Float64s())
	}

	// The same tensor under a second name that the plan also reads.
	g2 := graph.New()
	c2 := g2.Input("cache", dtype.F32, 3, 2)
	g2.Output("next", c2.Scatter(g2.Input("ids", dtype.U32, 1, 2), g2.Input("src", dtype.F32, 1, 2), 0))
	g2.Output("copy", g2.Input("other", dtype.F32, 3, 2).Add(graph.Scalar(0)))
	p2, err := g2.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c = fresh()
	out, err := p2.RunValues(context.Background(), cpu.New(), map[string]exec.Value{"cache": exec.Donate(c), "other": c, "ids": i, "src": s}, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := out["copy"].(*tensor.Tensor).Float64s(); !slices.Equal(got, []float64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("passed twice: the other name read %v, want the tensor as given", got)
	}
	if same(out["next"].(*tensor.Tensor), c) {
		t.Errorf("passed twice: the output took the tensor's memory")
	}
}

// TestWithOutputsChecks: WithOutputs names an output of the plan with a
// value of its dtype and shape, or the run fails naming it; on the CPU (no
// Donor) a good value is left as it was and the output has memory of its
// own.
func TestWithOutputsChecks(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 2)
	g.Output("y", x.Affine(2, 1))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	xt, _ := tensor.New([]float32{1, 2}, 2)
	good, _ := tensor.New([]float32{7, 7}, 2)
	must12, _ := tensor.New([]float32{7, 7}, 1, 2)
	for _, tc := range []struct {
		outs map[string]exec.Value
		want string // "" for no error
	}{
		{map[string]exec.Value{"y": good}, ""},
		{map[string]exec.Value{"z": good}, `WithOutputs names "z", not an output of the plan`},
		{map[string]exec.Value{"y": must12}, `WithOutputs gives output "y" a f32[1 2] value, the graph produces f32[2]`},
		{map[string]exec.Value{"y": nil}, `WithOutputs gives output "y" a nil value`},
	} {
		ctx := exec.WithOutputs(context.Background(), tc.outs)
		out, err := p.RunValues(ctx, cpu.New(), map[string]exec.Value{"x": xt}, true)
		if tc.want != "" {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: error %v, want %q", tc.outs, err, tc.want)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		y := out["y"].(*tensor.Tensor)
		if got := y.Float64s(); !slices.Equal(got, []float64{3, 5}) {
			t.Errorf("y = %v, want [3 5]", got)
		}
		if &y.Bytes()[0] == &good.Bytes()[0] || !slices.Equal(good.Float64s(), []float64{7, 7}) {
			t.Errorf("the CPU wrote y into the given host tensor: %v", good.Float64s())
		}
	}
}

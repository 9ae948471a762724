package exec_test

import (
	"context"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestDonateOnNonDonor: on an executor that is not an exec.Donor (the CPU),
// a donated input is an ordinary input: the run computes the same and the
// caller's tensor is untouched.
func TestDonateOnNonDonor(t *testing.T) {
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
	c, _ := tensor.New([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	i, _ := tensor.New([]uint32{2, 0}, 1, 2)
	s, _ := tensor.New([]float32{9, 8}, 1, 2)
	out, err := p.RunValues(context.Background(), cpu.New(), map[string]exec.Value{"cache": exec.Donate(c), "ids": i, "src": s}, true)
	if err != nil {
		t.Fatal(err)
	}
	got := out["next"].(*tensor.Tensor).Float64s()
	if want := []float64{1, 8, 3, 4, 9, 6}; !slices.Equal(got, want) {
		t.Errorf("next = %v, want %v", got, want)
	}
	if !slices.Equal(c.Float64s(), []float64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("the donated host tensor changed: %v", c.Float64s())
	}
}

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

// TestStartWithoutMarker: on an executor that cannot wait for one run
// apart (the CPU), Start runs the plan to its end: the outputs are the
// run's, Wait returns nil (twice), Host hands them over, an unknown name
// is an error naming it, and a failing run fails at Start.
func TestStartWithoutMarker(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 2, 3)
	ids := g.Input("ids", dtype.U32, 2)
	g.Output("y", x.Exp().Sum(1))
	g.Output("z", x.IndexSelect(ids, 0))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := cpu.New()
	xt, _ := tensor.New([]float32{0, 1, 2, 3, 4, 5}, 2, 3)
	it, _ := tensor.New([]uint32{1, 0}, 2)
	in := map[string]exec.Value{"x": xt, "ids": it}
	want, err := p.RunValues(context.Background(), e, in, true)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Start(context.Background(), e, in)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.Wait(); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
	for _, name := range []string{"y", "z"} {
		h, err := r.Host(name)
		if err != nil {
			t.Fatal(err)
		}
		w := want[name].(*tensor.Tensor)
		if !slices.Equal(h.Float64s(), w.Float64s()) || !slices.Equal(r.Outputs()[name].Shape(), w.Shape()) {
			t.Errorf("%s = %v, want %v", name, h.Float64s(), w.Float64s())
		}
	}
	if _, err := r.Host("w"); err == nil || !strings.Contains(err.Error(), `"w"`) {
		t.Errorf("an unknown output: %v", err)
	}
	bad, _ := tensor.New([]uint32{1, 7}, 2)
	if _, err := p.Start(context.Background(), e, map[string]exec.Value{"x": xt, "ids": bad}); err == nil || !strings.Contains(err.Error(), "7") {
		t.Errorf("a bad id: %v", err)
	}
}

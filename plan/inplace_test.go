package plan_test

import (
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// TestInPlace: a scatter into an input that nothing else reads may write
// in the input's memory; the same scatter is refused when the input is
// read again, passed through a view, or is also an output.
func TestInPlace(t *testing.T) {
	build := func(f func(g *graph.Graph, cache, ids, src *graph.Tensor)) map[string]string {
		t.Helper()
		g := graph.New()
		cache := g.Input("cache", dtype.F32, 4, 6)
		ids := g.Input("ids", dtype.U32, 1, 6)
		src := g.Input("src", dtype.F32, 1, 6)
		f(g, cache, ids, src)
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pl := p.Plan()
		got := map[string]string{}
		for id, in := range pl.InPlace() {
			got[pl.Buffers[id].Name] = in.Name
		}
		return got
	}
	if got := build(func(g *graph.Graph, cache, ids, src *graph.Tensor) {
		g.Output("next", cache.Scatter(ids, src, 0))
		g.Output("y", src.Exp())
	}); len(got) != 1 || got["next"] != "cache" {
		t.Errorf("scatter into an input read once: %v, want next → cache", got)
	}
	if got := build(func(g *graph.Graph, cache, ids, src *graph.Tensor) {
		g.Output("next", cache.Scatter(ids, src, 0))
		g.Output("sum", cache.Sum(0))
	}); len(got) != 0 {
		t.Errorf("input read by another step: %v, want none", got)
	}
	// Read by an earlier step (the scatter's source depends on it): the
	// reads are done before the scatter writes.
	if got := build(func(g *graph.Graph, cache, ids, src *graph.Tensor) {
		g.Output("next", cache.Scatter(ids, src.Add(cache.SumKeepDim(0)), 0))
	}); len(got) != 1 || got["next"] != "cache" {
		t.Errorf("input read by an earlier step: %v, want next → cache", got)
	}
	if got := build(func(g *graph.Graph, cache, ids, src *graph.Tensor) {
		g.Output("next", cache.Scatter(ids, src, 0))
		g.Output("cache_out", cache)
	}); len(got) != 0 {
		t.Errorf("input also an output: %v, want none", got)
	}
	if got := build(func(g *graph.Graph, cache, ids, src *graph.Tensor) {
		g.Output("next", cache.Narrow(0, 1, 2).Scatter(ids, src, 0))
	}); len(got) != 0 {
		t.Errorf("scatter into a narrowed view: %v, want none", got)
	}
	if got := build(func(g *graph.Graph, cache, ids, src *graph.Tensor) {
		g.Output("next", cache.Exp().Scatter(ids, src, 0))
	}); len(got) != 0 {
		t.Errorf("scatter into a computed value: %v, want none", got)
	}
}

package rocm

import (
	"context"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUDonate: a scatter into a donated resident input writes in the
// input's memory (the output Tensor holds the input's block; the input
// reads as freed, and freeing it does nothing) and returns what the same
// run without donation returns, over several steps of a cache-like loop;
// a donated input the plan cannot take (read again) keeps its memory; a
// host tensor donated is an ordinary input.
func TestGPUDonate(t *testing.T) {
	e := freshGPU(t)
	ctx := context.Background()
	g := graph.New()
	cache := g.Input("cache", dtype.BF16, 2, 8, 5)
	pos := g.Input("pos", dtype.U32, 1)
	src := g.Input("src", dtype.BF16, 2, 1, 5)
	g.Output("next", cache.Scatter(pos.Reshape(1, 1, 1).BroadcastTo(2, 1, 5), src, 1))
	g.Output("y", src.Affine(2, 1))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	zeros, _ := tensor.Zeros(dtype.BF16, 2, 8, 5)
	donatedCache, err := e.FromHost(zeros)
	if err != nil {
		t.Fatal(err)
	}
	plain := zeros
	for step := range 8 {
		sv := make([]float64, 10)
		for i := range sv {
			sv[i] = float64(step*10 + i)
		}
		st, _ := tensor.FromFloat64s(dtype.BF16, sv, 2, 1, 5)
		pt, _ := tensor.New([]uint32{uint32(step)}, 1)
		want, err := p.Run(ctx, e, map[string]*tensor.Tensor{"cache": plain, "pos": pt, "src": st})
		if err != nil {
			t.Fatal(err)
		}
		blk := donatedCache.blk
		out, err := p.RunValues(ctx, e, map[string]exec.Value{"cache": exec.Donate(donatedCache), "pos": pt, "src": st}, true)
		if err != nil {
			t.Fatal(err)
		}
		next := out["next"].(*Tensor)
		if next.blk != blk {
			t.Fatalf("step %d: the output is not in the donated input's memory", step)
		}
		if _, err := donatedCache.ToHost(); err == nil {
			t.Fatalf("step %d: the donated input still reads after the run", step)
		}
		donatedCache.Free() // a no-op: the output owns the block
		got, err := next.ToHost()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Float64s(), want["next"].Float64s()) {
			t.Fatalf("step %d: donated run %v, plain run %v", step, got.Float64s(), want["next"].Float64s())
		}
		out["y"].(*Tensor).Free()
		donatedCache, plain = next, want["next"]
	}
	// Position 7 of both rows holds step 7's values.
	final, _ := donatedCache.ToHost()
	if v := final.Float64s(); v[7*5] != 70 || v[40+7*5+4] != 79 {
		t.Errorf("final cache %v", v)
	}

	// The plan cannot take an input another step reads: it stays whole.
	g2 := graph.New()
	c2 := g2.Input("cache", dtype.BF16, 2, 8, 5)
	pos2 := g2.Input("pos", dtype.U32, 1)
	src2 := g2.Input("src", dtype.BF16, 2, 1, 5)
	g2.Output("next", c2.Scatter(pos2.Reshape(1, 1, 1).BroadcastTo(2, 1, 5), src2, 1))
	g2.Output("sum", c2.Cast(dtype.F32).Sum(1))
	p2, err := g2.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := tensor.FromFloat64s(dtype.BF16, make([]float64, 10), 2, 1, 5)
	pt, _ := tensor.New([]uint32{7}, 1)
	out, err := p2.RunValues(ctx, e, map[string]exec.Value{"cache": exec.Donate(donatedCache), "pos": pt, "src": st}, true)
	if err != nil {
		t.Fatal(err)
	}
	if after, err := donatedCache.ToHost(); err != nil || !slices.Equal(after.Float64s(), final.Float64s()) {
		t.Errorf("an input the plan could not take changed: %v", err)
	}
	sum, _ := out["sum"].(*Tensor).ToHost()
	if v := sum.Float64s(); v[0] != 70+60+50+40+30+20+10+0 {
		t.Errorf("sum read the cache after the scatter: %v", v)
	}
	for _, v := range out {
		v.(*Tensor).Free()
	}
	// A donated host tensor is an ordinary input.
	host, _ := donatedCache.ToHost()
	if _, err := p.RunValues(ctx, e, map[string]exec.Value{"cache": exec.Donate(host), "pos": pt, "src": st}, false); err != nil {
		t.Fatal(err)
	}
	donatedCache.Free()
}

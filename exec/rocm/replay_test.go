package rocm

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUReplay runs a decode-like loop under exec.WithReplay: a donated
// cache written at a position each step, an embedding lookup, a mat-vec,
// a cuBLAS-sized product, a two-stage row reduction (scratch memory), a
// softmax and an RMS norm. Each step's outputs must be bit-identical to
// the same step run without replays; the binding repeats from the second
// step on, so the executor records once and replays the rest. An
// out-of-range position on a replayed step fails with the scatter's error
// (the recorded error flags are read after each replay); the replay still
// works after it; DropReplays returns the recordings' memory.
func TestGPUReplay(t *testing.T) {
	e := freshGPU(t)
	if err := e.dev.CanCapture(); err != nil {
		t.Skipf("the runtime has no graphs: %v", err)
	}
	ctx := exec.WithReplay(context.Background(), true)
	g := graph.New()
	cache := g.Input("cache", dtype.F32, 2, 8, 64)
	pos := g.Input("pos", dtype.U32, 1)
	ids := g.Input("ids", dtype.U32, 1)
	table := g.Input("table", dtype.F32, 50, 64)
	w := g.Input("w", dtype.F32, 64, 96)
	big := g.Input("big", dtype.F32, 64, 256)
	long := g.Input("long", dtype.F32, 2, 1<<16)
	nw := g.Input("nw", dtype.F32, 256)
	x := table.IndexSelect(ids, 0) // [1, 64]
	// The scatter's output is read on (not its input), so the cache can be
	// donated: it stays in one block from step to step, as a model's.
	next := cache.Scatter(pos.Reshape(1, 1, 1).BroadcastTo(2, 1, 64), x.Reshape(1, 1, 64).BroadcastTo(2, 1, 64), 1)
	g.Output("next", next)
	g.Output("mv", x.Matmul(w).Softmax(1)) // gemv + softmax
	g.Output("mm", next.Reshape(16, 64).Matmul(big).RmsNorm(nw, 1e-5))
	g.Output("sum", long.Sum(1)) // two-stage row reduction
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	host := func(shape ...int) *tensor.Tensor {
		v := make([]float64, tensor.Numel(shape))
		for i := range v {
			v[i] = r.NormFloat64()
		}
		h, _ := tensor.FromFloat64s(dtype.F32, v, shape...)
		return h
	}
	fixed := map[string]*tensor.Tensor{"table": host(50, 64), "w": host(64, 96), "big": host(64, 256), "nw": host(256)}
	resident := map[string]*Tensor{}
	for name, h := range fixed {
		if resident[name], err = e.FromHost(h); err != nil {
			t.Fatal(err)
		}
		defer resident[name].Free()
	}
	zeros, _ := tensor.Zeros(dtype.F32, 2, 8, 64)
	dc, err := e.FromHost(zeros)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range p.Plan().Steps {
		if err := e.Supports(s.Kernel); err != nil {
			t.Fatalf("step %d (%s) is not run on the GPU: %v", i, s.Kernel.Name, err)
		}
	}
	// The same resident inputs three times: the second run records, the
	// third replays.
	{
		vals := residentValues(t, e, map[string]*tensor.Tensor{"cache": zeros, "pos": u32(2), "ids": u32(7), "long": host(2, 1<<16)})
		for k, v := range resident {
			vals[k] = v
		}
		var first map[string]*tensor.Tensor
		for i := range 3 {
			out, err := p.RunValues(ctx, e, vals, false)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]*tensor.Tensor{}
			for k, v := range out {
				got[k] = v.(*tensor.Tensor)
			}
			if i == 0 {
				first = got
				continue
			}
			for k := range first {
				if !slices.Equal(got[k].Float64s(), first[k].Float64s()) {
					t.Fatalf("run %d: %s differs from the first run's", i, k)
				}
			}
		}
		if st := e.ReplayStats(); st.Recorded != 1 || st.Replayed != 2 {
			t.Fatalf("three runs with one binding: %+v, want 1 recording and 2 replays", st)
		}
	}
	// The references first, so that the replayed loop below allocates and
	// frees the same way every step (its binding repeats).
	const steps = 8
	type stepIn struct{ pos, ids, long *tensor.Tensor }
	var ins []stepIn
	var wants []map[string]*tensor.Tensor
	plain := zeros
	for step := range steps {
		si := stepIn{u32(uint32(step)), u32(uint32(r.IntN(50))), host(2, 1<<16)}
		in := map[string]*tensor.Tensor{"cache": plain, "pos": si.pos, "ids": si.ids, "long": si.long}
		for k, v := range fixed {
			in[k] = v
		}
		want, err := p.Run(context.Background(), e, in)
		if err != nil {
			t.Fatal(err)
		}
		ins, wants, plain = append(ins, si), append(wants, want), want["next"]
	}
	before := e.ReplayStats()
	for step, si := range ins {
		vals := map[string]exec.Value{"cache": exec.Donate(dc), "pos": si.pos, "ids": si.ids, "long": si.long}
		for k, v := range resident {
			vals[k] = v
		}
		blk := dc.blk
		out, err := p.RunValues(ctx, e, vals, true)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if out["next"].(*Tensor).blk != blk {
			t.Fatalf("step %d: the cache was not donated", step)
		}
		for _, name := range []string{"next", "mv", "mm", "sum"} {
			got, err := out[name].(*Tensor).ToHost()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Float64s(), wants[step][name].Float64s()) {
				t.Fatalf("step %d: %s differs from the run without replays", step, name)
			}
		}
		// Freed as the runner frees what it allocates (the reverse of
		// its order), so that the next step gets the same blocks.
		for _, b := range slices.Backward(p.Plan().Buffers) {
			if v, ok := out[b.Name]; ok && b.Name != "next" && b.Kind == plan.BufOutput {
				v.(*Tensor).Free()
			}
		}
		dc = out["next"].(*Tensor)
	}
	st := e.ReplayStats()
	t.Logf("replays after %d steps: %+v (before: %+v)", steps, st, before)
	if st.Recorded-before.Recorded != 1 || st.Replayed-before.Replayed != steps-1 || st.Failed != before.Failed {
		t.Fatalf("replay stats %+v (before %+v): want 1 recording and %d replays", st, before, steps-1)
	}
	if err := e.ReplayBroken(p.Plan()); err != nil {
		t.Fatalf("capture failed: %v", err)
	}
	// An out-of-range position fails with the scatter's error, replayed or
	// not (the recorded error flags are read after each replay); the same
	// binding three times over is replayed at least once.
	lt := host(2, 1<<16)
	vals := map[string]exec.Value{"ids": u32(1), "long": lt}
	for k, v := range resident {
		vals[k] = v
	}
	for range 3 {
		vals["cache"], vals["pos"] = exec.Donate(dc), u32(99)
		if _, err := p.RunValues(ctx, e, vals, true); err == nil || !strings.Contains(err.Error(), "scatter") {
			t.Fatalf("out-of-range position: %v, want the scatter's error", err)
		}
	}
	if n := e.ReplayStats().Replayed; n == st.Replayed {
		t.Fatalf("no failing run was a replay (stats %+v)", e.ReplayStats())
	}
	vals["cache"] = exec.Donate(dc)
	vals["pos"] = u32(3)
	out, err := p.RunValues(ctx, e, vals, true)
	if err != nil {
		t.Fatalf("after the failed run: %v", err)
	}
	for _, v := range out {
		v.(*Tensor).Free()
	}
	dc.Free()
	inUse := e.Stats().Memory.InUse
	e.DropReplays()
	if e.ReplayStats().Live != 0 || e.Stats().Memory.InUse >= inUse {
		t.Errorf("DropReplays: %+v, memory in use %d → %d", e.ReplayStats(), inUse, e.Stats().Memory.InUse)
	}
}

func u32(v uint32) *tensor.Tensor {
	t, _ := tensor.New([]uint32{v}, 1)
	return t
}

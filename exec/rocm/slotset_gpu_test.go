package rocm

import (
	"context"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUStableChain is a model's pipelined greedy loop in small: each step
// reads the token the step before wrote (tok → next, on the device), two
// steps in flight, the token written (exec.WithOutputs) into one of two
// buffers kept from one "Generate" to the next (the first step's token
// written from the host into the one its parity's steps read), the steps'
// temporaries taken as slot sets; between the loops another plan takes and
// returns blocks of the same sizes (a prefill). The second loop must bring
// no new binding and replay every step, and every step must compute the
// right value.
func TestGPUStableChain(t *testing.T) {
	e := freshGPU(t)
	const n = 3000 // 60 × 50
	build := func(scale float64) *graph.Program {
		g := graph.New()
		tok := g.Input("tok", dtype.U32, 1)
		x := g.Input("x", dtype.F32, n)
		// A product and a reduction of it: the product is a temporary slot.
		// The other output is of a size class of its own, as a model's
		// logits are (freed at once, it comes back the same).
		y := x.Reshape(60, 50)
		s := x.Add(y.Matmul(y.Transpose(0, 1)).Sum(0, 1).Reshape(1).BroadcastTo(n))
		g.Output("next", tok.Add(g.Full(dtype.U32, 1, 1)))
		g.Output("s", s.Affine(scale, 0))
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Plan().SlotBytes) == 0 {
			t.Fatal("the test's plan has no temporary slot")
		}
		return p
	}
	step, prefill := build(1), build(2)
	xv := make([]float32, n)
	for i := range xv {
		xv[i] = float32(i%7) * 0.125
	}
	xt, _ := tensor.New(xv, n)
	x, err := e.FromHost(xt)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	zero, _ := tensor.New([]uint32{0}, 1)
	var pool []exec.Value // the two token buffers kept between loops
	for range 2 {
		b, err := e.FromHost(zero)
		if err != nil {
			t.Fatal(err)
		}
		pool = append(pool, b)
	}
	ctx := exec.WithReplay(context.Background(), true)
	loop := func(first uint32, steps int) {
		t.Helper()
		type inflight struct {
			run  *exec.Pending
			next exec.Value
			slot int
		}
		var cur *inflight
		start := func(tok exec.Value, slot int) *inflight {
			t.Helper()
			c := exec.WithOutputs(ctx, map[string]exec.Value{"next": pool[slot]})
			run, err := step.Start(c, e, map[string]exec.Value{"tok": tok, "x": x})
			if err != nil {
				t.Fatal(err)
			}
			out := run.Outputs()
			out["s"].(*Tensor).Free()
			pool[slot] = out["next"] // the buffer, held by the output now
			return &inflight{run, out["next"], slot}
		}
		// The first step's token goes into the buffer the steps of its
		// parity read (exec.HostWriter), as the model's does.
		host, _ := tensor.New([]uint32{first}, 1)
		if err := e.WriteHost(pool[1], host); err != nil {
			t.Fatal(err)
		}
		cur = start(pool[1], 0)
		for i := 1; i <= steps; i++ {
			ahead := start(cur.next, i%2)
			if err := cur.run.Wait(); err != nil {
				t.Fatal(err)
			}
			got, err := cur.next.(*Tensor).ToHost()
			if err != nil {
				t.Fatal(err)
			}
			if v := got.Float64s()[0]; v != float64(first)+float64(i) {
				t.Fatalf("step %d: token %v, want %d", i, v, int(first)+i)
			}
			cur = ahead
		}
		if err := cur.run.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	loop(10, 9)
	// A "prefill": the same slot sizes, taken and given back.
	out, err := prefill.RunValues(ctx, e, map[string]exec.Value{"tok": zero, "x": x}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range out {
		v.(*Tensor).Free()
	}
	before := e.ReplayStats()
	loop(100, 12)
	st := e.ReplayStats()
	if nb := st.Bindings - before.Bindings; nb != 0 {
		t.Errorf("the second loop brought %d new bindings, want 0", nb)
	}
	if nr := st.Replayed - before.Replayed; nr != 13 {
		t.Errorf("the second loop replayed %d of its 13 steps, want all", nr)
	}
	for _, v := range pool {
		v.(*Tensor).Free()
	}
}

// TestGPUWithOutputs: an output given a resident buffer comes back in the
// buffer's memory (the value reads as freed); a buffer that is also an
// input of the run is not written in place; a host tensor is not either.
func TestGPUWithOutputs(t *testing.T) {
	e := freshGPU(t)
	g := graph.New()
	a := g.Input("a", dtype.F32, 4)
	g.Output("y", a.Affine(2, 1))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at, _ := tensor.New([]float32{1, 2, 3, 4}, 4)
	buf, err := e.FromHost(at)
	if err != nil {
		t.Fatal(err)
	}
	blk := buf.blk
	ctx := exec.WithOutputs(context.Background(), map[string]exec.Value{"y": buf})
	out, err := p.RunValues(ctx, e, map[string]exec.Value{"a": at}, true)
	if err != nil {
		t.Fatal(err)
	}
	y := out["y"].(*Tensor)
	if y.blk != blk {
		t.Fatal("the output is not in the given buffer's memory")
	}
	if _, err := buf.ToHost(); err == nil {
		t.Fatal("the given buffer still reads after the run")
	}
	buf.Free() // a no-op
	if h, _ := y.ToHost(); h.Float64s()[3] != 9 {
		t.Fatalf("y = %v", h.Float64s())
	}
	// y given as the output and passed as the input: not in place.
	ctx = exec.WithOutputs(context.Background(), map[string]exec.Value{"y": y})
	out2, err := p.RunValues(ctx, e, map[string]exec.Value{"a": y}, true)
	if err != nil {
		t.Fatal(err)
	}
	y2 := out2["y"].(*Tensor)
	if y2.blk == y.blk {
		t.Fatal("an input given as an output was written in place")
	}
	if h, err := y.ToHost(); err != nil || h.Float64s()[3] != 9 {
		t.Fatalf("the input changed: %v %v", h, err)
	}
	if h, _ := y2.ToHost(); h.Float64s()[3] != 19 {
		t.Fatalf("y2 = %v", h.Float64s())
	}
	y.Free()
	y2.Free()
	// A host tensor given: ignored.
	ctx = exec.WithOutputs(context.Background(), map[string]exec.Value{"y": at})
	out3, err := p.RunValues(ctx, e, map[string]exec.Value{"a": at}, true)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := out3["y"].(*Tensor).ToHost(); h.Float64s()[0] != 3 || at.Float64s()[0] != 1 {
		t.Fatalf("y = %v, host tensor %v", h.Float64s(), at.Float64s())
	}
	out3["y"].(*Tensor).Free()
	if st := e.Stats().Memory; st.Live != 0 {
		t.Errorf("%d blocks live at the end", st.Live)
	}
}

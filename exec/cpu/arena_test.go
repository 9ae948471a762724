package cpu_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// chain compiles softmax(x)·2 + exp(x) over rows×cols, unfused, so that the
// plan has temporaries in several slots, plus a second output (argsort of
// x: u32).
func chain(t *testing.T, rows, cols int, fusion bool) *graph.Program {
	t.Helper()
	g := graph.New()
	x := g.Input("x", dtype.F32, rows, cols)
	g.Output("y", x.Softmax(-1).Affine(2, 0).Add(x.Exp()))
	g.Output("idx", x.Argsort(false))
	p, err := g.Compile(graph.Options{NoFusion: !fusion})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func input(t *testing.T, rows, cols int, seed int) map[string]*tensor.Tensor {
	t.Helper()
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = float32((i*7919+seed*104729)%2001-1000) / 250
	}
	x, err := tensor.New(vals, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*tensor.Tensor{"x": x}
}

// outputsFor allocates a zero tensor for every output of p.
func outputsFor(t *testing.T, p *graph.Program) map[string]*tensor.Tensor {
	t.Helper()
	out := map[string]*tensor.Tensor{}
	for _, b := range p.Plan().Outputs {
		z, err := tensor.Zeros(b.DType, b.Shape...)
		if err != nil {
			t.Fatal(err)
		}
		out[b.Name] = z
	}
	return out
}

func sameBytes(t *testing.T, what string, got, want *tensor.Tensor) {
	t.Helper()
	if got.DType() != want.DType() || !slices.Equal(got.Shape(), want.Shape()) || !slices.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("%s: got %v differs from %v", what, got, want)
	}
}

func TestArenaReusedAcrossRuns(t *testing.T) {
	ctx := context.Background()
	p := chain(t, 64, 300, false)
	if len(p.Plan().SlotBytes) < 2 {
		t.Fatalf("the unfused plan has %d slots; the test needs several", len(p.Plan().SlotBytes))
	}
	e := cpu.New()
	defer e.Close()
	in := input(t, 64, 300, 1)
	if _, err := p.Run(ctx, e, in); err != nil {
		t.Fatal(err)
	}
	first := e.MemStats()
	if first.ArenasMade != 1 || first.ArenasIdle != 1 {
		t.Fatalf("after one run: %+v, want 1 arena made and idle", first)
	}
	reuse, _ := p.Plan().PeakBytes()
	if first.IdleBytes <= 0 || first.IdleBytes > int64(reuse) {
		t.Errorf("arena of %d bytes for a plan whose temporaries and outputs peak at %d", first.IdleBytes, reuse)
	}
	outs := outputsFor(t, p)
	for range 3 {
		if _, err := p.Run(ctx, e, in); err != nil {
			t.Fatal(err)
		}
		if err := p.RunInto(ctx, e, in, outs); err != nil {
			t.Fatal(err)
		}
	}
	// A smaller plan fits in the same arena.
	small := chain(t, 8, 300, false)
	if _, err := small.Run(ctx, e, input(t, 8, 300, 2)); err != nil {
		t.Fatal(err)
	}
	if s := e.MemStats(); s.ArenasMade != 1 || s.IdleBytes != first.IdleBytes {
		t.Errorf("after reruns: %+v, want the first arena reused (%+v)", s, first)
	}
	e.Trim()
	if s := e.MemStats(); s.ArenasIdle != 0 || s.IdleBytes != 0 || s.LiveBytes != 0 {
		t.Errorf("after Trim: %+v, want nothing idle or live", s)
	}
	if _, err := p.Run(ctx, e, in); err != nil {
		t.Fatal(err)
	}
	if s := e.MemStats(); s.ArenasMade != 2 {
		t.Errorf("a run after Trim made %d arenas in all, want 2", s.ArenasMade)
	}
}

func TestRunIntoMatchesRun(t *testing.T) {
	ctx := context.Background()
	for _, fusion := range []bool{true, false} {
		for _, poison := range []int{-1, 0xFF} {
			p := chain(t, 33, 257, fusion)
			e := cpu.New()
			if poison >= 0 {
				e.Poison(byte(poison))
			}
			in := input(t, 33, 257, 3)
			want, err := p.Run(ctx, cpu.New(), in)
			if err != nil {
				t.Fatal(err)
			}
			outs := outputsFor(t, p)
			for i := range 2 { // the second run reuses the arena and the outputs
				if err := p.RunInto(ctx, e, in, outs); err != nil {
					t.Fatal(err)
				}
				for name := range want {
					sameBytes(t, fmt.Sprintf("fusion=%v poison=%d run %d output %q", fusion, poison, i, name), outs[name], want[name])
				}
			}
		}
	}
}

func TestRunIntoKeepsEarlierOutputs(t *testing.T) {
	ctx := context.Background()
	p := chain(t, 16, 100, false)
	e := cpu.New()
	in1, in2 := input(t, 16, 100, 1), input(t, 16, 100, 2)
	want1, _ := p.Run(ctx, cpu.New(), in1)
	want2, _ := p.Run(ctx, cpu.New(), in2)
	o1, o2 := outputsFor(t, p), outputsFor(t, p)
	if err := p.RunInto(ctx, e, in1, o1); err != nil {
		t.Fatal(err)
	}
	if err := p.RunInto(ctx, e, in2, o2); err != nil {
		t.Fatal(err)
	}
	// Outputs returned by Run are not recycled either.
	r3, err := p.Run(ctx, e, in1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(ctx, e, in2); err != nil {
		t.Fatal(err)
	}
	for name := range want1 {
		sameBytes(t, "first RunInto "+name, o1[name], want1[name])
		sameBytes(t, "second RunInto "+name, o2[name], want2[name])
		sameBytes(t, "earlier Run "+name, r3[name], want1[name])
	}
}

func TestRunIntoErrors(t *testing.T) {
	ctx := context.Background()
	p := chain(t, 4, 8, true)
	e := cpu.New()
	in := input(t, 4, 8, 1)
	good := outputsFor(t, p)
	f64, _ := tensor.Zeros(dtype.F64, 4, 8)
	wrongShape, _ := tensor.Zeros(dtype.F32, 8, 4)
	extra, _ := tensor.Zeros(dtype.F32, 1)
	cases := []struct {
		name string
		outs map[string]*tensor.Tensor
		want []string
	}{
		{"missing", map[string]*tensor.Tensor{"y": good["y"]}, []string{`missing output "idx" (want u32[4 8])`}},
		{"nil", map[string]*tensor.Tensor{"y": good["y"], "idx": nil}, []string{`output "idx" is nil (want u32[4 8])`}},
		{"dtype", map[string]*tensor.Tensor{"y": f64, "idx": good["idx"]}, []string{`output "y" is f64[4 8], graph produces f32[4 8]`}},
		{"shape", map[string]*tensor.Tensor{"y": wrongShape, "idx": good["idx"]}, []string{`output "y" is f32[8 4], graph produces f32[4 8]`}},
		{"unknown", map[string]*tensor.Tensor{"y": good["y"], "idx": good["idx"], "z": extra}, []string{`unknown output "z"`}},
		{"input", map[string]*tensor.Tensor{"y": in["x"], "idx": good["idx"]}, []string{`output "y" shares memory with input "x"`}},
		{"twice", map[string]*tensor.Tensor{"y": good["y"], "idx": good["y"]}, []string{`output "idx" is f32[4 8], graph produces u32[4 8]`}},
		{"none", nil, []string{`missing output "y"`, `missing output "idx"`}},
	}
	for _, c := range cases {
		err := p.RunInto(ctx, e, in, c.outs)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.name, err, w)
			}
		}
	}
	// Two outputs of one dtype and shape sharing a tensor.
	g := graph.New()
	x := g.Input("x", dtype.F32, 4)
	g.Output("a", x.Exp())
	g.Output("b", x.Neg())
	q, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	xin, _ := tensor.Zeros(dtype.F32, 4)
	o, _ := tensor.Zeros(dtype.F32, 4)
	err = q.RunInto(ctx, e, map[string]*tensor.Tensor{"x": xin}, map[string]*tensor.Tensor{"a": o, "b": o})
	if err == nil || !strings.Contains(err.Error(), `outputs "a" and "b" share memory`) {
		t.Errorf("one tensor for two outputs: got %v", err)
	}
	if err := p.RunInto(ctx, nil, in, good); err == nil {
		t.Error("nil executor: no error")
	}
}

func TestConcurrentRunsShareNoSlot(t *testing.T) {
	ctx := context.Background()
	p := chain(t, 32, 200, false)
	e := cpu.New()
	defer e.Close()
	const n = 6
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := input(t, 32, 200, i)
			want, err := p.Run(ctx, cpu.NewWithWorkers(1), in)
			if err != nil {
				t.Error(err)
				return
			}
			outs := outputsFor(t, p)
			for r := range 5 {
				if r%2 == 0 {
					err = p.RunInto(ctx, e, in, outs)
				} else {
					var got map[string]*tensor.Tensor
					got, err = p.Run(ctx, e, in)
					outs = got
				}
				if err != nil {
					t.Error(err)
					return
				}
				for name := range want {
					if !slices.Equal(outs[name].Bytes(), want[name].Bytes()) {
						t.Errorf("goroutine %d run %d: output %q differs", i, r, name)
					}
				}
			}
		}()
	}
	wg.Wait()
	if s := e.MemStats(); s.ArenasMade < 1 || s.ArenasMade > n || s.ArenasIdle != s.ArenasMade {
		t.Errorf("after %d concurrent runners: %+v, want 1…%d arenas, all idle", n, s, n)
	}
}

func TestClosedExecutor(t *testing.T) {
	ctx := context.Background()
	p := chain(t, 4, 8, false)
	e := cpu.New()
	in := input(t, 4, 8, 1)
	if _, err := p.Run(ctx, e, in); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if s := e.MemStats(); s.LiveBytes != 0 || s.ArenasIdle != 0 {
		t.Errorf("after Close: %+v, want nothing live", s)
	}
	if _, err := p.Run(ctx, e, in); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Run after Close: %v, want an error saying closed", err)
	}
	if err := p.RunInto(ctx, e, in, outputsFor(t, p)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("RunInto after Close: %v, want an error saying closed", err)
	}
	// A fused plan without temporaries fails too.
	if _, err := chain(t, 4, 8, true).Run(ctx, e, in); err == nil {
		t.Error("fused Run after Close: no error")
	}
}

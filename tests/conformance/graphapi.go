package conformance

import (
	"bytes"
	"context"
	"math"
	"sync"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/tensor"
)

// Graph checks the graph API around the ops: hash-consing, the verifier on
// builder and compiled graphs, compile snapshots, concurrent runs of one
// program, repeated runs, dumps.
func Graph(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	s := newSuite(t, newExec, opts)
	t.Run("hashcons", hashcons)
	t.Run("concurrent_build", concurrentBuild)
	t.Run("snapshot", s.snapshot)
	t.Run("concurrent", s.concurrent)
	t.Run("dumps", s.dumps)
	t.Run("shared_input_tensor", s.sharedInput)
}

// sharedInput: one host tensor passed as two inputs (both are read-only).
func (s *suite) sharedInput(t *testing.T) {
	c := s.newCase(t)
	xv := viewGen.draw(c.r, dtype.F64, []int{6, 6})
	x := c.inputVals("x", xv)
	y := c.inputVals("y", xv)
	c.inputs["y"] = c.inputs["x"]
	out := xv.transpose(0, 1)
	for k := range out.f {
		out.f[k] = xv.f[k] - out.f[k]
	}
	c.expect("d", x.Sub(y.T()), want{v: out, tol: exact})
	c.run()
}

// hashcons: building the same op on the same inputs twice gives the same
// node; anything that differs (params by their bits, dtype, shape, layout,
// input name) gives a different one.
func hashcons(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 3, 4)
	y := g.Input("y", dtype.F32, 3, 4)
	c := g.Input("c", dtype.U8, 3, 4)
	row := g.Input("row", dtype.F32, 4)
	same := []struct {
		name string
		a, b *graph.Tensor
	}{
		{"exp", x.Exp(), x.Exp()},
		{"elu", x.Elu(0.5), x.Elu(0.5)},
		{"affine", x.Affine(2, 1), x.Affine(2, 1)},
		{"add", x.Add(y), x.Add(y)},
		{"add scalar", x.Add(graph.Scalar(1)), x.Add(graph.Scalar(1))},
		{"scalar and full", x.Add(graph.Scalar(1)), x.Add(g.Full(dtype.F32, 1))},
		{"broadcast", x.Add(row), x.Add(row)},
		{"compare", x.Lt(y), x.Lt(y)},
		{"where", graph.Where(c, x, y), graph.Where(c, x, y)},
		{"cast", x.Cast(dtype.F16), x.Cast(dtype.F16)},
		{"full", g.Full(dtype.I64, 3, 2, 2), g.Full(dtype.I64, 3, 2, 2)},
		{"arange", g.Arange(dtype.F32, 0, 5, 1), g.Arange(dtype.F32, 0, 5, 1)},
		{"view", x.T(), x.T()},
		{"contiguous", x.T().Contiguous(), x.T().Contiguous()},
		{"chain", x.Exp().Mul(y).Sqrt(), x.Exp().Mul(y).Sqrt()},
	}
	for _, p := range same {
		if p.a.Err() != nil || p.b.Err() != nil {
			t.Errorf("%s: %v / %v", p.name, p.a.Err(), p.b.Err())
		} else if p.a.Node() != p.b.Node() {
			t.Errorf("%s: built twice gives nodes %v and %v, want one", p.name, p.a.Node(), p.b.Node())
		}
	}
	different := []struct {
		name string
		a, b *graph.Tensor
	}{
		{"param", x.Elu(0.5), x.Elu(0.25)},
		{"signed zero param", x.Affine(1, 0), x.Affine(1, math.Copysign(0, -1))},
		{"op", x.Exp(), x.Log()},
		{"arg order", x.Sub(y), y.Sub(x)},
		{"dtype", g.Full(dtype.F32, 1, 2), g.Full(dtype.F64, 1, 2)},
		{"shape", g.Full(dtype.F32, 1, 2), g.Full(dtype.F32, 1, 3)},
		{"layout", x.Narrow(0, 0, 2), x.Narrow(0, 1, 2)},
		{"input name", g.Input("p", dtype.F32, 2), g.Input("q", dtype.F32, 2)},
	}
	for _, p := range different {
		if p.a.Err() != nil || p.b.Err() != nil {
			t.Errorf("%s: %v / %v", p.name, p.a.Err(), p.b.Err())
		} else if p.a.Node() == p.b.Node() {
			t.Errorf("%s: different ops share node %v", p.name, p.a.Node())
		}
	}
	if err := ir.Verify(g.IR()); err != nil {
		t.Errorf("builder graph fails ir.Verify: %v", err)
	}
	// Two nodes with equal keys would fail Verify; and a fresh graph built
	// the same way interns the same number of nodes.
	count := func() int {
		g := graph.New()
		x := g.Input("x", dtype.F16, 8)
		for range 3 {
			g.Output("o", x.Exp().Add(x.Exp()).Mul(graph.Scalar(2)))
		}
		return len(g.IR().Nodes)
	}
	if a, b := count(), count(); a != b {
		t.Errorf("the same building gives %d and %d nodes", a, b)
	}
}

// concurrentBuild: a Graph is safe for concurrent use. Goroutines building
// the same ops get the same nodes, and of several goroutines declaring an
// input under one name with different dtypes exactly one succeeds (the
// others get the "declared twice" error). The second race is narrow, so it
// is tried many times; the loop stops at the first failure.
func concurrentBuild(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 8, 8)
	y := g.Input("y", dtype.F32, 8, 8)
	nodes := make([]*ir.Node, 8)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { nodes[i] = x.Exp().Add(y.T().T()).Mul(graph.Scalar(3)).Node() })
	}
	wg.Wait()
	for _, n := range nodes {
		if n == nil || n != nodes[0] {
			t.Fatalf("concurrent builds of one expression gave nodes %v", nodes)
		}
	}
	if err := ir.Verify(g.IR()); err != nil {
		t.Fatalf("graph built concurrently fails ir.Verify: %v", err)
	}
	for i := range 40000 {
		g := graph.New()
		ok := make([]bool, len(dtype.All))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for k, dt := range dtype.All {
			wg.Go(func() { <-start; ok[k] = g.Input("x", dt, 3).Err() == nil })
		}
		close(start)
		wg.Wait()
		n := 0
		for _, o := range ok {
			if o {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("attempt %d: %d concurrent declarations of input \"x\" with different dtypes succeeded, want 1; the graph then holds %d inputs named \"x\" (ir.Verify: %v)",
				i, n, len(g.IR().Inputs()), ir.Verify(g.IR()))
		}
	}
}

// snapshot: a compiled program does not change when the graph grows.
func (s *suite) snapshot(t *testing.T) {
	c := s.newCase(t)
	x, xv := c.input("x", dtype.F32, []int{5, 3}, viewGen)
	y, w := consume(x, xv)
	c.expect("y", y, w)
	prog := c.compile()
	c.g.Output("later", x.Exp())
	_ = c.g.Input("late_input", dtype.F32, 2)
	if n := len(prog.Plan().Outputs); n != 1 {
		t.Errorf("program has %d outputs after the graph grew, want 1", n)
	}
	out, err := prog.Run(context.Background(), s.execs[0], c.inputs)
	if err != nil {
		t.Fatalf("run after the graph grew: %v", err)
	}
	c.check(w, out["y"], "after the graph grew")
	if len(out) != 1 {
		t.Errorf("run returned %d outputs, want 1", len(out))
	}
}

// concurrent: one program run from several goroutines with different
// inputs, on one executor, many times.
func (s *suite) concurrent(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 70, 70)
	b := g.Input("b", dtype.BF16, 70)
	g.Output("y", x.T().Add(b.Cast(dtype.F32)).Affine(2, 1).Maximum(graph.Scalar(0)))
	prog, err := g.Compile(s.opts)
	if err != nil {
		t.Fatal(err)
	}
	r := s.rng(t)
	const workers, runs = 4, 8
	type job struct {
		in   map[string]*tensor.Tensor
		want vals
	}
	jobs := make([]job, workers)
	for w := range jobs {
		xv := viewGen.draw(r, dtype.F32, []int{70, 70})
		bv := viewGen.draw(r, dtype.BF16, []int{70})
		want := xv.transpose(0, 1)
		for k := range want.f {
			v := roundFloat(dtype.F32, want.f[k]+bv.f[k%70])
			want.f[k] = max(roundFloat(dtype.F32, 2*v+1), 0)
		}
		xt, _ := toTensor(xv)
		bt, _ := toTensor(bv)
		jobs[w] = job{map[string]*tensor.Tensor{"x": xt, "b": bt}, want}
	}
	var wg sync.WaitGroup
	errs := make(chan string, workers*runs)
	for w := range workers {
		wg.Go(func() {
			for range runs {
				out, err := prog.Run(context.Background(), s.execs[w%len(s.execs)], jobs[w].in)
				if err != nil {
					errs <- err.Error()
					return
				}
				got, _ := fromTensor(out["y"])
				for k := range got.f {
					if got.f[k] != jobs[w].want.f[k] {
						errs <- "worker result differs from its reference"
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// dumps: every format writes something; an unknown one is an error.
func (s *suite) dumps(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 4, 4)
	g.Output("y", x.T().Exp().Add(x))
	prog, err := g.Compile(s.opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{graph.DumpText, graph.DumpDOT, graph.DumpPlan, graph.DumpLog} {
		var b bytes.Buffer
		if err := prog.Dump(&b, f); err != nil {
			t.Errorf("dump %s: %v", f, err)
		}
		if f != graph.DumpLog && b.Len() == 0 {
			t.Errorf("dump %s is empty", f)
		}
	}
	var b bytes.Buffer
	if err := prog.Dump(&b, "yaml"); err == nil {
		t.Errorf("dump in an unknown format succeeded")
	}
}

package plan_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
)

// fusedKernel compiles y (built on g) with fusion and returns its one
// fused kernel.
func fusedKernel(t *testing.T, g *graph.Graph, y *graph.Tensor) *plan.Kernel {
	t.Helper()
	g.Output("y", y)
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Plan().Steps {
		if s.Kernel.CoreAt() >= 0 {
			return s.Kernel
		}
	}
	t.Fatalf("no fused kernel in %d steps", len(p.Plan().Steps))
	return nil
}

// TestSplitFused: a pool with a prologue and an epilogue, and a product
// with an epilogue, come apart into parts whose operands map back onto
// the fused kernel's, with the temporaries numbered from the ID given;
// kernels that break the layout rules are errors naming the kernel.
func TestSplitFused(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 1, 2, 6, 6)
	b := g.Input("b", dtype.F32, 1, 2, 1, 1)
	r := g.Input("r", dtype.F32, 1, 2, 3, 3)
	k := fusedKernel(t, g, x.Add(b).Relu().MaxPool2d(2, 2).Mul(r))
	if k.WindowAt() != 2 || k.MatmulAt() != -1 || !k.IsFusedWindow() || k.WindowNode() != k.Instrs[2].Node {
		t.Fatalf("%s: WindowAt %d, MatmulAt %d", k.Name, k.WindowAt(), k.MatmulAt())
	}
	parts, err := plan.SplitFused(k, 40)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts.Temps) != 2 || parts.Temps[0].ID != 40 || parts.Temps[1].ID != 41 || parts.Temps[0].Kind != plan.BufTemp {
		t.Errorf("temporaries %v", parts.Temps)
	}
	if !slices.Equal(parts.Pre.Shape, []int{1, 2, 6, 6}) || parts.Pre.Out != parts.Temps[0] || len(parts.PreIns) != 2 {
		t.Errorf("prologue %v → %v, operands %v", parts.Pre.Shape, parts.Pre.Out, parts.PreIns)
	}
	if parts.Core.Ins[0].Buf != parts.Temps[0] || parts.CoreIns[0] != -1 || parts.Core.Out != parts.Temps[1] {
		t.Errorf("core reads %v, writes %v", parts.Core.Ins, parts.Core.Out)
	}
	if parts.Post.Out != k.Out || parts.PostValue < 0 || parts.Post.Ins[parts.PostValue].Buf != parts.Temps[1] || parts.PostIns[parts.PostValue] != -1 {
		t.Errorf("epilogue: value operand %d of %v → %v", parts.PostValue, parts.PostIns, parts.Post.Out)
	}
	for i, f := range append(slices.Clone(parts.PreIns), parts.PostIns...) {
		if f >= len(k.Ins) {
			t.Errorf("part operand %d maps to %d of %d", i, f, len(k.Ins))
		}
	}

	g = graph.New()
	a := g.Input("a", dtype.BF16, 3, 8)
	w := g.Input("w", dtype.BF16, 5, 8)
	res := g.Input("res", dtype.BF16, 3, 5)
	m := fusedKernel(t, g, a.Matmul(w.T()).Add(res).Cast(dtype.F32))
	if !m.IsFusedMatmul() || m.MatmulAt() != 0 || m.WindowNode() != nil {
		t.Fatalf("%s: MatmulAt %d", m.Name, m.MatmulAt())
	}
	mp, err := plan.SplitFused(m, 9)
	if err != nil {
		t.Fatal(err)
	}
	if mp.Pre != nil || !mp.Core.IsMatmul() || len(mp.Core.Ins) != 2 || mp.CoreIns[0] < 0 || mp.CoreIns[1] < 0 || len(mp.Temps) != 1 {
		t.Errorf("product parts: pre %v, core operands %v, temps %v", mp.Pre, mp.CoreIns, mp.Temps)
	}
	if _, err := plan.Gemm(mp.Core); err != nil {
		t.Errorf("the core is not a GEMM: %v", err)
	}

	// Broken kernels: not fused; an epilogue that reads a prologue value.
	if _, err := plan.SplitFused(mp.Core, 0); err == nil || !strings.Contains(err.Error(), "not a fused kernel") {
		t.Errorf("SplitFused of a plain matmul: %v", err)
	}
	bad := plan.Kernel{Name: k.Name, Shape: k.Shape, Ins: k.Ins, Out: k.Out}
	bad.Instrs = slices.Clone(k.Instrs)
	last := bad.Instrs[len(bad.Instrs)-1]
	last.Args = slices.Clone(last.Args)
	last.Args[0] = plan.Ref{Index: 0} // the prologue's first value
	bad.Instrs[len(bad.Instrs)-1] = last
	if _, err := plan.SplitFused(&bad, 0); err == nil || !strings.Contains(err.Error(), k.Name) {
		t.Errorf("an epilogue reading the prologue: %v", err)
	}
}

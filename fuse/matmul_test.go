package fuse_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// opsOf lists each step's ops, e.g. [[matmul] [add gelu add]].
func opsOf(p *graph.Program) [][]string {
	var out [][]string
	for _, k := range kernels(p) {
		out = append(out, k.OpNames())
	}
	return out
}

// TestMatmulEpilogue: linear + gelu + residual is one fused kernel — the
// GEMM with bias, activation and residual as its epilogue (core-fusion),
// which splits into the GEMM and its epilogue where it must
// (plan.SplitFused) — and an elementwise producer of its first operand
// stays its own kernel: a product reads its input once per output row.
func TestMatmulEpilogue(t *testing.T) {
	for _, producer := range []bool{false, true} {
		g := graph.New()
		x := g.Input("x", dtype.F32, 2, 3, 4)
		if producer {
			x = x.Affine(2, 1).Silu()
		}
		w := g.Input("w", dtype.F32, 5, 4)
		b := g.Input("b", dtype.F32, 5)
		r := g.Input("r", dtype.F32, 2, 3, 5)
		g.Output("y", graph.Linear(x, w, b).Gelu().Add(r).Cast(dtype.F16))
		p := mustCompile(t, g, fused)
		want := "[[matmul add gelu add cast]]"
		if producer {
			want = "[[affine silu] [matmul add gelu add cast]]"
		}
		if got := fmtOps(opsOf(p)); got != want {
			t.Errorf("producer=%v: steps %s, want %s\n%s", producer, got, want, dump(t, p, "plan"))
		}
		if producer && len(logLines(dump(t, p, "log"), "silu stored", "matmul")) != 1 {
			t.Errorf("the log does not say why silu is stored:\n%s", dump(t, p, "log"))
		}
		if err := checkPlan(p.Plan()); err != nil {
			t.Error(err)
		}
		// The weight is read transposed in place, and the batch of rows
		// folds into one product: M = 2·3.
		for _, k := range kernels(p) {
			if k.IsFusedMatmul() {
				parts, err := plan.SplitFused(k, 100)
				if err != nil {
					t.Fatal(err)
				}
				if parts.Pre != nil || parts.Post == nil {
					t.Errorf("producer=%v: parts %+v", producer, parts)
				}
				k = parts.Core
			}
			if k.IsMatmul() {
				gs, err := plan.Gemm(k)
				if err != nil {
					t.Fatal(err)
				}
				if c := gs.Call; !c.TransB || c.TransA || c.M != 6 || c.N != 5 || c.K != 4 || c.Batch != 1 || c.LDB != 4 || c.LDA != 4 || c.LDC != 5 {
					t.Errorf("gemm %v, want NT M=6 N=5 K=4 lda=4 ldb=4 ldc=5 batch=1", c)
				}
			}
		}
	}
}

func fmtOps(steps [][]string) string {
	var parts []string
	for _, s := range steps {
		parts = append(parts, "["+strings.Join(s, " ")+"]")
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// TestMatmulOperandCopies: views a GEMM reads in place (transpose, narrow,
// offsets, a batch broadcast over every batch dim) make no copy; a view
// without a unit stride, or batch dims that do not collapse, gets one copy
// step per operand, said in the log — fused or not.
func TestMatmulOperandCopies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		build  func(g *graph.Graph) *graph.Tensor
		copies int
		why    string
	}{
		{"transposed", func(g *graph.Graph) *graph.Tensor {
			return g.Input("a", dtype.F32, 5, 3).T().Matmul(g.Input("b", dtype.F32, 4, 5).T())
		}, 0, ""},
		{"narrowed", func(g *graph.Graph) *graph.Tensor {
			return g.Input("a", dtype.F32, 4, 9).Narrow(1, 2, 5).Matmul(g.Input("b", dtype.F32, 7, 6).Narrow(0, 1, 5))
		}, 0, ""},
		{"broadcast-batch", func(g *graph.Graph) *graph.Tensor {
			return g.Input("a", dtype.F32, 2, 3, 4, 5).Matmul(g.Input("b", dtype.F32, 5, 6))
		}, 0, ""},
		{"stepped", func(g *graph.Graph) *graph.Tensor {
			a := g.Input("a", dtype.F32, 4, 5, 2).Narrow(2, 1, 1).Squeeze(2)
			return a.Matmul(g.Input("b", dtype.F32, 5, 6))
		}, 1, "strides [10 2]"},
		{"mixed-batch", func(g *graph.Graph) *graph.Tensor {
			return g.Input("a", dtype.F32, 2, 1, 4, 5).Matmul(g.Input("b", dtype.F32, 3, 5, 6))
		}, 2, "do not collapse"},
	} {
		for _, opts := range []graph.Options{fused, unfused} {
			g := graph.New()
			g.Output("y", tc.build(g))
			p := mustCompile(t, g, opts)
			copies := 0
			for _, k := range kernels(p) {
				for _, in := range k.Instrs {
					if in.Node.Op == ir.OpCopy {
						copies++ // a copy step, or a fused matmul's prologue
					}
				}
				if k.IsFusedMatmul() {
					parts, err := plan.SplitFused(k, 100)
					if err != nil {
						t.Fatal(err)
					}
					k = parts.Core
				}
				if k.IsMatmul() {
					if _, err := plan.Gemm(k); err != nil {
						t.Errorf("%s: %v", tc.name, err)
					}
				}
			}
			log := dump(t, p, "log")
			lines := logLines(log, "matmul-operands", "copied to a contiguous buffer")
			if copies != tc.copies || len(lines) != tc.copies {
				t.Errorf("%s (fusion %v): %d copy steps and %d log lines, want %d\n%s\n%s", tc.name, !opts.NoFusion, copies, len(lines), tc.copies, dump(t, p, "plan"), log)
			}
			if tc.why != "" && len(logLines(log, "matmul-operands", tc.why)) == 0 {
				t.Errorf("%s: the log does not say %q:\n%s", tc.name, tc.why, log)
			}
		}
	}
}

// TestMatmulTF32Option: AllowTF32 is recorded in the plan and its dump
// (off by default), and one buffer read as both operands of a product is
// one operand of the step.
func TestMatmulTF32Option(t *testing.T) {
	for _, allow := range []bool{false, true} {
		g := graph.New()
		x := g.Input("x", dtype.F32, 3, 3)
		g.Output("y", x.Matmul(x))
		opts := fused
		opts.AllowTF32 = allow
		p := mustCompile(t, g, opts)
		if p.Plan().AllowTF32 != allow || !strings.Contains(dump(t, p, "plan"), fmt.Sprintf("matmul: allow_tf32=%v\n", allow)) {
			t.Errorf("AllowTF32=%v not recorded:\n%s", allow, dump(t, p, "plan"))
		}
		k := kernels(p)[0]
		gs, err := plan.Gemm(k)
		if err != nil || len(k.Ins) != 1 || gs.A != gs.B {
			t.Errorf("x·x: %d operands, gemm %v, %v", len(k.Ins), gs, err)
		}
		in, _ := tensor.New([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 3, 3)
		out := mustRun(t, p, map[string]*tensor.Tensor{"x": in}, 0xff)
		want := []float32{30, 36, 42, 66, 81, 96, 102, 126, 150}
		if got := out["y"].Float64s(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("x·x = %v, want %v", got, want)
		}
	}
}

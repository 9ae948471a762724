package fuse_test

import (
	"math"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestViewsOfIntermediates: every kind of view of a computed value compiles
// in both modes and computes the same bits. A reshape of a contiguous value
// (reshape, unsqueeze, squeeze) is an identity view: plan.go's inlineView
// lets the producer fuse into its reader's kernel even though the two have
// different shapes, and plan's kernel() then rejects the group ("node … in a
// kernel of shape …").
func TestViewsOfIntermediates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(g *graph.Graph) *graph.Tensor
	}{
		{"transpose", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 2, 3).Exp().T().Add(g.Input("y", dtype.F32, 3, 2))
		}},
		{"narrow", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 4, 3).Exp().Narrow(0, 1, 2).Add(g.Input("y", dtype.F32, 2, 3))
		}},
		{"broadcast", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 3).Exp().Add(g.Input("y", dtype.F32, 2, 3))
		}},
		{"reshape", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 2, 3).Exp().Reshape(6).Add(g.Input("y", dtype.F32, 6))
		}},
		{"unsqueeze", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 2, 3).Exp().Unsqueeze(0).Add(g.Input("y", dtype.F32, 1, 2, 3))
		}},
		{"squeeze", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 1, 3).Sin().Squeeze(0).Mul(g.Input("y", dtype.F32, 3))
		}},
		{"reshape-output", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 2, 3).Exp().Reshape(3, 2)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := graph.New()
			g.Output("o", tc.build(g))
			differential(t, g, 20)
		})
	}
}

// TestFoldIdentityOfView: fold replaces affine(x, 1, 0) by x. When x is a
// view and the affine is itself read through a view, the result is a view
// of a view, which the verifier rejects and plan cannot read.
func TestFoldIdentityOfView(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(x *graph.Tensor) *graph.Tensor
	}{
		{"identity", func(x *graph.Tensor) *graph.Tensor { return x.T().Affine(1, 0).T().Exp() }},
		{"chain-to-identity", func(x *graph.Tensor) *graph.Tensor { return x.T().Affine(2, 0).Affine(0.5, 0).T().Exp() }},
		{"broadcast", func(x *graph.Tensor) *graph.Tensor {
			return x.Narrow(0, 0, 1).BroadcastTo(2, 3).Affine(1, 0).Narrow(1, 1, 2).Sin()
		}},
		// graph.Output does not copy a reshape of a computed value; once
		// the affine is folded away the output is a view of a view.
		{"reshape-output", func(x *graph.Tensor) *graph.Tensor { return x.T().Affine(1, 0).Reshape(6) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, check := range []bool{true, false} {
				g := graph.New()
				g.Output("o", tc.build(g.Input("x", dtype.F32, 2, 3)))
				for _, opts := range []graph.Options{{Check: check}, {NoFusion: true, Check: check}} {
					if _, err := g.Compile(opts); err != nil {
						t.Errorf("Check=%v NoFusion=%v: %v\ngraph:\n%s", check, opts.NoFusion, err, irText(g.IR()))
					}
				}
			}
		})
	}
}

// TestFoldToInputOutput: an output that is a reshape of an affine(x, 1, 0)
// of an input becomes, after fold, a reshape of the input itself; it must
// still be a fresh buffer holding x.
func TestFoldToInputOutput(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 2, 3)
	g.Output("o", x.Affine(1, 0).Reshape(3, 2))
	g.Output("p", x.Affine(1, 0).Reshape(6).Exp())
	_, _, in, out := differential(t, g, 21)
	if o := out["o"]; !slices.Equal(o.Shape(), []int{3, 2}) || !slices.Equal(o.Float64s(), in["x"].Float64s()) {
		t.Errorf("o = %v %v, want x reshaped to [3 2]: %v", o.Shape(), o.Float64s(), in["x"].Float64s())
	}
}

// TestFoldKeepsValues: fold must not change what a graph computes beyond the
// rounding documented in fold.go.
func TestFoldKeepsValues(t *testing.T) {
	negZero := math.Copysign(0, -1)
	t.Run("identity-of-negative-zero", func(t *testing.T) {
		// affine(x, 1, 0) is x·1 + 0, which is +0 for x = -0. As an output
		// the affine is kept and stores +0; read by another op, fold.go
		// replaces it by x and the reader sees -0.
		for _, dt := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
			xs, _ := tensor.FromFloat64s(dt, []float64{negZero, 2}, 2)
			in := map[string]*tensor.Tensor{"x": xs}
			for _, opts := range []graph.Options{fused, unfused} {
				g := graph.New()
				g.Output("a", g.Input("x", dt, 2).Affine(1, 0))
				if v := mustRun(t, mustCompile(t, g, opts), in, poisonFused)["a"].Float64(0); math.Signbit(v) {
					t.Errorf("%v NoFusion=%v: output affine(-0, 1, 0) = %v, want +0", dt, opts.NoFusion, v)
				}
				g = graph.New()
				g.Output("r", g.Input("x", dt, 2).Affine(1, 0).Recip())
				if v := mustRun(t, mustCompile(t, g, opts), in, poisonFused)["r"].Float64(0); !math.IsInf(v, 1) {
					t.Errorf("%v NoFusion=%v: recip(affine(-0, 1, 0)) = %v, want +Inf (affine(-0, 1, 0) = -0·1 + 0 = +0; fold.go drops the affine)", dt, opts.NoFusion, v)
				}
			}
		}
	})
	t.Run("chain-overflow", func(t *testing.T) {
		// affine(affine(x, 2, 0), 0.5, 0) in f32 overflows to +Inf at the
		// inner affine for x = 3e38 when evaluated step by step; fold.go
		// documents that the folded chain affine(x, 1, 0) rounds once and
		// has no intermediate overflow, so it returns x.
		g := graph.New()
		x := g.Input("x", dtype.F32, 1)
		g.Output("o", x.Affine(2, 0).Affine(0.5, 0))
		xs, _ := tensor.New([]float32{3e38}, 1)
		for _, opts := range []graph.Options{fused, unfused} {
			out := mustRun(t, mustCompile(t, g, opts), map[string]*tensor.Tensor{"x": xs}, poisonFused)
			if v := out["o"].Float64(0); v != float64(float32(3e38)) {
				t.Errorf("NoFusion=%v: folded (3e38·2)·0.5 in f32 = %v, want 3e38 (one rounding, no intermediate overflow)", opts.NoFusion, v)
			}
		}
	})
}

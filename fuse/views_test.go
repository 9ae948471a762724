package fuse_test

import (
	"math"
	"slices"
	"strings"
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
		{"chain-to-identity", func(x *graph.Tensor) *graph.Tensor { return x.T().Affine(1, 0).Affine(1, 0).T().Exp() }},
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

// TestFoldKeepsValues: fold must not change what a graph computes: every
// value is the step-by-step one.
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
	t.Run("chain-step-by-step", func(t *testing.T) {
		// An affine chain gives the step-by-step values, fused or not:
		// folding happens only where it is exact for every input.
		f32 := func(v float64) float64 { return float64(float32(v)) }
		step32 := func(x float64, ms ...float64) float64 {
			v := float32(x)
			for _, m := range ms {
				v = v*float32(m) + 0
			}
			return float64(v)
		}
		step64 := func(x float64, ms ...float64) float64 {
			for _, m := range ms {
				x = x*m + 0
			}
			return x
		}
		for _, tc := range []struct {
			dt    dtype.DType
			ms    []float64
			xs    []float64
			want  []float64
			folds bool
		}{
			{dtype.F32, []float64{1e20, 1e20}, []float64{0, 1e-30, 1}, []float64{0, f32(1e-30 * f32(1e20) * f32(1e20)), math.Inf(1)}, false},
			{dtype.F32, []float64{1e-30, 1e-30}, []float64{1e30, 1}, []float64{step32(1e30, 1e-30, 1e-30), 0}, false},
			{dtype.F32, []float64{2, 0.5}, []float64{3e38, 1}, []float64{math.Inf(1), 1}, false},
			{dtype.F64, []float64{1e300, 1e300}, []float64{0, 1e-300, 1}, []float64{0, step64(1e-300, 1e300, 1e300), math.Inf(1)}, false},
			{dtype.F32, []float64{0x1p100, 0x1p100}, []float64{0, 0x1p-120, -1}, []float64{0, 0x1p80, math.Inf(-1)}, false}, // 2^200 is not an f32
			{dtype.F32, []float64{0x1p60, -0x1p60}, []float64{0, 0x1p-140, 1, negZero}, []float64{0, -0x1p-20, -0x1p120, 0}, true},
			{dtype.F64, []float64{4, 0x1p1000}, []float64{0x1p30, 0x1p-1060}, []float64{math.Inf(1), 0x1p-58}, true},
		} {
			g := graph.New()
			x := g.Input("x", tc.dt, len(tc.xs))
			g.Output("o", x.Affine(tc.ms[0], 0).Affine(tc.ms[1], 0))
			xs, _ := tensor.FromFloat64s(tc.dt, tc.xs, len(tc.xs))
			for _, opts := range []graph.Options{fused, unfused} {
				p := mustCompile(t, g, opts)
				if folded := strings.Contains(dump(t, p, "log"), "fold: folded 1"); folded != tc.folds {
					t.Errorf("%v affine(%v)·affine(%v) NoFusion=%v: folded=%v, want %v", tc.dt, tc.ms[0], tc.ms[1], opts.NoFusion, folded, tc.folds)
				}
				out := mustRun(t, p, map[string]*tensor.Tensor{"x": xs}, poisonFused)["o"]
				for k, w := range tc.want {
					if v := out.Float64(k); v != w || math.Signbit(v) != math.Signbit(w) {
						t.Errorf("%v x=%v ·%v ·%v NoFusion=%v: got %v, want %v (step by step)", tc.dt, tc.xs[k], tc.ms[0], tc.ms[1], opts.NoFusion, v, w)
					}
				}
			}
		}
	})
}

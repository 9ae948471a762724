package conformance

import (
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
)

// largeShape has 300k elements: 74 CPU tiles of 4096, enough for every
// worker of a multi-core executor, with tile boundaries inside rows.
var largeShape = []int{600, 500}

// Large runs a few ops on 300k-element values through strided layouts.
func Large(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	s := newSuite(t, newExec, opts)
	t.Run("exp_f32_transposed", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		sp := unarySpecs[ir.OpExp]
		x, xv := transposed.build(c, "x", dtype.F32, largeShape, sp.gen)
		c.expect("y", x.Exp(), sp.want(xv, nil))
		c.run()
	})
	t.Run("add_f16_narrowed_lead", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		x, y, xv, yv := c.pair("", opd(narrowed, largeShape...), opd(lead, largeShape...), dtype.F16, wideGen, wideGen)
		out := newVals(dtype.F16, largeShape)
		for k := range out.f {
			out.f[k] = xv.f[k] + yv.f[k]
		}
		c.expect("y", x.Add(y), want{v: out, tol: exact, args: []vals{xv, yv}})
		c.run()
	})
	t.Run("where_i64_permuted", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		cond, cv := permuted.build(c, "c", dtype.I64, largeShape, condGen)
		x, xv := broadcast.build(c, "x", dtype.BF16, largeShape, wideGen)
		out := newVals(dtype.BF16, largeShape)
		for k := range out.f {
			out.f[k] = -7
			if cv.i[k] != 0 {
				out.f[k] = xv.f[k]
			}
		}
		c.expect("y", graph.Where(cond, x, graph.Scalar(-7)), want{v: out, tol: exact, args: []vals{cv, xv}})
		c.run()
	})
	t.Run("cast_f64_to_bf16_chain", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		x, xv := chain.build(c, "x", dtype.F64, largeShape, castSource)
		c.expect("y", x.Cast(dtype.BF16), want{v: castVals(xv, dtype.BF16), tol: exact, args: []vals{xv}})
		c.run()
	})
	t.Run("arange", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		f := newVals(dtype.F32, []int{300000})
		i := newVals(dtype.I64, []int{300000})
		for k := range 300000 {
			f.f[k] = float64(k)
			i.i[k] = 2100000 - 7*int64(k)
		}
		c.expect("f32", c.g.Arange(dtype.F32, 0, 300000, 1), want{v: f, tol: exact})
		c.expect("i64", c.g.Arange(dtype.I64, 2100000, 0, -7), want{v: i, tol: exact})
		c.run()
	})
	t.Run("silu_affine_f32_transposed", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		x, xv := transposed.build(c, "x", dtype.F32, largeShape, gen{f: uniform(-20, 20)})
		out := newVals(dtype.F32, largeShape)
		for k, v := range xv.f {
			out.f[k] = 2*roundFloat(dtype.F32, v/(1+math.Exp(-v))) + 1
		}
		c.expect("y", x.Silu().Affine(2, 1), want{v: out, tol: transcendental, args: []vals{xv}})
		c.run()
	})
}

package conformance

import (
	"fmt"
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
)

// Chains runs random multi-op graphs: several inputs in different layouts,
// unary and binary ops, comparisons feeding where, cast round trips,
// transposes of computed values, intermediate values also used as outputs.
// Every op in them is exactly rounded, and the reference rounds every
// intermediate to its node's dtype (as the IR defines), so a fused kernel
// must match bit for bit. This is the group that checks fusion.
func Chains(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	s := newSuite(t, newExec, opts)
	for k := range 56 {
		dt := dtype.All[k%len(dtype.All)]
		t.Run(fmt.Sprintf("%v/%d", dt, k), func(t *testing.T) { t.Parallel(); s.randomChain(t, dt) })
	}
	t.Run("dag", s.dag)
	t.Run("smoke", s.smokeChain)
}

// node is a value of a chain: its graph tensor and reference values.
type node struct {
	x *graph.Tensor
	v vals
}

// chainShape is square (transposes keep the shape) and spans two CPU tiles.
var chainShape = []int{65, 65}

// chainUnary lists the exactly rounded one-argument ops of a dtype.
func chainUnary(dt dtype.DType) []ir.Op {
	switch {
	case dt.IsFloat():
		return []ir.Op{ir.OpNeg, ir.OpAbs, ir.OpSqr, ir.OpCeil, ir.OpFloor, ir.OpRound, ir.OpRelu, ir.OpSqrt, ir.OpSign}
	case dt == dtype.I64:
		return []ir.Op{ir.OpNeg, ir.OpAbs, ir.OpSqr, ir.OpRelu, ir.OpSign}
	}
	return nil
}

// chainAffine returns parameters for an exactly rounded affine on dt (f32
// and f64 multiply with a rounding before the add, so their affine is not
// in chains), and false if there are none.
func chainAffine(dt dtype.DType) ([]float64, bool) {
	switch dt {
	case dtype.F32, dtype.F64:
		return nil, false
	case dtype.F16, dtype.BF16:
		return []float64{1.5, -0.25}, true
	}
	return []float64{3, 7}, true
}

// roundTo rounds every element of v to its dtype (floats) or wraps it (ints).
func roundTo(v vals) vals {
	for k := range v.f {
		v.f[k] = roundFloat(v.dt, v.f[k])
	}
	for k := range v.i {
		v.i[k] = wrapInt(v.dt, v.i[k])
	}
	return v
}

func (s *suite) randomChain(t *testing.T, dt dtype.DType) {
	c := s.newCase(t)
	r := c.r
	g := gen{f: uniform(-6, 6), specials: infSpec}
	layouts := []layout{contig, permuted, transposed, broadcast, narrowed, offset, splat, chain}
	var pool []node
	for i := range 3 {
		l := layouts[r.IntN(len(layouts))]
		x, v := l.build(c, fmt.Sprintf("in%d_%s", i, l.name), dt, chainShape, g)
		pool = append(pool, node{x, v})
	}
	pick := func() node { return pool[r.IntN(len(pool))] }
	var computed []node
	for range 3 + r.IntN(6) {
		a, b := pick(), pick()
		var n node
		switch k := r.IntN(6); {
		case k == 0 && len(chainUnary(dt)) > 0:
			op := chainUnary(dt)[r.IntN(len(chainUnary(dt)))]
			sp := unarySpecs[op]
			n = node{sp.call(a.x, nil), roundTo(sp.want(a.v, nil).v)}
		case k == 0:
			p, _ := chainAffine(dt)
			sp := unarySpecs[ir.OpAffine]
			n = node{sp.call(a.x, p), roundTo(sp.want(a.v, p).v)}
		case k == 1 || k == 2:
			sp := binarySpecs[r.IntN(len(binarySpecs))]
			if sp.op == ir.OpDiv {
				sp = binarySpecs[0] // division by a zero of unspecified sign (from max, relu …) has no defined sign
			}
			if r.IntN(4) == 0 {
				y, yv := scalarOpd(2.5).build(c, "", dt, g)
				b = node{y, yv.broadcast(chainShape)}
			}
			n = binNode(sp, a, b)
		case k == 3:
			n = whereNode(compareSpecs[r.IntN(len(compareSpecs))], a, b, pick(), pick())
		case k == 4:
			other := dtype.All[r.IntN(len(dtype.All))]
			n = node{a.x.Cast(other).Cast(dt), castVals(castVals(a.v, other), dt)}
		default:
			n = chainView(r.IntN(4), r.IntN(chainShape[0]), a, dt)
		}
		pool = append(pool, n)
		computed = append(computed, n)
	}
	last := computed[len(computed)-1]
	c.expect("out", last.x, want{v: last.v, tol: exact, signFree: true})
	if len(computed) > 1 && r.IntN(2) == 0 {
		mid := computed[r.IntN(len(computed)-1)]
		c.expect("mid", mid.x, want{v: mid.v, tol: exact, signFree: true})
	}
	c.run()
}

// binNode applies a binary op and rounds the reference to the dtype.
func binNode(sp binarySpec, a, b node) node {
	out := newVals(a.v.dt, a.v.shape)
	for k := range out.n() {
		if out.dt.IsFloat() {
			out.f[k] = sp.f(a.v.f[k], b.v.f[k])
		} else {
			out.i[k] = sp.i(a.v.i[k], b.v.i[k])
		}
	}
	return node{sp.call(a.x, b.x), roundTo(out)}
}

// whereNode is where(cmp(a, b), t, f).
func whereNode(cs compareSpec, a, b, t, f node) node {
	out := newVals(t.v.dt, t.v.shape)
	for k := range out.n() {
		var cond bool
		if a.v.dt.IsFloat() {
			cond = cs.f(a.v.f[k], b.v.f[k])
		} else {
			cond = cs.i(a.v.i[k], b.v.i[k])
		}
		if cond {
			out.set(k, t.v, k)
		} else {
			out.set(k, f.v, k)
		}
	}
	return node{graph.Where(cs.call(a.x, b.x), t.x, f.x), out}
}

// specOf finds the binary spec of an op.
func specOf(op ir.Op) binarySpec {
	for _, sp := range binarySpecs {
		if sp.op == op {
			return sp
		}
	}
	panic("no binary spec for " + op.String())
}

// dag is a fixed graph of shared values for every dtype: a value stored as
// an output and also read directly, transposed and as a broadcast row by
// other kernels; a diamond; one value under two output names; a dead branch;
// an unused input.
func (s *suite) dag(t *testing.T) {
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			g := gen{f: uniform(-6, 6), specials: infSpec}
			in := func(name string) node {
				x, v := c.input(name, dt, chainShape, g)
				return node{x, v}
			}
			x, y := in("x"), in("y")
			in("unused")
			add, mul, sub, mx := specOf(ir.OpAdd), specOf(ir.OpMul), specOf(ir.OpSub), specOf(ir.OpMaximum)
			a := binNode(add, x, y)
			b := binNode(mul, a, x)
			cc := binNode(sub, a, y)
			_ = binNode(mul, b, cc).x.Cast(dtype.F64) // dead
			aT := chainView(0, 0, a, dt)
			row := chainView(1, 5, a, dt)
			outs := map[string]node{
				"a":       a,
				"aT":      aT,
				"sym":     binNode(add, a, aT),
				"diamond": binNode(mx, b, cc),
				"row":     binNode(add, row, b),
				"b":       b,
				"b_again": b,
				"where":   whereNode(compareSpecs[4], a, cc, b, chainView(0, 0, cc, dt)),
			}
			for name, o := range outs {
				c.expect(name, o.x, want{v: o.v, tol: exact, signFree: true})
			}
			c.run()
		})
	}
}

// chainView reads a (often a computed value) through a view: a transpose,
// one row or one column broadcast over the square, or a reshape to another
// shape, an op there, and a reshape back (the reshapes map element i to
// element i, so a fused kernel may read them in place; the others need the
// value in memory).
func chainView(kind, at int, a node, dt dtype.DType) node {
	n := chainShape[0]
	switch kind {
	case 0:
		return node{a.x.T(), a.v.transpose(0, 1)}
	case 1:
		return node{a.x.Narrow(0, at, 1).BroadcastTo(chainShape...), a.v.narrow(0, at, 1).broadcast(chainShape)}
	case 2:
		return node{a.x.Narrow(1, at, 1).BroadcastTo(chainShape...), a.v.narrow(1, at, 1).broadcast(chainShape)}
	}
	flat := []int{13, n * n / 13}
	var y *graph.Tensor
	var v vals
	if ops := chainUnary(dt); len(ops) > 0 {
		sp := unarySpecs[ops[0]]
		y, v = sp.call(a.x.Reshape(flat...), nil), roundTo(sp.want(a.v, nil).v)
	} else {
		p, _ := chainAffine(dt)
		sp := unarySpecs[ir.OpAffine]
		y, v = sp.call(a.x.Reshape(flat...), p), roundTo(sp.want(a.v, p).v)
	}
	return node{y.Reshape(chainShape...), v}
}

// smokeChain is the graph of the original smoke test: an f16 input cast to
// f32 through silu and affine, selected by a comparison of another input,
// plus a transposed output of that input.
func (s *suite) smokeChain(t *testing.T) {
	c := s.newCase(t)
	x, xv := c.input("x", dtype.F16, []int{64, 33}, gen{f: uniform(-3, 3)})
	y, yv := c.input("y", dtype.F32, []int{64, 33}, gen{f: uniform(-1, 1), specials: zeroSpec})
	a := x.Cast(dtype.F32).Silu().Affine(2, 1)
	out := newVals(dtype.F32, xv.shape)
	for k := range out.n() {
		// silu rounded to f32, then 2·s + 1 in f32 (exact product, one
		// rounding), then the select: compare with a tolerance.
		v := roundFloat(dtype.F32, xv.f[k]/(1+math.Exp(-xv.f[k])))
		v = 2*v + 1
		if !(yv.f[k] > 0) {
			v = -roundFloat(dtype.F32, v)
		}
		out.f[k] = v
	}
	c.expect("out", graph.Where(y.Gt(graph.Scalar(0)), a, a.Neg()), want{v: out, tol: transcendental, args: []vals{xv, yv}})
	tv := yv.transpose(0, 1)
	for k := range tv.f {
		tv.f[k] += 1
	}
	c.expect("t", y.T().Add(graph.Scalar(1)), want{v: tv, tol: exact})
	c.run()
}

package graph

import (
	"fmt"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// unary records a one-argument elementwise op after checking its dtype rule.
func (t *Tensor) unary(op ir.Op, params ...float64) *Tensor {
	name := op.String()
	if r, ok := t.ready(name); !ok {
		return r
	}
	info := op.Info()
	if !info.In.Has(t.n.DType) {
		return t.g.fail(opErr(name, "dtype %v not supported (supports %v), input %v%v", t.n.DType, info.In, t.n.DType, t.n.Shape))
	}
	for _, p := range params {
		if p != p {
			return t.g.fail(opErr(name, "parameter is NaN, input %v%v", t.n.DType, t.n.Shape))
		}
	}
	return t.g.intern(op, info.OutDType(t.n.DType), t.n.Shape, []*ir.Node{t.n}, params, nil, "")
}

// Exp and the methods below are Candle's unary ops; see ir's op table for
// their exact semantics.
func (t *Tensor) Exp() *Tensor     { return t.unary(ir.OpExp) }
func (t *Tensor) Log() *Tensor     { return t.unary(ir.OpLog) }
func (t *Tensor) Sin() *Tensor     { return t.unary(ir.OpSin) }
func (t *Tensor) Cos() *Tensor     { return t.unary(ir.OpCos) }
func (t *Tensor) Tanh() *Tensor    { return t.unary(ir.OpTanh) }
func (t *Tensor) Recip() *Tensor   { return t.unary(ir.OpRecip) }
func (t *Tensor) Sqrt() *Tensor    { return t.unary(ir.OpSqrt) }
func (t *Tensor) Ceil() *Tensor    { return t.unary(ir.OpCeil) }
func (t *Tensor) Floor() *Tensor   { return t.unary(ir.OpFloor) }
func (t *Tensor) Round() *Tensor   { return t.unary(ir.OpRound) }
func (t *Tensor) Erf() *Tensor     { return t.unary(ir.OpErf) }
func (t *Tensor) Gelu() *Tensor    { return t.unary(ir.OpGelu) }
func (t *Tensor) GeluErf() *Tensor { return t.unary(ir.OpGeluErf) }
func (t *Tensor) Silu() *Tensor    { return t.unary(ir.OpSilu) }
func (t *Tensor) Sigmoid() *Tensor { return t.unary(ir.OpSigmoid) }
func (t *Tensor) Normcdf() *Tensor { return t.unary(ir.OpNormcdf) }
func (t *Tensor) Neg() *Tensor     { return t.unary(ir.OpNeg) }
func (t *Tensor) Sqr() *Tensor     { return t.unary(ir.OpSqr) }
func (t *Tensor) Abs() *Tensor     { return t.unary(ir.OpAbs) }
func (t *Tensor) Sign() *Tensor    { return t.unary(ir.OpSign) }
func (t *Tensor) Relu() *Tensor    { return t.unary(ir.OpRelu) }

// Elu is x for x > 0, alpha·(exp(x) − 1) otherwise.
func (t *Tensor) Elu(alpha float64) *Tensor { return t.unary(ir.OpElu, alpha) }

// Powf raises every element to the constant power e.
func (t *Tensor) Powf(e float64) *Tensor { return t.unary(ir.OpPowf, e) }

// Affine is x·mul + add, computed in the tensor's dtype (for integers, mul
// and add are first converted to it with Rust `as` semantics, like Candle).
// Chains of affines on f32/f64 are folded into one at compile time (package
// fuse, fold.go): the chain then rounds once, and an intermediate overflow
// such as (x·1e30)·1e-30 disappears.
func (t *Tensor) Affine(mul, add float64) *Tensor { return t.unary(ir.OpAffine, mul, add) }

// Cast converts to dt. Float → float rounds to nearest even; float → int
// truncates toward zero and saturates at the target's range, NaN → 0; int →
// int wraps (keeps the low bits, two's complement); int → float rounds to
// nearest. These are Rust's `as` rules, which Candle's CPU backend uses.
// Into f8e4m3, which has no infinities, values beyond ±448 (±Inf included)
// saturate to ±448, as Candle's float8 crate does, and NaN stays NaN
// (stored as 0x7f); conversions from f64 and i64 round once.
func (t *Tensor) Cast(dt dtype.DType) *Tensor {
	if r, ok := t.ready("cast"); !ok {
		return r
	}
	if !dt.Valid() {
		return t.g.fail(opErr("cast", "invalid target dtype %v, input %v%v", dt, t.n.DType, t.n.Shape))
	}
	if dt == t.n.DType {
		return t
	}
	return t.g.intern(ir.OpCast, dt, t.n.Shape, []*ir.Node{t.n}, nil, nil, "")
}

// operands resolves the value operands of an n-ary op: untyped scalars take
// the dtype of the first typed operand, every operand broadcasts to the
// common shape, and dtypes must match.
func operands(op string, ts ...*Tensor) ([]*ir.Node, *Graph, error) {
	var g *Graph
	var dt dtype.DType
	for _, t := range ts {
		if err := t.bad(op); err != nil {
			return nil, g, err
		}
		if t.n != nil {
			if g == nil {
				g, dt = t.g, t.n.DType
			} else if t.g != g {
				return nil, nil, opErr(op, "operands belong to different graphs")
			}
		}
	}
	if g == nil {
		return nil, nil, opErr(op, "needs at least one typed tensor, got only untyped scalars")
	}
	shape := []int{}
	for _, t := range ts {
		if t.n == nil {
			continue
		}
		s, err := ir.BroadcastShapes(shape, t.n.Shape)
		if err != nil {
			return nil, g, opErr(op, "%s", describe(ts, err))
		}
		shape = s
	}
	nodes := make([]*ir.Node, len(ts))
	for i, t := range ts {
		if t.n == nil {
			t = g.Full(dt, *t.scalar)
		} else if t.n.DType != dt {
			return nil, g, opErr(op, "dtype mismatch: %s", describe(ts, nil))
		}
		b := t.broadcastTo(op, shape)
		if b.err != nil {
			return nil, g, b.err
		}
		nodes[i] = b.n
	}
	return nodes, g, nil
}

// describe lists operand dtypes and shapes for error messages.
func describe(ts []*Tensor, err error) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += " and "
		}
		if t.n == nil {
			s += "scalar"
		} else {
			s += fmt.Sprintf("%v%v", t.n.DType, t.n.Shape)
		}
	}
	if err != nil {
		s += ": " + err.Error()
	}
	return s
}

// binary records a two-operand elementwise op with broadcasting.
func binary(op ir.Op, a, b *Tensor) *Tensor {
	name := op.String()
	nodes, g, err := operands(name, a, b)
	if err != nil {
		if g == nil {
			return &Tensor{err: err}
		}
		return g.fail(err)
	}
	info := op.Info()
	dt := nodes[0].DType
	if !info.In.Has(dt) {
		return g.fail(opErr(name, "dtype %v not supported (supports %v)", dt, info.In))
	}
	return g.intern(op, info.OutDType(dt), nodes[0].Shape, nodes, nil, nil, "")
}

// Add and the methods below take a tensor or Scalar and broadcast with numpy
// rules; both operands must share a dtype.
func (t *Tensor) Add(o *Tensor) *Tensor     { return binary(ir.OpAdd, t, o) }
func (t *Tensor) Sub(o *Tensor) *Tensor     { return binary(ir.OpSub, t, o) }
func (t *Tensor) Mul(o *Tensor) *Tensor     { return binary(ir.OpMul, t, o) }
func (t *Tensor) Div(o *Tensor) *Tensor     { return binary(ir.OpDiv, t, o) }
func (t *Tensor) Maximum(o *Tensor) *Tensor { return binary(ir.OpMaximum, t, o) }
func (t *Tensor) Minimum(o *Tensor) *Tensor { return binary(ir.OpMinimum, t, o) }

// Eq and the methods below compare elementwise and produce u8 (1 or 0).
func (t *Tensor) Eq(o *Tensor) *Tensor { return binary(ir.OpEq, t, o) }
func (t *Tensor) Ne(o *Tensor) *Tensor { return binary(ir.OpNe, t, o) }
func (t *Tensor) Lt(o *Tensor) *Tensor { return binary(ir.OpLt, t, o) }
func (t *Tensor) Le(o *Tensor) *Tensor { return binary(ir.OpLe, t, o) }
func (t *Tensor) Gt(o *Tensor) *Tensor { return binary(ir.OpGt, t, o) }
func (t *Tensor) Ge(o *Tensor) *Tensor { return binary(ir.OpGe, t, o) }

// Clamp limits values to [lo, hi] (maximum then minimum, like Candle).
func (t *Tensor) Clamp(lo, hi *Tensor) *Tensor { return t.Maximum(lo).Minimum(hi) }

// Where selects onTrue where cond is non-zero and onFalse elsewhere. cond
// must be u8, u32 or i64; onTrue and onFalse share a dtype (scalars adopt
// it); all three broadcast to a common shape, each keeping its own layout.
func Where(cond, onTrue, onFalse *Tensor) *Tensor {
	vals, g, err := operands("where", onTrue, onFalse)
	if err == nil {
		err = cond.bad("where")
	}
	if err == nil && cond.n == nil {
		err = opErr("where", "condition must be a tensor, got an untyped scalar")
	}
	if err != nil {
		if g == nil {
			return &Tensor{err: err}
		}
		return g.fail(err)
	}
	if cond.g != g {
		return g.fail(opErr("where", "operands belong to different graphs"))
	}
	if !ir.IDDTypes.Has(cond.n.DType) {
		return g.fail(opErr("where", "condition dtype %v must be one of %v (condition %v%v, values %v%v)", cond.n.DType, ir.IDDTypes, cond.n.DType, cond.n.Shape, vals[0].DType, vals[0].Shape))
	}
	shape, err := ir.BroadcastShapes(cond.n.Shape, vals[0].Shape)
	if err != nil {
		return g.fail(opErr("where", "condition %v%v and values %v%v: %v", cond.n.DType, cond.n.Shape, vals[0].DType, vals[0].Shape, err))
	}
	args := []*Tensor{cond.broadcastTo("where", shape), (&Tensor{g: g, n: vals[0]}).broadcastTo("where", shape), (&Tensor{g: g, n: vals[1]}).broadcastTo("where", shape)}
	nodes := make([]*ir.Node, 3)
	for i, a := range args {
		if a.err != nil {
			return a
		}
		nodes[i] = a.n
	}
	return g.intern(ir.OpWhere, vals[0].DType, shape, nodes, nil, nil, "")
}

package cpu

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// opFor returns the tile function of one instruction. Every op of the table
// with class source or elementwise has a case here: this file is the CPU
// twin, and so the spec, of each elementwise kernel.
func opFor(n *ir.Node, args []plan.Ref, k *plan.Kernel, ops []operand, rowLen int) (opFunc, error) {
	argDT := func(i int) dtype.DType {
		r := args[i]
		if r.Operand {
			return ops[r.Index].dt
		}
		return k.Instrs[r.Index].Node.DType
	}
	switch n.Op {
	case ir.OpFull:
		return fullOp(n.DType, n.Params[0]), nil
	case ir.OpArange:
		start, step, dt := n.Params[0], n.Params[1], n.DType
		return func(dst tile, _ []tile, s int) {
			for i := range tileLen(dst) {
				setScalar(dst, i, convScalar(start+float64(s+i)*step, dt))
			}
		}, nil
	case ir.OpRandUniform, ir.OpRandNormal:
		return randOp(n), nil
	case ir.OpCopy:
		return func(dst tile, a []tile, _ int) { copyTile(dst, a[0]) }, nil
	case ir.OpCast:
		return castOp(argDT(0), n.DType), nil
	case ir.OpAffine:
		return affineOp(n.DType, n.Params[0], n.Params[1]), nil
	case ir.OpWhere:
		return whereOp, nil
	case ir.OpSum, ir.OpMax, ir.OpMin, ir.OpArgmax, ir.OpArgmin:
		if k.RowAxes != n.ReduceAxes() || rowLen != n.RowLen() {
			return nil, fmt.Errorf("%v reduces %d axes (%d elements) in a kernel with rows of %d axes (%d elements)", n, n.ReduceAxes(), n.RowLen(), k.RowAxes, rowLen)
		}
		return reduceOp(n.Op, argDT(0)), nil
	}
	if fn := binaryOp(n.Op); fn != nil {
		return fn, nil
	}
	if fn := compareOp(n.Op); fn != nil {
		return fn, nil
	}
	if fn := unaryOp(n.Op, n.Params); fn != nil {
		return fn, nil
	}
	return nil, fmt.Errorf("op %s has no CPU implementation", n.Op)
}

func tileLen(t tile) int {
	switch {
	case t.f32 != nil:
		return len(t.f32)
	case t.f64 != nil:
		return len(t.f64)
	}
	return len(t.i64)
}

// scalar is one value in every compute kind.
type scalar struct {
	f32 float32
	f64 float64
	i64 int64
}

// convScalar converts v to dt (as a cast from f64 would) and widens the
// result to dt's compute kind.
func convScalar(v float64, dt dtype.DType) scalar {
	t, _ := tensor.Zeros(dt, 1)
	t.SetFloat64(0, v)
	switch dt.Kind() {
	case dtype.KF32:
		return scalar{f32: float32(t.Float64(0))}
	case dtype.KF64:
		return scalar{f64: t.Float64(0)}
	}
	switch d := t.Data().(type) {
	case []uint8:
		return scalar{i64: int64(d[0])}
	case []uint32:
		return scalar{i64: int64(d[0])}
	case []int64:
		return scalar{i64: d[0]}
	}
	return scalar{}
}

func setScalar(t tile, i int, v scalar) {
	switch {
	case t.f32 != nil:
		t.f32[i] = v.f32
	case t.f64 != nil:
		t.f64[i] = v.f64
	default:
		t.i64[i] = v.i64
	}
}

func fullOp(dt dtype.DType, v float64) opFunc {
	c := convScalar(v, dt)
	return func(dst tile, _ []tile, _ int) {
		switch {
		case dst.f32 != nil:
			splat(dst.f32, c.f32)
		case dst.f64 != nil:
			splat(dst.f64, c.f64)
		default:
			splat(dst.i64, c.i64)
		}
	}
}

func splat[T any](dst []T, v T) {
	for i := range dst {
		dst[i] = v
	}
}

// whereOp selects without branches (random conditions would mispredict):
// the condition becomes an all-ones or all-zeros mask over the value bits.
func whereOp(dst tile, a []tile, _ int) {
	c := a[0].i64[:tileLen(dst)]
	switch {
	case dst.f32 != nil:
		t, f, d := a[1].f32[:len(c)], a[2].f32[:len(c)], dst.f32[:len(c)]
		n := len(c) &^ 7
		if hasAVX2 && n > 0 {
			whereF32(&d[0], &c[0], &t[0], &f[0], n)
			c = c[n:]
			t, f, d = t[n:], f[n:], d[n:]
		}
		for i, ci := range c {
			m := uint32((ci | -ci) >> 63) // all ones iff ci != 0
			d[i] = math.Float32frombits(math.Float32bits(t[i])&m | math.Float32bits(f[i])&^m)
		}
	case dst.f64 != nil:
		t, f := a[1].f64[:len(c)], a[2].f64[:len(c)]
		for i := range c {
			m := -uint64(b2i(c[i] != 0))
			dst.f64[i] = math.Float64frombits(math.Float64bits(t[i])&m | math.Float64bits(f[i])&^m)
		}
	default:
		t, f := a[1].i64[:len(c)], a[2].i64[:len(c)]
		for i := range c {
			m := -b2i(c[i] != 0)
			dst.i64[i] = t[i]&m | f[i]&^m
		}
	}
}

// b2i is 1 for true, 0 for false; the compiler turns it into a SETcc.
func b2i(b bool) int64 {
	var i int64
	if b {
		i = 1
	}
	return i
}

func copyTile(dst, src tile) {
	switch {
	case dst.f32 != nil:
		copy(dst.f32, src.f32)
	case dst.f64 != nil:
		copy(dst.f64, src.f64)
	default:
		copy(dst.i64, src.i64)
	}
}

// castOp converts between compute kinds with Rust `as` rules (see
// graph.Tensor.Cast). Narrowing to f16/bf16/f8e4m3 and wrapping to u8/u32
// happen in the instruction's rounder or in the store; conversions that
// would round twice (f64 → f16/bf16/f8e4m3, and i64 → bf16/f8e4m3 through
// float32) round to odd first, which makes the final rounding exact (the
// target has at most 22 mantissa bits and float32's exponent range covers
// its subnormals and, for f8e4m3, the saturation threshold 464: a value
// rounded to odd is above 464 exactly when the exact one is).
func castOp(from, to dtype.DType) opFunc {
	half := to.IsReduced()
	switch fk, tk := from.Kind(), to.Kind(); {
	case fk == tk && fk == dtype.KI64:
		return func(dst tile, a []tile, _ int) {
			x := a[0].i64[:len(dst.i64)]
			switch to {
			case dtype.U8:
				for i, v := range x {
					dst.i64[i] = int64(uint8(v))
				}
			case dtype.U32:
				for i, v := range x {
					dst.i64[i] = int64(uint32(v))
				}
			default:
				copy(dst.i64, x)
			}
		}
	case fk == tk:
		return func(dst tile, a []tile, _ int) { copyTile(dst, a[0]) }
	case fk == dtype.KF32 && tk == dtype.KF64:
		return func(dst tile, a []tile, _ int) {
			for i, v := range a[0].f32[:len(dst.f64)] {
				dst.f64[i] = float64(v)
			}
		}
	case fk == dtype.KF64 && tk == dtype.KF32:
		return func(dst tile, a []tile, _ int) {
			for i, v := range a[0].f64[:len(dst.f32)] {
				if half {
					dst.f32[i] = dtype.F32RoundOdd(v)
				} else {
					dst.f32[i] = float32(v)
				}
			}
		}
	case tk == dtype.KI64: // float → int: truncate, saturate, NaN → 0
		lo, hi := intRange(to)
		return func(dst tile, a []tile, _ int) {
			if fk == dtype.KF32 {
				for i, v := range a[0].f32[:len(dst.i64)] {
					dst.i64[i] = tensor.SatInt(float64(v), lo, hi)
				}
				return
			}
			for i, v := range a[0].f64[:len(dst.i64)] {
				dst.i64[i] = tensor.SatInt(v, lo, hi)
			}
		}
	case tk == dtype.KF64: // int → f64
		return func(dst tile, a []tile, _ int) {
			for i, v := range a[0].i64[:len(dst.f64)] {
				dst.f64[i] = float64(v)
			}
		}
	default: // int → f32 kind
		return func(dst tile, a []tile, _ int) {
			for i, v := range a[0].i64[:len(dst.f32)] {
				if half {
					dst.f32[i] = i64RoundOdd(v)
				} else {
					dst.f32[i] = float32(v)
				}
			}
		}
	}
}

// i64RoundOdd converts v to float32 rounding to odd (truncate, then set the
// last mantissa bit if anything was dropped), straight from the integer: a
// detour through float64 would already round above 2^53.
func i64RoundOdd(v int64) float32 {
	u := uint64(v)
	if v < 0 {
		u = -u // two's complement magnitude; MinInt64 gives 2^63
	}
	var f float32
	if n := bits.Len64(u); n <= 24 {
		f = float32(u) // exact
	} else {
		shift := n - 24
		m := u >> shift
		if u&(1<<shift-1) != 0 {
			m |= 1
		}
		f = float32(math.Ldexp(float64(m), shift)) // m < 2^24: exact
	}
	if v < 0 {
		return -f
	}
	return f
}

func intRange(d dtype.DType) (lo, hi int64) {
	switch d {
	case dtype.U8:
		return 0, math.MaxUint8
	case dtype.U32:
		return 0, math.MaxUint32
	}
	return math.MinInt64, math.MaxInt64
}

// affineOp is x·mul + add in the node's dtype. For integer dtypes mul and
// add are converted to the dtype first (Rust `as`, like Candle's
// T::from_f64), so affine(0.5, 0) on u8 multiplies by 0.
func affineOp(dt dtype.DType, mul, add float64) opFunc {
	m, c := convScalar(mul, dt), convScalar(add, dt)
	if dt.Kind() == dtype.KF32 {
		// f16/bf16 compute in float32 with the exact f32 parameters.
		m.f32, c.f32 = float32(mul), float32(add)
	}
	return func(dst tile, a []tile, _ int) {
		switch {
		case dst.f32 != nil:
			x := a[0].f32[:len(dst.f32)]
			i := len(x) &^ 7
			if hasAVX2 && i > 0 {
				affineF32(&dst.f32[0], &x[0], i, m.f32, c.f32)
			} else {
				i = 0
			}
			for ; i < len(x); i++ {
				dst.f32[i] = x[i]*m.f32 + c.f32
			}
		case dst.f64 != nil:
			for i, v := range a[0].f64[:len(dst.f64)] {
				dst.f64[i] = v*mul + add
			}
		default:
			for i, v := range a[0].i64[:len(dst.i64)] {
				dst.i64[i] = v*m.i64 + c.i64
			}
		}
	}
}

// binaryOp returns the tile function of add, sub, mul, div, maximum, minimum.
func binaryOp(op ir.Op) opFunc {
	type fns struct {
		f32 func(a, b float32) float32
		f64 func(a, b float64) float64
		i64 func(a, b int64) int64
	}
	var f fns
	switch op {
	case ir.OpAdd:
		return func(dst tile, a []tile, _ int) {
			switch {
			case dst.f32 != nil:
				x, y := a[0].f32[:len(dst.f32)], a[1].f32[:len(dst.f32)]
				for i := vecBin(dst.f32, x, y, 0); i < len(dst.f32); i++ {
					dst.f32[i] = x[i] + y[i]
				}
			case dst.f64 != nil:
				x, y := a[0].f64[:len(dst.f64)], a[1].f64[:len(dst.f64)]
				for i := range dst.f64 {
					dst.f64[i] = x[i] + y[i]
				}
			default:
				x, y := a[0].i64[:len(dst.i64)], a[1].i64[:len(dst.i64)]
				for i := range dst.i64 {
					dst.i64[i] = x[i] + y[i]
				}
			}
		}
	case ir.OpMul:
		return func(dst tile, a []tile, _ int) {
			switch {
			case dst.f32 != nil:
				x, y := a[0].f32[:len(dst.f32)], a[1].f32[:len(dst.f32)]
				for i := vecBin(dst.f32, x, y, 2); i < len(dst.f32); i++ {
					dst.f32[i] = x[i] * y[i]
				}
			case dst.f64 != nil:
				x, y := a[0].f64[:len(dst.f64)], a[1].f64[:len(dst.f64)]
				for i := range dst.f64 {
					dst.f64[i] = x[i] * y[i]
				}
			default:
				x, y := a[0].i64[:len(dst.i64)], a[1].i64[:len(dst.i64)]
				for i := range dst.i64 {
					dst.i64[i] = x[i] * y[i]
				}
			}
		}
	case ir.OpSub:
		return func(dst tile, a []tile, _ int) {
			switch {
			case dst.f32 != nil:
				x, y := a[0].f32[:len(dst.f32)], a[1].f32[:len(dst.f32)]
				for i := vecBin(dst.f32, x, y, 1); i < len(dst.f32); i++ {
					dst.f32[i] = x[i] - y[i]
				}
			case dst.f64 != nil:
				x, y := a[0].f64[:len(dst.f64)], a[1].f64[:len(dst.f64)]
				for i := range dst.f64 {
					dst.f64[i] = x[i] - y[i]
				}
			default:
				x, y := a[0].i64[:len(dst.i64)], a[1].i64[:len(dst.i64)]
				for i := range dst.i64 {
					dst.i64[i] = x[i] - y[i]
				}
			}
		}
	case ir.OpDiv:
		// Integer division by zero yields 0 (see the op table).
		return func(dst tile, a []tile, _ int) {
			switch {
			case dst.f32 != nil:
				x, y := a[0].f32[:len(dst.f32)], a[1].f32[:len(dst.f32)]
				for i := vecBin(dst.f32, x, y, 3); i < len(dst.f32); i++ {
					dst.f32[i] = x[i] / y[i]
				}
			case dst.f64 != nil:
				x, y := a[0].f64[:len(dst.f64)], a[1].f64[:len(dst.f64)]
				for i := range dst.f64 {
					dst.f64[i] = x[i] / y[i]
				}
			default:
				x, y := a[0].i64[:len(dst.i64)], a[1].i64[:len(dst.i64)]
				for i := range dst.i64 {
					if y[i] != 0 {
						dst.i64[i] = x[i] / y[i]
					} else {
						dst.i64[i] = 0
					}
				}
			}
		}
	case ir.OpMaximum:
		f = fns{max32, max64, func(a, b int64) int64 { return max(a, b) }}
	case ir.OpMinimum:
		f = fns{min32, min64, func(a, b int64) int64 { return min(a, b) }}
	default:
		return nil
	}
	return func(dst tile, a []tile, _ int) {
		switch {
		case dst.f32 != nil:
			x, y := a[0].f32[:len(dst.f32)], a[1].f32[:len(dst.f32)]
			for i := range dst.f32 {
				dst.f32[i] = f.f32(x[i], y[i])
			}
		case dst.f64 != nil:
			x, y := a[0].f64[:len(dst.f64)], a[1].f64[:len(dst.f64)]
			for i := range dst.f64 {
				dst.f64[i] = f.f64(x[i], y[i])
			}
		default:
			x, y := a[0].i64[:len(dst.i64)], a[1].i64[:len(dst.i64)]
			for i := range dst.i64 {
				dst.i64[i] = f.i64(x[i], y[i])
			}
		}
	}
}

// compareOp returns the tile function of eq … ge: 1 or 0 as u8 (i64 kind).
// Comparisons with NaN are false except ne (IEEE).
func compareOp(op ir.Op) opFunc {
	switch op {
	case ir.OpEq:
		return cmpOp(func(a, b float32) bool { return a == b }, func(a, b float64) bool { return a == b }, func(a, b int64) bool { return a == b })
	case ir.OpNe:
		return cmpOp(func(a, b float32) bool { return a != b }, func(a, b float64) bool { return a != b }, func(a, b int64) bool { return a != b })
	case ir.OpLt:
		return withF32(cmpLt32, cmpOp(func(a, b float32) bool { return a < b }, func(a, b float64) bool { return a < b }, func(a, b int64) bool { return a < b }))
	case ir.OpLe:
		return cmpOp(func(a, b float32) bool { return a <= b }, func(a, b float64) bool { return a <= b }, func(a, b int64) bool { return a <= b })
	case ir.OpGt:
		return withF32(cmpGt32, cmpOp(func(a, b float32) bool { return a > b }, func(a, b float64) bool { return a > b }, func(a, b int64) bool { return a > b }))
	case ir.OpGe:
		return cmpOp(func(a, b float32) bool { return a >= b }, func(a, b float64) bool { return a >= b }, func(a, b int64) bool { return a >= b })
	}
	return nil
}

// cmpOp builds a comparison from its three kind-specific predicates. The
// predicates are inlined into cmpLoop's instantiations.
func cmpOp(f32 func(a, b float32) bool, f64 func(a, b float64) bool, i64 func(a, b int64) bool) opFunc {
	return func(dst tile, a []tile, _ int) {
		switch {
		case a[0].f32 != nil:
			cmpLoop(dst.i64, a[0].f32, a[1].f32, f32)
		case a[0].f64 != nil:
			cmpLoop(dst.i64, a[0].f64, a[1].f64, f64)
		default:
			cmpLoop(dst.i64, a[0].i64, a[1].i64, i64)
		}
	}
}

// cmpGt32 and cmpLt32 are the float32 comparisons written out: masks like
// y > 0 are the most common comparison in fused graphs, and the generic
// loop calls its predicate per element.
func cmpGt32(dst tile, a []tile, _ int) {
	out := dst.i64
	x, y := a[0].f32[:len(out)], a[1].f32[:len(out)]
	for i := vecCmp(out, x, y, 4); i < len(out); i++ {
		out[i] = b2i(x[i] > y[i])
	}
}

func cmpLt32(dst tile, a []tile, _ int) {
	out := dst.i64
	x, y := a[0].f32[:len(out)], a[1].f32[:len(out)]
	for i := vecCmp(out, x, y, 2); i < len(out); i++ {
		out[i] = b2i(x[i] < y[i])
	}
}

// withF32 uses fast for float32 operands and general otherwise.
func withF32(fast, general opFunc) opFunc {
	return func(dst tile, a []tile, s int) {
		if a[0].f32 != nil {
			fast(dst, a, s)
			return
		}
		general(dst, a, s)
	}
}

func cmpLoop[T any](out []int64, x, y []T, p func(a, b T) bool) {
	x, y = x[:len(out)], y[:len(out)]
	for i := range out {
		out[i] = b2i(p(x[i], y[i]))
	}
}

// unaryOp returns the tile function of a one-argument math op.
func unaryOp(op ir.Op, params []float64) opFunc {
	var f32 func(float32) float32
	var f64 func(float64) float64
	var i64 func(int64) int64
	via64 := func(f func(float64) float64) func(float32) float32 {
		return func(x float32) float32 { return float32(f(float64(x))) }
	}
	switch op {
	case ir.OpExp:
		f64 = math.Exp
		f32 = func(x float32) float32 { return float32(expFast(float64(x))) }
	case ir.OpLog:
		f64 = math.Log
	case ir.OpSin:
		f64 = math.Sin
	case ir.OpCos:
		f64 = math.Cos
	case ir.OpTanh:
		f64 = math.Tanh
	case ir.OpRecip:
		f64 = func(x float64) float64 { return 1 / x }
		f32 = func(x float32) float32 { return 1 / x }
	case ir.OpSqrt:
		f64 = math.Sqrt
	case ir.OpCeil:
		f64 = math.Ceil
	case ir.OpFloor:
		f64 = math.Floor
	case ir.OpRound:
		f64 = math.Round // half away from zero, like roundf
	case ir.OpErf:
		f64 = math.Erf
	case ir.OpGelu:
		f64, f32 = gelu64, gelu32
	case ir.OpGeluErf:
		f64 = geluErf64
	case ir.OpSilu:
		f64 = silu64
		f32 = func(x float32) float32 { return float32(float64(x) / (1 + expFast(-float64(x)))) }
	case ir.OpSigmoid:
		f64 = sigmoid64
		f32 = func(x float32) float32 { return float32(1 / (1 + expFast(-float64(x)))) }
	case ir.OpNormcdf:
		f64 = normcdf64
	case ir.OpElu:
		alpha := params[0]
		f64 = func(x float64) float64 { return elu64(x, alpha) }
	case ir.OpPowf:
		e := params[0]
		f64 = func(x float64) float64 { return math.Pow(x, e) }
	case ir.OpNeg:
		f64 = func(x float64) float64 { return -x }
		f32 = func(x float32) float32 { return -x }
		i64 = func(x int64) int64 { return -x }
	case ir.OpSqr:
		f64 = func(x float64) float64 { return x * x }
		f32 = func(x float32) float32 { return x * x }
		i64 = func(x int64) int64 { return x * x }
	case ir.OpAbs:
		f64 = math.Abs
		f32 = func(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }
		i64 = func(x int64) int64 {
			if x < 0 {
				return -x
			}
			return x
		}
	case ir.OpSign:
		f64 = sign64
		i64 = func(x int64) int64 {
			switch {
			case x > 0:
				return 1
			case x < 0:
				return -1
			}
			return 0
		}
	case ir.OpRelu:
		f64 = relu64
		i64 = func(x int64) int64 { return max(x, 0) }
	default:
		return nil
	}
	if f32 == nil {
		f32 = via64(f64)
	}
	if loop, ok := unary32Loops[op]; ok {
		return func(dst tile, a []tile, _ int) {
			switch {
			case dst.f32 != nil:
				loop(dst.f32, a[0].f32[:len(dst.f32)])
			case dst.f64 != nil:
				for i, v := range a[0].f64[:len(dst.f64)] {
					dst.f64[i] = f64(v)
				}
			default:
				for i, v := range a[0].i64[:len(dst.i64)] {
					dst.i64[i] = i64(v)
				}
			}
		}
	}
	return func(dst tile, a []tile, _ int) {
		switch {
		case dst.f32 != nil:
			for i, v := range a[0].f32[:len(dst.f32)] {
				dst.f32[i] = f32(v)
			}
		case dst.f64 != nil:
			for i, v := range a[0].f64[:len(dst.f64)] {
				dst.f64[i] = f64(v)
			}
		default:
			for i, v := range a[0].i64[:len(dst.i64)] {
				dst.i64[i] = i64(v)
			}
		}
	}
}

// unary32Loops are the float32 loops of the ops that dominate fused
// elementwise work, written out so the math is called directly rather than
// through a function value per element.
var unary32Loops = func() map[ir.Op]func(dst, x []float32) {
	m := scalar32Loops
	if hasVMath {
		m[ir.OpExp] = func(dst, x []float32) { vmath(dst, x, vExp) }
		m[ir.OpSigmoid] = func(dst, x []float32) { vmath(dst, x, vSigmoid) }
		m[ir.OpSilu] = func(dst, x []float32) { vmath(dst, x, vSilu) }
		m[ir.OpGelu] = func(dst, x []float32) { vmath(dst, x, vGelu) }
	}
	return m
}()

// scalar32Loops are the portable float32 loops; the vector kernels replace
// the exp family where the CPU has AVX2 and FMA.
var scalar32Loops = map[ir.Op]func(dst, x []float32){
	ir.OpExp: func(dst, x []float32) {
		for i, v := range x {
			dst[i] = float32(expFast(float64(v)))
		}
	},
	ir.OpSilu: func(dst, x []float32) {
		for i, v := range x {
			d := float64(v)
			dst[i] = float32(d / (1 + expFast(-d)))
		}
	},
	ir.OpSigmoid: func(dst, x []float32) {
		for i, v := range x {
			dst[i] = float32(1 / (1 + expFast(-float64(v))))
		}
	},
	ir.OpGelu: func(dst, x []float32) {
		for i, v := range x {
			dst[i] = gelu32(v)
		}
	},
	ir.OpNeg: func(dst, x []float32) {
		i := len(x) &^ 7
		if hasAVX2 && i > 0 {
			negF32(&dst[0], &x[0], i)
		} else {
			i = 0
		}
		for ; i < len(x); i++ {
			dst[i] = -x[i]
		}
	},
	ir.OpSqr: func(dst, x []float32) {
		for i := vecBin(dst, x, x, 2); i < len(x); i++ {
			dst[i] = x[i] * x[i]
		}
	},
	ir.OpAbs: func(dst, x []float32) {
		for i, v := range x {
			dst[i] = math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
		}
	},
	// relu without a branch (a branch on the sign of conv or matmul
	// outputs mispredicts half the time: 9 ns an element, now under 1):
	// the bits are cleared when the sign is set and the magnitude is in
	// (0, +inf], so −0 and NaN pass through as relu64 has them.
	ir.OpRelu: func(dst, x []float32) {
		for i, v := range x {
			b := math.Float32bits(v)
			lt := uint32((uint64((b&^(1<<31))-1) - 0x7f800000) >> 63) // 0 < |v| ≤ inf
			dst[i] = math.Float32frombits(b &^ -(lt & (b >> 31)))
		}
	},
}

// vecBin runs the AVX2 loop of a float32 binary op (0 add, 1 sub, 2 mul,
// 3 div) over the longest multiple of 8 and returns where the scalar loop
// must continue. Both compute the same IEEE operation.
func vecBin(dst, x, y []float32, op int) int {
	n := len(dst) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	binF32(&dst[0], &x[0], &y[0], n, op)
	return n
}

// vecCmp is vecBin for comparisons (2 lt, 4 gt; see cmpF32).
func vecCmp(out []int64, x, y []float32, pred int) int {
	n := len(out) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	cmpF32(&out[0], &x[0], &y[0], n, pred)
	return n
}

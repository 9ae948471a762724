package codegen

import (
	"fmt"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/tensor"
)

// checkInstr verifies that an instruction is an op codegen renders, with
// argument dtypes the op table allows and the output dtype its rule gives.
func checkInstr(n *ir.Node, argDT []dtype.DType) error {
	info := n.Op.Info()
	switch {
	case n.Op == ir.OpInvalid || n.Op >= ir.NumOps:
		return fmt.Errorf("invalid op %d", n.Op)
	case n.Op == ir.OpInput || info.Class == ir.ClassView:
		return fmt.Errorf("op %s (node %%%d) cannot be computed inside a kernel", n.Op, n.ID)
	case info.Class != ir.ClassSource && info.Class != ir.ClassElementwise:
		return fmt.Errorf("op %s (node %%%d, %v) is a %v op: codegen renders elementwise kernels only", n.Op, n.ID, n.DType, info.Class)
	case len(argDT) != info.Arity:
		return fmt.Errorf("op %s (node %%%d) has %d args, want %d", n.Op, n.ID, len(argDT), info.Arity)
	case !n.DType.Valid():
		return fmt.Errorf("op %s (node %%%d) has invalid dtype %v", n.Op, n.ID, n.DType)
	case len(n.Params) < len(info.Params):
		return fmt.Errorf("op %s (node %%%d) has %d params, want %v", n.Op, n.ID, len(n.Params), info.Params)
	}
	if info.Arity == 0 {
		if !info.In.Has(n.DType) {
			return fmt.Errorf("op %s does not support dtype %v", n.Op, n.DType)
		}
		return nil
	}
	if info.Cond && !ir.IDDTypes.Has(argDT[0]) {
		return fmt.Errorf("op %s (node %%%d): condition dtype %v is not one of %v", n.Op, n.ID, argDT[0], ir.IDDTypes)
	}
	v := info.ValueArgs()
	in := argDT[v]
	for _, d := range argDT[v:] {
		if d != in {
			return fmt.Errorf("op %s (node %%%d): mixed argument dtypes %v", n.Op, n.ID, argDT[v:])
		}
	}
	if !info.In.Has(in) {
		return fmt.Errorf("op %s does not support dtype %v (supports %v)", n.Op, in, info.In)
	}
	if info.Out != ir.OutDeclared && n.DType != info.OutDType(in) {
		return fmt.Errorf("op %s (node %%%d) of %v args has dtype %v, want %v", n.Op, n.ID, in, n.DType, info.OutDType(in))
	}
	return nil
}

// instrExpr is the C expression of one instruction, in the compute type of
// the node's dtype, before rounding to the dtype. args are the arguments'
// C expressions (in their compute types); i names the element index, for
// arange. A random source's one arg is its standard variate (random.go).
func instrExpr(n *ir.Node, args []string, argDT []dtype.DType) (string, error) {
	dt := n.DType
	switch n.Op {
	case ir.OpFull:
		return scalarLit(n.Params[0], dt), nil
	case ir.OpArange:
		// start + i·step in f64 (no fma), then converted like a cast.
		v := fmt.Sprintf("loom_add(%s, loom_mul((double)i, %s))", doubleLit(n.Params[0]), doubleLit(n.Params[1]))
		return castExpr(dtype.F64, dt, v), nil
	case ir.OpRandUniform, ir.OpRandNormal:
		if len(args) != 1 {
			return "", fmt.Errorf("op %s (node %%%d) needs its standard variate", n.Op, n.ID)
		}
		return randExpr(n, args[0]), nil
	case ir.OpCopy:
		return args[0], nil
	case ir.OpCast:
		return castExpr(argDT[0], dt, args[0]), nil
	case ir.OpAffine:
		return affineExpr(dt, n.Params[0], n.Params[1], args[0]), nil
	case ir.OpWhere:
		return fmt.Sprintf("loom_where(%s, %s, %s)", args[0], args[1], args[2]), nil
	case ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv:
		return fmt.Sprintf("loom_%s(%s, %s)", n.Op, args[0], args[1]), nil
	case ir.OpMaximum:
		return fmt.Sprintf("loom_max(%s, %s)", args[0], args[1]), nil
	case ir.OpMinimum:
		return fmt.Sprintf("loom_min(%s, %s)", args[0], args[1]), nil
	case ir.OpEq, ir.OpNe, ir.OpLt, ir.OpLe, ir.OpGt, ir.OpGe:
		return fmt.Sprintf("loom_%s(%s, %s)", n.Op, args[0], args[1]), nil
	case ir.OpElu:
		return fmt.Sprintf("loom_elu(%s, %s)", args[0], doubleLit(n.Params[0])), nil
	case ir.OpPowf:
		e := n.Params[0]
		lit := doubleLit(e)
		if dt.Kind() == dtype.KF32 && float64(float32(e)) == e {
			lit = floatLit(float32(e)) // an exponent that is a float: powf
		}
		return fmt.Sprintf("loom_powf(%s, %s)", args[0], lit), nil
	case ir.OpExp, ir.OpLog, ir.OpSin, ir.OpCos, ir.OpTanh, ir.OpRecip, ir.OpSqrt,
		ir.OpCeil, ir.OpFloor, ir.OpRound, ir.OpErf, ir.OpGelu, ir.OpGeluErf,
		ir.OpSilu, ir.OpSigmoid, ir.OpNormcdf,
		ir.OpNeg, ir.OpSqr, ir.OpAbs, ir.OpSign, ir.OpRelu:
		return fmt.Sprintf("loom_%s(%s)", n.Op, args[0]), nil
	}
	return "", fmt.Errorf("op %s (dtype %v) has no GPU rendering", n.Op, dt)
}

// castExpr converts x (compute type of from) to the compute type of to
// with the CPU twin's rules (exec/cpu castOp): Rust `as` casts; narrowing
// to f16/bf16/f8e4m3 from f64 or an integer goes through an f32 rounded to
// odd, so that the instruction's final rounding is a single correct one.
func castExpr(from, to dtype.DType, x string) string {
	half := to.IsReduced()
	fk, tk := from.Kind(), to.Kind()
	switch {
	case fk == dtype.KI64 && tk == dtype.KI64:
		switch {
		case to == dtype.U8 && from == dtype.I64:
			return "(unsigned int)(" + x + " & 0xffLL)"
		case to == dtype.U8 && from == dtype.U32:
			return "(" + x + " & 0xffu)"
		case to == dtype.U32 && from == dtype.I64:
			return "(unsigned int)" + x
		case to == dtype.I64 && from != dtype.I64:
			return "(long long)" + x
		}
		return x // widening u8 → u32, or the same compute type
	case fk == tk:
		return x // f32 ↔ f16 ↔ bf16 ↔ f8e4m3: the instruction's rounding narrows
	case fk == dtype.KF32 && tk == dtype.KF64:
		return "(double)" + x
	case fk == dtype.KF64 && tk == dtype.KF32:
		if half {
			return "loom_f32_round_odd(" + x + ")"
		}
		return "(float)" + x
	case tk == dtype.KI64: // float → int
		if fk == dtype.KF32 {
			x = "(double)" + x
		}
		return fmt.Sprintf("loom_sat_%v(%s)", to, x)
	case tk == dtype.KF64: // int → f64
		return "(double)" + x
	}
	// int → f32, f16, bf16, f8e4m3
	switch {
	case half && from == dtype.I64:
		return "loom_i64_round_odd(" + x + ")"
	case half: // u8, u32: exact in f64
		return "loom_f32_round_odd((double)" + x + ")"
	}
	return "(float)" + x
}

// affineExpr is x·mul + add in dt, with two roundings (no fma). For f16
// and bf16 the parameters are f32 (the twin computes in f32 with
// float32(mul)); for integers they are converted to dt first with Rust `as`.
func affineExpr(dt dtype.DType, mul, add float64, x string) string {
	var m, a string
	switch dt.Kind() {
	case dtype.KF32:
		m, a = floatLit(float32(mul)), floatLit(float32(add))
	case dtype.KF64:
		m, a = doubleLit(mul), doubleLit(add)
	default:
		m, a = scalarLit(mul, dt), scalarLit(add, dt)
	}
	return fmt.Sprintf("loom_add(loom_mul(%s, %s), %s)", x, m, a)
}

// scalarLit is v converted to dt as a cast from f64 would (the CPU twin's
// convScalar), written as a constant of dt's compute type.
func scalarLit(v float64, dt dtype.DType) string {
	t, err := tensor.Zeros(dt, 1)
	if err != nil {
		panic(err) // dt was validated
	}
	t.SetFloat64(0, v)
	c := computeType(dt)
	switch d := t.Data().(type) {
	case []uint8:
		return intLit(c, int64(d[0]))
	case []uint32:
		return intLit(c, int64(d[0]))
	case []int64:
		return intLit(c, d[0])
	case []float64:
		return doubleLit(d[0])
	}
	return floatLit(float32(t.Float64(0))) // f32, f16, bf16, f8e4m3: exact in float
}

package conformance

import (
	"math"
	"math/rand/v2"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
)

// The reference semantics of every elementwise op, from ir/ops.go, the
// graph doc comments and shared/candle-kernels.md §2–§7, with Loom's
// documented deviations from Candle: f16/bf16 compute in f32 and round once;
// maximum, minimum and relu propagate NaN; sign(NaN) = NaN; integer division
// by zero is 0; integer arithmetic wraps.

// unarySpec is the reference of a one-argument op.
type unarySpec struct {
	call func(x *graph.Tensor, p []float64) *graph.Tensor
	// f is the exact result for float dtypes (rounded to the dtype later).
	f func(x float64, p []float64) float64
	// i is the result for integer dtypes, before wrapping to the dtype.
	i func(x int64, p []float64, dt dtype.DType) int64
	// params lists the parameter sets to test for a dtype (nil: none).
	params func(dt dtype.DType) [][]float64
	// scale is the per-element magnitude for relative tolerances (affine).
	scale    func(x float64, p []float64) float64
	gen      gen
	tol      tolerance
	signFree bool
}

func m0(f func(*graph.Tensor) *graph.Tensor) func(*graph.Tensor, []float64) *graph.Tensor {
	return func(x *graph.Tensor, _ []float64) *graph.Tensor { return f(x) }
}

func f0(f func(float64) float64) func(float64, []float64) float64 {
	return func(x float64, _ []float64) float64 { return f(x) }
}

func fixed(sets ...[]float64) func(dtype.DType) [][]float64 {
	return func(dtype.DType) [][]float64 { return sets }
}

// Candle's GELU constants (candle-kernels.md §4.1): c = √(2/π) =
// M_2_SQRTPI·M_SQRT1_2, and 0.044715.
const (
	geluC = 0.7978845608028654
	geluA = 0.044715
)

// gelu is 0.5·x·(1 + tanh(u)), u = c·(x + 0.044715·x³), evaluated as
// x/(1 + e^(−2u)): the same function (1 + tanh(u) = 2/(1 + e^(−2u))) without
// the cancellation of 1 + tanh(u) for negative x.
func gelu(x float64) float64 {
	u := geluC * (x + geluA*x*x*x)
	return x / (1 + math.Exp(-2*u))
}

// normcdf is Φ(x) = ½·erfc(−x/√2) (CUDA's normcdf).
func normcdf(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

func sign(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x // ±0, NaN
}

// fmaxNaN and fminNaN propagate NaN (IEEE 754-2019 maximum/minimum).
func fmaxNaN(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return math.Max(a, b)
}

func fminNaN(a, b float64) float64 {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return math.Min(a, b)
}

var (
	sym10   = gen{f: uniform(-10, 10), specials: infSpec}
	sym10z  = gen{f: uniform(-10, 10), specials: zeroSpec} // ops whose −Inf limit is 0·∞ in the formula
	wideGen = gen{f: uniform(-300, 300), specials: infSpec}
)

var unarySpecs = map[ir.Op]unarySpec{
	ir.OpExp:  {call: m0((*graph.Tensor).Exp), f: f0(math.Exp), gen: gen{f: uniform(-20, 20), specials: infSpec}, tol: transcendental},
	ir.OpLog:  {call: m0((*graph.Tensor).Log), f: f0(math.Log), gen: gen{f: positive, specials: infSpec}, tol: transcendental},
	ir.OpSin:  {call: m0((*graph.Tensor).Sin), f: f0(math.Sin), gen: sym10, tol: transcendental},
	ir.OpCos:  {call: m0((*graph.Tensor).Cos), f: f0(math.Cos), gen: sym10, tol: transcendental},
	ir.OpTanh: {call: m0((*graph.Tensor).Tanh), f: f0(math.Tanh), gen: sym10, tol: transcendental},
	ir.OpRecip: {call: m0((*graph.Tensor).Recip), f: f0(func(x float64) float64 { return 1 / x }),
		gen: gen{f: uniform(-4, 4), specials: infSpec}, tol: arith},
	ir.OpSqrt:  {call: m0((*graph.Tensor).Sqrt), f: f0(math.Sqrt), gen: gen{f: positive, specials: infSpec}, tol: arith},
	ir.OpCeil:  {call: m0((*graph.Tensor).Ceil), f: f0(math.Ceil), gen: gen{f: quarters, specials: infSpec}, tol: exact},
	ir.OpFloor: {call: m0((*graph.Tensor).Floor), f: f0(math.Floor), gen: gen{f: quarters, specials: infSpec}, tol: exact},
	// round: half away from zero (roundf), so math.Round, not RoundToEven.
	ir.OpRound:   {call: m0((*graph.Tensor).Round), f: f0(math.Round), gen: gen{f: quarters, specials: infSpec}, tol: exact},
	ir.OpErf:     {call: m0((*graph.Tensor).Erf), f: f0(math.Erf), gen: gen{f: uniform(-5, 5), specials: infSpec}, tol: transcendental},
	ir.OpGelu:    {call: m0((*graph.Tensor).Gelu), f: f0(gelu), gen: sym10z, tol: transcendental},
	ir.OpGeluErf: {call: m0((*graph.Tensor).GeluErf), f: f0(func(x float64) float64 { return x * normcdf(x) }), gen: sym10z, tol: transcendental},
	ir.OpSilu: {call: m0((*graph.Tensor).Silu), f: f0(func(x float64) float64 { return x / (1 + math.Exp(-x)) }),
		gen: gen{f: uniform(-20, 20), specials: zeroSpec}, tol: transcendental},
	ir.OpSigmoid: {call: m0((*graph.Tensor).Sigmoid), f: f0(func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }),
		gen: gen{f: uniform(-20, 20), specials: infSpec}, tol: transcendental},
	ir.OpNormcdf: {call: m0((*graph.Tensor).Normcdf), f: f0(normcdf), gen: sym10, tol: transcendental},
	// elu(x) = x for x > 0, else α(eˣ − 1), written with expm1 (exact near 0).
	ir.OpElu: {
		call: func(x *graph.Tensor, p []float64) *graph.Tensor { return x.Elu(p[0]) },
		f: func(x float64, p []float64) float64 {
			if x > 0 {
				return x
			}
			return p[0] * math.Expm1(x)
		},
		params: fixed([]float64{1}, []float64{0.5}, []float64{2.5}),
		gen:    gen{f: uniform(-6, 4), specials: infSpec}, tol: transcendental},
	ir.OpPowf: {
		call:   func(x *graph.Tensor, p []float64) *graph.Tensor { return x.Powf(p[0]) },
		f:      func(x float64, p []float64) float64 { return math.Pow(x, p[0]) },
		params: fixed([]float64{2}, []float64{0.5}, []float64{-1.5}, []float64{3}),
		gen:    gen{f: positive, specials: infSpec}, tol: transcendental},

	ir.OpNeg: {call: m0((*graph.Tensor).Neg), f: f0(func(x float64) float64 { return -x }),
		i: func(x int64, _ []float64, _ dtype.DType) int64 { return -x }, gen: wideGen, tol: exact},
	ir.OpSqr: {call: m0((*graph.Tensor).Sqr), f: f0(func(x float64) float64 { return x * x }),
		i: func(x int64, _ []float64, _ dtype.DType) int64 { return x * x }, gen: wideGen, tol: exact},
	ir.OpAbs: {call: m0((*graph.Tensor).Abs), f: f0(math.Abs),
		i: func(x int64, _ []float64, _ dtype.DType) int64 {
			if x < 0 {
				return -x // wraps for MinInt64
			}
			return x
		}, gen: wideGen, tol: exact},
	ir.OpSign: {call: m0((*graph.Tensor).Sign), f: f0(sign),
		i: func(x int64, _ []float64, _ dtype.DType) int64 { return int64(sign(float64(x))) }, gen: wideGen, tol: exact, signFree: true},
	ir.OpRelu: {call: m0((*graph.Tensor).Relu), f: f0(func(x float64) float64 { return fmaxNaN(x, 0) }),
		i: func(x int64, _ []float64, _ dtype.DType) int64 { return max(x, 0) }, gen: wideGen, tol: exact, signFree: true},

	// affine: x·mul + add. Floats: the exact value (one rounding, FMA).
	// Integers: mul and add are first converted to the dtype with Rust `as`
	// (truncation, saturation), then the arithmetic wraps.
	ir.OpAffine: {
		call: func(x *graph.Tensor, p []float64) *graph.Tensor { return x.Affine(p[0], p[1]) },
		f:    func(x float64, p []float64) float64 { return math.FMA(x, p[0], p[1]) },
		i: func(x int64, p []float64, dt dtype.DType) int64 {
			return x*satInt(dt, p[0]) + satInt(dt, p[1])
		},
		scale: func(x float64, p []float64) float64 { return math.Abs(x*p[0]) + math.Abs(p[1]) },
		params: func(dt dtype.DType) [][]float64 {
			// Parameters exact in bf16, so that f16/bf16 computed in f32 round
			// once; f32/f64 also get an inexact pair with cancellation.
			sets := [][]float64{{1.5, -0.25}, {-2, 0.75}, {0.5, 3}}
			switch dt {
			case dtype.F32, dtype.F64:
				sets = append(sets, []float64{0.1, -0.3})
			case dtype.U8, dtype.U32, dtype.I64:
				sets = [][]float64{{2, 3}, {-1, 5}, {0.5, 1}, {300, -2.7}, {3, 1e30}, {2.9, -1.5}}
			}
			return sets
		},
		gen: gen{f: uniform(-100, 100), specials: infSpec}, tol: arith},
}

// paramSets returns the parameter sets of a spec for dt ({nil} if none).
func (sp unarySpec) paramSets(dt dtype.DType) [][]float64 {
	if sp.params == nil {
		return [][]float64{nil}
	}
	return sp.params(dt)
}

// want computes the expected output for input x.
func (sp unarySpec) want(x vals, p []float64) want {
	out := newVals(x.dt, x.shape)
	var scale []float64
	if sp.scale != nil && x.dt.IsFloat() {
		scale = make([]float64, x.n())
	}
	for k := range x.n() {
		if x.dt.IsFloat() {
			out.f[k] = sp.f(x.f[k], p)
			if scale != nil {
				scale[k] = sp.scale(x.f[k], p)
			}
		} else {
			out.i[k] = wrapInt(x.dt, sp.i(x.i[k], p, x.dt))
		}
	}
	return want{v: out, tol: sp.tol, signFree: sp.signFree, scale: scale, args: []vals{x}}
}

// binarySpec is the reference of a two-argument arithmetic op.
type binarySpec struct {
	op       ir.Op
	call     func(a, b *graph.Tensor) *graph.Tensor
	f        func(a, b float64) float64
	i        func(a, b int64) int64 // before wrapping to the dtype
	lhs, rhs gen
	signFree bool
}

var divisorGen = gen{f: uniform(-4, 4), i: divisorInt, specials: infSpec}

var binarySpecs = []binarySpec{
	{op: ir.OpAdd, call: (*graph.Tensor).Add, f: func(a, b float64) float64 { return a + b },
		i: func(a, b int64) int64 { return a + b }, lhs: wideGen, rhs: wideGen},
	{op: ir.OpSub, call: (*graph.Tensor).Sub, f: func(a, b float64) float64 { return a - b },
		i: func(a, b int64) int64 { return a - b }, lhs: wideGen, rhs: wideGen},
	{op: ir.OpMul, call: (*graph.Tensor).Mul, f: func(a, b float64) float64 { return a * b },
		i: func(a, b int64) int64 { return a * b }, lhs: wideGen, rhs: wideGen},
	// Integer division truncates toward zero; by zero it is 0 (Loom's
	// deviation); MinInt64 / −1 wraps to MinInt64.
	{op: ir.OpDiv, call: (*graph.Tensor).Div, f: func(a, b float64) float64 { return a / b },
		i: func(a, b int64) int64 {
			if b == 0 {
				return 0
			}
			return a / b
		}, lhs: wideGen, rhs: divisorGen},
	{op: ir.OpMaximum, call: (*graph.Tensor).Maximum, f: fmaxNaN, i: func(a, b int64) int64 { return max(a, b) },
		lhs: discreteMix, rhs: discreteMix, signFree: true},
	{op: ir.OpMinimum, call: (*graph.Tensor).Minimum, f: fminNaN, i: func(a, b int64) int64 { return min(a, b) },
		lhs: discreteMix, rhs: discreteMix, signFree: true},
}

// compareSpec is the reference of a comparison (u8 result, false on NaN
// except ne).
type compareSpec struct {
	op   ir.Op
	call func(a, b *graph.Tensor) *graph.Tensor
	f    func(a, b float64) bool
	i    func(a, b int64) bool
}

var compareSpecs = []compareSpec{
	{ir.OpEq, (*graph.Tensor).Eq, func(a, b float64) bool { return a == b }, func(a, b int64) bool { return a == b }},
	{ir.OpNe, (*graph.Tensor).Ne, func(a, b float64) bool { return a != b }, func(a, b int64) bool { return a != b }},
	{ir.OpLt, (*graph.Tensor).Lt, func(a, b float64) bool { return a < b }, func(a, b int64) bool { return a < b }},
	{ir.OpLe, (*graph.Tensor).Le, func(a, b float64) bool { return a <= b }, func(a, b int64) bool { return a <= b }},
	{ir.OpGt, (*graph.Tensor).Gt, func(a, b float64) bool { return a > b }, func(a, b int64) bool { return a > b }},
	{ir.OpGe, (*graph.Tensor).Ge, func(a, b float64) bool { return a >= b }, func(a, b int64) bool { return a >= b }},
}

// discreteMix draws from the discrete set half the time (equal pairs, NaN,
// ±0, ±Inf) and from a wide range otherwise.
var discreteMix = gen{
	f: func(r *rand.Rand) float64 {
		if r.IntN(2) == 0 {
			return discrete.f(r)
		}
		return uniform(-3, 3)(r)
	},
	i: func(r *rand.Rand, dt dtype.DType) int64 {
		if r.IntN(2) == 0 {
			return discrete.i(r, dt)
		}
		return wideInt(r, dt)
	},
}

// condGen draws where conditions: zero half the time, else non-zero values
// including ones whose low byte is zero (256, 2^32) and negative ones.
var condGen = gen{i: func(r *rand.Rand, dt dtype.DType) int64 {
	if r.IntN(2) == 0 {
		return 0
	}
	var set []int64
	switch dt {
	case dtype.U8:
		set = []int64{1, 2, 128, 255}
	case dtype.U32:
		set = []int64{1, 256, 1 << 16, 1 << 31, math.MaxUint32}
	default:
		set = []int64{1, -1, 256, 1 << 32, math.MinInt64, math.MaxInt64}
	}
	return set[r.IntN(len(set))]
}}

// convert is a cast of one element (Rust `as` rules; float → float rounds
// to nearest even).
func convert(from, to dtype.DType, f float64, i int64) (float64, int64) {
	switch {
	case from.IsFloat() && to.IsFloat():
		return roundFloat(to, f), 0
	case from.IsFloat():
		return 0, satInt(to, f)
	case to.IsFloat():
		return intToFloat(to, i), 0
	}
	return 0, wrapInt(to, i)
}

// castVals converts every element of v to dt.
func castVals(v vals, dt dtype.DType) vals {
	out := newVals(dt, v.shape)
	for k := range v.n() {
		var f float64
		var i int64
		if v.dt.IsFloat() {
			f = v.f[k]
		} else {
			i = v.i[k]
		}
		f, i = convert(v.dt, dt, f, i)
		if dt.IsFloat() {
			out.f[k] = f
		} else {
			out.i[k] = i
		}
	}
	return out
}

package conformance

import (
	"fmt"
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
)

// Formulas checks ops at known points, with expected values written down
// rather than computed by the reference: the transcendental ones were
// evaluated with mpmath at 40 significant digits (mp.dps = 40) from the
// formulas in shared/candle-kernels.md §4.1 and ir/ops.go, e.g.
//
//	c = sqrt(2/pi); gelu = lambda x: x/2*(1 + tanh(c*(x + mpf('0.044715')*x**3)))
//	Phi = lambda x: erfc(-x/sqrt(2))/2  # normcdf; gelu_erf(x) = x*Phi(x)
//
// and the integer and cast points by hand from Rust `as` and wrapping rules.
func Formulas(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	s := newSuite(t, newExec, opts)
	t.Run("functions", s.functionPoints)
	t.Run("integers", s.integerPoints)
	t.Run("casts", s.castPoints)
	t.Run("affine_chain_step_by_step", s.affineChain)
}

type u = func(*graph.Tensor) *graph.Tensor

// functionPoints: f(x) for float ops, at every float dtype (x is exact in
// all of them unless dts says otherwise). zero marks results whose sign of
// zero is checked: round(−0.1) = −0 and ceil(−0.5) = −0 (roundf, ceilf).
var functionPoints = []struct {
	name string
	f    u
	x    float64
	want float64
	dts  []dtype.DType // nil: every float dtype
}{
	{"gelu(1)", (*graph.Tensor).Gelu, 1, 0.8411919906082767047819957770451838608258, nil},
	{"gelu(-2)", (*graph.Tensor).Gelu, -2, -0.04540230591222498121895861384928096035793, nil},
	{"gelu(3)", (*graph.Tensor).Gelu, 3, 2.99636260791822698116218353386810860817, nil},
	{"gelu_erf(1)", (*graph.Tensor).GeluErf, 1, 0.8413447460685429485852325456320379224779, nil},
	{"gelu_erf(-1.5)", (*graph.Tensor).GeluErf, -1.5, -0.1002108019032870990067410614698291192843, nil},
	{"normcdf(0)", (*graph.Tensor).Normcdf, 0, 0.5, nil},
	// 1.96 is not exact in f16/bf16; the input rounding moves Φ by less than
	// an f32 ulp, so f64 and f32 only.
	{"normcdf(1.96)", (*graph.Tensor).Normcdf, 1.96, 0.9750021048517795658634157309591628099775, []dtype.DType{dtype.F64, dtype.F32}},
	{"elu(-1, 0.5)", func(x *graph.Tensor) *graph.Tensor { return x.Elu(0.5) }, -1, -0.3160602794142788392022381149192695662771, nil},
	{"elu(2, 0.5)", func(x *graph.Tensor) *graph.Tensor { return x.Elu(0.5) }, 2, 2, nil},
	{"elu(0, 0.5)", func(x *graph.Tensor) *graph.Tensor { return x.Elu(0.5) }, 0, 0, nil},
	{"silu(1)", (*graph.Tensor).Silu, 1, 0.7310585786300048792511592418218362743651, nil},
	{"sigmoid(2)", (*graph.Tensor).Sigmoid, 2, 0.8807970779778824440597291413023967952064, nil},
	{"exp(1)", (*graph.Tensor).Exp, 1, 2.71828182845904523536028747135, nil},
	{"powf(2, 0.5)", func(x *graph.Tensor) *graph.Tensor { return x.Powf(0.5) }, 2, 1.41421356237309504880168872421, nil},
	{"powf(2, -1.5)", func(x *graph.Tensor) *graph.Tensor { return x.Powf(-1.5) }, 2, 0.353553390593273762200422181052, nil},
	{"powf(-8, 1/3)", func(x *graph.Tensor) *graph.Tensor { return x.Powf(1.0 / 3) }, -8, math.NaN(), nil},
	{"round(0.5)", (*graph.Tensor).Round, 0.5, 1, nil},
	{"round(-0.5)", (*graph.Tensor).Round, -0.5, -1, nil},
	{"round(1.5)", (*graph.Tensor).Round, 1.5, 2, nil},
	{"round(2.5)", (*graph.Tensor).Round, 2.5, 3, nil},
	{"round(-2.5)", (*graph.Tensor).Round, -2.5, -3, nil},
	{"round(-0.1)", (*graph.Tensor).Round, -0.1, negZero, nil}, // −0.1 rounded to the dtype: still in (−0.5, 0)
	// floor(x + 0.5) would give 1 here.
	{"round(0.49999999999999994)", (*graph.Tensor).Round, 0.49999999999999994, 0, []dtype.DType{dtype.F64}},
	{"ceil(-0.5)", (*graph.Tensor).Ceil, -0.5, negZero, nil},
	{"floor(-0.5)", (*graph.Tensor).Floor, -0.5, -1, nil},
	{"sign(0)", (*graph.Tensor).Sign, 0, 0, nil},
	{"sign(-3)", (*graph.Tensor).Sign, -3, -1, nil},
	{"sign(NaN)", (*graph.Tensor).Sign, math.NaN(), math.NaN(), nil},
	{"relu(NaN)", (*graph.Tensor).Relu, math.NaN(), math.NaN(), nil},
	{"relu(-2)", (*graph.Tensor).Relu, -2, 0, nil},
	{"sqrt(-1)", (*graph.Tensor).Sqrt, -1, math.NaN(), nil},
	{"log(0)", (*graph.Tensor).Log, 0, math.Inf(-1), nil},
	{"recip(-0)", (*graph.Tensor).Recip, negZero, math.Inf(-1), nil},
	{"maximum(NaN, 1)", func(x *graph.Tensor) *graph.Tensor { return x.Maximum(graph.Scalar(1)) }, math.NaN(), math.NaN(), nil},
	{"minimum(1, NaN)", func(x *graph.Tensor) *graph.Tensor { return graph.Scalar(1).Minimum(x) }, math.NaN(), math.NaN(), nil},
}

func (s *suite) functionPoints(t *testing.T) {
	for _, dt := range dtype.Floats {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			for i, p := range functionPoints {
				if p.dts != nil && !containsDT(p.dts, dt) {
					continue
				}
				xv := newVals(dt, nil)
				xv.f[0] = roundFloat(dt, p.x)
				y := p.f(c.inputVals(fmt.Sprintf("x%d", i), xv))
				// f64: 1e-14 relative (a few ulps of a libm-quality function);
				// narrower floats: within one ulp of the rounded value.
				tol := tolerance{name: "point", ulps: 1, rel32: 1.2e-7, rel64: 1e-14}
				if p.want == 0 || math.IsInf(p.want, 0) || math.IsNaN(p.want) || p.want == math.Round(p.want) {
					tol = exact // integral results, signed zeros, NaN, Inf
				}
				c.expect(p.name, y, want{v: vals{dt: dt, shape: []int{}, f: []float64{p.want}}, tol: tol, args: []vals{xv}})
			}
			c.run()
		})
	}
}

func containsDT(ds []dtype.DType, d dtype.DType) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

// integerPoints: wrapping arithmetic, truncating division, division by
// zero, and affine's conversion of its parameters.
var integerPoints = []struct {
	name string
	dt   dtype.DType
	a, b int64
	f    func(a, b *graph.Tensor) *graph.Tensor
	want int64
}{
	{"u8 200+100", dtype.U8, 200, 100, (*graph.Tensor).Add, 44},
	{"u8 3-5", dtype.U8, 3, 5, (*graph.Tensor).Sub, 254},
	{"u8 255*2", dtype.U8, 255, 2, (*graph.Tensor).Mul, 254},
	{"u8 7/2", dtype.U8, 7, 2, (*graph.Tensor).Div, 3},
	{"u8 7/0", dtype.U8, 7, 0, (*graph.Tensor).Div, 0},
	{"u32 0-1", dtype.U32, 0, 1, (*graph.Tensor).Sub, math.MaxUint32},
	{"u32 max*2", dtype.U32, math.MaxUint32, 2, (*graph.Tensor).Mul, math.MaxUint32 - 1},
	{"i64 7/-2", dtype.I64, 7, -2, (*graph.Tensor).Div, -3},
	{"i64 -7/2", dtype.I64, -7, 2, (*graph.Tensor).Div, -3},
	{"i64 5/0", dtype.I64, 5, 0, (*graph.Tensor).Div, 0},
	{"i64 min/-1", dtype.I64, math.MinInt64, -1, (*graph.Tensor).Div, math.MinInt64},
	{"i64 max+1", dtype.I64, math.MaxInt64, 1, (*graph.Tensor).Add, math.MinInt64},
	{"i64 max(-1, 0)", dtype.I64, -1, 0, (*graph.Tensor).Maximum, 0},
	{"u8 affine(0.5, 0)", dtype.U8, 200, 0, func(a, _ *graph.Tensor) *graph.Tensor { return a.Affine(0.5, 0) }, 0},
	{"u8 affine(-1, 3)", dtype.U8, 7, 0, func(a, _ *graph.Tensor) *graph.Tensor { return a.Affine(-1, 3) }, 3},
	{"u8 affine(2, 1)", dtype.U8, 200, 0, func(a, _ *graph.Tensor) *graph.Tensor { return a.Affine(2, 1) }, 145},
	{"i64 affine(2.9, -1.5)", dtype.I64, 10, 0, func(a, _ *graph.Tensor) *graph.Tensor { return a.Affine(2.9, -1.5) }, 19},
	{"u8 + scalar 2.7", dtype.U8, 10, 0, func(a, _ *graph.Tensor) *graph.Tensor { return a.Add(graph.Scalar(2.7)) }, 12},
	{"u8 + scalar -1", dtype.U8, 10, 0, func(a, _ *graph.Tensor) *graph.Tensor { return a.Add(graph.Scalar(-1)) }, 10},
	{"i64 neg(min)", dtype.I64, math.MinInt64, 0, func(a, _ *graph.Tensor) *graph.Tensor { return a.Neg() }, math.MinInt64},
	{"u32 where(256)", dtype.U32, 256, 0, func(a, _ *graph.Tensor) *graph.Tensor {
		return graph.Where(a, a.Graph().Full(dtype.I64, 1), a.Graph().Full(dtype.I64, 2))
	}, 1},
}

func (s *suite) integerPoints(t *testing.T) {
	c := s.newCase(t)
	for i, p := range integerPoints {
		av, bv := newVals(p.dt, nil), newVals(p.dt, nil)
		av.i[0], bv.i[0] = p.a, p.b
		y := p.f(c.inputVals(fmt.Sprintf("a%d", i), av), c.inputVals(fmt.Sprintf("b%d", i), bv))
		if y.Err() != nil {
			t.Fatalf("%s: %v", p.name, y.Err())
		}
		w := newVals(y.DType(), nil)
		w.i[0] = p.want
		c.expect(p.name, y, want{v: w, tol: exact, args: []vals{av, bv}})
	}
	c.run()
}

// castPoints: Rust `as` conversions and round-to-nearest-even, one each.
var castPoints = []struct {
	from, to dtype.DType
	x        float64 // for integer sources, an integer value
	xi       int64   // integer sources above 2^53
	want     float64
}{
	{dtype.F32, dtype.I64, -2.7, 0, -2},
	{dtype.F32, dtype.U8, 300, 0, 255},
	{dtype.F32, dtype.U32, -1, 0, 0},
	{dtype.F32, dtype.U8, math.NaN(), 0, 0},
	{dtype.F64, dtype.I64, 1e20, 0, math.MaxInt64},
	{dtype.F64, dtype.I64, math.Inf(-1), 0, math.MinInt64},
	{dtype.I64, dtype.U8, -1, 0, 255},
	{dtype.I64, dtype.U8, 257, 0, 1},
	{dtype.U32, dtype.I64, math.MaxUint32, 0, math.MaxUint32},
	{dtype.F64, dtype.F16, 65520, 0, math.Inf(1)},                // halfway to 2^16: ties to even overflow
	{dtype.F64, dtype.F16, 65519.99, 0, 65504},                   // below halfway
	{dtype.F64, dtype.F16, 3e-8, 0, 5.960464477539063e-08},       // subnormal: one quantum 2^-24
	{dtype.F32, dtype.BF16, 1 + 0x1p-8, 0, 1},                    // tie, to even
	{dtype.F32, dtype.BF16, 1 + 3*0x1p-8, 0, 1 + 0x1p-6},         // tie, to even (up)
	{dtype.F64, dtype.BF16, 1 + 0x1p-8 + 0x1p-40, 0, 1 + 0x1p-7}, // above the tie: one rounding, not two through f32
	{dtype.F64, dtype.F32, 1 + 0x1p-24 + 0x1p-50, 0, 1 + 0x1p-23},
	// 2^62 + 2^54 + 1 is just above the bf16 midpoint between 2^62 and
	// 2^62 + 2^55; through float64 the +1 is lost and the tie goes to even.
	{dtype.I64, dtype.BF16, 0, 1<<62 | 1<<54 | 1, 0x1p62 + 0x1p55},
	{dtype.I64, dtype.F32, 0, 1<<62 | 1<<38 | 1, 0x1p62 + 0x1p39},
	{dtype.I64, dtype.F16, 0, 65520, math.Inf(1)},
	// f8e4m3 (OCP E4M3FN): round to nearest even; no infinities, so what
	// lies beyond 448 saturates (Candle's float8 crate, SatFinite).
	{dtype.F32, dtype.F8E4M3, 448, 0, 448},
	{dtype.F32, dtype.F8E4M3, 464, 0, 448},               // midpoint to the absent 480: ties to even 448 (0x7e)
	{dtype.F32, dtype.F8E4M3, 464 + 0x1p-15, 0, 448},     // above it: saturates, never NaN
	{dtype.F64, dtype.F8E4M3, -1e300, 0, -448},           // far beyond: saturates
	{dtype.F32, dtype.F8E4M3, math.Inf(1), 0, 448},       // +Inf saturates
	{dtype.F64, dtype.F8E4M3, math.Inf(-1), 0, -448},     // -Inf saturates
	{dtype.F32, dtype.F8E4M3, math.NaN(), 0, math.NaN()}, // NaN stays NaN
	{dtype.F64, dtype.F8E4M3, 0x1p-10, 0, 0},             // half the smallest subnormal 2^-9: tie to even 0
	{dtype.F64, dtype.F8E4M3, 0x1p-10 + 0x1p-40, 0, 0x1p-9},
	{dtype.F64, dtype.F8E4M3, 3 * 0x1p-10, 0, 2 * 0x1p-9},         // 1.5 quanta: tie to even 2
	{dtype.F32, dtype.F8E4M3, 1 + 0x1p-4, 0, 1},                   // tie, to even
	{dtype.F32, dtype.F8E4M3, 1 + 3*0x1p-4, 0, 1 + 0x1p-2},        // tie, to even (up)
	{dtype.F64, dtype.F8E4M3, 1 + 0x1p-4 + 0x1p-40, 0, 1.125},     // above the tie: one rounding, not two through f32
	{dtype.F16, dtype.F8E4M3, 65504, 0, 448},                      // f16's largest saturates
	{dtype.BF16, dtype.F8E4M3, -0x1p-11, 0, math.Copysign(0, -1)}, // rounds to -0
	{dtype.I64, dtype.F8E4M3, 17, 0, 16},                          // tie, to even
	{dtype.U8, dtype.F8E4M3, 255, 0, 256},
	{dtype.U32, dtype.F8E4M3, math.MaxUint32, 0, 448},
	{dtype.I64, dtype.F8E4M3, 0, -(1<<62 | 1<<54 | 1), -448},
	{dtype.F8E4M3, dtype.U8, -448, 0, 0},
	{dtype.F8E4M3, dtype.U8, 448, 0, 255},
	{dtype.F8E4M3, dtype.I64, -2.75, 0, -2},
	{dtype.F8E4M3, dtype.U32, 0x1p-9, 0, 0},
	{dtype.F8E4M3, dtype.F16, 0x1p-9, 0, 0x1p-9},
	{dtype.F8E4M3, dtype.BF16, -240, 0, -240},
}

func (s *suite) castPoints(t *testing.T) {
	c := s.newCase(t)
	for i, p := range castPoints {
		xv := newVals(p.from, nil)
		if p.from.IsFloat() {
			xv.f[0] = p.x
		} else if p.xi != 0 {
			xv.i[0] = p.xi
		} else {
			xv.i[0] = int64(p.x)
		}
		w := newVals(p.to, nil)
		if p.to.IsFloat() {
			w.f[0] = p.want
		} else if p.want >= 0x1p63 {
			w.i[0] = math.MaxInt64
		} else {
			w.i[0] = int64(p.want)
		}
		name := fmt.Sprintf("%v_to_%v_%d", p.from, p.to, i)
		c.expect(name, c.inputVals(fmt.Sprintf("x%d", i), xv).Cast(p.to), want{v: w, tol: exact, args: []vals{xv}})
	}
	c.run()
}

// affineChain: an affine chain gives the step-by-step values on every
// executor. fuse/fold.go folds a chain only where that is exact for every
// input (scale-only chains of powers of two ≥ 1), so x·1e30·1e-30 in f32
// overflows to +Inf at the first step for x = 1e10, as written.
func (s *suite) affineChain(t *testing.T) {
	c := s.newCase(t)
	xv := newVals(dtype.F32, []int{2})
	xv.f[0], xv.f[1] = 1e10, 3
	x := c.inputVals("x", xv)
	w := newVals(dtype.F32, []int{2})
	for k, v := range xv.f {
		y := float32(v) * float32(1e30)
		w.f[k] = float64(y * float32(1e-30))
	}
	c.expect("y", x.Affine(1e30, 0).Affine(1e-30, 0), want{v: w, tol: arith, args: []vals{xv}})
	c.run()
}

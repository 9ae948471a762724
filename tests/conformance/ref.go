package conformance

import (
	"math"
	"math/big"

	"github.com/loomgraph/loom/dtype"
)

// This file is the numeric ground truth: rounding to each dtype, integer
// conversions with Rust `as` rules, and the bit encodings of f16/bf16/f8e4m3. It
// uses only the standard library, so a bug in dtype or exec/cpu cannot hide
// in the reference.

// format is a binary floating-point format: prec significand bits (with the
// implicit one), emin the exponent of its smallest normal, max its largest
// finite value (IEEE 754 binary16/32/64, bfloat16 and OCP E4M3FN). sat marks
// a format without infinities that saturates instead: f8e4m3 (Candle's
// float8 crate, SatFinite) rounds everything beyond its largest finite
// value, ±Inf included, to ±448.
type format struct {
	prec, emin int
	max        float64
	sat        bool
}

var formats = map[dtype.DType]format{
	dtype.F64:  {53, -1022, math.MaxFloat64, false},
	dtype.F32:  {24, -126, math.MaxFloat32, false},
	dtype.F16:  {11, -14, 65504, false},
	dtype.BF16: {8, -126, 0x1.fep127, false},
	// E4M3FN: 3 stored mantissa bits, bias 7 (smallest normal 2^-6),
	// largest finite 1.75·2^8 = 448 (S.1111.111 is NaN, not 480).
	dtype.F8E4M3: {4, -6, 448, true},
}

// quantumExp returns q such that 2^q is the spacing of dt's values at |x|
// (the subnormal spacing below the smallest normal).
func quantumExp(dt dtype.DType, x float64) int {
	f := formats[dt]
	e := f.emin
	if x != 0 && !math.IsInf(x, 0) {
		_, fe := math.Frexp(x) // |x| = m·2^fe, m ∈ [0.5, 1)
		e = max(fe-1, f.emin)
	}
	return e - (f.prec - 1)
}

// ulp is the spacing of dt's values at |x|.
func ulp(dt dtype.DType, x float64) float64 { return math.Ldexp(1, quantumExp(dt, x)) }

// roundFloat rounds x to the nearest value of the float dtype dt, ties to
// even, overflowing to ±Inf (IEEE 754 roundTiesToEven), or for a saturating
// format to ± its largest value. x is scaled by a power of two so that the
// quantum is 1, rounded to an integer, and scaled back: both scalings are
// exact.
func roundFloat(dt dtype.DType, x float64) float64 {
	if formats[dt].sat && math.IsInf(x, 0) {
		return math.Copysign(formats[dt].max, x)
	}
	if dt == dtype.F64 || x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	q := quantumExp(dt, x)
	r := math.Ldexp(math.RoundToEven(math.Ldexp(x, -q)), q)
	switch {
	case math.Abs(r) > formats[dt].max && formats[dt].sat:
		return math.Copysign(formats[dt].max, x)
	case math.Abs(r) > formats[dt].max:
		return math.Copysign(math.Inf(1), x)
	case r == 0:
		return math.Copysign(0, x)
	}
	return r
}

// intRange is the range of an integer dtype.
func intRange(dt dtype.DType) (lo, hi int64) {
	switch dt {
	case dtype.U8:
		return 0, math.MaxUint8
	case dtype.U32:
		return 0, math.MaxUint32
	}
	return math.MinInt64, math.MaxInt64
}

// wrapInt keeps the low bits of v that dt holds (two's complement wrapping,
// Rust `as` between integers).
func wrapInt(dt dtype.DType, v int64) int64 {
	switch dt {
	case dtype.U8:
		return int64(uint8(v))
	case dtype.U32:
		return int64(uint32(v))
	}
	return v
}

// satInt converts a float to an integer dtype with Rust `as`: truncation
// toward zero, saturation at the bounds, NaN → 0.
func satInt(dt dtype.DType, x float64) int64 {
	lo, hi := intRange(dt)
	t := math.Trunc(x)
	switch {
	case math.IsNaN(x):
		return 0
	case t <= float64(lo):
		return lo
	case t >= float64(hi): // float64(MaxInt64) is 2^63, itself out of range
		return hi
	}
	return int64(t)
}

// intToFloat rounds an integer to the nearest value of a float dtype, ties
// to even, in one step (math/big works on the exact integer; converting to
// float64 first would round twice for |v| > 2^53).
func intToFloat(dt dtype.DType, v int64) float64 {
	f := formats[dt]
	r, _ := new(big.Float).SetPrec(uint(f.prec)).SetMode(big.ToNearestEven).SetInt64(v).Float64()
	if math.Abs(r) > f.max {
		return roundFloat(dt, math.Copysign(math.Inf(1), r))
	}
	return r
}

// scalarTo converts a float64 constant (a Full value, an untyped Scalar, an
// arange element) to dt the way a cast from f64 does.
func scalarTo(dt dtype.DType, x float64) (float64, int64) {
	if dt.IsFloat() {
		return roundFloat(dt, x), 0
	}
	return 0, satInt(dt, x)
}

// decodeF16 widens IEEE binary16 bits exactly.
func decodeF16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, man := int(h>>10&0x1f), float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * man * 0x1p-24
	case 0x1f:
		if man != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * (1 + man/1024) * math.Ldexp(1, exp-15)
}

// encodeF16 returns the binary16 bits of x, which must be a binary16 value.
func encodeF16(x float64) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign = 0x8000
	}
	a := math.Abs(x)
	switch {
	case math.IsNaN(x):
		return 0x7e00
	case math.IsInf(x, 0):
		return sign | 0x7c00
	case a < 0x1p-14:
		return sign | uint16(a*0x1p24)
	}
	_, e := math.Frexp(a)
	man := (a/math.Ldexp(1, e-1) - 1) * 1024
	return sign | uint16(e-1+15)<<10 | uint16(man)
}

// decodeF8 widens OCP E4M3FN bits exactly: bias 7, no infinities, the
// codes S.1111.111 NaN.
func decodeF8(b uint8) float64 {
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	exp, man := int(b>>3&0xf), float64(b&7)
	switch {
	case exp == 0xf && man == 7:
		return math.NaN()
	case exp == 0:
		return sign * man * 0x1p-9
	}
	return sign * (1 + man/8) * math.Ldexp(1, exp-7)
}

// encodeF8 returns the E4M3FN bits of x, which must be an f8e4m3 value (NaN
// is 0x7f).
func encodeF8(x float64) uint8 {
	var sign uint8
	if math.Signbit(x) {
		sign = 0x80
	}
	a := math.Abs(x)
	switch {
	case math.IsNaN(x):
		return 0x7f
	case a < 0x1p-6:
		return sign | uint8(a*0x1p9)
	}
	_, e := math.Frexp(a)
	man := (a/math.Ldexp(1, e-1) - 1) * 8
	return sign | uint8(e-1+7)<<3 | uint8(man)
}

// decodeBF16 widens bfloat16 bits exactly (they are the top half of a float32).
func decodeBF16(b uint16) float64 { return float64(math.Float32frombits(uint32(b) << 16)) }

// encodeBF16 returns the bits of x, which must be a bfloat16 value.
func encodeBF16(x float64) uint16 { return uint16(math.Float32bits(float32(x)) >> 16) }

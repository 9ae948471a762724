package dtype

import "math"

// Float8E4M3 is an OCP FP8 E4M3FN value, stored as its bits: 1 sign bit,
// 4 exponent bits (bias 7), 3 mantissa bits. There are no infinities; the
// two codes S.1111.111 (0x7f, 0xff) are NaN, so the largest finite value is
// S.1111.110 = ±448. Exponent 0 holds the subnormals k·2^-9 (k = 1..7) and
// ±0; the smallest normal is 2^-6.
//
// Conversions into it follow Candle's `float8` crate (F8E4M3::from_f32 and
// from_f64, a port of cuda_fp8.hpp with __NV_SATFINITE), which is also what
// Candle's CUDA kernels do (the __nv_fp8_e4m3 constructor):
//   - finite values round to nearest, ties to even, subnormals included;
//     magnitudes up to 2^-10 (half the smallest subnormal) become ±0 with
//     the sign kept;
//   - magnitudes beyond 448 saturate to ±448: values in (448, 464] round
//     down to 448 by the ordinary rule, and everything above 464 (the
//     midpoint to the absent 480), ±Inf included, is clamped to ±448 — never
//     NaN;
//   - NaN becomes NaN with its sign kept (0x7f or 0xff).
//
// These functions are that conversion exactly. Loom's executors store f8e4m3
// results through it with one change: every NaN is stored as 0x7f, as they
// store f16 and bf16 NaNs canonically, because the sign of a NaN computed
// in float32 depends on the hardware and the code path (fused and unfused
// runs must agree bit for bit); a cast of a negative NaN therefore gives
// 0x7f where the crate gives 0xff. Both codes are NaN.
//
// Widening is exact; both NaN codes widen to the canonical float NaN (the
// crate's to_f32 also drops the sign).
type Float8E4M3 uint8

// F8E4M3Max is the largest finite Float8E4M3 value.
const F8E4M3Max = 448

// ToF8E4M3 rounds f to Float8E4M3 (see the type's doc for overflow and NaN).
// It works on the float32 bits; the HIP prelude's loom_f32_to_f8e4m3 is the
// same code.
func ToF8E4M3(f float32) Float8E4M3 {
	b := math.Float32bits(f)
	sign := uint8(b>>24) & 0x80
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN, sign kept
		return Float8E4M3(sign | 0x7f)
	case a > 0x43e80000: // > 464 (Inf included): saturate
		return Float8E4M3(sign | 0x7e)
	case a >= 0x3c800000: // normal (≥ 2^-6): rebias 127 → 7, round 23 → 3 bits
		v := a - 0x3c000000
		v += 0x7ffff + (v>>20)&1 // a carry may reach the exponent (at most 0x7e)
		return Float8E4M3(sign | uint8(v>>20))
	case a > 0x3a800000: // subnormal (> 2^-10): units of 2^-9
		m := uint64(a&0x7fffff | 0x800000)
		return Float8E4M3(sign | uint8(roundShift(m, uint(141-a>>23))))
	}
	return Float8E4M3(sign) // ±0 (2^-10 itself ties to even, 0)
}

// ToF8E4M3From64 rounds f to Float8E4M3 in one step (no double rounding
// through float32), as float8's F8E4M3::from_f64 does.
func ToF8E4M3From64(f float64) Float8E4M3 {
	b := math.Float64bits(f)
	sign := uint8(b>>56) & 0x80
	a := b & (1<<63 - 1)
	switch {
	case a > 0x7ff0000000000000: // NaN, sign kept
		return Float8E4M3(sign | 0x7f)
	case a > 0x407d000000000000: // > 464 (Inf included): saturate
		return Float8E4M3(sign | 0x7e)
	case a >= 0x3f90000000000000: // normal (≥ 2^-6): rebias 1023 → 7, round 52 → 3 bits
		v := a - 0x3f80000000000000
		return Float8E4M3(sign | uint8(roundShift(v, 49)))
	case a > 0x3f50000000000000: // subnormal (> 2^-10): units of 2^-9
		m := a&(1<<52-1) | 1<<52
		return Float8E4M3(sign | uint8(roundShift(m, uint(1066-a>>52))))
	}
	return Float8E4M3(sign)
}

// f8ToF32 is the value of every code (NaN codes: float32(math.NaN())).
var f8ToF32 = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(Float8E4M3(i).decode())
	}
	return t
}()

// decode is the value of x by the format's definition.
func (x Float8E4M3) decode() float64 {
	e, m := int(x>>3)&0xf, float64(x&7)
	var v float64
	switch {
	case x&0x7f == 0x7f:
		return math.NaN()
	case e == 0:
		v = m * 0x1p-9
	default:
		v = math.Ldexp(1+m/8, e-7)
	}
	if x&0x80 != 0 {
		v = -v
	}
	return v
}

// Float32 widens x exactly: one lookup in a 256-entry table (inlined, the
// CPU executor's load path).
func (x Float8E4M3) Float32() float32 { return f8ToF32[x] }

// Float64 widens x exactly.
func (x Float8E4M3) Float64() float64 { return float64(f8ToF32[x]) }

// IsNaN reports whether x is one of the two NaN codes.
func (x Float8E4M3) IsNaN() bool { return x&0x7f == 0x7f }

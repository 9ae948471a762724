package dtype

import "math"

// Float16 is an IEEE 754 binary16 value, stored as its bits.
type Float16 uint16

// BFloat16 is a bfloat16 value (the top half of a float32), stored as its bits.
type BFloat16 uint16

// ToF16 rounds f to the nearest Float16, ties to even.
func ToF16(f float32) Float16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN: quiet, sign kept
		return Float16(sign | 0x7e00)
	case abs >= 0x47800000: // ≥ 65536 (and Inf) overflows
		return Float16(sign | 0x7c00)
	case abs >= 0x38800000: // normal f16 (≥ 2^-14): rebias, round 23 → 10 bits
		v := abs - 0x38000000
		v += 0xfff + (v>>13)&1 // a carry may reach the exponent, up to Inf
		return Float16(sign | uint16(v>>13))
	case abs > 0x33000000: // subnormal f16 (> 2^-25): units of 2^-24
		m := uint64(abs&0x7fffff | 0x800000)
		return Float16(sign | uint16(roundShift(m, uint(126-abs>>23))))
	}
	return Float16(sign) // rounds to ±0 (2^-25 itself ties to even, 0)
}

// ToF16From64 rounds f to the nearest Float16, ties to even, in one step
// (no double rounding through float32).
func ToF16From64(f float64) Float16 { return Float16(f64ToF16Bits(f)) }

// Float32 widens h exactly.
func (h Float16) Float32() float32 { return float32(h.Float64()) }

// Float64 widens h exactly.
func (h Float16) Float64() float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	man := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * man * 0x1p-24 // subnormal or zero
	case 0x1f:
		if man != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * (1 + man/1024) * math.Ldexp(1, exp-15)
}

// f64ToF16Bits rounds to binary16 with round-to-nearest-even. It works on the
// float64 bits: the 52-bit mantissa is shifted right by the right amount and
// rounded on the shifted-out bits, which also handles subnormal results and
// carries into the exponent (up to infinity).
func f64ToF16Bits(f float64) uint16 {
	b := math.Float64bits(f)
	sign := uint16(b>>48) & 0x8000
	exp := int(b>>52) & 0x7ff
	man := b & (1<<52 - 1)
	if exp == 0x7ff {
		if man != 0 {
			return sign | 0x7e00 // quiet NaN
		}
		return sign | 0x7c00
	}
	e := exp - 1023 + 15 // biased f16 exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	var shift uint
	full := man | 1<<52 // implicit bit
	if exp == 0 {
		return sign // f64 subnormals are far below the f16 range
	}
	if e <= 0 {
		// Subnormal f16: value = full * 2^(exp-1075); f16 unit is 2^-24.
		shift = uint(42 + 1 - e)
		if shift > 63 {
			return sign
		}
		return sign | uint16(roundShift(full, shift))
	}
	shift = 42
	r := roundShift(full, shift) // 11 bits incl. implicit, maybe 2^11 after carry
	if r >= 1<<11 {
		r >>= 1
		e++
		if e >= 0x1f {
			return sign | 0x7c00
		}
	}
	return sign | uint16(e)<<10 | uint16(r&0x3ff)
}

// roundShift returns v >> s rounded to nearest, ties to even.
func roundShift(v uint64, s uint) uint64 {
	q := v >> s
	rem := v & (1<<s - 1)
	half := uint64(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return q
}

// ToBF16 rounds f to the nearest BFloat16, ties to even; NaN stays NaN.
func ToBF16(f float32) BFloat16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return BFloat16(u>>16 | 0x40) // quiet NaN, sign kept
	}
	u += 0x7fff + (u>>16)&1
	return BFloat16(u >> 16)
}

// ToBF16From64 rounds f to the nearest BFloat16 in one step. It rounds to
// float32 with round-to-odd first, which makes the second rounding exact.
func ToBF16From64(f float64) BFloat16 { return ToBF16(F32RoundOdd(f)) }

// Float32 widens b exactly.
func (b BFloat16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// Float64 widens b exactly.
func (b BFloat16) Float64() float64 { return float64(b.Float32()) }

// F32RoundOdd converts f to float32 rounding to odd: if the conversion is
// inexact, the result's last mantissa bit is forced to 1. A later
// round-to-nearest-even to a type with at least two fewer mantissa bits
// (f16, bf16) then equals a direct correctly rounded conversion from f.
func F32RoundOdd(f float64) float32 {
	r := float32(f)
	if float64(r) == f || math.IsNaN(f) || math.IsInf(float64(r), 0) {
		return r
	}
	// Truncate toward zero, then set the sticky bit.
	if math.Abs(float64(r)) > math.Abs(f) {
		r = math.Nextafter32(r, 0)
	}
	return math.Float32frombits(math.Float32bits(r) | 1)
}

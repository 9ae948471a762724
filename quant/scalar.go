package quant

import (
	"encoding/binary"
	"math"

	"github.com/loomgraph/loom/dtype"
)

// The scalar helpers below reproduce the C semantics GGML's reference code
// relies on. Two rules hold throughout the package:
//
//   - Every float32 product that feeds an addition or subtraction is wrapped
//     in an explicit float32(…) conversion. The Go spec lets a compiler fuse
//     x*y + z into one FMA (gc does on arm64, ppc64, s390x, riscv64 and on
//     amd64 with GOAMD64=v3); a conversion forces the rounding and blocks
//     the fusion. GGML's reference code is compiled without FMA contraction
//     on x86-64 (its baseline has no FMA), and that is what the golden files
//     hold.
//   - Float-to-integer conversions whose operand can be out of range (NaN,
//     ±Inf after a reciprocal of a subnormal scale) go through truncI32,
//     which returns what x86-64's cvttss2si returns, instead of Go's
//     implementation-specific conversion.

// f16 rounds f to IEEE binary16 bits, ties to even, as GGML_FP32_TO_FP16
// does (NaN becomes the quiet NaN 0x7e00 with f's sign).
func f16(f float32) uint16 { return uint16(dtype.ToF16(f)) }

// f16to32 widens binary16 bits exactly.
func f16to32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f && man == 0:
		return math.Float32frombits(sign | 0x7f800000)
	case exp == 0x1f: // NaN: payload kept and quieted, as GGML's conversion
		// (a multiplication by 2^-112 of the rebiased bits) leaves it
		return math.Float32frombits(sign | 0x7fc00000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: man·2^-24, exact in float32.
	v := float32(man) * 0x1p-24
	return math.Float32frombits(sign | math.Float32bits(v))
}

// nearestInt is GGML's nearest_int: it rounds through the float adder by
// adding 1.5·2^23 and reading the low mantissa bits, so ties go to even.
// Beyond |f| ≤ 2^22 (and for NaN or ±Inf) it returns the same garbage the C
// code returns, which is what makes the k-quant searches bit-exact even on
// degenerate inputs.
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// truncI32 converts like x86-64's cvttss2si: truncation toward zero, and
// 0x80000000 for NaN and values outside int32. C's (int8_t)/(uint8_t)
// casts of a float compile to this followed by keeping the low byte; for
// |f| ≥ 2^31 the low byte is 0 either way.
func truncI32(f float32) int32 {
	if !(f > -2147483904 && f < 2147483648) {
		return math.MinInt32
	}
	return int32(f)
}

// roundI8 is C's (int8_t)roundf(f) on x86-64: round half away from zero,
// then convert as truncI32 and keep the low byte.
func roundI8(f float32) int8 {
	return int8(truncI32(float32(math.Round(float64(f)))))
}

func absf(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

func le16(b []byte) uint16       { return binary.LittleEndian.Uint16(b) }
func put16(b []byte, v uint16)   { binary.LittleEndian.PutUint16(b, v) }
func le32(b []byte) uint32       { return binary.LittleEndian.Uint32(b) }
func put32(b []byte, v uint32)   { binary.LittleEndian.PutUint32(b, v) }
func lef16(b []byte) float32     { return f16to32(le16(b)) }
func putf16(b []byte, f float32) { put16(b, f16(f)) }

func clampI32(v, lo, hi int32) int32 { return max(lo, min(hi, v)) }

// cMax is C's MAX(a, b) macro, a > b ? a : b (Go's max differs on NaN).
func cMax(a, b float32) float32 {
	if a > b {
		return a
	}
	return b
}

// gtMax is GGML's "if (v > m) m = v" running maximum: it returns m when v
// is NaN, where cMax(m, v) would return v.
func gtMax(m, v float32) float32 {
	if v > m {
		return v
	}
	return m
}

func sqrt32(f float32) float32 { return float32(math.Sqrt(float64(f))) }

package cpu

import (
	"math"

	"github.com/loomgraph/loom/dtype"
)

// Vector math modes of vmath8.
const (
	vExp = iota
	vSigmoid
	vSilu
	vGelu
)

// vmath computes one of the exp-family ops over x into dst with the vector
// kernel, including the tail (padded through a small buffer), so that every
// element of every tile takes the same code path: fused and unfused plans
// then agree bit for bit whatever their tile boundaries.
func vmath(dst, x []float32, mode int) {
	n := len(x) &^ 7
	if n > 0 {
		vmath8(&dst[0], &x[0], n, mode)
	}
	if n < len(x) {
		var in, out [8]float32
		copy(in[:], x[n:])
		vmath8(&out[0], &in[0], 8, mode)
		copy(dst[n:], out[:len(x)-n])
	}
	vmathTails(dst, x, mode)
}

// vmathTails recomputes, in float64, the elements where the vector kernel
// is not within a few ulps (issue 12 B13): gelu below x = −1, whose
// exponent argument t = 2c(x + 0.044715x³) the kernel rounds to float32
// (relative error ~|t|·2⁻²⁴: 194 ulps near x = −9), and silu and sigmoid
// below −80, where e^−x overflows float32 and the kernel returned ∓0 for
// results that are subnormal numbers. The choice depends on the value
// only, so fused and unfused plans still agree bit for bit; the tails are
// rare in real data (gelu: x < −1 is 16% of a unit normal, silu and
// sigmoid below −80 never).
func vmathTails(dst, x []float32, mode int) {
	switch mode {
	case vGelu:
		for i, v := range x {
			if v < -1 {
				dst[i] = gelu32(v)
			}
		}
	case vSilu:
		for i, v := range x {
			if v < -80 {
				dst[i] = float32(silu64(float64(v)))
			}
		}
	case vSigmoid:
		for i, v := range x {
			if v < -80 {
				dst[i] = float32(sigmoid64(float64(v)))
			}
		}
	}
}

// widenF16 converts f16 values to float32 (exactly, either way).
func widenF16(dst []float32, src []dtype.Float16) {
	n := len(dst) &^ 7
	if hasF16C && n > 0 {
		f16to32(&dst[0], (*uint16)(&src[0]), n)
	} else {
		n = 0
	}
	for i := n; i < len(dst); i++ {
		dst[i] = f16ToF32[src[i]]
	}
	// The hardware keeps a NaN's sign and payload; the table (and the GPU's
	// loom_f16_to_f32) give the canonical 0x7fc00000, in every position.
	for i, v := range dst[:n] {
		if v != v {
			dst[i] = canonNaN32
		}
	}
}

// canonNaN32 is the canonical float32 NaN: float32(math.NaN()), 0x7fc00000.
var canonNaN32 = math.Float32frombits(0x7fc00000)

// NaN results of f16 and bf16 ops are canonical quiet NaNs, positive,
// whatever NaN the float32 computation made: the hardware's default NaN
// (sqrt(−1), 0/0) is negative, Go's math.NaN() positive, and which one an
// op gives depends on whether the element fell in a vector body or a
// scalar tail — so without this fused and unfused bits would differ.
const (
	canonNaNF16  dtype.Float16  = 0x7e00
	canonNaNBF16 dtype.BFloat16 = 0x7fc0
)

// toBF16 is dtype.ToBF16 with NaN results made canonical.
func toBF16(x float32) dtype.BFloat16 {
	if x != x {
		return canonNaNBF16
	}
	return dtype.ToBF16(x)
}

// canonNaNF8 is the NaN f8e4m3 results are stored as (see toF8).
const canonNaNF8 dtype.Float8E4M3 = 0x7f

// toF8 is dtype.ToF8E4M3 with NaN results made canonical: Candle's float8
// crate keeps a NaN's sign (0xff for a negative NaN), but the sign of a NaN
// computed in float32 is the hardware's and the code path's choice (see
// canonNaNF16), so every NaN is stored as 0x7f, as on the GPU.
func toF8(x float32) dtype.Float8E4M3 {
	if x != x {
		return canonNaNF8
	}
	return dtype.ToF8E4M3(x)
}

// narrowF8 rounds float32 values to f8e4m3 (toF8), in plain Go: there is no
// x86 instruction for it.
func narrowF8(dst []dtype.Float8E4M3, src []float32) {
	for i, x := range src[:len(dst)] {
		dst[i] = toF8(x)
	}
}

// narrowF16 rounds float32 values to f16, nearest even. The hardware and
// dtype.ToF16 agree on every number; every NaN becomes canonNaNF16 on both
// paths, as on the GPU (the hardware alone would keep the payload's top
// bits and the sign).
func narrowF16(dst []dtype.Float16, src []float32) {
	n := len(src) &^ 7
	if hasF16C && n > 0 {
		f32to16((*uint16)(&dst[0]), &src[0], n)
	} else {
		n = 0
	}
	for i := n; i < len(src); i++ {
		dst[i] = dtype.ToF16(src[i])
	}
	for i, v := range src {
		if v != v {
			dst[i] = canonNaNF16
		}
	}
}

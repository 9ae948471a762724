package cpu

import "math"

// expFast is e^x in float64 arithmetic with a relative error below 1e-8:
// enough that rounding the result to float32 is within one ulp of the
// correctly rounded value. x = k·ln2 + r with |r| ≤ ln2/2, then a degree-7
// Taylor polynomial for e^r (truncation error r^8/8! < 6e-9) and an exact
// scaling by 2^k. It is the float32 path's exp (silu, sigmoid, gelu, elu);
// Go's math.Exp is correct to 1 ulp in float64 but about twice as slow.
func expFast(x float64) float64 {
	switch {
	case x != x:
		return x
	case x > 709.7:
		return math.Inf(1)
	case x < -745.2:
		return 0
	}
	// k = round(x·log2 e) without a branch (random signs would mispredict):
	// adding 1.5·2^52 rounds to an integer in the low mantissa bits.
	const magic = 0x1.8p52
	kf := (x*math.Log2E + magic) - magic
	k := int64(kf)
	r := x - kf*math.Ln2
	// Estrin's scheme: the same polynomial with a shorter dependency chain.
	r2 := r * r
	r4 := r2 * r2
	p := (1 + r) + r2*(1.0/2+r*(1.0/6)) + r4*((1.0/24+r*(1.0/120))+r2*(1.0/720+r*(1.0/5040)))
	// 2^k may be outside the normal range near the ends: scale in two steps.
	if k < -1000 || k > 1000 {
		h := k / 2
		return p * math.Float64frombits(uint64(h+1023)<<52) * math.Float64frombits(uint64(k-h+1023)<<52)
	}
	return p * math.Float64frombits(uint64(k+1023)<<52)
}

// Candle's constants for the tanh form of GELU.
const (
	geluC = 0.7978845608028654 // √(2/π) = M_2_SQRTPI·M_SQRT1_2
	geluA = 0.044715
)

// gelu64 is Candle's tanh approximation 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))),
// written as x·σ(2u) (the same function: 1 + tanh(u) = 2σ(2u)), which has
// no cancellation for large negative x.
func gelu64(x float64) float64 {
	u := geluC * (x + geluA*x*x*x)
	return x / (1 + math.Exp(-2*u))
}

func gelu32(x float32) float32 {
	xd := float64(x)
	u := geluC * (xd + geluA*xd*xd*xd)
	return float32(xd / (1 + expFast(-2*u)))
}

// normcdf64 is Φ(x) = ½·erfc(−x/√2), CUDA's normcdf.
func normcdf64(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// geluErf64 is the exact GELU, x·Φ(x).
func geluErf64(x float64) float64 { return x * normcdf64(x) }

func silu64(x float64) float64    { return x / (1 + math.Exp(-x)) }
func sigmoid64(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// elu64 is x for x > 0, else alpha·(e^x − 1), with expm1 for accuracy near 0
// (Candle computes exp(x) − 1).
func elu64(x, alpha float64) float64 {
	if x > 0 {
		return x
	}
	return alpha * math.Expm1(x)
}

// sign64 is −1, 0 or 1; NaN stays NaN (Candle gives 0 for NaN, a quirk).
func sign64(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x // ±0 or NaN
}

// max64 and min64 propagate NaN for every float dtype (Candle's f32/f64
// kernels use fmaxf/fminf, which ignore NaN; its f16/bf16 kernels propagate:
// we propagate everywhere, like IEEE 754-2019 maximum and numpy).
func max64(a, b float64) float64 {
	if a != a || b != b {
		return math.NaN()
	}
	if a > b {
		return a
	}
	return b
}

func min64(a, b float64) float64 {
	if a != a || b != b {
		return math.NaN()
	}
	if a < b {
		return a
	}
	return b
}

func max32(a, b float32) float32 {
	if a != a || b != b {
		return float32(math.NaN())
	}
	if a > b {
		return a
	}
	return b
}

func min32(a, b float32) float32 {
	if a != a || b != b {
		return float32(math.NaN())
	}
	if a < b {
		return a
	}
	return b
}

// relu64 is max(x, 0) with NaN propagated.
func relu64(x float64) float64 {
	if x < 0 {
		return 0
	}
	return x
}

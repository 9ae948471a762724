package philox

import "math"

// The functions here are written so that every executor computes the same
// bits: only correctly rounded IEEE operations, in the order written. Go
// may fuse a·b + c into one fma (the spec allows it; arm64 and amd64 v3
// do); an explicit conversion, float32(a*b) or float64(a*b), forbids that,
// so every product that feeds a sum is written with one. The GPU versions
// (codegen/random.go) render the same operations as loom_add, loom_mul,
// loom_div and loom_sqrt, which are never contracted.

// halfPi is π/2 as an exact (untyped, arbitrary-precision) constant; the
// coefficients below are computed in constant arithmetic and rounded once.
const halfPi = math.Pi / 2

const (
	hp2  = halfPi * halfPi
	hp3  = hp2 * halfPi
	hp4  = hp3 * halfPi
	hp5  = hp4 * halfPi
	hp6  = hp5 * halfPi
	hp7  = hp6 * halfPi
	hp8  = hp7 * halfPi
	hp9  = hp8 * halfPi
	hp10 = hp9 * halfPi
	hp11 = hp10 * halfPi
	hp12 = hp11 * halfPi
	hp13 = hp12 * halfPi
	hp14 = hp13 * halfPi
	hp15 = hp14 * halfPi
	hp16 = hp15 * halfPi
	hp17 = hp16 * halfPi
)

// Polynomial coefficients, lowest degree first. Sine: sin(πa/2) =
// a·(S[0] + z·(S[1] + z·(…))), z = a²; cosine: cos(πa/2) = 1 + z·(C[0] +
// z·(C[1] + …)); log: ln f = 2s + s·z·(L[0] + z·(L[1] + …)), z = s², the
// series of 2·atanh(s). Taylor coefficients: for |a| ≤ ½ the first term
// left out is below 2⁻²⁸ (float32) and 2⁻⁵⁵ (float64) of the result, and
// for |s| ≤ 3 − 2√2 so is the log series' tail.
var (
	sin32 = []float32{halfPi, -hp3 / 6, hp5 / 120, -hp7 / 5040, hp9 / 362880}
	cos32 = []float32{-hp2 / 2, hp4 / 24, -hp6 / 720, hp8 / 40320, -hp10 / 3628800}
	log32 = []float32{2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11}

	sin64 = []float64{halfPi, -hp3 / 6, hp5 / 120, -hp7 / 5040, hp9 / 362880, -hp11 / 39916800,
		hp13 / 6227020800, -hp15 / 1307674368000, hp17 / 355687428096000}
	cos64 = []float64{-hp2 / 2, hp4 / 24, -hp6 / 720, hp8 / 40320, -hp10 / 3628800, hp12 / 479001600,
		-hp14 / 87178291200, hp16 / 20922789888000}
	log64 = []float64{2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13, 2.0 / 15, 2.0 / 17, 2.0 / 19, 2.0 / 21}
)

// ln 2 split as hi + lo, hi with trailing zero bits so that e·hi is exact
// for every exponent the callers meet (|e| ≤ 25 in float32, ≤ 54 in
// float64): fdlibm's split.
const (
	ln2Hi32 = 0x1.62e3p-1
	ln2Lo32 = float32(math.Ln2 - ln2Hi32)
	ln2Hi64 = 0x1.62e42feep-1
	ln2Lo64 = float64(math.Ln2 - ln2Hi64)
)

// Mantissa fields above which 1.m exceeds √2 (the argument is then halved
// and its exponent raised, so that f lies in [√2/2, √2]).
const (
	sqrt2Mant32 = 0x3504f3
	sqrt2Mant64 = 0x6a09e667f3bcc
)

// Coeffs are the constants of Log, SinCos in one precision, for code
// generators: polynomial coefficients lowest degree first (see above),
// and ln 2 as Ln2Hi + Ln2Lo.
type Coeffs[T float32 | float64] struct {
	Log, Sin, Cos []T
	Ln2Hi, Ln2Lo  T
	// Sqrt2Mant: the mantissa field above which Log halves its argument.
	Sqrt2Mant uint64
}

// Coeffs32 returns the float32 constants (fresh slices).
func Coeffs32() Coeffs[float32] {
	return Coeffs[float32]{Log: clone(log32), Sin: clone(sin32), Cos: clone(cos32), Ln2Hi: ln2Hi32, Ln2Lo: ln2Lo32, Sqrt2Mant: sqrt2Mant32}
}

// Coeffs64 returns the float64 constants (fresh slices).
func Coeffs64() Coeffs[float64] {
	return Coeffs[float64]{Log: clone(log64), Sin: clone(sin64), Cos: clone(cos64), Ln2Hi: ln2Hi64, Ln2Lo: ln2Lo64, Sqrt2Mant: sqrt2Mant64}
}

func clone[T any](s []T) []T { return append([]T(nil), s...) }

// horner32 is c[0] + z·(c[1] + z·(… + z·c[n−1])), each step rounded.
func horner32(c []float32, z float32) float32 {
	p := c[len(c)-1]
	for k := len(c) - 2; k >= 0; k-- {
		p = c[k] + float32(z*p)
	}
	return p
}

func horner64(c []float64, z float64) float64 {
	p := c[len(c)-1]
	for k := len(c) - 2; k >= 0; k-- {
		p = c[k] + float64(z*p)
	}
	return p
}

// Log32 is ln x for a positive normal float32 x (the callers' x lies in
// [2⁻²⁴, 1]); about 2 ulp. See the package doc for the method.
func Log32(x float32) float32 {
	b := math.Float32bits(x)
	e := int32(b>>23) - 127
	m := b & 0x7fffff
	var f float32
	if m > sqrt2Mant32 {
		f = math.Float32frombits(m | 0x3f000000) // in (√2/2, 1)
		e++
	} else {
		f = math.Float32frombits(m | 0x3f800000) // in [1, √2]
	}
	s := (f - 1) / (f + 1) // f − 1 is exact
	z := s * s
	t := float32(z * horner32(log32, z))
	lnf := float32(2*s) + float32(s*t)
	fe := float32(e)
	return float32(fe*ln2Hi32) + (float32(fe*ln2Lo32) + lnf)
}

// Log64 is ln x for a positive normal float64 x (the callers' x lies in
// [2⁻⁵³, 1]); about 2 ulp.
func Log64(x float64) float64 {
	b := math.Float64bits(x)
	e := int64(b>>52) - 1023
	m := b & (1<<52 - 1)
	var f float64
	if m > sqrt2Mant64 {
		f = math.Float64frombits(m | 0x3fe0000000000000)
		e++
	} else {
		f = math.Float64frombits(m | 0x3ff0000000000000)
	}
	s := (f - 1) / (f + 1)
	z := s * s
	t := float64(z * horner64(log64, z))
	lnf := float64(2*s) + float64(s*t)
	fe := float64(e)
	return float64(fe*ln2Hi64) + (float64(fe*ln2Lo64) + lnf)
}

// SinCos32 returns sin θ and cos θ for θ = 2π·k·2⁻²⁴ (the low 24 bits of
// k); about 2 ulp. The reduction to a quadrant is exact integer arithmetic.
func SinCos32(k uint32) (sin, cos float32) {
	k &= 1<<24 - 1
	n := (k + 1<<21) >> 22       // the nearest quadrant, 0…4
	j := int32(k) - int32(n<<22) // in [−2²¹, 2²¹)
	a := float32(j) * 0x1p-22    // in [−½, ½): the angle is n·π/2 + a·π/2
	z := a * a
	s := a * horner32(sin32, z)
	c := 1 + float32(z*horner32(cos32, z))
	return rotate(n, s, c)
}

// SinCos64 returns sin θ and cos θ for θ = 2π·k·2⁻⁵³ (the low 53 bits of
// k); about 2 ulp.
func SinCos64(k uint64) (sin, cos float64) {
	k &= 1<<53 - 1
	n := (k + 1<<50) >> 51
	j := int64(k) - int64(n<<51)
	a := float64(j) * 0x1p-51
	z := a * a
	s := a * horner64(sin64, z)
	c := 1 + float64(z*horner64(cos64, z))
	return rotate(uint32(n), s, c)
}

// rotate returns (sin, cos) of n·π/2 + φ from s = sin φ and c = cos φ.
func rotate[T float32 | float64](n uint32, s, c T) (T, T) {
	switch n & 3 {
	case 1:
		return c, -s
	case 2:
		return -s, -c
	case 3:
		return -c, s
	}
	return s, c
}

// sqrt32 is the correctly rounded float32 square root: the float64 root
// rounded to float32 is (53 ≥ 2·24 + 2 bits make the double rounding
// innocuous).
func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

func sqrt64(x float64) float64 { return math.Sqrt(x) }

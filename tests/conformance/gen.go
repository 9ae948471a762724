package conformance

import (
	"math"
	"math/rand/v2"

	"github.com/loomgraph/loom/dtype"
)

// gen draws input elements. Float values are rounded to the input dtype
// after drawing; integer values are drawn inside the dtype's range.
type gen struct {
	f func(r *rand.Rand) float64
	i func(r *rand.Rand, dt dtype.DType) int64
	// specials are injected into float inputs at about one element in 12:
	// the values whose results the semantics pin down (NaN, ±0, ±Inf).
	specials []float64
}

var (
	nan      = math.NaN()
	inf      = math.Inf(1)
	negZero  = math.Copysign(0, -1)
	zeroSpec = []float64{nan, 0, negZero}
	infSpec  = []float64{nan, 0, negZero, inf, -inf}
)

// draw fills a value of dt and shape. A non-empty input is never all zeros.
func (g gen) draw(r *rand.Rand, dt dtype.DType, shape []int) vals {
	v := newVals(dt, shape)
	for k := range v.n() {
		if dt.IsFloat() {
			x := g.f(r)
			if len(g.specials) > 0 && r.IntN(12) == 0 {
				x = g.specials[r.IntN(len(g.specials))]
			}
			v.f[k] = roundFloat(dt, x)
		} else {
			fi := g.i
			if fi == nil {
				fi = wideInt
			}
			v.i[k] = fi(r, dt)
		}
	}
	if v.n() > 0 && allZero(v) {
		if dt.IsFloat() {
			v.f[0] = 1
		} else {
			v.i[0] = 1
		}
	}
	return v
}

func allZero(v vals) bool {
	for k := range v.n() {
		if (v.dt.IsFloat() && v.f[k] != 0) || (!v.dt.IsFloat() && v.i[k] != 0) {
			return false
		}
	}
	return true
}

// uniform draws floats in [lo, hi).
func uniform(lo, hi float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return lo + (hi-lo)*r.Float64() }
}

// positive draws mostly log-uniform values in [1e-3, 1e3), one in eight
// uniform in [-5, 0): the domain of log, sqrt and powf, with the negative
// side that must give NaN.
func positive(r *rand.Rand) float64 {
	if r.IntN(8) == 0 {
		return -5 * r.Float64()
	}
	return math.Exp(math.Log(1e-3) + r.Float64()*math.Log(1e6))
}

// quarters draws multiples of 1/4 (ties for round, exact integers for ceil
// and floor) and, half the time, any value in [-10, 10).
func quarters(r *rand.Rand) float64 {
	if r.IntN(2) == 0 {
		return float64(r.IntN(81)-40) / 4
	}
	return -10 + 20*r.Float64()
}

// wideInt draws integers that exercise wrapping: the full range of u8; for
// u32 and i64 a mix of small values, large values, random bit patterns and
// the bounds.
func wideInt(r *rand.Rand, dt dtype.DType) int64 {
	switch dt {
	case dtype.U8:
		return r.Int64N(256)
	case dtype.U32:
		switch r.IntN(10) {
		case 0:
			return []int64{0, 1, 1 << 31, math.MaxUint32}[r.IntN(4)]
		case 1, 2, 3, 4:
			return r.Int64N(1000)
		}
		return r.Int64N(1 << 32)
	}
	switch r.IntN(10) {
	case 0:
		return []int64{math.MinInt64, math.MaxInt64, -1, 0, 1}[r.IntN(5)]
	case 1, 2, 3:
		return r.Int64N(2001) - 1000
	case 4, 5, 6:
		return r.Int64N(1<<32) - 1<<31
	}
	return int64(r.Uint64())
}

// divisorInt is wideInt with zeros one time in four (integer division by
// zero yields 0).
func divisorInt(r *rand.Rand, dt dtype.DType) int64 {
	if r.IntN(4) == 0 {
		return 0
	}
	return wideInt(r, dt)
}

// discrete draws from a few values so that comparisons see equal pairs
// often; floats include NaN and infinities.
var discrete = gen{
	f: func(r *rand.Rand) float64 {
		return []float64{-2, -1, -0.5, negZero, 0, 0.5, 1, 2, 1e30, nan, inf, -inf}[r.IntN(12)]
	},
	i: func(r *rand.Rand, dt dtype.DType) int64 {
		var set []int64
		switch dt {
		case dtype.U8:
			set = []int64{0, 1, 2, 127, 128, 254, 255}
		case dtype.U32:
			set = []int64{0, 1, 2, 255, 256, 1 << 31, math.MaxUint32}
		default:
			set = []int64{math.MinInt64, -1 << 32, -1, 0, 1, 2, 1 << 32, math.MaxInt64}
		}
		return set[r.IntN(len(set))]
	},
}

// castSource draws values that exercise every conversion rule: fractions
// (truncation toward zero), the bounds of u8/u32/i64 and beyond
// (saturation), f16/bf16 overflow and subnormals, f8e4m3 saturation (448,
// the midpoint 464 and beyond), subnormals, ties and a value just above a
// tie that a rounding through f32 would turn into one, NaN and infinities;
// for integers the wide patterns above (wrapping, rounding of large i64).
var castSource = gen{
	f: func(r *rand.Rand) float64 {
		switch r.IntN(8) {
		case 0:
			return []float64{-1, -0.5, 0.5, 255, 255.5, 256, 257, 4294967295, 4294967296, 65504, 65519, 65520, 1e-6, 1e-8, -3e-5,
				448, -464, 464.5, 480, 0x1p-10, -0x1p-9, 3 * 0x1p-10, 0x1p-7 * 1.0625, -1.1875, 1.0625 + 0x1p-40}[r.IntN(25)]
		case 1:
			return math.Copysign(math.Exp(r.Float64()*math.Log(1e20)), r.Float64()-0.5) // up to ±1e20
		case 2:
			return -1e30 + 2e30*r.Float64()
		}
		return -300 + 600*r.Float64()
	},
	i: func(r *rand.Rand, dt dtype.DType) int64 {
		if dt == dtype.I64 {
			switch r.IntN(8) {
			case 0:
				// Halfway cases for bf16 and f32 plus a low bit that a
				// rounding through float64 (53 bits) would lose.
				return []int64{1<<62 | 1<<54 | 1, -(1<<62 | 1<<54 | 1), 1<<62 | 1<<38 | 1, 1<<55 | 1<<47 | 1}[r.IntN(4)]
			case 1, 2:
				// Large values with random low bits.
				v := (1<<62 | r.Int64N(1<<62)) >> r.IntN(9)
				if r.IntN(2) == 0 {
					v = -v
				}
				return v
			}
		}
		return wideInt(r, dt)
	},
	specials: infSpec,
}

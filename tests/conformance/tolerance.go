package conformance

import (
	"math"

	"github.com/loomgraph/loom/dtype"
)

// tolerance says how far an output element may be from the reference.
// Integer results (and comparisons, which are u8) are always exact.
type tolerance struct {
	name string
	// ulps bounds f16/bf16/f8e4m3 results: the distance from the reference rounded
	// to the dtype, in units of the dtype's spacing at that value.
	ulps float64
	// rel16 widens the f16/bf16 bound by rel16·scale, for results computed
	// in f32 from many terms (matmul): the f32 error of the sum before the
	// one rounding to half, relative to the terms' magnitude.
	rel16 float64
	// f32 and f64 results: |got − exact| ≤ rel·max(|exact|, scale) + abs,
	// where exact is the unrounded float64 reference and scale an optional
	// per-element magnitude (for affine, |x·mul| + |add|: the size of the
	// terms whose rounding errors add up, which may cancel in the result).
	rel32, abs32 float64
	rel64, abs64 float64
}

var (
	// exact: ops whose result is the exact result rounded once (IEEE +, −,
	// ×, ÷; ceil, floor, round, abs, neg, sign, relu, max, min; casts,
	// copies, where, sources). Computing f16/bf16 in f32 and f32 in f64 is
	// still exact for +, −, ×, ÷ because double rounding is innocuous when
	// the wider format has at least 2p+2 bits (24 ≥ 2·11+2; 53 ≥ 2·24+2).
	// The sign of a zero result must match too, except for ops marked
	// signFree (maximum(−0, +0) and friends are unspecified).
	exact = tolerance{name: "exact"}
	// arith: a couple of roundings in the compute dtype, or a correctly
	// rounded function an executor may compute with a fast path (affine is
	// x·mul then +add, two f32 roundings; sqrt and recip). 2e-6 is about 16
	// f32 ulps; 1e-12 leaves f64 room for a few roundings. f16/bf16: 1 ulp.
	arith = tolerance{name: "arith", ulps: 1, rel32: 2e-6, rel64: 1e-12}
	// transcendental: libm-quality functions. f32: 1e-5 relative (about 80
	// ulps: room for GPU fast paths such as __expf) with a floor of 1e-6
	// for results near zero (sin near π, log near 1, the tails of gelu and
	// silu), where an f32 computation's error is relative to its inputs,
	// not its result. f64: 1e-12 relative, 1e-14 absolute. f16/bf16: Loom
	// computes in f32 and rounds once, so the result is within 1 ulp of the
	// rounded reference (the double rounding exact → f32 → f16 costs at most
	// that).
	transcendental = tolerance{name: "transcendental", ulps: 1, rel32: 1e-5, abs32: 1e-6, rel64: 1e-12, abs64: 1e-14}
)

// ok reports whether got is acceptable for a float result of dtype dt whose
// exact value is x.
func (tl tolerance) ok(dt dtype.DType, got, x, scale float64, signFree bool) bool {
	want := roundFloat(dt, x)
	switch {
	case math.IsNaN(want) || math.IsNaN(got):
		return math.IsNaN(want) && math.IsNaN(got)
	case got == want:
		if got == 0 && tl == exact && !signFree {
			return math.Signbit(got) == math.Signbit(want)
		}
		return true
	case math.IsInf(want, 0) || math.IsInf(got, 0) || tl == exact:
		return false
	}
	switch dt {
	case dtype.F16, dtype.BF16, dtype.F8E4M3:
		return math.Abs(got-want) <= tl.ulps*ulp(dt, want)+tl.rel16*scale
	case dtype.F32:
		return math.Abs(got-x) <= tl.rel32*max(math.Abs(x), scale)+tl.abs32
	}
	return math.Abs(got-x) <= tl.rel64*max(math.Abs(x), scale)+tl.abs64
}

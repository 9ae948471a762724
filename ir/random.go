package ir

import (
	"fmt"
	"math"

	"github.com/loomgraph/loom/dtype"
)

// Random sources: OpRandUniform (rand) and OpRandNormal (randn). They have
// no arguments; element i (row-major) is a pure function of the seed and
// the stream position Offset + i (wrapping), defined by package philox:
// a uniform u in [0, 1) or a standard normal z, drawn in the dtype's
// compute type (float32 for f32, f16 and bf16; float64 for f64), then
//
//	rand:  v = lo + d·u with lo and d = hi − lo as constants of the compute
//	       type (float32(lo), float32(hi − lo) for the float32 path), two
//	       roundings; v is rounded to the dtype, and a result ≥ hi (which
//	       rounding can give: u close to 1, or v within half a dtype
//	       spacing of hi) becomes the largest dtype value below hi (Top), so
//	       every result is below hi. (PyTorch's CUDA uniform turns such a
//	       result into lo instead; that moves mass across the whole range
//	       and shifts the mean by half a spacing, where the top value moves
//	       it by one spacing: bf16 in [−2, 5) has a mean off by 0.0156 with
//	       PyTorch's rule, 0.0001 with this one.) A lo that is not a dtype
//	       value may round below lo;
//	randn: v = z·std + mean with float32(std), float32(mean) for the
//	       float32 path (affine's arithmetic), rounded to the dtype.
//
// Both executors compute exactly this (the CPU through package philox,
// the GPU through the same operations rendered in C), so the bits agree.
// Since an element depends only on its position, a kernel computes it
// where it is used: rand and randn fuse into their consumers like fills.

// RandDTypes are the dtypes rand and randn make: the floats whose compute
// type and rounding the random sources know (a new float dtype joins here
// with its case in Top and roundTo).
var RandDTypes = SetOf(dtype.F32, dtype.F64, dtype.F16, dtype.BF16)

// RandParams are a random source's parameters.
type RandParams struct {
	Seed   uint64
	Offset uint64 // stream position of element 0
	// A and B are lo and hi for rand, mean and std for randn.
	A, B float64
}

func randParamNames(a, b string) []string {
	return []string{"seed_lo", "seed_hi", "offset_lo", "offset_hi", a, b}
}

// Encode returns the params as Node.Params: the 64-bit seed and offset as
// 32-bit halves (exact in float64), then A and B.
func (p RandParams) Encode() []float64 {
	return []float64{float64(uint32(p.Seed)), float64(p.Seed >> 32), float64(uint32(p.Offset)), float64(p.Offset >> 32), p.A, p.B}
}

// Rand decodes a random source's params.
func (n *Node) Rand() RandParams {
	w := func(i int) uint64 { return uint64(n.Params[i]) }
	return RandParams{Seed: w(0) | w(1)<<32, Offset: w(2) | w(3)<<32, A: n.Params[4], B: n.Params[5]}
}

// IsRandom reports whether o is a random source.
func (o Op) IsRandom() bool { return o == OpRandUniform || o == OpRandNormal }

// Check returns an error naming the parameter at fault when p cannot
// parameterize op on dtype dt: rand needs finite lo < hi with hi − lo
// finite, and normal finite mean and std ≥ 0; each must stay finite once
// converted to dt (and, for hi − lo, to dt's compute type), so that no
// element is ±Inf or NaN by construction.
func (p RandParams) Check(op Op, dt dtype.DType) error {
	if !op.IsRandom() {
		return fmt.Errorf("%s is not a random source", op)
	}
	if !RandDTypes.Has(dt) {
		return fmt.Errorf("dtype %v: random values are floats (%v)", dt, RandDTypes)
	}
	names := op.Info().Params[4:]
	for i, v := range []float64{p.A, p.B} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s=%g: not finite", names[i], v)
		}
		if r := roundTo(dt, v); math.IsInf(r, 0) {
			return fmt.Errorf("%s=%g overflows %v", names[i], v, dt)
		}
	}
	if op == OpRandNormal {
		if p.B < 0 {
			return fmt.Errorf("std=%g: negative", p.B)
		}
		return nil
	}
	if !(p.A < p.B) {
		return fmt.Errorf("lo=%g, hi=%g: want lo < hi", p.A, p.B)
	}
	d := p.B - p.A
	if dt.Kind() == dtype.KF32 {
		if math.IsInf(float64(float32(d)), 0) {
			return fmt.Errorf("lo=%g, hi=%g: the width hi − lo overflows float32", p.A, p.B)
		}
	} else if math.IsInf(d, 0) {
		return fmt.Errorf("lo=%g, hi=%g: the width hi − lo overflows %v", p.A, p.B, dt)
	}
	return nil
}

// Top returns the largest value of dt below hi (p.B): what rand gives
// where lo + d·u rounds to hi or above.
func (p RandParams) Top(dt dtype.DType) float64 {
	hi := p.B
	switch dt {
	case dtype.F64:
		return math.Nextafter(hi, math.Inf(-1))
	case dtype.F32:
		f := float32(hi)
		if float64(f) >= hi {
			f = math.Nextafter32(f, float32(math.Inf(-1)))
		}
		return float64(f)
	case dtype.F16:
		h := dtype.ToF16From64(hi)
		if h.Float64() >= hi {
			h = dtype.Float16(halfBelow(uint16(h)))
		}
		return h.Float64()
	case dtype.BF16:
		h := dtype.ToBF16From64(hi)
		if h.Float64() >= hi {
			h = dtype.BFloat16(halfBelow(uint16(h)))
		}
		return h.Float64()
	}
	return math.NaN() // not a dtype of RandDTypes
}

// halfBelow is the next 16-bit float (f16 or bf16: sign-magnitude) below
// the finite value of bits b.
func halfBelow(b uint16) uint16 {
	switch {
	case b == 0 || b == 0x8000: // ±0: the smallest negative subnormal
		return 0x8001
	case b&0x8000 != 0: // negative: larger magnitude
		return b + 1
	}
	return b - 1
}

// roundTo rounds v to float dtype dt (as a cast from f64), for range
// checks.
func roundTo(dt dtype.DType, v float64) float64 {
	switch dt {
	case dtype.F32:
		return float64(float32(v))
	case dtype.F16:
		return dtype.ToF16From64(v).Float64()
	case dtype.BF16:
		return dtype.ToBF16From64(v).Float64()
	}
	return v
}

// verifyRand checks a random source's params: the encoding (32-bit
// halves) and Check.
func verifyRand(n *Node, bad func(*Node, string, ...any)) {
	if len(n.Params) != len(n.Info().Params) {
		return // Verify reports the count
	}
	for i, v := range n.Params[:4] {
		if v != math.Trunc(v) || v < 0 || v >= 1<<32 {
			bad(n, "param %s=%v is not a 32-bit word", n.Info().Params[i], v)
			return
		}
	}
	if err := n.Rand().Check(n.Op, n.DType); err != nil {
		bad(n, "%v", err)
	}
}

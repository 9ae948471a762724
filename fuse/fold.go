package fuse

import (
	"math"

	"github.com/loomgraph/loom/ir"
)

// fold simplifies constant work, in both fusion modes (so that fused and
// unfused plans compute the same arithmetic):
//   - affine(affine(x, m1, 0), m2, 0) → affine(x, m1·m2, 0) for f32 and
//     f64, only when the fold is exact for every x (see foldable). Any
//     other chain is kept as written: a folded chain rounds once where
//     step-by-step rounds twice, and it can differ by far more than an ulp
//     (x·1e20·1e20 in f32 is +Inf step by step, and 0·Inf = NaN folded).
//     Not for f16/bf16 or integers.
//   - affine(x, 1, 0) is kept: it is not the identity for x = −0 (−0·1 + 0
//     is +0).
//   - cast to the same dtype never exists (the builder drops it).
func fold(s *State) error {
	folded := 0
	s.Graph = s.Graph.Rebuild(func(ng *ir.Graph, n *ir.Node, args []*ir.Node) *ir.Node {
		if n.Op != ir.OpAffine {
			return ir.Copy(ng, n, args)
		}
		m, a := n.Params[0], n.Params[1]
		x := args[0]
		if x.Op == ir.OpAffine && foldable(n.DType.String(), x.Params[0], x.Params[1], m, a) {
			m, a = x.Params[0]*m, 0
			x = x.Args[0]
			folded++
		}
		return ng.Intern(ir.OpAffine, n.DType, n.Shape, []*ir.Node{x}, []float64{m, a}, nil, "")
	})
	// Rebuild visits args before their users, so the inner affines of folded
	// chains were interned too; drop them so later passes (and cse's count)
	// see only live nodes.
	s.Graph = s.Graph.Rebuild(irCopy)
	if folded > 0 {
		s.Log.Add("fold", -1, "folded %d affine ops", folded)
	}
	return nil
}

// foldable reports whether affine(affine(x, m1, a1), m2, a2) equals
// affine(x, m1·m2, 0) bit for bit for every x of dtype dt (f32 or f64,
// computed as x·m + a with two roundings, as both executors do). That holds
// when a1 and a2 are +0 and m1, m2 are powers of two (either sign) of
// magnitude ≥ 1 whose product is finite in dt: scaling up by a power of two
// is exact unless it overflows; an overflow step by step (±Inf, then
// ·m2 = ±Inf) is an overflow folded too, since |m2| ≥ 1; NaN, ±Inf and ±0
// come out the same (the +0 turns −0 into +0 either way); and a subnormal
// result needs a subnormal x, so flushing denormals (on a GPU) treats both
// forms alike. Scaling down is not foldable (double rounding in the
// subnormal range, and 3e38·2·0.5 overflows step by step), nor are offsets
// ((x + a1) + a2 rounds twice).
func foldable(dt string, m1, a1, m2, a2 float64) bool {
	var maxExp int // largest finite power of two: 2^maxExp
	switch dt {
	case "f32":
		maxExp = 127
	case "f64":
		maxExp = 1023
	default:
		return false
	}
	if a1 != 0 || a2 != 0 || math.Signbit(a1) || math.Signbit(a2) {
		return false
	}
	e1, ok1 := powerOfTwo(m1)
	e2, ok2 := powerOfTwo(m2)
	return ok1 && ok2 && e1 >= 0 && e2 >= 0 && e1+e2 <= maxExp
}

// powerOfTwo returns k where |m| = 2^k exactly.
func powerOfTwo(m float64) (int, bool) {
	if m == 0 || math.IsInf(m, 0) || math.IsNaN(m) {
		return 0, false
	}
	frac, exp := math.Frexp(math.Abs(m))
	return exp - 1, frac == 0.5
}

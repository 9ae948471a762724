package fuse

import (
	"github.com/loomgraph/loom/ir"
)

// fold simplifies constant work, in both fusion modes (so that fused and
// unfused plans compute the same arithmetic):
//   - affine(affine(x, m1, a1), m2, a2) → affine(x, m1·m2, a1·m2 + a2) for
//     f32 and f64. The new parameters are computed in f64, and the chain
//     then rounds once instead of twice: results may differ from step-by-step
//     evaluation in the last bit, and an intermediate overflow disappears
//     ((3e38·2)·0.5 is 3e38, not +Inf). Not for f16/bf16, whose intermediate
//     rounding is coarse enough to matter, nor for integers, whose
//     parameters truncate.
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
		if x.Op == ir.OpAffine && (n.DType.String() == "f32" || n.DType.String() == "f64") {
			m, a = x.Params[0]*m, x.Params[1]*m+a
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

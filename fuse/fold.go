package fuse

import (
	"github.com/loomgraph/loom/ir"
)

// fold simplifies constant work, in both fusion modes (so that fused and
// unfused plans compute the same arithmetic):
//   - affine(affine(x, m1, a1), m2, a2) → affine(x, m1·m2, a1·m2 + a2) for
//     f32 and f64 (the parameters are f64, so the folded chain is exact up
//     to the one rounding the single affine makes; not for f16/bf16, whose
//     intermediate rounding the chain would lose, nor for integers, whose
//     parameters truncate);
//   - affine(x, 1, 0) → x;
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
		if m == 1 && a == 0 && !isOutput(s.Graph, n) {
			folded++
			return x
		}
		return ng.Intern(ir.OpAffine, n.DType, n.Shape, []*ir.Node{x}, []float64{m, a}, nil, "")
	})
	if folded > 0 {
		s.Log.Add("fold", -1, "folded %d affine ops", folded)
	}
	return nil
}

func isOutput(g *ir.Graph, n *ir.Node) bool {
	for _, o := range g.Outputs {
		if o.Node == n {
			return true
		}
	}
	return false
}

package fuse

import "github.com/loomgraph/loom/ir"

// broadcastFills rewrites a view of a constant as a constant of the view's
// shape: full(v)[] seen through a broadcast is full(v)[dims]. A fill has no
// inputs, so this costs nothing and lets constants fuse into the kernels
// that read them instead of being materialised as one-element buffers. Runs
// only with fusion on: without fusion every op is its own step, and a
// one-element buffer read with stride 0 is the cheaper form.
func broadcastFills(s *State) error {
	n := 0
	s.Graph = s.Graph.Rebuild(func(ng *ir.Graph, v *ir.Node, args []*ir.Node) *ir.Node {
		if v.Op == ir.OpView && args[0].Op == ir.OpFull {
			n++
			return ng.Intern(ir.OpFull, v.DType, v.Shape, nil, args[0].Params, nil, "")
		}
		return ir.Copy(ng, v, args)
	})
	s.Graph = s.Graph.Rebuild(irCopy) // drop the scalar fills now unread
	if n > 0 {
		s.Log.Add("broadcast-fills", -1, "turned %d broadcast constants into fills", n)
	}
	return nil
}

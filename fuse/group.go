package fuse

import "github.com/loomgraph/loom/ir"

// group assigns compute nodes to kernel groups: every compute node
// (elementwise ops and sources that need a buffer) is its own group.
func group(s *State) error {
	s.Groups = make([]int, len(s.Graph.Nodes))
	for _, n := range s.Graph.Nodes {
		s.Groups[n.ID] = -1
		if computes(n) {
			s.Groups[n.ID] = n.ID
		}
	}
	return nil
}

// computes reports whether a node needs a kernel to produce its buffer:
// everything but inputs and views.
func computes(n *ir.Node) bool {
	return n.Op != ir.OpInput && n.Op != ir.OpView
}

func irCopy(ng *ir.Graph, n *ir.Node, args []*ir.Node) *ir.Node { return ir.Copy(ng, n, args) }

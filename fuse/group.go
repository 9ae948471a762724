package fuse

import "github.com/loomgraph/loom/ir"

// Group is a kernel to be: Members are computed in topological order and
// Root (the last member) is stored. A member other than the root is read only
// inside the group; cheap members may be recomputed in several groups.
type Group struct {
	Root    *ir.Node
	Members []*ir.Node
	// Shape and RowAxes are the kernel's domain: a plain elementwise kernel
	// over Shape (RowAxes 0), or a row kernel whose rows are Shape's
	// trailing RowAxes dims; members are whole-shape values or row values.
	Shape   []int
	RowAxes int
	// PairEpilogue: a fused product's epilogue reads its output in pairs
	// (plan.Kernel.PairEpilogue).
	PairEpilogue bool
	// PairKeep: the pair epilogue keeps every element (plan.Kernel.PairKeep).
	PairKeep bool
}

// newGroup starts a group rooted at n with n's natural domain.
func newGroup(n *ir.Node) *Group {
	g := &Group{Root: n, Members: []*ir.Node{n}, Shape: n.Shape}
	if n.Info().Class == ir.ClassReduce {
		g.Shape, g.RowAxes = n.Args[0].Shape, n.ReduceAxes()
	}
	return g
}

// group assigns compute nodes to kernel groups: every compute node is its
// own group, or with fusion on, fuseElementwise merges them.
func group(s *State) error {
	if s.Opts.Fusion {
		return fuseElementwise(s)
	}
	s.Groups = nil
	for _, n := range s.Graph.Nodes {
		if computes(n) {
			s.Groups = append(s.Groups, newGroup(n))
		}
	}
	return nil
}

// computes reports whether a node needs a kernel to produce its value:
// everything but inputs and views.
func computes(n *ir.Node) bool {
	return n.Op != ir.OpInput && n.Op != ir.OpView
}

func irCopy(ng *ir.Graph, n *ir.Node, args []*ir.Node) *ir.Node { return ir.Copy(ng, n, args) }

package fuse

import (
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// matmulOperands (the "matmul-operands" pass) makes every matmul operand
// readable by a GEMM in place: an operand whose layout does not map onto a
// BLAS matrix (plan.GemmOperandOf: no unit stride in its last two dims,
// rows that overlap, batch dims that do not collapse to one stride) is
// copied into a contiguous buffer first, and the log says why. Views that
// do map — transposes, narrowed rows and columns, offsets, a batch
// broadcast over every batch dim — cost nothing: the GEMM reads them
// through its transpose flags, leading dimensions and batch strides.
//
// Window ops (conv, pools, upsampling: ir.ClassWindow), quantized ops
// (ir.ClassQuant) and collectives (ir.ClassCollective) read each operand
// as a packed row-major array at an offset (plan.WindowOperandOf), which is
// what the vendor convolution libraries and Loom's own window kernels take;
// any other view (a transpose, a narrowed channel range, a broadcast) is
// copied the same way.
func matmulOperands(s *State) error {
	s.Graph = s.Graph.Rebuild(func(ng *ir.Graph, v *ir.Node, args []*ir.Node) *ir.Node {
		if c := v.Info().Class; c == ir.ClassWindow || c == ir.ClassQuant || c == ir.ClassCollective {
			return windowOperands(s, ng, v, args)
		}
		if v.Op != ir.OpMatmul {
			return ir.Copy(ng, v, args)
		}
		batch := v.Shape[:len(v.Shape)-2]
		var why [2]string
		for i, a := range args {
			_, l := a.Base()
			if _, err := plan.GemmOperandOf(l, batch); err != nil {
				why[i] = err.Error()
				args[i] = ng.Intern(ir.OpCopy, a.DType, a.Shape, []*ir.Node{a}, nil, nil, "")
			}
		}
		n := ir.Copy(ng, v, args)
		for i, w := range why {
			if w != "" {
				s.Log.Add("matmul-operands", n.ID, "operand %d (%v%v) copied to a contiguous buffer: not readable by a GEMM in place: %s", i, args[i].DType, args[i].Shape, w)
			}
		}
		return n
	})
	return nil
}

// windowOperands copies a window op's operands that are not packed arrays.
func windowOperands(s *State, ng *ir.Graph, v *ir.Node, args []*ir.Node) *ir.Node {
	copied := make([]bool, len(args))
	for i, a := range args {
		_, l := a.Base()
		if !plan.WindowOperandOf(l) {
			copied[i] = true
			args[i] = ng.Intern(ir.OpCopy, a.DType, a.Shape, []*ir.Node{a}, nil, nil, "")
		}
	}
	n := ir.Copy(ng, v, args)
	for i, c := range copied {
		if c {
			s.Log.Add("matmul-operands", n.ID, "operand %d (%v%v) of %v copied to a contiguous buffer: %[4]v reads packed arrays", i, args[i].DType, args[i].Shape, v.Op)
		}
	}
	return n
}

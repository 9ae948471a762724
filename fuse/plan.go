package fuse

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// makePlan (the "plan" pass) turns groups into kernels over buffers. Each group has exactly one
// node whose value leaves the group (grouping guarantees it); that node gets
// a buffer. Reads of nodes outside the group become operands: the producing
// buffer seen through the reader's layout (views are resolved here, so a
// transpose or broadcast costs nothing).
func makePlan(s *State) error {
	g := s.Graph
	p := &plan.Plan{Graph: g, Fused: s.Opts.Fusion, AllowTF32: s.Opts.AllowTF32}
	bufOf := make([]*plan.Buffer, len(g.Nodes))
	newBuf := func(n *ir.Node, kind plan.BufferKind, name string) *plan.Buffer {
		b := &plan.Buffer{ID: len(p.Buffers), DType: n.DType, Shape: slices.Clone(n.Shape), Kind: kind, Name: name, Node: n, Slot: -1}
		p.Buffers = append(p.Buffers, b)
		return b
	}
	for _, n := range g.Inputs() {
		b := newBuf(n, plan.BufInput, n.Name)
		bufOf[n.ID] = b
		p.Inputs = append(p.Inputs, b)
	}
	outName := map[*ir.Node]string{}
	for _, o := range g.Outputs {
		if _, dup := outName[stored(o.Node)]; !dup {
			outName[stored(o.Node)] = o.Name
		}
	}
	for _, gr := range s.Groups {
		out := gr.Root
		kind, name := plan.BufTemp, ""
		if nm, ok := outName[out]; ok {
			kind, name = plan.BufOutput, nm
		}
		bufOf[out.ID] = newBuf(out, kind, name)
		k, err := kernel(gr, bufOf)
		if err != nil {
			return err
		}
		p.Steps = append(p.Steps, &plan.Step{Kernel: k})
	}
	for _, o := range g.Outputs {
		b := bufOf[stored(o.Node).ID]
		if b == nil {
			return fmt.Errorf("output %q (%v) has no buffer", o.Name, o.Node)
		}
		if b.Name != o.Name {
			// A second name for the same value: copy it, so every output the
			// caller receives is its own memory.
			nb := newBuf(o.Node, plan.BufOutput, o.Name)
			k := &plan.Kernel{Shape: slices.Clone(o.Node.Shape), Ins: []plan.Operand{{Buf: b, Layout: ir.Contiguous(o.Node.Shape)}},
				Instrs: []plan.Instr{{Node: copyNode(o.Node), Args: []plan.Ref{{Operand: true}}}}, Out: nb}
			k.Name = kernelName(k)
			p.Steps = append(p.Steps, &plan.Step{Kernel: k})
			b = nb
		}
		b.Shape = slices.Clone(o.Node.Shape) // a reshape view's dims
		p.Outputs = append(p.Outputs, b)
	}
	s.Plan = p
	return nil
}

// copyNode is a detached copy node used for duplicate output names (it is
// not part of the graph; kernels only read its op, dtype and shape).
func copyNode(n *ir.Node) *ir.Node {
	return &ir.Node{ID: -1, Op: ir.OpCopy, DType: n.DType, Shape: n.Shape, Args: []*ir.Node{n}}
}

// stored returns the node whose buffer holds an output: the output node, or
// the base of a reshape view (graph.Output copies every other view).
func stored(n *ir.Node) *ir.Node {
	base, _ := n.Base()
	return base
}

// inlineView reports whether a view of an in-group value can be read inside
// the same kernel: only when it maps element i to element i (a reshape of a
// contiguous value at offset 0), since a kernel computes every value in
// row-major order.
func inlineView(v *ir.Node) bool {
	return v.Layout.IsIdentity() && v.Layout.Numel() == v.Args[0].Numel()
}

// kernel builds the kernel of one group over the group's domain: a row
// kernel's members are whole-row values (its shape) or row values (the
// shape with the row dims at 1, such as a reduction's output).
func kernel(gr *Group, bufOf []*plan.Buffer) (*plan.Kernel, error) {
	out := gr.Root
	k := &plan.Kernel{Shape: slices.Clone(gr.Shape), RowAxes: gr.RowAxes, PairEpilogue: gr.PairEpilogue, PairKeep: gr.PairKeep, Out: bufOf[out.ID]}
	index := map[*ir.Node]int{}
	ref := func(a *ir.Node) (plan.Ref, error) {
		base, layout := a.Base()
		if i, ok := index[base]; ok {
			switch {
			case a.Op != ir.OpView || inlineView(a):
				return plan.Ref{Index: i}, nil
			case rowBroadcast(k, base, a):
				return plan.Ref{Index: i, Broadcast: true}, nil
			case k.PairEpilogue:
				if m := plan.PairMember(*a.Layout, k.Shape, base.Shape, k.PairKeep); m != 0 {
					return plan.Ref{Index: i, Pair: m}, nil
				}
			}
		}
		b := bufOf[base.ID]
		if b == nil {
			return plan.Ref{}, fmt.Errorf("node %v reads %v, which is neither in its kernel nor stored", a, base)
		}
		for j, op := range k.Ins {
			if op.Buf == b && op.Layout.Equal(layout) {
				return plan.Ref{Operand: true, Index: j}, nil
			}
		}
		k.Ins = append(k.Ins, plan.Operand{Buf: b, Layout: layout})
		return plan.Ref{Operand: true, Index: len(k.Ins) - 1}, nil
	}
	// A fused kernel (plan.CoreAt): the members before the core are over
	// its first argument's shape.
	pre, w := 0, -1
	if len(gr.Members) > 1 {
		for i, n := range gr.Members {
			if plan.IsFusionCore(n) {
				pre, w = i, i
			}
		}
	}
	for i, n := range gr.Members {
		if i < pre {
			if want := gr.Members[w].Args[0].Shape; !slices.Equal(n.Shape, want) {
				return nil, fmt.Errorf("node %v before core %v is not over its input shape %v", n, gr.Members[w], want)
			}
		} else if i == w && k.PairEpilogue {
			if !plan.PairDomain(k.Shape, n.Shape, k.PairKeep) {
				return nil, fmt.Errorf("core %v's pairs are not its kernel's shape %v", n, k.Shape)
			}
		} else if !slices.Equal(n.Shape, k.Shape) && !k.IsRowValue(n) {
			return nil, fmt.Errorf("node %v in a kernel of shape %v (row axes %d)", n, k.Shape, k.RowAxes)
		}
		if n.Info().Class == ir.ClassReduce && (!slices.Equal(n.Args[0].Shape, k.Shape) || n.ReduceAxes() != k.RowAxes) {
			return nil, fmt.Errorf("reduction %v does not match its kernel's rows (shape %v, row axes %d)", n, k.Shape, k.RowAxes)
		}
		in := plan.Instr{Node: n}
		for _, a := range n.Args {
			r, err := ref(a)
			if err != nil {
				return nil, err
			}
			in.Args = append(in.Args, r)
		}
		index[n] = len(k.Instrs)
		k.Instrs = append(k.Instrs, in)
	}
	if k.Instrs[len(k.Instrs)-1].Node != out {
		return nil, fmt.Errorf("group root %v is not its last member", out)
	}
	k.Name = kernelName(k)
	return k, nil
}

// rowBroadcast reports whether view v reads row value base across whole rows
// of row kernel k: the row value's contiguous layout broadcast to k's shape.
func rowBroadcast(k *plan.Kernel, base, v *ir.Node) bool {
	if v.Op != ir.OpView || !k.IsRowValue(base) || !slices.Equal(v.Shape, k.Shape) {
		return false
	}
	want, err := ir.Contiguous(base.Shape).BroadcastTo(k.Shape)
	return err == nil && want.Equal(*v.Layout)
}

// kernelName says what a kernel does and how big it is, as
// E_<op>_<op>…_<numel>, e.g. E_cast_silu_affine_where_16777216, or for a
// row kernel R_<ops>_<rows>x<rowlen>, or for a matmul
// M_matmul_<batch>x<M>x<K>x<N>. Repeated ops are kept so that the name reads
// as the chain.
func kernelName(k *plan.Kernel) string {
	if k.IsMatmul() {
		n := k.Instrs[0].Node
		r := len(n.Shape)
		return fmt.Sprintf("M_matmul_%dx%dx%dx%d", ir.Numel(n.Shape[:r-2]), n.Shape[r-2], n.Args[0].Shape[r-1], n.Shape[r-1])
	}
	var ops []string
	for _, in := range k.Instrs {
		if in.Node.Op == ir.OpFull && len(k.Instrs) > 1 {
			continue // constants are not work
		}
		ops = append(ops, in.Node.Op.String())
	}
	if k.IsFusedMatmul() {
		return "M_" + strings.Join(ops, "_") + "_" + fmt.Sprint(k.Numel())
	}
	if k.IsWindow() || k.IsFusedWindow() || k.IsFusedConv() {
		return "W_" + strings.Join(ops, "_") + "_" + fmt.Sprint(k.Numel())
	}
	if k.IsCollective() {
		n := k.Instrs[0].Node
		return "C_" + n.Op.String() + "_" + n.Name + "_" + fmt.Sprint(k.Numel())
	}
	if k.IsQuant() || k.IsFusedQuant() {
		f, _ := k.Instrs[max(0, k.QuantAt())].Node.QuantFormat()
		return "Q_" + strings.Join(ops, "_") + "_" + f.String() + "_" + fmt.Sprint(k.Numel())
	}
	if len(k.Instrs) == 1 && k.Instrs[0].Node.Info().Class == ir.ClassIndex {
		return "I_" + strings.Join(ops, "_") + "_" + fmt.Sprint(k.Numel())
	}
	if k.RowAxes > 0 {
		return "R_" + strings.Join(ops, "_") + fmt.Sprintf("_%dx%d", ir.Numel(k.RowShape()), k.RowLen())
	}
	return "E_" + strings.Join(ops, "_") + "_" + fmt.Sprint(k.Numel())
}

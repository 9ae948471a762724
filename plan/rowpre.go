package plan

import (
	"fmt"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// RowPrologue is a fused product's row prologue (SplitFused's Pre of a
// kernel with PreRowAxes) in the form a kernel computes it block by block,
// as three elementwise kernels:
//
//	Elem over the prologue's shape: the value its one reduction, a
//	     float32 sum over each row, adds up;
//	Row  over the row shape (nil when the whole-row part reads the sum
//	     itself): the one row value the whole-row part reads, from the
//	     sum, operand RowValue;
//	Out  over the prologue's shape: the prologue's value, reading that
//	     row value as operand OutValue (-1 when it reads none).
//
// A block sums Elem over a row, computes Row once and Out at every element
// of the row. An RMSNorm is x·(mean(x²) + eps)^−½ (times a weight): Elem
// is x², Row the inverse root, Out the products. Whole-row values that
// both Elem and Out need (the cast of x) are computed in each.
// ElemIns, RowIns and OutIns map each part's operands to the prologue's
// (-1 for the value operand).
type RowPrologue struct {
	Elem, Row, Out          *Kernel
	ElemIns, RowIns, OutIns []int
	RowValue, OutValue      int
}

// SplitRowPrologue takes row kernel pre (one row axis, one reduction: a
// float32 sum; row values computed from that sum and constants only; every
// whole-row value that reads a row value reading the same one) apart into
// a RowPrologue, or says which rule it breaks.
func SplitRowPrologue(pre *Kernel) (*RowPrologue, error) {
	bad := func(format string, a ...any) (*RowPrologue, error) {
		return nil, fmt.Errorf("row prologue %s: %s", pre.Name, fmt.Sprintf(format, a...))
	}
	if pre.RowAxes != 1 || pre.RowLen() < 2 || len(pre.Instrs) == 0 {
		return bad("want one row axis of at least 2 elements, have %d of %d", pre.RowAxes, pre.RowLen())
	}
	red := -1
	for j, in := range pre.Instrs {
		if in.Node.Info().Class != ir.ClassReduce {
			continue
		}
		if red >= 0 {
			return bad("more than one reduction")
		}
		if in.Node.Op != ir.OpSum || in.Node.DType != dtype.F32 {
			return bad("its reduction is %s %v, not a float32 sum", in.Node.Op, in.Node.DType)
		}
		red = j
	}
	if red < 0 {
		return bad("no reduction")
	}
	row := func(j int) bool { return pre.IsRowValue(pre.Instrs[j].Node) }
	last := len(pre.Instrs) - 1
	if row(last) {
		return bad("its value is a row value")
	}
	// The one row value the whole-row instructions read (-1: none yet).
	value := -1
	for j, in := range pre.Instrs {
		for _, r := range in.Args {
			switch {
			case row(j) && r.Operand:
				return bad("row value %d (%s) reads an operand", j, in.Node.Op)
			case row(j) && j != red && !row(r.Index):
				return bad("row value %d (%s) reads a whole-row value", j, in.Node.Op)
			case r.Broadcast && value >= 0 && r.Index != value:
				return bad("whole-row values read two row values, %d and %d", value, r.Index)
			case r.Broadcast:
				value = r.Index
			}
		}
	}
	// deps is instruction j and the closure of its refs that are not
	// broadcast, up to the sum (whose own refs it leaves out), in order.
	deps := func(j int) []int {
		seen := map[int]bool{}
		var walk func(int)
		walk = func(i int) {
			if seen[i] {
				return
			}
			seen[i] = true
			if i == red {
				return
			}
			for _, r := range pre.Instrs[i].Args {
				if !r.Operand && !r.Broadcast {
					walk(r.Index)
				}
			}
		}
		walk(j)
		var out []int
		for i := range pre.Instrs {
			if seen[i] {
				out = append(out, i)
			}
		}
		return out
	}
	p := &RowPrologue{RowValue: -1, OutValue: -1}
	rowShape := pre.RowShape()
	// part builds an elementwise kernel of instructions idx over shape; a
	// ref to instruction from becomes the value operand (its index
	// returned, -1 when none reads it).
	part := func(name string, idx []int, shape []int, from int) (*Kernel, []int, int, error) {
		k := &Kernel{Name: pre.Name + "/" + name, Shape: slices.Clone(shape)}
		var ins []int
		vi := -1
		at := map[int]int{}
		for _, j := range idx {
			in := pre.Instrs[j]
			ni := Instr{Node: in.Node}
			for _, r := range in.Args {
				switch {
				case r.Operand:
					i := slices.Index(ins, r.Index)
					if i < 0 {
						if !slices.Equal(pre.Ins[r.Index].Layout.Dims, shape) {
							return nil, nil, 0, fmt.Errorf("instruction %d (%s) reads operand %d through %v, its part is %v", j, in.Node.Op, r.Index, pre.Ins[r.Index].Layout, shape)
						}
						k.Ins = append(k.Ins, pre.Ins[r.Index])
						ins = append(ins, r.Index)
						i = len(ins) - 1
					}
					ni.Args = append(ni.Args, Ref{Operand: true, Index: i})
				case r.Index == from:
					if vi < 0 {
						n := pre.Instrs[from].Node
						b := &Buffer{ID: -1, DType: n.DType, Shape: slices.Clone(shape), Kind: BufTemp, Node: n, Slot: -1}
						k.Ins = append(k.Ins, Operand{Buf: b, Layout: ir.Contiguous(shape)})
						ins = append(ins, -1)
						vi = len(ins) - 1
					}
					ni.Args = append(ni.Args, Ref{Operand: true, Index: vi})
				default:
					i, ok := at[r.Index]
					if !ok {
						return nil, nil, 0, fmt.Errorf("instruction %d (%s) reads %v outside its part", j, in.Node.Op, r)
					}
					ni.Args = append(ni.Args, Ref{Index: i})
				}
			}
			at[j] = len(k.Instrs)
			k.Instrs = append(k.Instrs, ni)
		}
		n := k.Instrs[len(k.Instrs)-1].Node
		k.Out = &Buffer{ID: -1, DType: n.DType, Shape: slices.Clone(shape), Kind: BufTemp, Node: n, Slot: -1}
		return k, ins, vi, nil
	}
	arg := pre.Instrs[red].Args[0]
	if arg.Operand || arg.Broadcast {
		// The sum reads an operand directly: a copy of it is the part.
		return bad("its sum reads an operand directly")
	}
	var err error
	elem := deps(arg.Index)
	for _, j := range elem {
		if row(j) {
			return bad("the summed value reads row value %d", j)
		}
	}
	if p.Elem, p.ElemIns, _, err = part("elem", elem, pre.Shape, -1); err != nil {
		return bad("%v", err)
	}
	if value >= 0 && value != red {
		var idx []int
		for _, j := range deps(value) {
			if j != red {
				idx = append(idx, j)
			}
		}
		if p.Row, p.RowIns, p.RowValue, err = part("row", idx, rowShape, red); err != nil {
			return bad("%v", err)
		}
	}
	var out []int
	for _, j := range deps(last) {
		if row(j) {
			return bad("its value reads row value %d without a broadcast", j)
		}
		out = append(out, j)
	}
	if p.Out, p.OutIns, p.OutValue, err = part("out", out, pre.Shape, value); err != nil {
		return bad("%v", err)
	}
	return p, nil
}

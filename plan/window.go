package plan

import (
	"fmt"
	"slices"

	"github.com/loomgraph/loom/ir"
)

// A fused window kernel is a pool or an upsampling with the elementwise
// chains before and after it in one kernel (fuse's "window-fusion" pass):
//
//	Instrs[:w]   the prologue: elementwise instructions over the window's
//	             input shape, Instrs[w-1] its value (the window's argument);
//	Instrs[w]    the window op, reading Instrs[w-1] or, with no prologue, an
//	             operand (a packed array, as WindowOperandOf);
//	Instrs[w+1:] the epilogue: elementwise instructions over the window's
//	             output shape (Kernel.Shape), reading the window's value
//	             element for element, operands and each other.
//
// Operands of the prologue have the input shape as their dims, those of
// the epilogue the output shape. Executors either render it as one kernel
// that computes the prologue at every element the window reads and the
// epilogue at every element it writes (the GPU), or run SplitWindow's three
// kernels over two temporaries (the CPU, and any executor that cannot):
// the values are the same, since elementwise instructions compute each
// element alone.

// IsPoolOrUpsample reports whether n is a window op that window fusion
// takes: a pool or an upsampling (not a convolution).
func IsPoolOrUpsample(n *ir.Node) bool {
	switch n.Op {
	case ir.OpMaxPool, ir.OpAvgPool, ir.OpUpsampleNearest, ir.OpUpsampleBilinear:
		return true
	}
	return false
}

// WindowAt returns the index of the window instruction of a fused window
// kernel (more than one instruction, exactly one of them a pool or an
// upsampling), or -1.
func (k *Kernel) WindowAt() int {
	if len(k.Instrs) < 2 {
		return -1
	}
	w := -1
	for i, in := range k.Instrs {
		if in.Node != nil && in.Node.Info().Class == ir.ClassWindow {
			if w >= 0 || !IsPoolOrUpsample(in.Node) {
				return -1
			}
			w = i
		}
	}
	return w
}

// IsFusedWindow reports whether k is a fused window kernel (WindowAt ≥ 0).
func (k *Kernel) IsFusedWindow() bool { return k.WindowAt() >= 0 }

// WindowNode is the window op of a window step or a fused window kernel
// (nil for other kernels).
func (k *Kernel) WindowNode() *ir.Node {
	if k.IsWindow() {
		return k.Instrs[0].Node
	}
	if w := k.WindowAt(); w >= 0 {
		return k.Instrs[w].Node
	}
	return nil
}

// WindowParts is a fused window kernel taken apart: Pre (nil without a
// prologue) computes the window's input into Temps[0], Win the window op
// (into Temps[len-1] when there is an epilogue, else the kernel's output),
// Post (nil without an epilogue) the epilogue into the kernel's output.
// Win's operand and Post's operand PostValue are the temporaries (contiguous
// layouts); every other operand is one of the fused kernel's, with its
// layout; PreIns and PostIns map each part's operand to the fused kernel's
// (-1 for a temporary).
type WindowParts struct {
	Pre, Win, Post  *Kernel
	Temps           []*Buffer
	PreIns, PostIns []int
	// PostValue is the index of Post's operand that holds the window's
	// value (-1 without an epilogue).
	PostValue int
}

// SplitWindow takes fused window kernel k apart. The temporaries get IDs
// firstID, firstID+1 (callers give IDs past the plan's buffers, and memory
// of their own), Slot -1, kind BufTemp. It checks the layout rules above
// and reports any break of them as an error naming the kernel.
func SplitWindow(k *Kernel, firstID int) (*WindowParts, error) {
	w := k.WindowAt()
	if w < 0 {
		return nil, fmt.Errorf("kernel %s is not a fused window kernel", k.Name)
	}
	win := k.Instrs[w]
	wn := win.Node
	bad := func(format string, a ...any) (*WindowParts, error) {
		return nil, fmt.Errorf("fused window kernel %s: %s", k.Name, fmt.Sprintf(format, a...))
	}
	if len(win.Args) != 1 || len(wn.Args) != 1 {
		return bad("%s has %d args, want 1", wn.Op, len(win.Args))
	}
	if k.Out == nil {
		return bad("no output buffer")
	}
	inShape := wn.Args[0].Shape
	if !slices.Equal(wn.Shape, k.Shape) {
		return bad("%s output %v is not the kernel's shape %v", wn.Op, wn.Shape, k.Shape)
	}
	parts := &WindowParts{PostValue: -1}
	newTemp := func(n *ir.Node) *Buffer {
		b := &Buffer{ID: firstID + len(parts.Temps), DType: n.DType, Shape: slices.Clone(n.Shape), Kind: BufTemp, Node: n, Slot: -1}
		parts.Temps = append(parts.Temps, b)
		return b
	}
	// sub builds a part from instructions [lo, hi): refs to instructions
	// before lo are allowed only for the value that becomes operand val.
	sub := func(lo, hi int, shape []int, valueOf int, value *Buffer, out *Buffer) (*Kernel, []int, int, error) {
		sk := &Kernel{Shape: slices.Clone(shape), Out: out}
		var from []int
		valueIdx := -1
		opnd := func(fused int) int {
			if i := slices.Index(from, fused); i >= 0 {
				return i
			}
			sk.Ins = append(sk.Ins, k.Ins[fused])
			from = append(from, fused)
			return len(sk.Ins) - 1
		}
		for j := lo; j < hi; j++ {
			in := k.Instrs[j]
			if in.Node == nil || in.Node.Info().Class == ir.ClassWindow || in.Node.Info().Class == ir.ClassReduce {
				return nil, nil, 0, fmt.Errorf("instruction %d (%v) is not elementwise", j, in.Node)
			}
			if !slices.Equal(in.Node.Shape, shape) {
				return nil, nil, 0, fmt.Errorf("instruction %d (%s) has shape %v, its part %v", j, in.Node.Op, in.Node.Shape, shape)
			}
			ni := Instr{Node: in.Node}
			for _, r := range in.Args {
				switch {
				case r.Broadcast:
					return nil, nil, 0, fmt.Errorf("instruction %d (%s) reads a row value", j, in.Node.Op)
				case r.Operand && r.Index >= 0 && r.Index < len(k.Ins):
					if !slices.Equal(k.Ins[r.Index].Layout.Dims, shape) {
						return nil, nil, 0, fmt.Errorf("instruction %d (%s) reads operand %d through %v, its part is %v", j, in.Node.Op, r.Index, k.Ins[r.Index].Layout, shape)
					}
					ni.Args = append(ni.Args, Ref{Operand: true, Index: opnd(r.Index)})
				case !r.Operand && r.Index >= lo && r.Index < j:
					ni.Args = append(ni.Args, Ref{Index: r.Index - lo})
				case !r.Operand && r.Index == valueOf && value != nil:
					if valueIdx < 0 {
						sk.Ins = append(sk.Ins, Operand{Buf: value, Layout: ir.Contiguous(value.Shape)})
						from = append(from, -1)
						valueIdx = len(sk.Ins) - 1
					}
					ni.Args = append(ni.Args, Ref{Operand: true, Index: valueIdx})
				default:
					return nil, nil, 0, fmt.Errorf("instruction %d (%s) reads %v, outside its part", j, in.Node.Op, r)
				}
			}
			sk.Instrs = append(sk.Instrs, ni)
		}
		sk.Name = fmt.Sprintf("%s/%d-%d", k.Name, lo, hi)
		return sk, from, valueIdx, nil
	}
	winIn := Operand{}
	switch r := win.Args[0]; {
	case r.Operand && r.Index >= 0 && r.Index < len(k.Ins) && w == 0:
		winIn = k.Ins[r.Index]
		if !WindowOperandOf(winIn.Layout) || !slices.Equal(winIn.Layout.Dims, inShape) {
			return bad("%s reads operand %d through %v, not a packed %v", wn.Op, r.Index, winIn.Layout, inShape)
		}
	case !r.Operand && w > 0 && r.Index == w-1 && !r.Broadcast:
		t := newTemp(k.Instrs[w-1].Node)
		pre, from, _, err := sub(0, w, inShape, -1, nil, t)
		if err != nil {
			return bad("prologue: %v", err)
		}
		parts.Pre, parts.PreIns = pre, from
		winIn = Operand{Buf: t, Layout: ir.Contiguous(inShape)}
	default:
		return bad("%s reads %v: want the prologue's last value, or an operand when there is no prologue", wn.Op, r)
	}
	out := k.Out
	if w < len(k.Instrs)-1 {
		out = newTemp(wn)
	}
	parts.Win = &Kernel{Shape: slices.Clone(wn.Shape), Ins: []Operand{winIn}, Instrs: []Instr{{Node: wn, Args: []Ref{{Operand: true}}}}, Out: out}
	parts.Win.Name = k.Name + "/window"
	if w < len(k.Instrs)-1 {
		post, from, vi, err := sub(w+1, len(k.Instrs), k.Shape, w, out, k.Out)
		if err != nil {
			return bad("epilogue: %v", err)
		}
		if vi < 0 {
			return bad("the epilogue does not read the window's value")
		}
		parts.Post, parts.PostIns, parts.PostValue = post, from, vi
	}
	return parts, nil
}

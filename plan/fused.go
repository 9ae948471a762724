package plan

import (
	"fmt"
	"slices"

	"github.com/loomgraph/loom/ir"
)

// A fused kernel is a core step — a pool, an upsampling, a matmul, a
// quantized matmul, a dequantization or a convolution (fuse's
// "core-fusion" pass) — with the
// elementwise chains before and after it in one kernel:
//
//	Instrs[:c]   the prologue: elementwise instructions over the shape of
//	             the core's first argument, Instrs[c-1] its value;
//	Instrs[c]    the core op, reading Instrs[c-1] as its first argument or,
//	             with no prologue, an operand (a packed array for a window,
//	             a GEMM operand for a matmul); any other argument (a
//	             matmul's B) is an operand;
//	Instrs[c+1:] the epilogue: elementwise instructions over the core's
//	             output shape (Kernel.Shape), reading the core's value
//	             element for element, operands and each other.
//
// Operands of the prologue have the core's first argument's shape as their
// dims, those of the epilogue the output shape. Executors either render it
// as one kernel that computes the prologue at every element the core reads
// and the epilogue at every element it writes (the GPU's pools and
// upsamplings, and its skinny products), or run SplitFused's three kernels
// over two temporaries (the CPU, and whatever cannot): the values are the
// same, since elementwise instructions compute each element alone.

// IsPoolOrUpsample reports whether n is a window op that window fusion
// takes: a pool or an upsampling (not a convolution).
func IsPoolOrUpsample(n *ir.Node) bool {
	switch n.Op {
	case ir.OpMaxPool, ir.OpAvgPool, ir.OpUpsampleNearest, ir.OpUpsampleBilinear:
		return true
	}
	return false
}

// IsFusionCore reports whether n can be the core of a fused kernel: a pool,
// an upsampling, a matmul, a quantized matmul, a dequantization or a
// convolution.
func IsFusionCore(n *ir.Node) bool {
	return IsPoolOrUpsample(n) || n.Op == ir.OpMatmul || n.Op == ir.OpQMatmul || n.Op == ir.OpDequantize || n.Op == ir.OpConv || n.Op == ir.OpConvTranspose
}

// CoreAt returns the index of the core instruction of a fused kernel (more
// than one instruction, exactly one of them not elementwise, and that one
// a pool, an upsampling, a matmul or a convolution), or -1.
func (k *Kernel) CoreAt() int {
	if len(k.Instrs) < 2 {
		return -1
	}
	w := -1
	for i, in := range k.Instrs {
		if in.Node == nil {
			return -1
		}
		if c := in.Node.Info().Class; c == ir.ClassWindow || c == ir.ClassMatmul || c == ir.ClassQuant {
			if w >= 0 || !IsFusionCore(in.Node) {
				return -1
			}
			w = i
		}
	}
	return w
}

// WindowAt returns the index of the window instruction of a fused window
// kernel (CoreAt, a pool or an upsampling), or -1.
func (k *Kernel) WindowAt() int {
	if c := k.CoreAt(); c >= 0 && IsPoolOrUpsample(k.Instrs[c].Node) {
		return c
	}
	return -1
}

// MatmulAt returns the index of the matmul of a fused matmul kernel
// (CoreAt, a matmul), or -1.
func (k *Kernel) MatmulAt() int {
	if c := k.CoreAt(); c >= 0 && k.Instrs[c].Node.Op == ir.OpMatmul {
		return c
	}
	return -1
}

// QMatmulAt returns the index of the quantized matmul of a fused quantized
// matmul kernel (CoreAt), or -1. fuse gives quantized matmuls an epilogue
// only.
func (k *Kernel) QMatmulAt() int {
	if c := k.CoreAt(); c >= 0 && k.Instrs[c].Node.Op == ir.OpQMatmul {
		return c
	}
	return -1
}

// IsFusedQMatmul reports whether k is a fused quantized matmul kernel
// (QMatmulAt ≥ 0).
func (k *Kernel) IsFusedQMatmul() bool { return k.QMatmulAt() >= 0 }

// DequantAt returns the index of the dequantization of a fused
// dequantize kernel (CoreAt: a dequantize with the elementwise chain that
// reads its output, its epilogue), or -1. fuse gives dequantizations an
// epilogue only.
func (k *Kernel) DequantAt() int {
	if c := k.CoreAt(); c >= 0 && k.Instrs[c].Node.Op == ir.OpDequantize {
		return c
	}
	return -1
}

// IsFusedDequant reports whether k is a fused dequantize kernel
// (DequantAt ≥ 0).
func (k *Kernel) IsFusedDequant() bool { return k.DequantAt() >= 0 }

// QuantAt returns the index of the quantized op of a fused kernel whose
// core is one (QMatmulAt or DequantAt), or -1.
func (k *Kernel) QuantAt() int { return max(k.QMatmulAt(), k.DequantAt()) }

// IsFusedQuant reports whether k is a fused quantized kernel (QuantAt ≥
// 0): a fused quantized matmul or dequantization.
func (k *Kernel) IsFusedQuant() bool { return k.QuantAt() >= 0 }

// ConvAt returns the index of the convolution (or transposed convolution)
// of a fused conv kernel (CoreAt), or -1. fuse gives convs an epilogue
// only.
func (k *Kernel) ConvAt() int {
	if c := k.CoreAt(); c >= 0 && (k.Instrs[c].Node.Op == ir.OpConv || k.Instrs[c].Node.Op == ir.OpConvTranspose) {
		return c
	}
	return -1
}

// IsFusedConv reports whether k is a fused conv kernel (ConvAt ≥ 0).
func (k *Kernel) IsFusedConv() bool { return k.ConvAt() >= 0 }

// IsFusedMatmul reports whether k is a fused matmul kernel (MatmulAt ≥ 0).
func (k *Kernel) IsFusedMatmul() bool { return k.MatmulAt() >= 0 }

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

// FusedParts is a fused kernel taken apart: Pre (nil without a prologue)
// computes the core's first argument into Temps[0], Core the core op (into
// Temps[len-1] when there is an epilogue, else the kernel's output), Post
// (nil without an epilogue) the epilogue into the kernel's output. Core's
// first operand is Temps[0] with a prologue (a contiguous layout), Post's
// operand PostValue the core's value; every other operand is one of the
// fused kernel's, with its layout. PreIns, CoreIns and PostIns map each
// part's operands to the fused kernel's (-1 for a temporary).
type FusedParts struct {
	Pre, Core, Post          *Kernel
	Temps                    []*Buffer
	PreIns, CoreIns, PostIns []int
	// PostValue is the index of Post's operand that holds the core's
	// value (-1 without an epilogue, or with a pair epilogue).
	PostValue int
	// PostPair are the indices of a pair epilogue's operands that read the
	// core's even and odd values (PairLayout; -1 where it reads none).
	PostPair [2]int
}

// PairShape is shape with its last dim halved: a pair epilogue's.
func PairShape(shape []int) []int {
	s := slices.Clone(shape)
	if n := len(s); n > 0 {
		s[n-1] /= 2
	}
	return s
}

// PairLayout reads the even (odd = 0) or odd (odd = 1) elements of the last
// dim of a contiguous value of shape: PairShape(shape), the last stride 2.
func PairLayout(shape []int, odd int) ir.Layout {
	l := ir.Contiguous(shape)
	n := len(shape)
	l.Dims[n-1] /= 2
	l.Strides[n-1] = 2
	l.Offset = odd
	return l
}

// PairKeepLayout reads member (0 or 1) of each pair of a contiguous value
// viewed as shape, whose last dim is 2: the last stride 0, so that both
// elements of a pair see that member (Kernel.PairKeep).
func PairKeepLayout(shape []int, member int) ir.Layout {
	l := ir.Contiguous(shape)
	l.Strides[len(shape)-1] = 0
	l.Offset = member
	return l
}

// PairMember reports which member of each pair a pair epilogue over
// kernel shape shape (keep: Kernel.PairKeep) reads through view layout l
// of a core output of shape core: 1 the even (2j), 2 the odd (2j+1), 0
// neither. l must read as PairLayoutFor does; the strides of dims of size
// 1, which views may set to anything, do not count.
func PairMember(l ir.Layout, shape, core []int, keep bool) int8 {
	for m := range 2 {
		want := PairLayoutFor(shape, core, keep, m)
		same := l.Offset == want.Offset && slices.Equal(l.Dims, want.Dims) && len(l.Strides) == len(want.Strides)
		for i := 0; same && i < len(l.Dims); i++ {
			same = l.Dims[i] == 1 || l.Strides[i] == want.Strides[i]
		}
		if same {
			return int8(m + 1)
		}
	}
	return 0
}

// PairDomain reports whether shape is the domain of a pair epilogue over a
// core output of shape core: core with its last dim halved, or, keeping
// every element (keep), a reshape of core whose last dim is 2 (the core's
// last dim even, so that a pair never spans two of its rows).
func PairDomain(shape, core []int, keep bool) bool {
	if !keep {
		return slices.Equal(shape, PairShape(core))
	}
	n := len(core)
	return len(shape) > 0 && shape[len(shape)-1] == 2 && n > 0 && core[n-1]%2 == 0 && ir.Numel(shape) == ir.Numel(core)
}

// PairLayoutFor is the layout through which a pair epilogue of kernel
// shape shape (keep: Kernel.PairKeep) reads member m (0 even, 1 odd) of
// each pair of a core output of shape core.
func PairLayoutFor(shape, core []int, keep bool, m int) ir.Layout {
	if keep {
		return PairKeepLayout(shape, m)
	}
	return PairLayout(core, m)
}

// SplitFused takes fused kernel k apart. The temporaries get IDs firstID,
// firstID+1 (callers give IDs past the plan's buffers, and memory of their
// own), Slot -1, kind BufTemp. It checks the layout rules above and reports
// any break of them as an error naming the kernel.
func SplitFused(k *Kernel, firstID int) (*FusedParts, error) {
	w := k.CoreAt()
	if w < 0 {
		return nil, fmt.Errorf("kernel %s is not a fused kernel", k.Name)
	}
	win := k.Instrs[w]
	wn := win.Node
	bad := func(format string, a ...any) (*FusedParts, error) {
		return nil, fmt.Errorf("fused kernel %s: %s", k.Name, fmt.Sprintf(format, a...))
	}
	if len(win.Args) < 1 || len(win.Args) != len(wn.Args) {
		return bad("%s has %d instruction args for %d node args", wn.Op, len(win.Args), len(wn.Args))
	}
	if k.Out == nil {
		return bad("no output buffer")
	}
	inShape := wn.Args[0].Shape
	if k.PairKeep && !k.PairEpilogue {
		return bad("PairKeep without PairEpilogue")
	}
	if k.PairEpilogue {
		if !PairDomain(k.Shape, wn.Shape, k.PairKeep) || w == len(k.Instrs)-1 {
			return bad("a pair epilogue's shape %v is not over %s output %v's pairs (keep %v)", k.Shape, wn.Op, wn.Shape, k.PairKeep)
		}
	} else if !slices.Equal(wn.Shape, k.Shape) {
		return bad("%s output %v is not the kernel's shape %v", wn.Op, wn.Shape, k.Shape)
	}
	parts := &FusedParts{PostValue: -1, PostPair: [2]int{-1, -1}}
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
				case !r.Operand && r.Index == valueOf && value != nil && r.Pair != 0:
					// A pair epilogue reads the core's value through the
					// even or odd elements of its last dim.
					if !k.PairEpilogue {
						return nil, nil, 0, fmt.Errorf("instruction %d (%s) reads a pair outside a pair epilogue", j, in.Node.Op)
					}
					l := PairLayoutFor(k.Shape, value.Shape, k.PairKeep, int(r.Pair)-1)
					at := slices.IndexFunc(sk.Ins, func(o Operand) bool { return o.Buf == value && o.Layout.Equal(l) })
					if at < 0 {
						sk.Ins = append(sk.Ins, Operand{Buf: value, Layout: l})
						from = append(from, -1)
						at = len(sk.Ins) - 1
						parts.PostPair[r.Pair-1] = at
					}
					ni.Args = append(ni.Args, Ref{Operand: true, Index: at})
				case !r.Operand && r.Index == valueOf && value != nil:
					if k.PairEpilogue {
						return nil, nil, 0, fmt.Errorf("instruction %d (%s) reads the core's value whole in a pair epilogue", j, in.Node.Op)
					}
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
	// The core's first argument: the prologue's value or an operand; its
	// other arguments: operands.
	var coreIns []Operand
	var coreFrom []int
	for i, r := range win.Args {
		switch {
		case r.Operand && r.Index >= 0 && r.Index < len(k.Ins) && (i > 0 || w == 0):
			op := k.Ins[r.Index]
			if !slices.Equal(op.Layout.Dims, wn.Args[i].Shape) {
				return bad("%s reads operand %d through %v, not %v", wn.Op, r.Index, op.Layout, wn.Args[i].Shape)
			}
			if (IsPoolOrUpsample(wn) || wn.Op == ir.OpQMatmul || wn.Op == ir.OpDequantize) && !WindowOperandOf(op.Layout) {
				return bad("%s reads operand %d through %v, not a packed array", wn.Op, r.Index, op.Layout)
			}
			coreIns, coreFrom = append(coreIns, op), append(coreFrom, r.Index)
		case i == 0 && !r.Operand && w > 0 && r.Index == w-1 && !r.Broadcast:
			t := newTemp(k.Instrs[w-1].Node)
			pre, from, _, err := sub(0, w, inShape, -1, nil, t)
			if err != nil {
				return bad("prologue: %v", err)
			}
			parts.Pre, parts.PreIns = pre, from
			coreIns, coreFrom = append(coreIns, Operand{Buf: t, Layout: ir.Contiguous(inShape)}), append(coreFrom, -1)
		default:
			return bad("%s argument %d reads %v: want the prologue's last value (the first argument) or an operand", wn.Op, i, r)
		}
	}
	out := k.Out
	if w < len(k.Instrs)-1 {
		out = newTemp(wn)
	}
	core := Instr{Node: wn}
	for i := range coreIns {
		core.Args = append(core.Args, Ref{Operand: true, Index: i})
	}
	parts.Core = &Kernel{Shape: slices.Clone(wn.Shape), Ins: coreIns, Instrs: []Instr{core}, Out: out}
	parts.Core.Name = k.Name + "/core"
	parts.CoreIns = coreFrom
	if w < len(k.Instrs)-1 {
		post, from, vi, err := sub(w+1, len(k.Instrs), k.Shape, w, out, k.Out)
		if err != nil {
			return bad("epilogue: %v", err)
		}
		if vi < 0 && parts.PostPair == [2]int{-1, -1} {
			return bad("the epilogue does not read the window's value")
		}
		parts.Post, parts.PostIns, parts.PostValue = post, from, vi
	}
	return parts, nil
}

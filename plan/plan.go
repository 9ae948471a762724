package plan

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// BufferKind says who owns a buffer.
type BufferKind uint8

// Buffer kinds.
const (
	BufInput  BufferKind = iota // supplied by the caller
	BufOutput                   // returned to the caller
	BufTemp                     // lives between its producer and its last reader
)

func (k BufferKind) String() string { return [...]string{"input", "output", "temp"}[k] }

// Buffer is a contiguous array of Numel elements of DType.
type Buffer struct {
	ID    int
	DType dtype.DType
	Shape []int
	Kind  BufferKind
	Name  string   // input or output name
	Node  *ir.Node // the node whose value it holds
	// Slot is the memory slot a temporary lives in (-1 for inputs and
	// outputs); temporaries whose lifetimes do not overlap share a slot.
	Slot int
}

// Numel is the number of elements.
func (b *Buffer) Numel() int { return ir.Numel(b.Shape) }

// Bytes is the buffer's size in bytes.
func (b *Buffer) Bytes() int { return b.Numel() * b.DType.Size() }

func (b *Buffer) String() string {
	s := fmt.Sprintf("b%d %v%v %v", b.ID, b.DType, b.Shape, b.Kind)
	if b.Name != "" {
		s += fmt.Sprintf(" %q", b.Name)
	}
	if b.Slot >= 0 {
		s += fmt.Sprintf(" slot%d", b.Slot)
	}
	return s
}

// Operand is an external read of a kernel: a buffer through a layout whose
// dims are the kernel's shape (a matmul's operands have their own dims,
// [batch..., M, K] and [batch..., K, N]; see Gemm).
type Operand struct {
	Buf    *Buffer
	Layout ir.Layout
}

// Ref names a value inside a kernel: one of its operands or the result of an
// earlier instruction.
type Ref struct {
	Operand bool
	Index   int
	// Broadcast marks a row value (one per row) read by a whole-row
	// instruction: every element of the row sees its row's value.
	Broadcast bool
	// Pair, in a pair epilogue (Kernel.PairEpilogue), reads the core's
	// value at 2j (1) or 2j+1 (2) of its last dim for the epilogue's
	// element j (with Kernel.PairKeep: for its elements 2j and 2j+1).
	Pair int8
}

func (r Ref) String() string {
	s := fmt.Sprintf("t%d", r.Index)
	if r.Operand {
		s = fmt.Sprintf("in%d", r.Index)
	}
	if r.Broadcast {
		s += "[row]"
	}
	switch r.Pair {
	case 1:
		s += "[even]"
	case 2:
		s += "[odd]"
	}
	return s
}

// Instr is one op of a kernel: the IR node it computes and where its args
// come from. Sources (Full, Arange) have no args.
type Instr struct {
	Node *ir.Node
	Args []Ref
}

// Kernel is a fused group of ops over one shape. Every elementwise
// instruction produces Shape's numel elements in row-major order, and
// Instrs[len-1] is stored into Out.
//
// A row kernel (RowAxes > 0) also reduces: Shape's trailing RowAxes dims form
// a row. An instruction whose node has those dims at size 1 holds one value
// per row (a row value); the others hold whole rows. Reductions turn whole
// rows into row values, and whole-row instructions read row values through
// broadcast refs — softmax, layer norm and sum(x·x) are each one kernel.
type Kernel struct {
	Name    string
	Shape   []int
	RowAxes int
	// PairEpilogue marks a fused matmul kernel (CoreAt) whose epilogue is
	// over the core's output shape with its last dim halved, reading the
	// core's values in pairs (Ref.Pair): silu(gate)·up from a product whose
	// weight interleaves gate and up rows, as each pair is stored.
	PairEpilogue bool
	// PairKeep, with PairEpilogue, keeps every element instead: the
	// epilogue is over a contiguous reshape of the core's output whose last
	// dim is 2 (Shape [..., N/2, 2] for an output [..., N]), and element
	// (..., j, m) reads the pair (2j, 2j+1) through views that broadcast
	// one member over the last dim (PairKeepLayout). Each pair stores both
	// its outputs: a rotary embedding of the queries and keys of a product
	// whose rows the model interleaves per head (RopeIThdHeads).
	PairKeep bool
	Ins      []Operand
	Instrs   []Instr
	Out      *Buffer
	// Ahead marks the operands (by index into Ins) that the step before
	// this kernel's in the plan does not write (MarkAhead): a GPU kernel
	// launched with programmatic dependence may read them before it waits
	// for that step to finish, since every step before it has finished
	// by then (see codegen's loom_grid_defer).
	Ahead []bool
	// NewKV, on an attention step right behind its cache's one-position
	// scatter, says where its new key and value are (MarkNewKV).
	NewKV *NewKV
	// Cache holds executor-private compiled forms of the kernel, keyed by
	// executor (KeyOf, weakly), so they live as long as both the plan and
	// the executor.
	Cache Cache
}

// Numel is the number of elements of a whole-shape value.
func (k *Kernel) Numel() int { return ir.Numel(k.Shape) }

// RowLen is the number of elements in a row (1 for a plain elementwise
// kernel).
func (k *Kernel) RowLen() int { return ir.Numel(k.Shape[len(k.Shape)-k.RowAxes:]) }

// RowShape is the shape of a row value: Shape with the row dims set to 1.
func (k *Kernel) RowShape() []int {
	s := slices.Clone(k.Shape)
	for d := len(s) - k.RowAxes; d < len(s); d++ {
		s[d] = 1
	}
	return s
}

// IsRowValue reports whether a node in the kernel holds one value per row.
func (k *Kernel) IsRowValue(n *ir.Node) bool {
	return k.RowAxes > 0 && slices.Equal(n.Shape, k.RowShape()) && !slices.Equal(n.Shape, k.Shape)
}

// OpNames lists the kernel's ops in order, for names and dumps.
func (k *Kernel) OpNames() []string {
	names := make([]string, len(k.Instrs))
	for i, in := range k.Instrs {
		names[i] = in.Node.Op.String()
	}
	return names
}

// IsMatmul reports whether the kernel is one matmul step (a GEMM: see Gemm).
func (k *Kernel) IsMatmul() bool {
	return len(k.Instrs) == 1 && k.Instrs[0].Node.Info().Class == ir.ClassMatmul
}

// IsWindow reports whether the kernel is one window step (conv, pool or
// upsampling: ir.ClassWindow). Its operands are packed arrays at offsets
// (WindowOperandOf); Instrs[0].Node's params say what to compute.
func (k *Kernel) IsWindow() bool {
	return len(k.Instrs) == 1 && k.Instrs[0].Node.Info().Class == ir.ClassWindow
}

// IsQuant reports whether the kernel is one quantized step (dequantize or
// qmatmul: ir.ClassQuant), with packed operands like a window step.
func (k *Kernel) IsQuant() bool {
	return len(k.Instrs) == 1 && k.Instrs[0].Node.Info().Class == ir.ClassQuant
}

// IsCollective reports whether the kernel is one collective step
// (ir.ClassCollective): its operand is a packed array at an offset, its
// group is Instrs[0].Node.Name.
func (k *Kernel) IsCollective() bool {
	return len(k.Instrs) == 1 && k.Instrs[0].Node.Info().Class == ir.ClassCollective
}

// HasMatmul reports whether any step of the plan is a matmul.
func (p *Plan) HasMatmul() bool {
	for _, s := range p.Steps {
		if s.Kernel.IsMatmul() || s.Kernel.IsFusedMatmul() {
			return true
		}
	}
	return false
}

// Step is one unit of work in a plan.
type Step struct {
	Kernel *Kernel
}

// Plan is a compiled, executable graph.
type Plan struct {
	Graph   *ir.Graph
	Steps   []*Step
	Buffers []*Buffer
	Inputs  []*Buffer // in declaration order
	Outputs []*Buffer // in declaration order; Name is the output name
	// SlotBytes is the size of each temporary memory slot.
	SlotBytes []int
	// Fused records whether elementwise fusion ran.
	Fused bool
	// AllowTF32 lets executors run f32 matmul steps with TF32 tensor-core
	// arithmetic (10-bit mantissa products, f32 accumulation), as Candle's
	// set_gemm_reduced_precision_f32(true). Off by default: f32 matmuls are
	// computed in f32. The CPU ignores it.
	AllowTF32 bool
	// inPlace memoises InPlace (a plan does not change once built).
	inPlace atomic.Pointer[map[int]*Buffer]
	// Cache holds executor-private per-plan state keyed by executor (KeyOf;
	// the GPU executor records there that every step is prepared).
	Cache Cache
}

// PeakBytes returns the memory the plan's temporaries and outputs need with
// slot sharing (reuse) and without it (every temporary its own allocation).
func (p *Plan) PeakBytes() (withReuse, withoutReuse int) {
	for _, b := range p.Buffers {
		switch b.Kind {
		case BufTemp:
			withoutReuse += b.Bytes()
		case BufOutput:
			withReuse += b.Bytes()
			withoutReuse += b.Bytes()
		}
	}
	for _, s := range p.SlotBytes {
		withReuse += s
	}
	return withReuse, withoutReuse
}

// WriteText writes the plan: buffers, slots and steps.
func (p *Plan) WriteText(w *strings.Builder) {
	reuse, noReuse := p.PeakBytes()
	fmt.Fprintf(w, "plan: %d steps, %d buffers, fused=%v\n", len(p.Steps), len(p.Buffers), p.Fused)
	fmt.Fprintf(w, "peak bytes (temporaries + outputs): %d with reuse, %d without\n", reuse, noReuse)
	if p.HasMatmul() {
		fmt.Fprintf(w, "matmul: allow_tf32=%v\n", p.AllowTF32)
	}
	for i, s := range p.SlotBytes {
		fmt.Fprintf(w, "slot%d: %d bytes\n", i, s)
	}
	for _, b := range p.Buffers {
		fmt.Fprintf(w, "%v\n", b)
	}
	for i, s := range p.Steps {
		k := s.Kernel
		fmt.Fprintf(w, "step %d: %s -> b%d\n", i, k.Name, k.Out.ID)
		for j, in := range k.Ins {
			fmt.Fprintf(w, "  in%d = b%d %v\n", j, in.Buf.ID, in.Layout)
		}
		if k.IsMatmul() {
			if g, err := Gemm(k); err != nil {
				fmt.Fprintf(w, "  gemm: %v\n", err)
			} else {
				fmt.Fprintf(w, "  %v offsets a=%d b=%d\n", g.Call, g.OffA, g.OffB)
			}
		}
		for j, in := range k.Instrs {
			args := make([]string, len(in.Args))
			for a, r := range in.Args {
				args[a] = r.String()
			}
			op := in.Node.Op.String()
			if ps := ir.FormatParams(in.Node); ps != "" {
				op += "(" + ps + ")"
			}
			fmt.Fprintf(w, "  t%d = %s %v [%s]  (node %%%d)\n", j, op, in.Node.DType, strings.Join(args, ", "), in.Node.ID)
		}
		if nk := k.NewKV; nk != nil && i > 0 {
			fmt.Fprintf(w, "  new key and value: b%d %v, written by step %d into b%d (may load ahead where in place)\n",
				nk.Src.Buf.ID, nk.Src.Layout, i-1, nk.Scatter.Out.ID)
		}
	}
}

package plan

import (
	"fmt"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// A matmul step is one strided-batched GEMM (package blas): each operand is
// read in place through its layout, which must map onto a BLAS matrix:
//
//   - of its last two dims [R, C], one has stride 1 and the other a stride
//     at least the first one's size — unit stride on C is a plain row-major
//     matrix with leading dimension stride(R); unit stride on R is the
//     transpose of a row-major C×R matrix with leading dimension stride(C).
//     A dim of size 1 may have any stride (its leading dimension is then
//     free, and the smallest legal one is used);
//   - its batch dims, broadcast to the output's, collapse to one stride
//     (all of them stride 0 when the operand is broadcast over the batch).
//
// fuse checks every operand with GemmOperandOf and copies one that fails
// into a contiguous buffer first; Gemm then maps the step.

// GemmOperand is how one operand layout maps onto a BLAS matrix.
type GemmOperand struct {
	Trans  bool // stored transposed (unit stride on the row dim)
	LD     int  // leading dimension
	Stride int  // elements between batch items; 0 broadcasts
	Offset int  // element offset of the first item's first element
}

// GemmOperandOf maps layout l (dims [..., R, C]) broadcast to the batch
// dims batch onto a BLAS matrix, or says why it cannot. An empty operand
// (a dim of 0) always maps: the call touches none of it.
func GemmOperandOf(l ir.Layout, batch []int) (GemmOperand, error) {
	r := l.Rank()
	if r < 2 {
		return GemmOperand{}, fmt.Errorf("layout %v has rank %d, a matrix needs 2", l, r)
	}
	full := append(append([]int{}, batch...), l.Dims[r-2:]...)
	bl, err := l.BroadcastTo(full)
	if err != nil {
		return GemmOperand{}, err
	}
	r = bl.Rank()
	R, C := bl.Dims[r-2], bl.Dims[r-1]
	sR, sC := bl.Strides[r-2], bl.Strides[r-1]
	g := GemmOperand{Offset: bl.Offset}
	if R*C == 0 || ir.Numel(batch) == 0 {
		g.LD = max(1, C)
		return g, nil
	}
	switch {
	case (C == 1 || sC == 1) && (R == 1 || sR >= C):
		g.LD = max(1, C)
		if R > 1 {
			g.LD = sR
		}
	case (R == 1 || sR == 1) && (C == 1 || sC >= R):
		g.Trans, g.LD = true, max(1, R)
		if C > 1 {
			g.LD = sC
		}
	default:
		return GemmOperand{}, fmt.Errorf("matrix dims [%d %d] have strides [%d %d]: a GEMM needs one of them 1 and the other at least the size of the first", R, C, sR, sC)
	}
	// Batch item b (row-major over the batch dims) must start at b·Stride:
	// every non-unit dim's stride is the next non-unit dim's stride times
	// that dim's size.
	next := -1 // the innermost non-unit batch dim seen so far
	for d := r - 3; d >= 0; d-- {
		if bl.Dims[d] == 1 {
			continue
		}
		if next < 0 {
			g.Stride = bl.Strides[d]
		} else if bl.Strides[d] != bl.Strides[next]*bl.Dims[next] {
			return GemmOperand{}, fmt.Errorf("batch dims %v with strides %v do not collapse to one batch stride", bl.Dims[:r-2], bl.Strides[:r-2])
		}
		next = d
	}
	return g, nil
}

// GemmStep is a matmul step mapped onto one GEMM: C = A·B over the batch,
// with alpha 1 and beta 0. A and B are read at element offsets OffA and
// OffB of their buffers; C is the step's contiguous output buffer, from
// element 0.
type GemmStep struct {
	Call       blas.Call
	DType      dtype.DType
	A, B, C    *Buffer
	OffA, OffB int
}

func (g GemmStep) String() string {
	return fmt.Sprintf("%v %v a=b%d+%d b=b%d+%d c=b%d", g.DType, g.Call, g.A.ID, g.OffA, g.B.ID, g.OffB, g.C.ID)
}

// Gemm maps a matmul kernel onto one strided-batched row-major GEMM. It
// fails when an operand's layout does not map (GemmOperandOf): fuse never
// plans such a step. A batch that reads B broadcast (stride 0) and A as
// evenly spaced rows across the batch (a [..., T, K] input times a weight)
// folds into one taller product: M·batch rows, batch 1.
func Gemm(k *Kernel) (GemmStep, error) {
	if !k.IsMatmul() {
		return GemmStep{}, fmt.Errorf("plan: gemm: kernel %s is not a matmul", k.Name)
	}
	in := k.Instrs[0]
	r := len(k.Shape)
	if r < 2 || len(in.Args) != 2 || !in.Args[0].Operand || !in.Args[1].Operand {
		return GemmStep{}, fmt.Errorf("plan: gemm: kernel %s: malformed matmul (shape %v, args %v)", k.Name, k.Shape, in.Args)
	}
	batch := k.Shape[:r-2]
	opA, opB := k.Ins[in.Args[0].Index], k.Ins[in.Args[1].Index]
	ga, err := GemmOperandOf(opA.Layout, batch)
	if err != nil {
		return GemmStep{}, fmt.Errorf("plan: gemm: kernel %s: operand a (b%d %v): %w", k.Name, opA.Buf.ID, opA.Layout, err)
	}
	gb, err := GemmOperandOf(opB.Layout, batch)
	if err != nil {
		return GemmStep{}, fmt.Errorf("plan: gemm: kernel %s: operand b (b%d %v): %w", k.Name, opB.Buf.ID, opB.Layout, err)
	}
	la, lb := opA.Layout.Dims, opB.Layout.Dims
	M, K, N := la[len(la)-2], la[len(la)-1], lb[len(lb)-1]
	if lb[len(lb)-2] != K || k.Shape[r-2] != M || k.Shape[r-1] != N {
		return GemmStep{}, fmt.Errorf("plan: gemm: kernel %s: %v · %v does not give %v", k.Name, la, lb, k.Shape)
	}
	c := blas.Call{
		M: M, N: N, K: K, TransA: ga.Trans, TransB: gb.Trans,
		LDA: ga.LD, LDB: gb.LD, LDC: max(1, N),
		StrideA: ga.Stride, StrideB: gb.Stride, StrideC: M * N,
		Batch: ir.Numel(batch), Alpha: 1, Beta: 0,
	}
	if c.Batch > 1 && c.StrideB == 0 && !c.TransA && M > 0 && K > 0 {
		if M == 1 && c.StrideA >= K {
			c.LDA = c.StrideA // one row per item: its leading dimension is free
		}
		if c.StrideA == M*c.LDA {
			c.M, c.Batch, c.StrideA, c.StrideC = M*c.Batch, 1, 0, M*c.Batch*N
		}
	}
	return GemmStep{Call: c, DType: k.Out.DType, A: opA.Buf, B: opB.Buf, C: k.Out, OffA: ga.Offset, OffB: gb.Offset}, nil
}

// WindowOperandOf reports whether a window op (ir.ClassWindow) can read
// layout l in place: a packed row-major array (contiguous strides, any
// offset). fuse copies every other operand first.
func WindowOperandOf(l ir.Layout) bool {
	want := 1
	for d := l.Rank() - 1; d >= 0; d-- {
		if l.Dims[d] != 1 && l.Strides[d] != want {
			return l.Numel() == 0
		}
		want *= l.Dims[d]
	}
	return true
}

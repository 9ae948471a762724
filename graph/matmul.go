package graph

import (
	"fmt"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// Matrix products. Each runs as one GEMM step (package blas; plan.Gemm maps
// the step): operands are read in place through their views — a transpose
// becomes a transpose flag, a narrowed or offset view a leading dimension
// and an offset, a batch broadcast a batch stride of 0 — and only an operand
// no GEMM can read (no unit stride in its last two dims, batch dims that do
// not collapse to one stride) is copied first (the compile log says why).
// Elementwise consumers of the product (bias, activation, residual, cast)
// fuse into one kernel after it. Floats only; f16 and bf16 accumulate in
// float32 and round once.

// Matmul is the matrix product over the last two dims, Candle's matmul and
// broadcast_matmul: t [..., M, K] · o [..., K, N] → [..., M, N]. Both need
// rank ≥ 2 and one float dtype; the batch dims (all but the last two)
// broadcast with numpy rules, so the ranks may differ.
func (t *Tensor) Matmul(o *Tensor) *Tensor {
	g, err := sameGraph("matmul", t, o)
	if err != nil {
		return failOr(g, err)
	}
	ts := []*Tensor{t, o}
	if err := matmulDTypes("matmul", ts); err != nil {
		return g.fail(err)
	}
	if t.Rank() < 2 || o.Rank() < 2 {
		return g.fail(opErr("matmul", "%s: both operands need rank ≥ 2 (Mv multiplies by a vector, Dot two vectors)", describe(ts, nil)))
	}
	a, b := t.n.Shape, o.n.Shape
	if a[len(a)-1] != b[len(b)-2] {
		return g.fail(opErr("matmul", "%s: inner dims differ (%d vs %d)", describe(ts, nil), a[len(a)-1], b[len(b)-2]))
	}
	if _, err := ir.BroadcastShapes(a[:len(a)-2], b[:len(b)-2]); err != nil {
		return g.fail(opErr("matmul", "%s: batch dims: %v", describe(ts, nil), err))
	}
	return matmul(g, "matmul", t, o)
}

// Mv is the matrix-vector product t [..., M, K] · v [K] → [..., M].
func (t *Tensor) Mv(v *Tensor) *Tensor {
	g, err := sameGraph("mv", t, v)
	if err != nil {
		return failOr(g, err)
	}
	ts := []*Tensor{t, v}
	if err := matmulDTypes("mv", ts); err != nil {
		return g.fail(err)
	}
	if t.Rank() < 2 || v.Rank() != 1 {
		return g.fail(opErr("mv", "%s: want a matrix (rank ≥ 2) and a vector (rank 1)", describe(ts, nil)))
	}
	if k := t.n.Shape[t.Rank()-1]; k != v.n.Shape[0] {
		return g.fail(opErr("mv", "%s: inner dims differ (%d vs %d)", describe(ts, nil), k, v.n.Shape[0]))
	}
	return matmul(g, "mv", t, v.Unsqueeze(1)).Squeeze(-1)
}

// Dot is the inner product of two vectors of one length and one dtype.
// The result is a 0-d tensor (shape []), as torch.dot and Candle's dot
// return. Floats are one GEMM step (f16/bf16 accumulate in float32);
// integer dtypes, which Candle's dot also takes (it is mul + sum_all
// there), are a multiply and a sum that wrap like Mul and Sum.
func Dot(a, b *Tensor) *Tensor {
	g, err := sameGraph("dot", a, b)
	if err != nil {
		return failOr(g, err)
	}
	ts := []*Tensor{a, b}
	if a.n.DType != b.n.DType {
		return g.fail(opErr("dot", "dtype mismatch: %s", describe(ts, nil)))
	}
	if a.Rank() != 1 || b.Rank() != 1 || a.n.Shape[0] != b.n.Shape[0] {
		return g.fail(opErr("dot", "%s: want two vectors (rank 1) of one length", describe(ts, nil)))
	}
	if !a.n.DType.IsFloat() {
		return a.Mul(b).Sum(0)
	}
	if err := matmulDTypes("dot", ts); err != nil {
		return g.fail(err)
	}
	return matmul(g, "dot", a.Unsqueeze(0), b.Unsqueeze(1)).Reshape()
}

// Linear is x·wᵀ + b, PyTorch's linear and Candle's Linear: x [..., in],
// w [out, in], b [out] or nil → [..., out]. w is read transposed in place
// (no copy) and broadcast over x's batch dims, which for a contiguous x
// fold into one product of all rows; the bias add fuses into the kernel
// after the product.
func Linear(x, w, b *Tensor) *Tensor {
	ts := []*Tensor{x, w}
	if b != nil {
		ts = append(ts, b)
	}
	g, err := sameGraph("linear", ts...)
	if err != nil {
		return failOr(g, err)
	}
	if err := matmulDTypes("linear", ts); err != nil {
		return g.fail(err)
	}
	in, out := -1, -1
	if w.Rank() == 2 {
		out, in = w.n.Shape[0], w.n.Shape[1]
	}
	switch {
	case x.Rank() < 1 || w.Rank() != 2:
		return g.fail(opErr("linear", "%s: want x [..., in] (rank ≥ 1) and w [out, in]", describeLinear(ts)))
	case x.n.Shape[x.Rank()-1] != in:
		return g.fail(opErr("linear", "%s: x has %d input features, w has %d", describeLinear(ts), x.n.Shape[x.Rank()-1], in))
	case b != nil && !slices.Equal(b.n.Shape, []int{out}):
		return g.fail(opErr("linear", "%s: bias must be [%d]", describeLinear(ts), out))
	}
	var y *Tensor
	if x.Rank() == 1 {
		y = matmul(g, "linear", x.Unsqueeze(0), w.T()).Squeeze(0)
	} else {
		y = matmul(g, "linear", x, w.T())
	}
	if b != nil {
		y = y.Add(b)
	}
	return y
}

func describeLinear(ts []*Tensor) string {
	s := fmt.Sprintf("x %v%v, w %v%v", ts[0].n.DType, ts[0].n.Shape, ts[1].n.DType, ts[1].n.Shape)
	if len(ts) > 2 {
		s += fmt.Sprintf(", b %v%v", ts[2].n.DType, ts[2].n.Shape)
	}
	return s
}

// matmulDTypes checks that the operands share one dtype that matmul
// supports, naming op and every operand.
func matmulDTypes(op string, ts []*Tensor) error {
	info := ir.OpMatmul.Info()
	dt := ts[0].n.DType
	for _, t := range ts[1:] {
		if t.n.DType != dt {
			return opErr(op, "dtype mismatch: %s", describe(ts, nil))
		}
	}
	if dt == dtype.F8E4M3 {
		return opErr(op, "%s: dtype f8e4m3 not supported: it is a storage dtype with no f8 GEMM (cast to one of %v first)", describe(ts, nil), info.In)
	}
	if !info.In.Has(dt) {
		return opErr(op, "%s: dtype %v not supported (supports %v)", describe(ts, nil), dt, info.In)
	}
	return nil
}

// matmul records the product of checked operands (rank ≥ 2, inner dims
// equal, batch dims broadcastable): both are broadcast to the common batch
// dims as views, so the node's args have the output's batch dims.
func matmul(g *Graph, op string, a, b *Tensor) *Tensor {
	if a.err != nil {
		return a
	}
	if b.err != nil {
		return b
	}
	as, bs := a.n.Shape, b.n.Shape
	ra, rb := len(as), len(bs)
	batch, err := ir.BroadcastShapes(as[:ra-2], bs[:rb-2])
	if err != nil {
		return g.fail(opErr(op, "%s: batch dims: %v", describe([]*Tensor{a, b}, nil), err))
	}
	m, k, n := as[ra-2], as[ra-1], bs[rb-1]
	a = a.broadcastTo(op, append(slices.Clone(batch), m, k))
	b = b.broadcastTo(op, append(slices.Clone(batch), k, n))
	if a.err != nil {
		return a
	}
	if b.err != nil {
		return b
	}
	shape := append(slices.Clone(batch), m, n)
	if err := checkShape(op, a.n.DType, shape); err != nil {
		return g.fail(err)
	}
	return g.intern(ir.OpMatmul, a.n.DType, shape, []*ir.Node{a.n, b.n}, nil, nil, "")
}

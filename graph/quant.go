package graph

import (
	"fmt"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// Quantized tensors (GGML block formats, package quant). A QTensor is a
// matrix (or a batch of them) of rows of K elements stored as GGUF stores
// them: each row the format's blocks back to back, a plain u8 tensor of
// shape [..., R, rowBytes] underneath (Raw). It is a graph input like any
// other — its run-time value is the raw bytes (QuantizeValue makes one,
// package gguf hands them out of a file) — and its format and K ride in
// the ops that read it, so dumps and errors name them.
//
// What reads a QTensor: Dequantize (to f32, f16 or bf16), QMatmul (x·Wᵀ,
// Candle's QMatMul), Embedding (rows picked by ids, then dequantized: the
// table is never dequantized whole), and row views (NarrowRows).

// QTensor is a quantized matrix in a graph.
type QTensor struct {
	raw    *Tensor
	format quant.Type
	k      int
}

// QInput declares a quantized input of logical shape [..., R, K] in
// format: its value is a u8 tensor of shape [..., R, rowBytes].
func (g *Graph) QInput(name string, format quant.Type, shape ...int) (*QTensor, error) {
	if len(shape) < 1 {
		return nil, opErr("qinput", "input %q: a quantized tensor needs at least one dim (the row length)", name)
	}
	k := shape[len(shape)-1]
	rb, err := ir.QuantRowBytes(format, k)
	if err != nil {
		return nil, opErr("qinput", "input %q %v%v: %v", name, format, shape, err)
	}
	raw := g.Input(name, dtype.U8, append(slices.Clone(shape[:len(shape)-1]), rb)...)
	if err := raw.Err(); err != nil {
		return nil, err
	}
	return &QTensor{raw: raw, format: format, k: k}, nil
}

// Raw is the u8 tensor of the quantized rows.
func (q *QTensor) Raw() *Tensor { return q.raw }

// Format is the block format.
func (q *QTensor) Format() quant.Type { return q.format }

// Shape is the logical shape [..., R, K].
func (q *QTensor) Shape() []int {
	s := slices.Clone(q.raw.Shape())
	s[len(s)-1] = q.k
	return s
}

func (q *QTensor) String() string { return fmt.Sprintf("%v%v", q.format, q.Shape()) }

func (q *QTensor) check(op string) (*Graph, error) {
	if q == nil || q.raw == nil {
		return nil, opErr(op, "nil quantized tensor")
	}
	if err := q.raw.Err(); err != nil {
		return q.raw.g, err
	}
	return q.raw.g, nil
}

// Dequantize decodes every element to dt (f32, f16 or bf16): GGML's
// dequantize_row values, rounded once to halves.
func (q *QTensor) Dequantize(dt dtype.DType) *Tensor {
	g, err := q.check("dequantize")
	if err != nil {
		return failOr(g, err)
	}
	if !ir.QuantActDTypes.Has(dt) {
		return g.fail(opErr("dequantize", "%v to %v: want f32, f16 or bf16", q, dt))
	}
	shape := q.Shape()
	if err := checkShape("dequantize", dt, shape); err != nil {
		return g.fail(err)
	}
	return g.intern(ir.OpDequantize, dt, shape, []*ir.Node{q.raw.n}, []float64{float64(q.format), float64(q.k)}, nil, "")
}

// NarrowRows is rows [start, start+n) of a 2-D quantized matrix (a view of
// the raw rows: no data moves).
func (q *QTensor) NarrowRows(start, n int) (*QTensor, error) {
	if _, err := q.check("narrow"); err != nil {
		return nil, err
	}
	raw := q.raw.Narrow(0, start, n)
	if err := raw.Err(); err != nil {
		return nil, err
	}
	return &QTensor{raw: raw, format: q.format, k: q.k}, nil
}

// Embedding picks rows of a 2-D quantized table by the 1-D ids (u8, u32
// or i64; out of range is a run-time error, as IndexSelect) and
// dequantizes only those: [len(ids), K] in dt.
func (q *QTensor) Embedding(ids *Tensor, dt dtype.DType) *Tensor {
	g, err := q.check("embedding")
	if err != nil {
		return failOr(g, err)
	}
	if q.raw.Rank() != 2 {
		return g.fail(opErr("embedding", "table %v: want a 2-D [rows, K] table", q))
	}
	rows := q.raw.IndexSelect(ids, 0)
	if err := rows.Err(); err != nil {
		return g.fail(opErr("embedding", "table %v: %v", q, err))
	}
	return (&QTensor{raw: rows, format: q.format, k: q.k}).Dequantize(dt)
}

// QMatmul is x [..., M, K] · Wᵀ for the quantized W [N, K] → [..., M, N] in
// x's dtype (f32, f16 or bf16): Candle's QMatMul, a Linear layer without
// bias. Add a bias with Add; it fuses after the step.
func (t *Tensor) QMatmul(w *QTensor) *Tensor {
	g, err := w.check("qmatmul")
	if err == nil {
		g, err = sameGraph("qmatmul", t, w.raw)
	}
	if err != nil {
		return failOr(g, err)
	}
	if !ir.QuantActDTypes.Has(t.n.DType) {
		return g.fail(opErr("qmatmul", "x %v%v · %v: x must be f32, f16 or bf16", t.n.DType, t.n.Shape, w))
	}
	if w.raw.Rank() != 2 {
		return g.fail(opErr("qmatmul", "x %v%v · %v: the weight must be 2-D [N, K]", t.n.DType, t.n.Shape, w))
	}
	if t.Rank() < 1 || t.n.Shape[t.Rank()-1] != w.k {
		return g.fail(opErr("qmatmul", "x %v%v · %v: x's last dim must be K = %d", t.n.DType, t.n.Shape, w, w.k))
	}
	shape := append(slices.Clone(t.n.Shape[:t.Rank()-1]), w.raw.n.Shape[0])
	if err := checkShape("qmatmul", t.n.DType, shape); err != nil {
		return g.fail(err)
	}
	return g.intern(ir.OpQMatmul, t.n.DType, shape, []*ir.Node{t.n, w.raw.n}, []float64{float64(w.format), float64(w.k)}, nil, "")
}

// QuantizeValue quantizes the float tensor v (f32, f16, bf16 or f64; its
// last dim K a multiple of format's block) to format on the host (package
// quant: bit-exact with GGML's reference quantizers) and returns the raw
// u8 value a QInput of v's shape takes.
func QuantizeValue(format quant.Type, v *tensor.Tensor) (*tensor.Tensor, error) {
	shape := v.Shape()
	if len(shape) < 1 {
		return nil, fmt.Errorf("loom: quantize: a scalar has no rows")
	}
	k := shape[len(shape)-1]
	rb, err := ir.QuantRowBytes(format, k)
	if err != nil {
		return nil, fmt.Errorf("loom: quantize %v%v to %v: %w", v.DType(), shape, format, err)
	}
	xs := v.Float64s()
	src := make([]float32, len(xs))
	for i, x := range xs {
		src[i] = float32(x)
	}
	rows := 0
	if k > 0 {
		rows = len(src) / k
	}
	dst := make([]byte, rows*rb)
	if err := quant.Quantize(format, src, dst); err != nil {
		return nil, fmt.Errorf("loom: quantize %v%v to %v: %w", v.DType(), shape, format, err)
	}
	return tensor.New(dst, append(slices.Clone(shape[:len(shape)-1]), rb)...)
}

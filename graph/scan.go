package graph

import "github.com/loomgraph/loom/ir"

// Cumsum returns the inclusive prefix sums of t along dim (negative dims
// count from the end), Candle's Tensor::cumsum: out[…, i, …] = t[…, 0, …]
// + … + t[…, i, …], with t's shape and dtype. Every dtype: f16 and bf16
// add in float32 and round each output once; u8, u32 and i64 wrap like
// their sums. Float additions follow the fixed order documented in
// ir/scan.go, the same on every executor, so results are reproducible bit
// for bit; out[…, i, …] depends on elements 0 … i only (Candle, which
// multiplies by a triangular matrix, lets a later Inf or NaN reach earlier
// outputs). It runs as its own step: a scan, which fusion does not cross.
func (t *Tensor) Cumsum(dim int) *Tensor {
	if r, ok := t.ready("cumsum"); !ok {
		return r
	}
	if in := ir.OpCumsum.Info().In; !in.Has(t.n.DType) {
		return t.g.fail(opErr("cumsum", "%v%v: dtype %v not supported (supports %v; cast first)", t.n.DType, t.n.Shape, t.n.DType, in))
	}
	rank := t.Rank()
	if rank == 0 {
		return t.g.fail(opErr("cumsum", "needs at least one dim, got a scalar %v%v", t.n.DType, t.n.Shape))
	}
	d := dim
	if d < 0 {
		d += rank
	}
	if d < 0 || d >= rank {
		return t.g.fail(opErr("cumsum", "dim %d out of range for %v%v (rank %d: dims %d … %d)", dim, t.n.DType, t.n.Shape, rank, -rank, rank-1))
	}
	return t.g.intern(ir.OpCumsum, t.n.DType, t.n.Shape, []*ir.Node{t.n}, []float64{float64(d)}, nil, "")
}

package graph

import (
	"math"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// Indexing, sorting and data movement. Every op here runs as its own step
// (fusion treats them as barriers: each reads its inputs from memory and
// writes its output to memory; an elementwise producer is materialised
// first). Semantics follow Candle: see ir's op table for ids, sentinels and
// duplicates.

// sameGraph resolves operands that must all be typed tensors of one graph.
func sameGraph(op string, ts ...*Tensor) (*Graph, error) {
	var g *Graph
	for _, t := range ts {
		if err := t.bad(op); err != nil {
			return g, err
		}
		switch {
		case t.n == nil:
			return g, opErr(op, "needs tensors, got an untyped scalar")
		case g == nil:
			g = t.g
		case t.g != g:
			return g, opErr(op, "operands belong to different graphs")
		}
	}
	return g, nil
}

func (t *Tensor) indexDim(op string, dim int) (int, *Tensor) {
	d, err := t.normDim(op, dim, t.Rank())
	if err != nil {
		return 0, t.g.fail(err)
	}
	return d, nil
}

func checkIDs(op string, ids *Tensor) error {
	if !ir.IDDTypes.Has(ids.n.DType) {
		return opErr(op, "ids dtype %v must be one of %v (ids %v%v)", ids.n.DType, ir.IDDTypes, ids.n.DType, ids.n.Shape)
	}
	return nil
}

func failOr(g *Graph, err error) *Tensor {
	if g == nil {
		return &Tensor{err: err}
	}
	return g.fail(err)
}

// IndexSelect picks the slices of t along dim named by the 1-D ids: the
// output has t's shape with dim replaced by len(ids).
func (t *Tensor) IndexSelect(ids *Tensor, dim int) *Tensor {
	g, err := sameGraph("index_select", t, ids)
	if err != nil {
		return failOr(g, err)
	}
	d, bad := t.indexDim("index_select", dim)
	if bad != nil {
		return bad
	}
	if err := checkIDs("index_select", ids); err != nil {
		return g.fail(err)
	}
	if ids.Rank() != 1 {
		return g.fail(opErr("index_select", "ids must be 1-D, got %v%v (source %v%v)", ids.n.DType, ids.n.Shape, t.n.DType, t.n.Shape))
	}
	shape := slices.Clone(t.n.Shape)
	shape[d] = ids.n.Shape[0]
	return g.intern(ir.OpIndexSelect, t.n.DType, shape, []*ir.Node{t.n, ids.n}, []float64{float64(d)}, nil, "")
}

// Gather reads t along dim at ids: out[i…, j, k…] = t[i…, ids[i…, j, k…], k…].
// ids has t's rank and t's dims except along dim; the output has ids' shape
// (Candle's CPU convention, which its CUDA kernel matches only in that case).
func (t *Tensor) Gather(ids *Tensor, dim int) *Tensor {
	g, err := sameGraph("gather", t, ids)
	if err != nil {
		return failOr(g, err)
	}
	d, bad := t.indexDim("gather", dim)
	if bad != nil {
		return bad
	}
	if err := checkIDs("gather", ids); err != nil {
		return g.fail(err)
	}
	if !sameExcept(ids.n.Shape, t.n.Shape, d) {
		return g.fail(opErr("gather", "ids %v%v must match source %v%v on every dim but %d", ids.n.DType, ids.n.Shape, t.n.DType, t.n.Shape, d))
	}
	return g.intern(ir.OpGather, t.n.DType, ids.n.Shape, []*ir.Node{t.n, ids.n}, []float64{float64(d)}, nil, "")
}

func sameExcept(a, b []int, d int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if i != d && a[i] != b[i] {
			return false
		}
	}
	return true
}

func (t *Tensor) scatterLike(op ir.Op, ids, src *Tensor, dim int) *Tensor {
	name := op.String()
	g, err := sameGraph(name, t, ids, src)
	if err != nil {
		return failOr(g, err)
	}
	d, bad := t.indexDim(name, dim)
	if bad != nil {
		return bad
	}
	if err := checkIDs(name, ids); err != nil {
		return g.fail(err)
	}
	if src.n.DType != t.n.DType {
		return g.fail(opErr(name, "source dtype %v differs from destination %v (destination %v%v, source %v%v)", src.n.DType, t.n.DType, t.n.DType, t.n.Shape, src.n.DType, src.n.Shape))
	}
	if op == ir.OpIndexAdd {
		if ids.Rank() != 1 || !sameExcept(src.n.Shape, t.n.Shape, d) || src.n.Shape[d] != ids.n.Shape[0] {
			return g.fail(opErr(name, "want 1-D ids of length src.shape[%d] and src matching dst except along %d: dst %v%v, ids %v%v, src %v%v", d, d, t.n.DType, t.n.Shape, ids.n.DType, ids.n.Shape, src.n.DType, src.n.Shape))
		}
	} else if !slices.Equal(ids.n.Shape, src.n.Shape) || !sameExcept(src.n.Shape, t.n.Shape, d) {
		return g.fail(opErr(name, "ids must have src's shape and src must match dst except along %d: dst %v%v, ids %v%v, src %v%v", d, t.n.DType, t.n.Shape, ids.n.DType, ids.n.Shape, src.n.DType, src.n.Shape))
	}
	return g.intern(op, t.n.DType, t.n.Shape, []*ir.Node{t.n, ids.n, src.n}, []float64{float64(d)}, nil, "")
}

// Scatter returns t with src written along dim at ids (ids has src's shape):
// out[i…, ids[i…, j, k…], k…] = src[i…, j, k…]. With duplicate ids the last
// write wins.
func (t *Tensor) Scatter(ids, src *Tensor, dim int) *Tensor {
	return t.scatterLike(ir.OpScatter, ids, src, dim)
}

// ScatterAdd is Scatter that adds instead of overwriting.
func (t *Tensor) ScatterAdd(ids, src *Tensor, dim int) *Tensor {
	return t.scatterLike(ir.OpScatterAdd, ids, src, dim)
}

// IndexAdd returns t with src's slices along dim added at the 1-D ids:
// out[…, ids[j], …] += src[…, j, …].
func (t *Tensor) IndexAdd(ids, src *Tensor, dim int) *Tensor {
	return t.scatterLike(ir.OpIndexAdd, ids, src, dim)
}

// Cat concatenates tensors of one dtype along dim; the other dims must match.
func Cat(dim int, ts ...*Tensor) *Tensor {
	if len(ts) == 0 {
		return &Tensor{err: opErr("cat", "no tensors")}
	}
	g, err := sameGraph("cat", ts...)
	if err != nil {
		return failOr(g, err)
	}
	first := ts[0]
	d, bad := first.indexDim("cat", dim)
	if bad != nil {
		return bad
	}
	shape := slices.Clone(first.n.Shape)
	args := make([]*ir.Node, len(ts))
	for i, t := range ts {
		if t.n.DType != first.n.DType || !sameExcept(t.n.Shape, first.n.Shape, d) {
			return g.fail(opErr("cat", "tensor %d is %v%v, tensor 0 is %v%v: dtypes and every dim but %d must match", i, t.n.DType, t.n.Shape, first.n.DType, first.n.Shape, d))
		}
		if i > 0 {
			if shape[d] > math.MaxInt-t.n.Shape[d] {
				return g.fail(opErr("cat", "dim %d of the result overflows: %s", d, describe(ts, nil)))
			}
			shape[d] += t.n.Shape[d]
		}
		args[i] = t.n
	}
	if len(ts) == 1 {
		return first
	}
	return g.intern(ir.OpCat, first.n.DType, shape, args, []float64{float64(d)}, nil, "")
}

// SliceAssign returns t with src written over t.Narrow(dim, start, len):
// src has t's shape except along dim.
func (t *Tensor) SliceAssign(src *Tensor, dim, start int) *Tensor {
	g, err := sameGraph("slice_assign", t, src)
	if err != nil {
		return failOr(g, err)
	}
	d, bad := t.indexDim("slice_assign", dim)
	if bad != nil {
		return bad
	}
	// sameExcept checks the ranks first, so src.n.Shape[d] exists after it;
	// the bounds check is overflow-safe (start+len may wrap).
	if src.n.DType != t.n.DType || !sameExcept(src.n.Shape, t.n.Shape, d) || start < 0 || start > t.n.Shape[d] || src.n.Shape[d] > t.n.Shape[d]-start {
		return g.fail(opErr("slice_assign", "cannot write %v%v at start %d of dim %d of %v%v: dtypes must match, shapes must match except along dim %d, and the source must fit", src.n.DType, src.n.Shape, start, d, t.n.DType, t.n.Shape, d))
	}
	return g.intern(ir.OpSliceAssign, t.n.DType, t.n.Shape, []*ir.Node{t.n, src.n}, []float64{float64(d), float64(start)}, nil, "")
}

// Argsort returns the u32 indices that sort the last dim, stably (equal
// keys keep their order); NaN sorts last ascending, first descending.
func (t *Tensor) Argsort(descending bool) *Tensor {
	if r, ok := t.ready("argsort"); !ok {
		return r
	}
	if t.Rank() == 0 {
		return t.g.fail(opErr("argsort", "needs at least one dim, got %v%v", t.n.DType, t.n.Shape))
	}
	desc := 0.0
	if descending {
		desc = 1
	}
	return t.g.intern(ir.OpArgsort, dtype.U32, t.n.Shape, []*ir.Node{t.n}, []float64{desc}, nil, "")
}

// Sort returns the last dim sorted (values) and the indices that sort it.
func (t *Tensor) Sort(descending bool) (values, indices *Tensor) {
	idx := t.Argsort(descending)
	if idx.err != nil {
		return idx, idx
	}
	return t.Gather(idx, -1), idx
}

package graph

import (
	"slices"

	"github.com/loomgraph/loom/ir"
)

// view records a view of t with layout l, where l addresses t's own logical
// elements. Chains of views are composed into one View of the base buffer:
// l is rewritten to address the base through t's layout.
func (t *Tensor) view(op string, l ir.Layout) *Tensor {
	base, bl := t.n.Base()
	composed, ok := compose(bl, l)
	if !ok {
		// t's layout cannot be expressed under l (a reshape of a
		// non-contiguous view): materialise t first.
		c := t.g.intern(ir.OpCopy, t.n.DType, t.n.Shape, []*ir.Node{t.n}, nil, nil, "")
		base, composed = c.n, l
	}
	if composed.IsIdentity() && slices.Equal(composed.Dims, base.Shape) {
		return &Tensor{g: t.g, n: base}
	}
	return t.g.intern(ir.OpView, base.DType, composed.Dims, []*ir.Node{base}, nil, &composed, "")
}

// compose returns the layout that reads, through outer (t's own view of its
// base), the elements that l reads from t's logical contiguous order. It
// succeeds when l is a strided layout over t's dims expressible by strides
// over outer: always when outer is contiguous; otherwise when l only
// permutes, narrows, broadcasts or inserts/removes unit dims of t, which the
// builder expresses by giving l the dims of t with t-relative strides.
func compose(outer, l ir.Layout) (ir.Layout, bool) {
	if outer.IsContiguous() {
		// Base-relative = l shifted by outer's offset (strides unchanged,
		// since t's logical order is its base order).
		out := l.Clone()
		out.Offset += outer.Offset
		return out, true
	}
	// l addresses t's logical elements with contiguous strides of t's dims.
	// Map each of l's strides back to a combination of t's dims: this works
	// when each l stride is 0 or exactly the contiguous stride of one of t's
	// dims (true for permute, narrow, broadcast, unsqueeze, squeeze).
	tc := ir.Contiguous(outer.Dims)
	out := ir.Layout{Dims: slices.Clone(l.Dims), Strides: make([]int, len(l.Dims)), Offset: outer.Offset}
	// Offset: decompose l.Offset into t's coordinates.
	rem := l.Offset
	for d := range outer.Dims {
		if tc.Strides[d] == 0 {
			continue
		}
		c := rem / tc.Strides[d]
		rem -= c * tc.Strides[d]
		out.Offset += c * outer.Strides[d]
	}
	for k, s := range l.Strides {
		if s == 0 || l.Dims[k] == 1 {
			continue
		}
		d := -1
		for j := range outer.Dims {
			if tc.Strides[j] == s && outer.Dims[j] > 1 {
				d = j
				break
			}
		}
		if d < 0 {
			return ir.Layout{}, false
		}
		out.Strides[k] = outer.Strides[d]
	}
	return out, true
}

// self is t's logical contiguous layout, the starting point of every view.
func (t *Tensor) self() ir.Layout { return ir.Contiguous(t.n.Shape) }

// ready returns false (and the tensor to return) when t cannot take an op.
func (t *Tensor) ready(op string) (*Tensor, bool) {
	if err := t.bad(op); err != nil {
		if t != nil && t.err == err {
			return t, false
		}
		return &Tensor{err: err}, false
	}
	switch {
	case t.n == nil:
		return &Tensor{err: opErr(op, "needs a typed tensor, got an untyped scalar")}, false
	}
	return nil, true
}

func (t *Tensor) normDim(op string, dim, rank int) (int, error) {
	if dim < 0 {
		dim += rank
	}
	if dim < 0 || dim >= rank {
		return 0, opErr(op, "dim %d out of range for %v%v", dim, t.n.DType, t.n.Shape)
	}
	return dim, nil
}

// Reshape views t with new dims (one may be -1, inferred). A reshape of a
// non-contiguous view copies first.
func (t *Tensor) Reshape(dims ...int) *Tensor {
	if r, ok := t.ready("reshape"); !ok {
		return r
	}
	dims = slices.Clone(dims)
	infer, known := -1, 1
	for i, d := range dims {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			return t.g.fail(opErr("reshape", "bad dims %v for %v%v", dims, t.n.DType, t.n.Shape))
		}
	}
	// The known dims must multiply without overflow before they are
	// compared with t's element count.
	known1 := slices.Clone(dims)
	if infer >= 0 {
		known1[infer] = 1
	}
	if err := ir.CheckShape(t.n.DType, known1); err != nil {
		return t.g.fail(opErr("reshape", "dims %v for %v%v: %v", dims, t.n.DType, t.n.Shape, err))
	}
	known = ir.Numel(known1)
	n := t.n.Numel()
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			return t.g.fail(opErr("reshape", "cannot infer -1 in %v for %v%v", dims, t.n.DType, t.n.Shape))
		}
		dims[infer] = n / known
		known *= dims[infer]
	}
	if known != n {
		return t.g.fail(opErr("reshape", "%v%v has %d elements, shape %v has %d", t.n.DType, t.n.Shape, n, dims, known))
	}
	base, bl := t.n.Base()
	if l, ok := bl.Reshape(dims); ok {
		if l.IsIdentity() && slices.Equal(dims, base.Shape) {
			return &Tensor{g: t.g, n: base}
		}
		return t.g.intern(ir.OpView, base.DType, dims, []*ir.Node{base}, nil, &l, "")
	}
	c := t.Contiguous()
	l := ir.Contiguous(dims)
	return c.g.intern(ir.OpView, c.n.DType, dims, []*ir.Node{c.n}, nil, &l, "")
}

// Contiguous returns t itself if it is already a contiguous buffer, else a
// copy into a fresh row-major buffer.
func (t *Tensor) Contiguous() *Tensor {
	if r, ok := t.ready("contiguous"); !ok {
		return r
	}
	if t.n.Op != ir.OpView {
		return t
	}
	return t.g.intern(ir.OpCopy, t.n.DType, t.n.Shape, []*ir.Node{t.n}, nil, nil, "")
}

// Permute reorders dims: result dim k is t's dim perm[k] (negative entries
// count from the end).
func (t *Tensor) Permute(perm ...int) *Tensor {
	if r, ok := t.ready("permute"); !ok {
		return r
	}
	p := slices.Clone(perm)
	for i := range p {
		if p[i] < 0 {
			p[i] += t.Rank()
		}
	}
	l, err := t.self().Permute(p)
	if err != nil {
		return t.g.fail(opErr("permute", "%v of %v%v: %v", perm, t.n.DType, t.n.Shape, err))
	}
	return t.view("permute", l)
}

// Transpose swaps two dims.
func (t *Tensor) Transpose(a, b int) *Tensor {
	if r, ok := t.ready("transpose"); !ok {
		return r
	}
	da, err := t.normDim("transpose", a, t.Rank())
	if err != nil {
		return t.g.fail(err)
	}
	db, err := t.normDim("transpose", b, t.Rank())
	if err != nil {
		return t.g.fail(err)
	}
	p := make([]int, t.Rank())
	for i := range p {
		p[i] = i
	}
	p[da], p[db] = p[db], p[da]
	return t.Permute(p...)
}

// T transposes the last two dims.
func (t *Tensor) T() *Tensor { return t.Transpose(-2, -1) }

// Narrow keeps n elements of dim starting at start.
func (t *Tensor) Narrow(dim, start, n int) *Tensor { return t.narrow("narrow", dim, start, n) }

func (t *Tensor) narrow(op string, dim, start, n int) *Tensor {
	if r, ok := t.ready(op); !ok {
		return r
	}
	d, err := t.normDim(op, dim, t.Rank())
	if err != nil {
		return t.g.fail(err)
	}
	l, err := t.self().Narrow(d, start, n)
	if err != nil {
		return t.g.fail(opErr(op, "%v%v: %v", t.n.DType, t.n.Shape, err))
	}
	return t.view(op, l)
}

// Slice keeps [start, end) of dim (Narrow by bounds).
func (t *Tensor) Slice(dim, start, end int) *Tensor {
	if r, ok := t.ready("slice"); !ok {
		return r
	}
	// end-start must not wrap: with 0 ≤ start ≤ end it cannot.
	if start < 0 || end < start {
		return t.g.fail(opErr("slice", "range [%d, %d) of dim %d is not 0 ≤ start ≤ end, for %v%v", start, end, dim, t.n.DType, t.n.Shape))
	}
	return t.narrow("slice", dim, start, end-start)
}

// BroadcastTo expands t to dims with numpy rules (stride 0, no copy).
func (t *Tensor) BroadcastTo(dims ...int) *Tensor {
	if r, ok := t.ready("broadcast"); !ok {
		return r
	}
	return t.broadcastTo("broadcast", dims)
}

func (t *Tensor) broadcastTo(op string, dims []int) *Tensor {
	if r, ok := t.ready(op); !ok {
		return r
	}
	if slices.Equal(t.n.Shape, dims) {
		return t
	}
	if err := ir.CheckShape(t.n.DType, dims); err != nil {
		return t.g.fail(opErr(op, "%v%v to %v: %v", t.n.DType, t.n.Shape, dims, err))
	}
	l, err := t.self().BroadcastTo(dims)
	if err != nil {
		return t.g.fail(opErr(op, "%v%v: %v", t.n.DType, t.n.Shape, err))
	}
	return t.view(op, l)
}

// Unsqueeze inserts a dim of size 1 at dim (negative counts from rank+1).
func (t *Tensor) Unsqueeze(dim int) *Tensor {
	if r, ok := t.ready("unsqueeze"); !ok {
		return r
	}
	d, err := t.normDim("unsqueeze", dim, t.Rank()+1)
	if err != nil {
		return t.g.fail(err)
	}
	l, _ := t.self().Unsqueeze(d)
	return t.view("unsqueeze", l)
}

// Squeeze removes dim, which must have size 1.
func (t *Tensor) Squeeze(dim int) *Tensor {
	if r, ok := t.ready("squeeze"); !ok {
		return r
	}
	d, err := t.normDim("squeeze", dim, t.Rank())
	if err != nil {
		return t.g.fail(err)
	}
	l, err := t.self().Squeeze(d)
	if err != nil {
		return t.g.fail(opErr("squeeze", "%v%v: %v", t.n.DType, t.n.Shape, err))
	}
	return t.view("squeeze", l)
}

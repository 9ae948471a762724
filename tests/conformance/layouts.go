package conformance

import (
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// A layout builds an operand of a given logical shape that the kernel reads
// through a particular strided view of an input, together with its
// reference values (computed by index arithmetic on the input's values).
type layout struct {
	name    string
	minRank int // the layout degenerates to contiguous below this rank
	build   func(c *tcase, name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals)
}

// The standard logical shape: 4551 elements, more than one 4096-element CPU
// tile, with odd dims so that tile boundaries fall inside rows.
var stdShape = []int{3, 41, 37}

func reversed(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = n - 1 - i
	}
	return p
}

func with(shape []int, dim, size int) []int {
	s := slices.Clone(shape)
	s[dim] = size
	return s
}

var (
	contig = layout{"contiguous", 0, func(c *tcase, name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals) {
		return c.input(name, dt, shape, g)
	}}
	// permuted: the input holds the dims in reverse order; Permute restores
	// them, so every stride is "wrong".
	permuted = layout{"permuted", 2, func(c *tcase, name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals) {
		perm := reversed(len(shape))
		in := make([]int, len(shape))
		for k, p := range perm {
			in[k] = shape[p]
		}
		x, v := c.input(name, dt, in, g)
		return x.Permute(perm...), v.permute(perm)
	}}
	// transposed: the last two dims swapped.
	transposed = layout{"transposed", 2, func(c *tcase, name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals) {
		r := len(shape)
		in := with(with(shape, r-1, shape[r-2]), r-2, shape[r-1])
		x, v := c.input(name, dt, in, g)
		return x.Transpose(-2, -1), v.transpose(r-2, r-1)
	}}
	// narrowed: a window of the last dim: gaps between rows and an offset.
	narrowed = layout{"narrowed", 1, func(c *tcase, name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals) {
		r := len(shape)
		x, v := c.input(name, dt, with(shape, r-1, shape[r-1]+5), g)
		return x.Narrow(-1, 2, shape[r-1]), v.narrow(r-1, 2, shape[r-1])
	}}
	// offset: a window of the first dim: contiguous, at an offset.
	offset = layout{"offset", 1, func(c *tcase, name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals) {
		x, v := c.input(name, dt, with(shape, 0, shape[0]+2), g)
		return x.Narrow(0, 1, shape[0]), v.narrow(0, 1, shape[0])
	}}
	// broadcast: every other dim (from the first) has size 1 in the input.
	broadcast = layout{"broadcast", 1, func(c *tcase, name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals) {
		in := slices.Clone(shape)
		for d := 0; d < len(in); d += 2 {
			in[d] = 1
		}
		x, v := c.input(name, dt, in, g)
		return x.BroadcastTo(shape...), v.broadcast(shape)
	}}
	// lead: only the last dim exists in the input (new leading dims).
	lead = layout{"lead", 2, func(c *tcase, name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals) {
		x, v := c.input(name, dt, shape[len(shape)-1:], g)
		return x.BroadcastTo(shape...), v.broadcast(shape)
	}}
	// splat: a rank-0 input broadcast to the whole shape.
	splat = layout{"splat", 1, func(c *tcase, name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals) {
		x, v := c.input(name, dt, nil, g)
		return x.BroadcastTo(shape...), v.broadcast(shape)
	}}
	// chain: narrow, permute, unsqueeze and broadcast composed into one
	// view: the input holds shape[1:] reversed with the first dim padded.
	chain = layout{"chain", 2, func(c *tcase, name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals) {
		tail := shape[1:]
		perm := reversed(len(tail))
		in := make([]int, len(tail))
		for k, p := range perm {
			in[k] = tail[p]
		}
		last := tail[len(tail)-1]
		in[0] = last + 3
		x, v := c.input(name, dt, in, g)
		xt := x.Narrow(0, 2, last).Permute(perm...).Unsqueeze(0).BroadcastTo(shape...)
		vt := v.narrow(0, 2, last).permute(perm).reshape(append([]int{1}, tail...)).broadcast(shape)
		return xt, vt
	}}
)

// operand describes one argument of an op: a layout over a shape, or an
// untyped scalar constant.
type operand struct {
	l        layout
	shape    []int
	isScalar bool
	scalar   float64
}

func opd(l layout, shape ...int) operand { return operand{l: l, shape: shape} }
func scalarOpd(v float64) operand        { return operand{isScalar: true, scalar: v} }

func (o operand) String() string {
	if o.isScalar {
		return "scalar"
	}
	return o.l.name
}

// build makes the operand; a layout below its rank falls back to contiguous.
func (o operand) build(c *tcase, name string, dt dtype.DType, g gen) (*graph.Tensor, vals) {
	if o.isScalar {
		v := newVals(dt, nil)
		f, i := scalarTo(dt, o.scalar)
		if dt.IsFloat() {
			v.f[0] = f
		} else {
			v.i[0] = i
		}
		return graph.Scalar(o.scalar), v
	}
	l := o.l
	if len(o.shape) < l.minRank {
		l = contig
	}
	return l.build(c, name, dt, o.shape, g)
}

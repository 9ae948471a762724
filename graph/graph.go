package graph

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// Graph records a lazy tensor program. It is safe for concurrent use.
type Graph struct {
	mu   sync.Mutex
	ir   *ir.Graph
	errs []error
}

// New returns an empty graph.
func New() *Graph { return &Graph{ir: ir.NewGraph()} }

// Tensor is a lazy value in a Graph: a node, an untyped scalar, or an error.
type Tensor struct {
	g      *Graph
	n      *ir.Node
	scalar *float64 // untyped scalar (g and n are nil)
	err    error
}

// Scalar returns an untyped constant; it takes the dtype of the tensor it is
// combined with and broadcasts to its shape.
func Scalar(v float64) *Tensor { return &Tensor{scalar: &v} }

// Err returns the error this tensor carries, if any. A nil or zero Tensor
// (not made by a Graph or Scalar) is itself an error.
func (t *Tensor) Err() error {
	if err := t.bad("tensor"); err != nil {
		return err
	}
	return t.err
}

// bad returns the error t carries, or an error naming op when t is nil or a
// zero Tensor; nil when t can be used.
func (t *Tensor) bad(op string) error {
	switch {
	case t == nil:
		return opErr(op, "nil tensor")
	case t.err != nil:
		return t.err
	case t.n == nil && t.scalar == nil:
		return opErr(op, "zero Tensor (not made by a Graph or Scalar)")
	}
	return nil
}

// DType returns the tensor's dtype (Invalid for an untyped scalar or an error).
func (t *Tensor) DType() dtype.DType {
	if t == nil || t.n == nil {
		return dtype.Invalid
	}
	return t.n.DType
}

// Shape returns the tensor's dims (nil for an error, [] for a scalar).
func (t *Tensor) Shape() []int {
	if t == nil || t.n == nil {
		if t != nil && t.scalar != nil {
			return []int{}
		}
		return nil
	}
	return slices.Clone(t.n.Shape)
}

// Rank is the number of dims.
func (t *Tensor) Rank() int { return len(t.Shape()) }

// Node exposes the IR node (nil for scalars and errors).
func (t *Tensor) Node() *ir.Node {
	if t == nil {
		return nil
	}
	return t.n
}

// Graph returns the graph the tensor belongs to.
func (t *Tensor) Graph() *Graph {
	if t == nil {
		return nil
	}
	return t.g
}

func (t *Tensor) String() string {
	if err := t.bad("tensor"); err != nil {
		return "Tensor(error: " + err.Error() + ")"
	}
	switch {
	case t.n == nil:
		return fmt.Sprintf("Scalar(%g)", *t.scalar)
	}
	return fmt.Sprintf("Tensor(%v%v)", t.n.DType, t.n.Shape)
}

// IR returns the underlying IR graph (read-only use: dumps, tests).
func (g *Graph) IR() *ir.Graph {
	if g == nil {
		return nil
	}
	return g.ir
}

// usable returns an error naming op when g is nil or a zero Graph (not made
// by New), which has no IR to build into.
func (g *Graph) usable(op string) error {
	switch {
	case g == nil:
		return opErr(op, "nil graph")
	case g.ir == nil:
		return opErr(op, "zero Graph: make graphs with graph.New")
	}
	return nil
}

// Err returns every error recorded while building, joined.
func (g *Graph) Err() error {
	if g == nil {
		return g.usable("graph")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ir == nil {
		return errors.Join(append([]error{g.usable("graph")}, g.errs...)...)
	}
	return errors.Join(g.errs...)
}

// record adds err to the graph's errors unless it is there already: errors
// made where no graph was known (ops on untyped scalars, operands from two
// graphs) reach the graph when the tensor carrying them is used as an output.
func (g *Graph) record(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, e := range g.errs {
		if e == err {
			return
		}
	}
	g.errs = append(g.errs, err)
}

// fail records an error against the graph and returns a tensor carrying it
// (only returns it when g is nil).
func (g *Graph) fail(err error) *Tensor {
	if g == nil {
		return &Tensor{err: err}
	}
	g.record(err) // once: it may be an operand's error, recorded already
	return &Tensor{g: g, err: err}
}

func opErr(op string, format string, a ...any) error {
	return fmt.Errorf("loom: %s: %s", op, fmt.Sprintf(format, a...))
}

// intern adds a node under the graph's lock. Every node's shape passes
// checkShape here: the builders check the shapes they are given, and this
// catches every shape an op computes (a broadcast, a concatenation, a
// matrix product), naming the IR op.
func (g *Graph) intern(op ir.Op, dt dtype.DType, shape []int, args []*ir.Node, params []float64, layout *ir.Layout, name string) *Tensor {
	if err := checkShape(op.String(), dt, shape); err != nil {
		return g.fail(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return &Tensor{g: g, n: g.ir.Intern(op, dt, shape, args, params, layout, name)}
}

// checkShape checks a shape the builder is about to give a node of dtype
// dt (ir.CheckShape: no negative dim, a byte count that fits an int),
// naming op.
func checkShape(op string, dt dtype.DType, shape []int) error {
	if err := ir.CheckShape(dt, shape); err != nil {
		return opErr(op, "%v", err)
	}
	return nil
}

// Input declares a named input of a dtype and shape.
func (g *Graph) Input(name string, dt dtype.DType, shape ...int) *Tensor {
	if err := g.usable("input"); err != nil {
		return g.fail(err)
	}
	switch {
	case name == "":
		return g.fail(opErr("input", "empty name"))
	case !dt.Valid():
		return g.fail(opErr("input", "%q: invalid dtype %v", name, dt))
	}
	if err := ir.CheckShape(dt, shape); err != nil {
		return g.fail(opErr("input", "%q: %v", name, err))
	}
	// Check and intern under one lock: two goroutines declaring the same
	// name must not both succeed.
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range g.ir.Inputs() {
		if n.Name == name {
			err := opErr("input", "name %q declared twice (%v%v and %v%v)", name, n.DType, n.Shape, dt, shape)
			g.errs = append(g.errs, err)
			return &Tensor{g: g, err: err}
		}
	}
	return &Tensor{g: g, n: g.ir.Intern(ir.OpInput, dt, shape, nil, nil, nil, name)}
}

// Full returns a tensor of the given dtype and shape with every element v
// (converted to dt like a cast).
func (g *Graph) Full(dt dtype.DType, v float64, shape ...int) *Tensor {
	if err := g.usable("full"); err != nil {
		return g.fail(err)
	}
	if !dt.Valid() {
		return g.fail(opErr("full", "invalid dtype %v", dt))
	}
	if err := checkShape("full", dt, shape); err != nil {
		return g.fail(err)
	}
	// A full tensor is a scalar broadcast: one node per (dtype, value).
	s := g.intern(ir.OpFull, dt, nil, nil, []float64{v}, nil, "")
	return s.broadcastTo("full", shape)
}

// Zeros is Full(dt, 0, shape...).
func (g *Graph) Zeros(dt dtype.DType, shape ...int) *Tensor { return g.Full(dt, 0, shape...) }

// Ones is Full(dt, 1, shape...).
func (g *Graph) Ones(dt dtype.DType, shape ...int) *Tensor { return g.Full(dt, 1, shape...) }

// Arange returns start + i·step for i = 0, 1, … while the value (computed
// in f64) is strictly before stop, converted to dt.
func (g *Graph) Arange(dt dtype.DType, start, stop, step float64) *Tensor {
	if err := g.usable("arange"); err != nil {
		return g.fail(err)
	}
	if !dt.Valid() {
		return g.fail(opErr("arange", "invalid dtype %v", dt))
	}
	if step == 0 || step != step || start != start || stop != stop {
		return g.fail(opErr("arange", "bad range start=%g stop=%g step=%g", start, stop, step))
	}
	count := 0.0
	if q := (stop - start) / step; q > 0 {
		count = math.Ceil(q)
	}
	if count > 1<<40 { // also catches +Inf
		return g.fail(opErr("arange", "[%g, %g) in steps of %g has %g elements: too many", start, stop, step, count))
	}
	// The elements are start + i·step (in f64) strictly before stop: the
	// quotient's rounding can make ceil one off either way, so check.
	before := func(i int) bool {
		v := start + float64(i)*step
		return step > 0 && v < stop || step < 0 && v > stop
	}
	n := int(count)
	for n > 0 && !before(n-1) {
		n--
	}
	for before(n) {
		n++
	}
	return g.intern(ir.OpArange, dt, []int{n}, nil, []float64{start, step}, nil, "")
}

// Output names a result of the graph. Outputs are always fresh contiguous
// buffers: an input, a constant or a view that reorders elements is copied;
// a reshape of a computed value (such as a reduction with its reduced dims
// dropped) is not, since the value's buffer already holds it in order.
func (g *Graph) Output(name string, t *Tensor) {
	if err := g.usable("output"); err != nil {
		if g != nil {
			g.record(err)
		}
		return
	}
	if err := t.bad("output"); err != nil {
		g.record(err)
		return
	}
	if t.n == nil {
		g.fail(opErr("output", "%q: an untyped scalar cannot be an output; use Full", name))
		return
	}
	if t.g != g {
		g.fail(opErr("output", "%q: tensor belongs to another graph", name))
		return
	}
	n := t.n
	base, l := n.Base()
	reshape := n.Op == ir.OpView && l.IsIdentity() && l.Numel() == base.Numel()
	if base.Op == ir.OpInput || base.Op == ir.OpFull || (n.Op == ir.OpView && !reshape) {
		n = g.intern(ir.OpCopy, n.DType, n.Shape, []*ir.Node{n}, nil, nil, "").n
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range g.ir.Outputs {
		if o.Name == name {
			g.errs = append(g.errs, opErr("output", "name %q used twice", name))
			return
		}
	}
	if name == "" {
		g.errs = append(g.errs, opErr("output", "empty name"))
		return
	}
	g.ir.Outputs = append(g.ir.Outputs, ir.Output{Name: name, Node: n})
}

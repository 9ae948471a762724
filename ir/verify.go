package ir

import (
	"errors"

	"fmt"
	"github.com/loomgraph/loom/dtype"
	"slices"
)

// Verify checks the graph's invariants and returns every violation found:
//   - nodes are in topological order with dense IDs, and interned (no two
//     nodes share a key);
//   - each node matches its op's row: arity, parameter count, dtype rule;
//   - elementwise args have the node's shape (broadcasts are views);
//   - a matmul's args are [batch..., M, K] and [batch..., K, N] of its
//     dtype, with exactly its batch dims (broadcasts are views);
//   - a view reads a non-view argument, its layout's dims are its shape,
//     strides are non-negative and every address is inside the argument;
//   - inputs have unique non-empty names, outputs have unique names and
//     belong to the graph.
func Verify(g *Graph) error {
	var errs []error
	bad := func(n *Node, format string, a ...any) {
		errs = append(errs, fmt.Errorf("ir: node %v: %s", n, fmt.Sprintf(format, a...)))
	}
	seen := map[string]bool{}
	inputs := map[string]bool{}
	for i, n := range g.Nodes {
		if n.ID != i {
			bad(n, "has ID %d at position %d", n.ID, i)
		}
		info := n.Info()
		if n.Op == OpInvalid || n.Op >= NumOps {
			bad(n, "invalid op %d", n.Op)
			continue
		}
		k := key(n.Op, n.DType, n.Shape, n.Args, n.Params, n.Layout, n.Name)
		if seen[k] {
			bad(n, "duplicates an earlier node (not interned)")
		}
		seen[k] = true
		if len(n.Args) != info.Arity && !(info.Arity < 0 && len(n.Args) > 0) {
			bad(n, "has %d args, op %s takes %d", len(n.Args), n.Op, info.Arity)
			continue
		}
		if len(n.Params) != len(info.Params) {
			bad(n, "has %d params, op %s takes %v", len(n.Params), n.Op, info.Params)
		}
		for _, a := range n.Args {
			if a == nil {
				bad(n, "has a nil arg")
				continue
			}
			if a.ID >= n.ID || a.ID < 0 || g.Nodes[a.ID] != a {
				bad(n, "arg %v is not an earlier node of this graph", a)
			}
		}
		if !n.DType.Valid() {
			bad(n, "invalid dtype")
		}
		if err := CheckShape(n.DType, n.Shape); err != nil {
			bad(n, "%v", err)
			continue
		}
		switch info.Class {
		case ClassSource:
			if n.Op == OpInput && n.Name == "" {
				bad(n, "input without a name")
			}
			if n.Op == OpInput {
				if inputs[n.Name] {
					bad(n, "input name %q used twice", n.Name)
				}
				inputs[n.Name] = true
			}
			if n.Op == OpArange && len(n.Shape) != 1 {
				bad(n, "arange must be 1-D, has shape %v", n.Shape)
			}
			if n.Op.IsRandom() {
				verifyRand(n, bad)
			}
		case ClassView:
			verifyView(n, bad)
		case ClassElementwise:
			verifyElementwise(n, info, bad)
		case ClassReduce:
			verifyReduce(n, info, bad)
		case ClassIndex:
			if n.Op == OpAttention {
				verifyAttention(n, bad)
				break
			}
			verifyIndex(n, info, bad)
		case ClassMatmul:
			verifyMatmul(n, info, bad)
		case ClassWindow:
			verifyWindow(n, info, bad)
		case ClassQuant:
			verifyQuant(n, bad)
		case ClassCollective:
			verifyCollective(n, bad)
		}
	}
	if cyc := findCycle(g); cyc != nil {
		path := ""
		for _, n := range cyc {
			path += fmt.Sprintf("%v → ", n)
		}
		bad(cyc[0], "is on a cycle: %s%v", path, cyc[0])
	}
	outs := map[string]bool{}
	for _, o := range g.Outputs {
		if o.Name == "" || outs[o.Name] {
			errs = append(errs, fmt.Errorf("ir: output name %q empty or used twice", o.Name))
		}
		outs[o.Name] = true
		if o.Node == nil || o.Node.ID >= len(g.Nodes) || g.Nodes[o.Node.ID] != o.Node {
			errs = append(errs, fmt.Errorf("ir: output %q is not a node of this graph", o.Name))
		}
	}
	return errors.Join(errs...)
}

// findCycle returns the nodes of a cycle reachable from g's nodes or
// outputs through Args (in arg order, first node not repeated), or nil. It
// walks with an explicit stack: a graph rewired through Graph.IR may hold a
// cycle, and recursion (as Rebuild does) would never end.
func findCycle(g *Graph) []*Node {
	const (
		unseen = iota
		open   // on the current path
		done
	)
	state := map[*Node]int{}
	type frame struct {
		n    *Node
		next int // index of the next arg to visit
	}
	var roots []*Node
	roots = append(roots, g.Nodes...)
	for _, o := range g.Outputs {
		roots = append(roots, o.Node)
	}
	for _, r := range roots {
		if r == nil || state[r] != unseen {
			continue
		}
		stack := []frame{{n: r}}
		state[r] = open
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(top.n.Args) {
				state[top.n] = done
				stack = stack[:len(stack)-1]
				continue
			}
			a := top.n.Args[top.next]
			top.next++
			switch {
			case a == nil || state[a] == done:
			case state[a] == open:
				var cyc []*Node
				for i := len(stack) - 1; i >= 0; i-- {
					cyc = append(cyc, stack[i].n)
					if stack[i].n == a {
						break
					}
				}
				slices.Reverse(cyc)
				return cyc
			default:
				state[a] = open
				stack = append(stack, frame{n: a})
			}
		}
	}
	return nil
}

func verifyView(n *Node, bad func(*Node, string, ...any)) {
	a := n.Args[0]
	if a.Op == OpView {
		bad(n, "views a view (chains must be composed)")
	}
	if n.Layout == nil {
		bad(n, "view without a layout")
		return
	}
	l := *n.Layout
	if !slices.Equal(l.Dims, n.Shape) || len(l.Strides) != len(l.Dims) {
		bad(n, "layout %v does not match shape %v", l, n.Shape)
		return
	}
	if n.DType != a.DType {
		bad(n, "view changes dtype %v to %v", a.DType, n.DType)
	}
	for _, s := range l.Strides {
		if s < 0 {
			bad(n, "negative stride in %v", l)
		}
	}
	if lo, hi := l.Span(); l.Numel() > 0 && (lo < 0 || hi > a.Numel()) {
		bad(n, "layout %v addresses [%d, %d) outside its argument's %d elements", l, lo, hi, a.Numel())
	}
}

func verifyElementwise(n *Node, info *OpInfo, bad func(*Node, string, ...any)) {
	for _, a := range n.Args {
		if !slices.Equal(a.Shape, n.Shape) {
			bad(n, "arg %v has shape %v, want %v (broadcasts must be views)", a, a.Shape, n.Shape)
		}
	}
	first := info.ValueArgs()
	if info.Cond && !IDDTypes.Has(n.Args[0].DType) {
		bad(n, "condition dtype %v not in {%v}", n.Args[0].DType, IDDTypes)
	}
	in := n.Args[first].DType
	for _, a := range n.Args[first:] {
		if a.DType != in {
			bad(n, "value args mix dtypes %v and %v", in, a.DType)
		}
	}
	if !info.In.Has(in) {
		bad(n, "dtype %v not supported by %s (supports %v)", in, n.Op, info.In)
	}
	if info.Out != OutDeclared && n.DType != info.OutDType(in) {
		bad(n, "output dtype %v, rule gives %v", n.DType, info.OutDType(in))
	}
}

func verifyReduce(n *Node, info *OpInfo, bad func(*Node, string, ...any)) {
	a := n.Args[0]
	k := int(n.Params[0])
	if k < 1 || k > len(a.Shape) || float64(k) != n.Params[0] {
		bad(n, "reduces %v trailing axes of %v%v", n.Params[0], a.DType, a.Shape)
		return
	}
	if (n.Op == OpArgmax || n.Op == OpArgmin) && k != 1 {
		bad(n, "%s reduces exactly one axis, not %d", n.Op, k)
	}
	want := slices.Clone(a.Shape)
	for d := len(want) - k; d < len(want); d++ {
		want[d] = 1
	}
	if !slices.Equal(n.Shape, want) {
		bad(n, "shape %v, reducing %d trailing axes of %v gives %v", n.Shape, k, a.Shape, want)
	}
	if n.DType != info.OutDType(a.DType) {
		bad(n, "output dtype %v, rule gives %v", n.DType, info.OutDType(a.DType))
	}
}

// verifyIndex checks the dtype rules of indexing ops: ids in IDDTypes, the
// value arguments sharing the output's dtype (argsort: u32 output). Shape
// rules are checked by the builder, which states them per op.
func verifyIndex(n *Node, info *OpInfo, bad func(*Node, string, ...any)) {
	ids := info.IDArg()
	for i, a := range n.Args {
		switch {
		case i == ids:
			if !IDDTypes.Has(a.DType) {
				bad(n, "ids dtype %v not in {%v}", a.DType, IDDTypes)
			}
		case n.Op == OpArgsort:
			if n.DType != dtype.U32 {
				bad(n, "argsort must produce u32, not %v", n.DType)
			}
		case a.DType != n.DType:
			bad(n, "value arg %v has dtype %v, output %v", a, a.DType, n.DType)
		}
	}
	dim := int(n.Params[0])
	if n.Op != OpArgsort && (dim < 0 || dim >= len(n.Shape)) {
		bad(n, "dim %v out of range for rank %d", n.Params[0], len(n.Shape))
	}
	if n.Op == OpCumsum {
		verifyCumsum(n, bad)
	}
}

// verifyMatmul checks a matmul: two float args of the output's dtype, rank
// ≥ 2, the output's batch dims on both (the builder broadcasts them with
// views), inner dims equal and the output [batch..., M, N].
func verifyMatmul(n *Node, info *OpInfo, bad func(*Node, string, ...any)) {
	a, b := n.Args[0], n.Args[1]
	if a.DType != n.DType || b.DType != n.DType {
		bad(n, "args %v%v and %v%v, output dtype %v: dtypes must match", a.DType, a.Shape, b.DType, b.Shape, n.DType)
	}
	if !info.In.Has(n.DType) {
		bad(n, "dtype %v not supported by %s (supports %v)", n.DType, n.Op, info.In)
	}
	r := len(n.Shape)
	if r < 2 || len(a.Shape) != r || len(b.Shape) != r {
		bad(n, "args %v and %v, output %v: want rank ≥ 2, all equal (batch broadcasts are views)", a.Shape, b.Shape, n.Shape)
		return
	}
	batch := n.Shape[:r-2]
	m, k, k2, nn := a.Shape[r-2], a.Shape[r-1], b.Shape[r-2], b.Shape[r-1]
	if !slices.Equal(a.Shape[:r-2], batch) || !slices.Equal(b.Shape[:r-2], batch) {
		bad(n, "args %v and %v do not have the output's batch dims %v", a.Shape, b.Shape, batch)
	}
	if k != k2 {
		bad(n, "inner dims differ: %v · %v", a.Shape, b.Shape)
	}
	if n.Shape[r-2] != m || n.Shape[r-1] != nn {
		bad(n, "output %v, args %v · %v give [%d %d] matrices", n.Shape, a.Shape, b.Shape, m, nn)
	}
}

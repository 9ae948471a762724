package ir

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/loomgraph/loom/dtype"
)

// Node is one immutable operation in a Graph. Fields are set once by
// Graph.Intern and never changed.
type Node struct {
	ID     int         // dense index in Graph.Nodes
	Op     Op          // row in the op table
	DType  dtype.DType // output dtype
	Shape  []int       // output dims
	Args   []*Node
	Params []float64 // named by Op.Info().Params
	Layout *Layout   // OpView only: how Args[0]'s buffer is read
	Name   string    // OpInput only
}

// Numel is the number of output elements.
func (n *Node) Numel() int { return Numel(n.Shape) }

// Info is shorthand for n.Op.Info().
func (n *Node) Info() *OpInfo { return n.Op.Info() }

// Base returns the node whose buffer n reads (n itself unless n is a view)
// and the layout it reads that buffer through.
func (n *Node) Base() (*Node, Layout) {
	if n.Op == OpView {
		return n.Args[0], *n.Layout
	}
	return n, Contiguous(n.Shape)
}

func (n *Node) String() string {
	return fmt.Sprintf("%%%d %s %v%v", n.ID, n.Op, n.DType, n.Shape)
}

// Output is a named graph output.
type Output struct {
	Name string
	Node *Node
}

// Graph owns interned nodes in topological order (every node's args have
// smaller IDs) and the named outputs.
type Graph struct {
	Nodes   []*Node
	Outputs []Output
	intern  map[string]*Node
}

// NewGraph returns an empty graph.
func NewGraph() *Graph { return &Graph{intern: map[string]*Node{}} }

// key encodes everything that makes a node what it is. Params are compared
// by their bits, so 0.0 and -0.0 (and distinct NaN payloads) stay distinct.
func key(op Op, dt dtype.DType, shape []int, args []*Node, params []float64, layout *Layout, name string) string {
	b := make([]byte, 0, 64)
	b = binary.AppendUvarint(b, uint64(op))
	b = append(b, byte(dt))
	b = appendInts(b, shape)
	b = binary.AppendUvarint(b, uint64(len(args)))
	for _, a := range args {
		b = binary.AppendUvarint(b, uint64(a.ID))
	}
	b = binary.AppendUvarint(b, uint64(len(params)))
	for _, p := range params {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p))
	}
	if layout != nil {
		b = append(b, 1)
		b = appendInts(b, layout.Dims)
		b = appendInts(b, layout.Strides)
		b = binary.AppendVarint(b, int64(layout.Offset))
	}
	return string(append(b, name...))
}

func appendInts(b []byte, xs []int) []byte {
	b = binary.AppendUvarint(b, uint64(len(xs)))
	for _, x := range xs {
		b = binary.AppendVarint(b, int64(x))
	}
	return b
}

// Intern returns the node with these fields, creating it if it is new. It
// does not check the op's rules: builders check before interning and Verify
// checks the whole graph. Slices are copied.
func (g *Graph) Intern(op Op, dt dtype.DType, shape []int, args []*Node, params []float64, layout *Layout, name string) *Node {
	k := key(op, dt, shape, args, params, layout, name)
	if n, ok := g.intern[k]; ok {
		return n
	}
	n := &Node{ID: len(g.Nodes), Op: op, DType: dt, Shape: slices.Clone(shape), Args: slices.Clone(args), Params: slices.Clone(params), Name: name}
	if n.Shape == nil {
		n.Shape = []int{}
	}
	if layout != nil {
		l := layout.Clone()
		n.Layout = &l
	}
	g.Nodes = append(g.Nodes, n)
	g.intern[k] = n
	return n
}

// Inputs returns the input nodes in creation order.
func (g *Graph) Inputs() []*Node {
	var in []*Node
	for _, n := range g.Nodes {
		if n.Op == OpInput {
			in = append(in, n)
		}
	}
	return in
}

// Consumers returns, for every node ID, the nodes that use it as an argument.
func (g *Graph) Consumers() [][]*Node {
	c := make([][]*Node, len(g.Nodes))
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			if len(c[a.ID]) == 0 || c[a.ID][len(c[a.ID])-1] != n {
				c[a.ID] = append(c[a.ID], n)
			}
		}
	}
	return c
}

// Rebuild creates a new graph holding the nodes reachable from the outputs,
// with each node passed through f (which may return a replacement built in
// the new graph from the already-mapped args). It is how passes rewrite
// graphs: nodes are immutable, so a pass builds a new graph.
func (g *Graph) Rebuild(f func(ng *Graph, n *Node, args []*Node) *Node) *Graph {
	ng := NewGraph()
	mapped := make([]*Node, len(g.Nodes))
	var visit func(n *Node) *Node
	visit = func(n *Node) *Node {
		if m := mapped[n.ID]; m != nil {
			return m
		}
		args := make([]*Node, len(n.Args))
		for i, a := range n.Args {
			args[i] = visit(a)
		}
		m := f(ng, n, args)
		mapped[n.ID] = m
		return m
	}
	// Inputs first, in their original order, so that they survive even when
	// unused (a run still checks every declared input).
	for _, n := range g.Nodes {
		if n.Op == OpInput {
			visit(n)
		}
	}
	for _, o := range g.Outputs {
		ng.Outputs = append(ng.Outputs, Output{Name: o.Name, Node: visit(o.Node)})
	}
	return ng
}

// Copy interns n's fields in ng with new args (the identity rewrite).
func Copy(ng *Graph, n *Node, args []*Node) *Node {
	return ng.Intern(n.Op, n.DType, n.Shape, args, n.Params, n.Layout, n.Name)
}

package ir

import (
	"fmt"
	"github.com/loomgraph/loom/quant"
	"io"
	"strconv"
	"strings"
)

// FormatParams renders a node's parameters as name=value pairs.
func FormatParams(n *Node) string {
	var parts []string
	for i, p := range n.Params {
		name := fmt.Sprint(i)
		if i < len(n.Info().Params) {
			name = n.Info().Params[i]
		}
		v := strconv.FormatFloat(p, 'g', -1, 64)
		if n.Info().Class == ClassQuant && i == 0 {
			v = quant.Type(p).String()
		}
		parts = append(parts, name+"="+v)
	}
	if n.Name != "" {
		parts = append(parts, strconv.Quote(n.Name))
	}
	return strings.Join(parts, " ")
}

// LayoutString describes how a node's buffer is laid out: its view layout for
// views, "contiguous" otherwise.
func LayoutString(n *Node) string {
	if n.Layout != nil {
		return "strides=" + fmt.Sprint(n.Layout.Strides) + " offset=" + strconv.Itoa(n.Layout.Offset)
	}
	return "contiguous"
}

// WriteText writes one line per node: id, op, params, dtype, shape, layout,
// inputs; then the outputs. Annotate, if not nil, may add a suffix per node
// (fusion uses it to show groups).
func WriteText(w io.Writer, g *Graph, annotate func(*Node) string) error {
	var b strings.Builder
	for _, n := range g.Nodes {
		args := make([]string, len(n.Args))
		for i, a := range n.Args {
			args[i] = "%" + strconv.Itoa(a.ID)
		}
		fmt.Fprintf(&b, "%%%d = %s", n.ID, n.Op)
		if p := FormatParams(n); p != "" {
			fmt.Fprintf(&b, "(%s)", p)
		}
		fmt.Fprintf(&b, " %v%v %s [%s]", n.DType, n.Shape, LayoutString(n), strings.Join(args, ", "))
		if annotate != nil {
			if s := annotate(n); s != "" {
				b.WriteString(" " + s)
			}
		}
		b.WriteByte('\n')
	}
	for _, o := range g.Outputs {
		fmt.Fprintf(&b, "output %q = %%%d\n", o.Name, o.Node.ID)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DOTCluster groups nodes into a Graphviz cluster (a fused group).
type DOTCluster struct {
	Label string
	Nodes []*Node
}

// WriteDOT writes the graph in Graphviz DOT, drawing each cluster as a box
// around its nodes.
func WriteDOT(w io.Writer, g *Graph, clusters []DOTCluster) error {
	var b strings.Builder
	b.WriteString("digraph loom {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n")
	label := func(n *Node) string {
		s := fmt.Sprintf("%%%d %s", n.ID, n.Op)
		if p := FormatParams(n); p != "" {
			s += "(" + p + ")"
		}
		return s + fmt.Sprintf("\n%v%v", n.DType, n.Shape)
	}
	style := func(n *Node) string {
		switch n.Info().Class {
		case ClassSource:
			return ", style=filled, fillcolor=lightblue"
		case ClassView:
			return ", style=dashed"
		}
		return ""
	}
	inCluster := map[*Node]bool{}
	for i, c := range clusters {
		fmt.Fprintf(&b, "  subgraph cluster_%d {\n    label=%q; style=rounded; color=darkgreen;\n", i, c.Label)
		for _, n := range c.Nodes {
			inCluster[n] = true
			fmt.Fprintf(&b, "    n%d [label=%q%s];\n", n.ID, label(n), style(n))
		}
		b.WriteString("  }\n")
	}
	for _, n := range g.Nodes {
		if !inCluster[n] {
			fmt.Fprintf(&b, "  n%d [label=%q%s];\n", n.ID, label(n), style(n))
		}
	}
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			fmt.Fprintf(&b, "  n%d -> n%d;\n", a.ID, n.ID)
		}
	}
	for i, o := range g.Outputs {
		fmt.Fprintf(&b, "  out%d [label=%q, shape=ellipse];\n  n%d -> out%d;\n", i, o.Name, o.Node.ID, i)
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

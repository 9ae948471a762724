package main

import (
	"os"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

func main() {
	g := graph.New()
	x := g.Input("x", dtype.BF16, 1, 1, 64)
	y := graph.Linear(x, g.Input("w", dtype.BF16, 40, 64), nil)
	p := y.Reshape(1, 1, 20, 2)
	a := p.Narrow(3, 0, 1).Reshape(1, 1, 20)
	b := p.Narrow(3, 1, 1).Reshape(1, 1, 20)
	g.Output("y", a.Silu().Mul(b))
	pr, err := g.Compile(graph.Options{})
	if err != nil {
		panic(err)
	}
	pr.Dump(os.Stdout, graph.DumpText)
	pr.Dump(os.Stdout, graph.DumpLog)
}

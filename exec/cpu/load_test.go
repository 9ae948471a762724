package cpu_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// BenchmarkPairBroadcast is a rotary embedding's shape of elementwise work
// on the CPU: x [48, 32, 2] times a table [32] repeated over each pair and
// heads, plus another [48, 32, 2] read through a transposing view, so that
// every operand's innermost run is 2 long (walker.load takes whole rows of
// them at a time: 20–21 µs against 51–55 µs a run at a time, on a 2-core
// Zen 4 VM).
func BenchmarkPairBroadcast(b *testing.B) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 48, 32, 2)
	c := g.Input("c", dtype.F32, 32, 1).BroadcastTo(48, 32, 2)
	y := g.Input("y", dtype.F32, 48, 2, 32).Transpose(1, 2)
	g.Output("o", x.Mul(c).Add(y))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func(n ...int) *tensor.Tensor {
		size := 1
		for _, d := range n {
			size *= d
		}
		vals := make([]float32, size)
		for i := range vals {
			vals[i] = float32(r.NormFloat64())
		}
		t, err := tensor.New(vals, n...)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	in := map[string]*tensor.Tensor{"x": rnd(48, 32, 2), "c": rnd(32, 1), "y": rnd(48, 2, 32)}
	out, _ := tensor.Zeros(dtype.F32, 48, 32, 2)
	e := cpu.New()
	for b.Loop() {
		if err := p.RunInto(context.Background(), e, in, map[string]*tensor.Tensor{"o": out}); err != nil {
			b.Fatal(err)
		}
	}
}

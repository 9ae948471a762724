package tests

import (
	"context"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestLongChainCompilesInLinearTime: a 20,000-op elementwise chain
// (neg, add an input, 10,000 times) compiles fused and unfused within a
// generous bound (quadratic passes took 47 s) and runs correctly.
func TestLongChainCompilesInLinearTime(t *testing.T) {
	const ops = 20000
	for _, fusion := range []bool{true, false} {
		g := graph.New()
		x := g.Input("x", dtype.F32, 4)
		y := g.Input("y", dtype.F32, 4)
		v := x
		for range ops / 2 {
			v = v.Neg().Add(y) // −v + y: twice is v again (exact for these values)
		}
		g.Output("z", v)
		start := time.Now()
		p, err := g.Compile(graph.Options{NoFusion: !fusion})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("fused=%v: %v", fusion, err)
		}
		t.Logf("fused=%v: %d-op chain compiled in %v", fusion, ops, took)
		if took > 5*time.Second {
			t.Errorf("fused=%v: %d-op chain took %v to compile", fusion, ops, took)
		}
		xs, _ := tensor.New([]float32{0.5, 1, -1, 2}, 4)
		ys, _ := tensor.New([]float32{0.25, 0.5, 0.125, 1}, 4)
		out, err := p.Run(context.Background(), cpu.New(), map[string]*tensor.Tensor{"x": xs, "y": ys})
		if err != nil {
			t.Fatal(err)
		}
		got, want := out["z"].Float64s(), xs.Float64s()
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("fused=%v: z[%d] = %v, want %v", fusion, i, got[i], want[i])
			}
		}
	}
}

package tests

import (
	"context"
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestReduceEmptyNarrowedView reduces a narrow of an empty tensor: the view
// of [0, 4] keeps its start (offset 2) although the base holds no element,
// and the CPU executor used to slice its empty buffer at that offset. The
// sum over the empty dim is [0] for every dtype; mean is 0/0 = NaN and var
// the mean of no squares, NaN too.
func TestReduceEmptyNarrowedView(t *testing.T) {
	for _, fusion := range []bool{true, false} {
		for _, dt := range dtype.All {
			g := graph.New()
			x := g.Input("x", dt, 0, 4).Narrow(1, 2, 1)
			g.Output("sum", x.Sum(0))
			g.Output("sum_keep", x.SumKeepDim(0, 1))
			if dt.IsFloat() {
				g.Output("mean", x.Mean(false, 0))
				g.Output("var", x.Var(false, 0))
			}
			p, err := g.Compile(graph.Options{NoFusion: !fusion})
			if err != nil {
				t.Fatalf("%v fusion=%v: %v", dt, fusion, err)
			}
			in, err := tensor.Zeros(dt, 0, 4)
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Run(context.Background(), cpu.New(), map[string]*tensor.Tensor{"x": in})
			if err != nil {
				t.Fatalf("%v fusion=%v: %v", dt, fusion, err)
			}
			check := func(name string, shape []int, want float64) {
				got := out[name]
				if s := got.Shape(); len(s) != len(shape) || s[0] != shape[0] || len(s) == 2 && s[1] != shape[1] {
					t.Errorf("%v fusion=%v %s: shape %v, want %v", dt, fusion, name, s, shape)
					return
				}
				v := got.Float64(0)
				if math.IsNaN(want) != math.IsNaN(v) || !math.IsNaN(want) && v != want {
					t.Errorf("%v fusion=%v %s = %v, want %v", dt, fusion, name, v, want)
				}
			}
			check("sum", []int{1}, 0)
			check("sum_keep", []int{1, 1}, 0)
			if dt.IsFloat() {
				check("mean", []int{1}, math.NaN())
				check("var", []int{1}, math.NaN())
			}
		}
	}
}

package smoke

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

func TestSmoke(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F16, 64, 33)
	y := g.Input("y", dtype.F32, 64, 33)
	a := x.Cast(dtype.F32).Silu().Affine(2, 1)
	g.Output("out", graph.Where(y.Gt(graph.Scalar(0.0)), a, a.Neg()))
	g.Output("t", y.T().Add(graph.Scalar(1)))
	prog, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	prog.Dump(os.Stdout, "text")
	prog.Dump(os.Stdout, "plan")
	n := 64 * 33
	xv := make([]float32, n)
	yv := make([]float32, n)
	for i := range xv {
		xv[i] = float32(math.Sin(float64(i))) * 3
		yv[i] = float32(math.Cos(float64(i * 7)))
	}
	xs, _ := tensor.FromFloat32s(dtype.F16, xv, 64, 33)
	ys, _ := tensor.New(yv, 64, 33)
	out, err := prog.Run(context.Background(), cpu.New(), map[string]*tensor.Tensor{"x": xs, "y": ys})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := tensor.Values[float32](out["out"])
	for i := range o {
		xf := xs.Float64(i)
		v := xf / (1 + math.Exp(-xf))
		v = v*2 + 1
		if yv[i] <= 0 {
			v = -v
		}
		if math.Abs(v-float64(o[i])) > 1e-5*math.Max(1, math.Abs(v)) {
			t.Fatalf("%d: %v vs %v", i, o[i], v)
		}
	}
	tt, _ := tensor.Values[float32](out["t"])
	if tt[1] != yv[33]+1 || len(tt) != n {
		t.Fatalf("transpose: %v vs %v", tt[1], yv[33]+1)
	}
}

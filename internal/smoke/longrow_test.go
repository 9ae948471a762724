package smoke

import (
	"context"
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// Long rows take the CPU's two-stage (chunked) reduction path.
func TestLongRowReductions(t *testing.T) {
	const R, C = 3, 100003
	xv := make([]float32, R*C)
	for i := range xv {
		xv[i] = float32(math.Sin(float64(i)*0.37)) * 2
	}
	// Row 1: the maximum appears twice, in different chunks: the first wins.
	xv[C+5000], xv[C+90000] = 7, 7
	// Row 2: a NaN late in the row: max is NaN, argmax is its index.
	xv[2*C+77777] = float32(math.NaN())
	for _, fused := range []bool{true, false} {
		for _, workers := range []int{1, 2} {
			g := graph.New()
			x := g.Input("x", dtype.F32, R, C)
			g.Output("sum", x.Sqr().Sum(1))
			g.Output("max", x.Max(false, 1))
			g.Output("argmax", x.Argmax(1, false))
			g.Output("all", x.Sum(0, 1))
			p, err := g.Compile(graph.Options{NoFusion: !fused, Check: true})
			if err != nil {
				t.Fatal(err)
			}
			xt, _ := tensor.New(xv, R, C)
			out, err := p.Run(context.Background(), cpu.NewWithWorkers(workers).Poison(0xff), map[string]*tensor.Tensor{"x": xt})
			if err != nil {
				t.Fatal(err)
			}
			total := 0.0
			for r := range R {
				sq, mx, am := 0.0, math.Inf(-1), 0
				for c := range C {
					v := float64(xv[r*C+c])
					total += v
					sq += v * v
					if v != v {
						if mx == mx {
							mx, am = v, c
						}
						continue
					}
					if mx == mx && v > mx {
						mx, am = v, c
					}
				}
				if got := out["sum"].Float64(r); math.Abs(got-sq) > 1e-5*sq {
					t.Errorf("fused=%v workers=%d: sum(x²)[%d] = %v, want %v", fused, workers, r, got, sq)
				}
				if got := out["max"].Float64(r); !(got == mx || got != got && mx != mx) {
					t.Errorf("fused=%v workers=%d: max[%d] = %v, want %v", fused, workers, r, got, mx)
				}
				if got := out["argmax"].Float64(r); int(got) != am {
					t.Errorf("fused=%v workers=%d: argmax[%d] = %v, want %v", fused, workers, r, got, am)
				}
			}
			if got := out["all"].Float64(0); got == got || total == total {
				// row 2 holds a NaN, so the whole sum is NaN
				if !(got != got && total != total) {
					t.Errorf("fused=%v: whole sum = %v, want %v", fused, got, total)
				}
			}
		}
	}
}

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

func TestReduceSmoke(t *testing.T) {
	R, C := 5, 37
	for _, fused := range []bool{true, false} {
		g := graph.New()
		x := g.Input("x", dtype.F32, R, C)
		w := g.Input("w", dtype.F32, C)
		b := g.Input("b", dtype.F32, C)
		g.Output("softmax", x.Affine(0.125, 0).Softmax(-1))
		g.Output("rms", x.RmsNorm(w, 1e-6))
		g.Output("ln", x.LayerNorm(w, b, 1e-5))
		g.Output("sum", x.Sum(-1))
		g.Output("sum0", x.Sum(0))
		g.Output("amax", x.Argmax(1, false))
		g.Output("max0", x.Max(true, 0))
		p, err := g.Compile(graph.Options{NoFusion: !fused, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		if fused {
			p.Dump(os.Stdout, "plan")
			p.Dump(os.Stdout, "log")
		}
		xv := make([]float32, R*C)
		wv := make([]float32, C)
		bv := make([]float32, C)
		for i := range xv {
			xv[i] = float32(math.Sin(float64(i)*1.3)) * 3
		}
		for i := range wv {
			wv[i] = float32(math.Cos(float64(i))) + 1.5
			bv[i] = float32(i) * 0.01
		}
		xt, _ := tensor.New(xv, R, C)
		wt, _ := tensor.New(wv, C)
		bt, _ := tensor.New(bv, C)
		out, err := p.Run(context.Background(), cpu.New().Poison(0xff), map[string]*tensor.Tensor{"x": xt, "w": wt, "b": bt})
		if err != nil {
			t.Fatal(err)
		}
		for r := range R {
			row := make([]float64, C)
			for c := range C {
				row[c] = float64(xv[r*C+c])
			}
			mx, sum, sq, am := math.Inf(-1), 0.0, 0.0, 0
			for c, v := range row {
				if v > mx {
					mx, am = v, c
				}
				sum += v
				sq += v * v
			}
			se := 0.0
			for _, v := range row {
				se += math.Exp(v*0.125 - mx*0.125)
			}
			mean := sum / float64(C)
			vr := 0.0
			for _, v := range row {
				vr += (v - mean) * (v - mean)
			}
			vr /= float64(C)
			for c, v := range row {
				check := func(name string, want float64) {
					got := out[name].Float64(r*C + c)
					if math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
						t.Errorf("fused=%v %s[%d,%d] = %v want %v", fused, name, r, c, got, want)
					}
				}
				check("softmax", math.Exp(v*0.125-mx*0.125)/se)
				check("rms", v/math.Sqrt(sq/float64(C)+1e-6)*float64(wv[c]))
				check("ln", (v-mean)/math.Sqrt(vr+1e-5)*float64(wv[c])+float64(bv[c]))
			}
			if got := out["sum"].Float64(r); math.Abs(got-sum) > 1e-4 {
				t.Errorf("sum[%d] = %v want %v", r, got, sum)
			}
			if got := out["amax"].Float64(r); int(got) != am {
				t.Errorf("argmax[%d] = %v want %v", r, got, am)
			}
		}
		for c := range C {
			s, m := 0.0, math.Inf(-1)
			for r := range R {
				s += float64(xv[r*C+c])
				m = math.Max(m, float64(xv[r*C+c]))
			}
			if got := out["sum0"].Float64(c); math.Abs(got-s) > 1e-4 {
				t.Errorf("sum0[%d] = %v want %v", c, got, s)
			}
			if got := out["max0"].Float64(c); got != m {
				t.Errorf("max0[%d] = %v want %v", c, got, m)
			}
		}
		if sh := out["max0"].Shape(); len(sh) != 2 || sh[0] != 1 {
			t.Errorf("max0 shape %v", sh)
		}
	}
}

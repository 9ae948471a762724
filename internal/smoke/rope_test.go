package smoke

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// Candle's index formulas (candle-kernels §9.5), one pair per idx.
func ropeRef(kind string, x, c, s []float64, b, h, t, d int, batched bool) []float64 {
	out := make([]float64, len(x))
	td := t * d
	for idx := 0; idx < b*h*t*d/2; idx++ {
		var i1, i2, cs, bIdx int
		switch kind {
		case "rope_i":
			bIdx = 2 * idx / (h * td)
			i1, i2, cs = 2*idx, 2*idx+1, idx%(td/2)
		case "rope":
			bIdx = 2 * idx / (h * td)
			iBH, iTD := idx/(td/2), idx%(td/2)
			iT, iD := iTD/(d/2), iTD%(d/2)
			i1 = iBH*td + iT*d + iD
			i2, cs = i1+d/2, iT*(d/2)+iD
		case "rope_thd":
			bIdx = 2 * idx / (h * td)
			iBTH, iD := idx/(d/2), idx%(d/2)
			iT := (iBTH / h) % t
			i1 = iBTH*d + iD
			i2, cs = i1+d/2, iT*(d/2)+iD
		case "rope_i_thd": // rope_thd's layout, rope_i's pairs (Loom's)
			bIdx = 2 * idx / (h * td)
			iBTH, iD := idx/(d/2), idx%(d/2)
			iT := (iBTH / h) % t
			i1, i2, cs = 2*idx, 2*idx+1, iT*(d/2)+iD
		}
		if batched {
			cs += bIdx * (td / 2)
		}
		x0, x1 := x[i1], x[i2]
		out[i1] = x0*c[cs] - x1*s[cs]
		out[i2] = x0*s[cs] + x1*c[cs]
	}
	return out
}

func TestRopeSmoke(t *testing.T) {
	B, H, T, D := 2, 3, 5, 8
	for _, kind := range []string{"rope_i", "rope", "rope_thd"} {
		for _, batched := range []bool{false, true} {
			g := graph.New()
			shape := []int{B, H, T, D}
			if kind == "rope_thd" {
				shape = []int{B, T, H, D}
			}
			cshape := []int{T + 2, D / 2}
			if batched {
				cshape = []int{B, T, D / 2}
			}
			x := g.Input("x", dtype.F32, shape...)
			c := g.Input("cos", dtype.F32, cshape...)
			s := g.Input("sin", dtype.F32, cshape...)
			var y *graph.Tensor
			switch kind {
			case "rope_i":
				y = x.RopeI(c, s)
			case "rope":
				y = x.Rope(c, s)
			default:
				y = x.RopeThd(c, s)
			}
			g.Output("y", y)
			p, err := g.Compile(graph.Options{Check: true})
			if err != nil {
				t.Fatal(err)
			}
			n := B * H * T * D
			xv, cv, sv := make([]float32, n), make([]float32, tensor.Numel(cshape)), make([]float32, tensor.Numel(cshape))
			for i := range xv {
				xv[i] = float32(math.Sin(float64(i)*0.7)) + 0.1
			}
			for i := range cv {
				cv[i], sv[i] = float32(math.Cos(float64(i)*0.3)), float32(math.Sin(float64(i)*0.3))
			}
			got := runRope(t, p, xv, cv, sv, shape, cshape)
			want := ropeRef(kind, f64s(xv), f64s(cv), f64s(sv), B, H, T, D, batched)
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1e-6 {
					t.Fatalf("%s batched=%v: [%d] = %v want %v", kind, batched, i, got[i], want[i])
				}
			}
			t.Logf("%s batched=%v: %d steps", kind, batched, len(p.Plan().Steps))
		}
	}
}

// TestRopeThdHeadsSmoke: RopeThdHeads rotates the first k heads as RopeThd
// does and passes the others through bit for bit, fused and unfused; fused,
// the selection adds no kernel beyond the once-a-run head mask. The same
// for RopeIThdHeads, whose rotated heads are checked against the
// interleaved formula (rope_i's pairs in rope_thd's layout).
func TestRopeThdHeadsSmoke(t *testing.T) {
	B, T, H, D := 2, 3, 5, 8
	shape := []int{B, T, H, D}
	n := B * T * H * D
	xv := make([]float32, n)
	for i := range xv {
		xv[i] = float32(math.Sin(float64(i)*0.37)) * 3
	}
	for _, kind := range []string{"rope_thd", "rope_i_thd"} {
		testRopeHeads(t, kind, xv, shape)
	}
}

func testRopeHeads(t *testing.T, kind string, xv []float32, shape []int) {
	B, T, H, D := shape[0], shape[1], shape[2], shape[3]
	headsOf := (*graph.Tensor).RopeThdHeads
	if kind == "rope_i_thd" {
		headsOf = (*graph.Tensor).RopeIThdHeads
	}
	for _, batched := range []bool{false, true} {
		cshape := []int{T + 1, D / 2}
		if batched {
			cshape = []int{B, T, D / 2}
		}
		cv, sv := make([]float32, tensor.Numel(cshape)), make([]float32, tensor.Numel(cshape))
		for i := range cv {
			cv[i], sv[i] = float32(math.Cos(float64(i)*0.3+0.2)), float32(math.Sin(float64(i)*0.3+0.2))
		}
		all := ropeRef(kind, f64s(xv), f64s(cv), f64s(sv), B, H, T, D, batched)
		for _, heads := range []int{0, 1, 3, H} {
			for _, fused := range []bool{true, false} {
				build := func(partial bool) *graph.Program {
					g := graph.New()
					x := g.Input("x", dtype.F32, shape...)
					c := g.Input("cos", dtype.F32, cshape...)
					s := g.Input("sin", dtype.F32, cshape...)
					if partial {
						g.Output("y", headsOf(x, c, s, heads))
					} else {
						g.Output("y", x.RopeThd(c, s))
					}
					p, err := g.Compile(graph.Options{Check: true, NoFusion: !fused})
					if err != nil {
						t.Fatal(err)
					}
					return p
				}
				p := build(true)
				if full := len(build(false).Plan().Steps); fused && len(p.Plan().Steps) > full+1 {
					t.Errorf("heads=%d batched=%v: %d steps, RopeThd takes %d: the selection did not join the rotation's kernel", heads, batched, len(p.Plan().Steps), full)
				}
				got := runRope(t, p, xv, cv, sv, shape, cshape)
				for i := range got {
					h := (i / D) % H
					if h >= heads {
						if got[i] != float64(xv[i]) {
							t.Fatalf("%s heads=%d batched=%v fused=%v: [%d] (head %d) = %v, want it passed through: %v", kind, heads, batched, fused, i, h, got[i], xv[i])
						}
					} else if math.Abs(got[i]-all[i]) > 1e-6 {
						t.Fatalf("%s heads=%d batched=%v fused=%v: [%d] (head %d) = %v want %v", kind, heads, batched, fused, i, h, got[i], all[i])
					}
				}
			}
		}
	}
	for _, heads := range []int{-1, H + 1} {
		g := graph.New()
		x := g.Input("x", dtype.F32, shape...)
		c := g.Input("cos", dtype.F32, T, D/2)
		g.Output("y", headsOf(x, c, c, heads))
		if _, err := g.Compile(graph.Options{}); err == nil || !strings.Contains(err.Error(), kind+":") || !strings.Contains(err.Error(), "heads to rotate") {
			t.Errorf("%s heads=%d: err = %v, want a %s error about the heads", kind, heads, err, kind)
		}
	}
}

// runRope runs p (inputs x, cos, sin; output y) on the CPU with poisoned
// outputs and returns y.
func runRope(t *testing.T, p *graph.Program, xv, cv, sv []float32, shape, cshape []int) []float64 {
	t.Helper()
	xt, _ := tensor.New(xv, shape...)
	ct, _ := tensor.New(cv, cshape...)
	st, _ := tensor.New(sv, cshape...)
	out, err := p.Run(context.Background(), cpu.New().Poison(0xff), map[string]*tensor.Tensor{"x": xt, "cos": ct, "sin": st})
	if err != nil {
		t.Fatal(err)
	}
	return out["y"].Float64s()
}

func f64s(v []float32) []float64 {
	o := make([]float64, len(v))
	for i := range v {
		o[i] = float64(v[i])
	}
	return o
}

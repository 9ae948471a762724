package codegen

import (
	"math"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// randomCases exercise rand and randn in elementwise kernels: fused into
// their consumers (dropout masks on every float dtype), stream offsets that
// line up with Philox blocks and ones that do not (the vector path's block
// and per-element forms), the wrap of the position at 2⁶⁴, narrow outputs
// (u8: 16 elements a thread), a random tensor read through a transposed
// view (computed in memory first), and the edge shapes. They run in the
// host emulation (bit for bit against the CPU twin, fused against
// unfused), with every alternative option set, compile for gfx90a and
// gfx1030, and run on the GPU where there is one.
func randomCases() []graphCase {
	f32, f16, bf16, f64 := dtype.F32, dtype.F16, dtype.BF16, dtype.F64
	var cs []graphCase
	add := func(name string, fused bool, build func(g *graph.Graph)) {
		cs = append(cs, graphCase{name: "random/" + name, fused: fused, build: build})
	}
	for _, dt := range []dtype.DType{f32, f16, bf16, f64} {
		add("dropout/"+dt.String(), true, func(g *graph.Graph) {
			x := g.Input("x", dt, 7, 37)
			keep := g.Rand(dt, 11, 0, 1, 7, 37).Ge(graph.Scalar(0.25)).Cast(dt)
			g.Output("out", x.Mul(keep).Affine(1/0.75, 0))
		})
		add("randn-plus-x/"+dt.String(), true, func(g *graph.Graph) {
			x := g.Input("x", dt, 3, 111)
			g.Output("out", x.Add(g.Randn(dt, 12, -1, 0.5, 3, 111)))
		})
		add("offset-unaligned/"+dt.String(), false, func(g *graph.Graph) {
			g.Output("out", g.RandAt(dt, 13, 3, -2, 5, 1000))
		})
		add("randn-offset-unaligned/"+dt.String(), false, func(g *graph.Graph) {
			g.Output("out", g.RandnAt(dt, 13, 5, 3, 2, 999))
		})
	}
	add("offset-aligned-large/f32", false, func(g *graph.Graph) {
		g.Output("out", g.RandAt(f32, 0xdeadbeefcafef00d, 1<<40+4, 0, 1, 1001))
	})
	add("offset-wraps/f32", false, func(g *graph.Graph) {
		g.Output("out", g.RandnAt(f32, 14, math.MaxUint64-101, 0, 1, 300))
	})
	add("offset-wraps/f64", false, func(g *graph.Graph) {
		g.Output("out", g.RandAt(f64, 14, math.MaxUint64-100, 0, 1, 300))
	})
	// Offsets that line up with blocks, wrapping inside a thread's run of
	// blocks: the block after 2⁶⁴ − 1's is block 0.
	for _, dt := range []dtype.DType{f32, f16, f64} {
		add("offset-wraps-aligned/"+dt.String(), true, func(g *graph.Graph) {
			x := g.Input("x", dt, 64)
			g.Output("out", x.Add(g.RandnAt(dt, 14, math.MaxUint64-3, 0, 1, 64)).Mul(g.RandAt(dt, 15, math.MaxUint64-7, 0, 1, 64)))
		})
	}
	add("mask-u8", true, func(g *graph.Graph) {
		g.Output("out", g.Rand(f32, 15, 0, 1, 33, 64).Lt(graph.Scalar(0.5)))
	})
	add("mask-f16-input-f32-out", true, func(g *graph.Graph) {
		x := g.Input("x", f16, 33, 64)
		g.Output("out", x.Cast(f32).Mul(g.Randn(f32, 16, 0, 1, 33, 64)))
	})
	add("rounds-to-hi/bf16", false, func(g *graph.Graph) {
		// [1, 2) in bf16: u ≥ 1 − 2⁻⁹ rounds to 2 and becomes 1.
		g.Output("out", g.Rand(bf16, 17, 1, 2, 4096))
	})
	add("transposed-read", true, func(g *graph.Graph) {
		g.Output("out", g.Rand(f32, 18, 0, 1, 37, 41).T().Add(g.Input("y", f32, 41, 37)))
	})
	add("two-sources", true, func(g *graph.Graph) {
		a := g.Rand(f32, 19, 0, 1, 5, 40)
		b := g.Randn(f16, 19, 0, 1, 5, 40).Cast(f32)
		g.Output("out", a.Mul(b).Add(g.RandAt(f32, 19, 2, 0, 1, 5, 40)))
	})
	add("rank0", false, func(g *graph.Graph) { g.Output("out", g.Randn(f32, 20, 0, 1)) })
	add("empty", false, func(g *graph.Graph) { g.Output("out", g.Rand(f32, 21, 0, 1, 3, 0)) })
	return cs
}

// randomRowCases put rand and randn into row kernels: whole-row values
// read by a reduction, row values broadcast over the rows, and a dropout
// in a softmax's epilogue. Reductions of them are max or integer sums, so
// the first ones compare bit for bit.
func randomRowCases() []rowCase {
	f32, f16, f64 := dtype.F32, dtype.F16, dtype.F64
	return []rowCase{
		{name: "random/mask-count/f32/23x1000", tol: rowExact, build: func(g *graph.Graph) {
			g.Output("out", g.Rand(f32, 31, 0, 1, 23, 1000).Lt(graph.Scalar(0.3)).Cast(dtype.I64).Sum(-1))
		}},
		{name: "random/max-dropout/f32/23x1000", tol: rowExact, build: func(g *graph.Graph) {
			x := g.Input("x", f32, 23, 1000)
			g.Output("out", x.Mul(g.RandAt(f32, 36, 8, 0, 1, 23, 1000).Ge(graph.Scalar(0.5)).Cast(f32)).Max(false, -1))
		}},
		{name: "random/max-randn/f64/9x4096", tol: rowExact, build: func(g *graph.Graph) {
			g.Output("out", g.RandnAt(f64, 32, 7, 0, 1, 9, 4096).Max(false, -1))
		}},
		{name: "random/row-value/f16/23x33", tol: rowExact, build: func(g *graph.Graph) {
			x := g.Input("x", f16, 23, 33)
			g.Output("out", x.Add(g.Randn(f16, 33, 0, 1, 23, 1)).Max(false, -1))
		}},
		{name: "random/softmax-dropout/f32/23x1000", tol: rowApprox, build: func(g *graph.Graph) {
			s := g.Input("x", f32, 23, 1000).Softmax(-1)
			g.Output("out", s.Mul(g.Rand(f32, 34, 0, 1, 23, 1000).Ge(graph.Scalar(0.1)).Cast(f32)))
		}},
		{name: "random/softmax-dropout/f16/2x100000", tol: rowApprox, build: func(g *graph.Graph) {
			s := g.Input("x", f16, 2, 100000).Softmax(-1)
			g.Output("out", s.Mul(g.Rand(f16, 35, 0, 1, 2, 100000).Ge(graph.Scalar(0.1)).Cast(f16)))
		}},
	}
}

// TestRandomKernels checks the plans and sources: a dropout is one kernel
// whose thread computes whole Philox blocks when the offset lines up, and
// one block per element otherwise; the trimmed prelude carries the
// generator.
func TestRandomKernels(t *testing.T) {
	for _, c := range []struct {
		name      string
		offset    uint64
		dt        dtype.DType
		want, not string
	}{
		{"aligned-f32", 8, dtype.F32, "loom_rand_uniform4_f32(((unsigned long long)", ""},
		{"unaligned-f32", 6, dtype.F32, "loom_rand_uniform_f32(", "loom_rand_uniform4_f32(((unsigned long long)"},
		{"aligned-f64", 2, dtype.F64, "loom_rand_uniform2_f64(((unsigned long long)", ""},
		{"unaligned-f64", 1, dtype.F64, "loom_rand_uniform_f64(", "loom_rand_uniform2_f64(((unsigned long long)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := graph.New()
			x := g.Input("x", c.dt, 64, 129)
			keep := g.RandAt(c.dt, 42, c.offset, 0, 1, 64, 129).Ge(graph.Scalar(0.1)).Cast(c.dt)
			g.Output("out", x.Mul(keep).Affine(1/0.9, 0))
			p, err := g.Compile(graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			steps := p.Plan().Steps
			if len(steps) != 1 {
				t.Fatalf("dropout compiles to %d steps, want 1 kernel", len(steps))
			}
			src, err := Elementwise(steps[0].Kernel, amd90a)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(src.Body, c.want) {
				t.Errorf("body lacks %q:\n%s", c.want, src.Body)
			}
			if c.not != "" && strings.Contains(src.Body, c.not) {
				t.Errorf("body has %q:\n%s", c.not, src.Body)
			}
			for _, h := range []string{"loom_philox(", "0xd2511f53", "loom_rand_fix("} {
				if !strings.Contains(src.Code, h) {
					t.Errorf("source lacks %q", h)
				}
			}
			if strings.Contains(src.Code, "loom_rand_log_f32") {
				t.Errorf("a uniform kernel carries the normal helpers")
			}
		})
	}
}

// TestRandomRowPlans checks that every random row case is one row kernel
// computing its random values inside, and renders.
func TestRandomRowPlans(t *testing.T) {
	for _, c := range randomRowCases() {
		p := c.plan(t, true)
		if len(p.Steps) != 1 || p.Steps[0].Kernel.RowAxes == 0 {
			var b strings.Builder
			p.WriteText(&b)
			t.Errorf("%s: want one row kernel:\n%s", c.name, b.String())
			continue
		}
		k := p.Steps[0].Kernel
		random := false
		for _, in := range k.Instrs {
			random = random || in.Node.Op.IsRandom()
		}
		if !random {
			t.Errorf("%s: the row kernel %s computes no random values", c.name, k.Name)
		}
		src, err := Rows(k, amd90a)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		want := "loom_rand_"
		switch {
		case strings.Contains(c.name, "softmax-dropout"), strings.Contains(c.name, "max-dropout"):
			want = "loom_rand_uniform4_f32(((unsigned long long)" // chunks of 4 or 8: whole blocks
		case strings.Contains(c.name, "mask-count"):
			want = "loom_rand_uniform_f32((unsigned long long)(row" // i64 out: chunks of 2
		case strings.Contains(c.name, "max-randn"):
			want = "loom_rand_normal_f64((unsigned long long)(row" // offset 7: per element
		}
		if !strings.Contains(src.Body, want) {
			t.Errorf("%s: body lacks %q:\n%s", c.name, want, src.Body)
		}
	}
}

package codegen_test

// Row kernels through the GPU executor (exec/rocm), end to end: the plan's
// row kernels run on the device (no CPU fallback), with poisoned outputs,
// fused and unfused, and match the CPU executor. Skipped without a GPU.

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/exec/rocm"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
	"github.com/loomgraph/loom/tests/conformance"
)

func TestGPUExecutorRows(t *testing.T) {
	e, err := rocm.Open()
	if err != nil {
		t.Skipf("no GPU, executor row tests skipped: %v", err)
	}
	defer e.Close()
	e.Poison(0xff)
	type tc struct {
		name  string
		build func(g *graph.Graph)
		sum   bool // a float sum of x over the last dim: tolerance 1e-5·Σ|x|
	}
	cases := []tc{
		{"W3/64x1000", func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, 64, 1000).Affine(0.125, 0).Softmax(-1))
		}, false},
		{"W4/8192x8192", func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, 8192, 8192).LayerNorm(g.Input("w", dtype.F32, 8192), g.Input("b", dtype.F32, 8192), 1e-5))
		}, false},
		{"W5/37x4096", func(g *graph.Graph) {
			x, w := g.Input("x", dtype.F32, 37, 4096), g.Input("w", dtype.F32, 4096)
			g.Output("out", x.Mul(x.Mul(x).Mean(true, -1).Add(graph.Scalar(1e-6)).Sqrt().Recip()).Mul(w))
		}, false},
		{"W7/100x333", func(g *graph.Graph) { g.Output("out", g.Input("x", dtype.F32, 100, 333).Sum(-1)) }, true},
		{"sum/whole-tensor-two-stage", func(g *graph.Graph) { g.Output("out", g.Input("x", dtype.F32, 1, 1<<22).Sum(-1)) }, true},
		{"argmax/two-stage", func(g *graph.Graph) { g.Output("out", g.Input("x", dtype.F32, 2, 1<<20).Argmax(-1, false)) }, false},
		{"sum/empty-rows", func(g *graph.Graph) { g.Output("out", g.Input("x", dtype.F32, 4, 0).Sum(-1)) }, false},
		{"softmax/f16", func(g *graph.Graph) { g.Output("out", g.Input("x", dtype.F16, 33, 65).Softmax(-1)) }, false},
		{"argmin/of-gelu", func(g *graph.Graph) {
			x := g.Input("x", dtype.F32, 20, 70)
			g.Output("out", x.Gelu().Argmin(1, false))
		}, false},
	}
	for ci, c := range cases {
		for _, fused := range []bool{true, false} {
			name := c.name + map[bool]string{true: "/fused", false: "/unfused"}[fused]
			t.Run(name, func(t *testing.T) {
				g := graph.New()
				c.build(g)
				p, err := g.Compile(graph.Options{NoFusion: !fused})
				if err != nil {
					t.Fatal(err)
				}
				if pl := p.Placement(e); strings.Contains(pl, "fallback") {
					t.Errorf("a step falls back to the CPU:\n%s", pl)
				}
				rng := rand.New(rand.NewPCG(uint64(ci), 5))
				in := map[string]*tensor.Tensor{}
				for _, n := range g.IR().Inputs() {
					v := make([]float64, n.Numel())
					for i := range v {
						v[i] = rng.NormFloat64() * 3
					}
					if len(v) > 10 {
						v[len(v)/3] = v[len(v)/2] // a tie
					}
					in[n.Name], _ = tensor.FromFloat64s(n.DType, v, n.Shape...)
				}
				want, err := p.Run(context.Background(), cpu.New(), in)
				if err != nil {
					t.Fatal(err)
				}
				got, err := p.Run(context.Background(), e, in)
				if err != nil {
					t.Fatal(err)
				}
				w, gv := want["out"].Float64s(), got["out"].Float64s()
				var absSum []float64
				if c.sum {
					x := in["x"].Float64s()
					L := len(x) / max(1, len(w))
					absSum = make([]float64, len(w))
					for i, f := range x {
						absSum[i/L] += math.Abs(f)
					}
				}
				half := want["out"].DType() == dtype.F16
				// Row scale: the largest magnitude in the output's last-dim
				// row; the CPU's float32 row sums err like √L, or L on rows
				// of few distinct values (see compareRow in rows_test.go).
				shape := want["out"].Shape()
				L := 1
				if len(shape) > 0 {
					L = max(1, shape[len(shape)-1])
				}
				scale := make([]float64, len(w))
				for r := 0; r*L < len(w); r++ {
					m := 0.0
					for _, f := range w[r*L : (r+1)*L] {
						if !math.IsInf(f, 0) && !math.IsNaN(f) {
							m = max(m, math.Abs(f))
						}
					}
					for i := r * L; i < (r+1)*L; i++ {
						scale[i] = m
					}
				}
				growth := max(1, float64(L)/1024)
				bad := 0
				for i := range w {
					d := math.Abs(w[i] - gv[i])
					tol := 2e-6*math.Abs(w[i]) + 1e-7 + 2e-7*growth*scale[i]
					switch {
					case c.sum:
						tol = 1e-5 * absSum[i]
					case half:
						tol = math.Abs(w[i])*math.Ldexp(1, -10) + 1e-7
					case !want["out"].DType().IsFloat():
						tol = 0
					}
					if d > tol && !(math.IsNaN(w[i]) && math.IsNaN(gv[i])) {
						if bad < 5 {
							t.Errorf("out[%d] = %v, want %v", i, gv[i], w[i])
						}
						bad++
					}
				}
				if bad > 5 {
					t.Errorf("%d of %d elements differ", bad, len(w))
				}
			})
		}
	}
	t.Logf("%+v", e.Stats().Kernels)
}

// TestGPUConformanceReductions runs the reductions conformance group
// (tests/conformance: float64 references of its own, every reduction ×
// dtype × dim, row lengths to 100000, NaN/Inf rows, ties, composites, two
// poison bytes, fused and unfused) on the GPU executor: two views of it
// with their own poison bytes, so that the cases run in parallel.
func TestGPUConformanceReductions(t *testing.T) {
	e, err := rocm.Open()
	if err != nil {
		t.Skipf("no GPU, conformance on the GPU skipped: %v", err)
	}
	defer e.Close()
	conformance.Reductions(t, func(p byte) exec.Executor { return e.WithPoison(p) })
	t.Logf("%+v", e.Stats().Kernels)
}

package fuse_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// runSafe runs p, turning a panic of the executor into an error.
func runSafe(p *graph.Program, in map[string]*tensor.Tensor, poison byte) (out map[string]*tensor.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return run(p, in, poison)
}

// TestRowKernels: row kernels (a reduction with its prologue and broadcast
// epilogue, or a value broadcast along the trailing dims) compute what the
// unfused plan computes.
func TestRowKernels(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(g *graph.Graph) *graph.Tensor
		// want, if set, checks the output against the input x.
		want func(x []float64, i int) float64
	}{
		{"softmax", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 3, 5).Softmax(1) }, nil},
		{"sum-of-squares", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 3, 5).Sqr().Sum(1) }, nil},
		{"broadcast-epilogue", func(g *graph.Graph) *graph.Tensor {
			x := g.Input("x", dtype.F32, 3, 5)
			return x.Sub(x.Max(true, 1)).Exp()
		}, nil},
		{"row-value-epilogue", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 3, 1).Exp().Add(g.Input("y", dtype.F32, 3, 5))
		}, nil},
		// A row value broadcast across its row and reduced again: the CPU
		// row kernel expands a broadcast argument to the span of the
		// instruction that reads it, which for a reduction is one value
		// per row, not the whole row (exec/cpu/program.go, tile).
		{"reduce-broadcast-row-value", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 2, 1).Exp().BroadcastTo(2, 7).Sum(1)
		}, func(x []float64, i int) float64 { return 7 * math.Exp(x[i]) }},
		{"reduce-broadcast-reduction", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 2, 7).Max(true, 1).BroadcastTo(2, 7).Min(false, 1)
		}, func(x []float64, i int) float64 {
			m := math.Inf(-1)
			for _, v := range x[i*7 : i*7+7] {
				m = math.Max(m, v)
			}
			return m
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := graph.New()
			g.Output("o", tc.build(g))
			_, _, in, out := differential(t, g, 30)
			if tc.want == nil {
				return
			}
			xs, o := in["x"].Float64s(), out["o"].Float64s()
			for i := range o {
				if w := tc.want(xs, i); math.Abs(o[i]-w) > 1e-5*math.Abs(w) {
					t.Errorf("fused o[%d] = %v, want %v", i, o[i], w)
				}
			}
		})
	}
}

// TestEmptyRows: kernels over shapes with a zero dim run and produce their
// (possibly empty) outputs. The CPU row path treats a row of 0 elements as
// a row of 1 (max(rowLen, 1) in exec/cpu/program.go) and panics.
func TestEmptyRows(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(g *graph.Graph) *graph.Tensor
		want  []float64
	}{
		// Fusion makes this a row kernel R_exp_add_3x0; unfused it is two
		// elementwise kernels and works.
		{"row-value-epilogue", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 3, 1).Exp().Add(g.Input("y", dtype.F32, 3, 0))
		}, []float64{}},
		// An empty row sums to 0 (ir's op table).
		{"sum-empty-rows", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 3, 0).Sum(1) }, []float64{0, 0, 0}},
		{"fused-sum-empty-rows", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 3, 0).Exp().Sum(1) }, []float64{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, opts := range []graph.Options{fused, unfused} {
				g := graph.New()
				g.Output("o", tc.build(g))
				p := mustCompile(t, g, opts)
				out, err := runSafe(p, randomInputs(g, rand.New(rand.NewPCG(31, 1))), poisonFused)
				if err != nil {
					t.Errorf("NoFusion=%v: %v\n%s", opts.NoFusion, err, dump(t, p, "plan"))
					continue
				}
				if got := out["o"].Float64s(); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("NoFusion=%v: o = %v, want %v", opts.NoFusion, got, tc.want)
				}
			}
		})
	}
}

// TestLongRowsFusedEqualsUnfused: rows longer than one CPU tile (4096
// elements) reduce in one order whether the reduction is a kernel of its
// own (the chunked long-row path) or part of a fused row kernel, so the
// composites give the same bits fused and unfused, in every float dtype.
func TestLongRowsFusedEqualsUnfused(t *testing.T) {
	ops := []struct {
		name  string
		build func(g *graph.Graph, x *graph.Tensor, dt dtype.DType, L int) *graph.Tensor
	}{
		{"softmax", func(_ *graph.Graph, x *graph.Tensor, _ dtype.DType, _ int) *graph.Tensor { return x.Softmax(-1) }},
		{"log_softmax", func(_ *graph.Graph, x *graph.Tensor, _ dtype.DType, _ int) *graph.Tensor { return x.LogSoftmax(-1) }},
		{"layer_norm", func(g *graph.Graph, x *graph.Tensor, dt dtype.DType, L int) *graph.Tensor {
			return x.LayerNorm(g.Input("w", dt, L), g.Input("b", dt, L), 1e-5)
		}},
		{"rms_norm", func(g *graph.Graph, x *graph.Tensor, dt dtype.DType, L int) *graph.Tensor {
			return x.RmsNorm(g.Input("w", dt, L), 1e-5)
		}},
		{"var", func(_ *graph.Graph, x *graph.Tensor, _ dtype.DType, _ int) *graph.Tensor { return x.Var(false, -1) }},
	}
	for _, op := range ops {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
			for _, L := range []int{5000, 8192, 30000} {
				t.Run(fmt.Sprintf("%s/%v/%d", op.name, dt, L), func(t *testing.T) {
					g := graph.New()
					x := g.Input("x", dt, 3, L)
					g.Output("o", op.build(g, x, dt, L))
					compareRuns(t, g, uint64(L)) // fails on any differing bit
				})
			}
		}
	}
}

// TestLongSumPrecision: a float32 mean of 2^25 values near 1e4 is within
// 1e-6 relative of the exact mean, fused and unfused, with the same bits.
// The data (10000 and 10002 alternating, exact mean 10001) are exactly
// summable in float32 by blocks and a pairwise tree; a sequential float32
// accumulation over the row, or over its 8192 block sums, gave 10000.205.
func TestLongSumPrecision(t *testing.T) {
	const n = 1 << 25
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = 10000 + 2*float32(i%2)
	}
	in, err := tensor.New(xs, n)
	if err != nil {
		t.Fatal(err)
	}
	g := graph.New()
	g.Output("m", g.Input("x", dtype.F32, n).Mean(false, 0))
	var got [2]*tensor.Tensor
	for k, opts := range []graph.Options{fused, unfused} {
		got[k] = mustRun(t, mustCompile(t, g, opts), map[string]*tensor.Tensor{"x": in}, poisonFused)["m"]
		if m := got[k].Float64(0); math.Abs(m-10001) > 1e-6*10001 {
			t.Errorf("NoFusion=%v: mean = %.9g, want 10001 within 1e-6 relative", opts.NoFusion, m)
		}
	}
	if err := sameBits(map[string]*tensor.Tensor{"m": got[0]}, map[string]*tensor.Tensor{"m": got[1]}); err != nil {
		t.Errorf("fused and unfused means differ: %v", err)
	}
}

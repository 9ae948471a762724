package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// SwiGLU over a product whose weight interleaves the gate and up rows (a
// llama layer's stacked gate/up projection as Loom loads it): y = x·Wᵀ
// [M, 2N], then silu(y[:, 2j])·y[:, 2j+1] — the product's output read in
// pairs, which fusion joins as a pair epilogue (plan.Kernel.PairEpilogue).
// Checked against the float64 SwiGLU of the exact products, within the
// products' sums (and, for a quantized weight, the 8-bit activations) and
// the roundings to dt of y, silu and the product; and fused against
// unfused on the same executor.

// pairCase is M rows of K, 2N product outputs, N pairs.
type pairCase struct{ m, k, n int }

var pairCases = []pairCase{{1, 256, 40}, {1, 2048, 300}, {3, 512, 64}, {8, 256, 17}, {9, 128, 8}, {1, 100, 13}}

// pairGraph builds silu(y[:, even])·y[:, odd] (f32 out) for y = p(x).
func pairGraph(dt dtype.DType, c pairCase, p func(g *graph.Graph, x *graph.Tensor) *graph.Tensor) *graph.Graph {
	g := graph.New()
	y := p(g, g.Input("x", dt, c.m, c.k)).Reshape(c.m, c.n, 2)
	gate := y.Narrow(2, 0, 1).Reshape(c.m, c.n)
	up := y.Narrow(2, 1, 1).Reshape(c.m, c.n)
	g.Output("y", gate.Silu().Mul(up).Cast(dtype.F32))
	return g
}

// checkPairs compares got (and plain, the unfused run) with the float64
// SwiGLU of w [2N, K] and xs; act(i, row) is the error of the product's
// activations for row (0 for float weights).
func checkPairs(t *testing.T, dt dtype.DType, c pairCase, got, plain, w, xs []float64, act func(i, row int) float64) {
	t.Helper()
	u := map[dtype.DType]float64{dtype.F32: 1.0 / (1 << 23), dtype.F16: 1.0 / 2048, dtype.BF16: 1.0 / 256}[dt]
	silu := func(v float64) float64 { return v / (1 + math.Exp(-v)) }
	for i := range c.m {
		for j := range c.n {
			var gv, uv, gs, us float64
			for k := range c.k {
				x := xs[i*c.k+k]
				gv += x * w[(2*j)*c.k+k]
				uv += x * w[(2*j+1)*c.k+k]
				gs += math.Abs(x * w[(2*j)*c.k+k])
				us += math.Abs(x * w[(2*j+1)*c.k+k])
			}
			want := silu(gv) * uv
			// The errors of gate and up as stored: their sums, the
			// activations' quantization and one rounding to dt.
			eg := 2e-6*gs + act(i, 2*j) + u*math.Abs(gv)
			eu := 2e-6*us + act(i, 2*j+1) + u*math.Abs(uv)
			tol := 1.1*eg*(math.Abs(uv)+eu) + math.Abs(silu(gv))*eu + 3*u*(math.Abs(silu(gv))*math.Abs(uv)+math.Abs(want)) + 1e-6
			checkBoth(t, got, plain, i*c.n+j, want, tol, func() string { return fmt.Sprintf("y[%d][%d]", i, j) })
		}
	}
}

// pairLinear: SwiGLU over an interleaved float product for f32, f16 and
// bf16, 1 to 9 rows, K of 100 (the scalar skinny product) to 2048.
func pairLinear(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(45, 46))
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, c := range pairCases {
			t.Run(fmt.Sprintf("%v/M%dK%dN%d", dt, c.m, c.k, c.n), func(t *testing.T) {
				xt := uniformMatrix(t, r, dt, c.m, c.k, 1)
				wt := uniformMatrix(t, r, dt, 2*c.n, c.k, 4/math.Sqrt(float64(c.k)))
				in := map[string]*tensor.Tensor{"x": xt, "w": wt}
				build := func() *graph.Graph {
					return pairGraph(dt, c, func(g *graph.Graph, x *graph.Tensor) *graph.Tensor {
						return graph.Linear(x, g.Input("w", dt, 2*c.n, c.k), nil)
					})
				}
				got, plain := runBoth(t, newExec, build, opts, in)
				checkPairs(t, dt, c, got, plain, wt.Float64s(), xt.Float64s(), func(int, int) float64 { return 0 })
			})
		}
	}
}

// uniformMatrix is a [rows, k] tensor of dt with values uniform in
// [-scale, scale).
func uniformMatrix(t *testing.T, r *rand.Rand, dt dtype.DType, rows, k int, scale float64) *tensor.Tensor {
	t.Helper()
	v := make([]float64, rows*k)
	for i := range v {
		v[i] = (r.Float64()*2 - 1) * scale
	}
	tt, err := tensor.FromFloat64s(dt, v, rows, k)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// quantPairMatmul: the same over a quantized weight (Q4_K and Q8_0), one
// row and three, within quantMatmul's bound for the 8-bit activations.
func quantPairMatmul(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(47, 48))
	for _, f := range []quant.Type{quant.Q4_K, quant.Q8_0} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			for _, c := range []pairCase{{1, 2048, 300}, {1, 256, 40}, {3, 512, 20}} {
				t.Run(fmt.Sprintf("%v/%v/M%dK%dN%d", f, dt, c.m, c.k, c.n), func(t *testing.T) {
					xt := uniformMatrix(t, r, dt, c.m, c.k, 1)
					raw := quantized(t, r, f, 2*c.n, c.k)
					in := map[string]*tensor.Tensor{"x": xt, "w": raw}
					build := func() *graph.Graph {
						return pairGraph(dt, c, func(g *graph.Graph, x *graph.Tensor) *graph.Tensor {
							q, _ := g.QInput("w", f, 2*c.n, c.k)
							return x.QMatmul(q)
						})
					}
					got, plain := runBoth(t, newExec, build, opts, in)
					w := dequantRef(t, f, dtype.F32, raw.Bytes(), 2*c.n*c.k)
					xs := xt.Float64s()
					checkPairs(t, dt, c, got, plain, w, xs, func(i, row int) float64 {
						_, abs, amax := rowProduct(w[row*c.k:(row+1)*c.k], xs[i*c.k:(i+1)*c.k])
						return abs * amax / 127
					})
				})
			}
		}
	}
}

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

// A decode step's RMSNorm before its products: h = cast(x·(mean(x²) +
// eps)^−½, dt)·g, as Hugging Face's LlamaRMSNorm (x in float32), then h·Wᵀ
// plus a residual: a row kernel, then a skinny product (or the one-row
// quantized mat-vec) with the residual add as its epilogue. The values are
// checked against a float64 reference that rounds h as the graph does,
// and the fused run against the unfused one on the same executor (op by
// op, with other kernels and another sum order). The norm's sum is a
// float32 sum whose order differs between executors, so an element of h
// may round to its neighbour: the tolerance allows each h its rounding
// step. (The RMSNorm stays a kernel of its own: fuse/cores.go says why.)

const normEps = 1e-5

// normCase is one RMSNorm-then-product case: M rows of K, N outputs, x
// read through a narrowed view (a row stride of K+pad) when pad > 0.
type normCase struct{ m, k, n, pad int }

var normCases = []normCase{{1, 256, 37, 0}, {1, 2048, 300, 0}, {3, 512, 70, 0}, {8, 256, 33, 0}, {9, 256, 20, 0}, {1, 100, 13, 0}, {2, 256, 19, 8}}

// normInputs draws x [M, K+pad], g [K] and r [M, N] in dt, returning the
// tensors and their values as stored.
func normInputs(t *testing.T, r *rand.Rand, dt dtype.DType, c normCase) (map[string]*tensor.Tensor, map[string][]float64) {
	ts, vs := map[string]*tensor.Tensor{}, map[string][]float64{}
	for _, in := range []struct {
		name  string
		shape []int
		lo    float64
	}{{"x", []int{c.m, c.k + c.pad}, -2}, {"g", []int{c.k}, 0.5}, {"r", []int{c.m, c.n}, -1}} {
		v := make([]float64, tensor.Numel(in.shape))
		for i := range v {
			v[i] = in.lo + r.Float64()*(1-in.lo)*1.5
		}
		tt, err := tensor.FromFloat64s(dt, v, in.shape...)
		if err != nil {
			t.Fatal(err)
		}
		ts[in.name], vs[in.name] = tt, tt.Float64s()
	}
	return ts, vs
}

// normGraph builds rmsnorm(x)·Wᵀ + r (f32 out) with product p.
func normGraph(dt dtype.DType, c normCase, p func(g *graph.Graph, h *graph.Tensor) *graph.Tensor) *graph.Graph {
	g := graph.New()
	x := g.Input("x", dt, c.m, c.k+c.pad)
	if c.pad > 0 {
		x = x.Narrow(1, c.pad/2, c.k)
	}
	x32 := x.Cast(dtype.F32)
	inv := x32.Sqr().Mean(true, -1).Add(graph.Scalar(normEps)).Sqrt().Recip()
	h := x32.Mul(inv).Cast(dt).Mul(g.Input("g", dt, c.k))
	g.Output("y", p(g, h).Add(g.Input("r", dt, c.m, c.n)).Cast(dtype.F32))
	return g
}

// normRef returns h as the graph rounds it (float64 norm), and the
// rounding step of each element of h (its dtype's half-ulp times 2: one
// neighbour either way).
func normRef(dt dtype.DType, c normCase, xs, gs []float64) (h, step []float64) {
	rel := map[dtype.DType]float64{dtype.F32: 1.0 / (1 << 22), dtype.F16: 1.0 / 1024, dtype.BF16: 1.0 / 128}[dt]
	w := c.k + c.pad
	for m := range c.m {
		x := xs[m*w+c.pad/2 : m*w+c.pad/2+c.k]
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(c.k)+normEps)
		for k, v := range x {
			hv := roundFloat(dt, roundFloat(dt, v*inv)*gs[k])
			h = append(h, hv)
			step = append(step, 2*rel*math.Abs(hv)+1e-30)
		}
	}
	return h, step
}

// checkNorm compares got with h·Wᵀ + r (w [N, K] as float64) within the
// steps of h, the sums' f32 error and the output's rounding in dt, and
// with plain (the unfused run) within the same bound.
func checkNorm(t *testing.T, dt dtype.DType, c normCase, got, plain, h, step, w, rs []float64, extra func(i, j int) float64) {
	t.Helper()
	out := map[dtype.DType]float64{dtype.F32: 1e-6, dtype.F16: 1.0 / 1024, dtype.BF16: 1.0 / 128}[dt]
	for i := range c.m {
		for j := range c.n {
			var sum, abs, slack float64
			for k := range c.k {
				sum += h[i*c.k+k] * w[j*c.k+k]
				abs += math.Abs(h[i*c.k+k] * w[j*c.k+k])
				slack += step[i*c.k+k] * math.Abs(w[j*c.k+k])
			}
			want := sum + rs[i*c.n+j]
			tol := slack + 1e-5*abs + out*(math.Abs(sum)+math.Abs(want)) + extra(i, j) + 1e-6
			checkBoth(t, got, plain, i*c.n+j, want, tol, func() string { return fmt.Sprintf("y[%d][%d]", i, j) })
		}
	}
}

// normLinear: rmsnorm(x)·Wᵀ + r for f32, f16 and bf16 — 1 to 8 rows (the
// skinny product) and 9, K of 100 (the scalar skinny product) to 2048, x
// narrowed from wider rows.
func normLinear(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, c := range normCases {
			t.Run(fmt.Sprintf("%v/M%dK%dN%d/pad%d", dt, c.m, c.k, c.n, c.pad), func(t *testing.T) {
				in, vs := normInputs(t, r, dt, c)
				wv := make([]float64, c.n*c.k)
				for i := range wv {
					wv[i] = r.Float64()*2 - 1
				}
				wt, err := tensor.FromFloat64s(dt, wv, c.n, c.k)
				if err != nil {
					t.Fatal(err)
				}
				in["w"] = wt
				build := func() *graph.Graph {
					return normGraph(dt, c, func(g *graph.Graph, h *graph.Tensor) *graph.Tensor {
						return graph.Linear(h, g.Input("w", dt, c.n, c.k), nil)
					})
				}
				got, plain := runBoth(t, newExec, build, opts, in)
				h, step := normRef(dt, c, vs["x"], vs["g"])
				checkNorm(t, dt, c, got, plain, h, step, wt.Float64s(), vs["r"], func(int, int) float64 { return 0 })
			})
		}
	}
}

// quantNormMatmul: rmsnorm(x)·Wᵀ + r for a quantized W (Q4_K and Q8_0, the
// formats of a quantized llama), one row (the one-launch mat-vec with the
// residual add inside, on the GPU) and 3, within quantMatmul's tolerance
// for the 8-bit activations besides normLinear's.
func quantNormMatmul(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, f := range []quant.Type{quant.Q4_K, quant.Q8_0} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			for _, c := range []normCase{{1, 2048, 300, 0}, {1, 512, 37, 8}, {3, 256, 20, 0}} {
				t.Run(fmt.Sprintf("%v/%v/M%dK%dN%d/pad%d", f, dt, c.m, c.k, c.n, c.pad), func(t *testing.T) {
					in, vs := normInputs(t, r, dt, c)
					in["w"] = quantized(t, r, f, c.n, c.k)
					build := func() *graph.Graph {
						return normGraph(dt, c, func(g *graph.Graph, h *graph.Tensor) *graph.Tensor {
							q, _ := g.QInput("w", f, c.n, c.k)
							return h.QMatmul(q)
						})
					}
					got, plain := runBoth(t, newExec, build, opts, in)
					w := dequantRef(t, f, dtype.F32, in["w"].Bytes(), c.n*c.k)
					h, step := normRef(dt, c, vs["x"], vs["g"])
					checkNorm(t, dt, c, got, plain, h, step, w, vs["r"], func(i, j int) float64 {
						_, abs, amax := rowProduct(w[j*c.k:(j+1)*c.k], h[i*c.k:(i+1)*c.k])
						return abs * amax / 127
					})
				})
			}
		}
	}
}

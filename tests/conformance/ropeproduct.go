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

// An interleaved rotary embedding over a product (a llama layer's fused
// query, key and value projection as Loom loads it, each query and key
// head's rows interleaved so that rotation pairs are adjacent outputs):
// y = x·Wᵀ [M, H·D] viewed as [M, 1, H, D], then RopeIThdHeads over its
// first R heads, the others passed through. Every read of y is a view of
// one member of a pair, so fusion joins the rotation to the product as a
// pair epilogue that keeps every element (plan.Kernel.PairKeep), and a GPU
// product stores both rotated values of each pair. Checked against the
// float64 rotation of the exact products with the tables as stored,
// within the products' sums (and, for a quantized weight, the 8-bit
// activations) and the roundings to dt of y and of each operation; and
// fused against unfused on the same executor.

// ropeCase is M rows of K, H heads of D, the first R rotated.
type ropeCase struct{ m, k, h, d, r int }

// ropeGraph builds the rotation (f32 out) of y = p(x) with per-row tables
// cos and sin [M, 1, D/2].
func ropeGraph(dt dtype.DType, c ropeCase, p func(g *graph.Graph, x *graph.Tensor) *graph.Tensor) *graph.Graph {
	g := graph.New()
	y := p(g, g.Input("x", dt, c.m, c.k)).Reshape(c.m, 1, c.h, c.d)
	cos, sin := g.Input("cos", dt, c.m, 1, c.d/2), g.Input("sin", dt, c.m, 1, c.d/2)
	g.Output("y", y.RopeIThdHeads(cos, sin, c.r).Cast(dtype.F32))
	return g
}

// ropeTables returns random angles' cos and sin [M, 1, D/2] in dt.
func ropeTables(t *testing.T, r *rand.Rand, dt dtype.DType, c ropeCase) (cos, sin *tensor.Tensor) {
	t.Helper()
	cv, sv := make([]float64, c.m*c.d/2), make([]float64, c.m*c.d/2)
	for i := range cv {
		a := r.Float64() * 2 * math.Pi
		cv[i], sv[i] = math.Cos(a), math.Sin(a)
	}
	cos, err := tensor.FromFloat64s(dt, cv, c.m, 1, c.d/2)
	if err != nil {
		t.Fatal(err)
	}
	sin, err = tensor.FromFloat64s(dt, sv, c.m, 1, c.d/2)
	if err != nil {
		t.Fatal(err)
	}
	return cos, sin
}

// checkRope compares got (and plain, the unfused run) with the float64
// rotation of w [H·D, K] times xs; act(i, row) is the error of the
// product's activations for row (0 for float weights).
func checkRope(t *testing.T, dt dtype.DType, c ropeCase, got, plain, w, xs, cos, sin []float64, act func(i, row int) float64) {
	t.Helper()
	u := map[dtype.DType]float64{dtype.F32: 1.0 / (1 << 23), dtype.F16: 1.0 / 2048, dtype.BF16: 1.0 / 256}[dt]
	n := c.h * c.d
	prod := func(i, row int) (v, e float64) {
		var abs float64
		for k := range c.k {
			v += xs[i*c.k+k] * w[row*c.k+k]
			abs += math.Abs(xs[i*c.k+k] * w[row*c.k+k])
		}
		// The sum's error, the activations' quantization and the
		// rounding to dt as the product stores it.
		return v, 2e-6*abs + act(i, row) + u*math.Abs(v)
	}
	for i := range c.m {
		for j := range n / 2 {
			p0, e0 := prod(i, 2*j)
			p1, e1 := prod(i, 2*j+1)
			want, tol := [2]float64{p0, p1}, [2]float64{e0, e1}
			if j/(c.d/2) < c.r {
				k := i*c.d/2 + j%(c.d/2)
				cs, sn := cos[k], sin[k]
				want = [2]float64{p0*cs - p1*sn, p0*sn + p1*cs}
				for m := range 2 {
					// The pair's errors through the rotation, and three
					// roundings (two products and their sum).
					tol[m] = (e0+e1)*(math.Abs(cs)+math.Abs(sn)) + 3*u*(math.Abs(p0)+math.Abs(p1)+math.Abs(want[m])) + 1e-6
				}
			}
			for m := range 2 {
				at := i*n + 2*j + m
				checkBoth(t, got, plain, at, want[m], tol[m], func() string { return fmt.Sprintf("y[%d][%d] (head %d)", i, 2*j+m, (2*j+m)/c.d) })
			}
		}
	}
}

// checkRopeFused fails unless compiling b with opts (fusion on) joins the
// rotation to the product as a pair epilogue keeping every element.
func checkRopeFused(t *testing.T, b func() *graph.Graph, opts graph.Options) {
	t.Helper()
	if opts.NoFusion {
		return
	}
	p, err := b().Compile(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Plan().Steps {
		if s.Kernel != nil && s.Kernel.PairKeep {
			return
		}
	}
	t.Fatalf("no kernel of the plan keeps pairs: the rotation did not join the product")
}

var ropeCases = []ropeCase{{1, 2048, 48, 64, 40}, {1, 256, 6, 64, 4}, {3, 512, 5, 8, 3}, {1, 100, 4, 16, 2}, {9, 128, 3, 32, 2}, {1, 64, 4, 8, 4}}

// ropeLinear: the rotation over a float product for f32, f16 and bf16, 1
// to 9 rows, K of 64 to 2048, the 1B model's 48 heads of 64 (40 rotated).
func ropeLinear(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(49, 50))
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, c := range ropeCases {
			t.Run(fmt.Sprintf("%v/M%dK%dH%dD%dR%d", dt, c.m, c.k, c.h, c.d, c.r), func(t *testing.T) {
				xt := uniformMatrix(t, r, dt, c.m, c.k, 1)
				wt := uniformMatrix(t, r, dt, c.h*c.d, c.k, 4/math.Sqrt(float64(c.k)))
				cos, sin := ropeTables(t, r, dt, c)
				in := map[string]*tensor.Tensor{"x": xt, "w": wt, "cos": cos, "sin": sin}
				build := func() *graph.Graph {
					return ropeGraph(dt, c, func(g *graph.Graph, x *graph.Tensor) *graph.Tensor {
						return graph.Linear(x, g.Input("w", dt, c.h*c.d, c.k), nil)
					})
				}
				checkRopeFused(t, build, opts)
				got, plain := runBoth(t, newExec, build, opts, in)
				checkRope(t, dt, c, got, plain, wt.Float64s(), xt.Float64s(), cos.Float64s(), sin.Float64s(), func(int, int) float64 { return 0 })
			})
		}
	}
}

// quantRopeMatmul: the same over a quantized weight (Q4_K and Q8_0), one
// row and three, within quantMatmul's bound for the 8-bit activations.
func quantRopeMatmul(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(51, 52))
	for _, f := range []quant.Type{quant.Q4_K, quant.Q8_0} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			for _, c := range []ropeCase{{1, 2048, 48, 64, 40}, {1, 256, 6, 64, 4}, {3, 512, 10, 16, 6}} {
				t.Run(fmt.Sprintf("%v/%v/M%dK%dH%dD%dR%d", f, dt, c.m, c.k, c.h, c.d, c.r), func(t *testing.T) {
					xt := uniformMatrix(t, r, dt, c.m, c.k, 1)
					raw := quantized(t, r, f, c.h*c.d, c.k)
					cos, sin := ropeTables(t, r, dt, c)
					in := map[string]*tensor.Tensor{"x": xt, "w": raw, "cos": cos, "sin": sin}
					build := func() *graph.Graph {
						return ropeGraph(dt, c, func(g *graph.Graph, x *graph.Tensor) *graph.Tensor {
							q, _ := g.QInput("w", f, c.h*c.d, c.k)
							return x.QMatmul(q)
						})
					}
					checkRopeFused(t, build, opts)
					got, plain := runBoth(t, newExec, build, opts, in)
					w := dequantRef(t, f, dtype.F32, raw.Bytes(), c.h*c.d*c.k)
					xs := xt.Float64s()
					checkRope(t, dt, c, got, plain, w, xs, cos.Float64s(), sin.Float64s(), func(i, row int) float64 {
						_, abs, amax := rowProduct(w[row*c.k:(row+1)*c.k], xs[i*c.k:(i+1)*c.k])
						return abs * amax / 127
					})
				})
			}
		}
	}
}

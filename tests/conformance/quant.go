package conformance

// Quantized tensors (GGML block formats): dequantize, embedding rows and
// qmatmul, on every executor. The references are package quant's codecs
// (bit-exact with GGML's C code, checked there against golden data) for
// dequantization, and a float64 product of the dequantized weights with
// the activations for qmatmul.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

var quantFormats = []quant.Type{quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0,
	quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K}

// Quant runs the quantized group.
func Quant(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	t.Run("Dequantize", func(t *testing.T) { quantDequantize(t, newExec, opts) })
	t.Run("DequantizeEpilogue", func(t *testing.T) { quantDequantizeEpilogue(t, newExec, opts) })
	t.Run("Embedding", func(t *testing.T) { quantEmbedding(t, newExec, opts) })
	t.Run("QMatmul", func(t *testing.T) { quantMatmul(t, newExec, opts) })
	t.Run("QMatmulEpilogue", func(t *testing.T) { quantMatmulEpilogue(t, newExec, opts) })
	t.Run("QNormMatmul", func(t *testing.T) { quantNormMatmul(t, newExec, opts) })
	t.Run("QPairMatmul", func(t *testing.T) { quantPairMatmul(t, newExec, opts) })
	t.Run("QRopeMatmul", func(t *testing.T) { quantRopeMatmul(t, newExec, opts) })
	t.Run("Candle", func(t *testing.T) { CandleQMatmul(t, newExec, opts, false) })
	t.Run("Errors", quantErrors)
}

// quantized returns random normal rows [rows, k] quantized to f, and the
// raw u8 value.
func quantized(t *testing.T, r *rand.Rand, f quant.Type, rows, k int) *tensor.Tensor {
	t.Helper()
	v := make([]float32, rows*k)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	ft, err := tensor.New(v, rows, k)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := graph.QuantizeValue(f, ft)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// dequantRef decodes raw rows with package quant to dt's values.
func dequantRef(t *testing.T, f quant.Type, dt dtype.DType, raw []byte, n int) []float64 {
	t.Helper()
	out := make([]float64, n)
	switch dt {
	case dtype.F16:
		h := make([]dtype.Float16, n)
		if err := quant.DequantizeF16(f, raw, h); err != nil {
			t.Fatal(err)
		}
		for i, x := range h {
			out[i] = x.Float64()
		}
	case dtype.BF16:
		h := make([]dtype.BFloat16, n)
		if err := quant.DequantizeBF16(f, raw, h); err != nil {
			t.Fatal(err)
		}
		for i, x := range h {
			out[i] = x.Float64()
		}
	default:
		h := make([]float32, n)
		if err := quant.Dequantize(f, raw, h); err != nil {
			t.Fatal(err)
		}
		for i, x := range h {
			out[i] = float64(x)
		}
	}
	return out
}

func runOne(t *testing.T, e exec.Executor, g *graph.Graph, opts graph.Options, in map[string]*tensor.Tensor) []float64 {
	t.Helper()
	p, err := g.Compile(opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), e, in)
	if err != nil {
		t.Fatal(err)
	}
	return out["y"].Float64s()
}

// runBoth runs the graph build makes on a fresh executor with opts (got)
// and compiled without fusion on another (plain), for cases that compare
// a fused kernel with the unfused ones.
func runBoth(t *testing.T, newExec func(byte) exec.Executor, build func() *graph.Graph, opts graph.Options, in map[string]*tensor.Tensor) (got, plain []float64) {
	t.Helper()
	got = runOne(t, newExec(0x3C), build(), opts, in)
	unfused := opts
	unfused.NoFusion = true
	return got, runOne(t, newExec(0x5A), build(), unfused, in)
}

// checkBoth fails unless got[at] is want within tol and plain[at] (the
// run compiled without fusion) is within 2·tol of it; where names the
// element, asked only on failure.
func checkBoth(t *testing.T, got, plain []float64, at int, want, tol float64, where func() string) {
	t.Helper()
	if g := got[at]; !(math.Abs(g-want) <= tol) {
		t.Fatalf("%s = %v, want %v ± %v", where(), g, want, tol)
	}
	if p := plain[at]; !(math.Abs(got[at]-p) <= 2*tol) {
		t.Fatalf("%s = %v, and %v compiled without fusion", where(), got[at], p)
	}
}

// quantDequantize: every format to f32, f16 and bf16, whole tables and a
// narrowed row range (an offset view), bit-equal to package quant.
func quantDequantize(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, f := range append(quantFormats, quant.Q8_K) {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			t.Run(fmt.Sprintf("%v/%v", f, dt), func(t *testing.T) {
				tr, _ := f.Traits()
				rows, k := 5, 2*tr.Block
				raw := quantized(t, r, f, rows, k)
				rb := raw.Shape()[1]
				for _, narrow := range []bool{false, true} {
					g := graph.New()
					q, err := g.QInput("w", f, rows, k)
					if err != nil {
						t.Fatal(err)
					}
					r0, nr := 0, rows
					if narrow {
						r0, nr = 1, 3
						if q, err = q.NarrowRows(r0, nr); err != nil {
							t.Fatal(err)
						}
					}
					g.Output("y", q.Dequantize(dt))
					got := runOne(t, newExec(0xA5), g, opts, map[string]*tensor.Tensor{"w": raw})
					want := dequantRef(t, f, dt, raw.Bytes()[r0*rb:(r0+nr)*rb], nr*k)
					for i := range want {
						if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
							t.Fatalf("narrow=%v: y[%d] = %v, want %v (package quant)", narrow, i, got[i], want[i])
						}
					}
				}
			})
		}
	}
}

// quantEmbedding: rows of a quantized table picked by ids (repeats
// included), dequantized; an id out of range is a run error.
func quantEmbedding(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, f := range []quant.Type{quant.Q4_0, quant.Q6_K, quant.Q8_0} {
		t.Run(f.String(), func(t *testing.T) {
			tr, _ := f.Traits()
			rows, k := 7, tr.Block
			raw := quantized(t, r, f, rows, k)
			rb := raw.Shape()[1]
			g := graph.New()
			q, _ := g.QInput("w", f, rows, k)
			g.Output("y", q.Embedding(g.Input("ids", dtype.U32, 4), dtype.F32))
			ids, _ := tensor.New([]uint32{3, 0, 6, 3}, 4)
			got := runOne(t, newExec(0x5A), g, opts, map[string]*tensor.Tensor{"w": raw, "ids": ids})
			for j, id := range []int{3, 0, 6, 3} {
				want := dequantRef(t, f, dtype.F32, raw.Bytes()[id*rb:(id+1)*rb], k)
				for i := range k {
					if got[j*k+i] != want[i] {
						t.Fatalf("row %d (id %d) [%d] = %v, want %v", j, id, i, got[j*k+i], want[i])
					}
				}
			}
			bad, _ := tensor.New([]uint32{3, 0, 7, 3}, 4)
			p, _ := g.Compile(opts)
			if _, err := p.Run(context.Background(), newExec(0), map[string]*tensor.Tensor{"w": raw, "ids": bad}); err == nil {
				t.Errorf("id 7 of a 7-row table: no error")
			}
		})
	}
}

// quantMatmul: x [M, K] · Wᵀ for decode-sized and prefill-sized M (1 … 20
// and 512: the batches), every weight format and activation dtype,
// against the float64 product of the dequantized weights and x as stored. The tolerance covers an executor
// that quantizes the activations to 8 bits per block (the CPU, as GGML):
// Σ_k |w_k|·amax/127 over the blocks, plus the output's rounding.
func quantMatmul(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, f := range quantFormats {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			for _, m := range []int{1, 3, 8, 9, 20, 512} {
				t.Run(fmt.Sprintf("%v/%v/M%d", f, dt, m), func(t *testing.T) {
					tr, _ := f.Traits()
					n, k := 13, 2*max(tr.Block, 64)
					raw := quantized(t, r, f, n, k)
					xv := make([]float64, m*k)
					for i := range xv {
						xv[i] = r.Float64()*2 - 1
					}
					xt, err := tensor.FromFloat64s(dt, xv, m, k)
					if err != nil {
						t.Fatal(err)
					}
					xs := xt.Float64s() // as stored
					g := graph.New()
					q, _ := g.QInput("w", f, n, k)
					g.Output("y", g.Input("x", dt, m, k).QMatmul(q))
					got := runOne(t, newExec(0x3C), g, opts, map[string]*tensor.Tensor{"w": raw, "x": xt})
					w := dequantRef(t, f, dtype.F32, raw.Bytes(), n*k)
					round := map[dtype.DType]float64{dtype.F32: 1e-6, dtype.F16: 1.0 / 1024, dtype.BF16: 1.0 / 128}[dt]
					for i := range m {
						for j := range n {
							sum, abs, amax := rowProduct(w[j*k:(j+1)*k], xs[i*k:(i+1)*k])
							tol := abs*amax/127 + math.Abs(sum)*round + 1e-6
							if g := got[i*n+j]; !(math.Abs(g-sum) <= tol) {
								t.Fatalf("y[%d][%d] = %v, want %v ± %v", i, j, g, sum, tol)
							}
						}
					}
				})
			}
		}
	}
}

// uniformValues draws a tensor of dt and shape uniform in [−1, 1) and
// returns it with its values as stored.
func uniformValues(t *testing.T, r *rand.Rand, dt dtype.DType, shape ...int) (*tensor.Tensor, []float64) {
	t.Helper()
	v := make([]float64, tensor.Numel(shape))
	for i := range v {
		v[i] = r.Float64()*2 - 1
	}
	tt, err := tensor.FromFloat64s(dt, v, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return tt, tt.Float64s()
}

// rowProduct returns Σ w·x over one weight row and one activation row, Σ
// |w| and max |x|: the reference and the terms of the 8-bit activations'
// error bound.
func rowProduct(w, x []float64) (sum, abs, amax float64) {
	for l := range w {
		sum += w[l] * x[l]
		abs += math.Abs(w[l])
		amax = max(amax, math.Abs(x[l]))
	}
	return sum, abs, amax
}

// quantMatmulEpilogue: (x·Wᵀ + r)·s cast to f32, r [M, N] and s [N]
// broadcast over the rows, the chain a fused kernel applies as the
// product stores (a quantized decode step's residual add: one kernel with
// the product on the GPU for one row, the parts otherwise). Against the
// float64 reference within quantMatmul's tolerance (plus the add's and
// the multiply's roundings), and bit for bit against the same graph
// compiled without fusion on the same executor: the epilogue computes
// what the unfused kernels store.
func quantMatmulEpilogue(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(27, 28))
	for _, f := range quantFormats {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			for _, m := range []int{1, 3} {
				t.Run(fmt.Sprintf("%v/%v/M%d", f, dt, m), func(t *testing.T) {
					tr, _ := f.Traits()
					n, k := 37, 2*max(tr.Block, 64)
					raw := quantized(t, r, f, n, k)
					vals := func(shape ...int) (*tensor.Tensor, []float64) { return uniformValues(t, r, dt, shape...) }
					xt, xs := vals(m, k)
					rt, rs := vals(m, n)
					st, ss := vals(n)
					build := func() *graph.Graph {
						g := graph.New()
						q, _ := g.QInput("w", f, n, k)
						y := g.Input("x", dt, m, k).QMatmul(q).Add(g.Input("r", dt, m, n)).Mul(g.Input("s", dt, n))
						g.Output("y", y.Cast(dtype.F32))
						return g
					}
					in := map[string]*tensor.Tensor{"w": raw, "x": xt, "r": rt, "s": st}
					got, plain := runBoth(t, newExec, build, opts, in)
					w := dequantRef(t, f, dtype.F32, raw.Bytes(), n*k)
					round := map[dtype.DType]float64{dtype.F32: 1e-6, dtype.F16: 1.0 / 1024, dtype.BF16: 1.0 / 128}[dt]
					for i := range m {
						for j := range n {
							sum, abs, amax := rowProduct(w[j*k:(j+1)*k], xs[i*k:(i+1)*k])
							want := (sum + rs[i*n+j]) * ss[j]
							tol := (abs*amax/127+(math.Abs(sum)+math.Abs(sum+rs[i*n+j]))*round)*math.Abs(ss[j]) + math.Abs(want)*round + 1e-6
							g := got[i*n+j]
							if !(math.Abs(g-want) <= tol) {
								t.Fatalf("y[%d][%d] = %v, want %v ± %v", i, j, g, want, tol)
							}
							if math.Float64bits(g) != math.Float64bits(plain[i*n+j]) {
								t.Fatalf("y[%d][%d] = %v, and %v compiled without fusion", i, j, g, plain[i*n+j])
							}
						}
					}
				})
			}
		}
	}
}

// candleCases are Candle's own QMatMul tests (candle-core's
// tests/quantized_tests.rs, quantized_matmul and quantized_matmul_neg): x
// [3, 64] times a [4, 64] weight quantized to Q4_0 by GGML's reference
// quantizer, and the values Candle asserts for its CPU, rounded to
// integers. x and w are built in float32 as Candle builds them.
var candleCases = []struct {
	name string
	x, w func(i int) float32
	want []float64
}{
	{"quantized_matmul",
		func(i int) float32 { return float32(i) },
		func(i int) float32 { return float32(i) },
		[]float64{85120, 214562, 345455, 474748, 213475, 604465, 1000686, 1388317, 341876, 994283, 1655709, 2301518}},
	{"quantized_matmul_neg",
		func(i int) float32 { return float32(i) - float32(3*64)/2 },
		func(i int) float32 { third := float32(64 * 4); third /= 3; return float32(i) - third },
		[]float64{243524, -19596, -285051, -549815, 23777, 21651, 19398, 18367, -196472, 63012, 324585, 587902}},
}

// CandleQMatmul runs candleCases on newExec's executors: on every executor
// within quantMatmul's bound of the float64 product of the dequantized
// weight (Candle's CUDA values differ from its CPU's by up to 0.3%, its
// 8-bit activations rounded otherwise, and so may a GPU's here); with
// exact, also equal to Candle's CPU values once rounded, which an executor
// following GGML's CPU algorithm (activations quantized to Q8_0, 32 values
// a block) gives: the CPU executor (tests/cpu_test.go).
func CandleQMatmul(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options, exact bool) {
	const m, k, n = 3, 64, 4
	for _, c := range candleCases {
		t.Run(c.name, func(t *testing.T) {
			xv, wv := make([]float32, m*k), make([]float32, n*k)
			for i := range xv {
				xv[i] = c.x(i)
			}
			for i := range wv {
				wv[i] = c.w(i)
			}
			xt, err := tensor.New(xv, m, k)
			if err != nil {
				t.Fatal(err)
			}
			wt, err := tensor.New(wv, n, k)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := graph.QuantizeValue(quant.Q4_0, wt)
			if err != nil {
				t.Fatal(err)
			}
			g := graph.New()
			q, _ := g.QInput("w", quant.Q4_0, n, k)
			g.Output("y", g.Input("x", dtype.F32, m, k).QMatmul(q))
			got := runOne(t, newExec(0x3C), g, opts, map[string]*tensor.Tensor{"w": raw, "x": xt})
			w := dequantRef(t, quant.Q4_0, dtype.F32, raw.Bytes(), n*k)
			xs := xt.Float64s()
			for i := range m {
				for j := range n {
					sum, abs, amax := rowProduct(w[j*k:(j+1)*k], xs[i*k:(i+1)*k])
					tol := abs*amax/127 + math.Abs(sum)*1e-6 + 1e-6
					g := got[i*n+j]
					if !(math.Abs(g-sum) <= tol) {
						t.Errorf("y[%d][%d] = %v, want %v ± %v", i, j, g, sum, tol)
					}
					if exact && math.Round(g) != c.want[i*n+j] {
						t.Errorf("y[%d][%d] = %v, Candle's CPU %v", i, j, g, c.want[i*n+j])
					}
				}
			}
		})
	}
}

func quantErrors(t *testing.T) {
	g := graph.New()
	if _, err := g.QInput("w", quant.Q4_K, 4, 100); err == nil || !strings.Contains(err.Error(), "qinput") || !strings.Contains(err.Error(), "multiple") {
		t.Errorf("q4_k rows of 100: %v", err)
	}
	if _, err := g.QInput("w2", quant.F32, 4, 64); err == nil {
		t.Errorf("f32 as a block format: no error")
	}
	q, err := g.QInput("w3", quant.Q8_0, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	y := g.Input("x", dtype.F32, 2, 32).QMatmul(q)
	if err := y.Err(); err == nil || !strings.Contains(err.Error(), "qmatmul") || !strings.Contains(err.Error(), "K = 64") {
		t.Errorf("qmatmul K mismatch: %v", err)
	}
	y = g.Input("x64", dtype.F64, 2, 64).QMatmul(q)
	if err := y.Err(); err == nil || !strings.Contains(err.Error(), "f32, f16 or bf16") {
		t.Errorf("qmatmul of f64: %v", err)
	}
	if d := q.Dequantize(dtype.U8); d.Err() == nil {
		t.Errorf("dequantize to u8: no error")
	}
}

// quantDequantizeEpilogue: a dequantization read element for element by
// the chain after it, round(round(w·s) + b) in the output dtype then cast
// to f32 (s [K] broadcast over the rows, b [rows, K]): one kernel on the
// GPU, the dequantized tensor never stored (plan.DequantAt). Every format
// and output dtype, whole tables, a narrowed row range and an embedding's
// picked rows: bit for bit the same graph compiled without fusion on the
// same executor, and within a rounding step of each op of the float64
// reference from package quant's values (w·s rounds once in f32 first).
func quantDequantizeEpilogue(t *testing.T, newExec func(byte) exec.Executor, opts graph.Options) {
	r := rand.New(rand.NewPCG(29, 30))
	for _, f := range append(quantFormats, quant.Q8_K) {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			t.Run(fmt.Sprintf("%v/%v", f, dt), func(t *testing.T) {
				tr, _ := f.Traits()
				rows, k := 5, 2*tr.Block
				raw := quantized(t, r, f, rows, k)
				vals := func(shape ...int) (*tensor.Tensor, []float64) { return uniformValues(t, r, dt, shape...) }
				st, ss := vals(k)
				for _, c := range []struct {
					name string
					pick []int // the table's rows the output holds, in order
				}{{"whole", []int{0, 1, 2, 3, 4}}, {"narrowed", []int{1, 2, 3}}, {"embedding", []int{4, 0, 4, 2}}} {
					bt, bs := vals(len(c.pick), k)
					ids := make([]float64, len(c.pick))
					for i, p := range c.pick {
						ids[i] = float64(p)
					}
					it, err := tensor.FromFloat64s(dtype.U32, ids, len(ids))
					if err != nil {
						t.Fatal(err)
					}
					build := func() *graph.Graph {
						g := graph.New()
						q, err := g.QInput("w", f, rows, k)
						if err != nil {
							t.Fatal(err)
						}
						var w *graph.Tensor
						switch c.name {
						case "whole":
							w = q.Dequantize(dt)
						case "narrowed":
							nq, err := q.NarrowRows(1, 3)
							if err != nil {
								t.Fatal(err)
							}
							w = nq.Dequantize(dt)
						default:
							w = q.Embedding(g.Input("ids", dtype.U32, len(ids)), dt)
						}
						g.Output("y", w.Mul(g.Input("s", dt, k)).Add(g.Input("b", dt, len(c.pick), k)).Cast(dtype.F32))
						return g
					}
					in := map[string]*tensor.Tensor{"w": raw, "s": st, "b": bt}
					if c.name == "embedding" {
						in["ids"] = it
					}
					got, plain := runBoth(t, newExec, build, opts, in)
					ws := dequantRef(t, f, dt, raw.Bytes(), rows*k)
					step := map[dtype.DType]float64{dtype.F32: 1.0 / (1 << 23), dtype.F16: 1.0 / 1024, dtype.BF16: 1.0 / 128}[dt]
					for i, p := range c.pick {
						for j := range k {
							at := i*k + j
							ws1 := ws[p*k+j] * ss[j]
							want := ws1 + bs[at]
							tol := step*(math.Abs(ws1)+math.Abs(want)) + 1e-30
							if g := got[at]; !(math.Abs(g-want) <= tol) {
								t.Fatalf("%s: y[%d][%d] = %v, want %v ± %v", c.name, i, j, g, want, tol)
							}
							if math.Float64bits(got[at]) != math.Float64bits(plain[at]) {
								t.Fatalf("%s: y[%d][%d] = %v, and %v compiled without fusion", c.name, i, j, got[at], plain[at])
							}
						}
					}
				}
			})
		}
	}
}

package conformance

// Matrix products: matmul (with batch broadcasting), mv, dot and linear.
//
// The reference is a plain float64 sum over the contracted dim, written from
// Candle's matmul/broadcast_matmul semantics (graph/matmul.go documents
// Loom's): it never calls exec/cpu or a BLAS. Each expected element carries
// the scale Σ|a·b| of its terms, the magnitude the rounding errors of any
// summation order are proportional to (see mmTol).

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
)

// Matmul runs the matrix-product group: every float dtype, batch
// broadcasting, operands read through views (transposed, narrowed, offset,
// and views no GEMM can read, which are copied first), degenerate and empty
// dims, a long contraction, Mv, Dot, Linear and the builder errors.
func Matmul(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	s := newSuite(t, newExec, opts)
	t.Run("DTypes", s.mmDTypes)
	t.Run("Shapes", s.mmShapes)
	t.Run("BatchBroadcast", s.mmBatch)
	t.Run("Views", s.mmViews)
	t.Run("LargeK", s.mmLargeK)
	t.Run("Mv", s.mmMv)
	t.Run("Dot", s.mmDot)
	t.Run("Linear", s.mmLinear)
	t.Run("FewRows", s.mmFewRows)
	t.Run("NormLinear", func(t *testing.T) { normLinear(t, newExec, opts) })
	t.Run("PairLinear", func(t *testing.T) { pairLinear(t, newExec, opts) })
	t.Run("RopeLinear", func(t *testing.T) { ropeLinear(t, newExec, opts) })
	t.Run("Errors", mmErrors)
}

// mmGen draws matmul inputs: uniform in [−1, 1], no specials (how a BLAS
// propagates NaN and Inf through its blocking is not specified).
var mmGen = gen{f: uniform(-1, 1)}

// mmTol is the tolerance of a product with contraction length k, against
// the scale Σ|a·b| of each element's terms: rel·√k of the scale for f32
// (1e-6·√k; a sum of k terms errs by at most k·u·Σ|a·b| in the worst case
// and about √k·u typically, u = 6e-8) and f64 (2e-15·√k). f16 and bf16
// accumulate in f32 and round once on store: 1 ulp of the rounded result
// (the double rounding exact → f32 → half) plus the f32 accumulation error.
func mmTol(k int) tolerance {
	r := math.Sqrt(float64(max(k, 1)))
	return tolerance{name: fmt.Sprintf("gemm K=%d", k), ulps: 1, rel16: 1e-6 * r, rel32: 1e-6 * r, rel64: 2e-15 * r}
}

// mmRef is the product of a [..., M, K] and b [..., K, N] with the batch
// dims broadcast: the exact result (to float64 rounding, far below every
// tolerance) and the per-element scale Σ|a·b|.
func mmRef(dt dtype.DType, a, b vals) (vals, []float64) {
	ra, rb := len(a.shape), len(b.shape)
	m, k, n := a.shape[ra-2], a.shape[ra-1], b.shape[rb-1]
	batch, ok := broadcastShapes(a.shape[:ra-2], b.shape[:rb-2])
	if !ok {
		panic("mmRef: batch dims do not broadcast")
	}
	a = a.broadcast(append(slices.Clone(batch), m, k))
	b = b.broadcast(append(slices.Clone(batch), k, n))
	out := newVals(dt, append(slices.Clone(batch), m, n))
	scale := make([]float64, out.n())
	for bt := range numel(batch) {
		for i := range m {
			for j := range n {
				var sum, abs float64
				for l := range k {
					p := a.f[(bt*m+i)*k+l] * b.f[(bt*k+l)*n+j]
					sum += p
					abs += math.Abs(p)
				}
				o := (bt*m+i)*n + j
				out.f[o], scale[o] = sum, abs
			}
		}
	}
	return out, scale
}

// mmExpect declares output name = y, expected to be a·b (logical values).
func (c *tcase) mmExpect(name string, y *graph.Tensor, a, b vals) {
	ref, scale := mmRef(a.dt, a, b)
	c.expect(name, y, want{v: ref, tol: mmTol(a.shape[len(a.shape)-1]), scale: scale})
}

func (s *suite) mmDTypes(t *testing.T) {
	for _, dt := range wideFloats {
		if dt == dtype.F8E4M3 {
			continue // no f8 GEMM: refused (matmul errors below)
		}
		t.Run(dt.String(), func(t *testing.T) {
			c := s.newCase(t)
			a, av := c.input("a", dt, []int{2, 5, 7}, mmGen)
			b, bv := c.input("b", dt, []int{2, 7, 3}, mmGen)
			c.mmExpect("y", a.Matmul(b), av, bv)
			c.run()
		})
	}
}

// mmShapes: gemv shapes (M = 1, N = 1), K = 1, and empty dims — M, N or the
// batch 0 give empty outputs, K = 0 gives zeros.
func (s *suite) mmShapes(t *testing.T) {
	for _, sh := range []struct{ a, b []int }{
		{[]int{1, 9}, []int{9, 4}},
		{[]int{6, 9}, []int{9, 1}},
		{[]int{6, 1}, []int{1, 4}},
		{[]int{1, 1}, []int{1, 1}},
		{[]int{3, 1, 9}, []int{3, 9, 5}},
		{[]int{0, 9}, []int{9, 4}},
		{[]int{6, 9}, []int{9, 0}},
		{[]int{6, 0}, []int{0, 4}},
		{[]int{2, 6, 0}, []int{0, 4}},
		{[]int{0, 6, 9}, []int{0, 9, 4}},
		{[]int{33, 65}, []int{65, 17}},
	} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			t.Run(fmt.Sprintf("%v%v·%v", dt, sh.a, sh.b), func(t *testing.T) {
				c := s.newCase(t)
				a, av := c.input("a", dt, sh.a, mmGen)
				b, bv := c.input("b", dt, sh.b, mmGen)
				c.mmExpect("y", a.Matmul(b), av, bv)
				c.run()
			})
		}
	}
}

// mmBatch: batch dims broadcast numpy-style, ranks may differ. A batch
// broadcast over every batch dim (b [K, N] under a [2, 3, M, K]) is a batch
// stride of 0; a [2, 1, M, K] · b [3, K, N] broadcasts each operand over a
// different dim, which no single strided batch can read: both are copied.
func (s *suite) mmBatch(t *testing.T) {
	for _, sh := range []struct{ a, b []int }{
		{[]int{2, 1, 4, 5}, []int{3, 5, 6}},
		{[]int{2, 3, 4, 5}, []int{5, 6}},
		{[]int{4, 5}, []int{2, 3, 5, 6}},
		{[]int{1, 4, 5}, []int{3, 5, 6}},
		{[]int{2, 1, 4, 5}, []int{2, 3, 5, 6}},
	} {
		for _, dt := range []dtype.DType{dtype.F64, dtype.F16} {
			t.Run(fmt.Sprintf("%v%v·%v", dt, sh.a, sh.b), func(t *testing.T) {
				c := s.newCase(t)
				a, av := c.input("a", dt, sh.a, mmGen)
				b, bv := c.input("b", dt, sh.b, mmGen)
				c.mmExpect("y", a.Matmul(b), av, bv)
				c.run()
			})
		}
	}
}

// mmViews: operands read through views. Transposes, narrows (offsets and
// leading dimensions larger than the row) and a permuted batch whose
// stride is not the matrix size are read in place; a view without a unit
// stride (every other element of a row) and a permuted batch that does not
// collapse to one stride are copied first. Producers are computed values
// too (an elementwise chain before the product, an epilogue after it).
func (s *suite) mmViews(t *testing.T) {
	const M, K, N = 5, 6, 4
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16} {
		cases := []struct {
			name  string
			build func(c *tcase) (*graph.Tensor, *graph.Tensor, vals, vals)
		}{
			{"transposed", func(c *tcase) (*graph.Tensor, *graph.Tensor, vals, vals) {
				a, av := c.input("a", dt, []int{K, M}, mmGen)
				b, bv := c.input("b", dt, []int{N, K}, mmGen)
				return a.T(), b.T(), av.transpose(0, 1), bv.transpose(0, 1)
			}},
			{"narrowed", func(c *tcase) (*graph.Tensor, *graph.Tensor, vals, vals) {
				a, av := c.input("a", dt, []int{M + 2, K + 3}, mmGen)
				b, bv := c.input("b", dt, []int{K + 1, N + 5}, mmGen)
				return a.Narrow(0, 2, M).Narrow(1, 1, K), b.Narrow(0, 1, K).Narrow(1, 3, N), av.narrow(0, 2, M).narrow(1, 1, K), bv.narrow(0, 1, K).narrow(1, 3, N)
			}},
			{"narrowed-transposed", func(c *tcase) (*graph.Tensor, *graph.Tensor, vals, vals) {
				a, av := c.input("a", dt, []int{K + 2, M + 1}, mmGen)
				b, bv := c.input("b", dt, []int{N, K}, mmGen)
				at := a.Narrow(0, 1, K).Narrow(1, 1, M).T()
				return at, b.T(), av.narrow(0, 1, K).narrow(1, 1, M).transpose(0, 1), bv.transpose(0, 1)
			}},
			{"permuted-batch", func(c *tcase) (*graph.Tensor, *graph.Tensor, vals, vals) {
				a, av := c.input("a", dt, []int{M, 3, K}, mmGen)
				b, bv := c.input("b", dt, []int{3, K, N}, mmGen)
				return a.Permute(1, 0, 2), b, av.permute([]int{1, 0, 2}), bv
			}},
			{"stepped-copy", func(c *tcase) (*graph.Tensor, *graph.Tensor, vals, vals) {
				a, av := c.input("a", dt, []int{M, K, 2}, mmGen)
				b, bv := c.input("b", dt, []int{K, N}, mmGen)
				return a.Narrow(2, 1, 1).Squeeze(2), b, av.narrow(2, 1, 1).reshape([]int{M, K}), bv
			}},
			{"batch-permute-copy", func(c *tcase) (*graph.Tensor, *graph.Tensor, vals, vals) {
				a, av := c.input("a", dt, []int{3, 2, M, K}, mmGen)
				b, bv := c.input("b", dt, []int{2, 3, K, N}, mmGen)
				return a.Permute(1, 0, 2, 3), b, av.permute([]int{1, 0, 2, 3}), bv
			}},
			{"computed", func(c *tcase) (*graph.Tensor, *graph.Tensor, vals, vals) {
				// a·2 − 1 is exact in every float dtype for inputs in [0, 1]
				// that are dtype values; the product reads the stored chain.
				av := mmGen.draw(c.r, dt, []int{M, K})
				for i := range av.f {
					av.f[i] = math.Abs(av.f[i])
				}
				a := c.inputVals("a", av)
				b, bv := c.input("b", dt, []int{N, K}, mmGen)
				want := newVals(dt, av.shape)
				for i, x := range av.f {
					want.f[i] = roundFloat(dt, x*2-1) // the stored affine
				}
				return a.Affine(2, -1), b.T(), want, bv.transpose(0, 1)
			}},
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%v", tc.name, dt), func(t *testing.T) {
				c := s.newCase(t)
				a, b, av, bv := tc.build(c)
				c.mmExpect("y", a.Matmul(b), av, bv)
				c.run()
			})
		}
	}
}

// mmLargeK: a contraction of 16384 terms in f32, checked element by element
// (mmTol) and normwise: ‖got − ref‖ / ‖ref‖ ≤ 1e-5·√K over the whole
// output, against the float64 reference.
func (s *suite) mmLargeK(t *testing.T) {
	const M, K, N = 3, 16384, 5
	c := s.newCase(t)
	a, av := c.input("a", dtype.F32, []int{M, K}, mmGen)
	b, bv := c.input("b", dtype.F32, []int{K, N}, mmGen)
	c.mmExpect("y", a.Matmul(b), av, bv)
	c.run()
	ref, _ := mmRef(dtype.F32, av, bv)
	prog := c.compile()
	for i, e := range c.s.execs {
		out, err := prog.Run(context.Background(), e, c.inputs)
		if err != nil {
			t.Fatalf("run on %s: %v", e.Name(), err)
		}
		got, err := fromTensor(out["y"])
		if err != nil {
			t.Fatal(err)
		}
		var num, den float64
		for k := range ref.f {
			num += (got.f[k] - ref.f[k]) * (got.f[k] - ref.f[k])
			den += ref.f[k] * ref.f[k]
		}
		rel, bound := math.Sqrt(num/den), 1e-5*math.Sqrt(K)
		if !(rel <= bound) {
			t.Errorf("%s (poison 0x%02X): normwise relative error %.3g, bound %.3g", e.Name(), Poisons[i], rel, bound)
		}
		t.Logf("%s: K=%d f32 normwise relative error %.3g (bound %.3g)", e.Name(), K, rel, bound)
	}
}

func (s *suite) mmMv(t *testing.T) {
	for _, sh := range [][]int{{5, 7}, {2, 5, 7}, {1, 7}, {5, 0}} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			t.Run(fmt.Sprintf("%v%v", dt, sh), func(t *testing.T) {
				c := s.newCase(t)
				k := sh[len(sh)-1]
				m, mv := c.input("m", dt, sh, mmGen)
				v, vv := c.input("v", dt, []int{k}, mmGen)
				ref, scale := mmRef(dt, mv, vv.reshape([]int{k, 1}))
				y := m.Mv(v)
				c.expect("y", y, want{v: ref.reshape(sh[:len(sh)-1]), tol: mmTol(k), scale: scale})
				c.run()
			})
		}
	}
}

// mmDot: the result is 0-d, as torch.dot's.
func (s *suite) mmDot(t *testing.T) {
	for _, k := range []int{1, 13, 1000, 0} {
		for _, dt := range []dtype.DType{dtype.F64, dtype.F16} {
			t.Run(fmt.Sprintf("%v[%d]", dt, k), func(t *testing.T) {
				c := s.newCase(t)
				a, av := c.input("a", dt, []int{k}, mmGen)
				b, bv := c.input("b", dt, []int{k}, mmGen)
				ref, scale := mmRef(dt, av.reshape([]int{1, k}), bv.reshape([]int{k, 1}))
				c.expect("y", graph.Dot(a, b), want{v: ref.reshape([]int{}), tol: mmTol(k), scale: scale})
				c.run()
			})
		}
	}
}

// mmLinear: x·wᵀ + b, with and without bias, for x of rank 1, 2 and 3, and
// the transformer block shape gelu(linear) + residual in one epilogue.
// mmFewRows: products of a few rows against a weight stored as rows (a
// decode step's linear layers; the CPU reads such weights in place,
// hgemv), f32, f16 and bf16: one to five rows (five takes the general path), K a
// multiple of 32, of 8 only, and neither (the kernel's last K mod 8 values
// in Go), K below 8, a weight narrowed at an offset with a row stride
// above K, A transposed, and a batch of rows against one weight.
func (s *suite) mmFewRows(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, sh := range []struct{ m, k, n int }{
			{1, 576, 67}, {1, 40, 9}, {1, 13, 33}, {1, 5, 7}, {2, 100, 31}, {3, 64, 1}, {4, 75, 50}, {5, 64, 9},
		} {
			t.Run(fmt.Sprintf("%v/M%d·K%d·N%d", dt, sh.m, sh.k, sh.n), func(t *testing.T) {
				c := s.newCase(t)
				x, xv := c.input("x", dt, []int{sh.m, sh.k}, mmGen)
				w, wv := c.input("w", dt, []int{sh.n, sh.k}, mmGen)
				c.mmExpect("y", x.Matmul(w.T()), xv, wv.transpose(0, 1))
				c.run()
			})
		}
		t.Run(fmt.Sprintf("%v/narrowed-weight", dt), func(t *testing.T) {
			const m, k, n = 2, 48, 21
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{m, k}, mmGen)
			w, wv := c.input("w", dt, []int{n + 4, k + 9}, mmGen)
			wn, wnv := w.Narrow(0, 3, n).Narrow(1, 5, k), wv.narrow(0, 3, n).narrow(1, 5, k)
			c.mmExpect("y", x.Matmul(wn.T()), xv, wnv.transpose(0, 1))
			c.run()
		})
		t.Run(fmt.Sprintf("%v/transposed-rows", dt), func(t *testing.T) {
			const m, k, n = 3, 56, 17
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{k, m}, mmGen)
			w, wv := c.input("w", dt, []int{n, k}, mmGen)
			c.mmExpect("y", x.T().Matmul(w.T()), xv.transpose(0, 1), wv.transpose(0, 1))
			c.run()
		})
		t.Run(fmt.Sprintf("%v/batch", dt), func(t *testing.T) {
			const k, n = 72, 19
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{3, 1, k}, mmGen)
			w, wv := c.input("w", dt, []int{n, k}, mmGen)
			c.mmExpect("y", x.Matmul(w.T()), xv, wv.transpose(0, 1))
			c.run()
		})
	}
}

func (s *suite) mmLinear(t *testing.T) {
	const in, out = 6, 4
	for _, xs := range [][]int{{in}, {5, in}, {2, 3, in}} {
		for _, bias := range []bool{false, true} {
			for _, dt := range []dtype.DType{dtype.F32, dtype.F16} {
				t.Run(fmt.Sprintf("%v%v/bias=%v", dt, xs, bias), func(t *testing.T) {
					c := s.newCase(t)
					x, xv := c.input("x", dt, xs, mmGen)
					w, wv := c.input("w", dt, []int{out, in}, mmGen)
					x2 := xv
					if len(xs) == 1 {
						x2 = xv.reshape([]int{1, in})
					}
					ref, scale := mmRef(dt, x2, wv.transpose(0, 1))
					oshape := append(slices.Clone(xs[:len(xs)-1]), out)
					ref = ref.reshape(oshape)
					var bt *graph.Tensor
					tol := mmTol(in)
					if bias {
						var bv vals
						bt, bv = c.input("b", dt, []int{out}, mmGen)
						for i := range ref.f {
							ref.f[i] += bv.f[i%out]
							scale[i] += math.Abs(bv.f[i%out])
						}
						if dt == dtype.F16 {
							// The product rounds to f16 before the add (two
							// steps, two roundings): half an f16 ulp of the
							// product more, at most 2^-11 of the scale.
							tol.ulps, tol.rel16 = 2, tol.rel16+1.0/2048
						}
					}
					c.expect("y", graph.Linear(x, w, bt), want{v: ref, tol: tol, scale: scale})
					c.run()
				})
			}
		}
	}
	// A decode step's products: 8 sequences of one token times a weight
	// of a few thousand rows, the residual added in the epilogue (on the
	// GPU a skinny product of 8 rows with the epilogue fused).
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		t.Run(fmt.Sprintf("decode/%v", dt), func(t *testing.T) {
			const b, k, n = 8, 1024, 4100
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{b, 1, k}, mmGen)
			w, wv := c.input("w", dt, []int{n, k}, mmGen)
			r, rv := c.input("r", dt, []int{b, 1, n}, mmGen)
			ref, scale := mmRef(dt, xv, wv.transpose(0, 1))
			for i := range ref.f {
				ref.f[i] += rv.f[i]
				scale[i] += math.Abs(rv.f[i])
			}
			tol := mmTol(k)
			if dt == dtype.BF16 {
				// The product rounds to bf16 before the add: half a bf16
				// ulp of it more, at most 2^-8 of the scale.
				tol.ulps, tol.rel16 = 2, tol.rel16+1.0/256
			}
			c.expect("y", graph.Linear(x, w, nil).Add(r), want{v: ref, tol: tol, scale: scale})
			c.run()
		})
	}
	t.Run("epilogue", func(t *testing.T) {
		c := s.newCase(t)
		x, xv := c.input("x", dtype.F64, []int{2, 3, in}, mmGen)
		w, wv := c.input("w", dtype.F64, []int{out, in}, mmGen)
		b, bv := c.input("b", dtype.F64, []int{out}, mmGen)
		r, rv := c.input("r", dtype.F64, []int{2, 3, out}, mmGen)
		ref, scale := mmRef(dtype.F64, xv, wv.transpose(0, 1))
		for i := range ref.f {
			h := ref.f[i] + bv.f[i%out]
			ref.f[i] = 0.5*h*(1+math.Tanh(math.Sqrt(2/math.Pi)*(h+0.044715*h*h*h))) + rv.f[i]
			scale[i] += math.Abs(bv.f[i%out]) + math.Abs(rv.f[i])
		}
		c.expect("y", graph.Linear(x, w, b).Gelu().Add(r), want{v: ref, tol: mmTol(in), scale: scale})
		c.run()
	})
}

// mmErrors: bad operands are builder errors naming the op the caller used
// (matmul, mv, dot, linear) with every operand's dtype and shape; the graph
// then refuses to compile. Nothing panics.
func mmErrors(t *testing.T) {
	type op func(g *graph.Graph) *graph.Tensor
	in := func(g *graph.Graph, name string, dt dtype.DType, shape ...int) *graph.Tensor {
		return g.Input(name, dt, shape...)
	}
	for _, tc := range []struct {
		name  string
		build op
		frags []string
	}{
		{"matmul int", func(g *graph.Graph) *graph.Tensor {
			return in(g, "a", dtype.U8, 2, 3).Matmul(in(g, "b", dtype.U8, 3, 4))
		}, []string{"matmul", "u8[2 3]", "u8[3 4]", "not supported"}},
		{"matmul i64", func(g *graph.Graph) *graph.Tensor {
			return in(g, "a", dtype.I64, 2, 3).Matmul(in(g, "b", dtype.I64, 3, 4))
		}, []string{"matmul", "i64[2 3]", "i64[3 4]"}},
		{"matmul f8e4m3", func(g *graph.Graph) *graph.Tensor {
			return in(g, "a", dtype.F8E4M3, 2, 3).Matmul(in(g, "b", dtype.F8E4M3, 3, 4))
		}, []string{"matmul", "f8e4m3[2 3]", "f8e4m3[3 4]", "not supported", "cast to"}},
		{"linear f8e4m3", func(g *graph.Graph) *graph.Tensor {
			return graph.Linear(in(g, "x", dtype.F8E4M3, 2, 6), in(g, "w", dtype.F8E4M3, 4, 6), nil)
		}, []string{"linear", "f8e4m3[2 6]", "f8e4m3[4 6]", "not supported"}},
		{"matmul dtypes", func(g *graph.Graph) *graph.Tensor {
			return in(g, "a", dtype.F32, 2, 3).Matmul(in(g, "b", dtype.F16, 3, 4))
		}, []string{"matmul", "f32[2 3]", "f16[3 4]", "mismatch"}},
		{"matmul rank", func(g *graph.Graph) *graph.Tensor {
			return in(g, "a", dtype.F32, 3).Matmul(in(g, "b", dtype.F32, 3, 4))
		}, []string{"matmul", "f32[3]", "f32[3 4]", "rank"}},
		{"matmul inner", func(g *graph.Graph) *graph.Tensor {
			return in(g, "a", dtype.F32, 2, 3).Matmul(in(g, "b", dtype.F32, 4, 5))
		}, []string{"matmul", "f32[2 3]", "f32[4 5]", "inner dims"}},
		{"matmul batch", func(g *graph.Graph) *graph.Tensor {
			return in(g, "a", dtype.F32, 2, 2, 3).Matmul(in(g, "b", dtype.F32, 3, 3, 4))
		}, []string{"matmul", "f32[2 2 3]", "f32[3 3 4]", "batch"}},
		{"mv vector", func(g *graph.Graph) *graph.Tensor {
			return in(g, "m", dtype.F32, 2, 3).Mv(in(g, "v", dtype.F32, 3, 1))
		}, []string{"mv", "f32[2 3]", "f32[3 1]"}},
		{"mv inner", func(g *graph.Graph) *graph.Tensor {
			return in(g, "m", dtype.BF16, 2, 3).Mv(in(g, "v", dtype.BF16, 4))
		}, []string{"mv", "bf16[2 3]", "bf16[4]", "inner dims"}},
		{"mv int", func(g *graph.Graph) *graph.Tensor {
			return in(g, "m", dtype.U32, 2, 3).Mv(in(g, "v", dtype.U32, 3))
		}, []string{"mv", "u32[2 3]", "u32[3]"}},
		{"dot lengths", func(g *graph.Graph) *graph.Tensor {
			return graph.Dot(in(g, "a", dtype.F64, 3), in(g, "b", dtype.F64, 4))
		}, []string{"dot", "f64[3]", "f64[4]"}},
		{"dot matrix", func(g *graph.Graph) *graph.Tensor {
			return graph.Dot(in(g, "a", dtype.F64, 3, 1), in(g, "b", dtype.F64, 3))
		}, []string{"dot", "f64[3 1]", "f64[3]"}},
		{"dot dtypes", func(g *graph.Graph) *graph.Tensor {
			return graph.Dot(in(g, "a", dtype.F64, 3), in(g, "b", dtype.F32, 3))
		}, []string{"dot", "f64[3]", "f32[3]", "mismatch"}},
		{"linear in", func(g *graph.Graph) *graph.Tensor {
			return graph.Linear(in(g, "x", dtype.F32, 2, 5), in(g, "w", dtype.F32, 4, 6), nil)
		}, []string{"linear", "f32[2 5]", "f32[4 6]", "features"}},
		{"linear bias", func(g *graph.Graph) *graph.Tensor {
			return graph.Linear(in(g, "x", dtype.F32, 2, 6), in(g, "w", dtype.F32, 4, 6), in(g, "b", dtype.F32, 6))
		}, []string{"linear", "f32[2 6]", "f32[4 6]", "f32[6]", "bias"}},
		{"linear dtypes", func(g *graph.Graph) *graph.Tensor {
			return graph.Linear(in(g, "x", dtype.F32, 2, 6), in(g, "w", dtype.F32, 4, 6), in(g, "b", dtype.F16, 4))
		}, []string{"linear", "f32[2 6]", "f32[4 6]", "f16[4]", "mismatch"}},
		{"linear int", func(g *graph.Graph) *graph.Tensor {
			return graph.Linear(in(g, "x", dtype.I64, 2, 6), in(g, "w", dtype.I64, 4, 6), nil)
		}, []string{"linear", "i64[2 6]", "i64[4 6]", "not supported"}},
		{"linear weight rank", func(g *graph.Graph) *graph.Tensor {
			return graph.Linear(in(g, "x", dtype.F32, 2, 6), in(g, "w", dtype.F32, 6), nil)
		}, []string{"linear", "f32[2 6]", "f32[6]"}},
	} {
		noPanic(t, tc.name, func() {
			g := graph.New()
			y := tc.build(g)
			wantErr(t, tc.name, y.Err(), tc.frags...)
			g.Output("y", y)
			g.Output("ok", g.Input("z", dtype.F32, 2).Exp())
			_, err := g.Compile(graph.Options{})
			wantErr(t, tc.name+": compile", err, tc.frags...)
		})
	}
}

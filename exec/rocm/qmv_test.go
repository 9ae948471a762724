package rocm

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUQMVWord: the word-load mat-vec kernels (loom_qmvw_*) against the
// byte-wise ones (loom_qmv_*), which the conformance suite checks against
// float64: both sum in f32, so they agree to f32 rounding of the sums
// (plus one rounding of a half output). Rows not a multiple of a block's
// 4, rows shorter than 32 chunks and longer ones, 1–8 activation rows;
// and x at an odd offset (a view) takes the byte-wise kernel and agrees.
func TestGPUQMVWord(t *testing.T) {
	e := openGPU(t)
	qmvF32 = true // not the 8-bit path (TestGPUQMVQ8)
	defer func() { qmvBytewise, qmvF32 = false, false }()
	r := rand.New(rand.NewPCG(41, 42))
	for _, f := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16, dtype.F16} {
			for _, c := range []struct{ m, n, k int }{{1, 37, 768}, {3, 9, 4096}, {8, 64, 2048}, {1, 5, 256}} {
				t.Run(fmt.Sprintf("%v/%v/M%dN%dK%d", f, dt, c.m, c.n, c.k), func(t *testing.T) {
					raw := randomQuantized(t, r, f, c.n, c.k)
					xv := make([]float64, c.m*c.k+1) // xv[0] pads the offset input
					for i := range xv {
						xv[i] = r.Float64()*2 - 1
					}
					xt, _ := tensor.FromFloat64s(dt, xv[1:], c.m, c.k)
					xo, _ := tensor.FromFloat64s(dt, xv, c.m*c.k+1)
					run := func(offset, bytewise bool) []float64 {
						t.Helper()
						g := graph.New()
						q, _ := g.QInput("w", f, c.n, c.k)
						in := map[string]*tensor.Tensor{"w": raw, "x": xt}
						var x *graph.Tensor
						if offset {
							x = g.Input("x", dt, c.m*c.k+1).Narrow(0, 1, c.m*c.k).Reshape(c.m, c.k)
							in["x"] = xo
						} else {
							x = g.Input("x", dt, c.m, c.k)
						}
						g.Output("y", x.QMatmul(q))
						p, err := g.Compile(graph.Options{})
						if err != nil {
							t.Fatal(err)
						}
						qmvBytewise = bytewise
						w0 := qmvWordLaunches.Load()
						out, err := p.Run(context.Background(), e, in)
						if err != nil {
							t.Fatal(err)
						}
						used := qmvWordLaunches.Load() > w0
						switch {
						case offset:
							// The planner may pass the view or copy it.
							t.Logf("x at an offset: word kernel used = %v", used)
						case used == bytewise:
							t.Fatalf("bytewise=%v: word kernel used = %v", bytewise, used)
						}
						return out["y"].Float64s()
					}
					want := run(false, true)
					got := run(false, false)
					wq := make([]float32, c.n*c.k)
					if err := quant.Dequantize(f, raw.Bytes(), wq); err != nil {
						t.Fatal(err)
					}
					xs := xt.Float64s()
					half := map[dtype.DType]float64{dtype.F32: 0, dtype.F16: 1.0 / 1024, dtype.BF16: 1.0 / 128}[dt]
					check := func(what string, got []float64) {
						t.Helper()
						for i := range c.m {
							for j := range c.n {
								var abs float64
								for l := range c.k {
									abs += math.Abs(float64(wq[j*c.k+l]) * xs[i*c.k+l])
								}
								tol := abs*1e-5 + math.Abs(want[i*c.n+j])*half
								if d := math.Abs(got[i*c.n+j] - want[i*c.n+j]); !(d <= tol) {
									t.Fatalf("%s: y[%d][%d] = %v, byte-wise kernel %v (± %v)", what, i, j, got[i*c.n+j], want[i*c.n+j], tol)
								}
							}
						}
					}
					check("word kernel", got)
					// x one element into its buffer: not 16-byte aligned.
					if dt != dtype.F32 || c.k != 256 {
						return
					}
					check("x at an offset", run(true, false))
				})
			}
		}
	}
}

// TestGPUQMVQ8: the mat-vecs on 8-bit activations, in one launch
// (loom_qmvf_*, one activation row), on the tensor cores (loom_qmvt_*,
// 2–8 rows where the device has them) and in two launches with dp4a
// (loom_q8x_* then loom_qmvq_*: more rows elsewhere or with
// LOOM_QMV=dp4a, and one row with LOOM_QMV=q8x),
// against the float64 product of the dequantized weights and x as stored.
// Their error is the activations' rounding: at most half a step d =
// amax/127 of each 32-value block of x per weight, Σ_k c_k·d_k/2 with c_k
// what the kernel multiplies the 8-bit activation by (quantCoefficients),
// plus f32 sums and the output's rounding. Rows not a multiple of a block's 4
// (or of the tensor-core tile's 16),
// rows shorter than 32 chunks and longer ones, rows 2 bytes off a 4-byte
// boundary (Q4_0 and Q8_0 at K = 800, Q6_K at K = 256 and 768), 1–8
// activation rows, every x dtype; more weight rows than the device holds
// groups at once (the one-launch kernel's blocks walk them); and a block
// of x that is all zeros (d = 0). One row runs on each of the one-launch
// kernel's paths: as it picks (mode one: on an NVIDIA sm_80+ GPU units
// staged in shared memory where K is a multiple of the format's unit and
// the stage fits), units read from global memory (mode units: AMD's
// path), and chunks (mode chunks: Q6_K's, and K = 800's). The unit cases
// have rows of 1 to 56 units, so 1 to 32 rows a group of lanes, lanes
// left idle (K = 768 and 3072: 3 and 12 units), a row of exactly 32 and
// rows of more than 32 (Q4_0 and Q4_K at K = 14336: 56 units, Q8_0 112;
// too large to stage, so read from global memory in every mode).
func TestGPUQMVQ8(t *testing.T) {
	e := openGPU(t)
	r := rand.New(rand.NewPCG(43, 44))
	defer func() { qmvTwoLaunch, qmvNoMMA, qmvfPath = false, false, -1 }()
	for _, mode := range []string{"one", "units", "chunks", "two", "dp4a"} {
		for _, f := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K, quant.Q5_K, quant.Q2_K, quant.Q3_K, quant.Q4_1, quant.Q5_0, quant.Q5_1} {
			for _, dt := range []dtype.DType{dtype.F32, dtype.BF16, dtype.F16} {
				for _, c := range []struct{ m, n, k int }{{1, 37, 768}, {3, 9, 4096}, {8, 64, 2048}, {1, 5, 256}, {5, 130, 512},
					{2, 33, 800}, {1, 33, 800}, {1, 20000, 256}, {7, 1001, 1024}, {4, 17, 256}, {6, 48, 768}, {8, 3, 512},
					{1, 300, 2048}, {1, 70, 3072}, {1, 40, 8192}, {1, 24, 14336}} {
					if tr, _ := f.Traits(); c.k%tr.Block != 0 {
						continue
					}
					if c.n > 1000 && dt != dtype.BF16 {
						continue
					}
					if mode != "one" && c.n > 1000 || (mode == "units" || mode == "chunks") && c.m != 1 {
						continue
					}
					if _, ok := kernels.QMVQEntry(f, dt, c.m); !ok && (c.m > 1 || mode == "two") {
						continue // Q3_K: only the one-row kernel is on 8-bit activations
					}
					t.Run(fmt.Sprintf("%s/%v/%v/M%dN%dK%d", mode, f, dt, c.m, c.n, c.k), func(t *testing.T) {
						qmvTwoLaunch, qmvNoMMA = mode == "two", mode == "dp4a"
						qmvfPath = map[string]int{"units": kernels.QMVFUnits, "chunks": kernels.QMVFChunks}[mode]
						if mode != "units" && mode != "chunks" {
							qmvfPath = -1
						}
						raw := randomQuantized(t, r, f, c.n, c.k)
						xv := make([]float64, c.m*c.k)
						for b := 0; b < len(xv); b += 32 { // blocks of very different scales
							scale := math.Ldexp(1, r.IntN(12)-8)
							for i := b; i < b+32; i++ {
								xv[i] = (r.Float64()*2 - 1) * scale
							}
						}
						for i := range 32 { // one block of zeros
							xv[(c.m-1)*c.k+i] = 0
						}
						xt, _ := tensor.FromFloat64s(dt, xv, c.m, c.k)
						p := qmatmulProgram(t, f, dt, c.m, c.n, c.k)
						q0, f0, t0 := qmvQ8Launches.Load(), qmvFLaunches.Load(), qmvTLaunches.Load()
						out, err := p.Run(context.Background(), e, map[string]*tensor.Tensor{"w": raw, "x": xt})
						if err != nil {
							t.Fatal(err)
						}
						_, mmaOK := kernels.QMVTEntry(f, dt, e.target)
						mmaOK = mmaOK && c.k%kernels.QMVTStep(f) == 0
						path := "dp4a"
						switch {
						case c.m == 1 && mode != "two" && c.k%kernels.QMVFChunk(f) == 0 && kernels.QMVFSharedBytes(int64(c.k)) <= kernels.QMVFMaxShared:
							path = "one-launch"
						case c.m > 1 && mode != "dp4a" && mmaOK:
							path = "tensor-core"
						}
						nq, fl, tc := qmvQ8Launches.Load()-q0, qmvFLaunches.Load()-f0, qmvTLaunches.Load()-t0
						if want := map[string][3]int64{"dp4a": {1, 0, 0}, "one-launch": {0, 1, 0}, "tensor-core": {0, 0, 1}}[path]; [3]int64{nq, fl, tc} != want {
							t.Fatalf("launches: %d dp4a, %d one-launch, %d tensor-core; want the %s kernel", nq, fl, tc, path)
						}
						got := out["y"].Float64s()
						wq := make([]float32, c.n*c.k)
						if err := quant.Dequantize(f, raw.Bytes(), wq); err != nil {
							t.Fatal(err)
						}
						coef := quantCoefficients(t, f, raw.Bytes(), wq, path == "tensor-core")
						xs := xt.Float64s()
						half := map[dtype.DType]float64{dtype.F32: 0, dtype.F16: 1.0 / 1024, dtype.BF16: 1.0 / 128}[dt]
						for i := range c.m {
							for j := range c.n {
								var sum, abs, bound float64
								for b := 0; b < c.k; b += 32 {
									var amax, wabs float64
									for l := b; l < b+32; l++ {
										amax = max(amax, math.Abs(xs[i*c.k+l]))
										wabs += coef[j*c.k+l]
										sum += float64(wq[j*c.k+l]) * xs[i*c.k+l]
										abs += math.Abs(float64(wq[j*c.k+l]) * xs[i*c.k+l])
									}
									bound += wabs * amax / 127 / 2
								}
								tol := bound*1.001 + abs*1e-5 + math.Abs(sum)*half
								if d := math.Abs(got[i*c.n+j] - sum); !(d <= tol) {
									t.Fatalf("y[%d][%d] = %v, want %v ± %v (error %v)", i, j, got[i*c.n+j], sum, tol, d)
								}
							}
						}
					})
				}
			}
		}
	}
}

// quantCoefficients returns, per weight, what the 8-bit mat-vecs multiply
// the rounded activation by: |w| where the whole weight goes into the
// integer dot product (Q8_0; Q6_K's q − 32 is formed in integers, and
// Q4_0's q − 8 with intOffset, as the tensor-core kernel does), and
// |d·q| = |w − w₀| for Q4_0, Q4_1, Q5_1, Q2_K, Q4_K and Q5_K, whose offset (−8d; m; −dmin·m) is
// applied to the unrounded sums of x instead; w₀ is the block dequantized
// with every quant 0. With |w| there, the bound was too tight by up to
// 15/8 (a Q4_0 quant of 15 weighs 15d in the dot product, its weight 7d).
func quantCoefficients(t *testing.T, f quant.Type, raw []byte, w []float32, intOffset bool) []float64 {
	t.Helper()
	var block, start, end int // quant bytes [start, end) of each block of block bytes
	switch f {
	case quant.Q4_0:
		if !intOffset {
			block, start, end = 18, 2, 18
		}
	case quant.Q4_K:
		block, start, end = 144, 16, 144
	case quant.Q5_K: // qh and the quants: both are the q of d·q
		block, start, end = 176, 16, 176
	case quant.Q2_K: // the quants (bytes 16 … 79); scales, d and dmin kept
		block, start, end = 84, 16, 80
	case quant.Q4_1: // d·q + m: the quants (bytes 4 … 19)
		block, start, end = 20, 4, 20
	case quant.Q5_1: // qh and the quants (bytes 4 … 23)
		block, start, end = 24, 4, 24
	}
	c := make([]float64, len(w))
	if block == 0 {
		for i, v := range w {
			c[i] = math.Abs(float64(v))
		}
		return c
	}
	zero := slices.Clone(raw)
	for b := 0; b+block <= len(zero); b += block {
		clear(zero[b+start : b+end])
	}
	w0 := make([]float32, len(w))
	if err := quant.Dequantize(f, zero, w0); err != nil {
		t.Fatal(err)
	}
	for i := range w {
		c[i] = math.Abs(float64(w[i]) - float64(w0[i]))
	}
	return c
}

// randomQuantized is an n×k matrix of standard normal values quantized
// to f (raw u8 rows).
func randomQuantized(t *testing.T, r *rand.Rand, f quant.Type, n, k int) *tensor.Tensor {
	t.Helper()
	v := make([]float32, n*k)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	ft, _ := tensor.New(v, n, k)
	raw, err := graph.QuantizeValue(f, ft)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestGPUDequantWord: the word-load Q4_0, Q8_0, Q4_K, Q5_K and Q6_K dequantizations (loom_dequantw_*)
// and the other formats' 8-a-thread one (loom_dequant8_*) give the
// byte-wise kernels' bits (and so the CPU twins', which the conformance
// suite checks the byte-wise kernels against) for every output type, over
// one block or super-block, rows of several, and more chunks than the
// grid's threads.
func TestGPUDequantWord(t *testing.T) {
	e := openGPU(t)
	defer func() { dequantBytewise = false }()
	r := rand.New(rand.NewPCG(43, 44))
	for _, f := range []quant.Type{quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0,
		quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			for _, c := range []struct{ n, k int }{{1, 256}, {3, 768}, {37, 4096}, {2048, 8192}} {
				if c.n > 1000 && f != quant.Q4_K && f != quant.Q5_K && f != quant.Q6_K {
					continue
				}
				t.Run(fmt.Sprintf("%v/%v/%dx%d", f, dt, c.n, c.k), func(t *testing.T) {
					raw := randomQuantized(t, r, f, c.n, c.k)
					if (f == quant.Q4_K || f == quant.Q5_K) && c.n > 1 {
						// Super-blocks whose d or dmin is ±Inf or NaN (outputs
						// ±Inf and NaN), where the word kernel must not narrow
						// without its NaN test: d, dmin per super-block.
						sb := raw.Bytes()
						tr, _ := f.Traits()
						for i, h := range [][2]uint16{{0x7C00, 0x3C00}, {0x3C00, 0x7E00}, {0xFC00, 0x7C00}, {0, 0x7C00}} {
							binary.LittleEndian.PutUint16(sb[(2*i+1)*tr.Size:], h[0])
							binary.LittleEndian.PutUint16(sb[(2*i+1)*tr.Size+2:], h[1])
						}
					}
					if (f == quant.Q6_K || f == quant.Q4_0 || f == quant.Q8_0) && c.n > 1 {
						// Blocks whose d is ±Inf, NaN or −0, and for Q6_K one
						// with a zero scale too (Inf·0).
						tr, _ := f.Traits()
						size, at := tr.Size, 0 // d: a block's first 2 bytes, a Q6_K super-block's last 2
						if f == quant.Q6_K {
							at = size - 2
						}
						sb := raw.Bytes()
						for i, d := range []uint16{0x7C00, 0x7E00, 0xFC00, 0x8000} {
							binary.LittleEndian.PutUint16(sb[(2*i+1)*size+at:], d)
						}
						if f == quant.Q6_K {
							sb[size+192] = 0
						}
					}
					g := graph.New()
					q, _ := g.QInput("w", f, c.n, c.k)
					g.Output("y", q.Dequantize(dt))
					p, err := g.Compile(graph.Options{})
					if err != nil {
						t.Fatal(err)
					}
					run := func(bytewise bool) []uint64 {
						t.Helper()
						dequantBytewise = bytewise
						w0, e0 := dequantWordLaunches.Load(), dequant8Launches.Load()
						out, err := p.Run(context.Background(), e, map[string]*tensor.Tensor{"w": raw})
						if err != nil {
							t.Fatal(err)
						}
						if used := dequantWordLaunches.Load() > w0 || dequant8Launches.Load() > e0; used == bytewise {
							t.Fatalf("bytewise=%v: word or 8-a-thread kernel used = %v", bytewise, used)
						}
						y := out["y"]
						bits := make([]uint64, y.Numel())
						for i := range bits {
							bits[i] = math.Float64bits(y.Float64(i))
						}
						return bits
					}
					want, got := run(true), run(false)
					for i := range want {
						if gv, wv := math.Float64frombits(got[i]), math.Float64frombits(want[i]); got[i] != want[i] && !(math.IsNaN(gv) && math.IsNaN(wv)) {
							t.Fatalf("y[%d] = %v, the byte-wise kernel's %v", i, math.Float64frombits(got[i]), math.Float64frombits(want[i]))
						}
					}
				})
			}
		}
	}
}

// qmatmulProgram compiles y = x · Wᵀ for inputs x [m, k] of dtype dt and
// w [n, k] in format f.
func qmatmulProgram(t *testing.T, f quant.Type, dt dtype.DType, m, n, k int) *graph.Program {
	t.Helper()
	g := graph.New()
	q, _ := g.QInput("w", f, n, k)
	g.Output("y", g.Input("x", dt, m, k).QMatmul(q))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

package rocm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/tensor"
)

// convCase is one conv step to run on the GPU's paths and on the CPU.
type convCase struct {
	name       string
	transposed bool
	rank       int
	x, w       []int
	opt        graph.ConvOptions
}

func convCases() []convCase {
	return []convCase{
		{"3x3 pad1", false, 2, []int{2, 8, 11, 9}, []int{6, 8, 3, 3}, graph.ConvOptions{Padding: []int{1}}},
		{"stride2 dil2 asym", false, 2, []int{3, 4, 13, 10}, []int{5, 4, 3, 2}, graph.ConvOptions{Stride: []int{2, 1}, Padding: []int{2, 1}, Dilation: []int{2, 1}}},
		{"groups2", false, 2, []int{2, 6, 9, 9}, []int{4, 3, 3, 3}, graph.ConvOptions{Padding: []int{1}, Groups: 2}},
		{"depthwise", false, 2, []int{2, 5, 8, 7}, []int{5, 1, 3, 3}, graph.ConvOptions{Padding: []int{1}, Groups: 5}},
		{"1x1", false, 2, []int{3, 16, 7, 7}, []int{8, 16, 1, 1}, graph.ConvOptions{}},
		{"empty batch", false, 2, []int{0, 4, 6, 6}, []int{3, 4, 3, 3}, graph.ConvOptions{}},
		{"conv1d", false, 1, []int{2, 6, 40}, []int{7, 6, 3}, graph.ConvOptions{Padding: []int{1}, Stride: []int{3}}},
		{"convT k4 s2 p1", true, 2, []int{2, 6, 7, 8}, []int{6, 4, 4, 4}, graph.ConvOptions{Stride: []int{2}, Padding: []int{1}}},
		{"convT groups outpad dil", true, 2, []int{1, 4, 5, 6}, []int{4, 3, 3, 2}, graph.ConvOptions{Stride: []int{3, 2}, Padding: []int{1, 0}, OutputPadding: []int{1, 1}, Dilation: []int{1, 2}, Groups: 2}},
		{"convT1d", true, 1, []int{3, 5, 17}, []int{5, 2, 5}, graph.ConvOptions{Stride: []int{2}, Padding: []int{2}, OutputPadding: []int{1}}},
	}
}

func (c convCase) build(d dtype.DType) (*graph.Program, error) {
	g := graph.New()
	x, w := g.Input("x", d, c.x...), g.Input("w", d, c.w...)
	var y *graph.Tensor
	switch {
	case c.rank == 1 && !c.transposed:
		y = graph.Conv1d(x, w, c.opt)
	case c.rank == 1:
		y = graph.ConvTranspose1d(x, w, c.opt)
	case !c.transposed:
		y = graph.Conv2d(x, w, c.opt)
	default:
		y = graph.ConvTranspose2d(x, w, c.opt)
	}
	g.Output("y", y)
	return g.Compile(graph.Options{})
}

func randTensor(t *testing.T, r *rand.Rand, d dtype.DType, shape []int) *tensor.Tensor {
	n := 1
	for _, s := range shape {
		n *= s
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = r.Float64()*2 - 1
	}
	tt, err := tensor.FromFloat64s(d, v, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return tt
}

// TestGPUConv runs every case and float dtype on the GPU's library path
// (cuDNN where it loads), on its portable kernels (with the column
// scratch made small, so the image- and pixel-chunk loops run), and on the
// CPU, and compares: f64 within 1e-12, f32 within 1e-4, halves within a
// few units of their last place, relative to the sum of |terms|.
func TestGPUConv(t *testing.T) {
	lib := freshGPU(t)
	lib.dnn() // open the library before the variable below hides it
	t.Setenv(ConvEnv, "portable")
	port := freshGPU(t)
	t.Logf("library executor: %s; portable executor: %s", lib.ConvBackend(), port.ConvBackend())
	defer func(s int64) { convScratch = s }(convScratch)
	convScratch = 4 << 10
	c := cpu.New()
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range convCases() {
		for _, d := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
			t.Run(fmt.Sprintf("%s/%v", tc.name, d), func(t *testing.T) {
				p, err := tc.build(d)
				if err != nil {
					t.Fatal(err)
				}
				in := map[string]*tensor.Tensor{"x": randTensor(t, r, d, tc.x), "w": randTensor(t, r, d, tc.w)}
				want, err := p.Run(ctx, c, in)
				if err != nil {
					t.Fatal(err)
				}
				// |x|·|w| bound on each output's terms: inputs are in [-1, 1].
				terms := float64(tc.w[1] * tc.w[2])
				if tc.rank == 2 {
					terms *= float64(tc.w[3])
				}
				if tc.transposed {
					terms = float64(tc.w[0]*tc.w[2]) * float64(tc.w[len(tc.w)-1])
				}
				tol := map[dtype.DType]float64{dtype.F64: 1e-12, dtype.F32: 1e-5, dtype.F16: 4e-3, dtype.BF16: 3e-2}[d] * terms
				for _, ex := range []*Executor{lib, port} {
					got, err := p.Run(ctx, ex, in)
					if err != nil {
						t.Fatalf("%s: %v", ex.ConvBackend(), err)
					}
					wv, gv := want["y"].Float64s(), got["y"].Float64s()
					if len(wv) != len(gv) {
						t.Fatalf("%d outputs, want %d", len(gv), len(wv))
					}
					for i := range wv {
						if !(math.Abs(gv[i]-wv[i]) <= tol) {
							t.Fatalf("%s: y[%d] = %v, CPU %v (tolerance %g)", ex.ConvBackend(), i, gv[i], wv[i], tol)
						}
					}
				}
			})
		}
	}
}

// TestGPUConvPortableParts times the portable conv path's two parts for
// W12's first chunk of images (f32 and bf16: im2col, then the GEMM) with
// device events, to say where its time goes. LOOM_CONV_PARTS=1 runs it.
func TestGPUConvPortableParts(t *testing.T) {
	if os.Getenv("LOOM_CONV_PARTS") != "1" {
		t.Skip("set LOOM_CONV_PARTS=1 to time the portable conv's parts")
	}
	e := openGPU(t)
	for _, d := range []dtype.DType{dtype.F32, dtype.BF16} {
		g := kernels.ConvGeom{N: 32, C: 256, H: 56, W: 56, CO: 256, G: 1, KH: 3, KW: 3, PH: 1, PW: 1, SH: 1, SW: 1, DH: 1, DW: 1, OH: 56, OW: 56}
		cs := &convStep{d: d, g: g}
		size := int64(d.Size())
		ckk, P := int64(g.C*g.KH*g.KW), int64(g.OH*g.OW)
		nb := convScratch / (ckk * P * size)
		alloc := func(n int64) hip.DevPtr {
			b, err := e.alloc.alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.releaseScratch(b) })
			return b.ptr
		}
		x, w, out, cols := alloc(int64(g.N*g.C*g.H*g.W)*size), alloc(int64(g.CO)*ckk*size), alloc(int64(g.N*g.CO)*P*size), alloc(nb*ckk*P*size)
		im2col, err := kernels.Im2colEntry(d)
		if err != nil {
			t.Fatal(err)
		}
		timeIt := func(f func() error) float64 {
			s, _ := e.dev.NewEvent()
			en, _ := e.dev.NewEvent()
			defer e.dev.DestroyEvent(s)
			defer e.dev.DestroyEvent(en)
			best := math.Inf(1)
			for range 5 {
				if err := e.dev.Record(s, e.stream); err != nil {
					t.Fatal(err)
				}
				if err := f(); err != nil {
					t.Fatal(err)
				}
				if err := e.dev.Record(en, e.stream); err != nil {
					t.Fatal(err)
				}
				if err := e.dev.EventSynchronize(en); err != nil {
					t.Fatal(err)
				}
				ms, _ := e.dev.ElapsedMs(s, en)
				best = min(best, float64(ms))
			}
			return best
		}
		tIm := timeIt(func() error {
			var a hip.Args
			a.Ptr(x).Ptr(cols).I64(0).I64(nb).I64(int64(g.C)).I64(int64(g.H)).I64(int64(g.W))
			a.I32(int32(g.KH)).I32(int32(g.KW)).I32(int32(g.PH)).I32(int32(g.PW)).I32(int32(g.SH)).I32(int32(g.SW)).I32(int32(g.DH)).I32(int32(g.DW))
			a.I64(int64(g.OW)).I64(0).I64(P)
			return e.launchGrid(im2col, kernels.Im2colLaunch(nb*ckk, P), &a)
		})
		c := blas.Call{M: g.CO, N: int(P), K: int(ckk), LDA: int(ckk), LDB: int(P), LDC: int(P), StrideB: int(ckk * P), StrideC: int(int64(g.CO) * P), Batch: int(nb), Alpha: 1}
		tG := timeIt(func() error { return e.runGemm(d, c, w, cols, out, false, false) })
		tAll := timeIt(func() error { return e.convPortable(cs, x, w, out) })
		flops := 2 * float64(nb) * float64(g.CO) * float64(P) * float64(ckk)
		t.Logf("%v: chunk of %d images: im2col %.3f ms (%.0f GB/s written), GEMM %.3f ms (%.1f TFLOP/s); whole conv %.3f ms (%s)",
			d, nb, tIm, float64(nb*ckk*P*size)/tIm/1e6, tG, flops/tG/1e9, tAll, e.GEMMBackend())
	}
}

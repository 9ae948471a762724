package rocm

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
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
		{"3x3 partial 64-tiles", false, 2, []int{2, 66, 10, 14}, []int{34, 66, 3, 3}, graph.ConvOptions{Padding: []int{1}}},
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
//
// The library executors are four: the library's own choice between NCHW
// and channels-last arrays for halves, each of them forced (ConvEnv=nchw,
// nhwc), and channels-last through cuDNN's graph API (ConvEnv=graph); each
// latches the variable when it opens the library.
func TestGPUConv(t *testing.T) {
	lib := freshGPU(t)
	lib.dnn() // open the library before the variable below hides it
	t.Setenv(ConvEnv, "nchw")
	nchw := freshGPU(t)
	nchw.dnn()
	t.Setenv(ConvEnv, "nhwc")
	nhwc := freshGPU(t)
	nhwc.dnn()
	t.Setenv(ConvEnv, "graph")
	graphX := freshGPU(t)
	graphX.dnn()
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
				for _, ex := range []*Executor{lib, nchw, nhwc, graphX, port} {
					got, err := p.Run(ctx, ex, in)
					if err != nil {
						t.Fatalf("%s: %v", ex.ConvBackend(), err)
					}
					wv, gv := want["y"].Float64s(), got["y"].Float64s()
					if len(wv) != len(gv) {
						t.Fatalf("%d outputs, want %d", len(gv), len(wv))
					}
					how := convHow(t, p, ex)
					for i := range wv {
						if !(math.Abs(gv[i]-wv[i]) <= tol) {
							t.Fatalf("%s: y[%d] = %v, CPU %v (tolerance %g)", how, i, gv[i], wv[i], tol)
						}
					}
					// The forced channels-last executor must have taken
					// the path for the plain convs in halves.
					if ex == nhwc && nhwc.dnn().lib != nil && !tc.transposed && tc.x[0] > 0 && (d == dtype.F16 || d == dtype.BF16) &&
						tc.opt.Groups <= 1 && !strings.Contains(how, "channels-last") {
						t.Errorf("%s=nhwc: the step ran %s", ConvEnv, how)
					}
					// The graph executor must have run the plain convs in
					// halves through the graph API (the engines that keep
					// Loom's accuracy cover them on cuDNN 9).
					if ex == graphX && graphX.dnn().lib != nil && !tc.transposed && tc.x[0] > 0 && (d == dtype.F16 || d == dtype.BF16) &&
						tc.opt.Groups <= 1 && !strings.Contains(how, "graph engine") {
						t.Errorf("%s=graph: the step ran %s", ConvEnv, how)
					}
				}
			})
		}
	}
}

// convHow is how executor e ran program p's conv step (convStep.how).
func convHow(t *testing.T, p *graph.Program, e *Executor) string {
	t.Helper()
	for _, s := range p.Plan().Steps {
		k := s.Kernel
		epi := ""
		if v, ok := k.Cache.Load(plan.KeyOf(e, convBiasKey{})); ok {
			epi = "; " + v.(*convBias).how
		}
		if k.IsFusedConv() {
			parts, err := exec.FusedParts(k, len(p.Plan().Buffers))
			if err != nil {
				t.Fatal(err)
			}
			k = parts.Core
		}
		if v, ok := k.Cache.Load(plan.KeyOf(e, convKey{})); ok {
			return v.(*convStep).how + epi
		}
	}
	return "(no conv step)"
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
			ms, err := e.bestTime(f)
			if err != nil {
				t.Fatal(err)
			}
			return ms
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

// TestGPUConvLayouts runs W12 in bf16 (and with bias + relu) on the
// library's NCHW and channels-last paths and its own choice, and logs each
// one's device time and how the step ran (with the measured times the
// choice was made on). LOOM_CONV_PARTS=1 runs it.
func TestGPUConvLayouts(t *testing.T) {
	if os.Getenv("LOOM_CONV_PARTS") != "1" {
		t.Skip("set LOOM_CONV_PARTS=1 to time the library conv's layouts")
	}
	var exs []*Executor
	var names []string
	for _, mode := range []string{"", "nchw", "nhwc", "graph"} {
		t.Setenv(ConvEnv, mode)
		e := freshGPU(t)
		e.dnn()
		exs, names = append(exs, e), append(names, mode)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, crb := range []bool{false, true} {
		g := graph.New()
		x, w := g.Input("x", dtype.BF16, 32, 256, 56, 56), g.Input("w", dtype.BF16, 256, 256, 3, 3)
		y := graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}})
		in := map[string]*tensor.Tensor{"x": randTensor(t, r, dtype.BF16, []int{32, 256, 56, 56}), "w": randTensor(t, r, dtype.BF16, []int{256, 256, 3, 3})}
		if crb {
			b := g.Input("b", dtype.BF16, 256, 1, 1)
			y = y.Add(b).Relu()
			in["b"] = randTensor(t, r, dtype.BF16, []int{256, 1, 1})
		}
		g.Output("y", y)
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range exs {
			vals := residentValues(t, e, in)
			run := func() error {
				out, err := p.RunValues(ctx, e, vals, true)
				for _, v := range out {
					v.(*Tensor).Free()
				}
				return err
			}
			if err := run(); err != nil {
				t.Fatal(err)
			}
			// best is the least device time of ten runs.
			best := func() float64 {
				t.Helper()
				b := math.Inf(1)
				for range 10 {
					ms, err := e.DeviceTime(run)
					if err != nil {
						t.Fatal(err)
					}
					b = min(b, ms)
				}
				return b
			}
			t.Logf("crb=%v %s=%q: %.3f ms (%d steps): %s", crb, ConvEnv, names[i], best(), len(p.Plan().Steps), convHow(t, p, e))
			if names[i] == "" {
				// The transposes' tile orders (Executor.chlRev), on the
				// random inputs.
				keep := e.chlRev
				for rev := range 4 {
					e.chlRev = rev
					t.Logf("crb=%v, input transpose reversed %v, output transpose reversed %v: %.4f ms", crb, rev&chlRevX != 0, rev&chlRevY != 0, best())
				}
				e.chlRev = keep
			}
			if (names[i] != "nhwc" && names[i] != "graph") || crb {
				continue
			}
			// The channels-last path's parts.
			var cs *convStep
			for _, s := range p.Plan().Steps {
				if v, ok := s.Kernel.Cache.Load(plan.KeyOf(e, convKey{})); ok {
					cs = v.(*convStep)
				}
			}
			mx, mw, my := chlMoves(cs.g)
			xn, yn := mx.numel(), my.numel()
			var bl [3]*block
			for j := range bl {
				if bl[j], err = e.alloc.alloc(chlBytes(max(xn, mw.numel(), yn))); err != nil {
					t.Fatal(err)
				}
				defer e.releaseScratch(bl[j])
			}
			a, b := bl[0].ptr, bl[1].ptr
			tx, err1 := e.bestTime(func() error { return e.transpose(mx, a, b, false, nil, nil) })
			tw, err2 := e.bestTime(func() error { return e.transpose(mw, a, b, false, nil, nil) })
			ty, err3 := e.bestTime(func() error { return e.transpose(my, a, b, false, nil, nil) })
			cp, err4 := e.bestTime(func() error {
				e.launchMu.Lock()
				defer e.launchMu.Unlock()
				return e.dev.MemcpyDtoD(b, a, uint64(xn*2), e.stream)
			})
			tc, err5 := e.bestTime(func() error { return e.convLibrary(cs.dnn, a, b, bl[2].ptr) })
			if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
				t.Fatal(err)
			}
			t.Logf("channels-last parts: transposes x %.3f ms (%.0f GB/s), w %.3f ms, y %.3f ms (%.0f GB/s); copy of x %.3f ms (%.0f GB/s); conv %.3f ms",
				tx, float64(4*xn)/tx/1e6, tw, ty, float64(4*yn)/ty/1e6, cp, float64(4*xn)/cp/1e6, tc)
		}
	}
}

// epilogueCase is a conv of the epilogue tests: its input and weight
// shapes and options.
type epilogueCase struct {
	name string
	x, w []int
	opt  graph.ConvOptions
}

// TestGPUConvEpilogue runs conv → bias → relu → residual add (the
// residual read through a transposed view) → cast to f32, fused into one
// kernel, on the library's layouts (its choice, NCHW and channels-last
// forced) and the portable path, against the same graph on the CPU. The
// channels-last executor must apply the epilogue in the output's transpose
// (its fused transposes compiled for the kernel); the others run the
// parts.
func TestGPUConvEpilogue(t *testing.T) {
	var exs []*Executor
	for _, mode := range []string{"", "nchw", "nhwc", "portable", "graph"} {
		t.Setenv(ConvEnv, mode)
		e := freshGPU(t)
		e.dnn()
		exs = append(exs, e)
	}
	c := cpu.New()
	r := rand.New(rand.NewPCG(9, 10))
	for _, tc := range []epilogueCase{
		{"3x3 pad1 even", []int{2, 64, 12, 10}, []int{32, 64, 3, 3}, graph.ConvOptions{Padding: []int{1}}},
		{"3x3 stride2 odd", []int{3, 6, 11, 9}, []int{5, 6, 3, 3}, graph.ConvOptions{Padding: []int{1}, Stride: []int{2}}},
	} {
		for _, d := range []dtype.DType{dtype.F16, dtype.BF16, dtype.F32} {
			t.Run(fmt.Sprintf("%s/%v", tc.name, d), func(t *testing.T) {
				g := graph.New()
				x, w := g.Input("x", d, tc.x...), g.Input("w", d, tc.w...)
				b := g.Input("b", d, tc.w[0], 1, 1)
				y := graph.Conv2d(x, w, tc.opt)
				sh := y.Shape()
				res := g.Input("r", d, sh[0], sh[1], sh[3], sh[2]).Transpose(2, 3)
				g.Output("y", y.Add(b).Relu().Add(res).Cast(dtype.F32))
				p, err := g.Compile(graph.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if n := len(p.Plan().Steps); n != 1 || !p.Plan().Steps[0].Kernel.IsFusedConv() {
					t.Fatalf("%d steps, want one fused conv kernel", n)
				}
				in := map[string]*tensor.Tensor{"x": randTensor(t, r, d, tc.x), "w": randTensor(t, r, d, tc.w),
					"b": randTensor(t, r, d, []int{tc.w[0], 1, 1}), "r": randTensor(t, r, d, []int{sh[0], sh[1], sh[3], sh[2]})}
				want, err := p.Run(ctx, c, in)
				if err != nil {
					t.Fatal(err)
				}
				terms := float64(tc.w[1] * tc.w[2] * tc.w[3])
				// The conv's error (as TestGPUConv), then two adds rounding
				// in d over values up to terms + 2 in magnitude.
				tol := map[dtype.DType]float64{dtype.F32: 1e-5, dtype.F16: 4e-3, dtype.BF16: 3e-2}[d] * (terms + 2)
				for i, ex := range exs {
					got, err := p.Run(ctx, ex, in)
					if err != nil {
						t.Fatalf("%s: %v", ex.ConvBackend(), err)
					}
					wv, gv := want["y"].Float64s(), got["y"].Float64s()
					k := p.Plan().Steps[0].Kernel
					_, fusedT := k.Cache.Load(plan.KeyOf(ex, fusedConvKey{}))
					for j := range wv {
						if !(math.Abs(gv[j]-wv[j]) <= tol) {
							t.Fatalf("executor %d (fused transposes: %v): y[%d] = %v, CPU %v (tolerance %g)", i, fusedT, j, gv[j], wv[j], tol)
						}
					}
					if half := d != dtype.F32; (ex == exs[2] || ex == exs[4]) && half != fusedT {
						t.Errorf("executor %d (channels-last forced), %v: fused transposes %v, want %v", i, d, fusedT, half)
					}
				}
			})
		}
	}
}

// TestGPUConvLibraryEpilogue runs convs whose epilogue the library can
// apply inside the conv (bias, ReLU, bias then ReLU, in f16 and bf16) on
// the channels-last path with the epilogue forced into the library's conv
// (ConvEpilogueEnv=library), forced into Loom's transpose, and measured,
// against the same graph on the CPU; the forced executors must have run
// the epilogue where they were told to.
func TestGPUConvLibraryEpilogue(t *testing.T) {
	t.Setenv(ConvEnv, "graph")
	var exs []*Executor
	for _, mode := range []string{"library", "loom", ""} {
		t.Setenv(ConvEpilogueEnv, mode)
		e := freshGPU(t)
		if e.dnn().lib == nil {
			t.Skipf("no convolution library: %s", e.dnn().why)
		}
		exs = append(exs, e)
	}
	c := cpu.New()
	r := rand.New(rand.NewPCG(11, 12))
	for _, tc := range []epilogueCase{
		{"3x3 pad1 even", []int{2, 64, 12, 10}, []int{32, 64, 3, 3}, graph.ConvOptions{Padding: []int{1}}},
		{"3x3 stride2 odd", []int{3, 8, 11, 9}, []int{16, 8, 3, 3}, graph.ConvOptions{Padding: []int{1}, Stride: []int{2}}},
	} {
		for _, d := range []dtype.DType{dtype.F16, dtype.BF16} {
			for _, epi := range []string{"bias+relu", "relu", "bias", "nan+relu"} {
				t.Run(fmt.Sprintf("%s/%v/%s", tc.name, d, epi), func(t *testing.T) {
					g := graph.New()
					x, w := g.Input("x", d, tc.x...), g.Input("w", d, tc.w...)
					b := g.Input("b", d, tc.w[0], 1, 1)
					y := graph.Conv2d(x, w, tc.opt)
					if epi != "relu" {
						y = y.Add(b)
					}
					if epi != "bias" {
						y = y.Relu()
					}
					// nan+relu: a NaN in x must come out of the ReLU as NaN
					// wherever the conv reads it, as on the CPU.
					g.Output("y", y)
					p, err := g.Compile(graph.Options{})
					if err != nil {
						t.Fatal(err)
					}
					k := p.Plan().Steps[0].Kernel
					if n := len(p.Plan().Steps); n != 1 || !k.IsFusedConv() {
						t.Fatalf("%d steps, want one fused conv kernel", n)
					}
					in := map[string]*tensor.Tensor{"x": randTensor(t, r, d, tc.x), "w": randTensor(t, r, d, tc.w),
						"b": randTensor(t, r, d, []int{tc.w[0], 1, 1})}
					if epi == "nan+relu" {
						xv := in["x"].Float64s()
						xv[len(xv)/2] = math.NaN()
						in["x"], _ = tensor.FromFloat64s(d, xv, tc.x...)
					}
					want, err := p.Run(ctx, c, in)
					if err != nil {
						t.Fatal(err)
					}
					terms := float64(tc.w[1] * tc.w[2] * tc.w[3])
					tol := map[dtype.DType]float64{dtype.F16: 4e-3, dtype.BF16: 3e-2}[d] * (terms + 2)
					nans := 0
					for i, ex := range exs {
						got, err := p.Run(ctx, ex, in)
						if err != nil {
							t.Fatalf("executor %d: %v", i, err)
						}
						v, _ := k.Cache.Load(plan.KeyOf(ex, convBiasKey{}))
						cb, _ := v.(*convBias)
						if cb == nil {
							t.Fatalf("executor %d: no epilogue decision", i)
						}
						wv, gv := want["y"].Float64s(), got["y"].Float64s()
						for j := range wv {
							if math.IsNaN(wv[j]) {
								nans++
								if !math.IsNaN(gv[j]) {
									t.Fatalf("executor %d (%s): y[%d] = %v, CPU NaN", i, cb.how, j, gv[j])
								}
								continue
							}
							if !(math.Abs(gv[j]-wv[j]) <= tol) {
								t.Fatalf("executor %d (%s): y[%d] = %v, CPU %v (tolerance %g)", i, cb.how, j, gv[j], wv[j], tol)
							}
						}
						if i < 2 && (i == 0) != (cb.plan != nil) { // the measured executor may take either
							t.Errorf("executor %d (%s=%q): library epilogue %v (%s)", i, ConvEpilogueEnv, []string{"library", "loom", ""}[i], cb.plan != nil, cb.how)
						}
						t.Logf("executor %d: %s", i, cb.how)
					}
					if (nans > 0) != (epi == "nan+relu") {
						t.Errorf("%d NaN outputs on the CPU", nans)
					}
				})
			}
		}
	}
}

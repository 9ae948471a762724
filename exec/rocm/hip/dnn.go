package hip

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Vendor convolution library: cuDNN 9 on NVIDIA (libcudnn.so.9: its legacy
// descriptor API, which Candle's cudnn path uses, and for forward convs its
// graph API, which PyTorch's uses: dnn_graph.go), loaded at
// run time with purego like the BLAS. A handle belongs to one device and
// one stream; calls run with the device current on a locked OS thread
// (Device.do), as cuDNN, a runtime-API library, requires. MIOpen (AMD) is
// not bound: on AMD the executor runs its own kernels (im2col + GEMM).
//
// Only what Loom's conv steps need: 2-D cross-correlation over packed NCHW
// tensors, or NHWC ones for the forward conv (ConvDesc.NHWC; 1-D convs pass
// H = 1), groups, per-axis stride, padding and
// dilation; forward (conv) and backward data (conv_transpose). The
// algorithm is chosen once per ConvDesc by measuring them all
// (cudnnFind*Algorithm, PyTorch's benchmark mode): the fastest that needs
// at most MaxWorkspace bytes; the heuristics (cudnnGet*Algorithm_v7) where
// measuring fails. (With the heuristics alone the legacy API picked an f32
// 3×3 algorithm 1.6× slower than PyTorch's frontend-API choice.)

// ConvDesc describes one convolution over packed NCHW arrays.
type ConvDesc struct {
	Type GemmType
	// Transposed computes conv_transpose (cuDNN's backward data): X is
	// the transposed conv's input [N, C, H, W] (cuDNN's dy), W its weight
	// [C, K/Groups, R, S], Y its output [N, K, OutH, OutW] (cuDNN's dx).
	// Otherwise X [N, C, H, W] · W [K, C/Groups, R, S] → Y [N, K, OutH, OutW].
	Transposed       bool
	N, C, H, W       int
	K, R, S          int
	OutH, OutW       int
	PadH, PadW       int
	StrideH, StrideW int
	DilH, DilW       int
	Groups           int
	TF32             bool // f32 may use TF32 tensor cores
	// NHWC lays the forward conv's arrays out channels-last: X [N, H, W,
	// C], W [K, R, S, C/Groups], Y [N, OutH, OutW, K] (the sizes keep
	// their meaning). cuDNN's half-precision tensor-core kernels work
	// channels-last; over NCHW arrays it converts them itself. Forward only.
	NHWC bool
	// Graph plans the forward conv through cuDNN's graph API
	// (dnn_graph.go): the engine its heuristics rank first among those
	// that keep Loom's accuracy, instead of the legacy API's algorithms.
	Graph bool
	// GraphRank picks the GraphRank-th (from 0) of the engines the
	// heuristics rank that qualify, so that a caller can time the first
	// few: the heuristics' first is not always the fastest.
	GraphRank int
	// Bias and ReLU fuse y = relu(conv(x, w) + b) into the graph plan
	// (Graph only, not Transposed): b holds K elements of Type's data
	// type, one per output channel, and the plan's RunBias passes it. The
	// library applies both to the f32 sum and rounds y once, where Loom's
	// own epilogue rounds the conv's output, then the sum (the result may
	// differ by an ulp of y's type).
	Bias, ReLU   bool
	MaxWorkspace uint64
}

// ConvPlan is a convolution bound to its descriptors and algorithm.
type ConvPlan interface {
	// Workspace is the device scratch Run needs (0: none).
	Workspace() uint64
	// Algo names the chosen algorithm, for dumps and benchmarks.
	Algo() string
	// Run queues the convolution on the handle's stream: y = conv(x, w).
	Run(x, w, y, ws DevPtr) error
	Close() error
}

// ConvBiasPlan is a plan of a ConvDesc with Bias or ReLU: RunBias queues
// y = relu(conv(x, w) + b) (as ConvDesc says).
type ConvBiasPlan interface {
	ConvPlan
	RunBias(x, w, b, y, ws DevPtr) error
}

// DNN is a vendor convolution library bound to one device and stream.
type DNN interface {
	Name() string
	Plan(c ConvDesc) (ConvPlan, error)
	Close() error
}

// OpenDNN loads the device's convolution library (once per process) and
// creates a handle on stream s; the error says why there is none.
func (d *Device) OpenDNN(s Stream) (DNN, error) {
	if d.info.Platform != NVIDIA {
		return nil, fmt.Errorf("hip: no convolution library bound for platform %q (MIOpen is not)", d.info.Platform)
	}
	return openCudnn(d, s)
}

var cudnnLibs = withCUDALibDir("libcudnn.so.9")

// cuDNN enums (cudnn_graph.h, cudnn_cnn.h of cuDNN 9).
const (
	cudnnFloat              = 0
	cudnnDouble             = 1
	cudnnHalf               = 2
	cudnnBFloat16           = 9
	cudnnNCHW               = 0
	cudnnNHWC               = 1
	cudnnCrossCorrelation   = 1
	cudnnDefaultMath        = 0
	cudnnTensorOpMath       = 1
	cudnnFMAMath            = 3
	cudnnStatusNotSupported = 3000
)

// findRounds is how many times Plan measures the algorithms.
const findRounds = 3

// measuredMargin is how much faster (a fraction of its mean time) a
// measured algorithm must be than the heuristics' choice to replace it.
const measuredMargin = 0.05

// cudnnPerf is cudnnConvolutionFwdAlgoPerf_t (and the identical
// BwdDataAlgoPerf_t): 48 bytes.
type cudnnPerf struct {
	algo, status int32
	time         float32
	_            int32
	memory       uint64
	determinism  int32
	mathType     int32
	_            [4]int32
}

type cudnnAPI struct {
	path      string
	version   cfunc[func() uint64]
	create    cfunc[func(h *uintptr) int32]
	destroy   cfunc[func(h uintptr) int32]
	setStream cfunc[func(h, s uintptr) int32]
	errStr    cfunc[func(rc int32) *byte]
	newTensor cfunc[func(d *uintptr) int32]
	delTensor cfunc[func(d uintptr) int32]
	setTensor cfunc[func(d uintptr, format, dt, n, c, h, w int32) int32]
	newFilter cfunc[func(d *uintptr) int32]
	delFilter cfunc[func(d uintptr) int32]
	setFilter cfunc[func(d uintptr, dt, format, k, c, h, w int32) int32]
	newConv   cfunc[func(d *uintptr) int32]
	delConv   cfunc[func(d uintptr) int32]
	setConv   cfunc[func(d uintptr, padH, padW, u, v, dilH, dilW, mode, compute int32) int32]
	setGroups cfunc[func(d uintptr, g int32) int32]
	setMath   cfunc[func(d uintptr, m int32) int32]
	fwdAlgos  cfunc[func(h, x, w, c, y uintptr, req int32, got *int32, perf *cudnnPerf) int32]
	fwdWS     cfunc[func(h, x, w, c, y uintptr, algo int32, size *uint64) int32]
	fwd       cfunc[func(h uintptr, alpha unsafe.Pointer, xd, x, wd, w, cd uintptr, algo int32, ws uintptr, wsSize uint64, beta unsafe.Pointer, yd, y uintptr) int32]
	bwdAlgos  cfunc[func(h, w, dy, c, dx uintptr, req int32, got *int32, perf *cudnnPerf) int32]
	fwdFind   cfunc[func(h, x, w, c, y uintptr, req int32, got *int32, perf *cudnnPerf) int32]
	bwdFind   cfunc[func(h, w, dy, c, dx uintptr, req int32, got *int32, perf *cudnnPerf) int32]
	bwdWS     cfunc[func(h, w, dy, c, dx uintptr, algo int32, size *uint64) int32]
	bwd       cfunc[func(h uintptr, alpha unsafe.Pointer, wd, w, dyd, dy, cd uintptr, algo int32, ws uintptr, wsSize uint64, beta unsafe.Pointer, dxd, dx uintptr) int32]
	status    statusFunc
	graph     *cudnnGraphAPI // nil where the library lacks it (graphErr says why)
	graphErr  error
}

var cudnnLoad struct {
	once sync.Once
	api  *cudnnAPI
	err  error
}

func loadCudnn() (*cudnnAPI, error) {
	cudnnLoad.once.Do(func() {
		h, path, err := dlopen(cudnnLibs)
		if err != nil {
			cudnnLoad.err = fmt.Errorf("no cuDNN: %w", err)
			return
		}
		a := &cudnnAPI{path: path}
		b := &binder{lib: h, path: path}
		bind(b, &a.version, "cudnnGetVersion")
		bind(b, &a.create, "cudnnCreate")
		bind(b, &a.destroy, "cudnnDestroy")
		bind(b, &a.setStream, "cudnnSetStream")
		bind(b, &a.errStr, "cudnnGetErrorString")
		bind(b, &a.newTensor, "cudnnCreateTensorDescriptor")
		bind(b, &a.delTensor, "cudnnDestroyTensorDescriptor")
		bind(b, &a.setTensor, "cudnnSetTensor4dDescriptor")
		bind(b, &a.newFilter, "cudnnCreateFilterDescriptor")
		bind(b, &a.delFilter, "cudnnDestroyFilterDescriptor")
		bind(b, &a.setFilter, "cudnnSetFilter4dDescriptor")
		bind(b, &a.newConv, "cudnnCreateConvolutionDescriptor")
		bind(b, &a.delConv, "cudnnDestroyConvolutionDescriptor")
		bind(b, &a.setConv, "cudnnSetConvolution2dDescriptor")
		bind(b, &a.setGroups, "cudnnSetConvolutionGroupCount")
		bind(b, &a.setMath, "cudnnSetConvolutionMathType")
		bind(b, &a.fwdAlgos, "cudnnGetConvolutionForwardAlgorithm_v7")
		bind(b, &a.fwdWS, "cudnnGetConvolutionForwardWorkspaceSize")
		bind(b, &a.fwd, "cudnnConvolutionForward")
		bind(b, &a.bwdAlgos, "cudnnGetConvolutionBackwardDataAlgorithm_v7")
		bind(b, &a.bwdWS, "cudnnGetConvolutionBackwardDataWorkspaceSize")
		bind(b, &a.fwdFind, "cudnnFindConvolutionForwardAlgorithm")
		bind(b, &a.bwdFind, "cudnnFindConvolutionBackwardDataAlgorithm")
		bind(b, &a.bwd, "cudnnConvolutionBackwardData")
		if err := b.err(); err != nil {
			cudnnLoad.err = err
			return
		}
		gb := &binder{lib: h, path: path}
		if g := bindCudnnGraph(gb); gb.err() != nil {
			a.graphErr = gb.err()
		} else {
			a.graph = g
		}
		a.status = newStatusFunc(func(rc int32) string { return cString(a.errStr.fn(rc)) })
		cudnnLoad.api = a
	})
	return cudnnLoad.api, cudnnLoad.err
}

type cudnn struct {
	d    *Device
	api  *cudnnAPI
	h    uintptr
	name string
	mu   sync.Mutex // a handle is not for concurrent use
}

func openCudnn(d *Device, s Stream) (DNN, error) {
	api, err := loadCudnn()
	if err != nil {
		return nil, err
	}
	c := &cudnn{d: d, api: api}
	err = d.do(func(*runtimeAPI) error {
		if err := api.status(api.create.name, api.create.fn(&c.h)); err != nil {
			return err
		}
		v := api.version.fn()
		c.name = fmt.Sprintf("cudnn %d.%d.%d (%s)", v/10000, v/100%100, v%100, api.path)
		return api.status(api.setStream.name, api.setStream.fn(c.h, uintptr(s)))
	})
	if err != nil {
		if c.h != 0 {
			d.do(func(*runtimeAPI) error { return api.status(api.destroy.name, api.destroy.fn(c.h)) })
		}
		return nil, fmt.Errorf("hip: cuDNN handle: %w", err)
	}
	return c, nil
}

func (c *cudnn) Name() string { return c.name }

func (c *cudnn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == 0 {
		return nil
	}
	err := c.d.do(func(*runtimeAPI) error { return c.api.status(c.api.destroy.name, c.api.destroy.fn(c.h)) })
	c.h = 0
	return err
}

// cudnnTypes maps a GemmType to cuDNN's data type and the convolution's
// compute type: f16 and bf16 compute in f32, as PyTorch asks.
func cudnnTypes(t GemmType) (data, compute int32) {
	switch t {
	case GemmF64:
		return cudnnDouble, cudnnDouble
	case GemmF16:
		return cudnnHalf, cudnnFloat
	case GemmBF16:
		return cudnnBFloat16, cudnnFloat
	}
	return cudnnFloat, cudnnFloat
}

// checkConv rejects descriptors cuDNN's 32-bit interface cannot express.
func checkConv(cd ConvDesc) error {
	if cd.NHWC && cd.Transposed {
		return fmt.Errorf("hip: conv: channels-last arrays are for the forward conv only")
	}
	const max32 = 1<<31 - 1
	for _, v := range []int{cd.N, cd.C, cd.H, cd.W, cd.K, cd.R, cd.S, cd.OutH, cd.OutW} {
		if v < 1 || v > max32 {
			return fmt.Errorf("hip: conv %+v: every size must be in [1, 2^31)", cd)
		}
	}
	for _, n := range []int{cd.N * cd.C * cd.H * cd.W, cd.N * cd.K * cd.OutH * cd.OutW} {
		if n > max32 {
			return fmt.Errorf("hip: conv: a tensor of %d elements is beyond cuDNN's 2^31", n)
		}
	}
	if cd.Groups < 1 || cd.Type > GemmBF16 {
		return fmt.Errorf("hip: conv %+v: bad groups or type", cd)
	}
	return nil
}

type cudnnPlan struct {
	c          *cudnn
	cd         ConvDesc
	x, y, w, v uintptr // x, y tensor descriptors; w filter; v convolution
	algo       int32
	ws         uint64
}

func (c *cudnn) Plan(cd ConvDesc) (ConvPlan, error) {
	if err := checkConv(cd); err != nil {
		return nil, err
	}
	if (cd.Bias || cd.ReLU) && (!cd.Graph || cd.Transposed) {
		return nil, fmt.Errorf("hip: conv: a fused bias or ReLU needs a forward graph plan")
	}
	if cd.Graph {
		c.mu.Lock()
		defer c.mu.Unlock()
		var gp *cudnnGraphPlan
		err := c.d.do(func(*runtimeAPI) error {
			var err error
			gp, err = c.planGraph(cd)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("hip: cuDNN graph conv plan (%s, x [%d %d %d %d], out [%d %d %d %d]): %w", cd.Type, cd.N, cd.C, cd.H, cd.W, cd.N, cd.K, cd.OutH, cd.OutW, err)
		}
		return gp, nil
	}
	a := c.api
	p := &cudnnPlan{c: c, cd: cd}
	data, compute := cudnnTypes(cd.Type)
	math := int32(cudnnDefaultMath)
	switch {
	case cd.Type == GemmF32 && !cd.TF32:
		math = cudnnFMAMath // no TF32: f32 products in f32, as PyTorch with allow_tf32 off
	case cd.Type == GemmF16 || cd.Type == GemmBF16:
		math = cudnnTensorOpMath
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.d.do(func(*runtimeAPI) error {
		st := func(f string, rc int32) error { return a.status(f, rc) }
		if err := st(a.newTensor.name, a.newTensor.fn(&p.x)); err != nil {
			return err
		}
		if err := st(a.newTensor.name, a.newTensor.fn(&p.y)); err != nil {
			return err
		}
		if err := st(a.newFilter.name, a.newFilter.fn(&p.w)); err != nil {
			return err
		}
		if err := st(a.newConv.name, a.newConv.fn(&p.v)); err != nil {
			return err
		}
		i := func(v int) int32 { return int32(v) }
		// Forward: x [N,C,H,W], filter [K, C/G, R, S], y [N,K,OutH,OutW].
		// Transposed: the forward conv it is the data gradient of maps
		// y (Loom's output, cuDNN's dx) to x (Loom's input, cuDNN's dy)
		// through the filter [C, K/G, R, S] — Loom's weight as stored.
		fk, fc := cd.K, cd.C/cd.Groups
		if cd.Transposed {
			fk, fc = cd.C, cd.K/cd.Groups
		}
		format := int32(cudnnNCHW)
		if cd.NHWC {
			format = cudnnNHWC
		}
		for _, e := range []struct {
			f  string
			rc int32
		}{
			{a.setTensor.name, a.setTensor.fn(p.x, format, data, i(cd.N), i(cd.C), i(cd.H), i(cd.W))},
			{a.setTensor.name, a.setTensor.fn(p.y, format, data, i(cd.N), i(cd.K), i(cd.OutH), i(cd.OutW))},
			{a.setFilter.name, a.setFilter.fn(p.w, data, format, i(fk), i(fc), i(cd.R), i(cd.S))},
			{a.setConv.name, a.setConv.fn(p.v, i(cd.PadH), i(cd.PadW), i(cd.StrideH), i(cd.StrideW), i(cd.DilH), i(cd.DilW), cudnnCrossCorrelation, compute)},
			{a.setGroups.name, a.setGroups.fn(p.v, i(cd.Groups))},
			{a.setMath.name, a.setMath.fn(p.v, math)},
		} {
			if err := st(e.f, e.rc); err != nil {
				return err
			}
		}
		// Measure every algorithm (cudnnFind*: the library times them on
		// scratch buffers of its own) findRounds times and order them by
		// their mean times — one round's order flipped between
		// algorithms 1.4× apart — then take the fastest that fits the
		// workspace bound; where measuring fails (e.g. no memory for its
		// buffers), the heuristics' order.
		var perf [16]cudnnPerf
		var got int32
		var rc int32
		name := a.fwdFind.name
		find := func() int32 {
			if cd.Transposed {
				return a.bwdFind.fn(c.h, p.w, p.x, p.v, p.y, int32(len(perf)), &got, &perf[0])
			}
			return a.fwdFind.fn(c.h, p.x, p.w, p.v, p.y, int32(len(perf)), &got, &perf[0])
		}
		if cd.Transposed {
			name = a.bwdFind.name
		}
		total, count := map[int32]float32{}, map[int32]float32{}
		ok := map[int32]cudnnPerf{}
		for round := 0; round < findRounds; round++ {
			if r := find(); r != 0 || got == 0 {
				if round == 0 {
					rc = r
				}
				break // keep the rounds that succeeded
			}
			for _, r := range perf[:got] {
				if r.status == 0 {
					total[r.algo] += r.time
					count[r.algo]++
					ok[r.algo] = r
				}
			}
		}
		heuristics := func(out *[16]cudnnPerf, n *int32) int32 {
			if cd.Transposed {
				return a.bwdAlgos.fn(c.h, p.w, p.x, p.v, p.y, int32(len(out)), n, &out[0])
			}
			return a.fwdAlgos.fn(c.h, p.x, p.w, p.v, p.y, int32(len(out)), n, &out[0])
		}
		// workspace returns algo's workspace, and whether it can be used.
		workspace := func(algo int32) (uint64, bool) {
			if !accurate(cd, algo) {
				return 0, false
			}
			var ws uint64
			var wrc int32
			if cd.Transposed {
				wrc = a.bwdWS.fn(c.h, p.w, p.x, p.v, p.y, algo, &ws)
			} else {
				wrc = a.fwdWS.fn(c.h, p.x, p.w, p.v, p.y, algo, &ws)
			}
			return ws, wrc == 0 && (cd.MaxWorkspace == 0 || ws <= cd.MaxWorkspace)
		}
		if len(ok) > 0 {
			rc = 0
			got = 0
			for _, r := range ok {
				perf[got] = r
				got++
			}
			mean := func(a int32) float32 { return total[a] / count[a] }
			slices.SortFunc(perf[:got], func(x, y cudnnPerf) int { return cmp.Compare(mean(x.algo), mean(y.algo)) })
			// The heuristics' first usable algorithm (PyTorch's default
			// choice) stays first unless a measured one beats it by
			// measuredMargin: the measured order of close algorithms
			// changes from run to run, and a measured winner ran 0.326 ms
			// where the heuristics' choice runs 0.258 (W12 bf16).
			var heur [16]cudnnPerf
			var hn int32
			if heuristics(&heur, &hn) == 0 {
				for _, h := range heur[:hn] {
					if _, use := workspace(h.algo); h.status != 0 || !use {
						continue
					}
					if _, measured := ok[h.algo]; !measured {
						break
					}
					for i, r := range perf[:got] {
						if _, use := workspace(r.algo); !use {
							continue
						}
						if r.algo != h.algo && mean(r.algo) > (1-measuredMargin)*mean(h.algo) {
							j := slices.IndexFunc(perf[:got], func(x cudnnPerf) bool { return x.algo == h.algo })
							hp := perf[j]
							copy(perf[i+1:j+1], perf[i:j])
							perf[i] = hp
						}
						break
					}
					break
				}
			}
		} else {
			name = a.fwdAlgos.name
			if cd.Transposed {
				name = a.bwdAlgos.name
			}
			rc = heuristics(&perf, &got)
		}
		if err := st(name, rc); err != nil {
			return err
		}
		var tried []string
		for _, r := range perf[:got] {
			if r.status != 0 || !accurate(cd, r.algo) {
				continue
			}
			ws, use := workspace(r.algo)
			if !use {
				if ws > 0 {
					tried = append(tried, fmt.Sprintf("algo %d needs %d bytes", r.algo, ws))
				}
				continue
			}
			p.algo, p.ws = r.algo, ws
			return nil
		}
		return &Error{Call: name, Code: cudnnStatusNotSupported,
			Name: fmt.Sprintf("no algorithm for this convolution within %d bytes of workspace (%s)", cd.MaxWorkspace, strings.Join(tried, "; "))}
	})
	if err != nil {
		p.close()
		return nil, fmt.Errorf("hip: cuDNN conv plan (%s, x [%d %d %d %d], out [%d %d %d %d]): %w", cd.Type, cd.N, cd.C, cd.H, cd.W, cd.N, cd.K, cd.OutH, cd.OutW, err)
	}
	return p, nil
}

// accurate reports whether algorithm algo keeps Loom's accuracy promise
// for cd's type. Half types (f16, bf16) must accumulate every product in
// f32 and round once: the GEMM-like algorithms (forward: implicit GEMM,
// precomputed implicit GEMM, GEMM, direct; backward data: algo 0 and 1)
// do; the FFT and Winograd ones transform in reduced precision and were
// measured up to 3 bf16 ulps off (a 1-D transposed conv picked FFT; the
// executor keeps half transposed convs off cuDNN altogether, since its
// backward-data algorithms 0 and 1 were off too). f32 and f64 take any
// algorithm, as PyTorch does.
func accurate(cd ConvDesc, algo int32) bool {
	if cd.Type != GemmF16 && cd.Type != GemmBF16 {
		return true
	}
	if cd.Transposed {
		return algo <= 1
	}
	return algo <= 3
}

func (p *cudnnPlan) Workspace() uint64 { return p.ws }

func (p *cudnnPlan) Algo() string {
	if p.cd.Transposed {
		return fmt.Sprintf("cudnn bwd-data algo %d", p.algo)
	}
	if p.cd.NHWC {
		return fmt.Sprintf("cudnn fwd algo %d, channels-last", p.algo)
	}
	return fmt.Sprintf("cudnn fwd algo %d", p.algo)
}

func (p *cudnnPlan) Run(x, w, y, ws DevPtr) error {
	c, a := p.c, p.c.api
	alpha, beta := unsafe.Pointer(&one32), unsafe.Pointer(&zero32)
	if p.cd.Type == GemmF64 {
		alpha, beta = unsafe.Pointer(&one64), unsafe.Pointer(&zero64)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == 0 {
		return fmt.Errorf("hip: cuDNN handle closed")
	}
	return c.d.do(func(*runtimeAPI) error {
		if p.cd.Transposed {
			return a.status(a.bwd.name, a.bwd.fn(c.h, alpha, p.w, uintptr(w), p.x, uintptr(x), p.v, p.algo, uintptr(ws), p.ws, beta, p.y, uintptr(y)))
		}
		return a.status(a.fwd.name, a.fwd.fn(c.h, alpha, p.x, uintptr(x), p.w, uintptr(w), p.v, p.algo, uintptr(ws), p.ws, beta, p.y, uintptr(y)))
	})
}

func (p *cudnnPlan) Close() error {
	p.c.mu.Lock()
	defer p.c.mu.Unlock()
	return p.close()
}

func (p *cudnnPlan) close() error {
	a := p.c.api
	return p.c.d.do(func(*runtimeAPI) error {
		if p.x != 0 {
			a.delTensor.fn(p.x)
		}
		if p.y != 0 {
			a.delTensor.fn(p.y)
		}
		if p.w != 0 {
			a.delFilter.fn(p.w)
		}
		if p.v != 0 {
			a.delConv.fn(p.v)
		}
		p.x, p.y, p.w, p.v = 0, 0, 0, 0
		return nil
	})
}

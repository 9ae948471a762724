package hip

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// Vendor BLAS (cuBLAS on NVIDIA, rocBLAS on AMD), loaded at run time with
// purego like the rest of the platform layer. Both GEMM entry points take
// more than 15 arguments (cublasGemmStridedBatchedEx 23, rocBLAS's _ex 29);
// purego v0.11 binds up to 32, so they are called directly, no C shim.
// A handle belongs to one device and one stream; its calls run with the
// device current on a locked OS thread (Device.do), as cuBLAS, a runtime-API
// library, requires (it works on the primary context the device retained).

// GemmType is the element type of a GEMM's A, B and C.
type GemmType uint8

// GEMM element types. f16 and bf16 accumulate in f32; f64 in f64.
const (
	GemmF32 GemmType = iota
	GemmF64
	GemmF16
	GemmBF16
)

func (t GemmType) String() string { return [...]string{"f32", "f64", "f16", "bf16"}[t] }

// GemmArgs is one strided-batched GEMM in the vendor's column-major
// convention: C[b] = op(A[b])·op(B[b]) (alpha 1, beta 0), C M×N with
// leading dimension LDC, op(A) M×K, op(B) K×N; batch item b starts
// Stride·b elements in. (Row-major callers swap the operands.)
type GemmArgs struct {
	TransA, TransB            bool
	M, N, K                   int
	A, B, C                   DevPtr
	LDA, LDB, LDC             int
	StrideA, StrideB, StrideC int64
	Batch                     int
	Type                      GemmType
	// TF32 lets f32 products use TF32 tensor cores (10-bit mantissas).
	TF32 bool
}

// BLAS is a vendor GEMM library bound to one device and stream.
type BLAS interface {
	// Name names the library and its version, e.g. "cublas 13.0.2".
	Name() string
	// SetWorkspace gives the library n bytes of device memory for its
	// algorithms (the caller keeps it alive until Close or the next call).
	SetWorkspace(p DevPtr, n uint64) error
	// Gemm queues one GEMM on the handle's stream.
	Gemm(g GemmArgs) error
	Close() error
}

// OpenBLAS loads the device's vendor BLAS (once per process) and creates a
// handle on stream s. The error says why none could be used (library
// missing, symbol missing, handle creation failed); callers fall back to
// their own kernel.
func (d *Device) OpenBLAS(s Stream) (BLAS, error) {
	switch d.info.Platform {
	case NVIDIA:
		return openCublas(d, s)
	case AMD:
		return openRocblas(d, s)
	}
	return nil, fmt.Errorf("hip: no BLAS for platform %q", d.info.Platform)
}

// checkGemm rejects what the vendors' 32-bit interfaces cannot express.
func checkGemm(g GemmArgs) error {
	const max32 = 1<<31 - 1
	for _, v := range []int{g.M, g.N, g.K, g.LDA, g.LDB, g.LDC, g.Batch} {
		if v < 0 || v > max32 {
			return fmt.Errorf("hip: gemm %+v: a size or leading dimension is outside [0, 2^31)", g)
		}
	}
	if g.Type > GemmBF16 {
		return fmt.Errorf("hip: gemm: unknown element type %d", g.Type)
	}
	return nil
}

// The scalars of every call (alpha 1, beta 0), in host memory for the
// libraries' default host pointer mode: float for f32, f16 and bf16 (their
// compute/scale type), double for f64.
var (
	one32, zero32 = float32(1), float32(0)
	one64, zero64 = float64(1), float64(0)
)

// gemmEnums are one vendor's enum values: the transpose ops, and for each
// GemmType its element type and compute type.
type gemmEnums struct {
	opN, opT int32
	types    [GemmBF16 + 1]struct{ data, compute int32 }
}

// vendorGemm is a GemmArgs in the argument types both vendors' strided
// batched calls take.
type vendorGemm struct {
	ta, tb, m, n, k int32
	lda, ldb, ldc   int32
	batch           int32
	data, compute   int32
	alpha, beta     unsafe.Pointer
	a, b, c         uintptr
	sa, sb, sc      int64
}

// args converts g (already checked) with the vendor's enums. Leading
// dimensions must be at least 1 even for empty matrices; with K = 0 the
// libraries leave C alone, which the caller handles.
func (e *gemmEnums) args(g GemmArgs) vendorGemm {
	op := func(t bool) int32 {
		if t {
			return e.opT
		}
		return e.opN
	}
	ld := func(v int) int32 { return int32(max(v, 1)) }
	v := vendorGemm{
		ta: op(g.TransA), tb: op(g.TransB), m: int32(g.M), n: int32(g.N), k: int32(g.K),
		lda: ld(g.LDA), ldb: ld(g.LDB), ldc: ld(g.LDC), batch: int32(g.Batch),
		data: e.types[g.Type].data, compute: e.types[g.Type].compute,
		alpha: unsafe.Pointer(&one32), beta: unsafe.Pointer(&zero32),
		a: uintptr(g.A), b: uintptr(g.B), c: uintptr(g.C),
		sa: g.StrideA, sb: g.StrideB, sc: g.StrideC,
	}
	if g.Type == GemmF64 {
		v.alpha, v.beta = unsafe.Pointer(&one64), unsafe.Pointer(&zero64)
	}
	return v
}

// gemmError adds the call's shape to a library status error.
func gemmError(err error, g GemmArgs) error {
	return fmt.Errorf("%w (%s m=%d n=%d k=%d batch=%d)", err, g.Type, g.M, g.N, g.K, g.Batch)
}

// ---- cuBLAS ----

var cublasLibs = withCUDALibDir("libcublas.so.13", "libcublas.so.12")

// cublasLt ships with cuBLAS and is its dependency; it is loaded first, from
// the same directory, so the dynamic loader need not find it on its own.
var cublasLtLibs = withCUDALibDir("libcublasLt.so.13", "libcublasLt.so.12")

type cublasAPI struct {
	path      string
	create    cfunc[func(h *uintptr) int32]
	destroy   cfunc[func(h uintptr) int32]
	setStream cfunc[func(h, s uintptr) int32]
	setWS     cfunc[func(h, p uintptr, n uint64) int32]
	getVer    cfunc[func(h uintptr, v *int32) int32]
	statusStr cfunc[func(rc int32) *byte]
	gemm      cfunc[func(h uintptr, ta, tb, m, n, k int32, alpha unsafe.Pointer, a uintptr, at, lda int32, sa int64,
		b uintptr, bt, ldb int32, sb int64, beta unsafe.Pointer, c uintptr, ct, ldc int32, sc int64, batch, compute, algo int32) int32]
	status statusFunc
}

var cublasLoad struct {
	once sync.Once
	api  *cublasAPI
	err  error
}

func loadCublas() (*cublasAPI, error) {
	cublasLoad.once.Do(func() {
		var why []string
		if _, _, err := dlopen(cublasLtLibs); err != nil {
			why = append(why, err.Error())
		}
		h, path, err := dlopen(cublasLibs)
		if err != nil {
			cublasLoad.err = fmt.Errorf("no cuBLAS: %s", strings.Join(append(why, err.Error()), "; "))
			return
		}
		a := &cublasAPI{path: path}
		b := &binder{lib: h, path: path}
		bind(b, &a.create, "cublasCreate_v2")
		bind(b, &a.destroy, "cublasDestroy_v2")
		bind(b, &a.setStream, "cublasSetStream_v2")
		bind(b, &a.setWS, "cublasSetWorkspace_v2")
		bind(b, &a.getVer, "cublasGetVersion_v2")
		bind(b, &a.statusStr, "cublasGetStatusString")
		bind(b, &a.gemm, "cublasGemmStridedBatchedEx")
		if err := b.err(); err != nil {
			cublasLoad.err = err
			return
		}
		a.status = newStatusFunc(func(rc int32) string { return cString(a.statusStr.fn(rc)) })
		cublasLoad.api = a
	})
	return cublasLoad.api, cublasLoad.err
}

type cublas struct {
	d    *Device
	api  *cublasAPI
	h    uintptr
	name string
	mu   sync.Mutex // a handle is not for concurrent use
}

func openCublas(d *Device, s Stream) (BLAS, error) {
	api, err := loadCublas()
	if err != nil {
		return nil, err
	}
	c := &cublas{d: d, api: api}
	err = d.do(func(*runtimeAPI) error {
		if err := api.status(api.create.name, api.create.fn(&c.h)); err != nil {
			return err
		}
		var v int32
		if api.status(api.getVer.name, api.getVer.fn(c.h, &v)) == nil {
			c.name = fmt.Sprintf("cublas %d.%d.%d (%s)", v/10000, v/100%100, v%100, api.path)
		} else {
			c.name = "cublas (" + api.path + ")"
		}
		return api.status(api.setStream.name, api.setStream.fn(c.h, uintptr(s)))
	})
	if err != nil {
		if c.h != 0 {
			d.do(func(*runtimeAPI) error { return api.status(api.destroy.name, api.destroy.fn(c.h)) })
		}
		return nil, fmt.Errorf("hip: cuBLAS handle: %w", err)
	}
	return c, nil
}

func (c *cublas) Name() string { return c.name }

func (c *cublas) SetWorkspace(p DevPtr, n uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.do(func(*runtimeAPI) error {
		return c.api.status(c.api.setWS.name, c.api.setWS.fn(c.h, uintptr(p), n))
	})
}

// cuBLAS enums (cublas_api.h, library_types.h).
const (
	cublasOpN           = 0
	cublasOpT           = 1
	cudaR32F            = 0
	cudaR64F            = 1
	cudaR16F            = 2
	cudaR16BF           = 14
	cublasCompute32F    = 68
	cublasCompute64F    = 70
	cublasCompute32TF32 = 77
	cublasGemmDefault   = -1
)

// cublasEnums: f16 and bf16 compute in f32 (as PyTorch and Candle ask
// cuBLAS to); f32 may use TF32 (GemmArgs.TF32).
var cublasEnums = gemmEnums{opN: cublasOpN, opT: cublasOpT, types: [GemmBF16 + 1]struct{ data, compute int32 }{
	GemmF32:  {cudaR32F, cublasCompute32F},
	GemmF64:  {cudaR64F, cublasCompute64F},
	GemmF16:  {cudaR16F, cublasCompute32F},
	GemmBF16: {cudaR16BF, cublasCompute32F},
}}

func (c *cublas) Gemm(g GemmArgs) error {
	if err := checkGemm(g); err != nil {
		return err
	}
	if g.M == 0 || g.N == 0 || g.Batch == 0 {
		return nil
	}
	v := cublasEnums.args(g)
	if g.Type == GemmF32 && g.TF32 {
		v.compute = cublasCompute32TF32
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.d.do(func(*runtimeAPI) error {
		rc := c.api.gemm.fn(c.h, v.ta, v.tb, v.m, v.n, v.k, v.alpha,
			v.a, v.data, v.lda, v.sa, v.b, v.data, v.ldb, v.sb, v.beta,
			v.c, v.data, v.ldc, v.sc, v.batch, v.compute, cublasGemmDefault)
		if err := c.api.status(c.api.gemm.name, rc); err != nil {
			return gemmError(err, g)
		}
		return nil
	})
}

func (c *cublas) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == 0 {
		return nil
	}
	err := c.d.do(func(*runtimeAPI) error { return c.api.status(c.api.destroy.name, c.api.destroy.fn(c.h)) })
	c.h = 0
	return err
}

// ---- rocBLAS ----

var rocblasLibs = []string{"librocblas.so.4", "librocblas.so.5", "/opt/rocm/lib/librocblas.so.4", "/opt/rocm/lib/librocblas.so.5"}

type rocblasAPI struct {
	path      string
	create    cfunc[func(h *uintptr) int32]
	destroy   cfunc[func(h uintptr) int32]
	setStream cfunc[func(h, s uintptr) int32]
	setWS     cfunc[func(h, p uintptr, n uint64) int32]
	statusStr cfunc[func(rc int32) *byte]
	gemm      cfunc[func(h uintptr, ta, tb, m, n, k int32, alpha unsafe.Pointer, a uintptr, at, lda int32, sa int64,
		b uintptr, bt, ldb int32, sb int64, beta unsafe.Pointer, c uintptr, ct, ldc int32, sc int64,
		d uintptr, dt, ldd int32, sd int64, batch, compute, algo, solution int32, flags uint32) int32]
	status statusFunc
}

var rocblasLoad struct {
	once sync.Once
	api  *rocblasAPI
	err  error
}

func loadRocblas() (*rocblasAPI, error) {
	rocblasLoad.once.Do(func() {
		h, path, err := dlopen(rocblasLibs)
		if err != nil {
			rocblasLoad.err = fmt.Errorf("no rocBLAS: %w", err)
			return
		}
		a := &rocblasAPI{path: path}
		b := &binder{lib: h, path: path}
		bind(b, &a.create, "rocblas_create_handle")
		bind(b, &a.destroy, "rocblas_destroy_handle")
		bind(b, &a.setStream, "rocblas_set_stream")
		bind(b, &a.setWS, "rocblas_set_workspace")
		bind(b, &a.statusStr, "rocblas_status_to_string")
		bind(b, &a.gemm, "rocblas_gemm_strided_batched_ex")
		if err := b.err(); err != nil {
			rocblasLoad.err = err
			return
		}
		a.status = newStatusFunc(func(rc int32) string { return cString(a.statusStr.fn(rc)) })
		rocblasLoad.api = a
	})
	return rocblasLoad.api, rocblasLoad.err
}

type rocblas struct {
	d   *Device
	api *rocblasAPI
	h   uintptr
	mu  sync.Mutex
}

func openRocblas(d *Device, s Stream) (BLAS, error) {
	api, err := loadRocblas()
	if err != nil {
		return nil, err
	}
	r := &rocblas{d: d, api: api}
	err = d.do(func(*runtimeAPI) error {
		if err := api.status(api.create.name, api.create.fn(&r.h)); err != nil {
			return err
		}
		return api.status(api.setStream.name, api.setStream.fn(r.h, uintptr(s)))
	})
	if err != nil {
		if r.h != 0 {
			d.do(func(*runtimeAPI) error { return api.status(api.destroy.name, api.destroy.fn(r.h)) })
		}
		return nil, fmt.Errorf("hip: rocBLAS handle: %w", err)
	}
	return r, nil
}

func (r *rocblas) Name() string { return "rocblas (" + r.api.path + ")" }

func (r *rocblas) SetWorkspace(p DevPtr, n uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.d.do(func(*runtimeAPI) error {
		return r.api.status(r.api.setWS.name, r.api.setWS.fn(r.h, uintptr(p), n))
	})
}

// rocBLAS enums (rocblas-types.h).
const (
	rocblasOpN      = 111
	rocblasOpT      = 112
	rocblasF16      = 150
	rocblasF32      = 151
	rocblasF64      = 152
	rocblasBF16     = 168
	rocblasAlgoStd  = 0
	rocblasNoFlags  = 0
	rocblasSolution = 0
)

// rocblasEnums: f16 and bf16 compute in f32. TF32 has no switch on this
// interface: f32 stays exact on AMD.
var rocblasEnums = gemmEnums{opN: rocblasOpN, opT: rocblasOpT, types: [GemmBF16 + 1]struct{ data, compute int32 }{
	GemmF32:  {rocblasF32, rocblasF32},
	GemmF64:  {rocblasF64, rocblasF64},
	GemmF16:  {rocblasF16, rocblasF32},
	GemmBF16: {rocblasBF16, rocblasF32},
}}

func (r *rocblas) Gemm(g GemmArgs) error {
	if err := checkGemm(g); err != nil {
		return err
	}
	if g.M == 0 || g.N == 0 || g.Batch == 0 {
		return nil
	}
	v := rocblasEnums.args(g)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.d.do(func(*runtimeAPI) error {
		// C is also D, the output (rocBLAS's _ex computes D = αAB + βC).
		rc := r.api.gemm.fn(r.h, v.ta, v.tb, v.m, v.n, v.k, v.alpha,
			v.a, v.data, v.lda, v.sa, v.b, v.data, v.ldb, v.sb, v.beta,
			v.c, v.data, v.ldc, v.sc, v.c, v.data, v.ldc, v.sc,
			v.batch, v.compute, rocblasAlgoStd, rocblasSolution, rocblasNoFlags)
		if err := r.api.status(r.api.gemm.name, rc); err != nil {
			return gemmError(err, g)
		}
		return nil
	})
}

func (r *rocblas) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h == 0 {
		return nil
	}
	err := r.d.do(func(*runtimeAPI) error { return r.api.status(r.api.destroy.name, r.api.destroy.fn(r.h)) })
	r.h = 0
	return err
}

// VendorBLASLoadable reports whether the platform's vendor BLAS library
// loads in this process (nil) or why not, without a device: tests use it
// to insist that a present library is used.
func VendorBLASLoadable(platform string) error {
	switch platform {
	case NVIDIA:
		_, err := loadCublas()
		return err
	case AMD:
		_, err := loadRocblas()
		return err
	}
	return fmt.Errorf("hip: no BLAS for platform %q", platform)
}

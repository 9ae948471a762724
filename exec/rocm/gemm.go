package rocm

import (
	"fmt"
	"os"
	"sync"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
)

// GEMMs on the GPU: the vendor BLAS (cuBLAS, rocBLAS) when it loads, else
// Loom's portable HIP kernel (kernels/gemm.hip). Either way the executor
// speaks row-major blas.Calls; the vendor path swaps the operands to get
// the column-major product Cᵀ = Bᵀ·Aᵀ, which is C in row-major order.

// BLASEnv set to "portable" makes executors use the portable kernel even
// where a vendor BLAS loads (tests of the kernel, comparisons).
const BLASEnv = "LOOM_GPU_BLAS"

// gemmWorkspace is the device memory given to the vendor library: cuBLAS
// wants 32 MiB on Hopper for its best algorithms.
const gemmWorkspace = 32 << 20

type gemmState struct {
	once   sync.Once
	vendor hip.BLAS // nil: portable kernel
	why    string   // what the executor uses and, for the portable kernel, why
	ws     *block
}

// gemm returns the executor's GEMM engine, opening the vendor BLAS on first
// use.
func (e *Executor) gemm() *gemmState {
	g := &e.gemmS
	g.once.Do(func() {
		if os.Getenv(BLASEnv) == "portable" {
			g.why = "portable HIP GEMM (" + BLASEnv + "=portable)"
			return
		}
		v, err := e.dev.OpenBLAS(e.stream)
		if err != nil {
			g.why = fmt.Sprintf("portable HIP GEMM (vendor BLAS unavailable: %v)", err)
			return
		}
		ws, err := e.alloc.alloc(gemmWorkspace)
		if err == nil {
			err = v.SetWorkspace(ws.ptr, gemmWorkspace)
		}
		if err != nil {
			if ws != nil {
				e.alloc.release(ws)
			}
			v.Close()
			g.why = fmt.Sprintf("portable HIP GEMM (vendor BLAS workspace: %v)", err)
			return
		}
		g.vendor, g.ws, g.why = v, ws, v.Name()
	})
	return g
}

// GEMMBackend says what runs matmul steps on this executor.
func (e *Executor) GEMMBackend() string { return e.gemm().why }

func gemmType(d dtype.DType) (hip.GemmType, error) {
	switch d {
	case dtype.F32:
		return hip.GemmF32, nil
	case dtype.F64:
		return hip.GemmF64, nil
	case dtype.F16:
		return hip.GemmF16, nil
	case dtype.BF16:
		return hip.GemmBF16, nil
	}
	return 0, fmt.Errorf("rocm: matmul on %v (want f32, f64, f16 or bf16)", d)
}

// vendorArgs is the row-major call c on operands a, b and output out as
// the column-major vendor GEMM takes it: C = A·B computed as Cᵀ = Bᵀ·Aᵀ.
func vendorArgs(c blas.Call, t hip.GemmType, a, b, out hip.DevPtr, tf32 bool) hip.GemmArgs {
	return hip.GemmArgs{
		TransA: c.TransB, TransB: c.TransA, M: c.N, N: c.M, K: c.K,
		A: b, B: a, C: out, LDA: c.LDB, LDB: c.LDA, LDC: c.LDC,
		StrideA: int64(c.StrideB), StrideB: int64(c.StrideA), StrideC: int64(c.StrideC),
		Batch: c.Batch, Type: t, TF32: tf32,
	}
}

// runGemm queues the row-major call c (alpha 1, beta 0) on operands at a,
// b and output out (element offsets already applied). K = 0 writes zeros.
func (e *Executor) runGemm(d dtype.DType, c blas.Call, a, b, out hip.DevPtr, tf32, portable bool) error {
	t, err := gemmType(d)
	if err != nil {
		return err
	}
	if c.M == 0 || c.N == 0 || c.Batch == 0 {
		return nil
	}
	if c.K == 0 {
		_, _, nc := c.Extents()
		n := uint64(nc * d.Size())
		e.launchMu.Lock()
		defer e.launchMu.Unlock()
		return e.dev.MemsetD8(out, 0, n, e.stream)
	}
	if gemvEnabled {
		if l, ok := kernels.PlanGemv(d, c, gemvAligned(d, c, a, b)); ok {
			return e.launchGemv(l, c, a, b, out)
		}
	}
	g := e.gemm()
	if g.vendor != nil && !portable {
		e.launchMu.Lock()
		defer e.launchMu.Unlock()
		return g.vendor.Gemm(vendorArgs(c, t, a, b, out, tf32))
	}
	l, err := kernels.PlanGemm(d, c)
	if err != nil {
		return err
	}
	fn, err := e.gemmFunction(l.Name)
	if err != nil {
		return err
	}
	var args hip.Args
	args.Ptr(a).Ptr(b).Ptr(out).I32(int32(c.M)).I32(int32(c.N)).I32(int32(c.K))
	args.I64(int64(c.LDA)).I64(int64(c.LDB)).I64(int64(c.LDC))
	args.I64(int64(c.StrideA)).I64(int64(c.StrideB)).I64(int64(c.StrideC)).I32(int32(c.Batch))
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := e.launchDep(fn, l.Grid, l.Block, 0, &args); err != nil {
		return fmt.Errorf("rocm: launch %s (grid %v): %w", l.Name, l.Grid, err)
	}
	e.launches.Add(1)
	return nil
}

// gemmFunction compiles (once per process, through the code cache) and
// loads (once per executor) the portable GEMM and returns an entry point.
func (e *Executor) gemmFunction(name string) (hip.Function, error) {
	return e.libFunction("loom_gemm", kernels.GemmSource, name)
}

// libFunction returns entry point name of one of the hand-written kernel
// libraries (the portable GEMM, conv, quant), compiling it through the code
// cache and loading it on first use. The function is memoized per
// executor: rendering the library's source and hashing it into the code
// cache's key costs more than a launch, and these are looked up at every
// launch (a Q4_K mat-vec step spent ~0.5 ms there, the kernel ~0.02 ms).
func (e *Executor) libFunction(lib string, source func(codegen.Target) string, name string) (hip.Function, error) {
	key := lib + "\x00" + name
	if f, ok := e.libFns.Load(key); ok {
		return f.(hip.Function), nil
	}
	obj, _, err := e.codes.get(e.comp, CacheDir(), source(e.target), lib, e.info.Arch, e.opts)
	if err != nil {
		return hip.Function{}, err
	}
	f, err := e.function(obj, name)
	if err != nil {
		return hip.Function{}, err
	}
	e.libFns.Store(key, f)
	return f, nil
}

// closeGemm releases the vendor handle and its workspace.
func (e *Executor) closeGemm() error {
	g := &e.gemmS
	if g.vendor == nil {
		return nil
	}
	err := g.vendor.Close()
	if g.ws != nil {
		e.alloc.release(g.ws)
	}
	g.vendor, g.ws = nil, nil
	return err
}

// matmulKey keys a matmul step's prepared call in plan.Kernel.Cache.
type matmulKey struct{}

// matmulStep is a matmul kernel prepared for this executor.
type matmulStep struct {
	g    plan.GemmStep
	tf32 bool
}

// prepareMatmul maps k onto its GEMM call, opens the GEMM engine and, when
// the portable kernel runs the step, compiles and loads it, so that a run
// does neither.
func (e *Executor) prepareMatmul(k *plan.Kernel, tf32 bool) (*matmulStep, error) {
	if v, ok := k.Cache.Load(plan.KeyOf(e, matmulKey{})); ok {
		return v.(*matmulStep), nil
	}
	g, err := plan.Gemm(k)
	if err != nil {
		return nil, err
	}
	if _, err := gemmType(g.DType); err != nil {
		return nil, err
	}
	if l, ok := kernels.PlanGemv(g.DType, g.Call, false); ok && gemvEnabled {
		// A skinny product: load the gemv library now (compiled once),
		// not at the first run.
		if _, err := e.libFunction("loom_gemv", kernels.GemvSource, l.Name); err != nil {
			return nil, err
		}
	} else if st := e.gemm(); st.vendor == nil {
		l, err := kernels.PlanGemm(g.DType, g.Call)
		if err != nil {
			return nil, err
		}
		if _, err := e.gemmFunction(l.Name); err != nil {
			return nil, err
		}
	}
	v, _ := k.Cache.LoadOrStore(plan.KeyOf(e, matmulKey{}), &matmulStep{g: g, tf32: tf32})
	return v.(*matmulStep), nil
}

// runMatmul queues a matmul step: one strided-batched GEMM on the vendor
// library or the portable kernel.
func (e *Executor) runMatmul(k *plan.Kernel, mem []exec.Memory) error {
	ms, err := e.prepareMatmul(k, false)
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	g, c := ms.g, ms.g.Call
	size := g.DType.Size()
	ptr := func(b *plan.Buffer, off, n int) (hip.DevPtr, error) { return e.span(mem, b, size, off, n) }
	if c.M == 0 || c.N == 0 || c.Batch == 0 {
		return nil
	}
	na, nb, nc := c.Extents()
	a, err := ptr(g.A, g.OffA, na)
	if err != nil {
		return fmt.Errorf("rocm: %s operand a: %w", k.Name, err)
	}
	b, err := ptr(g.B, g.OffB, nb)
	if err != nil {
		return fmt.Errorf("rocm: %s operand b: %w", k.Name, err)
	}
	out, err := ptr(g.C, 0, nc)
	if err != nil {
		return fmt.Errorf("rocm: %s output: %w", k.Name, err)
	}
	if err := e.runGemm(g.DType, c, a, b, out, ms.tf32, false); err != nil {
		return fmt.Errorf("rocm: %s (%s): %w", k.Name, e.GEMMBackend(), err)
	}
	return nil
}

// BLAS says what runs matmul steps here (exec.BLASNamer, for Placement).
func (e *Executor) BLAS() string { return e.GEMMBackend() }

// span returns the device address of elements [off, off+n) of buffer b
// (elements of size bytes), checking that b's memory is live and holds
// them: the one bounds check of the steps that hand raw pointers to a
// library or a hand-written kernel (GEMM, conv, quantized).
func (e *Executor) span(mem []exec.Memory, b *plan.Buffer, size, off, n int) (hip.DevPtr, error) {
	mm, err := e.mem(mem[b.ID])
	if err != nil {
		return 0, fmt.Errorf("buffer b%d: %w", b.ID, err)
	}
	if !mm.blk.live {
		return 0, fmt.Errorf("buffer b%d: memory was freed", b.ID)
	}
	if need := (int64(off) + int64(n)) * int64(size); n > 0 && mm.blk.n < need {
		return 0, fmt.Errorf("buffer b%d: the step reaches %d bytes of a %d-byte allocation", b.ID, need, mm.blk.n)
	}
	return mm.blk.ptr + hip.DevPtr(int64(off)*int64(size)), nil
}

// gemvEnabled routes products with at most kernels.GemvMaxRows rows of A
// (decode steps) to Loom's skinny-product kernels (kernels/gemv.hip)
// instead of the GEMM library: they read B at the bandwidth a library's
// gemv reaches and cost one launch (~12 µs of host time) where a cuBLAS
// call cost ~23 µs on the H100 measured. LOOM_GPU_GEMV=off sends them to
// the library, for comparison.
var gemvEnabled = os.Getenv("LOOM_GPU_GEMV") != "off"

// gemvAligned says whether the vector kernels can read A and B: addresses,
// leading dimensions and batch strides in multiples of 16 bytes.
func gemvAligned(d dtype.DType, c blas.Call, a, b hip.DevPtr) bool {
	sz := int64(d.Size())
	ok := func(v int64) bool { return v%16 == 0 }
	return ok(int64(a)) && ok(int64(b)) && ok(int64(c.LDA)*sz) && ok(int64(c.LDB)*sz) &&
		ok(int64(c.StrideA)*sz) && ok(int64(c.StrideB)*sz)
}

// launchGemv queues a skinny product.
func (e *Executor) launchGemv(l kernels.GemmLaunch, c blas.Call, a, b, out hip.DevPtr) error {
	fn, err := e.libFunction("loom_gemv", kernels.GemvSource, l.Name)
	if err != nil {
		return err
	}
	var args hip.Args
	args.Ptr(a).Ptr(b).Ptr(out).I32(int32(c.M)).I32(int32(c.N)).I32(int32(c.K))
	args.I64(int64(c.LDA)).I64(int64(c.LDB)).I64(int64(c.LDC))
	args.I64(int64(c.StrideA)).I64(int64(c.StrideB)).I64(int64(c.StrideC))
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := e.launchDep(fn, l.Grid, l.Block, 0, &args); err != nil {
		return fmt.Errorf("rocm: launch %s (grid %v): %w", l.Name, l.Grid, err)
	}
	e.launches.Add(1)
	return nil
}

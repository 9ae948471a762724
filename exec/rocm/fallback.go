package rocm

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

var _ exec.Fallbacker = (*Executor)(nil)

// The GPU executor runs elementwise and row kernels (reductions,
// normalisations: codegen.Kernel) and indexing ops (package kernels). A row
// kernel codegen refuses runs on the CPU through the runner's fallback
// (exec.Fallbacker), with explicit transfers that Placement shows.

// supportsKey keys a row kernel's verdict in plan.Kernel.Cache.
type supportsKey struct{}

// runsAllKey keys a plan's verdict in plan.Plan.Cache: whether every step
// runs here.
type runsAllKey struct{}

// RunsAll implements exec.AllNative: every step of p runs on the GPU. The
// verdict is the steps' (Supports), which never changes for a kernel and
// an executor, and is kept in the plan.
func (e *Executor) RunsAll(p *plan.Plan) bool {
	if v, ok := p.Cache.Load(e.runsAllKey); ok {
		return v.(bool)
	}
	all := !slices.ContainsFunc(p.Steps, func(s *plan.Step) bool { return e.Supports(s.Kernel) != nil })
	p.Cache.Store(e.runsAllKey, all)
	return all
}

// Supports reports whether the executor runs k on the GPU. A row kernel is
// supported when codegen renders it (the verdict is cached in the kernel,
// since the runner asks at every run). Matmul steps always are (vendor
// BLAS or the portable GEMM, gemm.go); window steps when they have a GPU
// path (window.go), quantized steps when their format has kernels
// (quant.go).
func (e *Executor) Supports(k *plan.Kernel) error {
	if k.IsWindow() {
		return e.supportsWindow(k)
	}
	if k.IsFusedMatmul() {
		return nil // the skinny-product kernel, or the parts: GPU steps either way
	}
	if k.IsFusedConv() {
		_, err := gemmType(k.Instrs[k.ConvAt()].Node.DType)
		return err // the conv with its fused transpose, or the parts
	}
	if k.IsFusedQuant() {
		return supportsQuantNode(k.Instrs[k.QuantAt()].Node) // the fused mat-vec or dequantization, or the parts
	}
	if k.IsFusedWindow() {
		if kernels.HasWindowKernel(k) {
			return nil
		}
		return fmt.Errorf("no GPU kernel for %s (fused window kernel %s): it runs on the CPU", k.WindowNode().Op, k.Name)
	}
	if k.IsQuant() {
		return e.supportsQuant(k)
	}
	if k.IsCollective() {
		return e.supportsCollective()
	}
	if k.IsMatmul() || k.RowAxes == 0 {
		return nil
	}
	if v, ok := k.Cache.Load(plan.KeyOf(e, supportsKey{})); ok {
		err, _ := v.(error)
		return err
	}
	var verdict error
	if _, err := e.source(k); err != nil {
		verdict = fmt.Errorf("no GPU rendering of this row kernel: %w", err)
	}
	k.Cache.Store(plan.KeyOf(e, supportsKey{}), verdict)
	return verdict
}

var (
	hostOnce sync.Once
	host     *cpu.Executor
)

// Fallback is the CPU executor that runs unsupported steps (one per
// process: it holds no device state).
func (e *Executor) Fallback() exec.Executor {
	hostOnce.Do(func() { host = cpu.New() })
	return host
}

// Write copies a host tensor into device memory from Alloc; the copy is
// finished when Write returns.
func (e *Executor) Write(m exec.Memory, t *tensor.Tensor) error {
	mm, err := e.mem(m)
	if err != nil {
		return err
	}
	src := t.Bytes()
	if int64(len(src)) > mm.blk.size {
		return fmt.Errorf("rocm: write of %d bytes into a %d-byte block", len(src), mm.blk.size)
	}
	if len(src) == 0 {
		return nil
	}
	defer e.enter(nil)()
	return e.dev.MemcpyHtoD(mm.blk.ptr, unsafe.Pointer(&src[0]), uint64(len(src)), e.stream)
}

// CopyGBps times a device-to-device copy of n bytes (median of reps, with
// device events) and returns its bandwidth counting bytes read plus bytes
// written: the ceiling `loom bench` compares every workload with.
func (e *Executor) CopyGBps(n, reps int) (float64, error) {
	src, err := e.alloc.alloc(int64(n))
	if err != nil {
		return 0, err
	}
	defer e.alloc.release(src)
	dst, err := e.alloc.alloc(int64(n))
	if err != nil {
		return 0, err
	}
	defer e.alloc.release(dst)
	defer e.enter(nil)()
	if err := e.dev.MemsetD8(src.ptr, 0x3c, uint64(n), e.stream); err != nil {
		return 0, err
	}
	start, err := e.dev.NewEvent()
	if err != nil {
		return 0, err
	}
	defer e.dev.DestroyEvent(start)
	end, err := e.dev.NewEvent()
	if err != nil {
		return 0, err
	}
	defer e.dev.DestroyEvent(end)
	times := make([]float64, 0, reps)
	for i := range reps + 1 {
		if err := e.dev.Record(start, e.stream); err != nil {
			return 0, err
		}
		if err := e.dev.MemcpyDtoD(dst.ptr, src.ptr, uint64(n), e.stream); err != nil {
			return 0, err
		}
		if err := e.dev.Record(end, e.stream); err != nil {
			return 0, err
		}
		if err := e.dev.EventSynchronize(end); err != nil {
			return 0, err
		}
		ms, err := e.dev.ElapsedMs(start, end)
		if err != nil {
			return 0, err
		}
		if i > 0 { // the first copy warms up
			times = append(times, float64(ms))
		}
	}
	slices.Sort(times)
	return 2 * float64(n) / (times[len(times)/2] / 1e3) / 1e9, nil
}

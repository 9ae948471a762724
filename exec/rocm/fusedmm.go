package rocm

import (
	"context"
	"fmt"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
)

// Fused matmul kernels (plan.MatmulAt: a matmul with the elementwise chain
// applied to its output; fuse gives products no prologue). A skinny
// product (decode: at most kernels.GemvMaxRows rows) runs as one launch of
// the gemv kernel with the epilogue applied to every element of C it
// stores (kernels.GemvFused): a decode step's output and down projections
// add the residual as they store, the LM head casts its logits, and the
// gate/up product (its weight's rows interleaved) stores silu(gate)·up of
// each pair of its rows (a pair epilogue, plan.Kernel.PairEpilogue:
// neighbouring groups of a block meet in shared memory; groups of a whole
// block, 256 lanes, take the parts). Anything
// else — a GEMM for the vendor library or the portable kernel,
// LOOM_GPU_GEMV=off, a C that is not contiguous — runs the parts
// (exec.RunFusedParts): the GEMM, then the epilogue's kernel, as unfused.

// fusedMatmulKey keys a fused matmul's prepared form in plan.Kernel.Cache.
type fusedMatmulKey struct{ variant string }

// fusedMatmul is a fused matmul prepared for one gemv variant.
type fusedMatmul struct {
	fn   hip.Function
	name string
}

// fusedGemv returns the skinny-product launch for fused kernel k with parts
// and the core's GEMM geometry g, or ok = false when the parts must run
// one by one. aligned says whether A and B can take 16-byte loads.
func (e *Executor) fusedGemv(k *plan.Kernel, parts *plan.FusedParts, g plan.GemmStep, aligned bool) (*fusedMatmul, kernels.GemmLaunch, bool, error) {
	c := g.Call
	if !gemvEnabled || parts.Pre != nil || (c.Batch > 1 && c.StrideC != c.M*c.N) || (c.M > 1 && c.LDC != c.N) {
		return nil, kernels.GemmLaunch{}, false, nil
	}
	l, ok := kernels.PlanGemv(g.DType, c, aligned)
	if !ok || k.PairEpilogue && (c.Batch != 1 || c.N%2 != 0 || !kernels.GemvPairs(l.Name)) {
		return nil, kernels.GemmLaunch{}, false, nil
	}
	fm, err := e.fusedUnit(k, fusedMatmulKey{l.Name}, func() (string, string, error) {
		return kernels.GemvFused(e.target, l.Name, k, parts)
	})
	if err != nil {
		return nil, l, false, err
	}
	return fm, l, true, nil
}

// fusedUnit returns the entry that render's translation unit names for
// fused kernel k, compiled (once per process, through the code cache) and
// loaded (once per kernel and executor) on first use, kept in k's cache
// under key.
func (e *Executor) fusedUnit(k *plan.Kernel, key any, render func() (name, code string, err error)) (*fusedMatmul, error) {
	ck := plan.KeyOf(e, key)
	if v, ok := k.Cache.Load(ck); ok {
		return v.(*fusedMatmul), nil
	}
	name, code, err := render()
	if err != nil {
		return nil, err
	}
	obj, _, err := e.codes.get(e.comp, CacheDir(), code, name, e.info.Arch, e.opts)
	if err != nil {
		return nil, err
	}
	fn, err := e.function(obj, name)
	if err != nil {
		return nil, err
	}
	v, _ := k.Cache.LoadOrStore(ck, &fusedMatmul{fn: fn, name: name})
	return v.(*fusedMatmul), nil
}

// fusedGeomKey keys a fused matmul's parts and GEMM geometry in
// plan.Kernel.Cache (executor-independent, like exec.FusedParts').
type fusedGeomKey struct{ buffers int }

type fusedGeom struct {
	parts *plan.FusedParts
	g     plan.GemmStep
}

// fusedGeometry returns k's parts and the core's GEMM geometry, worked out
// once per plan rather than at every decode step.
func fusedGeometry(k *plan.Kernel, buffers int) (*plan.FusedParts, plan.GemmStep, error) {
	if v, ok := k.Cache.Load(fusedGeomKey{buffers}); ok {
		fg := v.(*fusedGeom)
		return fg.parts, fg.g, nil
	}
	parts, err := exec.FusedParts(k, buffers)
	if err != nil {
		return nil, plan.GemmStep{}, err
	}
	g, err := plan.Gemm(parts.Core)
	if err != nil {
		return nil, plan.GemmStep{}, err
	}
	v, _ := k.Cache.LoadOrStore(fusedGeomKey{buffers}, &fusedGeom{parts, g})
	fg := v.(*fusedGeom)
	return fg.parts, fg.g, nil
}

// prepareFusedMatmul readies a fused matmul: its skinny-product kernel when
// it is one (compiled now, not at the first run, for the alignment its
// layout gives with 16-byte aligned buffers, as the allocator's are), and
// every part otherwise, so that a first run compiles nothing.
func (e *Executor) prepareFusedMatmul(k *plan.Kernel, buffers int, tf32 bool) error {
	parts, g, err := fusedGeometry(k, buffers)
	if err != nil {
		return err
	}
	sz := hip.DevPtr(g.DType.Size())
	if _, _, ok, err := e.fusedGemv(k, parts, g, gemvAligned(g.DType, g.Call, hip.DevPtr(g.OffA)*sz, hip.DevPtr(g.OffB)*sz)); ok || err != nil {
		return err
	}
	for _, p := range []*plan.Kernel{parts.Pre, parts.Post} {
		if p != nil {
			if _, err := e.prepare(p); err != nil {
				return err
			}
		}
	}
	_, err = e.prepareMatmul(parts.Core, tf32)
	return err
}

// runFusedMatmul queues a fused matmul: one skinny-product launch, or the
// parts.
func (e *Executor) runFusedMatmul(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	parts, g, err := fusedGeometry(k, len(mem))
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	c := g.Call
	if c.M == 0 || c.N == 0 || c.Batch == 0 || c.K == 0 {
		return exec.RunFusedParts(ctx, partRunner{e}, k, mem)
	}
	size := g.DType.Size()
	na, nb, _ := c.Extents()
	if parts.Pre != nil {
		return exec.RunFusedParts(ctx, partRunner{e}, k, mem)
	}
	a, err := e.span(mem, g.A, size, g.OffA, na)
	if err != nil {
		return fmt.Errorf("rocm: %s operand a: %w", k.Name, err)
	}
	b, err := e.span(mem, g.B, size, g.OffB, nb)
	if err != nil {
		return fmt.Errorf("rocm: %s operand b: %w", k.Name, err)
	}
	fm, l, ok, err := e.fusedGemv(k, parts, g, gemvAligned(g.DType, c, a, b))
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	if !ok {
		return exec.RunFusedParts(ctx, partRunner{e}, k, mem)
	}
	out, err := e.span(mem, k.Out, k.Out.DType.Size(), 0, k.Out.Numel())
	if err != nil {
		return fmt.Errorf("rocm: %s output: %w", k.Name, err)
	}
	var args hip.Args
	args.Ptr(a).Ptr(b).Ptr(out).I32(int32(c.M)).I32(int32(c.N)).I32(int32(c.K))
	args.I64(int64(c.LDA)).I64(int64(c.LDB)).I64(int64(c.LDC))
	args.I64(int64(c.StrideA)).I64(int64(c.StrideB)).I64(int64(c.StrideC))
	ops, err := e.operandBases(k, mem)
	if err != nil {
		return fmt.Errorf("rocm: %s %w", k.Name, err)
	}
	for _, p := range ops {
		args.Ptr(p)
	}
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := e.launchDep(fm.fn, l.Grid, l.Block, 0, &args); err != nil {
		return fmt.Errorf("rocm: launch %s (grid %v): %w", fm.name, l.Grid, err)
	}
	e.launches.Add(1)
	return nil
}

// operandBases returns the base of every operand of fused kernel k, in
// k.Ins order, each checked to hold what its layout reads: the pointers a
// kernel with an epilogue rendered by codegen.ScalarFunc takes (it applies
// the layouts itself).
func (e *Executor) operandBases(k *plan.Kernel, mem []exec.Memory) ([]hip.DevPtr, error) {
	ps := make([]hip.DevPtr, len(k.Ins))
	for i, op := range k.Ins {
		_, hi := op.Layout.Span()
		p, err := e.span(mem, op.Buf, op.Buf.DType.Size(), 0, hi)
		if err != nil {
			return nil, fmt.Errorf("operand %d: %w", i, err)
		}
		ps[i] = p
	}
	return ps, nil
}

// partRunner runs a fused kernel's parts as steps of the executor's own,
// not through Run: the step profile (profile.go) counts the fused kernel
// once, with its parts' time. Its temporaries go back like a step's
// scratch (releaseScratch): to the recording while a replay capture is
// open, since the recorded graph refers to them, else to the allocator.
type partRunner struct{ *Executor }

func (r partRunner) Run(ctx context.Context, s *plan.Step, mem []exec.Memory) error {
	return r.Executor.run(ctx, s, mem)
}

func (r partRunner) Free(m exec.Memory) {
	if mm, err := r.mem(m); err == nil {
		r.releaseScratch(mm.blk)
	}
}

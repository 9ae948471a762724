package rocm

import (
	"context"
	"fmt"
	"os"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
)

// Warming the vendor GEMM (Prepare): cuBLAS spends its first call of each
// GEMM shape choosing and readying a kernel, then a few µs on every later
// one. A prepared plan's first run paid that: SmolLM-135M's first prefill
// of 64 tokens (bf16, H200, session 57; model TestGPUFirstPrefill) took
// 116.8 ms, 103.2 of them in its 180 cuBLAS calls, against 10.0 ms and
// 2.8 for the same prefill after. Prepare now makes each distinct vendor
// call of the plan once, on scratch operands of the call's extents, so
// that a run compiles, loads and chooses nothing. Measured (session 58,
// H200, the same model, two runs each alternating with LOOM_GEMM_WARM=0):
// the first prefill 15.5 and 11.6 ms (cuBLAS 2.8 and 2.3) against 135.7
// and 132.4 (cuBLAS 122.2 and 118.8), Prepare 300.6 and 266.3 ms against
// 168.0 and 171.7: the cost moves to Prepare rather than going away, so
// that a prepared program's first run is as fast as the ones after it.
// Decisions:
//
//   - Only calls the vendor library would take: products that the skinny
//     kernels take (kernels.PlanGemv: decode's one-row products) have
//     nothing to warm.
//   - Best effort: a call whose operands would need more than
//     gemmWarmMaxBytes of scratch, or whose scratch cannot be had, is left
//     to its first run; a failing warm-up call is reported by the run that
//     makes the same call, not by Prepare.
//   - Each distinct call (dtype, shape, leading dimensions, strides,
//     batch, TF32) once per executor (Executor.gemmWarm).
//   - LOOM_GEMM_WARM=0 turns it off, to compare.
const gemmWarmMaxBytes = 512 << 20

var gemmWarmOff = os.Getenv("LOOM_GEMM_WARM") == "0"

// gemmWarmKey is one distinct vendor call.
type gemmWarmKey struct {
	d    dtype.DType
	c    blas.Call
	tf32 bool
}

// warmGemms makes each vendor GEMM call of p's matmul steps (plain and
// fused) once on scratch operands, then waits for the device.
func (e *Executor) warmGemms(ctx context.Context, p *plan.Plan) {
	if gemmWarmOff {
		return
	}
	g := e.gemm()
	if g.vendor == nil {
		return
	}
	warmed := false
	for _, s := range p.Steps {
		k := s.Kernel
		var gs plan.GemmStep
		switch {
		case k.IsMatmul():
			var err error
			if gs, err = plan.Gemm(k); err != nil {
				continue
			}
		case k.IsFusedMatmul():
			parts, g, err := fusedGeometry(k, len(p.Buffers))
			if err != nil || parts.Pre != nil {
				continue
			}
			sz := hip.DevPtr(g.DType.Size())
			if _, _, ok, err := e.fusedGemv(k, parts, g, gemvAligned(g.DType, g.Call, hip.DevPtr(g.OffA)*sz, hip.DevPtr(g.OffB)*sz)); ok || err != nil {
				continue
			}
			gs = g
		default:
			continue
		}
		c := gs.Call
		if c.M == 0 || c.N == 0 || c.K == 0 || c.Batch == 0 {
			continue
		}
		sz := hip.DevPtr(gs.DType.Size())
		if _, ok := kernels.PlanGemv(gs.DType, c, gemvAligned(gs.DType, c, hip.DevPtr(gs.OffA)*sz, hip.DevPtr(gs.OffB)*sz)); ok && gemvEnabled {
			continue
		}
		key := gemmWarmKey{gs.DType, c, p.AllowTF32}
		if _, done := e.gemmWarm.LoadOrStore(key, true); done {
			continue
		}
		if err := e.warmGemm(ctx, gs.DType, c, p.AllowTF32); err != nil {
			e.gemmWarm.Delete(key) // left to the first run
			continue
		}
		warmed = true
	}
	if warmed {
		e.Sync()
	}
}

// warmGemm queues call c once on zeroed scratch operands.
func (e *Executor) warmGemm(ctx context.Context, d dtype.DType, c blas.Call, tf32 bool) error {
	t, err := gemmType(d)
	if err != nil {
		return err
	}
	na, nb, nc := c.Extents()
	const align = 256
	round := func(n int) int64 { return (int64(n*d.Size()) + align - 1) / align * align }
	total := round(na) + round(nb) + round(nc)
	if total > gemmWarmMaxBytes {
		return fmt.Errorf("rocm: warm GEMM: %d bytes of scratch", total)
	}
	release := e.enter(ctx)
	defer release()
	blk, err := e.alloc.alloc(total)
	if err != nil {
		return err
	}
	defer e.alloc.release(blk)
	a := blk.ptr
	b := a + hip.DevPtr(round(na))
	out := b + hip.DevPtr(round(nb))
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := e.dev.MemsetD8(a, 0, uint64(total), e.stream); err != nil {
		return err
	}
	return e.gemm().vendor.Gemm(vendorArgs(c, t, a, b, out, tf32))
}

package rocm

import (
	"context"
	"fmt"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
)

// Window steps (ir.ClassWindow). Pools and upsampling run the hand-written
// kernels of package kernels (window.hip), planned, prepared and launched
// exactly like indexing steps (index.go: one source per step, one launch,
// no error flag; isIndexKernel takes them before the window dispatch
// here). Convolutions run conv.go's paths (the vendor library or Loom's
// im2col + GEMM). A window step with no GPU path — a nearest upsampling
// whose index product overflows 64 bits — is reported unsupported, so the
// runner runs it on the CPU with explicit transfers (fallback.go) instead
// of failing.

// supportsWindow is Supports' verdict on a window step.
func (e *Executor) supportsWindow(k *plan.Kernel) error {
	n := k.Instrs[0].Node
	if n.Op == ir.OpConv || n.Op == ir.OpConvTranspose {
		_, err := gemmType(n.DType)
		return err
	}
	if kernels.HasWindowKernel(k) {
		return nil
	}
	return fmt.Errorf("no GPU kernel for %s (window step %s): it runs on the CPU", n.Op, k.Name)
}

// windowKey returns the cache key a conv step's prepared form is under.
func windowKey(*plan.Kernel) any { return convKey{} }

// prepareWindow makes a conv step ready to run.
func (e *Executor) prepareWindow(k *plan.Kernel, tf32 bool) error {
	_, err := e.prepareConv(k, tf32)
	return err
}

// runWindow queues a conv step.
func (e *Executor) runWindow(_ context.Context, k *plan.Kernel, mem []exec.Memory) error {
	return e.runConv(k, mem)
}

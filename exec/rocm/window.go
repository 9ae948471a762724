package rocm

import (
	"context"
	"fmt"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// Window steps (ir.ClassWindow: conv, pools, upsampling) each run as their
// own kernels; the ones without a GPU kernel run on the CPU through the
// runner's fallback.

// supportsWindow says whether a window step runs on the GPU.
func (e *Executor) supportsWindow(k *plan.Kernel) error {
	switch op := k.Instrs[0].Node.Op; op {
	case ir.OpConv, ir.OpConvTranspose:
		_, err := gemmType(k.Instrs[0].Node.DType)
		return err
	default:
		return fmt.Errorf("no GPU kernel for %v yet", op)
	}
}

// windowKey returns the cache key a window step's prepared form is under.
func windowKey(k *plan.Kernel) any { return convKey{} }

// prepareWindow makes a window step ready to run.
func (e *Executor) prepareWindow(k *plan.Kernel, tf32 bool) error {
	_, err := e.prepareConv(k, tf32)
	return err
}

// runWindow queues a window step.
func (e *Executor) runWindow(_ context.Context, k *plan.Kernel, mem []exec.Memory) error {
	return e.runConv(k, mem)
}

package rocm

import (
	"fmt"

	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
)

// Window steps (ir.ClassWindow). Pools and upsampling run the hand-written
// kernels of package kernels (window.hip), planned, prepared and launched
// exactly like indexing steps (index.go: one source per step, one launch,
// no error flag). A window step with no kernel there — a convolution, or a
// nearest upsampling whose index product overflows 64 bits — is reported
// unsupported, so the runner runs it on the CPU with explicit transfers
// (fallback.go) instead of failing.

// windowSupport is Supports' verdict on a window step.
func windowSupport(k *plan.Kernel) error {
	if kernels.HasWindowKernel(k) {
		return nil
	}
	return fmt.Errorf("no GPU kernel for %s (window step %s): it runs on the CPU", k.Instrs[0].Node.Op, k.Name)
}

package rocm

import (
	"fmt"

	"github.com/loomgraph/loom/plan"
)

// supportsWindow says whether a window step (conv, pool, upsampling) runs
// on the GPU; the others run on the CPU through the runner's fallback.
func (e *Executor) supportsWindow(k *plan.Kernel) error {
	return fmt.Errorf("no GPU kernel for %v yet", k.Instrs[0].Node.Op)
}

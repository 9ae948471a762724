package exec

import (
	"context"
	"fmt"

	"github.com/loomgraph/loom/plan"
)

// MemoryBudget is implemented by executors that know how much memory a run
// can still get (the CPU from the host's available memory, the GPU from the
// device's free memory plus its allocator's cache). The runner checks a
// plan's peak bytes against it before allocating anything, so a plan too
// large for the machine fails with an error instead of ending the process
// (Go's fatal "out of memory", or the kernel's OOM killer).
type MemoryBudget interface {
	// AvailableBytes is how many bytes of temporaries and outputs one run
	// may allocate now.
	AvailableBytes() (int64, error)
}

// Waiter is implemented by executors whose Sync can take long (a GPU with
// queued kernels): Wait is Sync that returns when ctx is done, with ctx's
// error, without waiting for the queued work to finish. The executor must
// stay usable: memory the cancelled run frees may only be reused by work
// ordered after the abandoned work (the GPU's one stream does that).
type Waiter interface {
	Wait(ctx context.Context) error
}

// wait is Sync, or Wait where the executor has it.
func wait(ctx context.Context, e Executor) error {
	if w, ok := e.(Waiter); ok {
		return w.Wait(ctx)
	}
	return e.Sync()
}

// CheckBudget returns an error when p's peak bytes (temporaries with slot
// reuse, plus outputs) exceed what e reports available; executors without
// a MemoryBudget always pass. intoBytes are output bytes the caller
// supplies (RunInto) and the run therefore does not allocate.
func CheckBudget(e Executor, p *plan.Plan, intoBytes int) error {
	mb, ok := e.(MemoryBudget)
	if !ok {
		return nil
	}
	peak, _ := p.PeakBytes()
	need := int64(peak - intoBytes)
	if need <= 0 {
		return nil
	}
	avail, err := mb.AvailableBytes()
	if err != nil {
		return nil // unknown: let the allocations decide
	}
	if need > avail {
		return fmt.Errorf("loom: run on %s: the plan needs %d bytes at its peak (temporaries and outputs), more than the %d bytes available", e.Name(), need, avail)
	}
	return nil
}

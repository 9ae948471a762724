package exec

import (
	"context"

	"github.com/loomgraph/loom/plan"
)

// Preparer is implemented by executors that turn a plan's steps into
// device code before running them (the GPU executor: generate, compile or
// find in its caches, load). Prepare readies every step the executor runs
// itself (not those it hands to a fallback), so that a run does no
// compiling. It is idempotent and cheap once done, safe for concurrent use,
// and all-or-nothing: on error nothing of this call stays half-prepared and
// the executor stays usable. The error names the step, the kernel and the
// compiler's first lines.
//
// The runner calls Prepare before a plan's first step, so a plan that was
// never prepared explicitly is still compiled all at once (in parallel)
// rather than one kernel per step as the steps come.
type Preparer interface {
	Prepare(ctx context.Context, p *plan.Plan) error
}

// Prepare readies p on e when e is a Preparer; otherwise it does nothing.
func Prepare(ctx context.Context, e Executor, p *plan.Plan) error {
	if err := checkCall("prepare", ctx, e, p); err != nil {
		return err
	}
	if pr, ok := e.(Preparer); ok {
		return pr.Prepare(ctx, p)
	}
	return nil
}

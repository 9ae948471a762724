package graph

import (
	"context"

	"github.com/loomgraph/loom/exec"
)

// RunValues executes the program on e with inputs that are host tensors or
// tensors resident on e (see exec.RunValues). With keep, an executor that
// can hold tensors (exec.Resident, such as rocm) returns the outputs resident
// in its memory, so a caller can chain programs or keep weights on the
// device without copies; the caller then frees them. Without keep, or on an
// executor that cannot, the outputs are host *tensor.Tensor values.
func (p *Program) RunValues(ctx context.Context, e exec.Executor, inputs map[string]exec.Value, keep bool) (map[string]exec.Value, error) {
	if err := p.runnable("run_values", ctx, e); err != nil {
		return nil, err
	}
	return exec.RunValues(ctx, e, p.state.Plan, inputs, keep)
}

// Start queues the program on e and returns before e has run it (see
// exec.Start): the outputs, kept resident, may be given to the next run at
// once, and are read after the returned run's Wait.
func (p *Program) Start(ctx context.Context, e exec.Executor, inputs map[string]exec.Value) (*exec.Pending, error) {
	if err := p.runnable("start", ctx, e); err != nil {
		return nil, err
	}
	return exec.Start(ctx, e, p.state.Plan, inputs)
}

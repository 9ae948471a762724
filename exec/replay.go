package exec

import (
	"context"

	"github.com/loomgraph/loom/plan"
)

// Replays. A plan's steps, bound to the same memory, queue the same device
// work on every run: the kernels, their launch shapes and their arguments
// (buffer addresses and constants) depend only on the plan and the
// addresses, never on the values in the buffers. An executor that can
// record queued work and replay it as one unit (a CUDA or HIP graph) can
// therefore run a plan's second and later runs with one call, where the
// steps cost one or more calls each: that is what decides the speed of
// small plans run many times, such as a language model's decode step.
//
// Replaying is asked for per run, with WithReplay: the runner then hands
// the step loop to the executor's RunSteps, which runs it as usual, or
// records it, or replays a recording it made of an earlier run of the same
// plan with the same binding (every buffer at the same address, with the
// same size). What a replay gives up, and why it is asked for rather than
// always on:
//   - cancellation is checked once before the steps, not between them;
//   - the executor's per-kind launch counters (which tests read) count the
//     recorded launches once per replay as a whole, not kernel by kernel;
//   - a step profile (rocm ProfileSteps) turns replays off.
//
// Results are bit-identical to running the steps: the same kernels run on
// the same memory in the same order.

// Replayer is an executor that can record a run's steps and replay them.
type Replayer interface {
	// RunSteps queues p's steps bound to mem: by calling steps (which
	// queues them one by one, the runner's loop), by recording what steps
	// queues and then replaying it, or by replaying a recording of an
	// earlier call for p with the same binding. It returns steps' error
	// when it calls it; it falls back to calling steps whenever recording
	// is impossible.
	RunSteps(ctx context.Context, p *plan.Plan, mem []Memory, steps func(context.Context) error) error
	// Forget drops p's recordings and the memory they hold (a caller done
	// with p; recordings of plans never forgotten are dropped least
	// recently used first, or when the executor closes).
	Forget(p *plan.Plan)
}

type replayKey struct{}

// WithReplay returns ctx marked so that runs under it may (on true) or may
// not (on false) be recorded and replayed by a Replayer (see above).
func WithReplay(ctx context.Context, on bool) context.Context {
	return context.WithValue(ctx, replayKey{}, on)
}

// replayWanted reports whether ctx asks for replays.
func replayWanted(ctx context.Context) bool {
	on, _ := ctx.Value(replayKey{}).(bool)
	return on
}

package exec

import (
	"context"
	"fmt"
	"sync"

	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// Runs left in flight: Start queues a run and returns before the device
// has done it, so that the host can queue the next run, whose inputs may be
// this one's outputs, while the device works. A model's greedy decode
// is the case it exists for: the host time between two steps (reading the
// token, checking it, binding the next step) otherwise leaves the device
// idle once a token.

// Marker is an executor that can wait for the work queued on it so far
// without waiting for work queued after.
type Marker interface {
	// Mark returns a function that waits for the work queued up to now, or
	// ok false where the executor cannot tell that work apart for the run
	// ctx belongs to (the run is then waited for at once).
	Mark(ctx context.Context) (wait func() error, ok bool)
}

// DoneReader is a Resident executor that can copy a value to the host
// without waiting for work queued after the value was written: the caller
// knows that work is done (Pending.Wait returned).
type DoneReader interface {
	ReadDone(v Value) (*tensor.Tensor, error)
}

// Pending is a run queued by Start.
type Pending struct {
	e      Executor
	out    map[string]Value
	mu     sync.Mutex
	done   bool
	err    error
	finish func() error // waits, checks and releases; nil once done
}

// Start is RunValues with kept outputs (keep true) that does not wait for
// the run: it returns once the run's work is queued, with the outputs as
// resident values the queued work fills. They may be given at once to
// later runs on the same executor, which the executor orders after this
// one; their contents may be read once Wait has returned. On an executor
// that cannot wait for one run apart from later ones (not a Marker, the
// CPU executor for one), Start runs the plan to the end like RunValues and
// Wait returns nil.
//
// Errors of the run's own checks (a bad id, say) come from Wait; until
// then, as after a failed Wait, the outputs' contents are unspecified, and
// they are the caller's to free either way. Every Start needs its Wait:
// the run's temporaries, uploads and error flags are released there.
// Inputs given with Donate are emptied at Start, as RunValues empties
// them.
func Start(ctx context.Context, e Executor, p *plan.Plan, inputs map[string]Value) (*Pending, error) {
	return begin(ctx, e, p, inputs, true, nil, true)
}

// Outputs returns the run's outputs by name.
func (r *Pending) Outputs() map[string]Value { return r.out }

// Wait waits for the run's work (not for runs queued after it), runs its
// deferred checks, releases what the run took and returns the first error.
// Later calls return the same error.
func (r *Pending) Wait() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.done = true
		r.err = r.finish()
		r.finish = nil
	}
	return r.err
}

// Host copies output name to the host after Wait: without waiting for
// runs queued since where the executor is a DoneReader.
func (r *Pending) Host(name string) (*tensor.Tensor, error) {
	if err := r.Wait(); err != nil {
		return nil, err
	}
	v, ok := r.out[name]
	if !ok {
		return nil, fmt.Errorf("loom: pending run: no output %q", name)
	}
	if t, ok := v.(*tensor.Tensor); ok {
		return t, nil
	}
	if d, ok := r.e.(DoneReader); ok {
		return d.ReadDone(v)
	}
	if t, ok := v.(interface {
		ToHost() (*tensor.Tensor, error)
	}); ok {
		return t.ToHost()
	}
	return nil, fmt.Errorf("loom: pending run: output %q is a %T, which cannot be copied to the host", name, v)
}

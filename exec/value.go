package exec

import (
	"context"
	"fmt"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// Value is a run's input or output: a host *tensor.Tensor or an
// executor-resident tensor (such as a rocm.Tensor, which lives in GPU
// memory).
type Value interface {
	DType() dtype.DType
	Shape() []int
}

// ResidentValue is a Value that lives in an executor's memory. Owner is the
// executor holding it; other executors cannot read it.
type ResidentValue interface {
	Value
	Owner() Executor
}

// Resident is implemented by executors that can keep tensors in their
// memory, so that runs can be chained and weights kept on the device without
// copies. A resident executor's Upload copies the tensor's bytes into its
// own memory before it returns: the host tensor may be reused or unmapped
// at once (model.Load uploads weights straight from a checkpoint's
// mapping).
type Resident interface {
	Executor
	// Adopt returns the memory of a resident tensor this executor owns, with
	// no copy; the runner neither releases nor frees it. ok is false (and
	// err nil) for values the executor does not own; err is set for one it
	// owns but cannot use (freed).
	Adopt(v Value) (m Memory, ok bool, err error)
	// Wrap hands output memory from Alloc(…, plan.BufOutput) to the caller as a
	// resident tensor holding buffer b; the tensor owns the memory from then
	// on (the runner no longer frees it).
	Wrap(m Memory, b *plan.Buffer) (ResidentValue, error)
}

// HostWriter is implemented by Resident executors that can copy a host
// tensor into the memory of a tensor resident on them, in place: after the
// work queued before it, finished when WriteHost returns. A model's first
// decode step of a Generate writes its token and position into the
// buffers its later steps hand them on in, so that its binding is theirs
// and it replays their recording (model: chainPairs).
type HostWriter interface {
	// WriteHost copies src into v, a tensor of this executor of src's
	// dtype and shape.
	WriteHost(v Value, src *tensor.Tensor) error
}

// RunValues executes a plan like Run, with inputs that are host tensors or
// tensors resident on e. With keep, and when e is Resident, the outputs stay
// in e's memory as resident values (the caller frees them); otherwise they
// are downloaded as host *tensor.Tensor values. A resident input owned by
// another executor is an error naming both.
//
// RunValues waits for the run's work to finish before returning (as Run
// does), so a resident input may be freed as soon as it returns.
func RunValues(ctx context.Context, e Executor, p *plan.Plan, inputs map[string]Value, keep bool) (map[string]Value, error) {
	return run(ctx, e, p, inputs, keep, nil)
}

// bindInput returns the memory backing an input value: the adopted memory of
// a tensor resident on e (uploaded false: not released after the run), or an
// upload of a host tensor.
func bindInput(e Executor, v Value) (m Memory, uploaded bool, err error) {
	if r, ok := e.(Resident); ok {
		m, ok, err := r.Adopt(v)
		if err != nil {
			return nil, false, err
		}
		if ok {
			return m, false, nil
		}
	}
	switch t := v.(type) {
	case *tensor.Tensor:
		m, err := e.Upload(t)
		return m, err == nil, err
	case ResidentValue:
		return nil, false, fmt.Errorf("%v%v is resident on %s, but the plan runs on %s; copy it to the host first",
			v.DType(), v.Shape(), DescribeExecutor(t.Owner()), DescribeExecutor(e))
	}
	return nil, false, fmt.Errorf("unsupported value type %T (want *tensor.Tensor or a tensor resident on %s)", v, DescribeExecutor(e))
}

// DescribeExecutor names an executor for errors: its String method if it
// has one, else its Name and address (which tells two executors of one kind
// apart).
func DescribeExecutor(e Executor) string {
	if e == nil {
		return "no executor"
	}
	if s, ok := e.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%s executor %p", e.Name(), e)
}

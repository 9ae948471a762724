package exec

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// Memory is an executor's handle to one allocation.
type Memory any

// Executor runs kernels on one device. Implementations must be safe for
// concurrent runs.
type Executor interface {
	// Name is "cpu", "rocm", … as shown in benchmarks and errors.
	Name() string
	// Alloc returns memory for n bytes that holds a buffer of the given
	// kind: a temporary slot (plan.BufTemp) or an output that Download will hand
	// to the caller (plan.BufOutput).
	Alloc(bytes int, kind plan.BufferKind) (Memory, error)
	// Free releases memory from Alloc.
	Free(Memory)
	// Upload returns memory holding t's contents. The executor may alias the
	// tensor (the CPU does); release is Release's job.
	Upload(t *tensor.Tensor) (Memory, error)
	// Release undoes Upload.
	Release(Memory)
	// Download returns b's contents as a host tensor the caller owns (the
	// CPU hands over output memory without a copy; Free must then not
	// recycle it).
	Download(m Memory, b *plan.Buffer) (*tensor.Tensor, error)
	// Run executes one step. mem[i] backs plan buffer i.
	Run(ctx context.Context, s *plan.Step, mem []Memory) error
	// Sync waits for all work issued so far.
	Sync() error
}

// CheckInputs checks inputs against the plan's declared names, dtypes and
// shapes and reports every problem in one error.
func CheckInputs(p *plan.Plan, inputs map[string]*tensor.Tensor) error {
	return CheckValues(p, hostValues(inputs))
}

// CheckValues is CheckInputs for values that may be host tensors or
// executor-resident tensors.
func CheckValues(p *plan.Plan, inputs map[string]Value) error {
	var errs []error
	given := 0 // plan inputs present in inputs
	for _, b := range p.Inputs {
		v, ok := inputs[b.Name]
		v = plain(v)
		if ok {
			given++
		}
		switch {
		case !ok || isNil(v):
			errs = append(errs, fmt.Errorf("loom: run: missing input %q (%v%v)", b.Name, b.DType, b.Shape))
		case v.DType() != b.DType || !shapeEqual(v, b.Shape):
			errs = append(errs, fmt.Errorf("loom: run: input %q is %v%v, graph declares %v%v", b.Name, v.DType(), v.Shape(), b.DType, b.Shape))
		}
	}
	if given == len(inputs) {
		return errors.Join(errs...) // no unknown names (a model's step has hundreds of inputs: no quadratic search)
	}
	for name := range inputs {
		if !slices.ContainsFunc(p.Inputs, func(b *plan.Buffer) bool { return b.Name == name }) {
			errs = append(errs, fmt.Errorf("loom: run: unknown input %q", name))
		}
	}
	return errors.Join(errs...)
}

// ShapeEqualer is a Value that compares its shape with one given without
// copying its own (Shape returns a copy).
type ShapeEqualer interface {
	ShapeEqual(shape []int) bool
}

// shapeEqual reports whether v's shape is shape.
func shapeEqual(v Value, shape []int) bool {
	if s, ok := v.(ShapeEqualer); ok {
		return s.ShapeEqual(shape)
	}
	return slices.Equal(v.Shape(), shape)
}

// isNil reports a nil Value, including a nil *tensor.Tensor in an interface.
func isNil(v Value) bool {
	if v == nil {
		return true
	}
	t, ok := v.(*tensor.Tensor)
	return ok && t == nil
}

// hostValues views a map of host tensors as values (nil tensors stay nil).
func hostValues(inputs map[string]*tensor.Tensor) map[string]Value {
	vals := make(map[string]Value, len(inputs))
	for name, t := range inputs {
		if t == nil {
			vals[name] = nil
		} else {
			vals[name] = t
		}
	}
	return vals
}

// Run executes a plan on an executor and returns its named outputs.
func Run(ctx context.Context, e Executor, p *plan.Plan, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	vals, err := run(ctx, e, p, hostValues(inputs), false, nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*tensor.Tensor, len(vals))
	for name, v := range vals {
		out[name] = v.(*tensor.Tensor) // keep=false: always downloaded
	}
	return out, nil
}

// run is the one plan runner behind Run and RunValues. Inputs are adopted
// (resident tensors of e, no copy) or uploaded (host tensors); outputs are
// downloaded, or with keep handed over as resident values when e is Resident.
// Everything the run allocated or uploaded is released on every path, except
// the output memory handed over to resident values. With into (RunInto),
// the outputs are written into the caller's tensors and out is nil.
func run(ctx context.Context, e Executor, p *plan.Plan, inputs map[string]Value, keep bool, into map[string]*tensor.Tensor) (map[string]Value, error) {
	r, err := begin(ctx, e, p, inputs, keep, into, false)
	if err != nil {
		return nil, err
	}
	return r.out, nil
}

// begin is the plan runner: it binds the inputs and outputs, queues the
// steps and, unless async and the executor can wait for a mark (Marker,
// with kept resident outputs), waits for them, checks the run's deferred
// checks and releases what the run took; the returned Pending is then
// done. With async on a Marker, the wait, the checks and the releases are
// left to Pending.Wait, and the outputs are the values the queued work
// will fill.
func begin(ctx context.Context, e Executor, p *plan.Plan, inputs map[string]Value, keep bool, into map[string]*tensor.Tensor, async bool) (r *Pending, err error) {
	if err := checkCall("run", ctx, e, p); err != nil {
		return nil, err
	}
	given := donatedNames(inputs)
	if err := CheckValues(p, inputs); err != nil {
		return nil, err
	}
	if err := Prepare(ctx, e, p); err != nil {
		return nil, fmt.Errorf("loom: run on %s: %w", e.Name(), err)
	}
	intoBytes := 0 // outputs written into the caller's tensors: not allocated
	if _, ok := e.(OutputBinder); ok && into != nil {
		for _, b := range p.Outputs {
			intoBytes += b.Bytes()
		}
	}
	if err := CheckBudget(e, p, intoBytes); err != nil {
		return nil, err
	}
	ctx, state := withRunState(ctx)
	mem := make([]Memory, len(p.Buffers))
	var uploaded, allocated []Memory
	outIndex := map[int]int{} // buffer ID → index in allocated
	releaseSlots := func() {}
	// Memory is taken in the order outputs, inputs, temporary slots (then
	// the steps' own scratch) and given back in the reverse order, the
	// outputs last (or by the caller, after the run): a caching allocator
	// with last-in-first-out free lists then hands the next run of the plan
	// the same blocks, so its binding repeats and can be replayed (see
	// WithReplay); with another order the blocks of two kinds can swap
	// from one run to the next.
	release := func() {
		state.release()
		releaseSlots()
		for _, m := range slices.Backward(uploaded) {
			e.Release(m)
		}
		for _, m := range slices.Backward(allocated) {
			if m != nil {
				e.Free(m)
			}
		}
	}
	handedOff := false        // the release is Pending.Wait's
	var markWait func() error // a Marker's wait for this run (async)
	defer func() {
		if !handedOff {
			if markWait != nil {
				markWait() // a failure after the steps were queued: let them end first
			}
			release()
		}
	}()
	aliases := donations(e, p, inputs, given, keep, into == nil)
	bound, err := givenOutputs(ctx, e, p, inputs, keep, into == nil)
	if err != nil {
		return nil, err
	}
	for _, b := range p.Buffers {
		if _, ok := aliases[b.ID]; ok || b.Kind != plan.BufOutput {
			continue // aliases are bound below, to their inputs' memory
		}
		if v, ok := bound[b.ID]; ok {
			// WithOutputs: the value's memory (a Donor's: Adopt).
			m, _, err := e.(Donor).Adopt(v)
			if err != nil {
				return nil, fmt.Errorf("loom: run on %s: output %q: %w", e.Name(), b.Name, err)
			}
			mem[b.ID] = m
			continue
		}
		m, alias, err := bindOutput(e, b, into)
		if err != nil {
			return nil, fmt.Errorf("loom: run on %s: output %q: %w", e.Name(), b.Name, err)
		}
		mem[b.ID] = m
		if alias {
			uploaded = append(uploaded, m)
			continue
		}
		outIndex[b.ID] = len(allocated)
		allocated = append(allocated, m)
	}
	for _, b := range p.Buffers {
		if b.Kind != plan.BufInput {
			continue
		}
		m, up, err := bindInput(e, plain(inputs[b.Name]))
		if err != nil {
			return nil, fmt.Errorf("loom: run on %s: input %q: %w", e.Name(), b.Name, err)
		}
		mem[b.ID] = m
		if up {
			uploaded = append(uploaded, m)
		}
	}
	slots, freeSlots, err := allocSlots(e, p)
	if err != nil {
		return nil, err
	}
	releaseSlots = freeSlots
	for _, b := range p.Buffers {
		if b.Kind == plan.BufTemp {
			mem[b.ID] = slots[b.Slot]
		}
	}
	for id, in := range aliases {
		mem[id] = mem[in.ID]
	}
	if err := runSteps(ctx, e, p, mem, state); err != nil {
		return nil, err
	}
	r = &Pending{e: e, done: true}
	if m, ok := e.(Marker); ok && async && keep && into == nil {
		if _, resident := e.(Resident); resident {
			markWait, _ = m.Mark(ctx)
		}
	}
	if markWait == nil {
		if err := wait(ctx, e); err != nil {
			return nil, fmt.Errorf("loom: run on %s: %w", e.Name(), err)
		}
		if err := state.check(); err != nil {
			return nil, fmt.Errorf("loom: run on %s: %w", e.Name(), err)
		}
	}
	if into != nil {
		return r, finishInto(e, p, mem, into)
	}
	r.out = make(map[string]Value, len(p.Outputs))
	if rs, ok := e.(Resident); ok && keep {
		for _, b := range p.Outputs {
			v, err := rs.Wrap(mem[b.ID], b)
			if err != nil {
				return nil, fmt.Errorf("loom: run on %s: output %q: %w", e.Name(), b.Name, err)
			}
			r.out[b.Name] = v
		}
		// Every output is wrapped: the values own their memory now; the
		// donated inputs whose memory an output took are emptied.
		for _, b := range p.Outputs {
			if in, ok := aliases[b.ID]; ok {
				d, isDonor := e.(Donor)
				if !isDonor {
					continue // a host tensor's bytes (donations): nothing to empty
				}
				if err := d.Disown(plain(inputs[in.Name])); err != nil {
					return nil, fmt.Errorf("loom: run on %s: donated input %q: %w", e.Name(), in.Name, err)
				}
				continue
			}
			if v, ok := bound[b.ID]; ok {
				if err := e.(Donor).Disown(v); err != nil {
					return nil, fmt.Errorf("loom: run on %s: output %q: %w", e.Name(), b.Name, err)
				}
				continue
			}
			allocated[outIndex[b.ID]] = nil
		}
		if markWait != nil {
			handedOff = true
			r.done = false
			r.finish = func() error {
				defer release()
				if err := markWait(); err != nil {
					return fmt.Errorf("loom: run on %s: %w", e.Name(), err)
				}
				if err := state.check(); err != nil {
					return fmt.Errorf("loom: run on %s: %w", e.Name(), err)
				}
				return nil
			}
		}
		return r, nil
	}
	for _, b := range p.Outputs {
		t, err := e.Download(mem[b.ID], b)
		if err != nil {
			return nil, fmt.Errorf("loom: run on %s: output %q: %w", e.Name(), b.Name, err)
		}
		r.out[b.Name] = t
	}
	return r, nil
}

// checkCall rejects the nil arguments a caller of Run, RunInto, RunValues
// or Prepare can pass, naming the call, instead of panicking on them.
func checkCall(op string, ctx context.Context, e Executor, p *plan.Plan) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("loom: %s: nil context", op)
	case isNilExecutor(e):
		return fmt.Errorf("loom: %s: nil executor", op)
	case p == nil:
		return fmt.Errorf("loom: %s: nil plan", op)
	}
	return nil
}

// isNilExecutor reports a nil Executor, including a typed nil pointer in
// the interface.
func isNilExecutor(e Executor) bool {
	if e == nil {
		return true
	}
	v := reflect.ValueOf(e)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// runSteps queues p's steps bound to mem: one by one, or, when ctx asks for
// replays (WithReplay) and e is a Replayer and no step falls back to
// another executor, through e's RunSteps, which may replay a recording of
// them.
func runSteps(ctx context.Context, e Executor, p *plan.Plan, mem []Memory, state *RunState) error {
	each := func(ctx context.Context) error {
		for i, s := range p.Steps {
			state.setStep(i)
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("loom: run on %s: cancelled before step %d (%s): %w", e.Name(), i, s.Kernel.Name, err)
			}
			if fb, why := fallbackFor(e, s.Kernel); fb != nil {
				if err := runFallback(ctx, fb, s, mem); err != nil {
					return fmt.Errorf("loom: run on %s: step %d (%s) on %s (%s): %w", e.Name(), i, s.Kernel.Name, fb.Fallback().Name(), why, err)
				}
				continue
			}
			if err := e.Run(ctx, s, mem); err != nil {
				return fmt.Errorf("loom: run on %s: step %d (%s): %w", e.Name(), i, s.Kernel.Name, err)
			}
		}
		return nil
	}
	r, ok := e.(Replayer)
	if !ok || !replayWanted(ctx) || len(p.Steps) == 0 {
		return each(ctx)
	}
	if !runsAll(e, p) {
		return each(ctx) // a step on another executor cannot be recorded
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("loom: run on %s: cancelled before its steps: %w", e.Name(), err)
	}
	return r.RunSteps(ctx, p, mem, each)
}

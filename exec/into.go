package exec

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// SlotAllocator is implemented by executors that keep temporary memory
// between runs (the CPU's arenas): AllocSlots hands one run all of its
// temporary slots, sized slotBytes, and release gives them back when the
// run ends. Memory is never shared by two runs in flight. Executors without
// it get one Alloc(…, plan.BufTemp) per slot, freed after the run.
type SlotAllocator interface {
	AllocSlots(slotBytes []int) (slots []Memory, release func(), err error)
}

// OutputBinder is implemented by executors whose memory is host memory (the
// CPU): BindOutput returns memory that is dst's own bytes, so a step writes
// straight into the caller's tensor. The runner calls Release on it after
// the run. Such an executor's Upload must alias the tensor's bytes too:
// donations (Donate) let a step write an output into a donated host
// tensor's upload.
type OutputBinder interface {
	BindOutput(b *plan.Buffer, dst *tensor.Tensor) (Memory, error)
}

// IntoDownloader is implemented by executors that can copy an output
// straight into a host tensor the caller owns. Executors without it have
// their output downloaded (Download) and copied into dst.
type IntoDownloader interface {
	DownloadInto(m Memory, b *plan.Buffer, dst *tensor.Tensor) error
}

// RunInto executes a plan like Run, writing its outputs into tensors the
// caller passes in, so a loop of runs allocates no outputs. Every output of
// the plan must be present in outputs, non-nil, with exactly the output's
// dtype and shape, and must not overlap an input or another output. On an
// OutputBinder (the CPU) the steps write straight into the tensors; on
// other executors each output is downloaded into its tensor. When RunInto
// returns an error the outputs' contents are unspecified.
func RunInto(ctx context.Context, e Executor, p *plan.Plan, inputs, outputs map[string]*tensor.Tensor) error {
	if err := checkCall("run", ctx, e, p); err != nil {
		return err
	}
	if err := CheckOutputs(p, inputs, outputs); err != nil {
		return err
	}
	_, err := run(ctx, e, p, hostValues(inputs), false, outputs)
	return err
}

// CheckOutputs checks the tensors given to RunInto against the plan's
// outputs — every output present, non-nil, of the declared dtype and shape,
// no unknown names — and that no output overlaps an input or another
// output. It reports every problem in one error.
func CheckOutputs(p *plan.Plan, inputs, outputs map[string]*tensor.Tensor) error {
	var errs []error
	for _, b := range p.Outputs {
		t, ok := outputs[b.Name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("loom: run into: missing output %q (want %v%v)", b.Name, b.DType, b.Shape))
		case t == nil:
			errs = append(errs, fmt.Errorf("loom: run into: output %q is nil (want %v%v)", b.Name, b.DType, b.Shape))
		case t.DType() != b.DType || !slices.Equal(t.Shape(), b.Shape):
			errs = append(errs, fmt.Errorf("loom: run into: output %q is %v%v, graph produces %v%v", b.Name, t.DType(), t.Shape(), b.DType, b.Shape))
		}
	}
	for name := range outputs {
		if !slices.ContainsFunc(p.Outputs, func(b *plan.Buffer) bool { return b.Name == name }) {
			errs = append(errs, fmt.Errorf("loom: run into: unknown output %q", name))
		}
	}
	for _, b := range p.Outputs {
		t := outputs[b.Name]
		if t == nil {
			continue
		}
		for name, in := range inputs {
			if in != nil && overlap(t, in) {
				errs = append(errs, fmt.Errorf("loom: run into: output %q shares memory with input %q", b.Name, name))
			}
		}
		for _, c := range p.Outputs {
			if c.ID < b.ID && outputs[c.Name] != nil && overlap(t, outputs[c.Name]) {
				errs = append(errs, fmt.Errorf("loom: run into: outputs %q and %q share memory", c.Name, b.Name))
			}
		}
	}
	return errors.Join(errs...)
}

// overlap reports whether two host tensors share any byte.
func overlap(a, b *tensor.Tensor) bool {
	x, y := a.Bytes(), b.Bytes()
	if len(x) == 0 || len(y) == 0 {
		return false
	}
	xs, ys := uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(&y[0]))
	return xs < ys+uintptr(len(y)) && ys < xs+uintptr(len(x))
}

// allocSlots returns memory for every temporary slot of p and the function
// that releases it: the executor's own slot allocator when it has one, else
// one Alloc per slot.
func allocSlots(e Executor, p *plan.Plan) ([]Memory, func(), error) {
	if sa, ok := e.(SlotAllocator); ok {
		slots, release, err := sa.AllocSlots(p.SlotBytes)
		if err != nil {
			return nil, nil, fmt.Errorf("loom: run on %s: temporary slots: %w", e.Name(), err)
		}
		return slots, release, nil
	}
	slots := make([]Memory, len(p.SlotBytes))
	release := func() { // in the reverse order of allocation (see run)
		for _, m := range slices.Backward(slots) {
			if m != nil {
				e.Free(m)
			}
		}
	}
	for i, n := range p.SlotBytes {
		m, err := e.Alloc(n, plan.BufTemp)
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("loom: run on %s: temporary slot %d: %w", e.Name(), i, err)
		}
		slots[i] = m
	}
	return slots, release, nil
}

// bindOutput returns the memory a run writes output b into. Without into
// it is fresh output memory (alias false: the runner frees it). With into,
// an OutputBinder's memory is the caller's tensor itself (alias true: the
// runner releases it and has nothing to download); other executors get
// fresh memory that finishInto downloads into the tensor.
func bindOutput(e Executor, b *plan.Buffer, into map[string]*tensor.Tensor) (m Memory, alias bool, err error) {
	if into != nil {
		if ob, ok := e.(OutputBinder); ok {
			m, err := ob.BindOutput(b, into[b.Name])
			return m, err == nil, err
		}
	}
	m, err = e.Alloc(b.Bytes(), plan.BufOutput)
	return m, false, err
}

// finishInto copies each output the executor did not write in place into
// the caller's tensor.
func finishInto(e Executor, p *plan.Plan, mem []Memory, into map[string]*tensor.Tensor) error {
	if _, ok := e.(OutputBinder); ok {
		return nil
	}
	for _, b := range p.Outputs {
		if err := downloadInto(e, mem[b.ID], b, into[b.Name]); err != nil {
			return fmt.Errorf("loom: run on %s: output %q: %w", e.Name(), b.Name, err)
		}
	}
	return nil
}

// downloadInto copies one output into dst: IntoDownloader's own copy, else
// Download and a host copy.
func downloadInto(e Executor, m Memory, b *plan.Buffer, dst *tensor.Tensor) error {
	if d, ok := e.(IntoDownloader); ok {
		return d.DownloadInto(m, b, dst)
	}
	t, err := e.Download(m, b)
	if err != nil {
		return err
	}
	if n, want := copy(dst.Bytes(), t.Bytes()), len(dst.Bytes()); n != want {
		return fmt.Errorf("downloaded %d bytes into a tensor of %d", n, want)
	}
	return nil
}

package exec

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
	// kind: a temporary slot (BufTemp) or an output that Download will hand
	// to the caller (BufOutput).
	Alloc(bytes int, kind BufferKind) (Memory, error)
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
	Download(m Memory, b *Buffer) (*tensor.Tensor, error)
	// Run executes one step. mem[i] backs plan buffer i.
	Run(ctx context.Context, s *Step, mem []Memory) error
	// Sync waits for all work issued so far.
	Sync() error
}

// CheckInputs checks inputs against the plan's declared names, dtypes and
// shapes and reports every problem in one error.
func CheckInputs(p *Plan, inputs map[string]*tensor.Tensor) error {
	var errs []error
	for _, b := range p.Inputs {
		t, ok := inputs[b.Name]
		switch {
		case !ok || t == nil:
			errs = append(errs, fmt.Errorf("loom: run: missing input %q (%v%v)", b.Name, b.DType, b.Shape))
		case t.DType() != b.DType || !slices.Equal(t.Shape(), b.Shape):
			errs = append(errs, fmt.Errorf("loom: run: input %q is %v%v, graph declares %v%v", b.Name, t.DType(), t.Shape(), b.DType, b.Shape))
		}
	}
	for name := range inputs {
		if !slices.ContainsFunc(p.Inputs, func(b *Buffer) bool { return b.Name == name }) {
			errs = append(errs, fmt.Errorf("loom: run: unknown input %q", name))
		}
	}
	return errors.Join(errs...)
}

// Run executes a plan on an executor and returns its named outputs.
func Run(ctx context.Context, e Executor, p *Plan, inputs map[string]*tensor.Tensor) (out map[string]*tensor.Tensor, err error) {
	if err := CheckInputs(p, inputs); err != nil {
		return nil, err
	}
	mem := make([]Memory, len(p.Buffers))
	slots := make([]Memory, len(p.SlotBytes))
	var uploaded, allocated []Memory
	defer func() {
		for _, m := range uploaded {
			e.Release(m)
		}
		for _, m := range allocated {
			e.Free(m)
		}
	}()
	for i, n := range p.SlotBytes {
		m, err := e.Alloc(n, BufTemp)
		if err != nil {
			return nil, fmt.Errorf("loom: run on %s: temporary slot %d: %w", e.Name(), i, err)
		}
		slots[i] = m
		allocated = append(allocated, m)
	}
	for _, b := range p.Buffers {
		switch b.Kind {
		case BufInput:
			m, err := e.Upload(inputs[b.Name])
			if err != nil {
				return nil, fmt.Errorf("loom: run on %s: input %q: %w", e.Name(), b.Name, err)
			}
			mem[b.ID] = m
			uploaded = append(uploaded, m)
		case BufOutput:
			m, err := e.Alloc(b.Bytes(), BufOutput)
			if err != nil {
				return nil, fmt.Errorf("loom: run on %s: output %q: %w", e.Name(), b.Name, err)
			}
			mem[b.ID] = m
			allocated = append(allocated, m)
		case BufTemp:
			mem[b.ID] = slots[b.Slot]
		}
	}
	for i, s := range p.Steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("loom: run on %s: cancelled before step %d (%s): %w", e.Name(), i, s.Kernel.Name, err)
		}
		if err := e.Run(ctx, s, mem); err != nil {
			return nil, fmt.Errorf("loom: run on %s: step %d (%s): %w", e.Name(), i, s.Kernel.Name, err)
		}
	}
	if err := e.Sync(); err != nil {
		return nil, fmt.Errorf("loom: run on %s: %w", e.Name(), err)
	}
	out = make(map[string]*tensor.Tensor, len(p.Outputs))
	for _, b := range p.Outputs {
		t, err := e.Download(mem[b.ID], b)
		if err != nil {
			return nil, fmt.Errorf("loom: run on %s: output %q: %w", e.Name(), b.Name, err)
		}
		out[b.Name] = t
	}
	return out, nil
}

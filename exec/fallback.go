package exec

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// Fallbacker is implemented by executors that cannot run every kernel (a
// GPU executor before every op has a device kernel). The runner sends each
// step the executor does not support to its fallback executor (the CPU),
// with explicit transfers: the step's operands are copied to the host, the
// step runs there, and its output is copied back into the executor's
// buffer. Placement shows which steps fall back and what they transfer.
type Fallbacker interface {
	Executor
	// Supports returns nil if the executor runs k itself, else the reason
	// it does not.
	Supports(k *plan.Kernel) error
	// Fallback is the executor that runs unsupported steps.
	Fallback() Executor
	// Write copies a host tensor into memory from this executor's Alloc
	// (the fallback step's output going back to the device).
	Write(m Memory, t *tensor.Tensor) error
}

// AllNative is a Fallbacker that can tell, once per plan, that it runs
// every step of the plan itself: a run then asks no step (a decode step's
// plan has some two hundred, asked on every run).
type AllNative interface {
	RunsAll(p *plan.Plan) bool
}

// runsAll reports whether e runs every step of p itself.
func runsAll(e Executor, p *plan.Plan) bool {
	if a, ok := e.(AllNative); ok {
		return a.RunsAll(p)
	}
	for _, s := range p.Steps {
		if fb, _ := fallbackFor(e, s.Kernel); fb != nil {
			return false
		}
	}
	return true
}

// fallbackFor returns the fallbacker and its reason when e does not run k.
func fallbackFor(e Executor, k *plan.Kernel) (Fallbacker, string) {
	fb, ok := e.(Fallbacker)
	if !ok {
		return nil, ""
	}
	if err := fb.Supports(k); err != nil {
		return fb, err.Error()
	}
	return nil, ""
}

// runFallback runs one step on fb's fallback executor: the device work
// queued so far is waited for, each operand buffer is downloaded and handed
// to the fallback executor, the step runs, and the result is written back
// into the device buffer. Every host allocation is released on return.
func runFallback(ctx context.Context, e Fallbacker, s *plan.Step, mem []Memory) error {
	host := e.Fallback()
	if err := e.Sync(); err != nil {
		return err
	}
	k := s.Kernel
	hmem := make([]Memory, len(mem))
	var uploaded []Memory
	var out Memory
	defer func() {
		for _, m := range uploaded {
			host.Release(m)
		}
		if out != nil {
			host.Free(out)
		}
	}()
	for _, op := range k.Ins {
		b := op.Buf
		if hmem[b.ID] != nil {
			continue
		}
		t, err := e.Download(mem[b.ID], b)
		if err != nil {
			return fmt.Errorf("copying b%d to the host: %w", b.ID, err)
		}
		m, err := host.Upload(t)
		if err != nil {
			return err
		}
		hmem[b.ID] = m
		uploaded = append(uploaded, m)
	}
	var err error
	if out, err = host.Alloc(k.Out.Bytes(), plan.BufTemp); err != nil {
		return err
	}
	hmem[k.Out.ID] = out
	if err := host.Run(ctx, s, hmem); err != nil {
		return err
	}
	if err := host.Sync(); err != nil {
		return err
	}
	t, err := host.Download(out, k.Out)
	if err != nil {
		return err
	}
	if err := e.Write(mem[k.Out.ID], t); err != nil {
		return fmt.Errorf("copying b%d back to %s: %w", k.Out.ID, e.Name(), err)
	}
	return nil
}

// BLASNamer is implemented by executors that run matmul steps through a
// BLAS library (the CPU's host BLAS); Placement names it once for plans
// with matmul steps.
type BLASNamer interface {
	// BLAS names the library and why it was chosen.
	BLAS() string
}

// Placement describes where each step of p runs on e: the executor's own
// steps, and the steps that fall back, with the transfers they make. For a
// plan with matmul steps it first names the BLAS of each executor that
// runs them.
func Placement(p *plan.Plan, e Executor) string {
	var b strings.Builder
	fmt.Fprintf(&b, "placement on %s:\n", e.Name())
	named := map[string]bool{}
	for _, s := range p.Steps {
		if !s.Kernel.IsMatmul() && !s.Kernel.IsFusedMatmul() {
			continue
		}
		runner := e
		if fb, _ := fallbackFor(e, s.Kernel); fb != nil {
			runner = fb.Fallback()
		}
		if bn, ok := runner.(BLASNamer); ok && !named[runner.Name()] {
			named[runner.Name()] = true
			fmt.Fprintf(&b, "matmul on %s: %s\n", runner.Name(), bn.BLAS())
		}
	}
	for i, s := range p.Steps {
		k := s.Kernel
		fb, why := fallbackFor(e, k)
		if fb == nil {
			fmt.Fprintf(&b, "step %d: %s on %s\n", i, k.Name, e.Name())
			continue
		}
		var ins []string
		seen := map[int]bool{}
		for _, op := range k.Ins {
			if !seen[op.Buf.ID] {
				seen[op.Buf.ID] = true
				ins = append(ins, fmt.Sprintf("b%d", op.Buf.ID))
			}
		}
		host := fb.Fallback().Name()
		fmt.Fprintf(&b, "  transfer %s: %s → %s\n", strings.Join(ins, ", "), e.Name(), host)
		fmt.Fprintf(&b, "step %d: %s on %s (fallback: %s)\n", i, k.Name, host, why)
		fmt.Fprintf(&b, "  transfer b%d: %s → %s\n", k.Out.ID, host, e.Name())
	}
	return b.String()
}

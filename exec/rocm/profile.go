package rocm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/plan"
)

// Step profiling: where a run's device time goes, step by step. While it is
// on, Run brackets every step's launches with two device events; Profile
// reads them back and sums the device time by step label (the step's ops
// and shapes), so the 16 layers of a model's decode step add up under one
// label each. The events cost a few µs of host time a step and serialise
// nothing (they are recorded on the run's one stream), so the device times
// are those of the steps as a plain run queues them; the sum can be a
// little less than a run's device time (the gaps between steps are not in
// it). It is a tool for engineers, not for production runs.

// StepTime is the device time of the steps with one label.
type StepTime struct {
	Label string
	Count int     // steps run
	Ms    float64 // their summed device time in milliseconds
}

type stepEvents struct {
	label      string
	start, end hip.Event
}

type stepProfile struct {
	mu     sync.Mutex
	steps  []stepEvents
	spare  []hip.Event
	labels map[*plan.Kernel]string
}

// ProfileSteps turns step profiling on (a new, empty profile) or off.
// Turning it off drops what was recorded; call Profile first.
func (e *Executor) ProfileSteps(on bool) error {
	old := e.prof.Swap(nil)
	var errs []error
	if old != nil {
		if err := e.Sync(); err != nil {
			errs = append(errs, err)
		}
		old.mu.Lock()
		for _, s := range old.steps {
			errs = append(errs, e.dev.DestroyEvent(s.start), e.dev.DestroyEvent(s.end))
		}
		for _, ev := range old.spare {
			errs = append(errs, e.dev.DestroyEvent(ev))
		}
		old.steps, old.spare = nil, nil
		old.mu.Unlock()
	}
	if on {
		e.prof.Store(&stepProfile{labels: map[*plan.Kernel]string{}})
	}
	return errors.Join(errs...)
}

// Profile waits for the device and returns the device time of the steps
// run since ProfileSteps(true) or the last Profile, by label, the slowest
// first; it starts the next profile empty.
func (e *Executor) Profile() ([]StepTime, error) {
	p := e.prof.Load()
	if p == nil {
		return nil, errors.New("rocm: Profile: step profiling is off (ProfileSteps(true))")
	}
	if err := e.Sync(); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	by := map[string]*StepTime{}
	var errs []error
	for _, s := range p.steps {
		ms, err := e.dev.ElapsedMs(s.start, s.end)
		if err != nil {
			errs = append(errs, fmt.Errorf("rocm: Profile: step %s: %w", s.label, err))
		}
		st := by[s.label]
		if st == nil {
			st = &StepTime{Label: s.label}
			by[s.label] = st
		}
		st.Count++
		st.Ms += float64(ms)
		p.spare = append(p.spare, s.start, s.end)
	}
	p.steps = p.steps[:0]
	out := make([]StepTime, 0, len(by))
	for _, st := range by {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b StepTime) int {
		return cmp.Or(cmp.Compare(b.Ms, a.Ms), strings.Compare(a.Label, b.Label))
	})
	return out, errors.Join(errs...)
}

func (p *stepProfile) event(d *hip.Device) (hip.Event, error) {
	if n := len(p.spare); n > 0 {
		ev := p.spare[n-1]
		p.spare = p.spare[:n-1]
		return ev, nil
	}
	return d.NewEvent()
}

// profiledRun runs the step between two recorded events.
func (e *Executor) profiledRun(ctx context.Context, p *stepProfile, s *plan.Step, mem []exec.Memory) error {
	p.mu.Lock()
	label, ok := p.labels[s.Kernel]
	if !ok {
		label = stepLabel(s.Kernel)
		p.labels[s.Kernel] = label
	}
	start, err := p.event(e.dev)
	var end hip.Event
	if err == nil {
		end, err = p.event(e.dev)
	}
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("rocm: step profile: %w", err)
	}
	rec := func(ev hip.Event) error {
		e.launchMu.Lock()
		defer e.launchMu.Unlock()
		return e.dev.Record(ev, e.stream)
	}
	if err := rec(start); err != nil {
		return fmt.Errorf("rocm: step profile: %w", err)
	}
	runErr := e.run(ctx, s, mem)
	if err := rec(end); err != nil {
		return errors.Join(runErr, fmt.Errorf("rocm: step profile: %w", err))
	}
	p.mu.Lock()
	p.steps = append(p.steps, stepEvents{label: label, start: start, end: end})
	p.mu.Unlock()
	return runErr
}

// stepLabel names a step by its ops and shapes: "matmul bf16 [1 2048] ·
// [2048 8192] → [1 8192]" for a single-op step (its operands' logical
// shapes decide its cost), "op+op+… dtype [shape]" for a fused elementwise
// or row kernel.
func stepLabel(k *plan.Kernel) string {
	if len(k.Instrs) == 1 {
		n := k.Instrs[0].Node
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s", n.Op, n.DType)
		for i, a := range n.Args {
			if i > 0 {
				b.WriteString(" ·")
			}
			fmt.Fprintf(&b, " %v", a.Shape)
		}
		fmt.Fprintf(&b, " → %v", n.Shape)
		return b.String()
	}
	ops := k.OpNames()
	if len(ops) > 8 {
		ops = append(ops[:4:4], fmt.Sprintf("…(%d)…", len(ops)-7), ops[len(ops)-3], ops[len(ops)-2], ops[len(ops)-1])
	}
	return fmt.Sprintf("%s %s %v", strings.Join(ops, "+"), k.Instrs[len(k.Instrs)-1].Node.DType, k.Shape)
}

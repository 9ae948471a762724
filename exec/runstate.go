package exec

import (
	"context"
	"sync"
)

// Run state: what an executor keeps for the length of one run, across its
// steps. The runner puts a RunState in the context it hands to
// Executor.Run; an executor may
//
//   - defer a check to the run's end (DeferCheck): the GPU executor's
//     indexing kernels report bad ids through device error flags, and
//     reading a flag back after each step would make the host wait for the
//     device at every such step (a decode step of a llama model has 35 of
//     them: the run then alternates between a busy host and an idle device).
//     Deferred checks run after the run's final wait, in the order they were
//     registered; the first error fails the run and names its step. Steps
//     after a failing one still run on the device (kernels stay in bounds
//     whatever their inputs), and their results are discarded with the run.
//   - keep per-run data (Local), such as a pool of those flags.
//
// Steps run outside the runner (an executor's own tests calling Run) have
// no run state: DeferCheck reports false and the executor checks at once.

type runStateKey struct{}

// RunState is one run's deferred checks and executor-local data.
type RunState struct {
	mu     sync.Mutex
	checks []func() error
	frees  []func()
	local  map[any]any
	step   int // the step the runner is running (its index in Plan.Steps)
}

// Step is the index in Plan.Steps of the step being run: deferred checks
// name it in their errors as the runner names failing steps.
func (s *RunState) Step() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.step
}

func (s *RunState) setStep(i int) {
	s.mu.Lock()
	s.step = i
	s.mu.Unlock()
}

// withRunState returns ctx carrying a fresh RunState.
func withRunState(ctx context.Context) (context.Context, *RunState) {
	s := &RunState{}
	return context.WithValue(ctx, runStateKey{}, s), s
}

// RunStateOf returns the run state ctx carries, or nil.
func RunStateOf(ctx context.Context) *RunState {
	s, _ := ctx.Value(runStateKey{}).(*RunState)
	return s
}

// DeferCheck registers check to run after the run's final wait (skipped
// when the run fails earlier) and release to run when the run ends on any
// path, after the checks; either may be nil. It reports false, registering
// nothing, when ctx carries no run state.
func DeferCheck(ctx context.Context, check func() error, release func()) bool {
	s := RunStateOf(ctx)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if check != nil {
		s.checks = append(s.checks, check)
	}
	if release != nil {
		s.frees = append(s.frees, release)
	}
	return true
}

// Value returns the run's value for key, nil if Local never made one.
func (s *RunState) Value(key any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.local[key]
}

// Local returns the run's value for key, creating it with mk on first use
// (mk runs under the run state's lock: it must not call back into it).
func (s *RunState) Local(key any, mk func() any) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.local[key]; ok {
		return v
	}
	if s.local == nil {
		s.local = map[any]any{}
	}
	v := mk()
	s.local[key] = v
	return v
}

// check runs the deferred checks in order and returns the first error.
func (s *RunState) check() error {
	s.mu.Lock()
	checks := s.checks
	s.checks = nil
	s.mu.Unlock()
	for _, c := range checks {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

// release runs the release functions, last registered first.
func (s *RunState) release() {
	s.mu.Lock()
	frees := s.frees
	s.frees = nil
	s.mu.Unlock()
	for i := len(frees) - 1; i >= 0; i-- {
		frees[i]()
	}
}

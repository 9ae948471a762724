package rocm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/plan"
)

// Replays (exec.Replayer): a run under exec.WithReplay whose plan and
// binding (every buffer's address and size) were seen in an earlier run is
// recorded once into a CUDA/HIP graph (hip.BeginCapture … EndCapture), and
// every later run with that binding launches the graph: one driver call
// instead of one per kernel. Decisions:
//
//   - A binding is recorded on its second run, not its first: a plan run
//     once never pays for a capture and an instantiation, and the first
//     run has loaded every kernel and library handle (a capture must not
//     load modules or create handles). Recording a new binding at its
//     first run where the plan has a recording already was tried (session
//     45, the 1B bf16 decode, whose every Generate brings three new
//     bindings, its temporaries at new addresses): a Generate's first four
//     steps took 10.2 ms together against 8.3 (one run each; the decode
//     products then deferred four spans, gemv.hip). The model's Generate
//     now brings no new binding after its first (slot sets, slotset.go;
//     exec.WithOutputs and exec.HostWriter in model/session.go), so what
//     is left to record is the first Generate's.
//   - Scratch memory the recorded steps take (row-reduction partials,
//     indexing temporaries, GEMM and conv workspaces, error flags) belongs
//     to the recording until it is dropped: the graph refers to it.
//   - Error flags: each replay zeroes them (the memset is recorded) and
//     reads them back after the run's final wait, like a run's own flags.
//   - While a capture is open, every other user of the executor's one
//     stream waits at the stream gate (e.gate), since work queued on a
//     capturing stream is recorded rather than run. The capturing run's
//     own steps pass the gate through their context.
//   - A capture that fails (a step that cannot be recorded, a library that
//     refuses capture) marks the plan: it runs step by step from then on.
//   - Memory: at most replayPlans plans × replayBindings bindings are kept;
//     the least recently used plan's recordings are dropped beyond that.
//     Executor.DropReplays drops them all; Close does too.

const (
	replayPlans    = 64
	replayBindings = 4
)

// replays is an executor's recordings.
type replays struct {
	mu    sync.Mutex
	plans map[*plan.Plan]*planReplays
	lru   []*plan.Plan // least recently used first
	n     ReplayStats
}

// ReplayStats counts what RunSteps did.
type ReplayStats struct {
	Runs     int64 // runs handed to RunSteps
	Bindings int64 // runs with a binding not seen before (run step by step)
	Recorded int64 // recordings made
	Replayed int64 // runs replayed from a recording
	Failed   int64 // captures that failed (their plans run step by step)
	Live     int64 // recordings held now
}

// planReplays is one plan's recordings.
type planReplays struct {
	seen   []string     // bindings run once, not recorded (most recent last)
	recs   []*recording // most recently used last
	broken error        // why a capture of this plan failed: no more tries
}

// recording is a captured run of a plan's steps for one binding.
type recording struct {
	key      string
	graph    hip.GraphExec
	held     []*block  // scratch the recorded steps use, owned until drop
	flags    *flagPool // error flags the recorded steps set (nil: none)
	launches int64     // kernel launches recorded (counted per replay)
	qmvw     int64     // of which word-load quantized mat-vecs
	qmvq     int64     // and 8-bit ones (two launches)
	qmvf     int64     // and one-launch 8-bit ones
	colls    []commUse // the collectives recorded (collective.go)
	// users counts the runs replaying rec whose final checks have not
	// run yet; a dropped recording is destroyed when the last one ends
	// (its graph may be queued and its flags are read after the run's
	// wait). Both are guarded by replays.mu.
	users   int
	dropped bool
}

// captureKey marks the context of the steps a capture records, with the
// capturing executor as its value: they pass the stream gate.
type captureKey struct{}

// enter waits at the stream gate unless ctx belongs to e's open capture,
// and returns the gate's release.
func (e *Executor) enter(ctx context.Context) func() {
	if ctx != nil && ctx.Value(captureKey{}) == e {
		return func() {}
	}
	e.gate.RLock()
	return e.gate.RUnlock
}

// releaseScratch returns a step's scratch block to the allocator, or, while
// a capture is open, hands it to the recording (the graph refers to it).
func (e *Executor) releaseScratch(b *block) {
	if rec := e.capturing.Load(); rec != nil {
		rec.held = append(rec.held, b)
		return
	}
	e.alloc.release(b)
}

// bindingKey identifies the device memory behind mem: the address and size
// of every buffer, in order. ok is false when some buffer is not this
// executor's memory.
func (e *Executor) bindingKey(mem []exec.Memory) (string, bool) {
	key := make([]byte, 0, 16*len(mem))
	for _, m := range mem {
		if m == nil {
			key = binary.LittleEndian.AppendUint64(key, 0)
			key = binary.LittleEndian.AppendUint64(key, 0)
			continue
		}
		mm, err := e.mem(m)
		if err != nil || !mm.blk.live {
			return "", false
		}
		key = binary.LittleEndian.AppendUint64(key, uint64(mm.blk.ptr))
		key = binary.LittleEndian.AppendUint64(key, uint64(mm.blk.n))
	}
	return string(key), true
}

// RunSteps implements exec.Replayer.
func (e *Executor) RunSteps(ctx context.Context, p *plan.Plan, mem []exec.Memory, steps func(context.Context) error) error {
	if e.prof.Load() != nil || e.dev.CanCapture() != nil || ctx.Value(captureKey{}) != nil {
		return steps(ctx)
	}
	key, ok := e.bindingKey(mem)
	if !ok {
		return steps(ctx)
	}
	ck, ok := e.commKey(ctx, p)
	if !ok {
		return steps(ctx)
	}
	key += string(ck)
	r := &e.rp
	r.mu.Lock()
	r.n.Runs++
	pr := r.use(e, p)
	if i := slices.IndexFunc(pr.recs, func(x *recording) bool { return x.key == key }); i >= 0 {
		rec := pr.recs[i]
		pr.recs = append(slices.Delete(pr.recs, i, i+1), rec)
		r.n.Replayed++
		rec.users++
		r.mu.Unlock()
		return e.replay(ctx, rec)
	}
	if pr.broken != nil || !slices.Contains(pr.seen, key) {
		if pr.broken == nil && !slices.Contains(pr.seen, key) {
			r.n.Bindings++
			pr.seen = append(pr.seen, key)
			if len(pr.seen) > replayBindings {
				pr.seen = pr.seen[1:]
			}
		}
		r.mu.Unlock()
		return steps(ctx)
	}
	r.mu.Unlock()

	rec, err := e.record(ctx, key, steps)
	r.mu.Lock()
	if err != nil {
		r.n.Failed++
		if pr := r.plans[p]; pr != nil {
			pr.broken = err
		}
		r.mu.Unlock()
		return steps(ctx) // the steps' own error, if that is what failed
	}
	r.n.Recorded++
	r.n.Live++
	pr = r.use(e, p)
	pr.seen = slices.DeleteFunc(pr.seen, func(k string) bool { return k == key })
	pr.recs = append(pr.recs, rec)
	if len(pr.recs) > replayBindings {
		e.dropRecording(pr.recs[0])
		r.n.Live--
		pr.recs = pr.recs[1:]
	}
	r.n.Replayed++
	rec.users++
	r.mu.Unlock()
	return e.replay(ctx, rec)
}

// use returns p's recordings, made most recently used, creating them and
// dropping the least recently used plan's beyond replayPlans. r.mu is held.
func (r *replays) use(e *Executor, p *plan.Plan) *planReplays {
	if r.plans == nil {
		r.plans = map[*plan.Plan]*planReplays{}
	}
	pr := r.plans[p]
	if pr == nil {
		pr = &planReplays{}
		r.plans[p] = pr
	} else {
		r.lru = slices.DeleteFunc(r.lru, func(q *plan.Plan) bool { return q == p })
	}
	r.lru = append(r.lru, p)
	if len(r.lru) > replayPlans {
		old := r.lru[0]
		r.lru = r.lru[1:]
		for _, rec := range r.plans[old].recs {
			e.dropRecording(rec)
			r.n.Live--
		}
		delete(r.plans, old)
	}
	return pr
}

// record captures what steps queues into a recording. Nothing it queued
// runs: the caller replays the recording (or, on an error, runs the steps).
func (e *Executor) record(ctx context.Context, key string, steps func(context.Context) error) (*recording, error) {
	e.gate.Lock()
	defer e.gate.Unlock()
	rec := &recording{key: key}
	launches, qmvw, qmvq, qmvf := e.launches.Load(), qmvWordLaunches.Load(), qmvQ8Launches.Load(), qmvFLaunches.Load()
	if err := e.dev.BeginCapture(e.stream); err != nil {
		return nil, fmt.Errorf("rocm: begin capture: %w", err)
	}
	e.capturing.Store(rec)
	serr := steps(context.WithValue(ctx, captureKey{}, e))
	e.capturing.Store(nil)
	graph, cerr := e.dev.EndCapture(e.stream)
	rec.launches = e.launches.Load() - launches
	rec.qmvw = qmvWordLaunches.Load() - qmvw
	rec.qmvq = qmvQ8Launches.Load() - qmvq
	rec.qmvf = qmvFLaunches.Load() - qmvf
	e.launches.Add(-rec.launches) // nothing ran: replays count them
	qmvWordLaunches.Add(-rec.qmvw)
	qmvQ8Launches.Add(-rec.qmvq)
	qmvFLaunches.Add(-rec.qmvf)
	if serr != nil || cerr != nil {
		if graph != 0 {
			e.dev.DestroyGraph(graph)
		}
		e.dropRecording(rec)
		return nil, fmt.Errorf("rocm: capture: %w", errors.Join(serr, cerr))
	}
	x, err := e.dev.Instantiate(graph)
	e.dev.DestroyGraph(graph)
	if err != nil {
		e.dropRecording(rec)
		return nil, fmt.Errorf("rocm: instantiate a captured graph: %w", err)
	}
	rec.graph = x
	return rec, nil
}

// replay queues rec's work and, for its error flags, the checks after the
// run's final wait; the run holds rec (rec.users, taken by the caller
// under replays.mu) until then.
func (e *Executor) replay(ctx context.Context, rec *recording) error {
	done := func() {
		e.rp.mu.Lock()
		defer e.rp.mu.Unlock()
		if rec.users--; rec.users == 0 && rec.dropped {
			e.destroyRecording(rec)
		}
	}
	leave := e.enter(ctx)
	e.launchMu.Lock()
	err := e.dev.LaunchGraph(rec.graph, e.stream)
	e.launchMu.Unlock()
	leave()
	if err != nil {
		done()
		return fmt.Errorf("loom: run on rocm: replaying a recorded run of %d launches: %w", rec.launches, err)
	}
	for _, u := range rec.colls {
		e.useComm(ctx, u.c, u.step)
	}
	e.launches.Add(rec.launches)
	qmvWordLaunches.Add(rec.qmvw)
	qmvQ8Launches.Add(rec.qmvq)
	qmvFLaunches.Add(rec.qmvf)
	var check func() error
	if p := rec.flags; p != nil {
		check = func() error { return e.checkFlags(p) }
	}
	if !exec.DeferCheck(ctx, check, done) {
		// Not inside a runner: wait here, then check and let go.
		err := e.Sync()
		if err == nil && check != nil {
			err = check()
		}
		done()
		return err
	}
	return nil
}

// dropRecording drops rec: at once, or when the last run replaying it
// ends. replays.mu is held (or rec was never shared).
func (e *Executor) dropRecording(rec *recording) {
	rec.dropped = true
	if rec.users == 0 {
		e.destroyRecording(rec)
	}
}

// destroyRecording destroys rec's graph and returns its scratch, once the
// work queued so far is done with it (the one stream orders later users
// of the blocks after it; the runtime finishes a destroyed graph's queued
// launches).
func (e *Executor) destroyRecording(rec *recording) {
	if rec.graph != 0 {
		e.dev.DestroyGraphExec(rec.graph)
		rec.graph = 0
	}
	for _, b := range rec.held {
		e.alloc.release(b)
	}
	if rec.flags != nil {
		for _, b := range rec.flags.chunks {
			e.alloc.release(b)
		}
	}
	rec.held, rec.flags = nil, nil
}

// Forget drops p's recordings (exec.Replayer).
func (e *Executor) Forget(p *plan.Plan) {
	r := &e.rp
	r.mu.Lock()
	defer r.mu.Unlock()
	if pr := r.plans[p]; pr != nil {
		for _, rec := range pr.recs {
			e.dropRecording(rec)
			r.n.Live--
		}
		delete(r.plans, p)
		r.lru = slices.DeleteFunc(r.lru, func(q *plan.Plan) bool { return q == p })
	}
}

// forgetComm drops the recordings whose collectives use c.
func (e *Executor) forgetComm(c *Comm) {
	r := &e.rp
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pr := range r.plans {
		pr.recs = slices.DeleteFunc(pr.recs, func(rec *recording) bool {
			if !slices.ContainsFunc(rec.colls, func(u commUse) bool { return u.c == c }) {
				return false
			}
			e.dropRecording(rec)
			r.n.Live--
			return true
		})
	}
}

// DropReplays drops every recording (their graphs and scratch memory).
func (e *Executor) DropReplays() {
	r := &e.rp
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pr := range r.plans {
		for _, rec := range pr.recs {
			e.dropRecording(rec)
		}
	}
	clear(r.plans)
	r.lru = nil
	r.n.Live = 0
}

// ReplayStats returns the replay counters.
func (e *Executor) ReplayStats() ReplayStats {
	e.rp.mu.Lock()
	defer e.rp.mu.Unlock()
	return e.rp.n
}

// ReplayBroken returns why p's runs are not replayed (a capture of them
// failed), or nil.
func (e *Executor) ReplayBroken(p *plan.Plan) error {
	e.rp.mu.Lock()
	defer e.rp.mu.Unlock()
	if pr := e.rp.plans[p]; pr != nil {
		return pr.broken
	}
	return nil
}

package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// parallel runs body(0)…body(k−1), the parts of a data-parallel loop
// (each pulling its work from a counter the parts share), and returns when
// all have returned: on the process's team of helpers (helpers), body(0)
// on the calling goroutine.
func parallel(k int, body func(part int)) { helpers.do(k, body) }

// helpers is the process's team: every executor's loops share its
// goroutines, at most GOMAXPROCS − 1 of them.
var helpers team

// A team runs data-parallel loops: the calling goroutine is worker 0, and
// helper goroutines that outlive one loop take the other workers' parts.
// A decode step is hundreds of short loops (a 576-wide model's products
// are 20–100 µs each) with a little serial work between them; a goroutine per worker per loop, as these loops had, left the
// second core idle for most of each loop on a 2-core VM — a parked
// goroutine takes tens of microseconds to be woken there (a parallel loop
// of 576 rows of ~75 ns took 60 µs on two workers against 44 µs on one,
// BenchmarkParallelRowsOverhead). A helper instead spins (yielding its P
// between looks) for teamSpin after its last part, ready for the next
// loop, then exits; the next loop starts new ones.
//
// The caller never waits for a helper to turn up: a part no helper has
// claimed by the time the caller has done its own, the caller runs itself.
// The parts pull their work from a shared counter, so a late part finds
// little or none left. Only parts a helper has claimed are waited for, and
// those are running. Loops from several goroutines at once share the
// helpers: a helper takes parts of the newest loop it sees, and a loop
// whose parts it missed is finished by its own caller.
type team struct {
	job   atomic.Pointer[teamJob]
	alive atomic.Int32 // helpers running or spinning
}

// teamSpin is how long a helper looks for a next loop after its last part
// before it exits: longer than the serial work between a decode step's
// parallel loops, short enough that an idle executor burns no CPU.
const teamSpin = 200 * time.Microsecond

// teamJob is one loop: parts 0…k−1 of body.
type teamJob struct {
	body    func(part int)
	k       int32
	next    atomic.Int32 // the next part to claim
	pending atomic.Int32 // parts not finished
}

// claim runs parts of j until none is left unclaimed, and reports whether
// it ran any.
func (j *teamJob) claim() bool {
	ran := false
	for {
		p := j.next.Add(1) - 1
		if p >= j.k {
			return ran
		}
		j.body(int(p))
		j.pending.Add(-1)
		ran = true
	}
}

// do runs body(0)…body(k−1) and returns when all have returned: body(0) on
// the calling goroutine, the others on helpers or, where none claims them
// in time, on the calling goroutine after body(0). With k ≤ 1 it is a
// call.
func (t *team) do(k int, body func(part int)) {
	if k <= 1 {
		body(0)
		return
	}
	j := &teamJob{body: body, k: int32(k)}
	j.next.Store(1)
	j.pending.Store(int32(k))
	t.job.Store(j)
	// Helpers beyond the Ps there are could only take turns with the
	// caller and each other; their parts are the caller's to run.
	for want := int32(min(k-1, runtime.GOMAXPROCS(0)-1)); t.alive.Load() < want; {
		t.alive.Add(1)
		go t.help(j)
	}
	body(0)
	j.pending.Add(-1)
	j.claim()
	for i := 0; j.pending.Load() > 0; i++ {
		if i%16 == 15 {
			runtime.Gosched()
		}
	}
	// The team holds no finished loop (its body's captures), unless
	// another goroutine's loop has replaced it already.
	t.job.CompareAndSwap(j, nil)
}

// help is a helper's life: it runs parts of first, then of every newer job
// it finds, until it has found none for teamSpin.
func (t *team) help(first *teamJob) {
	defer t.alive.Add(-1)
	last := first
	last.claim()
	idle := time.Now()
	for i := 0; ; i++ {
		if j := t.job.Load(); j != last {
			last = j
			if j != nil && j.claim() {
				idle = time.Now()
			}
			continue
		}
		if i%64 == 63 {
			if time.Since(idle) > teamSpin {
				return
			}
			runtime.Gosched()
		}
	}
}

package rocm

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/loomgraph/loom/exec/rocm/hip"
)

// Device timing for benchmarks. A run measured with host clocks includes
// the runner's host work (checking inputs, allocating, queueing launches,
// waiting): ~10 µs a run, 5% of a 0.2 ms kernel. Peers are timed with
// device events around work queued ahead of the device (Triton's do_bench),
// so DeviceTime does the same: it queues a short spin kernel, records a
// start event behind it, runs f — whose launches queue up while the device
// still spins — and records the end event in the run's final Sync, before
// waiting. What it returns is the device time of f's work alone.

// spinCycles keeps the device busy long enough (~100 µs at 2 GHz) for the
// host to queue a run's launches behind the start event.
const spinCycles = 200_000

const spinSource = `extern "C" __global__ void loom_spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
`

type deviceTimer struct {
	mu    sync.Mutex // one timed region at a time
	once  sync.Once
	spin  hip.Function
	err   error
	start hip.Event
	end   atomic.Pointer[hip.Event] // recorded by Sync while timing
}

// DeviceTime runs f, which must run plans on e (Run, RunValues) and return
// after their Sync, and returns the device time in milliseconds between the
// start of f's first kernel and the end of its last. Concurrent DeviceTime
// calls are serialised; other work on e during the call is counted too.
func (e *Executor) DeviceTime(f func() error) (float64, error) {
	return e.DeviceTimeSpin(spinCycles, f)
}

// DeviceTimeSpin is DeviceTime with the spin kernel running the given
// number of device clock cycles: enough for the host to queue all of f's
// work when that takes longer than DeviceTime's ~100 µs (a model's decode
// step queues hundreds of launches). f must not wait for the device before
// its final Sync (no uploads of host inputs), or the spin is waited for.
func (e *Executor) DeviceTimeSpin(cycles int64, f func() error) (float64, error) {
	t := &e.timer
	t.mu.Lock()
	defer t.mu.Unlock()
	t.once.Do(func() {
		obj, _, err := e.codes.get(e.comp, CacheDir(), spinSource, "loom_spin", e.info.Arch, e.opts)
		if err != nil {
			t.err = err
			return
		}
		if t.spin, err = e.function(obj, "loom_spin"); err != nil {
			t.err = err
			return
		}
		t.start, t.err = e.dev.NewEvent()
	})
	if t.err != nil {
		return 0, fmt.Errorf("rocm: device timing: %w", t.err)
	}
	end, err := e.dev.NewEvent()
	if err != nil {
		return 0, fmt.Errorf("rocm: device timing: %w", err)
	}
	defer e.dev.DestroyEvent(end)
	var args hip.Args
	args.I64(cycles)
	leave := e.enter(nil)
	e.launchMu.Lock()
	err = e.dev.Launch(t.spin, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, e.stream, &args)
	if err == nil {
		err = e.dev.Record(t.start, e.stream)
	}
	e.launchMu.Unlock()
	leave()
	if err != nil {
		return 0, fmt.Errorf("rocm: device timing: %w", err)
	}
	t.end.Store(&end)
	ferr := f()
	t.end.Store(nil)
	if ferr != nil {
		e.Sync()
		return 0, ferr
	}
	if err := e.dev.EventSynchronize(end); err != nil {
		return 0, fmt.Errorf("rocm: device timing: %w", err)
	}
	ms, err := e.dev.ElapsedMs(t.start, end)
	if err != nil {
		return 0, fmt.Errorf("rocm: device timing (did f run a plan on this executor?): %w", err)
	}
	return float64(ms), nil
}

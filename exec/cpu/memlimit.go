package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/loomgraph/loom/plan"
)

// Memory limit. Before a run allocates, the runner checks the plan's peak
// bytes against AvailableBytes (exec.MemoryBudget), and every single
// allocation (an output, an arena) is checked here too, so a plan or a
// buffer too large for the machine is an error rather than Go's fatal "out
// of memory" or the kernel's OOM killer.
//
// The limit is, in order: SetMemLimit's value; the LOOM_CPU_MEM_LIMIT
// environment variable (bytes); else the host's available memory
// (/proc/meminfo MemAvailable on Linux) less a margin of 1/16 of it and at
// least 256 MiB, plus the bytes of the executor's idle arenas (already its
// own). Where the available memory is unknown, there is no limit.

// MemLimitEnv names the environment variable that sets the CPU executor's
// memory limit in bytes.
const MemLimitEnv = "LOOM_CPU_MEM_LIMIT"

// memMargin is the least memory left to the rest of the process and the
// system.
const memMargin = 256 << 20

// SetMemLimit sets the bytes runs of e may allocate (outputs and
// temporaries together); n ≤ 0 returns to the default. It returns e for
// chaining.
func (e *Executor) SetMemLimit(n int64) *Executor {
	e.memLimit.Store(n)
	return e
}

// AvailableBytes is how many bytes one run may allocate now
// (exec.MemoryBudget): the limit, counting idle arenas as available.
func (e *Executor) AvailableBytes() (int64, error) {
	if n := e.memLimit.Load(); n > 0 {
		return n, nil
	}
	if v := os.Getenv(MemLimitEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("cpu: %s=%q is not a positive byte count", MemLimitEnv, v)
		}
		return n, nil
	}
	avail, ok := hostAvailable()
	if !ok {
		return 0, fmt.Errorf("cpu: available host memory unknown")
	}
	avail -= max(avail/16, memMargin)
	return max(avail, 0) + e.MemStats().IdleBytes, nil
}

// checkAlloc refuses one allocation larger than the limit.
func (e *Executor) checkAlloc(n int) error {
	if n < 1<<20 {
		return nil // small: not worth a look at the limit
	}
	avail, err := e.AvailableBytes()
	if err != nil {
		return nil
	}
	if int64(n) > avail {
		return fmt.Errorf("cpu: cannot allocate %d bytes: %d bytes available", n, avail)
	}
	return nil
}

// scratchRoom is how many bytes step k may take as scratch now (a
// convolution's column tiles): with a limit set (SetMemLimit or
// LOOM_CPU_MEM_LIMIT), the limit less the arenas runs hold now (this run's
// temporaries among them) and less k's output when it is a plan output
// (Go memory, outside the arenas); without one, the host's available
// memory as AvailableBytes reports it, which already excludes what is in
// use. Unknown: no bound here (each allocation is still checked).
func (e *Executor) scratchRoom(k *plan.Kernel) int64 {
	avail, err := e.AvailableBytes()
	if err != nil {
		return math.MaxInt64
	}
	if e.memLimit.Load() > 0 || os.Getenv(MemLimitEnv) != "" {
		s := e.MemStats()
		avail -= s.LiveBytes - s.IdleBytes
		if k.Out.Kind == plan.BufOutput {
			avail -= int64(k.Out.Bytes())
		}
	}
	return max(avail, 0)
}

// hostAvailable returns MemAvailable from /proc/meminfo, read at most every
// 50 ms (runs of small plans then pay nothing for it).
func hostAvailable() (int64, bool) {
	now := time.Now().UnixNano()
	if c := memCache.Load(); c != nil && now-c.at < int64(50*time.Millisecond) {
		return c.avail, c.ok
	}
	avail, ok := readMemAvailable()
	memCache.Store(&memReading{at: now, avail: avail, ok: ok})
	return avail, ok
}

type memReading struct {
	at    int64
	avail int64
	ok    bool
}

var memCache atomic.Pointer[memReading]

func readMemAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemAvailable:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}

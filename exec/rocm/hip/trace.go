package hip

import (
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Call tracing, for finding where a run's host time goes (launch-bound
// decode steps): while tracing is on, every driver or library call made
// through a Device is timed on the host and counted under the name of the
// Device (or library) method that made it, e.g. "(*Device).Launch" or
// "(*cublas).Gemm". Off by default; the cost when off is one atomic load a
// call. The times are host times: a call that waits for the device (a
// synchronous copy, a full launch queue) includes the wait.

// CallStat is the host time of one method's calls while tracing was on.
type CallStat struct {
	Name  string
	Count int64
	Total time.Duration
}

type callTracer struct {
	mu    sync.Mutex
	stats map[string]*CallStat
}

var tracer atomic.Pointer[callTracer]

// TraceCalls starts (on) or stops tracing and returns the calls traced
// since the last start, the most expensive first.
func TraceCalls(on bool) []CallStat {
	var t *callTracer
	if on {
		t = &callTracer{stats: map[string]*CallStat{}}
	}
	old := tracer.Swap(t)
	if old == nil {
		return nil
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	out := make([]CallStat, 0, len(old.stats))
	for _, s := range old.stats {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Total > out[j].Total })
	return out
}

func (t *callTracer) add(name string, d time.Duration) {
	t.mu.Lock()
	s := t.stats[name]
	if s == nil {
		s = &CallStat{Name: name}
		t.stats[name] = s
	}
	s.Count++
	s.Total += d
	t.mu.Unlock()
}

// callerName is the first frame above the Device's call plumbing that is
// not a closure, as "(*Type).Method".
func callerName() string {
	var pcs [8]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		name := f.Function[strings.LastIndex(f.Function, "/")+1:]
		name = strings.TrimPrefix(name, "hip.")
		base, _, closure := strings.Cut(name, ".func")
		switch {
		case closure, base == "(*Device).do", base == "(*Device).doExclusive", base == "(*Device).call":
		default:
			return base
		}
		if !more {
			return name
		}
	}
}

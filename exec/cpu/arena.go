package cpu

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/loomgraph/loom/exec"
)

// Temporary memory comes from arenas: one block of bytes, carved into a
// run's temporary slots (AllocSlots) or handed out whole (Alloc of a
// temporary). An arena belongs to one run at a time: the executor keeps the
// idle ones on a free list, a run takes one large enough (the smallest that
// fits) or makes a new one, and gives it back when it ends. So reruns of a
// plan — or of any plan needing no more — allocate nothing and touch no
// fresh pages, and concurrent runs never share a slot. Trim releases the idle
// arenas; Close releases them and refuses later work.
//
// Blocks of hugeBytes or more are mapped straight from the kernel with
// transparent huge pages asked for (mapBlock, Linux) and pre-faulted by all
// workers, so a fresh arena costs a few hundred faults instead of one per
// 4 KiB page; smaller blocks, and systems where mapping fails, use the Go
// heap.

// hugeBytes is the size from which a block is mapped rather than taken from
// the Go heap: one 2 MiB huge page, the x86-64 transparent huge page size.
const hugeBytes = 2 << 20

// maxIdle bounds the free list; beyond it, the smallest idle arena is
// released when another comes back.
const maxIdle = 8

// slotAlign aligns each slot in an arena to a cache line.
const slotAlign = 64

// errClosed is returned for work on a closed executor.
var errClosed = errors.New("cpu: executor is closed")

// arena is one block of memory, idle on the free list or held by one run.
type arena struct {
	b      []byte
	words  []uint64 // the Go heap backing of b, when not mapped
	mapped bool
}

// arenas is the executor's free list and its counters.
type arenas struct {
	mu     sync.Mutex
	idle   []*arena
	closed atomic.Bool  // set under mu
	made   atomic.Int64 // arenas created, ever
	bytes  atomic.Int64 // bytes of live arenas (idle and held)
}

// MemStats describes the executor's temporary memory.
type MemStats struct {
	ArenasMade int   // arenas created since New (a rerun that reuses memory adds none)
	ArenasIdle int   // arenas on the free list now
	IdleBytes  int64 // bytes of the idle arenas
	LiveBytes  int64 // bytes of all arenas not yet released, idle or held by runs
}

// MemStats reports the executor's temporary memory.
func (e *Executor) MemStats() MemStats {
	a := e.arenas
	a.mu.Lock()
	defer a.mu.Unlock()
	s := MemStats{ArenasMade: int(a.made.Load()), ArenasIdle: len(a.idle), LiveBytes: a.bytes.Load()}
	for _, ar := range a.idle {
		s.IdleBytes += int64(len(ar.b))
	}
	return s
}

// take returns an arena of at least n bytes: the smallest idle one that
// fits, else a new one.
func (e *Executor) take(n int) (*arena, error) {
	a := e.arenas
	a.mu.Lock()
	if a.closed.Load() {
		a.mu.Unlock()
		return nil, errClosed
	}
	best := -1
	for i, ar := range a.idle {
		if len(ar.b) >= n && (best < 0 || len(ar.b) < len(a.idle[best].b)) {
			best = i
		}
	}
	if best >= 0 {
		ar := a.idle[best]
		a.idle = append(a.idle[:best], a.idle[best+1:]...)
		a.mu.Unlock()
		return ar, nil
	}
	a.mu.Unlock()
	if err := e.checkAlloc(n); err != nil {
		return nil, err
	}
	ar := e.newArena(n)
	a.made.Add(1)
	a.bytes.Add(int64(len(ar.b)))
	return ar, nil
}

// give returns an arena to the free list, or releases it when the executor
// is closed or the list is full (then the smallest goes).
func (e *Executor) give(ar *arena) {
	a := e.arenas
	a.mu.Lock()
	if a.closed.Load() {
		a.mu.Unlock()
		e.release(ar)
		return
	}
	a.idle = append(a.idle, ar)
	var drop *arena
	if len(a.idle) > maxIdle {
		small := 0
		for i, x := range a.idle {
			if len(x.b) < len(a.idle[small].b) {
				small = i
			}
		}
		drop = a.idle[small]
		a.idle = append(a.idle[:small], a.idle[small+1:]...)
	}
	a.mu.Unlock()
	if drop != nil {
		e.release(drop)
	}
}

// newArena makes an arena of n bytes (n rounded up to 8).
func (e *Executor) newArena(n int) *arena {
	n = (n + 7) &^ 7
	if n >= hugeBytes {
		if b, ok := mapBlock(n); ok {
			prefault(b, e.workers)
			mappedBytes.Add(int64(len(b)))
			return &arena{b: b, mapped: true}
		}
	}
	ar := &arena{words: make([]uint64, n/8)}
	if n > 0 {
		ar.b = unsafe.Slice((*byte)(unsafe.Pointer(&ar.words[0])), n)
	}
	return ar
}

// release gives an arena's memory back: unmapped, or left to the GC.
func (e *Executor) release(ar *arena) { e.arenas.release(ar) }

func (a *arenas) release(ar *arena) {
	a.bytes.Add(-int64(len(ar.b)))
	if ar.mapped {
		mappedBytes.Add(-int64(len(ar.b)))
		unmapBlock(ar.b)
	}
	ar.b, ar.words = nil, nil
}

// releaseIdle releases every idle arena. It runs as the cleanup of an
// executor collected without Close: mapped arenas are not Go memory, and
// would otherwise stay mapped for the life of the process.
func (a *arenas) releaseIdle() {
	a.mu.Lock()
	idle := a.idle
	a.idle = nil
	a.mu.Unlock()
	for _, ar := range idle {
		a.release(ar)
	}
}

// mappedBytes counts the bytes of mapped arenas alive in the process (for
// tests: mapped memory is not in runtime.MemStats).
var mappedBytes atomic.Int64

// Trim releases every idle arena; arenas held by runs in flight are kept
// (and go back to the free list when their runs end).
func (e *Executor) Trim() { e.arenas.releaseIdle() }

// Close releases the executor's idle memory; arenas held by runs in flight
// are released when those runs end. Later runs, allocations and steps fail
// with an error. Output tensors already returned stay valid. Close is
// idempotent.
func (e *Executor) Close() error {
	e.arenas.mu.Lock()
	e.arenas.closed.Store(true)
	e.arenas.mu.Unlock()
	e.Trim()
	return nil
}

func (e *Executor) isClosed() bool { return e.arenas.closed.Load() }

// AllocSlots hands one run all its temporary slots from one arena, each
// slot cache-line aligned and poisoned when Poison is set; release gives the
// arena back (exec.SlotAllocator).
func (e *Executor) AllocSlots(slotBytes []int) ([]exec.Memory, func(), error) {
	total := 0
	for _, n := range slotBytes {
		if n < 0 {
			return nil, nil, fmt.Errorf("cpu: slot of %d bytes", n)
		}
		total += (n + slotAlign - 1) &^ (slotAlign - 1)
	}
	if len(slotBytes) == 0 {
		if e.isClosed() {
			return nil, nil, errClosed
		}
		return nil, func() {}, nil
	}
	ar, err := e.take(total)
	if err != nil {
		return nil, nil, err
	}
	slots := make([]exec.Memory, len(slotBytes))
	off := 0
	for i, n := range slotBytes {
		m := &memory{b: ar.b[off : off+n : off+n]}
		e.poisonBytes(m.b)
		slots[i] = m
		off += (n + slotAlign - 1) &^ (slotAlign - 1)
	}
	var once sync.Once
	return slots, func() { once.Do(func() { e.give(ar) }) }, nil
}

// poisonBytes fills b with the poison byte when Poison is set.
func (e *Executor) poisonBytes(b []byte) {
	if e.poison < 0 || len(b) == 0 {
		return
	}
	b[0] = byte(e.poison)
	for i := 1; i < len(b); i *= 2 {
		copy(b[i:], b[:i])
	}
}

// prefault touches every 4 KiB page of a fresh mapping, the pages spread
// over the workers, so the kernel's page faults (one per huge page where
// they are granted) are taken in parallel before the kernels run.
func prefault(b []byte, workers int) {
	const page = 4 << 10
	chunks := (len(b) + hugeBytes - 1) / hugeBytes
	var next atomic.Int64
	parallel(min(workers, chunks), func(int) {
		for {
			c := int(next.Add(1) - 1)
			if c >= chunks {
				return
			}
			for i := c * hugeBytes; i < min((c+1)*hugeBytes, len(b)); i += page {
				b[i] = 0
			}
		}
	})
}

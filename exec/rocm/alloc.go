package rocm

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/loomgraph/loom/exec/rocm/hip"
)

// Size classes of the caching allocator. A request is rounded up to its
// class and served by a cached block of that class (or, above smallMax, by
// the smallest cached block at most a quarter larger), else by the driver:
//
//   - up to 1 MiB: multiples of 256 B (the driver's alignment), so small
//     buffers of nearby sizes share blocks and waste at most 255 B;
//   - 1 MiB to 64 MiB: power-of-two quarters (1.25, 1.5, 1.75 and 2 × the
//     power of two below), at most 25% waste, few distinct classes;
//   - above 64 MiB: multiples of 2 MiB, at most 2 MiB (≤ 3%) waste, so that
//     a 4 GiB tensor does not take 5 GiB.
const (
	smallQuantum = 256
	smallMax     = 1 << 20
	quarterMax   = 64 << 20
	largeQuantum = 2 << 20
)

// sizeClass returns the block size that serves a request of n bytes.
func sizeClass(n int64) int64 {
	switch {
	case n <= 0:
		return 0
	case n <= smallMax:
		return roundUp(n, smallQuantum)
	case n <= quarterMax:
		p := int64(1) << (bits.Len64(uint64(n)) - 1) // largest power of two ≤ n
		return roundUp(n, p/4)
	}
	return roundUp(n, largeQuantum)
}

func roundUp(n, q int64) int64 { return (n + q - 1) / q * q }

// driver is the device memory API the allocator needs: *hip.Device, or a
// fake in tests.
type driver interface {
	Malloc(n uint64) (hip.DevPtr, error)
	Free(p hip.DevPtr) error
}

// AllocStats describes the caching allocator. Byte counts are in size-class
// bytes (what the blocks occupy on the device).
type AllocStats struct {
	InUse     int64 // bytes in blocks handed out and not freed
	PeakInUse int64 // the largest InUse seen
	Cached    int64 // bytes in freed blocks kept for reuse
	Live      int   // blocks handed out
	Allocs    int64 // allocation requests served (cache hits and driver allocations)
	Reused    int64 // requests served from the cache
	Mallocs   int64 // driver allocations
	Frees     int64 // blocks returned to the driver (by Trim)
	Trims     int64 // Trim calls, including the automatic ones on exhaustion
}

func (s AllocStats) String() string {
	return fmt.Sprintf("%d bytes in use in %d blocks (peak %d), %d bytes cached; %d allocations (%d reused, %d from the driver), %d blocks returned to the driver in %d trims",
		s.InUse, s.Live, s.PeakInUse, s.Cached, s.Allocs, s.Reused, s.Mallocs, s.Frees, s.Trims)
}

// block is one allocation handed out by the allocator.
type block struct {
	a    *allocator
	ptr  hip.DevPtr // 0 for an empty block
	size int64      // bytes the block occupies (its class, or a larger cached class)
	n    int64      // bytes requested
	live bool       // handed out and not yet freed (guarded by a.mu)
	set  bool       // owned by a slot set (slotset.go): release ignores it
}

// allocator is a caching allocator over a driver. It is safe for
// concurrent use. Blocks are freed into per-size free lists and reused; they
// go back to the driver only in Trim (and on exhaustion, which trims and
// retries once). All work on blocks is ordered on the executor's one stream,
// so a block freed while kernels that use it are still queued can be reused
// at once: the next user's work is queued after them.
type allocator struct {
	drv driver
	// drain waits for queued device work before blocks go back to the driver.
	drain func() error
	// memInfo reports the device's free and total memory, for errors.
	memInfo func() (free, total uint64, err error)

	mu      sync.Mutex
	free    map[int64][]hip.DevPtr // size → cached blocks
	classes []int64                // sorted sizes with a non-empty free list
	st      AllocStats

	// Slot sets (slotset.go): slot sizes → sets, in the order made.
	sets     map[string][]*slotSet
	freeSets int    // sets not taken
	tick     uint64 // counts giveSet calls
}

func newAllocator(drv driver, drain func() error, memInfo func() (uint64, uint64, error)) *allocator {
	return &allocator{drv: drv, drain: drain, memInfo: memInfo, free: map[int64][]hip.DevPtr{}, sets: map[string][]*slotSet{}}
}

// alloc returns a block of at least n bytes.
func (a *allocator) alloc(n int64) (*block, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allocLocked(n)
}

func (a *allocator) allocLocked(n int64) (*block, error) {
	if n < 0 {
		return nil, fmt.Errorf("rocm: allocation of %d bytes", n)
	}
	c := sizeClass(n)
	a.st.Allocs++
	if c == 0 {
		return a.handOut(&block{a: a, n: n}), nil
	}
	if size, ok := a.fit(c); ok {
		l := a.free[size]
		p := l[len(l)-1]
		a.free[size] = l[:len(l)-1]
		if len(a.free[size]) == 0 {
			delete(a.free, size)
			a.classes = slices.DeleteFunc(a.classes, func(s int64) bool { return s == size })
		}
		a.st.Cached -= size
		a.st.Reused++
		return a.handOut(&block{a: a, ptr: p, size: size, n: n}), nil
	}
	p, err := a.drv.Malloc(uint64(c))
	if err != nil {
		trimmed, terr := a.trimLocked()
		p, err = a.drv.Malloc(uint64(c))
		if err != nil {
			a.st.Allocs-- // not served
			msg := fmt.Sprintf("rocm: out of device memory: cannot allocate %d bytes (size class %d bytes) even after returning %d cached bytes to the driver; allocator: %v", n, c, trimmed, a.st)
			if terr != nil {
				msg += fmt.Sprintf(" (trim failed: %v)", terr)
			}
			if a.memInfo != nil {
				if free, total, ierr := a.memInfo(); ierr == nil {
					msg += fmt.Sprintf("; device: %d of %d bytes free", free, total)
				}
			}
			return nil, fmt.Errorf("%s: %w", msg, err)
		}
	}
	a.st.Mallocs++
	return a.handOut(&block{a: a, ptr: p, size: c, n: n}), nil
}

// fit returns the size of the cached block that serves class c: c itself,
// or above smallMax the smallest cached size up to a quarter larger.
func (a *allocator) fit(c int64) (int64, bool) {
	if len(a.free[c]) > 0 {
		return c, true
	}
	if c <= smallMax {
		return 0, false
	}
	i, _ := slices.BinarySearch(a.classes, c)
	if i < len(a.classes) && a.classes[i] <= c+c/4 {
		return a.classes[i], true
	}
	return 0, false
}

func (a *allocator) handOut(b *block) *block {
	b.live = true
	a.st.InUse += b.size
	a.st.Live++
	a.st.PeakInUse = max(a.st.PeakInUse, a.st.InUse)
	return b
}

// release returns a block to the cache. Releasing a block twice is a no-op.
func (a *allocator) release(b *block) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if b.set {
		return // its set's (slotset.go)
	}
	a.releaseLocked(b)
}

func (a *allocator) releaseLocked(b *block) {
	if !b.live {
		return
	}
	b.live = false
	a.st.InUse -= b.size
	a.st.Live--
	if b.size == 0 {
		return
	}
	a.pushFree(b.size, b.ptr)
}

// pushFree puts a block on its size's free list.
func (a *allocator) pushFree(size int64, p hip.DevPtr) {
	if len(a.free[size]) == 0 {
		i, _ := slices.BinarySearch(a.classes, size)
		a.classes = slices.Insert(a.classes, i, size)
	}
	a.free[size] = append(a.free[size], p)
	a.st.Cached += size
}

// trim returns every cached block to the driver and reports the bytes
// returned.
func (a *allocator) trim() (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.trimLocked()
}

func (a *allocator) trimLocked() (int64, error) {
	a.st.Trims++
	a.breakFreeSets()
	if len(a.free) == 0 {
		return 0, nil
	}
	// Queued kernels may still use cached blocks (they were freed in stream
	// order): wait for them before the driver gets the memory back.
	if a.drain != nil {
		if err := a.drain(); err != nil {
			return 0, err
		}
	}
	var freed int64
	var firstErr error
	for _, size := range a.classes {
		for _, p := range a.free[size] {
			if err := a.drv.Free(p); err != nil && firstErr == nil {
				firstErr = err
			}
			freed += size
			a.st.Frees++
		}
	}
	a.st.Cached -= freed
	clear(a.free)
	a.classes = a.classes[:0]
	return freed, firstErr
}

func (a *allocator) stats() AllocStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.st
}

package plan

import (
	"runtime"
	"testing"
)

type owner struct{ pad [64]byte }

// TestCacheSweepsAreAmortised: storing under 10,000 live owners sweeps
// O(log n) times, not once per store (a sweep per store made 40,000 runs
// with fresh executors take minutes); and entries of owners that are
// collected go away at a later sweep.
func TestCacheSweepsAreAmortised(t *testing.T) {
	var c Cache
	owners := make([]*owner, 10000)
	for i := range owners {
		owners[i] = &owner{}
		c.Store(KeyOf(owners[i], nil), i)
	}
	if c.sweeps > 20 {
		t.Errorf("%d sweeps for %d stores, want O(log n)", c.sweeps, len(owners))
	}
	if n := c.Len(); n != len(owners) {
		t.Fatalf("%d entries, want %d", n, len(owners))
	}
	for i := range owners {
		if v, ok := c.Load(KeyOf(owners[i], nil)); !ok || v.(int) != i {
			t.Fatalf("entry %d: %v, %v", i, v, ok)
		}
	}
	owners = nil
	runtime.GC()
	for i := range 2 * sweepMin {
		c.Store(KeyOf(&owner{}, i), i) // owners dropped at once: all dead by the next GC
	}
	c.mu.Lock()
	c.sweepAfter = 0 // the next store sweeps
	c.mu.Unlock()
	runtime.GC()
	for i := range sweepMin {
		c.Store(KeyOf(&owner{}, i), i)
	}
	if n := c.Len(); n > 2*sweepMin {
		t.Errorf("%d entries left after the owners were collected, want at most %d", n, 2*sweepMin)
	}
}

package plan

import (
	"sync"
	"weak"
)

// Cache holds executor-private state of a kernel or a plan, keyed by
// executor. Keys made by KeyOf hold their executor weakly: the cache never
// keeps an executor (and the memory it owns) alive, and entries whose
// executor has been collected are dropped on the next store.
type Cache struct {
	m sync.Map
	// Sweeps are amortised: one after as many stores as there were live
	// entries at the last sweep (at least sweepMin), so a sweep costs O(1)
	// per store and dead entries never outnumber live ones by much. (A
	// sweep on every store was quadratic: 40,000 runs with a fresh
	// executor each took 7.6 minutes, almost all of it sweeping.)
	mu         sync.Mutex
	stores     int
	sweepAfter int
	sweeps     int // for tests
}

const sweepMin = 8

// Key is a cache key: an owner (an executor), held weakly, and a tag
// telling apart the kinds of state one owner keeps.
type Key[T any] struct {
	owner weak.Pointer[T]
	tag   any
}

// KeyOf returns the key of owner's state of kind tag (a comparable value,
// nil for the owner's main entry).
func KeyOf[T any](owner *T, tag any) Key[T] { return Key[T]{weak.Make(owner), tag} }

func (k Key[T]) gone() bool { return k.owner.Value() == nil }

// weakKey is implemented by every Key.
type weakKey interface{ gone() bool }

// Load returns the value stored under key.
func (c *Cache) Load(key any) (any, bool) { return c.m.Load(key) }

// LoadOrStore returns the value under key if there is one, else stores v.
func (c *Cache) LoadOrStore(key, v any) (actual any, loaded bool) {
	if actual, ok := c.m.Load(key); ok {
		return actual, true
	}
	c.maybeSweep()
	return c.m.LoadOrStore(key, v)
}

// Store sets the value under key.
func (c *Cache) Store(key, v any) {
	c.maybeSweep()
	c.m.Store(key, v)
}

// Delete removes key's entry.
func (c *Cache) Delete(key any) { c.m.Delete(key) }

// Len is the number of entries (for tests).
func (c *Cache) Len() int {
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	return n
}

// maybeSweep sweeps when enough stores have happened since the last sweep.
func (c *Cache) maybeSweep() {
	c.mu.Lock()
	c.stores++
	due := c.stores >= max(c.sweepAfter, sweepMin)
	if due {
		c.stores = 0
	}
	c.mu.Unlock()
	if !due {
		return
	}
	live := c.sweep()
	c.mu.Lock()
	c.sweepAfter = live
	c.sweeps++
	c.mu.Unlock()
}

// sweep drops the entries of collected owners and returns how many remain.
func (c *Cache) sweep() int {
	live := 0
	c.m.Range(func(k, _ any) bool {
		if w, ok := k.(weakKey); ok && w.gone() {
			c.m.Delete(k)
		} else {
			live++
		}
		return true
	})
	return live
}

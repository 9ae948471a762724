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
}

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
	c.sweep()
	return c.m.LoadOrStore(key, v)
}

// Store sets the value under key.
func (c *Cache) Store(key, v any) {
	c.sweep()
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

// sweep drops the entries of collected owners. Stores are rare (one per
// executor and kernel), and the entries few, so a full look costs little.
func (c *Cache) sweep() {
	c.m.Range(func(k, _ any) bool {
		if w, ok := k.(weakKey); ok && w.gone() {
			c.m.Delete(k)
		}
		return true
	})
}

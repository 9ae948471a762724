package rocm

import (
	"encoding/binary"
	"slices"

	"github.com/loomgraph/loom/exec"
)

// Slot sets (exec.SlotAllocator): a run's temporary slots are taken as one
// set and given back as one, and the next run of a plan with the same slot
// sizes gets a set back whole: the same addresses, so its binding repeats
// and its recording replays (replay.go). Decisions:
//
//   - Why: with one allocation a slot, the slots came from the size
//     classes' last-in-first-out free lists, which every other run shares.
//     A model's decode plan got its slots back in another order after the
//     prefill had taken and returned blocks of the same sizes, so every
//     Generate brought new decode bindings, each run step by step and then
//     recorded again (session 45: three a Generate, the first four steps
//     ~7.5 ms against ~3.4 at the median on the 1B model).
//   - Which set: the free set made first, not the one given back last. Two
//     decode steps in flight hold two sets; with the first-made rule the
//     odd steps of every Generate take one and the even steps the other,
//     whichever order the last Generate ended in, so the pairing of slots
//     with the steps' other buffers (model: the token and position) holds
//     from one Generate to the next.
//   - Bounds: at most maxFreeSets sets are kept free; beyond that the least
//     recently given back set's blocks go to the free lists, to serve any
//     size. A free set's blocks count as cached and Trim (and exhaustion)
//     returns them to the driver like any cached block.
//   - A set's blocks are never released one by one (release ignores them):
//     the set owns them until it is broken up.

const maxFreeSets = 16

// slotSet is one run's temporary slots.
type slotSet struct {
	key  string
	blks []*block
	busy bool
	used uint64 // when it was last given back (a.tick), for the bound
}

// slotKey is the map key of a list of slot sizes.
func slotKey(sizes []int) string {
	b := make([]byte, 0, 8*len(sizes))
	for _, n := range sizes {
		b = binary.LittleEndian.AppendUint64(b, uint64(n))
	}
	return string(b)
}

// takeSet returns a set of blocks for slots of the given sizes: the
// first-made free set with those sizes, or a new one.
func (a *allocator) takeSet(sizes []int) (*slotSet, error) {
	key := slotKey(sizes)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sets[key] {
		if s.busy {
			continue
		}
		s.busy = true
		a.freeSets--
		for _, b := range s.blks {
			a.st.Allocs++
			a.st.Reused++
			a.st.Cached -= b.size
			a.handOut(b)
		}
		return s, nil
	}
	s := &slotSet{key: key, busy: true, blks: make([]*block, 0, len(sizes))}
	for _, n := range sizes {
		b, err := a.allocLocked(int64(n))
		if err != nil {
			for _, b := range s.blks {
				a.releaseLocked(b)
			}
			return nil, err
		}
		b.set = true
		s.blks = append(s.blks, b)
	}
	a.sets[key] = append(a.sets[key], s)
	return s, nil
}

// giveSet gives a set taken by takeSet back, keeping it whole, and breaks
// up the least recently given back free set beyond maxFreeSets.
func (a *allocator) giveSet(s *slotSet) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !s.busy {
		return
	}
	s.busy = false
	a.tick++
	s.used = a.tick
	a.freeSets++
	for _, b := range s.blks {
		b.live = false
		a.st.InUse -= b.size
		a.st.Live--
		a.st.Cached += b.size
	}
	for a.freeSets > maxFreeSets {
		var old *slotSet
		for _, l := range a.sets {
			for _, t := range l {
				if !t.busy && (old == nil || t.used < old.used) {
					old = t
				}
			}
		}
		a.breakSet(old)
	}
}

// breakSet hands a free set's blocks to the free lists (cached still).
func (a *allocator) breakSet(s *slotSet) {
	a.sets[s.key] = slices.DeleteFunc(a.sets[s.key], func(t *slotSet) bool { return t == s })
	if len(a.sets[s.key]) == 0 {
		delete(a.sets, s.key)
	}
	a.freeSets--
	for _, b := range s.blks {
		b.set = false
		if b.size == 0 {
			continue
		}
		a.st.Cached -= b.size // pushFree counts it again
		a.pushFree(b.size, b.ptr)
	}
}

// breakFreeSets breaks up every free set (before a trim).
func (a *allocator) breakFreeSets() {
	for _, l := range a.sets {
		for _, s := range slices.Clone(l) {
			if !s.busy {
				a.breakSet(s)
			}
		}
	}
}

// AllocSlots implements exec.SlotAllocator: a run's temporary slots as one
// set (slotset.go), poisoned like any temporary when Poison is set.
func (e *Executor) AllocSlots(slotBytes []int) ([]exec.Memory, func(), error) {
	if err := e.checkOpen(); err != nil {
		return nil, nil, err
	}
	if len(slotBytes) == 0 {
		return nil, func() {}, nil
	}
	s, err := e.alloc.takeSet(slotBytes)
	if err != nil {
		return nil, nil, err
	}
	release := func() { e.alloc.giveSet(s) }
	mem := make([]exec.Memory, len(s.blks))
	poison := e.poison.Load()
	for i, b := range s.blks {
		mem[i] = &memory{e: e, blk: b}
		if n := slotBytes[i]; poison >= 0 && n > 0 {
			leave := e.enter(nil)
			err := e.dev.MemsetD8(b.ptr, byte(poison), uint64(n), e.stream)
			leave()
			if err != nil {
				release()
				return nil, nil, err
			}
		}
	}
	return mem, release, nil
}

var _ exec.SlotAllocator = (*Executor)(nil)

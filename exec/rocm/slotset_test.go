package rocm

import (
	"slices"
	"testing"

	"github.com/loomgraph/loom/exec/rocm/hip"
)

func setPtrs(s *slotSet) []hip.DevPtr {
	var p []hip.DevPtr
	for _, b := range s.blks {
		p = append(p, b.ptr)
	}
	return p
}

// TestSlotSets: a plan's slots come back as the same set whatever else the
// free lists served in between; two sets in flight alternate by the order
// they were made; free sets beyond the bound and trims give their blocks
// back; the accounting stays balanced.
func TestSlotSets(t *testing.T) {
	d := newFakeDriver(1 << 30)
	a := newAllocator(d, nil, nil)
	decode := []int{4096, 300, 0, 4096}
	s0, err := a.takeSet(decode)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := a.takeSet(decode)
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := setPtrs(s0), setPtrs(s1)
	if slices.Equal(p0, p1) {
		t.Fatal("two sets in flight share blocks")
	}
	// 300 bytes take a 512-byte class; a slot of 0 bytes an empty block.
	if st := a.stats(); st.Live != 8 || st.InUse != 2*(4096+512+4096) {
		t.Fatalf("in use %d bytes in %d blocks, want %d in 8", st.InUse, st.Live, 2*(4096+512+4096))
	}
	// Give back in either order: the odd/even runs keep their sets.
	for round, order := range [][2]*slotSet{{s0, s1}, {s1, s0}} {
		a.giveSet(order[0])
		a.giveSet(order[1])
		// Another plan takes and returns blocks of the same sizes.
		var other []*block
		for _, n := range []int{4096, 4096, 300} {
			b, err := a.alloc(int64(n))
			if err != nil {
				t.Fatal(err)
			}
			other = append(other, b)
		}
		for _, b := range other {
			a.release(b)
		}
		x, err := a.takeSet(decode)
		if err != nil {
			t.Fatal(err)
		}
		y, err := a.takeSet(decode)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(setPtrs(x), p0) || !slices.Equal(setPtrs(y), p1) {
			t.Fatalf("round %d: sets %v, %v; want %v, %v", round, setPtrs(x), setPtrs(y), p0, p1)
		}
		// A set's block freed alone stays the set's.
		a.release(x.blks[0])
		if st := a.stats(); st.Live != 8+3-3 {
			t.Fatalf("round %d: %d blocks live after releasing a set's block alone, want 8", round, st.Live)
		}
		s0, s1 = x, y
	}
	a.giveSet(s0)
	a.giveSet(s1)
	a.giveSet(s1) // twice: nothing
	st := a.stats()
	if st.InUse != 0 || st.Live != 0 {
		t.Fatalf("after giving back: %v", st)
	}
	if st.Cached != int64(d.used) {
		t.Fatalf("%d bytes cached, %d taken from the driver", st.Cached, d.used)
	}
	// More free sets than the bound: the oldest go to the free lists.
	var sets []*slotSet
	for i := range maxFreeSets + 3 {
		s, err := a.takeSet([]int{256 * (i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, s)
	}
	for _, s := range sets {
		a.giveSet(s)
	}
	if a.freeSets != maxFreeSets {
		t.Fatalf("%d free sets kept, want %d", a.freeSets, maxFreeSets)
	}
	// The decode sets were given back first: broken up, their blocks
	// cached in the free lists.
	if len(a.sets[slotKey(decode)]) != 0 {
		t.Fatalf("the oldest sets were kept: %d", len(a.sets[slotKey(decode)]))
	}
	st = a.stats()
	if st.InUse != 0 {
		t.Fatalf("in use %d after giving every set back", st.InUse)
	}
	n, err := a.trim()
	if err != nil {
		t.Fatal(err)
	}
	if n != st.Cached || a.stats().Cached != 0 || a.freeSets != 0 || len(d.live) != 0 {
		t.Fatalf("trim returned %d of %d cached bytes; %d free sets and %d driver blocks left", n, st.Cached, a.freeSets, len(d.live))
	}
}

// TestSlotSetExhaustion: a new set that does not fit trims the free sets
// and the free lists and retries; one that still does not fit is an error
// that leaves nothing taken.
func TestSlotSetExhaustion(t *testing.T) {
	d := newFakeDriver(1 << 20)
	a := newAllocator(d, nil, nil)
	s, err := a.takeSet([]int{600 << 10})
	if err != nil {
		t.Fatal(err)
	}
	a.giveSet(s)
	t2, err := a.takeSet([]int{700 << 10}) // fits only once the free set is trimmed
	if err != nil {
		t.Fatalf("a set that fits after a trim: %v", err)
	}
	if a.freeSets != 0 || d.frees != 1 {
		t.Fatalf("%d free sets, %d driver frees after the trim; want 0, 1", a.freeSets, d.frees)
	}
	if _, err := a.takeSet([]int{100 << 10, 400 << 10}); err == nil {
		t.Fatal("a set beyond the device's memory: no error")
	}
	if st := a.stats(); st.Live != 1 || st.InUse != 700<<10 {
		t.Fatalf("a failed set left %v", st)
	}
	a.giveSet(t2)
}

package rocm

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/loomgraph/loom/exec/rocm/hip"
)

// fakeDriver hands out fake addresses from a budget of bytes.
type fakeDriver struct {
	mu             sync.Mutex
	next           hip.DevPtr
	live           map[hip.DevPtr]uint64
	budget, used   uint64
	mallocs, frees int
}

func newFakeDriver(budget uint64) *fakeDriver {
	return &fakeDriver{next: 1 << 20, live: map[hip.DevPtr]uint64{}, budget: budget}
}

var errFakeOOM = &hip.Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY"}

func (d *fakeDriver) Malloc(n uint64) (hip.DevPtr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.used+n > d.budget {
		return 0, errFakeOOM
	}
	p := d.next
	d.next += hip.DevPtr(n + 4096)
	d.live[p] = n
	d.used += n
	d.mallocs++
	return p, nil
}

func (d *fakeDriver) Free(p hip.DevPtr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.live[p]
	if !ok {
		return fmt.Errorf("fake: free of unknown pointer %#x", p)
	}
	delete(d.live, p)
	d.used -= n
	d.frees++
	return nil
}

func TestSizeClass(t *testing.T) {
	for _, tc := range []struct{ n, want int64 }{
		{0, 0}, {1, 256}, {256, 256}, {257, 512}, {1 << 20, 1 << 20},
		{1<<20 + 1, 1<<20 + 1<<18}, {3 << 20, 3 << 20}, {5<<20 + 1, 6 << 20}, {7<<20 + 1, 8 << 20},
		{64 << 20, 64 << 20}, {64<<20 + 1, 66 << 20}, {1<<31 + 1000, 1<<31 + 2<<20},
	} {
		if got := sizeClass(tc.n); got != tc.want {
			t.Errorf("sizeClass(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	// Classes never shrink a request and waste at most a quarter (1 MiB+)
	// or 255 bytes (below).
	for n := int64(1); n < 1<<28; n = n*3/2 + 7 {
		c := sizeClass(n)
		if c < n || (n > smallMax && c-n > n/4) || (n <= smallMax && c-n >= smallQuantum) {
			t.Errorf("sizeClass(%d) = %d", n, c)
		}
	}
}

func TestAllocatorReuse(t *testing.T) {
	d := newFakeDriver(1 << 40)
	drained := 0
	a := newAllocator(d, func() error { drained++; return nil }, nil)
	// A plan-like cycle: the same sizes every "run".
	sizes := []int64{100, 4000, 1 << 20, 3<<20 + 5, 100 << 20, 0}
	var base AllocStats
	for run := range 1000 {
		var bs []*block
		for _, n := range sizes {
			b, err := a.alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			if b.n != n || b.size < n {
				t.Fatalf("block %+v for %d bytes", b, n)
			}
			bs = append(bs, b)
		}
		for _, b := range bs {
			a.release(b)
			a.release(b) // double free is a no-op
		}
		if run == 0 {
			base = a.stats()
		}
	}
	st := a.stats()
	t.Logf("after 1000 runs: %v", st)
	if st.InUse != 0 || st.Live != 0 {
		t.Errorf("in use after all frees: %v", st)
	}
	if st.Mallocs != base.Mallocs || d.mallocs != len(sizes)-1 {
		t.Errorf("driver allocations grew: %d after the first run, %d after 1000 (driver saw %d)", base.Mallocs, st.Mallocs, d.mallocs)
	}
	if st.PeakInUse != base.PeakInUse {
		t.Errorf("peak grew from %d to %d", base.PeakInUse, st.PeakInUse)
	}
	if st.Allocs != int64(1000*len(sizes)) || st.Reused != int64(999*(len(sizes)-1)) {
		t.Errorf("allocs %d, reused %d", st.Allocs, st.Reused)
	}
	// A slightly smaller large request reuses a cached large block.
	b, _ := a.alloc(97 << 20)
	if a.stats().Mallocs != st.Mallocs || b.size != 100<<20 {
		t.Errorf("97 MiB request did not reuse the cached 100 MiB block: %+v", b)
	}
	a.release(b)
	cached := a.stats().Cached
	n, err := a.trim()
	if err != nil || n != cached || d.used != 0 || len(d.live) != 0 || drained != 1 {
		t.Errorf("trim returned %d (cached %d), %v; driver still holds %d bytes; drained %d times", n, cached, err, d.used, drained)
	}
	if st := a.stats(); st.Cached != 0 || st.Frees != int64(len(sizes)-1) {
		t.Errorf("after trim: %v", st)
	}
}

func TestAllocatorExhaustion(t *testing.T) {
	d := newFakeDriver(10 << 20)
	a := newAllocator(d, nil, func() (uint64, uint64, error) { return 123, 10 << 20, nil })
	b1, err := a.alloc(6 << 20)
	if err != nil {
		t.Fatal(err)
	}
	a.release(b1) // cached: 6 MiB held
	// 8 MiB does not fit next to the cached 6 MiB: trim, then retry works.
	b2, err := a.alloc(8 << 20)
	if err != nil {
		t.Fatalf("alloc after trim-and-retry: %v", err)
	}
	if st := a.stats(); st.Trims != 1 || st.Frees != 1 || st.Cached != 0 {
		t.Errorf("after retry: %v", st)
	}
	_, err = a.alloc(5 << 20)
	if err == nil {
		t.Fatal("allocation beyond the budget succeeded")
	}
	t.Log(err)
	for _, want := range []string{"5242880 bytes", "8388608 bytes in use", "device: 123 of 10485760 bytes free", "CUDA_ERROR_OUT_OF_MEMORY"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q", want)
		}
	}
	var he *hip.Error
	if !errors.As(err, &he) {
		t.Errorf("error does not wrap the driver's *hip.Error")
	}
	a.release(b2)
	if _, err := a.alloc(-1); err == nil {
		t.Error("negative allocation succeeded")
	}
}

func TestAllocatorConcurrent(t *testing.T) {
	d := newFakeDriver(1 << 40)
	a := newAllocator(d, nil, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				b, err := a.alloc(int64(1 + (i*g)%5000))
				if err != nil {
					t.Error(err)
					return
				}
				a.release(b)
			}
		}()
	}
	wg.Wait()
	if st := a.stats(); st.InUse != 0 || st.Live != 0 || st.Allocs != 16000 {
		t.Errorf("%v", st)
	}
}

package cpu_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/loomgraph/loom/exec/cpu"
)

// TestProgramDoesNotKeepExecutorsAlive: a program run on a fresh executor
// 200 times (each taking a mapped arena of several MiB) keeps none of them:
// after a GC the heap is within a few MiB of where it started, the mapped
// arenas are released, and each kernel's cache holds only live executors.
func TestProgramDoesNotKeepExecutorsAlive(t *testing.T) {
	p := chain(t, 512, 512, false)
	in := input(t, 512, 512, 1)
	if _, err := p.Run(context.Background(), cpu.New(), in); err != nil {
		t.Fatal(err)
	}
	settle := func() (heap uint64, mapped int64) {
		var ms runtime.MemStats
		for range 20 {
			runtime.GC()
			time.Sleep(5 * time.Millisecond) // cleanups run on their own goroutine
			runtime.ReadMemStats(&ms)
			if cpu.MappedBytes() == 0 {
				break
			}
		}
		return ms.HeapAlloc, cpu.MappedBytes()
	}
	heap0, mapped0 := settle()
	for range 200 {
		e := cpu.New()
		if _, err := p.Run(context.Background(), e, in); err != nil {
			t.Fatal(err)
		}
		if e.MemStats().LiveBytes < 2<<20 {
			t.Fatalf("the run took %d bytes of arenas; the test wants a sizable one", e.MemStats().LiveBytes)
		}
	}
	heap1, mapped1 := settle()
	t.Logf("heap %d -> %d bytes, mapped arenas %d -> %d bytes", heap0, heap1, mapped0, mapped1)
	// 8 MiB: runtime and test-harness noise under load reached 4.4 MiB;
	// a leak of one arena per executor would be 200 × several MiB.
	if heap1 > heap0+8<<20 {
		t.Errorf("heap grew from %d to %d bytes over 200 runs on fresh executors", heap0, heap1)
	}
	if mapped1 > mapped0 {
		t.Errorf("mapped arenas grew from %d to %d bytes", mapped0, mapped1)
	}
	for i, s := range p.Plan().Steps {
		// Dead entries go at the next amortised sweep: up to sweepMin (8)
		// stores after a sweep, plus the executors a sweep found still
		// uncollected, may remain — never the 200 of an unswept cache.
		if n := s.Kernel.Cache.Len(); n > 16 {
			t.Errorf("step %d's kernel cache holds %d entries after every executor is gone", i, n)
		}
	}
}

package cpu

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTeam: every part of a loop runs exactly once and the loop returns
// only after all have: loops of 1…9 parts, from several goroutines at
// once, nested (a part that runs a loop of its own), and parts that take
// long enough for helpers to claim them; the helpers exit once idle.
func TestTeam(t *testing.T) {
	check := func(k int, work time.Duration) {
		counts := make([]atomic.Int32, k)
		var done atomic.Int32
		parallel(k, func(p int) {
			if work > 0 {
				time.Sleep(work)
			}
			counts[p].Add(1)
			done.Add(1)
		})
		if got := done.Load(); got != int32(k) {
			t.Errorf("%d parts: %d done when the loop returned", k, got)
		}
		for p := range counts {
			if c := counts[p].Load(); c != 1 {
				t.Errorf("%d parts: part %d ran %d times", k, p, c)
			}
		}
	}
	for k := 1; k <= 9; k++ {
		check(k, 0)
		check(k, 200*time.Microsecond)
	}
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				check(1+(g+i)%5, 0)
			}
		}()
	}
	wg.Wait()
	// Nested: each outer part runs an inner loop.
	var inner atomic.Int32
	parallel(4, func(int) {
		parallel(3, func(int) { inner.Add(1) })
	})
	if got := inner.Load(); got != 12 {
		t.Errorf("nested loops: %d inner parts ran, want 12", got)
	}
	// Idle helpers exit (teamSpin after their last part).
	deadline := time.Now().Add(5 * time.Second)
	for helpers.alive.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := helpers.alive.Load(); n != 0 {
		t.Errorf("%d helpers still alive 5 s after the last loop", n)
	}
}

// TestTeamParallel: with two Ps, a loop's second part runs beside the
// first (a part that waits for the other to start finishes only if a
// helper runs it at the same time; the wait gives up after a second, so a
// team that runs parts one after another fails rather than hangs).
func TestTeamParallel(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one P: the loops run on the calling goroutine")
	}
	for range 20 {
		var started atomic.Int32
		var alone atomic.Bool // a part gave up waiting for the other
		parallel(2, func(int) {
			started.Add(1)
			for deadline := time.Now().Add(time.Second); started.Load() < 2; runtime.Gosched() {
				if time.Now().After(deadline) {
					alone.Store(true)
					return
				}
			}
		})
		if alone.Load() {
			t.Fatal("the two parts of a loop never ran at the same time")
		}
	}
}

// BenchmarkParallelRowsOverhead: parallelRows over rows of ~75 ns each
// (a Q5_0 row of SmolLM's 576 values takes about that here) on two
// workers, against the same work serially: 192, 576 and 1,536 rows, a
// decode step's products' sizes.
func BenchmarkParallelRowsOverhead(b *testing.B) {
	spin := func(rows int) float64 {
		s := 1.0
		for i := range rows * 40 {
			s = s*1.0000001 + float64(i&7)
		}
		return s
	}
	e := NewWithWorkers(2)
	var sink atomic.Uint64
	for _, rows := range []int{192, 576, 1536} {
		b.Run("parallel/"+strconv.Itoa(rows), func(b *testing.B) {
			for b.Loop() {
				_ = e.parallelRows(context.Background(), rows, func(r0, r1 int) error {
					sink.Add(uint64(spin(r1 - r0)))
					return nil
				})
			}
		})
		b.Run("serial/"+strconv.Itoa(rows), func(b *testing.B) {
			for b.Loop() {
				sink.Add(uint64(spin(rows)))
			}
		})
	}
}

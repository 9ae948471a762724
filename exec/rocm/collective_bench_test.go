package rocm

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/loomgraph/loom/exec/rocm/hip"
)

// TestGPUAllReduceBandwidth measures AllReduce (f32 sum, in place) over
// every GPU of this machine, one executor and one NCCL/RCCL rank each
// (NewGroup), for 32 KiB, 256 KiB and 1 MiB … 1 GiB: the median of 20 timed calls after 5
// warm-ups (device events on every rank's stream, the slowest rank's
// time), the algorithm bandwidth bytes/time and the bus bandwidth
// 2(N−1)/N of it (nccl-tests' definitions; on one GPU the bus moves
// nothing and only the algorithm bandwidth means anything). Numbers for
// the report; scripts/peer_allreduce.py measures torch.distributed the
// same way, to run in the same call. Needs LOOM_ALLREDUCE_BENCH=1.
func TestGPUAllReduceBandwidth(t *testing.T) {
	if os.Getenv("LOOM_ALLREDUCE_BENCH") != "1" {
		t.Skip("set LOOM_ALLREDUCE_BENCH=1 to measure AllReduce bandwidth")
	}
	openGPU(t)
	n, err := DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	es := make([]*Executor, n)
	for i := range es {
		if es[i], err = OpenDevice(i); err != nil {
			t.Fatal(err)
		}
		defer es[i].Close()
	}
	if err := es[0].supportsCollective(); err != nil {
		t.Skipf("no collective library: %v", err)
	}
	comms, err := NewGroup("bench", es)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range comms {
		defer c.Close()
	}
	lib, _ := es[0].collectives()
	t.Logf("%d GPUs (%s), %s", n, es[0].info.Name, lib.Name())
	for _, size := range allReduceSizes {
		bufs := make([]*block, n)
		for i, e := range es {
			b, err := e.alloc.alloc(size)
			if err != nil {
				t.Fatal(err)
			}
			defer e.alloc.release(b)
			if err := e.dev.MemsetD8(b.ptr, 0, uint64(size), e.stream); err != nil {
				t.Fatal(err)
			}
			bufs[i] = b
		}
		count := int(size / 4)
		once := func() error {
			return lib.Group(func() error {
				for i, c := range comms {
					if err := c.c.AllReduce(bufs[i].ptr, bufs[i].ptr, count, hip.CollF32, hip.RedSum, es[i].stream); err != nil {
						return err
					}
				}
				return nil
			})
		}
		var times []float64
		for rep := range 25 {
			starts, ends := make([]hip.Event, n), make([]hip.Event, n)
			for i, e := range es {
				s, _ := e.dev.NewEvent()
				f, _ := e.dev.NewEvent()
				starts[i], ends[i] = s, f
				if err := e.dev.Record(s, e.stream); err != nil {
					t.Fatal(err)
				}
			}
			if err := once(); err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i, e := range es {
				if err := e.dev.Record(ends[i], e.stream); err != nil {
					t.Fatal(err)
				}
				if err := e.dev.EventSynchronize(ends[i]); err != nil {
					t.Fatal(err)
				}
				ms, err := e.dev.ElapsedMs(starts[i], ends[i])
				if err != nil {
					t.Fatal(err)
				}
				worst = max(worst, float64(ms))
				e.dev.DestroyEvent(starts[i])
				e.dev.DestroyEvent(ends[i])
			}
			if rep >= 5 {
				times = append(times, worst)
			}
		}
		slices.Sort(times)
		ms := times[len(times)/2]
		alg := float64(size) / ms / 1e6
		bus := alg * 2 * float64(n-1) / float64(n)
		t.Logf("%s: %.3f ms, algorithm %.1f GB/s, bus %.1f GB/s", human(size), ms, alg, bus)
	}
}

// allReduceSizes are the measured sizes: a tensor-parallel decode step's
// (32 KiB: 8 rows of 2048 bf16), then 256 KiB and 1 MiB … 1 GiB.
var allReduceSizes = []int64{32 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30}

func human(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

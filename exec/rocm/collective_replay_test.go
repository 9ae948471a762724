package rocm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// collectiveBlock is a small program with collectives between kernels: an
// all-reduce of a product's output, a norm-like chain after it, an
// all-gather, and their f32 inputs for rank r (random, per rank).
func collectiveBlock(t *testing.T, size int) (*graph.Graph, func(r int) map[string]*tensor.Tensor) {
	t.Helper()
	g := graph.Group{Name: "tp", Size: size}
	gr := graph.New()
	x := gr.Input("x", dtype.F32, 16, 64)
	w := gr.Input("w", dtype.F32, 64, 48)
	s := x.Matmul(w).AllReduce(g, graph.ReduceSum)
	gr.Output("s", s.Tanh().Affine(0.5, 0.25))
	gr.Output("g", s.Sum(1).AllGather(g, 0))
	gr.Output("m", x.Exp().AllReduce(g, graph.ReduceMax))
	inputs := func(r int) map[string]*tensor.Tensor {
		rng := rand.New(rand.NewPCG(uint64(size), uint64(r)))
		in := map[string]*tensor.Tensor{}
		// In a fixed order: a map's order changes from one range to the
		// next, and two calls must give the same inputs (the CPU group's
		// and the GPU ranks').
		shapes := map[string][]int{"x": {16, 64}, "w": {64, 48}}
		for _, name := range []string{"x", "w"} {
			shape := shapes[name]
			v := make([]float64, tensor.Numel(shape))
			for i := range v {
				v[i] = rng.Float64() - 0.5
			}
			in[name], _ = tensor.FromFloat64s(dtype.F32, v, shape...)
		}
		return in
	}
	return gr, inputs
}

// gpuRanks opens size executors, one per GPU (the first is e), or skips
// where the machine has fewer GPUs.
func gpuRanks(t *testing.T, e *Executor, size int) []*Executor {
	t.Helper()
	if n, _ := DeviceCount(); n < size {
		t.Skipf("needs %d GPUs, the machine has %d", size, n)
	}
	es := []*Executor{e}
	for i := 1; i < size; i++ {
		d, err := OpenDevice(i)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		es = append(es, d)
	}
	return es
}

// onRanks runs f for every rank at once and joins their errors.
func onRanks(size int, f func(r int) error) error {
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Go(func() {
			if err := f(r); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TestGPUCollectiveReplay: runs with collectives are recorded and replayed
// (exec.WithReplay) on a group of one GPU rank, and of two where the
// machine has them: three runs of one binding record once and replay
// twice on every rank, every run's outputs are the CPU group's (the same
// program on cpu.NewGroup ranks) within f32 rounding, closing the
// communicators drops the recordings that used them, and a new group's
// runs record anew and give the same outputs.
func TestGPUCollectiveReplay(t *testing.T) {
	e := freshGPU(t)
	if err := e.supportsCollective(); err != nil {
		t.Skipf("no collective library on this GPU machine: %v", err)
	}
	if err := e.dev.CanCapture(); err != nil {
		t.Skipf("the runtime has no graphs: %v", err)
	}
	for _, size := range []int{1, 2} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			es := gpuRanks(t, e, size)
			gr, inputs := collectiveBlock(t, size)
			p, err := gr.Compile(graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			host, _ := cpu.NewGroup("tp", size)
			want := make([]map[string]*tensor.Tensor, size)
			if err := onRanks(size, func(r int) error {
				var err error
				want[r], err = p.Run(exec.WithComms(context.Background(), host[r]), cpu.New(), inputs(r))
				return err
			}); err != nil {
				t.Fatal(err)
			}
			vals := make([]map[string]exec.Value, size)
			for r := range size {
				vals[r] = residentValues(t, es[r], inputs(r))
			}
			before := make([]ReplayStats, size)
			for r := range size {
				before[r] = es[r].ReplayStats()
			}
			// runs the program three times on every rank with comms, and
			// checks the outputs against the CPU group's.
			runs := func(comms []*Comm) {
				t.Helper()
				if err := onRanks(size, func(r int) error {
					ctx := exec.WithComms(exec.WithReplay(context.Background(), true), comms[r])
					for i := range 3 {
						out, err := p.RunValues(ctx, es[r], vals[r], false)
						if err != nil {
							return fmt.Errorf("run %d: %w", i, err)
						}
						for name, w := range want[r] {
							got := out[name].(*tensor.Tensor)
							for j := range w.Numel() {
								if d := got.Float64(j) - w.Float64(j); !(d <= 1e-5 && d >= -1e-5) {
									return fmt.Errorf("run %d: %s[%d] = %v, the CPU group's %v", i, name, j, got.Float64(j), w.Float64(j))
								}
							}
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			for round := range 2 {
				comms, err := NewGroup("tp", es)
				if err != nil {
					t.Fatal(err)
				}
				runs(comms)
				for r := range size {
					st := es[r].ReplayStats()
					if rec, rep := st.Recorded-before[r].Recorded, st.Replayed-before[r].Replayed; rec != 1 || rep != 2 {
						t.Errorf("round %d, rank %d: three runs of one binding made %d recordings and %d replays, want 1 and 2 (%+v)", round, r, rec, rep, st)
					}
					if st.Live != before[r].Live+1 {
						t.Errorf("round %d, rank %d: %d recordings live, want %d", round, r, st.Live, before[r].Live+1)
					}
				}
				for _, c := range comms {
					if err := c.Close(); err != nil {
						t.Fatal(err)
					}
				}
				for r := range size {
					st := es[r].ReplayStats()
					if st.Live != before[r].Live {
						t.Errorf("round %d, rank %d: closing the group left %d recordings live, want %d", round, r, st.Live, before[r].Live)
					}
					before[r] = st
				}
			}
		})
	}
}

// TestGPUCollectiveDeadPeer: on two GPUs, after a run on both ranks (the
// library connects the ranks in the first collectives), rank 0 runs again
// and rank 1 does not come. Rank 0's run must end at its context's
// deadline with an error naming the wait for collectives, not hang; the
// communicators must close afterwards. A run still going 20 s after its
// 2 s deadline fails the test with every goroutine's stack printed, and
// its executors and communicators are left open (closing them would wait
// for the hung call), so that the rest of the package still runs.
func TestGPUCollectiveDeadPeer(t *testing.T) {
	openGPU(t)
	if n, _ := DeviceCount(); n < 2 {
		t.Skipf("needs 2 GPUs, the machine has %d", n)
	}
	es := make([]*Executor, 2)
	hung := false
	t.Cleanup(func() {
		for _, e := range es {
			if e == nil || hung {
				continue
			}
			if err := e.Close(); err != nil {
				t.Errorf("closing an executor: %v", err)
			}
		}
	})
	for i := range es {
		var err error
		if es[i], err = OpenDevice(i); err != nil {
			t.Fatal(err)
		}
	}
	if err := es[0].supportsCollective(); err != nil {
		t.Skipf("no collective library on this GPU machine: %v", err)
	}
	comms, err := NewGroup("tp", es)
	if err != nil {
		t.Fatal(err)
	}
	gr, inputs := collectiveBlock(t, 2)
	p, err := gr.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := onRanks(2, func(r int) error {
		_, err := p.Run(exec.WithComms(context.Background(), comms[r]), es[r], inputs(r))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(exec.WithComms(context.Background(), comms[0]), 2*time.Second)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := p.Run(ctx, es[0], inputs(0))
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(22 * time.Second):
		hung = true
		var b strings.Builder
		pprof.Lookup("goroutine").WriteTo(&b, 2)
		t.Fatalf("a run whose peer never came still runs 20 s after its 2 s deadline (its executors are left open); goroutines:\n%s", b.String())
	}
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "cancelled while waiting for collectives") {
		t.Fatalf("a run whose peer never came: %v, want the wait for collectives cancelled", err)
	}
	if took > 10*time.Second {
		t.Errorf("the run ended %v after it began, its deadline was 2 s", took)
	}
	t.Logf("ended after %v: %v", took.Round(time.Millisecond), err)
	if comms[0].c.Live() {
		t.Errorf("rank 0's communicator is still live after the abort")
	}
	// The other rank learns of it by its own means and aborts too, as the
	// library asks; then both close (and the executors, at cleanup).
	comms[1].c.Abort()
	for _, c := range comms {
		if err := c.Close(); err != nil {
			t.Errorf("closing an aborted communicator: %v", err)
		}
	}
}

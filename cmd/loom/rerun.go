package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
	"github.com/loomgraph/loom/workloads"
)

// benchReruns times n runs of each fused workload on one executor, the
// first run included, and the page faults and kernel CPU time each run
// took (the process's,
// minor faults, so other goroutines' count too): once with Run, which
// allocates the outputs every time, and once with RunInto, writing into
// output tensors allocated once before the first run (not timed; their
// pages are first touched by the first run). It prints one line per run
// and the slowest run over the fastest.
func benchReruns(w io.Writer, e exec.Executor, ids string, sz workloads.Size, n int) error {
	for _, id := range strings.Split(ids, ",") {
		wl, err := workloads.ByID(strings.TrimSpace(id))
		if err != nil {
			return err
		}
		if wl.Skip != "" {
			fmt.Fprintf(w, "%s skipped: %s\n", wl.ID, wl.Skip)
			continue
		}
		g, err := wl.Build(sz)
		if err != nil {
			return err
		}
		p, err := g.Compile(graph.Options{})
		if err != nil {
			return err
		}
		in, err := workloads.Inputs(g, 1)
		if err != nil {
			return err
		}
		ctx := context.Background()
		runs := []struct {
			mode string
			run  func() error
		}{
			{"Run", func() error { _, err := p.Run(ctx, e, in); return err }},
			{"RunInto", nil},
		}
		outs := map[string]*tensor.Tensor{}
		for _, b := range p.Plan().Outputs {
			if outs[b.Name], err = tensor.Zeros(b.DType, b.Shape...); err != nil {
				return err
			}
		}
		runs[1].run = func() error { return p.RunInto(ctx, e, in, outs) }
		for _, r := range runs {
			ms := make([]float64, n)
			for i := range n {
				f0, s0 := rusage()
				start := time.Now()
				if err := r.run(); err != nil {
					return fmt.Errorf("%s %s run %d: %w", wl.ID, r.mode, i, err)
				}
				ms[i] = float64(time.Since(start).Nanoseconds()) / 1e6
				f1, s1 := rusage()
				fmt.Fprintf(w, "%s %-7s run %d: %8.1f ms %8d page faults %7.1f ms in the kernel\n", wl.ID, r.mode, i, ms[i], f1-f0, s1-s0)
			}
			fmt.Fprintf(w, "%s %-7s slowest/fastest: %.2fx\n", wl.ID, r.mode, slices.Max(ms)/slices.Min(ms))
		}
	}
	return nil
}

// rusage is the process's minor page-fault count and system (kernel) CPU
// time in ms, all threads together (zeros where getrusage is unavailable).
func rusage() (faults int64, sysMS float64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return int64(ru.Minflt), float64(ru.Stime.Nano()) / 1e6
}

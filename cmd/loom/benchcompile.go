package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/workloads"
)

// compileResult is one row of the compile table: how long preparing a
// workload's plan took from nothing (no code object in memory or on disk:
// every kernel compiled, in parallel) and from the disk cache (a new
// process: nothing in memory), medians over reps.
type compileResult struct {
	Workload string  `json:"workload"`
	Kernels  int     `json:"kernels"`
	Distinct int     `json:"distinct_sources"`
	SrcBytes int     `json:"avg_source_bytes"`
	ColdMS   float64 `json:"cold_ms"`
	DiskMS   float64 `json:"disk_ms"`
}

// compileWorkloads are the plans whose preparation is timed: three single
// fused kernels and a transformer block of many kernels.
var compileWorkloads = []string{"W1", "W2", "W6", "block"}

// benchCompile times preparation on a GPU executor. Each cold rep points
// the disk cache at a new empty directory and forgets the in-memory code
// cache; each disk rep forgets memory only. Every rep compiles the graph
// anew, so the plan's kernels start unprepared.
func benchCompile(e *rocm.Executor, reps int) ([]compileResult, error) {
	old, had := os.LookupEnv(rocm.CacheDirEnv)
	defer func() {
		if had {
			os.Setenv(rocm.CacheDirEnv, old)
		} else {
			os.Unsetenv(rocm.CacheDirEnv)
		}
		rocm.ForgetCompiled()
	}()
	root, err := os.MkdirTemp("", "loom-bench-kernels-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	var out []compileResult
	for _, id := range compileWorkloads {
		build := func() (*graph.Program, error) {
			var g *graph.Graph
			var err error
			if id == "block" {
				g, err = workloads.Block(workloads.DefaultBlock)
			} else {
				w, _ := workloads.ByID(id)
				g, err = w.Build(workloads.Size{Elems: 1 << 20, Rows: 1024, Cols: 1024})
			}
			if err != nil {
				return nil, err
			}
			return g.Compile(graph.Options{})
		}
		r := compileResult{Workload: id}
		var cold, disk []float64
		for i := range reps {
			dir := fmt.Sprintf("%s/%s-%d", root, id, i)
			os.Setenv(rocm.CacheDirEnv, dir)
			for pass := range 2 {
				rocm.ForgetCompiled()
				p, err := build()
				if err != nil {
					return nil, err
				}
				t0 := time.Now()
				if err := p.Prepare(context.Background(), e); err != nil {
					return nil, fmt.Errorf("%s: %w", id, err)
				}
				ms := float64(time.Since(t0).Nanoseconds()) / 1e6
				if pass == 0 {
					cold = append(cold, ms)
				} else {
					disk = append(disk, ms)
				}
				if i == 0 && pass == 0 {
					r.Kernels, r.Distinct, r.SrcBytes = sources(p, e.Target())
				}
			}
		}
		r.ColdMS, r.DiskMS = median(cold), median(disk)
		out = append(out, r)
	}
	return out, nil
}

// sources counts a plan's steps, its distinct kernel sources and their mean
// size (indexing steps are counted as steps only).
func sources(p *graph.Program, t codegen.Target) (steps, distinct, avg int) {
	seen := map[string]bool{}
	total := 0
	for _, s := range p.Plan().Steps {
		steps++
		src, err := codegen.Kernel(s.Kernel, t)
		if err != nil || seen[src.Code] {
			continue
		}
		seen[src.Code] = true
		total += len(src.Code)
	}
	if len(seen) > 0 {
		avg = total / len(seen)
	}
	return steps, len(seen), avg
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func printCompile(w io.Writer, rs []compileResult, e exec.Executor) {
	g := e.(*rocm.Executor)
	fmt.Fprintf(w, "\nkernel preparation on %s (%s, %s): cold = every kernel compiled (in parallel), disk = a new process's warm start\n", g.Info().Name, g.Info().Arch, g.Compiler().Version())
	fmt.Fprintf(w, "%-8s %7s %8s %9s %9s %9s\n", "workload", "kernels", "distinct", "src_bytes", "cold_ms", "disk_ms")
	for _, r := range rs {
		fmt.Fprintf(w, "%-8s %7d %8d %9d %9.1f %9.2f\n", r.Workload, r.Kernels, r.Distinct, r.SrcBytes, r.ColdMS, r.DiskMS)
	}
}

package main

import (
	"fmt"
	"runtime"

	"github.com/loomgraph/loom/exec"
	// Executors register themselves with exec.Open.
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/exec/rocm"
	"github.com/loomgraph/loom/model"
)

// devices lists the values -device accepts.
const devices = "auto, cpu or rocm"

// openExecutor returns the executor for a -device value and a short reason
// for the choice, which the commands print. "auto" tries the GPU executor
// first and falls back to the CPU, saying why (exec.Open); naming a device
// fails if it cannot open.
func openExecutor(name string) (exec.Executor, string, error) {
	switch name {
	case "auto", "cpu", "rocm":
		return exec.Open(name)
	}
	return nil, "", fmt.Errorf("unknown device %q (want %s)", name, devices)
}

// openExecutors opens the executors of n ranks: one (openExecutor) for n =
// 1; for n > 1 one per GPU (devices 0 … n−1) with rocm, n CPU executors
// (each with its share of the cores) with cpu, and with auto the GPUs when
// there are n of them, else the CPU.
func openExecutors(name string, n int) ([]exec.Executor, string, error) {
	if n == 1 {
		e, why, err := openExecutor(name)
		if err != nil {
			return nil, "", err
		}
		return []exec.Executor{e}, why, nil
	}
	switch name {
	case "auto", "rocm":
		count, err := rocm.DeviceCount()
		if err == nil && count >= n {
			es := make([]exec.Executor, 0, n)
			for i := range n {
				e, err := rocm.OpenDevice(i)
				if err != nil {
					closeExecutors(es)
					return nil, "", err
				}
				es = append(es, e)
			}
			return es, fmt.Sprintf("%d ranks on GPUs 0–%d (tensor parallel)", n, n-1), nil
		}
		if name == "rocm" {
			if err == nil {
				err = fmt.Errorf("%d GPUs", count)
			}
			return nil, "", fmt.Errorf("-tp %d on rocm needs %d GPUs: %v", n, n, err)
		}
		fallthrough
	case "cpu":
		es := make([]exec.Executor, n)
		workers := max(1, runtime.GOMAXPROCS(0)/n)
		for i := range es {
			es[i] = cpu.NewWithWorkers(workers)
		}
		return es, fmt.Sprintf("%d ranks on CPU executors of %d workers each (tensor parallel)", n, workers), nil
	}
	return nil, "", fmt.Errorf("unknown device %q (want %s)", name, devices)
}

// closeExecutors closes what openExecutors opened.
func closeExecutors(es []exec.Executor) {
	for _, e := range es {
		if c, ok := e.(interface{ Close() error }); ok {
			c.Close()
		}
	}
}

// loadRanks loads the model once per executor: the whole model for one,
// the ranks of a tensor-parallel group (communicators of the executors'
// kind) for several.
func loadRanks(path string, es []exec.Executor, opts model.Options) ([]*model.Model, error) {
	var comms []exec.Comm
	if len(es) > 1 {
		switch es[0].(type) {
		case *rocm.Executor:
			gs := make([]*rocm.Executor, len(es))
			for i, e := range es {
				gs[i] = e.(*rocm.Executor)
			}
			cs, err := rocm.NewGroup("tp", gs)
			if err != nil {
				return nil, err
			}
			for _, c := range cs {
				comms = append(comms, c)
			}
		default:
			cs, err := cpu.NewGroup("tp", len(es))
			if err != nil {
				return nil, err
			}
			for _, c := range cs {
				comms = append(comms, c)
			}
		}
	}
	ms := make([]*model.Model, 0, len(es))
	for i, e := range es {
		o := opts
		o.Executor = e
		if comms != nil {
			o.Comm = comms[i]
		}
		m, err := model.Load(path, o)
		if err != nil {
			for _, m := range ms {
				m.Close()
			}
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

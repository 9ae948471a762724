package main

import (
	"fmt"

	"github.com/loomgraph/loom/exec"
	// Executors register themselves with exec.Open.
	_ "github.com/loomgraph/loom/exec/cpu"
	_ "github.com/loomgraph/loom/exec/rocm"
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

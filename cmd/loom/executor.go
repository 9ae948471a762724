package main

import (
	"fmt"
	"runtime"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
)

// devices lists the values -device accepts.
const devices = "auto or cpu"

// openExecutor returns the executor for a -device value and a short reason
// for the choice, which the demo prints.
//
// Only the CPU executor exists today, so "auto" picks it and says why:
// there is no GPU executor built yet (the GPU platform layer, exec/rocm/hip,
// is not an executor). It deliberately does not claim to have probed for a
// GPU. When a GPU executor exists, "auto" tries it first and falls back to
// the CPU with the GPU's error as the reason, and its own name ("rocm") is
// added here.
func openExecutor(name string) (exec.Executor, string, error) {
	switch name {
	case "auto":
		return cpu.New(), fmt.Sprintf("auto: no GPU executor built yet; CPU with %d workers", runtime.GOMAXPROCS(0)), nil
	case "cpu":
		return cpu.New(), fmt.Sprintf("-device cpu; %d workers", runtime.GOMAXPROCS(0)), nil
	}
	return nil, "", fmt.Errorf("unknown device %q (want %s)", name, devices)
}

package tests

import (
	"testing"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/tests/conformance"
)

// TestPoolsCPU runs the pools/upsampling group on the CPU executor (fusion
// on and off, two poison bytes: see conformance.Pools), on all cores and on
// one worker.
func TestPoolsCPU(t *testing.T) {
	conformance.Pools(t, func(p byte) exec.Executor { return cpu.New().Poison(p) })
}

// TestPoolsCPUOneWorker: the serial path agrees with the parallel one.
func TestPoolsCPUOneWorker(t *testing.T) {
	conformance.Pools(t, func(p byte) exec.Executor { return cpu.NewWithWorkers(1).Poison(p) })
}

package tests

import (
	"testing"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/tests/conformance"
)

// TestReductions runs the reduction group on the CPU executor with every
// core (fusion on and off, two poison bytes).
func TestReductions(t *testing.T) {
	conformance.Reductions(t, func(p byte) exec.Executor { return cpu.New().Poison(p) })
}

// TestReductionsOneWorker runs it with a single worker: the serial paths
// (row tiles, chunked long rows) must agree with the parallel ones.
func TestReductionsOneWorker(t *testing.T) {
	conformance.Reductions(t, func(p byte) exec.Executor { return cpu.NewWithWorkers(1).Poison(p) })
}

// Package tests runs the conformance suite (tests/conformance) on the CPU
// executor.
package tests

import (
	"testing"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tests/conformance"
)

// poisoned returns a CPU executor using every core whose fresh memory is
// filled with the poison byte.
func poisoned(p byte) exec.Executor { return cpu.New().Poison(p) }

// oneWorker is poisoned with a single worker: every tile on one goroutine.
func oneWorker(p byte) exec.Executor { return cpu.NewWithWorkers(1).Poison(p) }

// TestCPU runs every conformance group with fusion on and off.
func TestCPU(t *testing.T) {
	t.Run("fused", func(t *testing.T) { conformance.All(t, poisoned, graph.Options{}) })
	t.Run("unfused", func(t *testing.T) { conformance.All(t, poisoned, graph.Options{NoFusion: true}) })
}

// TestCPUOneWorker runs the multi-tile groups on a one-worker executor: the
// serial path must agree with the parallel one.
func TestCPUOneWorker(t *testing.T) {
	t.Run("Large", func(t *testing.T) { conformance.Large(t, oneWorker, graph.Options{}) })
	t.Run("Views", func(t *testing.T) { conformance.Views(t, oneWorker, graph.Options{}) })
}

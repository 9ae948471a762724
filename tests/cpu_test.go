// Package tests runs the conformance suite (tests/conformance) on the CPU
// executor.
package tests

import (
	"strings"
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

// TestCandleQMatmulCPU checks the CPU executor's qmatmul against the values
// Candle's own tests assert for its CPU (conformance.CandleQMatmul): both
// follow GGML's CPU algorithm, so they agree once rounded to integers.
func TestCandleQMatmulCPU(t *testing.T) {
	conformance.CandleQMatmul(t, poisoned, graph.Options{}, true)
}

// TestCPUOneWorker runs the multi-tile groups on a one-worker executor: the
// serial path must agree with the parallel one.
func TestCPUOneWorker(t *testing.T) {
	t.Run("Large", func(t *testing.T) { conformance.Large(t, oneWorker, graph.Options{}) })
	t.Run("Views", func(t *testing.T) { conformance.Views(t, oneWorker, graph.Options{}) })
	t.Run("Conv", func(t *testing.T) { conformance.Conv(t, oneWorker, graph.Options{}) })
}

// TestCPUMatmulGonum runs the matmul and convolution groups with the host
// BLAS forced to gonum's pure Go (LOOM_BLAS=gonum), so that both CPU paths
// pass the same tests wherever OpenBLAS is installed (CI installs it, and
// TestCPU then runs on it); and the matmul group on one worker, the serial
// path.
func TestCPUMatmulGonum(t *testing.T) {
	t.Setenv("LOOM_BLAS", "gonum")
	gonum := func(p byte) exec.Executor {
		e := cpu.New().Poison(p)
		if b := e.BLAS(); !strings.HasPrefix(b, "gonum") {
			t.Fatalf("LOOM_BLAS=gonum, executor uses %q", b)
		}
		return e
	}
	t.Run("fused", func(t *testing.T) { conformance.Matmul(t, gonum, graph.Options{}) })
	t.Run("unfused", func(t *testing.T) { conformance.Matmul(t, gonum, graph.Options{NoFusion: true}) })
	t.Run("one-worker", func(t *testing.T) { conformance.Matmul(t, oneWorker, graph.Options{}) })
	t.Run("Conv", func(t *testing.T) { conformance.Conv(t, gonum, graph.Options{}) })
}

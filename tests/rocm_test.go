package tests

import (
	"sync"
	"testing"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tests/conformance"
)

var (
	gpuOnce sync.Once
	gpu     *rocm.Executor
	gpuErr  error
)

// onGPU returns a factory of poisoned GPU executors (views of one device
// executor, each with its own poison byte, so that cases can run in
// parallel), or skips the test when no GPU executor can open here.
func onGPU(t *testing.T) func(byte) exec.Executor {
	gpuOnce.Do(func() { gpu, gpuErr = rocm.Open() })
	if gpuErr != nil {
		t.Skipf("no GPU: the conformance suite runs on the CPU only here (%v)", gpuErr)
	}
	return func(p byte) exec.Executor { return gpu.WithPoison(p) }
}

// TestROCm runs the same conformance groups as TestCPU on the GPU executor,
// fused and unfused, against the same float64 references.
func TestROCm(t *testing.T) {
	newExec := onGPU(t)
	t.Run("fused", func(t *testing.T) { conformance.All(t, newExec, graph.Options{}) })
	t.Run("unfused", func(t *testing.T) { conformance.All(t, newExec, graph.Options{NoFusion: true}) })
	t.Run("Indexing", func(t *testing.T) { conformance.Indexing(t, newExec) })
	t.Run("Pools", func(t *testing.T) { conformance.Pools(t, newExec) })
}

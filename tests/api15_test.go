package tests

import (
	"testing"

	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tests/conformance"
)

// TestTensorAPICPU runs the tensor-API group (issue 15: shape ops,
// creation helpers, math composites, losses, unbiased var) on the CPU
// executor, fused and unfused.
func TestTensorAPICPU(t *testing.T) {
	t.Run("fused", func(t *testing.T) { conformance.TensorAPI(t, poisoned, graph.Options{}) })
	t.Run("unfused", func(t *testing.T) { conformance.TensorAPI(t, poisoned, graph.Options{NoFusion: true}) })
}

// TestTensorAPIROCm runs the same group on the GPU executor, fused and
// unfused; it skips where no GPU executor opens.
func TestTensorAPIROCm(t *testing.T) {
	newExec := onGPU(t)
	t.Run("fused", func(t *testing.T) { conformance.TensorAPI(t, newExec, graph.Options{}) })
	t.Run("unfused", func(t *testing.T) { conformance.TensorAPI(t, newExec, graph.Options{NoFusion: true}) })
}

package tests

import (
	"testing"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/tests/conformance"
)

// TestIndexingCPU runs the indexing/sorting conformance group on the CPU
// executor (fusion on and off, two poison bytes: see conformance.Indexing).
func TestIndexingCPU(t *testing.T) {
	conformance.Indexing(t, func(p byte) exec.Executor { return cpu.New().Poison(p) })
}

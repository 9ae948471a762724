package tests

import (
	"testing"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/tests/conformance"
)

// TestScanCPU runs the cumsum conformance group (fusion on and off, two
// poison bytes) on the CPU executor with every core, with one worker (the
// one-pass scans only) and with 7 workers (more workers than sequences:
// the two-pass scans of long rows and columns).
func TestScanCPU(t *testing.T) {
	for _, w := range []struct {
		name string
		new  func() *cpu.Executor
	}{
		{"all", cpu.New},
		{"one-worker", func() *cpu.Executor { return cpu.NewWithWorkers(1) }},
		{"7-workers", func() *cpu.Executor { return cpu.NewWithWorkers(7) }},
	} {
		t.Run(w.name, func(t *testing.T) {
			conformance.Scan(t, func(p byte) exec.Executor { return w.new().Poison(p) })
		})
	}
}

// TestScanROCm runs the same group on the GPU executor (skipped without a
// GPU), against the same order reference, so its results equal the CPU's
// bit for bit.
func TestScanROCm(t *testing.T) {
	conformance.Scan(t, onGPU(t))
}

package rocm

import (
	"os"

	"github.com/loomgraph/loom/exec/rocm/hip"
)

// PDLEnv names the environment variable that turns programmatic dependent
// launches off ("off"): every kernel's launch then begins after the kernel
// ahead of it has finished, for comparison.
//
// Measured on an H200 with the 1B llama's bf16 decode step
// (TestGPUSpeed1B, session 29, two calls, medians of 128 steps): launched
// one by one (Options.NoReplay), 1.32–1.34 ms a step with it against
// 1.71–1.96 ms without, each kernel's launch overlapping the tail of the
// one ahead (the step's device time, its 203 launches queued behind a
// spin: 1.03 ms against 1.27, TestGPUDecodeProfile); replayed as a graph, 1.26–1.32 ms with it against 1.25–1.43
// without, the same within the calls' spread (a graph already starts each
// kernel as the one ahead ends). Graphs take it too: one launch path,
// checked by the whole suite.
const PDLEnv = "LOOM_GPU_PDL"

// pdlOff is PDLEnv's "off".
var pdlOff = os.Getenv(PDLEnv) == "off"

// launchDep launches one of Loom's own kernels (every one begins with
// codegen's loom_grid_entry, which catalog's TestKernelsWaitOnEntry
// checks) on the executor's stream, with programmatic dependence on the
// kernel ahead where the device has it (hip.Device.LaunchDep). The vendor
// libraries' kernels and the timing spin keep plain launches.
func (e *Executor) launchDep(f hip.Function, grid, block [3]uint32, sharedMem uint32, args *hip.Args) error {
	if pdlOff {
		return e.dev.Launch(f, grid, block, sharedMem, e.stream, args)
	}
	return e.dev.LaunchDep(f, grid, block, sharedMem, e.stream, args)
}

// Launches says how the executor launches its kernels, for benchmark and
// debug output: with programmatic dependence, or plainly and why.
func (e *Executor) Launches() string {
	switch {
	case pdlOff:
		return "plain launches (" + PDLEnv + "=off)"
	case !e.dev.CanLaunchDep():
		return "plain launches (no programmatic dependent launch on " + e.info.Platform + " " + e.info.Arch + ")"
	}
	return "programmatic dependent launches (each kernel's blocks wait at their first line for the one ahead)"
}

package kernels

// Host emulation of the window kernels: every window case's kernel, AMD's
// source (the prelude's integer f16 conversions and plain IEEE
// arithmetic, no contraction) compiled with the host C++ compiler behind
// internal/hostemu's shim and run by the emulated rig (emurig_test.go),
// its output compared bit for bit with the CPU executor's. This checks the
// index arithmetic, the window bounds, the accumulation order, the
// conversions and the baked-in constants of every window case that the
// GPU tests (TestGPUWindow) compare on a device. (codegen's
// emulate_test.go does the same for the generated kernels.)

import (
	"regexp"
	"testing"
)

// defineRE finds a translation unit's macros (the emulated rig undefines
// them after each unit's namespace).
var defineRE = regexp.MustCompile(`(?m)^#define\s+(\w+)`)

// TestEmulateWindow runs every window case (all parameter sets × dtypes of
// windowParams) through the host emulation of its kernel and compares with
// the CPU executor bit for bit.
func TestEmulateWindow(t *testing.T) {
	cases := windowCases(t, true)
	checkEmu(t, buildEmuRig(t, cases), cases)
}

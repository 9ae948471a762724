package rocm

import (
	"os"
	"sync"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/tensor"
)

// TestMain points the kernel disk cache at a fresh temporary directory
// unless LOOM_CACHE_DIR is set, so that runs measure real compiles and leave
// nothing behind.
func TestMain(m *testing.M) {
	if os.Getenv(CacheDirEnv) != "" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "loom-kernels-")
	if err == nil {
		os.Setenv(CacheDirEnv, dir)
	}
	code := m.Run()
	if err == nil {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// The shared GPU executor of the comparison tests: every allocation
// poisoned with 0xFF.
var gpu struct {
	once sync.Once
	e    *Executor
	err  error
}

// openGPU returns the shared poisoned executor, or skips the test when
// there is no device.
func openGPU(t testing.TB) *Executor {
	t.Helper()
	gpu.once.Do(func() {
		gpu.e, gpu.err = Open()
		if gpu.err == nil {
			gpu.e.Poison(0xFF)
		}
	})
	if gpu.err != nil {
		t.Skipf("no GPU device; this test needs one and is skipped: %v", gpu.err)
	}
	return gpu.e
}

// freshGPU opens a new executor (its own stream, allocator and counters),
// closed when the test ends, or skips.
func freshGPU(t testing.TB) *Executor {
	t.Helper()
	openGPU(t)
	e, err := Open()
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// compileOnly returns an executor without a device that can generate and
// compile kernels (compileKernel): for the GPU's compiler when there is a
// GPU, else hiprtc for gfx90a; it skips when there is neither.
func compileOnly(t testing.TB) *Executor {
	comp, arch, platform := realCompiler(t)
	return &Executor{
		comp: comp, info: hip.DeviceInfo{Arch: arch, Platform: platform, Name: "compile-only"},
		target: codegen.Target{Platform: platform, Arch: arch},
		opts:   compileOptions(platform, comp.Version()), codes: newCodeCache(),
	}
}

// residentValues uploads host inputs to e, as RunValues takes them; they
// are freed when the test ends.
func residentValues(t testing.TB, e *Executor, in map[string]*tensor.Tensor) map[string]exec.Value {
	t.Helper()
	vals := map[string]exec.Value{}
	for name, h := range in {
		d, err := e.FromHost(h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Free() })
		vals[name] = d
	}
	return vals
}

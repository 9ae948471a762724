package hip

import (
	"bytes"
	"debug/elf"
	"errors"
	"strings"
	"testing"
)

const nvidiaKernels = `
extern "C" __global__ void scale_f32(const float* __restrict__ x, float* __restrict__ y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
extern "C" __global__ void warp_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = (i < n) ? x[i] : 0.0f;
    for (int off = WARP / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off, WARP);
    if ((threadIdx.x % WARP) == 0) atomicAdd(out, v);
}
`

// TestNVIDIACompile runs where libnvrtc loads (not on the CI image).
func TestNVIDIACompile(t *testing.T) {
	c, err := LoadCompiler(NVIDIA)
	if err != nil {
		t.Skipf("NVRTC unavailable, NVIDIA compile test skipped: %v", err)
	}
	t.Logf("%s (%s)", c.Version(), c.Platform())
	if c.Platform() != NVIDIA || !strings.HasPrefix(c.Version(), "nvrtc ") {
		t.Errorf("Platform() = %q, Version() = %q", c.Platform(), c.Version())
	}
	for _, arch := range []string{"sm_80", "sm_90"} {
		t.Run(arch, func(t *testing.T) {
			code, log, err := c.Compile(nvidiaKernels, "kernels.cu", arch, []string{"-DWARP=32"})
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if log != "" {
				t.Logf("log: %s", log)
			}
			if !bytes.HasPrefix(code, []byte("\x7fELF")) {
				t.Fatalf("CUBIN (%d bytes) does not start with ELF magic: % x", len(code), code[:min(len(code), 8)])
			}
			checkELF(t, code, elf.EM_CUDA, []string{"scale_f32", "warp_sum"})
		})
	}

	const bad = `extern "C" __global__ void broken(float* y) { y[0] = undefined_fn(); }`
	_, log, err := c.Compile(bad, "bad.cu", "sm_90", nil)
	var e *Error
	switch {
	case err == nil:
		t.Error("Compile of a bad source succeeded")
	case !strings.Contains(log, "undefined_fn") || !strings.Contains(err.Error(), log):
		t.Errorf("error/log do not carry the diagnostic:\nerror: %v\nlog: %s", err, log)
	case !errors.As(err, &e) || e.Call != "nvrtcCompileProgram" || e.Name != "NVRTC_ERROR_COMPILATION":
		t.Errorf("error %v: want an *Error from nvrtcCompileProgram / NVRTC_ERROR_COMPILATION", err)
	}

	for _, arch := range []string{"compute_90", "gfx90a", "90"} {
		if _, _, err := c.Compile(nvidiaKernels, "kernels.cu", arch, nil); !errors.Is(err, ErrUnsupportedArch) {
			t.Errorf("Compile(%s): err = %v, want ErrUnsupportedArch", arch, err)
		}
	}
}

package hip

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// amdKernels exercises hiprtc: float math, a wave reduction whose
// __shfl_xor width comes from the WAVE macro (set per target with -D), and
// bfloat16 values kept in uint16_t storage. hiprtc (ROCm 5.2) predefines
// only the 32- and 64-bit <stdint.h> types, and including <stdint.h> clashes
// with them, so the source declares uint16_t itself (a redefinition as the
// same type is legal C++ should a newer hiprtc predefine it).
const amdKernels = `
typedef unsigned short uint16_t;
extern "C" __global__ void scale_f32(const float* __restrict__ x, float* __restrict__ y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
extern "C" __global__ void wave_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = (i < n) ? x[i] : 0.0f;
    for (int off = WAVE / 2; off > 0; off >>= 1) v += __shfl_xor(v, off, WAVE);
    if ((threadIdx.x % WAVE) == 0) atomicAdd(out, v);
}
extern "C" __global__ void bf16_to_f32(const uint16_t* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __uint_as_float(((unsigned int)x[i]) << 16);
}
`

var amdKernelNames = []string{"scale_f32", "wave_sum", "bf16_to_f32"}

// amdCompiler returns hiprtc, or skips (fails in CI) when it cannot be loaded.
func amdCompiler(t *testing.T) Compiler {
	t.Helper()
	c, err := LoadCompiler(AMD)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but hiprtc is unavailable: %v", err)
		}
		t.Skipf("hiprtc unavailable (install libamdhip64-5): %v", err)
	}
	return c
}

func TestAMDCompile(t *testing.T) {
	c := amdCompiler(t)
	t.Logf("%s (%s)", c.Version(), c.Platform())
	if c.Platform() != AMD || !strings.HasPrefix(c.Version(), "hiprtc ") {
		t.Errorf("Platform() = %q, Version() = %q", c.Platform(), c.Version())
	}
	for _, tc := range []struct{ arch, wave string }{
		{"gfx90a", "64"},
		{"gfx1030", "32"},
		{"gfx90a:xnack-", "64"},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			code, log, err := c.Compile(amdKernels, "kernels.hip", tc.arch, []string{"-DWAVE=" + tc.wave})
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if log != "" {
				t.Logf("log: %s", log)
			}
			if !bytes.HasPrefix(code, []byte("\x7fELF")) {
				t.Fatalf("code object (%d bytes) does not start with ELF magic: % x", len(code), code[:min(len(code), 8)])
			}
			var syms []string
			for _, k := range amdKernelNames {
				syms = append(syms, k, k+".kd") // function and kernel descriptor
			}
			checkELF(t, code, elf.EM_AMDGPU, syms)
		})
	}
	// The options reach the compiler: without -DWAVE the source is invalid.
	if _, log, err := c.Compile(amdKernels, "kernels.hip", "gfx90a", nil); err == nil || !strings.Contains(log, "WAVE") {
		t.Errorf("Compile without -DWAVE: err = %v, log = %q; want an error about WAVE", err, log)
	}
}

// checkELF asserts that code is an ELF object for machine that defines every
// symbol in want.
func checkELF(t *testing.T, code []byte, machine elf.Machine, want []string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(code))
	if err != nil {
		t.Fatalf("parse ELF: %v", err)
	}
	if f.Machine != machine {
		t.Errorf("ELF machine = %v, want %v", f.Machine, machine)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("ELF symbols: %v", err)
	}
	have := map[string]bool{}
	for _, s := range syms {
		have[s.Name] = true
	}
	for _, k := range want {
		if !have[k] {
			t.Errorf("code object lacks symbol %q", k)
		}
	}
}

func TestAMDCompileError(t *testing.T) {
	c := amdCompiler(t)
	const bad = `extern "C" __global__ void broken(float* y) { y[0] = undefined_fn(); }`
	code, log, err := c.Compile(bad, "bad.hip", "gfx90a", nil)
	if err == nil {
		t.Fatalf("Compile of a bad source succeeded (%d bytes)", len(code))
	}
	if !strings.Contains(log, "undefined_fn") {
		t.Errorf("log does not mention the undeclared identifier: %q", log)
	}
	if !strings.Contains(err.Error(), log) {
		t.Errorf("error does not include the log:\nerror: %v\nlog: %s", err, log)
	}
	var e *Error
	if !errors.As(err, &e) || e.Call != "hiprtcCompileProgram" || e.Name != "HIPRTC_ERROR_COMPILATION" {
		t.Errorf("error %v: want an *Error from hiprtcCompileProgram / HIPRTC_ERROR_COMPILATION, got %#v", err, e)
	}
}

func TestAMDCompileRefusesUnknownArch(t *testing.T) {
	amdCompiler(t) // skip/fail as the other AMD tests do
	// A private instance whose create call is instrumented: hiprtc must not
	// even see the program (for gfx942 it would abort the process).
	c, err := loadHiprtc()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	create := c.api.create.fn
	c.api.create.fn = func(prog *uintptr, src, name string, n int32, h, i unsafe.Pointer) int32 {
		calls++
		return create(prog, src, name, n, h, i)
	}
	for _, arch := range []string{"gfx942", "gfx940", "gfx1100", "gfx1030:xnack-", "sm_90"} {
		_, _, err := c.Compile(amdKernels, "kernels.hip", arch, []string{"-DWAVE=64"})
		if !errors.Is(err, ErrUnsupportedArch) {
			t.Errorf("Compile(%s): err = %v, want ErrUnsupportedArch", arch, err)
		}
	}
	if calls != 0 {
		t.Errorf("hiprtcCreateProgram was called %d times for refused targets", calls)
	}
}

package codegen

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgraph/loom/exec/rocm/hip"
	"golang.org/x/sync/errgroup"
)

// amdCompiler returns hiprtc; without it the test fails when CI=true and is
// skipped otherwise.
func amdCompiler(t *testing.T) hip.Compiler {
	t.Helper()
	c, err := hip.LoadCompiler(hip.AMD)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but hiprtc is unavailable: %v", err)
		}
		t.Skipf("hiprtc unavailable (install libamdhip64-5), AMD compile tests skipped: %v", err)
	}
	return c
}

// batchSize is how many kernel bodies share one translation unit in the
// bulk compile tests: hiprtc spends most of a small compile on the prelude
// and its own startup, so batching cuts the op×dtype sweep several-fold.
const batchSize = 40

// compileAll compiles srcs for arch, batched (the batches at once, on every
// core), and checks that every entry point is in the code objects. It
// returns the number of translation units.
func compileAll(t *testing.T, c hip.Compiler, tg Target, arch string, srcs []*Source) int {
	t.Helper()
	machine := elf.EM_AMDGPU
	if tg.Platform == NVIDIA {
		machine = elf.EM_CUDA
	}
	type unit struct {
		batch []*Source
		names []string
		code  []byte
		log   string
		err   error
	}
	var units []*unit
	for lo := 0; lo < len(srcs); lo += batchSize {
		units = append(units, &unit{batch: srcs[lo:min(lo+batchSize, len(srcs))]})
	}
	inParallel(len(units), func(i int) {
		u := units[i]
		var b strings.Builder
		for _, s := range u.batch {
			b.WriteString(s.Body)
			for _, l := range s.Launches {
				u.names = append(u.names, l.Name)
			}
		}
		// The bodies share the part of the prelude that one of them uses
		// (the standalone sources and `loom kernels` compile each Code).
		bodies := b.String()
		u.code, u.log, u.err = c.Compile(PreludeFor(tg, bodies)+bodies, fmt.Sprintf("batch%d.hip", i), arch, nil)
	})
	for _, u := range units {
		if u.err != nil {
			// Find the culprits: compile each kernel of the batch alone.
			t.Errorf("batch of %d kernels for %s failed; compiling them one by one", len(u.batch), arch)
			for _, s := range u.batch {
				if _, _, err := c.Compile(s.Code, s.Name+".hip", arch, nil); err != nil {
					t.Errorf("%s:\n%v\n--- source body ---\n%s", s.Name, err, s.Body)
				}
			}
			continue
		}
		if u.log != "" && strings.Contains(u.log, "warning") {
			t.Logf("%s batch log: %s", arch, u.log)
		}
		checkCodeObject(t, u.code, machine, u.names)
	}
	return len(units)
}

// inParallel calls f(0), …, f(n-1), runtime.NumCPU() at a time (compiles
// are CPU-bound, and hiprtc and NVRTC are safe for concurrent use), and
// returns when every call has.
func inParallel(n int, f func(i int)) {
	var g errgroup.Group
	g.SetLimit(runtime.NumCPU())
	for i := range n {
		g.Go(func() error { f(i); return nil })
	}
	g.Wait()
}

// compileEach compiles every source's one-kernel Code on its own, all at
// once, and returns the code objects, logs and errors in order.
func compileEach(c hip.Compiler, arch, ext string, srcs []*Source) (codes [][]byte, logs []string, errs []error) {
	codes, logs, errs = make([][]byte, len(srcs)), make([]string, len(srcs)), make([]error, len(srcs))
	inParallel(len(srcs), func(i int) {
		codes[i], logs[i], errs[i] = c.Compile(srcs[i].Code, srcs[i].Name+ext, arch, nil)
	})
	return codes, logs, errs
}

// checkCodeObject checks the ELF magic and machine and that every name is a
// symbol (and, on AMD, has its kernel descriptor name.kd).
func checkCodeObject(t *testing.T, code []byte, machine elf.Machine, names []string) {
	t.Helper()
	if !bytes.HasPrefix(code, []byte("\x7fELF")) {
		t.Errorf("code object (%d bytes) does not start with the ELF magic: % x", len(code), code[:min(len(code), 8)])
		return
	}
	f, err := elf.NewFile(bytes.NewReader(code))
	if err != nil {
		t.Errorf("code object is not a readable ELF: %v", err)
		return
	}
	if f.Machine != machine {
		t.Errorf("ELF machine %v, want %v", f.Machine, machine)
	}
	syms := map[string]bool{}
	all, _ := f.Symbols()
	dyn, _ := f.DynamicSymbols()
	for _, s := range append(all, dyn...) {
		syms[s.Name] = true
	}
	for _, n := range names {
		if !syms[n] || !bytes.Contains(code, []byte(n)) {
			t.Errorf("entry point %s is not a symbol of the code object", n)
		}
		if machine == elf.EM_AMDGPU && !syms[n+".kd"] {
			t.Errorf("kernel descriptor %s.kd is missing", n)
		}
	}
}

// standalone are the cases whose one-kernel sources (Code) are compiled on
// their own, besides the batches: the workloads at full size and the big
// variants.
func standalone() []graphCase {
	var cs []graphCase
	for _, c := range allCases(true) {
		if c.big {
			cs = append(cs, c)
		}
	}
	return cs
}

func TestCompileAMD(t *testing.T) {
	c := amdCompiler(t)
	t.Logf("%s", c.Version())
	for _, arch := range []string{"gfx90a", "gfx1030"} {
		t.Run(arch, func(t *testing.T) {
			t.Parallel()
			tg := Target{Platform: AMD, Arch: arch}
			start := time.Now()
			srcs := renderAll(t, allCases(true), tg)
			units := compileAll(t, c, tg, arch, srcs)
			t.Logf("%d kernels in %d translation units: %v", len(srcs), units, time.Since(start).Round(time.Millisecond))
			start = time.Now()
			one := renderAll(t, standalone(), tg)
			codes, _, errs := compileEach(c, arch, ".hip", one)
			for i, s := range one {
				code, err := codes[i], errs[i]
				if err != nil {
					t.Errorf("%s: %v", s.Name, err)
					continue
				}
				checkCodeObject(t, code, elf.EM_AMDGPU, launchNames(s))
			}
			t.Logf("%d one-kernel sources: %v", len(one), time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestCompileNVIDIA compiles the same sources with NVRTC for sm_90 (and
// sm_80); it runs where libnvrtc loads (the GPU machine) and is skipped
// elsewhere.
func TestCompileNVIDIA(t *testing.T) {
	c, err := hip.LoadCompiler(hip.NVIDIA)
	if err != nil {
		t.Skipf("NVRTC unavailable, NVIDIA compile tests skipped: %v", err)
	}
	t.Logf("%s", c.Version())
	var mu sync.Mutex
	for _, arch := range []string{"sm_90", "sm_80"} {
		t.Run(arch, func(t *testing.T) {
			t.Parallel()
			tg := Target{Platform: NVIDIA, Arch: arch}
			start := time.Now()
			srcs := renderAll(t, allCases(true), tg)
			units := compileAll(t, c, tg, arch, srcs)
			t.Logf("%d kernels in %d translation units: %v", len(srcs), units, time.Since(start).Round(time.Millisecond))
			start = time.Now()
			one := renderAll(t, standalone(), tg)
			codes, logs, errs := compileEach(c, arch, ".cu", one)
			for i, s := range one {
				code, log, err := codes[i], logs[i], errs[i]
				if err != nil {
					t.Errorf("%s: %v", s.Name, err)
					continue
				}
				if log != "" {
					mu.Lock()
					t.Logf("%s log: %s", s.Name, log)
					mu.Unlock()
				}
				checkCodeObject(t, code, elf.EM_CUDA, launchNames(s))
			}
			t.Logf("%d one-kernel sources: %v", len(one), time.Since(start).Round(time.Millisecond))
		})
	}
}

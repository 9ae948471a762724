package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/loomgraph/loom/catalog"
	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/exec/rocm/hip"
)

type kernelsFlags struct {
	fs      *flag.FlagSet
	arch    *string
	verbose *bool
	filter  *string
}

func newKernelsFlags(w io.Writer) *kernelsFlags {
	fs := flag.NewFlagSet("kernels", flag.ContinueOnError)
	fs.SetOutput(w)
	return &kernelsFlags{
		fs:      fs,
		arch:    fs.String("arch", "gfx90a,gfx1030", "comma-separated targets: AMD gfx… (through hiprtc) or NVIDIA sm_… (through NVRTC)"),
		verbose: fs.Bool("v", false, "print every kernel, not only failures and the summary"),
		filter:  fs.String("only", "", "compile only kernels whose label contains this text"),
	}
}

// runKernels compiles every kernel of the catalog for each target and
// prints kernel, arch, code bytes and compile time. It exits 1 if any
// kernel fails (or the compiler is missing), so CI can gate on it.
func runKernels(args []string, stdout, stderr io.Writer) int {
	f := newKernelsFlags(stderr)
	if err := f.fs.Parse(args); err != nil {
		return exitUsage
	}
	entries, err := catalog.Kernels()
	if err != nil {
		fmt.Fprintln(stderr, "loom kernels:", err)
		return exitFail
	}
	compiled, failed := 0, 0
	fmt.Fprintf(stdout, "%-48s %-8s %8s %8s\n", "kernel", "arch", "bytes", "ms")
	for _, arch := range strings.Split(*f.arch, ",") {
		arch = strings.TrimSpace(arch)
		t, comp, err := compilerFor(arch)
		if err != nil {
			fmt.Fprintf(stderr, "loom kernels: %s: %v\n", arch, err)
			failed++
			continue
		}
		for _, e := range entries {
			if *f.filter != "" && !strings.Contains(e.Label, *f.filter) {
				continue
			}
			name, code, err := catalog.Render(e, t)
			var obj []byte
			start := time.Now()
			if err == nil {
				var log string
				obj, log, err = comp.Compile(code, name, arch, nil)
				if err != nil && log != "" && !strings.Contains(err.Error(), log) {
					err = fmt.Errorf("%w\n%s", err, log)
				}
			}
			ms := float64(time.Since(start).Microseconds()) / 1000
			if err != nil {
				failed++
				fmt.Fprintf(stdout, "%-48s %-8s %8s %8.1f FAILED: %v\n", e.Label+" "+e.Kernel.Name, arch, "-", ms, err)
				continue
			}
			compiled++
			if *f.verbose {
				fmt.Fprintf(stdout, "%-48s %-8s %8d %8.1f\n", e.Label, arch, len(obj), ms)
			}
		}
	}
	fmt.Fprintf(stdout, "%d compiled, %d failed\n", compiled, failed)
	if failed > 0 {
		return exitFail
	}
	return exitOK
}

// compilerFor picks the compiler and codegen target of an arch: AMD names
// are allow-listed first (hiprtc aborts the process on ISAs its comgr does
// not know).
func compilerFor(arch string) (codegen.Target, hip.Compiler, error) {
	switch {
	case strings.HasPrefix(arch, "gfx"):
		if !hip.KnownAMDArch(arch) {
			return codegen.Target{}, nil, fmt.Errorf("arch %s is not one hiprtc (ROCm 5.2 comgr) knows; refusing to call it", arch)
		}
		c, err := hip.LoadCompiler(hip.AMD)
		return codegen.Target{Platform: codegen.AMD, Arch: arch}, c, err
	case strings.HasPrefix(arch, "sm_"):
		c, err := hip.LoadCompiler(hip.NVIDIA)
		return codegen.Target{Platform: codegen.NVIDIA, Arch: arch}, c, err
	}
	return codegen.Target{}, nil, errors.New("unknown arch (want gfx… or sm_…)")
}

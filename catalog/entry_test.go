package catalog

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/kernels"
)

// entryRE finds a kernel entry point: from extern "C" to the brace that
// opens its body (parameter lists hold no braces).
var entryRE = regexp.MustCompile(`extern "C" __global__[^{]*\{`)

// deferringCalls are the device functions that an entry beginning with
// loom_grid_defer() may call: each issues loads of a constant operand only
// (a weight), then calls loom_grid_entry() before anything else (the
// tensor-core mat-vec's weight stage, in flight while loom_q8t, which it
// always follows, still runs; the one-row quantized mat-vec's first
// weight stage, DEFER, where the step before does not write the weight;
// the one-row skinny product's first spans of its weight, LOOM_GEMV_DEFER;
// a decode step's attention behind its cache's scatter, AT_NEWKV, which
// waits first unless that scatter runs in place).
var deferringCalls = []string{"qmvt<", "qmv1<", "const gemv_pre<GEMV_PRE> pre = gemv_defer<", "attention_warps("}

// qmv1Defers matches a qmv1 call whose last template argument, DEFER, is
// true.
var qmv1Defers = regexp.MustCompile(`^qmv1<[^()]*, true>\(`)

// entriesWait returns the entry points of code whose body does not begin
// with loom_grid_entry(); (macro bodies' line continuations skipped).
func entriesWait(code string) (n int, bad []string) {
	for _, m := range entryRE.FindAllStringIndex(code, -1) {
		n++
		rest := code[m[1]:]
		rest = strings.TrimLeft(rest, " \t\r\n\\")
		if deferred, ok := strings.CutPrefix(rest, "loom_grid_defer();"); ok {
			// A kernel that reads a constant before it waits must be one
			// whose device function is known to call loom_grid_entry()
			// itself (codegen's loom_grid_defer).
			deferred = strings.TrimLeft(deferred, " \t\r\n\\")
			// qmv1 waits itself only with its DEFER argument true (its last).
			if strings.HasPrefix(deferred, "qmv1<") && !qmv1Defers.MatchString(deferred) {
				bad = append(bad, "qmv1 without DEFER after loom_grid_defer()")
				continue
			}
			if slices.ContainsFunc(deferringCalls, func(c string) bool { return strings.HasPrefix(deferred, c) }) {
				continue
			}
		}
		if !strings.HasPrefix(rest, "loom_grid_entry();") {
			head := code[m[0]:m[1]]
			if len(head) > 160 {
				head = head[:160]
			}
			bad = append(bad, head)
		}
	}
	return n, bad
}

// TestKernelsWaitOnEntry checks that every entry point of every kernel
// source the executor can launch (the catalog's renders, and the fixed
// translation units of the products, convolutions and quantized kernels)
// begins with loom_grid_entry(), for both platforms: the GPU executor
// launches them all with programmatic dependence (exec/rocm/launch.go), and
// a kernel without the wait could read what the kernel ahead of it has not
// yet written.
func TestKernelsWaitOnEntry(t *testing.T) {
	es, err := Kernels()
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range []codegen.Target{{Platform: codegen.NVIDIA, Arch: "sm_90"}, {Platform: codegen.AMD, Arch: "gfx90a"}} {
		total := 0
		check := func(label, code string) {
			n, bad := entriesWait(code)
			if n == 0 {
				t.Errorf("%s %s: no entry point found", tg.Arch, label)
			}
			total += n
			for _, b := range bad {
				t.Errorf("%s %s: entry does not begin with loom_grid_entry(): %s", tg.Arch, label, b)
			}
			if !strings.Contains(code, "void loom_grid_entry()") {
				t.Errorf("%s %s: the prelude lacks loom_grid_entry", tg.Arch, label)
			}
		}
		deferred := 0     // the quantized mat-vecs after a step that defer their wait
		deferredGemv := 0 // and the skinny products
		for _, e := range es {
			_, code, err := Render(e, tg)
			if err != nil {
				t.Fatalf("%s: %v", e.Label, err)
			}
			check(e.Label, code)
			if strings.HasPrefix(e.Label, "quantized mat-vec after a step") && strings.Contains(code, "{ loom_grid_defer();") {
				deferred++
			}
			if strings.HasPrefix(e.Label, "skinny product after a step") && strings.Contains(code, "\nLOOM_GEMV_DEFER(") {
				deferredGemv++
			}
		}
		// Their weight is not written by the step before (plan.Kernel.Ahead):
		// the deferred variant is the one rendered, and checked above.
		if deferred != 2 {
			t.Errorf("%s: %d quantized mat-vecs after a step begin with loom_grid_defer(), want 2", tg.Arch, deferred)
		}
		if deferredGemv != 3 {
			t.Errorf("%s: %d skinny products after a step instantiate LOOM_GEMV_DEFER, want 3", tg.Arch, deferredGemv)
		}
		check("gemm", kernels.GemmSource(tg))
		check("gemv", kernels.GemvSource(tg))
		check("conv", kernels.ConvSource(tg))
		check("quant", kernels.QuantSource(tg))
		t.Logf("%s: %d entry points in %d catalog sources and 4 fixed ones", tg.Arch, total, len(es))
	}
}

// TestEntriesWaitDetects checks the check itself: an entry without the
// wait, or with a statement before it, is reported.
func TestEntriesWaitDetects(t *testing.T) {
	for code, want := range map[string]int{
		`extern "C" __global__ void k(int* p) { loom_grid_entry(); p[0] = 1; }`:                                    0,
		"#define K(N) extern \"C\" __global__ void N(int* p) { \\\n  loom_grid_entry(); \\\n p[0] = 1; }":          0,
		`extern "C" __global__ void k(int* p) { p[0] = 1; loom_grid_entry(); }`:                                    1,
		`extern "C" __global__ void k(int* p) { p[0] = 1; } extern "C" __global__ void j() { loom_grid_entry(); }`: 1,
		`extern "C" __global__ void k(int* p) { loom_grid_defer(); qmvt<F, X>(p); }`:                               0,
		`extern "C" __global__ void k(int* p) { loom_grid_defer(); p[0] = 1; }`:                                    1,
		`extern "C" __global__ void k(int* p) { loom_grid_defer(); qmv1<F, G, X, false, true>(p); }`:               0,
		`extern "C" __global__ void k(int* p) { loom_grid_defer(); qmv1<F, G, X, false, false>(p); }`:              1,
	} {
		if _, bad := entriesWait(code); len(bad) != want {
			t.Errorf("%q: %d reported, want %d", code, len(bad), want)
		}
	}
}

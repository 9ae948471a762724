package kernels

// Host emulation of the window kernels: without a GPU, each kernel's AMD
// source (the prelude's integer f16 conversions and plain IEEE arithmetic,
// no contraction) is compiled with the host C++ compiler behind
// internal/hostemu's shim for the HIP names it uses, launched by looping over its grid and
// block, and its output compared bit for bit with the CPU twin. This
// checks the index arithmetic, the window bounds, the accumulation order,
// the conversions and the baked-in constants of every window case that the
// GPU tests (TestGPUWindow) compare on a device. (codegen's emulate_test.go
// does the same for the generated kernels.)

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/internal/hostemu"
)

const windowHostMain = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct loom_dim3 { unsigned int x, y, z; };
loom_dim3 blockIdx, threadIdx, gridDim;
typedef void (*loom_run)(void**);
%s
static const struct { const char* name; loom_run fn; } table[] = {
%s};

// usage: prog NAME INPATH OUTBYTES OUTPATH
int main(int argc, char** argv) {
  if (argc != 5) return 2;
  loom_run fn = 0;
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i)
    if (strcmp(table[i].name, argv[1]) == 0) fn = table[i].fn;
  if (!fn) { fprintf(stderr, "no kernel %%s\n", argv[1]); return 2; }
  FILE* f = fopen(argv[2], "rb");
  if (!f) { perror(argv[2]); return 2; }
  fseek(f, 0, SEEK_END); size_t n = (size_t)ftell(f); fseek(f, 0, SEEK_SET);
  void* in = malloc(n + 16);
  if (n && fread(in, 1, n, f) != n) { perror(argv[2]); return 2; }
  fclose(f);
  size_t ob = (size_t)strtoull(argv[3], 0, 10);
  void* out = malloc(ob + 16);
  memset(out, 0xA5, ob); // poison: elements the kernel never writes show up
  void* args[2] = {in, out};
  fn(args);
  f = fopen(argv[4], "wb");
  if (!f || fwrite(out, 1, ob, f) != ob) { perror(argv[4]); return 2; }
  fclose(f);
  return 0;
}
`

var defineRE = regexp.MustCompile(`(?m)^#define\s+(\w+)`)

// buildWindowEmulator compiles the launches into one host program (a few
// translation units, each source in its own namespace with its macros
// undefined after it) and returns its path.
func buildWindowEmulator(t *testing.T, ls []Launch) string {
	t.Helper()
	cxx, err := hostemu.Compiler()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but there is no host C++ compiler: %v", err)
		}
		t.Skipf("%v: window kernel emulation skipped", err)
	}
	dir := t.TempDir()
	flags := hostemu.Flags
	units := runtime.NumCPU()
	srcs := make([]strings.Builder, units)
	var decls, table strings.Builder
	for i, l := range ls {
		b := &srcs[i%units]
		if b.Len() == 0 {
			b.WriteString(hostemu.Shim)
		}
		fmt.Fprintf(b, "namespace k%d {\n%s\n", i, l.Code)
		fmt.Fprintf(b, "extern \"C\" void run_%s(void** a) {\n  gridDim.x = %du;\n", l.Name, l.Grid[0])
		fmt.Fprintf(b, "  for (unsigned int bk = 0; bk < %du; ++bk)\n    for (unsigned int th = 0; th < %du; ++th) {\n", l.Grid[0], l.Block[0])
		fmt.Fprintf(b, "      blockIdx.x = bk; threadIdx.x = th;\n      %s((const V_T*)a[0], (V_T*)a[1]);\n    }\n}\n}\n", l.Name)
		for _, m := range defineRE.FindAllStringSubmatch(l.Code, -1) {
			fmt.Fprintf(b, "#undef %s\n", m[1])
		}
		fmt.Fprintf(&decls, "extern \"C\" void run_%s(void**);\n", l.Name)
		fmt.Fprintf(&table, "  {\"%s\", run_%s},\n", l.Name, l.Name)
	}
	objs := make([]string, units)
	errs := make([]error, units)
	var wg sync.WaitGroup
	for u := range units {
		if srcs[u].Len() == 0 {
			continue
		}
		cc := filepath.Join(dir, fmt.Sprintf("unit%d.cc", u))
		objs[u] = strings.TrimSuffix(cc, ".cc") + ".o"
		if err := os.WriteFile(cc, []byte(srcs[u].String()), 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := exec.Command(cxx, append(flags, "-c", cc, "-o", objs[u])...).CombinedOutput(); err != nil {
				errs[u] = fmt.Errorf("%v\n%s", err, firstLines(string(out), 30))
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("compiling the window kernels for the host: %v", err)
		}
	}
	mainCC := filepath.Join(dir, "main.cc")
	if err := os.WriteFile(mainCC, []byte(fmt.Sprintf(windowHostMain, decls.String(), table.String())), 0o644); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(dir, "emu")
	args := append(flags, mainCC, "-o", prog)
	for _, o := range objs {
		if o != "" {
			args = append(args, o)
		}
	}
	if out, err := exec.Command(cxx, append(args, "-lm")...).CombinedOutput(); err != nil {
		t.Fatalf("linking the window emulator: %v\n%s", err, out)
	}
	return prog
}

// TestEmulateWindow runs every window case (all parameter sets × dtypes of
// windowParams) through the host emulation of its kernel and compares with
// the CPU executor bit for bit.
func TestEmulateWindow(t *testing.T) {
	cases := windowCases(t, true)
	amd := codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}
	var ls []Launch
	for _, tc := range cases {
		p := tc.prog.Plan()
		ks := indexKernels(t, p)
		if len(p.Steps) != 1 || len(ks) != 1 {
			t.Fatalf("%s: %d steps, want one window step", tc.name, len(p.Steps))
		}
		l, _, err := Plan(ks[0], amd)
		if err != nil || len(l) != 1 {
			t.Fatalf("%s: Plan: %d launches, %v", tc.name, len(l), err)
		}
		ls = append(ls, l[0])
	}
	prog := buildWindowEmulator(t, ls)
	dir := t.TempDir()
	for i, tc := range cases {
		p := tc.prog.Plan()
		in := filepath.Join(dir, "in")
		if err := os.WriteFile(in, tc.inputs[p.Inputs[0].Name].Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		outPath := filepath.Join(dir, "out")
		ob := p.Outputs[0].Bytes()
		if out, err := exec.Command(prog, ls[i].Name, in, fmt.Sprint(ob), outPath).CombinedOutput(); err != nil {
			t.Errorf("%s: emulator: %v\n%s", tc.name, err, out)
			continue
		}
		got, err := os.ReadFile(outPath)
		if err != nil {
			t.Fatal(err)
		}
		want, err := runCPU(tc)
		if err != nil {
			t.Fatal(err)
		}
		if diff := sameBits(p.Outputs[0].DType, got, want, tc.addOp); diff != "" {
			t.Errorf("%s: emulated kernel differs from the CPU twin: %s", tc.name, diff)
		}
	}
	t.Logf("%d window kernels emulated and compared", len(cases))
}

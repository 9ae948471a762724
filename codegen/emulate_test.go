package codegen

// The host emulation test runs the generated kernels on the CPU: the AMD
// flavour of the prelude (integer f16 conversions, plain IEEE arithmetic)
// plus every kernel body is compiled with the host C++ compiler behind a
// shim that defines the few HIP names the code uses, and each kernel is
// launched by looping over its grid. Every plan of the test cases is then
// executed step by step on that emulation and compared with the CPU twin:
// bit for bit for the exact ops, within the accuracy targets for the
// transcendental ones. This checks the index math, the vector and tail
// paths, broadcasting, offsets, rounding of intermediates and the op
// semantics without a GPU. (The host's libm stands in for the device's;
// the vendor functions are checked by their documented accuracy instead.)

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/internal/hostemu"
)

const hostMain = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef void (*loom_run)(void**);
%s
static const struct { const char* name; loom_run fn; } table[] = {
%s};

static void* slurp(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) { perror(path); exit(2); }
  fseek(f, 0, SEEK_END); *n = (size_t)ftell(f); fseek(f, 0, SEEK_SET);
  void* p = aligned_alloc(256, (*n + 256) / 256 * 256);
  if (*n && fread(p, 1, *n, f) != *n) { perror(path); exit(2); }
  fclose(f);
  return p;
}

// usage: prog NAME OUTBYTES OUTPATH [INPATH...]
int main(int argc, char** argv) {
  if (argc < 4) return 2;
  loom_run fn = 0;
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i)
    if (strcmp(table[i].name, argv[1]) == 0) fn = table[i].fn;
  if (!fn) { fprintf(stderr, "no kernel %%s\n", argv[1]); return 2; }
  void* args[64];
  int n = 0;
  for (int i = 4; i < argc; ++i) { size_t sz; args[n++] = slurp(argv[i], &sz); }
  size_t ob = (size_t)strtoull(argv[2], 0, 10);
  void* out = aligned_alloc(256, (ob + 256) / 256 * 256);
  memset(out, 0xA5, ob); // poison: elements the kernel never writes show up
  args[n] = out;
  fn(args);
  FILE* f = fopen(argv[3], "wb");
  if (!f || fwrite(out, 1, ob, f) != ob) { perror(argv[3]); return 2; }
  fclose(f);
  return 0;
}
`

// cooperativeWrapper is the emulator's entry for a source with
// cooperative launches (row kernels): it allocates the scratch buffer
// (poisoned) and runs the launches in order, each through loom_launch.
func cooperativeWrapper(b *strings.Builder, s *Source) {
	n := len(s.Params)
	for li, l := range s.Launches {
		var args []string
		for i, p := range s.Params {
			args = append(args, fmt.Sprintf("(%s)a[%d]", strings.TrimSuffix(p.CType, " __restrict__"), i))
		}
		fmt.Fprintf(b, "static void body%d_%s(void* arg) {\n  void** a = (void**)arg;\n  %s(%s);\n}\n", li, s.Name, l.Name, strings.Join(args, ", "))
	}
	fmt.Fprintf(b, "extern \"C\" void run_%s(void** in) {\n  void* a[%d];\n  memcpy(a, in, sizeof(void*) * %d);\n", s.Name, n, n-btoi(s.ScratchBytes > 0))
	if s.ScratchBytes > 0 {
		sz := (s.ScratchBytes + 255) / 256 * 256
		fmt.Fprintf(b, "  a[%d] = aligned_alloc(256, %d);\n  memset(a[%d], 0xA5, %d);\n", n-1, sz, n-1, sz)
	}
	for li, l := range s.Launches {
		fmt.Fprintf(b, "  loom_launch(%du, %du, body%d_%s, a);\n", l.Grid[0], l.Block[0], li, s.Name)
	}
	if s.ScratchBytes > 0 {
		fmt.Fprintf(b, "  free(a[%d]);\n", n-1)
	}
	b.WriteString("}\n")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// emulator is the host program holding every emulated kernel.
type emulator struct {
	prog string
	dir  string
}

var emu struct {
	once sync.Once
	e    *emulator
	err  error
	took time.Duration
}

var emuTarget = Target{Platform: AMD, Arch: "gfx90a"}

// buildEmulator compiles every source into one host program, in parallel
// translation units.
func buildEmulator(srcs []*Source) (*emulator, error) {
	cxx, err := hostemu.Compiler()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "loom-codegen-emu-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	flags := hostemu.Flags
	const perUnit = 24
	var (
		objs  []string
		decls strings.Builder
		table strings.Builder
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		sem   = make(chan struct{}, runtime.NumCPU())
	)
	for lo := 0; lo < len(srcs); lo += perUnit {
		var b strings.Builder
		b.WriteString(hostemu.Shim)
		b.WriteString(Prelude(emuTarget))
		for _, s := range srcs[lo:min(lo+perUnit, len(srcs))] {
			b.WriteString(s.Body)
			if s.Row {
				cooperativeWrapper(&b, s)
				fmt.Fprintf(&decls, "extern \"C\" void run_%s(void**);\n", s.Name)
				fmt.Fprintf(&table, "  {\"%s\", run_%s},\n", s.Name, s.Name)
				continue
			}
			var args []string
			for i, p := range s.Params {
				args = append(args, fmt.Sprintf("(%s)a[%d]", strings.TrimSuffix(p.CType, " __restrict__"), i))
			}
			fmt.Fprintf(&b, "extern \"C\" void run_%s(void** a) {\n  for (unsigned int b = 0; b < %du; ++b)\n    for (unsigned int t = 0; t < %du; ++t) {\n      blockIdx.x = b; threadIdx.x = t;\n      %s(%s);\n    }\n}\n",
				s.Name, s.Grid[0], s.Block[0], s.Name, strings.Join(args, ", "))
			fmt.Fprintf(&decls, "extern \"C\" void run_%s(void**);\n", s.Name)
			fmt.Fprintf(&table, "  {\"%s\", run_%s},\n", s.Name, s.Name)
		}
		cc := filepath.Join(dir, fmt.Sprintf("unit%d.cc", lo/perUnit))
		obj := strings.TrimSuffix(cc, ".cc") + ".o"
		if err := os.WriteFile(cc, []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
		objs = append(objs, obj)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := hostemu.Run(cxx, append(flags, "-c", cc, "-o", obj)...); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	rtCC := filepath.Join(dir, "runtime.cc")
	if err := os.WriteFile(rtCC, []byte(hostemu.Runtime), 0o644); err != nil {
		return nil, err
	}
	rtObj := filepath.Join(dir, "runtime.o")
	if err := hostemu.Run(cxx, append(flags, "-U_FORTIFY_SOURCE", "-c", rtCC, "-o", rtObj)...); err != nil {
		return nil, err
	}
	objs = append(objs, rtObj)
	mainCC := filepath.Join(dir, "main.cc")
	if err := os.WriteFile(mainCC, []byte(fmt.Sprintf(hostMain, decls.String(), table.String())), 0o644); err != nil {
		return nil, err
	}
	prog := filepath.Join(dir, "emu")
	if err := hostemu.Run(cxx, append(append(flags, mainCC, "-o", prog), append(objs, "-lm")...)...); err != nil {
		return nil, err
	}
	ok = true
	return &emulator{prog: prog, dir: dir}, nil
}

// TestMain removes the host emulators' build folders (objects and the
// program, ~10 MB each) after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, e := range []*emulator{emu.e, rowEmu.e} {
		if e != nil {
			os.RemoveAll(e.dir)
		}
	}
	os.Exit(code)
}

// run executes one rendered kernel on host buffers.
func (e *emulator) run(src *Source, ins [][]byte, outBytes int) ([]byte, error) {
	dir, err := os.MkdirTemp(e.dir, "run")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	args := []string{src.Name, fmt.Sprint(outBytes), filepath.Join(dir, "out")}
	for i, b := range ins {
		p := filepath.Join(dir, fmt.Sprintf("in%d", i))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
		args = append(args, p)
	}
	if err := hostemu.Run(e.prog, args...); err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, "out"))
}

// getEmulator builds the emulator once for every non-big case.
func getEmulator(t *testing.T) *emulator {
	t.Helper()
	emu.once.Do(func() {
		start := time.Now()
		emu.e, emu.err = buildEmulator(sourcesOf(t, emuTarget))
		emu.took = time.Since(start)
	})
	if emu.err != nil {
		if strings.HasPrefix(emu.err.Error(), "no host C++ compiler") && os.Getenv("CI") != "true" {
			t.Skipf("host emulation skipped: %v", emu.err)
		}
		t.Fatalf("building the host emulator: %v", emu.err)
	}
	return emu.e
}

// unfused is the case compiled without fusion.
func (c graphCase) unfused() graphCase {
	c.fused = false
	c.name += "/unfused"
	return c
}

// fusionCases chain ops through f16, bf16, u8 and i64 intermediates, so
// that the fused kernel must round every intermediate like the unfused
// plan's stores do.
func fusionCases() []graphCase {
	return []graphCase{
		{name: "chain/f16-bf16", fused: true, build: func(g *graph.Graph) {
			x := g.Input("x", dtype.F16, 9, 40)
			y := g.Input("y", dtype.F16, 40)
			a := x.Exp().Mul(y).Gelu().Cast(dtype.BF16).Add(graph.Scalar(1.0 / 3)).Sqrt()
			g.Output("out", a.Cast(dtype.F16).Sub(x).Cast(dtype.F32))
		}},
		{name: "chain/ints", fused: true, build: func(g *graph.Graph) {
			x := g.Input("x", dtype.U8, 300)
			y := g.Input("y", dtype.I64, 300)
			a := x.Affine(3, 200).Mul(x).Cast(dtype.I64).Sub(y).Cast(dtype.U32).Affine(7, 1).Cast(dtype.U8)
			g.Output("out", a.Div(x).Cast(dtype.F16).Cast(dtype.F32))
		}},
		{name: "chain/f64", fused: true, build: func(g *graph.Graph) {
			x := g.Input("x", dtype.F64, 5, 33)
			a := x.Silu().Cast(dtype.F32).Sigmoid().Cast(dtype.F64).Mul(x).Cast(dtype.BF16).Exp()
			g.Output("out", a.Maximum(x.Cast(dtype.BF16)).Cast(dtype.F64))
		}},
	}
}

func TestEmulate(t *testing.T) {
	e := getEmulator(t)
	t.Logf("emulator built in %v", emu.took.Round(time.Millisecond))
	checkCases(t, e, emuTarget, runnableCases())
}

// TestEmulateMath sweeps the float transcendentals (with the host's libm
// standing in for the device's).
func TestEmulateMath(t *testing.T) {
	checkMath(t, getEmulator(t), emuTarget)
}

// TestEmulateOptions checks that the other vector widths and grid-stride
// loops compute the same bits as the defaults.
func TestEmulateOptions(t *testing.T) {
	checkOptions(t, getEmulator(t), emuTarget)
}

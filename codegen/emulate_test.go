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
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// hostShim maps the HIP names the generated code uses to host C++.
const hostShim = `
#include <math.h>
#include <stdlib.h>
#include <string.h>
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
struct loom_dim3 { unsigned int x, y, z; };
extern loom_dim3 blockIdx, threadIdx, gridDim;
// Row kernels: blocks run cooperatively (hostRuntime): __syncthreads is a
// barrier of the block's threads, each on its own stack, and a shuffle is a
// write to a slot per thread between two barriers.
#define __shared__ static
void loom_sync();
extern unsigned int loom_slots[];
static inline void __syncthreads() { loom_sync(); }
static inline int __shfl_xor(int v, int m, int w) {
  loom_slots[threadIdx.x] = (unsigned int)v;
  loom_sync();
  const int r = (int)loom_slots[threadIdx.x ^ (unsigned int)m];
  loom_sync();
  return r;
}
void loom_launch(unsigned int grid, unsigned int block, void (*fn)(void*), void* arg);
static inline long long __double_as_longlong(double d) { long long v; memcpy(&v, &d, 8); return v; }
static inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
static inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
struct longlong2 { long long x, y; };
struct uint4 { unsigned int x, y, z, w; };
struct uint2 { unsigned int x, y; };
`

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

// hostRuntime runs a launch of a row kernel: each block's threads are
// fibers (a stack each, entered with makecontext and switched with
// _setjmp/_longjmp, which is fast) run in turn up to their next barrier,
// so __syncthreads and the shuffles built on it behave as on a GPU. A
// thread that returns while others wait at a barrier is a divergent
// barrier: the emulator aborts.
const hostRuntime = `
#undef _FORTIFY_SOURCE
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>
struct loom_dim3 { unsigned int x, y, z; };
loom_dim3 blockIdx, threadIdx, gridDim;
enum { LOOM_MAX_THREADS = 1024, LOOM_STACK = 256 * 1024 };
unsigned int loom_slots[LOOM_MAX_THREADS];
static jmp_buf sched_jb, fiber_jb[LOOM_MAX_THREADS];
static ucontext_t fiber_uc[LOOM_MAX_THREADS];
static char* stacks;
static int state[LOOM_MAX_THREADS]; // 0 not started, 1 running or at a barrier, 2 returned
static unsigned int cur, nthreads;
static void (*body)(void*);
static void* body_arg;
static int cooperative;

static void entry() {
  body(body_arg);
  state[cur] = 2;
  _longjmp(sched_jb, 1);
}

void loom_sync() {
  if (!cooperative) {
    fprintf(stderr, "emulator: a barrier or shuffle outside a cooperative launch\n");
    abort();
  }
  if (!_setjmp(fiber_jb[cur])) _longjmp(sched_jb, 1);
}

static unsigned int b_, t_;
void loom_launch(unsigned int grid, unsigned int block, void (*fn)(void*), void* arg) {
  if (block > LOOM_MAX_THREADS) { fprintf(stderr, "emulator: block of %u threads\n", block); abort(); }
  if (!stacks) stacks = (char*)malloc((size_t)LOOM_MAX_THREADS * LOOM_STACK);
  body = fn; body_arg = arg; nthreads = block; cooperative = 1;
  gridDim.x = grid; gridDim.y = gridDim.z = 1;
  for (b_ = 0; b_ < grid; ++b_) {
    blockIdx.x = b_; blockIdx.y = blockIdx.z = 0;
    for (t_ = 0; t_ < block; ++t_) state[t_] = 0;
    for (;;) {
      for (t_ = 0; t_ < block; ++t_) {
        if (state[t_] == 2) continue;
        cur = t_; threadIdx.x = t_; threadIdx.y = threadIdx.z = 0;
        if (!_setjmp(sched_jb)) {
          if (state[t_] == 0) {
            state[t_] = 1;
            getcontext(&fiber_uc[t_]);
            fiber_uc[t_].uc_stack.ss_sp = stacks + (size_t)t_ * LOOM_STACK;
            fiber_uc[t_].uc_stack.ss_size = LOOM_STACK;
            fiber_uc[t_].uc_link = 0;
            makecontext(&fiber_uc[t_], entry, 0);
            setcontext(&fiber_uc[t_]);
          }
          _longjmp(fiber_jb[t_], 1);
        }
      }
      unsigned int done = 0;
      for (unsigned int t = 0; t < block; ++t) done += state[t] == 2;
      if (done == block) break;
      if (done > 0) {
        fprintf(stderr, "emulator: block %u: %u threads returned while %u wait at a barrier\n", b_, done, block - done);
        abort();
      }
    }
  }
  cooperative = 0;
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

// runCommand runs a command and returns its combined output on failure.
func runCommand(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args[:min(len(args), 6)], " "), err, out)
	}
	return nil
}

// buildEmulator compiles every source into one host program, in parallel
// translation units.
func buildEmulator(srcs []*Source) (*emulator, error) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		if cxx, err = exec.LookPath("c++"); err != nil {
			return nil, fmt.Errorf("no host C++ compiler (g++ or c++): %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "loom-codegen-emu-")
	if err != nil {
		return nil, err
	}
	flags := []string{"-std=c++17", "-O1", "-w", "-fno-strict-aliasing", "-ffp-contract=off"}
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
		b.WriteString(hostShim)
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
			if err := runCommand(cxx, append(flags, "-c", cc, "-o", obj)...); err != nil {
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
	if err := os.WriteFile(rtCC, []byte(hostRuntime), 0o644); err != nil {
		return nil, err
	}
	rtObj := filepath.Join(dir, "runtime.o")
	if err := runCommand(cxx, append(flags, "-U_FORTIFY_SOURCE", "-c", rtCC, "-o", rtObj)...); err != nil {
		return nil, err
	}
	objs = append(objs, rtObj)
	mainCC := filepath.Join(dir, "main.cc")
	if err := os.WriteFile(mainCC, []byte(fmt.Sprintf(hostMain, decls.String(), table.String())), 0o644); err != nil {
		return nil, err
	}
	prog := filepath.Join(dir, "emu")
	if err := runCommand(cxx, append(append(flags, mainCC, "-o", prog), append(objs, "-lm")...)...); err != nil {
		return nil, err
	}
	return &emulator{prog: prog, dir: dir}, nil
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
	if err := runCommand(e.prog, args...); err != nil {
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

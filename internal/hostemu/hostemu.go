// Package hostemu runs HIP kernel source on the CPU, for tests without a
// GPU: the AMD flavour of a kernel (the prelude's integer f16 conversions,
// plain IEEE arithmetic, the portable fallbacks of the vendor intrinsics)
// is compiled with the host C++ compiler behind Shim, a few definitions of
// the HIP names Loom's kernels use, and launched through Runtime, which runs
// a block's threads as fibers so that barriers and the shuffles built on
// them behave as on a GPU. codegen's and kernels' emulation tests build
// their programs from it; each adds its own main and launch wrappers.
package hostemu

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Shim maps the HIP names the kernels use to host C++. A kernel file is
// compiled as Shim + its prelude + its body; __shared__ variables become
// statics, which a block's fibers share (blocks run one after another).
const Shim = `
#include <math.h>
#include <stdlib.h>
#include <string.h>
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
struct loom_dim3 { unsigned int x, y, z; };
extern loom_dim3 blockIdx, threadIdx, gridDim, blockDim;
// Blocks run cooperatively (Runtime): __syncthreads is a barrier of the
// block's threads, each on its own stack, and a shuffle is a write to a
// slot per thread between two barriers of the lanes it exchanges with
// (lane ^ m: the aligned group of the power of two above m, at most the
// width), so that groups of lanes may diverge as the halves of a GPU wave
// do (a wave of 64 whose halves of 32 take different branches shuffles
// within each half).
#define __shared__ static
void loom_sync();
void loom_sync_group(unsigned int w);
extern unsigned int loom_slots[];
static inline void __syncthreads() { loom_sync(); }
static inline int __shfl_xor(int v, int m, int w = 64) { // HIP's default width: warpSize (64: the AMD flavour is gfx90a's)
  unsigned int g = 1;
  while (g <= (unsigned int)m && g < (unsigned int)w) g <<= 1;
  const unsigned int lane = threadIdx.x + threadIdx.y * blockDim.x; // the thread's linear index
  loom_slots[lane] = (unsigned int)v;
  loom_sync_group(g);
  const int r = (int)loom_slots[lane ^ (unsigned int)m];
  loom_sync_group(g);
  return r;
}
void loom_launch(unsigned int grid, unsigned int block, void (*fn)(void*), void* arg);
static inline long long __double_as_longlong(double d) { long long v; memcpy(&v, &d, 8); return v; }
static inline float __uint_as_float(unsigned int u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned int __float_as_uint(float f) { unsigned int u; memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
// Atomics and fences: a block's threads run one at a time and blocks one
// after another, so plain reads and writes are atomic here.
static inline void __threadfence() {}
template <class T> static inline T atomicAdd(T* p, T v) { const T old = *p; *p = old + v; return old; }
template <class T> static inline T atomicCAS(T* p, T cmp, T v) { const T old = *p; if (old == cmp) *p = v; return old; }
template <class T> static inline T atomicExch(T* p, T v) { const T old = *p; *p = v; return old; }
static inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, 8); return d; }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
struct longlong2 { long long x, y; };
struct uint4 { unsigned int x, y, z, w; };
struct uint2 { unsigned int x, y; };
struct int4 { int x, y, z, w; };
struct int2 { int x, y; };
static inline uint4 make_uint4(unsigned int a, unsigned int b, unsigned int c, unsigned int d) { uint4 r = {a, b, c, d}; return r; }
// HIP's min and max take mixed integer types.
template <class A, class B> static inline auto min(A a, B b) -> decltype(a + b) { return a < b ? a : b; }
template <class A, class B> static inline auto max(A a, B b) -> decltype(a + b) { return a < b ? b : a; }
`

// Runtime runs a launch of a kernel whose threads meet at barriers
// (loom_launch): each block's threads are fibers (a stack each, entered
// with makecontext and switched with _setjmp/_longjmp, which is fast) run
// in turn up to their next barrier, so __syncthreads and the shuffles
// built on it behave as on a GPU: a pass runs every thread that can go
// on — the block's threads once all of them wait at __syncthreads, a
// shuffle's group of lanes once all of them wait at that shuffle (so
// groups may take different branches, as GPU waves do) — until the next
// barrier. A thread that returns while others wait at the block barrier,
// or a group some of whose lanes never reach its shuffle, is divergence:
// the emulator aborts. Compile it with -U_FORTIFY_SOURCE.
const Runtime = `
#undef _FORTIFY_SOURCE
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>
struct loom_dim3 { unsigned int x, y, z; };
loom_dim3 blockIdx, threadIdx, gridDim, blockDim;
enum { LOOM_MAX_THREADS = 1024, LOOM_STACK = 256 * 1024 };
unsigned int loom_slots[LOOM_MAX_THREADS];
static jmp_buf sched_jb, fiber_jb[LOOM_MAX_THREADS];
static ucontext_t fiber_uc[LOOM_MAX_THREADS];
static char* stacks;
// 0 not started, 1 at a block barrier, 2 returned, 3 at a group barrier.
static int state[LOOM_MAX_THREADS];
static unsigned int width_[LOOM_MAX_THREADS];
static unsigned char run_[LOOM_MAX_THREADS];
static unsigned int cur, nthreads;
static void (*body)(void*);
static void* body_arg;
static int cooperative;

static void entry() {
  body(body_arg);
  state[cur] = 2;
  _longjmp(sched_jb, 1);
}

static void yield(int s) {
  if (!cooperative) {
    fprintf(stderr, "emulator: a barrier or shuffle outside a cooperative launch\n");
    abort();
  }
  state[cur] = s;
  if (!_setjmp(fiber_jb[cur])) _longjmp(sched_jb, 1);
}
void loom_sync() { yield(1); }
void loom_sync_group(unsigned int w) {
  width_[cur] = w ? w : 1;
  yield(3);
}

// group_ready: every thread of t's group (the aligned width_[t] threads
// around it) waits at a group barrier of that width.
static int group_ready(unsigned int t, unsigned int block) {
  const unsigned int w = width_[t], base = t - t % w;
  for (unsigned int u = base; u < base + w && u < block; ++u)
    if (state[u] != 3 || width_[u] != w) return 0;
  return 1;
}

static unsigned int b_, t_;
void loom_launch2d(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, void (*fn)(void*), void* arg);
void loom_launch(unsigned int grid, unsigned int block, void (*fn)(void*), void* arg) { loom_launch2d(grid, 1, 1, block, 1, fn, arg); }
void loom_launch3(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int block, void (*fn)(void*), void* arg) {
  loom_launch2d(gx, gy, gz, block, 1, fn, arg);
}

// loom_launch2d runs a grid of gx·gy·gz blocks (x fastest) of bx·by
// threads (x fastest: thread t is (t % bx, t / bx)).
void loom_launch2d(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, void (*fn)(void*), void* arg) {
  const unsigned int block = bx * by;
  if (block > LOOM_MAX_THREADS) { fprintf(stderr, "emulator: block of %u threads\n", block); abort(); }
  if (!stacks) stacks = (char*)malloc((size_t)LOOM_MAX_THREADS * LOOM_STACK);
  body = fn; body_arg = arg; nthreads = block; cooperative = 1;
  gridDim.x = gx; gridDim.y = gy; gridDim.z = gz;
  blockDim.x = bx; blockDim.y = by; blockDim.z = 1;
  const unsigned long long blocks = (unsigned long long)gx * gy * gz;
  for (unsigned long long bi = 0; bi < blocks; ++bi) {
    b_ = (unsigned int)bi;
    blockIdx.x = (unsigned int)(bi % gx); blockIdx.y = (unsigned int)(bi / gx % gy); blockIdx.z = (unsigned int)(bi / gx / gy);
    for (t_ = 0; t_ < block; ++t_) state[t_] = 0;
    for (;;) {
      // Who runs this pass: threads not started, groups whose every lane
      // waits at their barrier, and, once every thread still running waits
      // at the block barrier, all of them.
      unsigned int live = 0, at_block = 0, returned = 0, runs = 0;
      for (unsigned int t = 0; t < block; ++t) {
        live += state[t] != 2;
        returned += state[t] == 2;
        at_block += state[t] == 1;
      }
      if (live == 0) break;
      for (unsigned int t = 0; t < block; ++t) {
        run_[t] = state[t] == 0 || (state[t] == 1 && at_block == live && returned == 0) ||
                  (state[t] == 3 && group_ready(t, block));
        runs += run_[t];
      }
      if (runs == 0) {
        fprintf(stderr, "emulator: block %u: %u threads returned, %u wait at the block barrier, %u at group barriers that cannot all be met\n",
                b_, returned, at_block, live - at_block);
        abort();
      }
      for (t_ = 0; t_ < block; ++t_) {
        if (!run_[t_]) continue;
        cur = t_; threadIdx.x = t_ % bx; threadIdx.y = t_ / bx; threadIdx.z = 0;
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
    }
  }
  cooperative = 0;
}
`

// Flags are the host compiler's flags: no contraction of multiplies and
// adds (the kernels' arithmetic is IEEE, operation by operation).
var Flags = []string{"-std=c++17", "-O1", "-w", "-fno-strict-aliasing", "-ffp-contract=off"}

// Compiler finds the host C++ compiler (g++, else c++). Its error begins
// "no host C++ compiler", which tests may take as a reason to skip.
func Compiler() (string, error) {
	cxx, err := exec.LookPath("g++")
	if err != nil {
		if cxx, err = exec.LookPath("c++"); err != nil {
			return "", fmt.Errorf("no host C++ compiler (g++ or c++): %w", err)
		}
	}
	return cxx, nil
}

// Run runs a command and returns its combined output on failure.
func Run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args[:min(len(args), 6)], " "), err, out)
	}
	return nil
}

// Helpers is C++ for a host program's main, after Shim and the kernels:
// the launches Runtime defines (loom_launch: a 1-D grid and block;
// loom_launch3: a 3-D grid; loom_launch2d: a 3-D grid of 2-D blocks) and
// loom_slurp, which reads a file into a new 256-byte-aligned buffer,
// loom_poisoned, a new 256-byte-aligned buffer of n bytes of 0xA5 (output
// a kernel never stores shows up), and loom_write, n bytes to a file (the
// program exits on an error).
const Helpers = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
void loom_launch(unsigned int grid, unsigned int block, void (*fn)(void*), void* arg);
void loom_launch3(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int block, void (*fn)(void*), void* arg);
void loom_launch2d(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, void (*fn)(void*), void* arg);
static void* loom_slurp(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) { perror(path); exit(2); }
  fseek(f, 0, SEEK_END); size_t n = (size_t)ftell(f); fseek(f, 0, SEEK_SET);
  void* p = aligned_alloc(256, (n + 256) / 256 * 256);
  if (n && fread(p, 1, n, f) != n) { perror(path); exit(2); }
  fclose(f);
  return p;
}
static void* loom_poisoned(size_t n) {
  void* p = aligned_alloc(256, (n + 256) / 256 * 256);
  if (!p) { perror("loom_poisoned"); exit(2); }
  memset(p, 0xA5, n);
  return p;
}
// loom_find(table, key): the row of a table of {name, …} rows whose name
// is key; a message and exit status 2 where there is none.
template <class T, size_t N>
static const T* loom_find(const T (&table)[N], const char* key) {
  for (size_t i = 0; i < N; ++i)
    if (strcmp(table[i].name, key) == 0) return &table[i];
  fprintf(stderr, "no entry %s\n", key);
  exit(2);
}
static void loom_write(const char* path, const void* p, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f || (n && fwrite(p, 1, n, f) != n)) { perror(path); exit(2); }
  fclose(f);
}
`

// Build compiles src (one translation unit: Shim, the kernels, Helpers and
// a main) with Runtime into a program in a new folder under dir (or the
// system's temporary folder) and returns the program's path; the caller
// removes its folder (filepath.Dir of the path) when done.
func Build(dir, src string) (string, error) {
	cxx, err := Compiler()
	if err != nil {
		return "", err
	}
	d, err := os.MkdirTemp(dir, "loom-emu-")
	if err != nil {
		return "", err
	}
	cc, rt := filepath.Join(d, "prog.cc"), filepath.Join(d, "runtime.cc")
	if err := os.WriteFile(cc, []byte(src), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(rt, []byte(Runtime), 0o644); err != nil {
		return "", err
	}
	prog := filepath.Join(d, "prog")
	if err := Run(cxx, append(append([]string{}, Flags...), "-U_FORTIFY_SOURCE", cc, rt, "-o", prog, "-lm")...); err != nil {
		os.RemoveAll(d)
		return "", err
	}
	return prog, nil
}

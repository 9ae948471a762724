package kernels

// emuRig runs test cases whose steps are indexing and window kernels (as
// the GPU rig does, gpu_test.go) on the host emulation: every launch Plan
// gives for AMD (gfx90a, waves of 64) is compiled with the host C++
// compiler behind internal/hostemu's shim, each translation unit in a
// namespace of its own, and one program per case runs the steps' launches
// over host buffers, the error flag read after each step as the executor
// reads it. Tests compare its output with the CPU executor's, bit for
// bit, as the GPU tests do on a device.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/internal/hostemu"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

var emuTarget = codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}

// emuRigMain interprets a script of buffer, launch and flag commands (one
// a line), the launches from the table Go writes in.
const emuRigMain = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef void (*loom_invoke)(void**);
struct loom_entry { const char* name; loom_invoke fn; };
extern const struct loom_entry loom_table[];
extern const unsigned long loom_entries;
void loom_launch2d(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, void (*fn)(void*), void* arg);
struct call { loom_invoke fn; void** args; };
static void body(void* p) { call* c = (call*)p; c->fn(c->args); }
enum { MAXBUF = 4096 };
static void* bufs[MAXBUF];
static size_t sizes[MAXBUF];
static void* xalloc(size_t n) {
  void* p = aligned_alloc(256, (n + 256) / 256 * 256);
  if (!p) { perror("alloc"); exit(2); }
  return p;
}
// Commands:
//   buf ID BYTES [FILE]   a buffer, poisoned (0xA5) or read from FILE
//   zero ID               the buffer's bytes set to 0
//   launch NAME GX GY GZ BX BY N ID…   (ID: buffer ids, in order)
//   dump ID FILE          the buffer's bytes to FILE
int main(int argc, char** argv) {
  if (argc != 2) return 2;
  FILE* s = fopen(argv[1], "r");
  if (!s) { perror(argv[1]); return 2; }
  char cmd[64], name[256], file[4096];
  while (fscanf(s, "%63s", cmd) == 1) {
    if (!strcmp(cmd, "buf")) {
      int id; size_t n;
      if (fscanf(s, "%d %zu", &id, &n) != 2) return 3;
      bufs[id] = xalloc(n); sizes[id] = n;
      memset(bufs[id], 0xA5, n);
      int c = fgetc(s);
      if (c == ' ' && fscanf(s, "%4095s", file) == 1) {
        FILE* f = fopen(file, "rb"); // the buffer's bytes, or fewer (buffers have 16 at least)
        if (!f) { perror(file); return 2; }
        fread(bufs[id], 1, n, f);
        if (ferror(f)) { perror(file); return 2; }
        fclose(f);
      }
    } else if (!strcmp(cmd, "zero")) {
      int id;
      if (fscanf(s, "%d", &id) != 1) return 3;
      memset(bufs[id], 0, sizes[id]);
    } else if (!strcmp(cmd, "launch")) {
      unsigned int gx, gy, gz, bx, by; int n;
      if (fscanf(s, "%255s %u %u %u %u %u %d", name, &gx, &gy, &gz, &bx, &by, &n) != 7) return 3;
      void** args = (void**)malloc(sizeof(void*) * (n + 1));
      for (int i = 0; i < n; ++i) {
        int id;
        if (fscanf(s, "%d", &id) != 1) return 3;
        args[i] = bufs[id];
      }
      loom_invoke fn = 0;
      for (unsigned long i = 0; i < loom_entries; ++i)
        if (!strcmp(loom_table[i].name, name)) fn = loom_table[i].fn;
      if (!fn) { fprintf(stderr, "no kernel %s\n", name); return 2; }
      call c = {fn, args};
      loom_launch2d(gx, gy, gz, bx, by, body, &c);
      free(args);
    } else if (!strcmp(cmd, "dump")) {
      int id;
      if (fscanf(s, "%d %4095s", &id, file) != 2) return 3;
      FILE* f = fopen(file, "wb");
      if (!f || (sizes[id] && fwrite(bufs[id], 1, sizes[id], f) != sizes[id])) { perror(file); return 2; }
      fclose(f);
    } else {
      fprintf(stderr, "bad command %s\n", cmd);
      return 3;
    }
  }
  return 0;
}
`

// emuInvoker calls an entry with its pointer arguments from an array (every
// Launch argument is a device pointer).
const emuInvoker = `
#include <utility>
template <class... P, size_t... I>
static void loom_call_(void (*f)(P...), void** a, std::index_sequence<I...>) { f(((P)a[I])...); }
template <class... P>
static void loom_call(void (*f)(P...), void** a) { loom_call_(f, a, std::index_sequence_for<P...>{}); }
`

// dynamicShared turns a kernel's dynamic shared memory into a static array
// as large as any launch asks for.
var dynamicShared = regexp.MustCompile(`extern\s+__shared__\s+([\w ]+?)\s+(\w+)\s*\[\s*\]\s*;`)

type emuRig struct {
	prog string
	dir  string
}

// buildEmuRig compiles every launch of the cases' indexing and window steps
// into one program.
func buildEmuRig(t *testing.T, cases []testCase) *emuRig {
	t.Helper()
	cxx, err := hostemu.Compiler()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but there is no host C++ compiler: %v", err)
		}
		t.Skipf("%v: emulation skipped", err)
	}
	dir := t.TempDir()
	codes := map[string][]string{} // code → its entries
	var order []string
	for _, tc := range cases {
		for _, s := range tc.prog.Plan().Steps {
			ls, _, err := Plan(s.Kernel, emuTarget)
			if err != nil {
				t.Fatalf("%s: Plan(%s): %v", tc.name, s.Kernel.Name, err)
			}
			for _, l := range ls {
				if l.Block[2] > 1 {
					t.Fatalf("%s: %s: a block of %v threads (the emulator takes 1- and 2-D blocks)", tc.name, l.Name, l.Block)
				}
				if _, ok := codes[l.Code]; !ok {
					order = append(order, l.Code)
				}
				if !slices.Contains(codes[l.Code], l.Name) {
					codes[l.Code] = append(codes[l.Code], l.Name)
				}
			}
		}
	}
	units := max(1, min(runtime.NumCPU(), len(order)))
	srcs := make([]strings.Builder, units)
	var table strings.Builder
	for i, code := range order {
		b := &srcs[i%units]
		if b.Len() == 0 {
			b.WriteString(hostemu.Shim)
			b.WriteString(emuInvoker)
			b.WriteString("typedef void (*loom_invoke)(void**);\n")
		}
		code = dynamicShared.ReplaceAllString(code, "static $1 $2[(256 << 10) / sizeof($1)];")
		fmt.Fprintf(b, "namespace k%d {\n%s\n}\n", i, code)
		for _, m := range defineRE.FindAllStringSubmatch(code, -1) {
			fmt.Fprintf(b, "#undef %s\n", m[1])
		}
		for _, name := range codes[order[i]] {
			fmt.Fprintf(b, "extern \"C\" void run_%s(void** a) { loom_call(k%d::%s, a); }\n", name, i, name)
			fmt.Fprintf(&table, "extern \"C\" void run_%s(void**);\n", name)
		}
	}
	table.WriteString("typedef void (*loom_invoke)(void**);\nstruct loom_entry { const char* name; loom_invoke fn; };\nextern const struct loom_entry loom_table[] = {\n")
	n := 0
	for _, code := range order {
		for _, name := range codes[code] {
			fmt.Fprintf(&table, "  {\"%s\", run_%s},\n", name, name)
			n++
		}
	}
	fmt.Fprintf(&table, "};\nextern const unsigned long loom_entries = %d;\n", n)
	objs := make([]string, units)
	errs := make([]error, units)
	var wg sync.WaitGroup
	for u := range units {
		cc := filepath.Join(dir, fmt.Sprintf("unit%d.cc", u))
		objs[u] = strings.TrimSuffix(cc, ".cc") + ".o"
		if err := os.WriteFile(cc, []byte(srcs[u].String()), 0o644); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[u] = hostemu.Run(cxx, append(append([]string{}, hostemu.Flags...), "-c", cc, "-o", objs[u])...)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("compiling the kernels for the host: %v", firstLines(err.Error(), 30))
		}
	}
	files := map[string]string{"main.cc": emuRigMain, "table.cc": table.String(), "runtime.cc": hostemu.Runtime}
	var all []string
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		all = append(all, p)
	}
	prog := filepath.Join(dir, "emu")
	args := append(append(append([]string{}, hostemu.Flags...), "-U_FORTIFY_SOURCE", "-o", prog), all...)
	if err := hostemu.Run(cxx, append(append(args, objs...), "-lm")...); err != nil {
		t.Fatalf("linking the emulator: %v", firstLines(err.Error(), 30))
	}
	return &emuRig{prog: prog, dir: dir}
}

// run runs tc's steps on the emulator and returns its output's bytes, or
// the error a step's flag decodes to.
func (e *emuRig) run(tc testCase) ([]byte, error) {
	dir, err := os.MkdirTemp(e.dir, "run")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	p := tc.prog.Plan()
	var script strings.Builder
	inputs := map[int]string{}
	for _, b := range p.Inputs {
		f := filepath.Join(dir, fmt.Sprint("in", b.ID))
		if err := os.WriteFile(f, tc.inputs[b.Name].Bytes(), 0o644); err != nil {
			return nil, err
		}
		inputs[b.ID] = f
	}
	for _, b := range p.Buffers {
		fmt.Fprintf(&script, "buf %d %d", b.ID, max(b.Bytes(), 16))
		if f, ok := inputs[b.ID]; ok && b.Bytes() > 0 {
			fmt.Fprintf(&script, " %s", f)
		}
		script.WriteString("\n")
	}
	// Buffer ids past the plan's: the error flag, the counters, then each
	// step's scratch.
	flag, counters := len(p.Buffers), len(p.Buffers)+1
	fmt.Fprintf(&script, "buf %d %d\nbuf %d %d\nzero %d\n", flag, 8*ErrorFlagWords, counters, 4*CounterWords, counters)
	next := counters + 1
	var flagFiles []string
	var steps []*plan.Kernel
	for si, s := range p.Steps {
		ls, ss, err := Plan(s.Kernel, emuTarget)
		if err != nil {
			return nil, err
		}
		scratch := make([]int, len(ss))
		for i, sb := range ss {
			scratch[i] = next
			fmt.Fprintf(&script, "buf %d %d\n", next, max(sb.Bytes, 16))
			next++
		}
		fmt.Fprintf(&script, "zero %d\n", flag)
		for _, l := range ls {
			fmt.Fprintf(&script, "launch %s %d %d %d %d %d %d", l.Name, l.Grid[0], l.Grid[1], l.Grid[2], l.Block[0], max(l.Block[1], 1), len(l.Args))
			for _, a := range l.Args {
				id := 0
				switch a.Kind {
				case Operand:
					id = s.Kernel.Ins[a.Index].Buf.ID
				case Output:
					id = s.Kernel.Out.ID
				case ErrorFlag:
					id = flag
				case Scratch:
					id = scratch[a.Index]
				case Counters:
					id = counters
				case AheadInPlace:
					// Only NVIDIA's warp form of the attention takes it.
					return nil, fmt.Errorf("launch %s: an %v argument on %v", l.Name, a.Kind, emuTarget)
				}
				fmt.Fprintf(&script, " %d", id)
			}
			script.WriteString("\n")
		}
		f := filepath.Join(dir, fmt.Sprint("flag", si))
		fmt.Fprintf(&script, "dump %d %s\n", flag, f)
		flagFiles = append(flagFiles, f)
		steps = append(steps, s.Kernel)
	}
	out := filepath.Join(dir, "out")
	fmt.Fprintf(&script, "dump %d %s\n", p.Outputs[0].ID, out)
	sp := filepath.Join(dir, "script")
	if err := os.WriteFile(sp, []byte(script.String()), 0o644); err != nil {
		return nil, err
	}
	if err := hostemu.Run(e.prog, sp); err != nil {
		return nil, err
	}
	for i, f := range flagFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var words [ErrorFlagWords]int64
		for w := range words {
			words[w] = int64(binary.LittleEndian.Uint64(b[8*w:]))
		}
		if err := DecodeError(steps[i].Instrs[0].Node.Op.String(), words); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	return b[:p.Outputs[0].Bytes()], nil
}

// TestEmulateOps is TestGPUOps on the host emulation: every indexing op ×
// value dtype × ids dtype, on strided/offset views and contiguous
// operands, with sentinels and duplicate ids, bit for bit against the CPU.
func TestEmulateOps(t *testing.T) {
	cases := opsCases(t)
	checkEmu(t, buildEmuRig(t, cases), cases)
}

// checkEmu runs the cases on the emulator and on the CPU and compares
// their outputs bit for bit (NaN payloads aside where a case says so).
func checkEmu(t *testing.T, e *emuRig, cases []testCase) {
	t.Helper()
	for _, tc := range cases {
		want, err := runCPU(tc)
		if err != nil {
			t.Fatalf("%s: CPU: %v", tc.name, err)
		}
		got, err := e.run(tc)
		if err != nil {
			t.Fatalf("%s: emulator: %v", tc.name, firstLines(err.Error(), 20))
		}
		if diff := sameBits(tc.prog.Plan().Outputs[0].DType, got, want, tc.addOp); diff != "" {
			t.Errorf("%s: emulated kernels differ from the CPU: %s", tc.name, diff)
		}
	}
	t.Logf("%d cases compared", len(cases))
}

// TestEmulateBadIDs is TestGPUBadIDs on the host emulation: a bad id sets
// the step's flag, and the decoded error names the op, the id and its
// position.
func TestEmulateBadIDs(t *testing.T) {
	var cases []testCase
	var bads []float64
	for _, op := range indexOps {
		for _, idt := range idsDTypes {
			tc := caseFor(t, op, dtype.F32, idt, 1, 7)
			bad := 7.0 // the indexed dim has size 7
			if idt == dtype.I64 {
				bad = -3
			}
			tc.name = fmt.Sprintf("%v/%v", op, idt)
			cases, bads = append(cases, tc), append(bads, bad)
		}
	}
	e := buildEmuRig(t, cases)
	for i, tc := range cases {
		ids := tc.inputs["ids"]
		pos := ids.Numel() / 2
		ids.SetFloat64(pos, bads[i])
		op := tc.prog.Plan().Steps[len(tc.prog.Plan().Steps)-1].Kernel.Instrs[0].Node.Op
		_, err := e.run(tc)
		want := fmt.Sprintf("%v: id %d at position %d ", op, int64(bads[i]), pos)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: emulator error %v, want prefix %q", tc.name, err, want)
		}
	}
}

// TestEmulateCumsum is TestGPUCumsum's cases on the host emulation,
// then every scan kernel forced on shapes another would take.
func TestEmulateCumsum(t *testing.T) {
	cases := cumsumCases(t, true)
	checkEmu(t, buildEmuRig(t, cases), cases)
	for _, k := range csModeNames {
		t.Setenv(cumsumEnv, k)
		forced := forcedCumsumCases(t, k)
		checkEmu(t, buildEmuRig(t, forced), forced)
	}
}

// TestEmulateArgsort is TestGPUArgsort's cases on the host emulation, but
// for its longest rows (100,000 and 30,000 values: minutes on the host):
// rows of 1 to 4097 (the short path and the tiles with their merges), both
// orders, contiguous and strided, every dtype, many short rows a block.
func TestEmulateArgsort(t *testing.T) {
	seed := uint64(500)
	var cases []testCase
	for _, n := range []int{1, 2, 1023, 1024, 1025, 4097} {
		for _, desc := range []bool{false, true} {
			for _, strided := range []bool{false, true} {
				cases = append(cases, argsortCase(t, dtype.F32, 3, n, desc, strided, seed))
				seed++
			}
		}
	}
	for _, dt := range valueDTypes {
		for _, n := range []int{777, 2049} {
			cases = append(cases, argsortCase(t, dt, 3, n, n == 777, false, seed))
			seed++
		}
	}
	cases = append(cases, argsortCase(t, dtype.I64, 1000, 5, true, true, seed))
	cases = append(cases, argsortCase(t, dtype.F16, 777, 33, false, false, seed+1))
	checkEmu(t, buildEmuRig(t, cases), cases)
}

// TestEmulateAttention runs CausalAttention's kernels (the part launch over
// rows and key splits, then the merge, or the folded form where the last
// split's block merges) on the host emulation against the CPU executor:
// a 1B llama's decode step (32 query heads over 8 key heads, head dim 64,
// 1,024 cached keys; the shape W-attn times), a prompt's causal attention
// (start 0), a few queries over a cache with some keys beyond the window,
// f32, f16 and bf16, and a batch of two with different starts. The float
// sums run in other orders on the two, so values agree to within float32
// rounding (and the output's own for f16 and bf16).
func TestEmulateAttention(t *testing.T) {
	type shape struct{ b, h, kv, t, s, d, dv int }
	var cases []testCase
	var starts [][]uint32
	seed := uint64(1300)
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, c := range []struct {
			sh    shape
			start []uint32
		}{
			{shape{1, 32, 8, 1, 1024, 64, 64}, []uint32{1023}},
			{shape{1, 4, 2, 17, 17, 32, 32}, []uint32{0}},
			{shape{2, 6, 3, 5, 300, 16, 24}, []uint32{100, 290}},
		} {
			b := newBuilder(seed)
			seed++
			sh := c.sh
			q := b.input("q", dt, sh.b, sh.h, sh.t, sh.d)
			k := b.input("k", dt, sh.b, sh.kv, sh.s, sh.d)
			v := b.input("v", dt, sh.b, sh.kv, sh.s, sh.dv)
			st := b.g.Input("start", dtype.U32, sh.b)
			y := graph.CausalAttention(q, k, v, st, 1/math.Sqrt(float64(sh.d)))
			sv := make([]float64, sh.b)
			for i, x := range c.start {
				sv[i] = float64(x)
			}
			stt, err := tensor.FromFloat64s(dtype.U32, sv, sh.b)
			if err != nil {
				t.Fatal(err)
			}
			b.inputs["start"] = stt
			for _, name := range []string{"q", "k", "v"} { // finite values: no NaN or Inf special cases here
				in := b.inputs[name]
				for i := range in.Numel() {
					in.SetFloat64(i, b.rng.Float64()*2-1)
				}
			}
			tc := testCase{name: fmt.Sprintf("attention/%v/%+v", dt, sh), prog: b.compile(t, y), inputs: b.inputs}
			cases, starts = append(cases, tc), append(starts, c.start)
		}
	}
	e := buildEmuRig(t, cases)
	for _, tc := range cases {
		cpuOut, err := tc.prog.Run(context.Background(), cpu.New(), tc.inputs)
		if err != nil {
			t.Fatalf("%s: CPU: %v", tc.name, err)
		}
		want := cpuOut["out"].Float64s()
		raw, err := e.run(tc)
		if err != nil {
			t.Fatalf("%s: emulator: %v", tc.name, firstLines(err.Error(), 20))
		}
		ob := tc.prog.Plan().Outputs[0]
		half := map[dtype.DType]float64{dtype.F32: 0, dtype.F16: 1.0 / 2048, dtype.BF16: 1.0 / 256}[ob.DType]
		for i, g := range emuValues(t, ob.DType, raw) {
			if tol := 1e-5 + 2*half*math.Abs(want[i]); math.IsNaN(g) || math.Abs(g-want[i]) > tol {
				t.Fatalf("%s: element %d: %v, CPU %v (tolerance %.3g)", tc.name, i, g, want[i], tol)
			}
		}
	}
	t.Logf("%d cases compared", len(cases))
}

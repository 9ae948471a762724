package kernels

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"golang.org/x/sync/errgroup"
)

// compileOptions match the executor's: no contraction into fma.
func compileOptions(platform string) []string {
	if platform == hip.NVIDIA {
		return []string{"--fmad=false"}
	}
	return []string{"-ffp-contract=off"}
}

// allKernels lists one planned kernel per op × value dtype × ids dtype
// (where the op takes ids), plus argsort of every dtype in both orders on a
// short row and a long (tiled and merged) row, and the window kernels
// (pools, upsampling) of every dtype and parameter kind.
func allKernels(t *testing.T) []testCase {
	var cases []testCase
	seed := uint64(1)
	for _, op := range []ir.Op{ir.OpIndexSelect, ir.OpGather, ir.OpScatter, ir.OpScatterAdd, ir.OpIndexAdd, ir.OpCat, ir.OpSliceAssign} {
		for _, vdt := range valueDTypes {
			idts := idsDTypes
			if op.Info().IDArg() < 0 {
				idts = idts[:1]
			}
			for _, idt := range idts {
				cases = append(cases, caseFor(t, op, vdt, idt, 0, seed))
				seed++
			}
		}
	}
	for _, dt := range valueDTypes {
		for _, desc := range []bool{false, true} {
			cases = append(cases, argsortCase(t, dt, 3, 1000, desc, false, seed))
			cases = append(cases, argsortCase(t, dt, 2, 10000, desc, true, seed+1))
			seed += 2
		}
	}
	cases = append(cases, windowCases(t, false)...)
	cases = append(cases, wideWindowCases(t)...)
	cases = append(cases, cumsumCases(t, false)...) // scan_test.go
	return append(cases, wideCases(t)...)
}

// wideCases are graphs (no data) whose tensors reach 2^31 elements, so their
// kernels use 64-bit index math.
func wideCases(t *testing.T) []testCase {
	t.Helper()
	const big = 1 << 30
	var cases []testCase
	add := func(name string, build func(g *graph.Graph) *graph.Tensor) {
		g := graph.New()
		g.Output("out", build(g))
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cases = append(cases, testCase{name: "wide/" + name, prog: p})
	}
	add("index_select", func(g *graph.Graph) *graph.Tensor {
		return g.Input("x", dtype.U8, 3, big).IndexSelect(g.Input("ids", dtype.U32, 2), 0)
	})
	add("gather", func(g *graph.Graph) *graph.Tensor {
		return g.Input("x", dtype.F64, 3, big).T().Gather(g.Input("ids", dtype.I64, big, 2), 1)
	})
	add("scatter_add", func(g *graph.Graph) *graph.Tensor {
		return g.Input("x", dtype.F16, 3, big).ScatterAdd(g.Input("ids", dtype.U8, 1, big), g.Input("src", dtype.F16, 1, big), 0)
	})
	add("index_add", func(g *graph.Graph) *graph.Tensor {
		return g.Input("x", dtype.I64, big, 3).IndexAdd(g.Input("ids", dtype.U32, 2), g.Input("src", dtype.I64, big, 2), 1)
	})
	add("cat", func(g *graph.Graph) *graph.Tensor {
		return graph.Cat(0, g.Input("a", dtype.F32, big, 2), g.Input("b", dtype.F32, 1, 2))
	})
	add("slice_assign", func(g *graph.Graph) *graph.Tensor {
		return g.Input("x", dtype.BF16, 3, big).SliceAssign(g.Input("src", dtype.BF16, 1, big), 0, 1)
	})
	add("argsort short", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.U8, 1<<21, 1024).Argsort(false) })
	add("argsort long", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.I64, 1<<14, 1<<17).Argsort(true) })
	return cases
}

// TestWideIndex: kernels over 2^31 elements use 64-bit index math, the
// others 32-bit.
func TestWideIndex(t *testing.T) {
	amd := codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}
	for _, tc := range append(wideCases(t), caseFor(t, ir.OpGather, dtype.F32, dtype.U8, 0, 1)) {
		ks := indexKernels(t, tc.prog.Plan())
		ls, _, err := Plan(ks[0], amd)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wide := strings.Contains(ls[0].Code, "typedef unsigned long long loom_idx;")
		if wide != strings.HasPrefix(tc.name, "wide/") {
			t.Errorf("%s: 64-bit index math = %v", tc.name, wide)
		}
	}
}

// compiled is one source compiled for one arch.
type compileJob struct {
	name    string
	code    string
	entries []string
}

// jobs plans every kernel for target and groups launches by source.
func jobs(t *testing.T, cases []testCase, target codegen.Target) []compileJob {
	t.Helper()
	var out []compileJob
	index := map[string]int{}
	for _, tc := range cases {
		ks := indexKernels(t, tc.prog.Plan())
		if len(ks) != 1 {
			t.Fatalf("%s: %d indexing or window kernels, want 1", tc.name, len(ks))
		}
		ls, _, err := Plan(ks[0], target)
		if err != nil {
			t.Fatalf("%s: Plan: %v", tc.name, err)
		}
		if len(ls) == 0 {
			t.Fatalf("%s: no launches", tc.name)
		}
		for _, l := range ls {
			i, ok := index[l.Code]
			if !ok {
				i = len(out)
				index[l.Code] = i
				out = append(out, compileJob{name: tc.name})
				out[i].code = l.Code
			}
			if !slices.Contains(out[i].entries, l.Name) {
				out[i].entries = append(out[i].entries, l.Name)
			}
		}
	}
	return out
}

func amdCompiler(t *testing.T) hip.Compiler {
	t.Helper()
	c, err := hip.LoadCompiler(hip.AMD)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but hiprtc is unavailable: %v", err)
		}
		t.Skipf("hiprtc unavailable (install libamdhip64-5), AMD compile test skipped: %v", err)
	}
	return c
}

// TestCompileAMD compiles every kernel with hiprtc for a wave-64 (gfx90a)
// and a wave-32 (gfx1030) ISA.
func TestCompileAMD(t *testing.T) {
	c := amdCompiler(t)
	cases := allKernels(t)
	for _, arch := range []string{"gfx90a", "gfx1030"} {
		t.Run(arch, func(t *testing.T) {
			target := codegen.Target{Platform: codegen.AMD, Arch: arch}
			js := jobs(t, cases, target)
			start := time.Now()
			res := compileJobs(c, js, arch)
			for i, j := range js {
				checkCompiled(t, j, res[i], arch, elf.EM_AMDGPU, true)
			}
			t.Logf("%s: %d sources compiled in %v", arch, len(js), time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestCompileNVIDIA compiles every kernel with NVRTC for sm_90 where NVRTC
// loads (the GPU machine), else skips.
func TestCompileNVIDIA(t *testing.T) {
	c, err := hip.LoadCompiler(hip.NVIDIA)
	if err != nil {
		t.Skipf("NVRTC unavailable, NVIDIA compile test skipped: %v", err)
	}
	cases := allKernels(t)
	target := codegen.Target{Platform: codegen.NVIDIA, Arch: "sm_90"}
	js := jobs(t, cases, target)
	start := time.Now()
	res := compileJobs(c, js, "sm_90")
	for i, j := range js {
		checkCompiled(t, j, res[i], "sm_90", elf.EM_CUDA, false)
	}
	t.Logf("sm_90: %d sources compiled in %v", len(js), time.Since(start).Round(time.Millisecond))
}

// compiled is the result of compiling a job.
type compiled struct {
	code []byte
	log  string
	err  error
}

// compileJobs compiles the jobs for arch, runtime.NumCPU() at a time, and
// returns their results in order.
func compileJobs(c hip.Compiler, js []compileJob, arch string) []compiled {
	res := make([]compiled, len(js))
	var g errgroup.Group
	g.SetLimit(runtime.NumCPU())
	for i, j := range js {
		g.Go(func() error {
			r := &res[i]
			r.code, r.log, r.err = c.Compile(j.code, j.entries[0]+".hip", arch, compileOptions(c.Platform()))
			return nil
		})
	}
	g.Wait()
	return res
}

// checkCompiled checks a job's compile: no error, an ELF code object for
// machine with every entry point (and, with kd, its kernel descriptor);
// it keeps the code object in compileCache for the GPU tests.
func checkCompiled(t *testing.T, j compileJob, r compiled, arch string, machine elf.Machine, kd bool) {
	t.Helper()
	code, log, err := r.code, r.log, r.err
	if err != nil {
		t.Errorf("%s (%s): %v", j.name, arch, firstLines(err.Error(), 30))
		return
	}
	if strings.Contains(log, "warning") {
		t.Logf("%s (%s) log: %s", j.name, arch, firstLines(log, 10))
	}
	compileCache.Lock()
	compileCache.m[arch+"\x00"+j.code] = code
	compileCache.Unlock()
	if !bytes.HasPrefix(code, []byte("\x7fELF")) {
		t.Errorf("%s (%s): code object does not start with ELF magic: % x", j.name, arch, code[:min(len(code), 8)])
		return
	}
	f, err := elf.NewFile(bytes.NewReader(code))
	if err != nil {
		t.Errorf("%s (%s): parse ELF: %v", j.name, arch, err)
		return
	}
	if f.Machine != machine {
		t.Errorf("%s (%s): ELF machine %v, want %v", j.name, arch, f.Machine, machine)
	}
	syms, err := f.Symbols()
	if err != nil {
		t.Errorf("%s (%s): ELF symbols: %v", j.name, arch, err)
		return
	}
	have := map[string]bool{}
	for _, s := range syms {
		have[s.Name] = true
	}
	for _, e := range j.entries {
		if !have[e] || (kd && !have[e+".kd"]) {
			t.Errorf("%s (%s): code object lacks entry %q", j.name, arch, e)
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("… (%d more lines)", len(lines)-n))
	}
	return strings.Join(lines, "\n")
}

// TestPlanShapes checks launch descriptions without compiling.
func TestPlanShapes(t *testing.T) {
	amd := codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}
	for _, tc := range []struct {
		name      string
		tc        testCase
		launches  int
		scratches int
	}{
		{"index_select", caseFor(t, ir.OpIndexSelect, dtype.F32, dtype.U32, 0, 1), 1, 0},
		{"scatter f16", caseFor(t, ir.OpScatter, dtype.F16, dtype.I64, 0, 1), 2, 0},
		{"scatter_add f32", caseFor(t, ir.OpScatterAdd, dtype.F32, dtype.I64, 0, 1), 2, 0},
		{"scatter_add bf16", caseFor(t, ir.OpScatterAdd, dtype.BF16, dtype.U8, 0, 1), 3, 1},
		{"index_add f16", caseFor(t, ir.OpIndexAdd, dtype.F16, dtype.U8, 0, 1), 3, 1},
		{"argsort short", argsortCase(t, dtype.F32, 4, 1024, false, false, 1), 1, 0},
		// 100000 in tiles of 4096: 25 tiles, merges at 4096 … 65536 (5 passes).
		{"argsort long", argsortCase(t, dtype.F32, 2, 100000, true, false, 1), 6, 2},
		// 64-bit keys: tiles of 2048 → merges at 2048 … 4096.
		{"argsort long f64", argsortCase(t, dtype.F64, 2, 5000, false, false, 1), 3, 2},
		{"argsort two tiles", argsortCase(t, dtype.U8, 2, 8192, false, false, 1), 2, 1},
	} {
		ks := indexKernels(t, tc.tc.prog.Plan())
		ls, ss, err := Plan(ks[0], amd)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(ls) != tc.launches || len(ss) != tc.scratches {
			t.Errorf("%s: %d launches, %d scratch buffers; want %d, %d", tc.name, len(ls), len(ss), tc.launches, tc.scratches)
		}
		for _, l := range ls {
			if l.Code != ls[0].Code || !strings.Contains(l.Code, "void __launch_bounds__") || !strings.Contains(l.Code, l.Name+"(") {
				t.Errorf("%s: launch %s: entry not found in the shared source", tc.name, l.Name)
			}
			for _, a := range l.Args {
				if a.Kind == Scratch && a.Index >= len(ss) {
					t.Errorf("%s: launch %s uses scratch %d of %d", tc.name, l.Name, a.Index, len(ss))
				}
			}
		}
	}
}

func TestDecodeError(t *testing.T) {
	if err := DecodeError("gather", [4]int64{}); err != nil {
		t.Errorf("zero flag: %v", err)
	}
	err := DecodeError("index_select", [4]int64{255, 9, 3, 7})
	want := "index_select: id 9 at position 3 is out of range [0, 7) (the sentinel 255 is the only id allowed outside it)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	err = DecodeError("scatter", [4]int64{int64(dtype.I64.MaxID()), -2, 0, 7})
	if err == nil || !strings.Contains(err.Error(), "id -2 at position 0") || !strings.Contains(err.Error(), "9223372036854775807") {
		t.Errorf("got %v", err)
	}
}

// TestNames: kernel names follow op, dtypes and source.
func TestNames(t *testing.T) {
	amd := codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}
	name := func(tc testCase) string {
		ks := indexKernels(t, tc.prog.Plan())
		ls, _, err := Plan(ks[0], amd)
		if err != nil {
			t.Fatal(err)
		}
		return ls[0].Name
	}
	a := name(caseFor(t, ir.OpGather, dtype.F32, dtype.U8, 0, 1))
	b := name(caseFor(t, ir.OpGather, dtype.F32, dtype.U8, 0, 2)) // same graph, other data
	c := name(caseFor(t, ir.OpGather, dtype.F32, dtype.U8, 1, 1)) // other layout
	if a != b || a == c || !strings.HasPrefix(a, "loom_gather_f32_u8_") || !strings.HasPrefix(c, "loom_gather_f32_u8_") {
		t.Errorf("names %q %q %q", a, b, c)
	}
}

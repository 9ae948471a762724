package rocm

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/workloads"
)

// TestCasesOnCPU builds every comparison case and runs it on the CPU: the
// case list itself is sound before any GPU time is spent on it.
func TestCasesOnCPU(t *testing.T) {
	e := cpu.New()
	for _, c := range opCases() {
		for _, fused := range []bool{true, false} {
			g, p, err := buildCase(c, fused)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			in, err := genInputs(g, 1, c.workload != nil)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if _, err := p.Run(context.Background(), e, in); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
	}
	t.Logf("%d cases", len(opCases()))
}

// TestCompileCases generates and compiles the cases' kernels without a
// device (hiprtc for gfx90a here). By default it compiles the workloads and
// a few cases; LOOM_COMPILE_ALL=1 compiles every kernel of every case.
func TestCompileCases(t *testing.T) {
	e := compileOnly(t)
	all := os.Getenv("LOOM_COMPILE_ALL") == "1"
	t.Logf("compiler %s for %s, all=%v", e.comp.Version(), e.info.Arch, all)
	dump := t.TempDir()
	t.Setenv(DumpEnv, dump)
	n := 0
	start := time.Now()
	for i, c := range opCases() {
		if !all && c.workload == nil && i%40 != 0 {
			continue
		}
		for _, fused := range []bool{true, false} {
			_, p, err := buildCase(c, fused)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range p.Plan().Steps {
				if s.Kernel.Numel() == 0 {
					continue
				}
				src, obj, err := e.compileKernel(s.Kernel)
				if err != nil {
					t.Errorf("%s: %v", c.name, err)
					continue
				}
				n++
				for _, f := range []string{src.Name + ".hip", src.Name + ".log"} {
					if _, err := os.Stat(dump + "/" + f); err != nil {
						t.Errorf("LOOM_DUMP: %v", err)
					}
				}
				if len(obj.code) == 0 {
					t.Errorf("%s: empty code object", src.Name)
				}
			}
		}
	}
	st := e.codes.stats()
	t.Logf("%d kernels (%d compiles, %d memory hits) in %v", n, st.Compiles, st.MemHits, time.Since(start))
}

// TestKernelCacheTimings measures the three paths of the code cache with the
// real compiler (the GPU's, else hiprtc): first compile of fused kernels,
// disk hit, memory hit; and checks that a compile error shows the source and
// the compiler log.
func TestKernelCacheTimings(t *testing.T) {
	comp, arch, platform := realCompiler(t)
	target := codegen.Target{Platform: platform, Arch: arch}
	opts := compileOptions(platform, comp.Version())
	dir := t.TempDir()
	c := newCodeCache()
	var firsts []string
	var src *codegen.Source
	for _, id := range []string{"W1", "W2", "W6"} {
		w, _ := workloads.ByID(id)
		g, err := w.Build(workloads.Size{Elems: 1 << 24, Rows: 2048, Cols: 8192})
		if err != nil {
			t.Fatal(err)
		}
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Plan().Steps) != 1 {
			t.Fatalf("%s fused into %d kernels", id, len(p.Plan().Steps))
		}
		s, err := codegen.Elementwise(p.Plan().Steps[0].Kernel, target)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		_, how, err := c.get(comp, dir, s.Code, s.Name, arch, opts)
		d := time.Since(t0)
		if err != nil || how != fromCompile {
			t.Fatalf("%s: %s, %v", id, how, err)
		}
		firsts = append(firsts, id+" "+d.Round(time.Millisecond/10).String())
		if src == nil {
			src = s
		}
	}
	// Memory hits: hash the source, look it up.
	const memN = 20000
	t0 := time.Now()
	for range memN {
		if _, how, _ := c.get(comp, dir, src.Code, src.Name, arch, opts); how != fromMemory {
			t.Fatalf("memory hit expected, got %s", how)
		}
	}
	mem := time.Since(t0) / memN
	// Disk hits: a fresh in-memory cache each time (a new process).
	const diskN = 50
	t0 = time.Now()
	for range diskN {
		if _, how, _ := newCodeCache().get(comp, dir, src.Code, src.Name, arch, opts); how != fromDisk {
			t.Fatalf("disk hit expected, got %s", how)
		}
	}
	disk := time.Since(t0) / diskN
	t.Logf("%s for %s, source %d bytes: first compile %s (target < 150ms); disk hit %v (target < 5ms); memory hit %v (target < 10µs)",
		comp.Version(), arch, len(src.Code), strings.Join(firsts, ", "), disk.Round(time.Microsecond), mem)
	if mem > 10*time.Microsecond {
		t.Logf("SLOW: memory hit %v exceeds 10µs", mem)
	}
	if disk > 5*time.Millisecond {
		t.Logf("SLOW: disk hit %v exceeds 5ms", disk)
	}

	// A compile error shows the numbered source and the compiler's log.
	bad := "extern \"C\" __global__ void broken(float* out) {\n    out[0] = undeclared_thing + 1.0f;\n}\n"
	_, _, err := c.get(comp, dir, bad, "broken", arch, opts)
	if err == nil {
		t.Fatal("broken source compiled")
	}
	t.Logf("compile error:\n%v", err)
	for _, want := range []string{"compiling kernel broken for " + arch, "   2      out[0] = undeclared_thing + 1.0f;", "--- compiler log ---", "undeclared_thing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("compile error lacks %q", want)
		}
	}
	if i := strings.Index(err.Error(), "--- compiler log ---"); i < 0 || !strings.Contains(err.Error()[i:], "undeclared_thing") {
		t.Errorf("the log section does not show the compiler's message")
	}
}

func benchSource(b testing.TB) (*Executor, *codegen.Source) {
	e := compileOnly(b)
	w, _ := workloads.ByID("W2")
	g, _ := w.Build(workloads.Size{Elems: 1 << 24})
	p, err := g.Compile(graph.Options{})
	if err != nil {
		b.Fatal(err)
	}
	src, err := codegen.Elementwise(p.Plan().Steps[0].Kernel, e.target)
	if err != nil {
		b.Fatal(err)
	}
	return e, src
}

// BenchmarkKernelCompile: first compile of the fused W2 kernel (no cache).
func BenchmarkKernelCompile(b *testing.B) {
	e, src := benchSource(b)
	for b.Loop() {
		if _, how, err := newCodeCache().get(e.comp, "", src.Code, src.Name, e.info.Arch, e.opts); err != nil || how != fromCompile {
			b.Fatal(how, err)
		}
	}
}

// BenchmarkKernelDiskHit: a fresh process finding W2 in the disk cache.
func BenchmarkKernelDiskHit(b *testing.B) {
	e, src := benchSource(b)
	dir := b.TempDir()
	newCodeCache().get(e.comp, dir, src.Code, src.Name, e.info.Arch, e.opts)
	for b.Loop() {
		if _, how, err := newCodeCache().get(e.comp, dir, src.Code, src.Name, e.info.Arch, e.opts); err != nil || how != fromDisk {
			b.Fatal(how, err)
		}
	}
}

// BenchmarkKernelMemoryHit: the in-memory cache (hash and lookup).
func BenchmarkKernelMemoryHit(b *testing.B) {
	e, src := benchSource(b)
	c := newCodeCache()
	c.get(e.comp, "", src.Code, src.Name, e.info.Arch, e.opts)
	for b.Loop() {
		if _, how, err := c.get(e.comp, "", src.Code, src.Name, e.info.Arch, e.opts); err != nil || how != fromMemory {
			b.Fatal(how, err)
		}
	}
}

// TestCompileOptionTimes compiles the fused W2 kernel with a few option
// sets and logs the times (LOOM_OPTION_TIMES=1; an experiment, not a check).
func TestCompileOptionTimes(t *testing.T) {
	if os.Getenv("LOOM_OPTION_TIMES") != "1" {
		t.Skip("set LOOM_OPTION_TIMES=1 to time compile options")
	}
	e, src := benchSource(t)
	sets := [][]string{e.opts, e.opts, append([]string{"-default-device"}, e.opts...)}
	if e.info.Platform == "nvidia" {
		sets = append(sets, append([]string{"-Ofast-compile=min"}, e.opts...), append([]string{"-Ofast-compile=mid"}, e.opts...), append([]string{"-Xptxas=-O1"}, e.opts...))
	}
	for _, opts := range sets {
		var best time.Duration
		for range 3 {
			t0 := time.Now()
			_, _, err := newCodeCache().get(e.comp, "", src.Code, src.Name, e.info.Arch, opts)
			d := time.Since(t0)
			if err != nil {
				t.Logf("%q: %v", opts, err)
				break
			}
			if best == 0 || d < best {
				best = d
			}
		}
		t.Logf("W2 compile with %q: best of 3 %v", opts, best.Round(time.Millisecond/10))
	}
}

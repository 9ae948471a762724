package rocm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
	"github.com/loomgraph/loom/workloads"
)

var ctx = context.Background()

// TestGPUOpen: the registry opens rocm, and auto picks it.
func TestGPUOpen(t *testing.T) {
	e := openGPU(t)
	t.Logf("%v: %+v, compiler %s", e, e.Info(), e.Compiler().Version())
	x, why, err := exec.Open("rocm")
	if err != nil || x.Name() != "rocm" {
		t.Fatalf(`exec.Open("rocm"): %v, %v`, x, err)
	}
	x.(*Executor).Close()
	a, why, err := exec.Open("auto")
	if err != nil || a.Name() != "rocm" {
		t.Fatalf(`exec.Open("auto"): %v (%s), %v`, a, why, err)
	}
	a.(*Executor).Close()
	t.Logf("auto: %s", why)
}

// TestGPUOps compares every case with the CPU executor, fused and unfused
// where that differs, with outputs poisoned.
func TestGPUOps(t *testing.T) {
	e := openGPU(t)
	ref := cpu.New()
	start := time.Now()
	before := e.Stats()
	cases := 0
	t.Run("cases", func(t *testing.T) {
		for _, c := range opCases() {
			modes := []bool{true}
			if c.modes {
				modes = append(modes, false)
			}
			for _, fused := range modes {
				name := c.name
				if c.modes {
					name += map[bool]string{true: "/fused", false: "/unfused"}[fused]
				}
				cases++
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					g, p, err := buildCase(c, fused)
					if err != nil {
						t.Fatal(err)
					}
					in, err := genInputs(g, 7, c.workload != nil)
					if err != nil {
						t.Fatal(err)
					}
					want, err := p.Run(ctx, ref, in)
					if err != nil {
						t.Fatalf("cpu: %v", err)
					}
					got, err := p.Run(ctx, e, in)
					if err != nil {
						t.Fatalf("rocm: %v", err)
					}
					var refs map[string]*tensor.Tensor
					if c.ref64 != nil {
						g64 := graph.New()
						c.ref64(g64)
						p64, err := g64.Compile(graph.Options{})
						if err != nil {
							t.Fatal(err)
						}
						if refs, err = p64.Run(ctx, ref, in); err != nil {
							t.Fatal(err)
						}
					}
					for name, w := range want {
						if r, ok := refs[name]; ok {
							compareTensors(t, c.name+" "+name, got[name], w, c.tol, toDType(r, w.DType()))
						} else {
							compareTensors(t, c.name+" "+name, got[name], w, c.tol)
						}
					}
				})
			}
		}
	})
	st := e.Stats()
	t.Logf("%d cases in %v; kernels: %d prepared, %d compiles (%v total), %d disk hits, %d memory hits, %d module loads (%v), %d launches",
		cases, time.Since(start).Round(time.Millisecond), st.Kernels.KernelsReady-before.Kernels.KernelsReady,
		st.Kernels.Compiles-before.Kernels.Compiles, st.Kernels.CompileTime-before.Kernels.CompileTime,
		st.Kernels.DiskHits-before.Kernels.DiskHits, st.Kernels.MemHits-before.Kernels.MemHits,
		st.Kernels.ModuleLoads-before.Kernels.ModuleLoads, st.Kernels.ModuleTime-before.Kernels.ModuleTime, st.Kernels.Launches-before.Kernels.Launches)
	t.Logf("memory: %v", st.Memory)
}

// TestGPUHuge adds two u8 tensors of 2^31+1000 elements: 64-bit indexing.
// It checks the ends, the 2^31 boundary and a random sample.
func TestGPUHuge(t *testing.T) {
	e := openGPU(t)
	const n = 1<<31 + 1000
	free, _, err := e.dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free < 3*(n+2<<20)+1<<30 {
		t.Skipf("needs %d bytes of device memory, %d free", 3*n, free)
	}
	g := graph.New()
	g.Output("z", g.Input("x", dtype.U8, n).Add(g.Input("y", dtype.U8, n)))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	xs, ys := make([]uint8, n), make([]uint8, n)
	parallelFill(n, func(i int) { xs[i], ys[i] = uint8(i*7+3), uint8(i>>9^i*13) })
	xt, _ := tensor.New(xs, n)
	yt, _ := tensor.New(ys, n)
	t0 := time.Now()
	xr, err := e.FromHost(xt)
	if err != nil {
		t.Fatal(err)
	}
	defer xr.Free()
	yr, err := e.FromHost(yt)
	if err != nil {
		t.Fatal(err)
	}
	defer yr.Free()
	up := time.Since(t0)
	in := map[string]exec.Value{"x": xr, "y": yr}
	out, err := p.RunValues(ctx, e, in, true) // poisoned output
	if err != nil {
		t.Fatal(err)
	}
	z := out["z"].(*Tensor)
	t0 = time.Now()
	h, err := z.ToHost()
	down := time.Since(t0)
	z.Free()
	if err != nil {
		t.Fatal(err)
	}
	zs, _ := tensor.Values[uint8](h)
	r := rand.New(rand.NewPCG(1, 2))
	idx := []int{}
	for i := range 1 << 16 {
		idx = append(idx, i, n-1-i)
	}
	for i := 1<<31 - 1<<16; i < n; i++ { // across 2^31
		idx = append(idx, i)
	}
	for range 1 << 20 {
		idx = append(idx, r.IntN(n))
	}
	bad := 0
	for _, i := range idx {
		if want := xs[i] + ys[i]; zs[i] != want {
			if bad < 8 {
				t.Errorf("z[%d] = %d, want %d", i, zs[i], want)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d checked elements differ", bad, len(idx))
	}
	// Timing without poison: inputs resident, the run is the kernel.
	e.poison.Store(-1)
	defer e.poison.Store(0xFF)
	var best time.Duration
	for range 3 {
		t0 := time.Now()
		out, err := p.RunValues(ctx, e, in, true)
		d := time.Since(t0)
		if err != nil {
			t.Fatal(err)
		}
		out["z"].(*Tensor).Free()
		if best == 0 || d < best {
			best = d
		}
	}
	t.Logf("u8 add of %d elements: %d elements checked; upload %.1f GB/s, download %.1f GB/s; kernel run %v = %.0f GB/s (3 × %d bytes)",
		n, len(idx), 2*n/up.Seconds()/1e9, n/down.Seconds()/1e9, best, 3*n/best.Seconds()/1e9, n)
}

func parallelFill(n int, f func(i int)) {
	w := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for k := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k * n / w; i < (k+1)*n/w; i++ {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// TestGPUAllocator: 1000 runs of a plan do not grow memory; exhaustion names
// the request; Trim empties the cache.
func TestGPUAllocator(t *testing.T) {
	e := freshGPU(t)
	for _, tc := range []struct {
		id    string
		fused bool
	}{{"W1", true}, {"W2", false}} {
		w, _ := workloads.ByID(tc.id)
		g, _ := w.Build(workloads.Size{Elems: 10007})
		p, err := g.Compile(graph.Options{NoFusion: !tc.fused})
		if err != nil {
			t.Fatal(err)
		}
		in, _ := workloads.Inputs(g, 3)
		first, err := p.Run(ctx, e, in)
		if err != nil {
			t.Fatal(err)
		}
		st0 := e.Stats().Memory
		for range 1000 {
			out, err := p.Run(ctx, e, in)
			if err != nil {
				t.Fatal(err)
			}
			if i := 5000; out["out"].Float64(i) != first["out"].Float64(i) {
				t.Fatalf("run differs")
			}
		}
		st := e.Stats().Memory
		t.Logf("%s fused=%v (%d steps, %d slots): after 1 run: %v; after 1001: %v", tc.id, tc.fused, len(p.Plan().Steps), len(p.Plan().SlotBytes), st0, st)
		if st.InUse != st0.InUse || st.Mallocs != st0.Mallocs || st.PeakInUse != st0.PeakInUse || st.InUse != 0 {
			t.Errorf("memory grew over 1000 runs")
		}
	}
	_, err := e.Alloc(1<<46, plan.BufTemp)
	if err == nil {
		t.Fatal("a 64 TiB allocation succeeded")
	}
	t.Logf("exhaustion: %v", err)
	if !strings.Contains(err.Error(), "cannot allocate 70368744177664 bytes") || !strings.Contains(err.Error(), "bytes in use") {
		t.Errorf("the error does not name the request and the stats")
	}
	cached := e.Stats().Memory.Cached
	n, err := e.Trim()
	if err != nil || n != cached || e.Stats().Memory.Cached != 0 {
		t.Errorf("Trim: %d of %d bytes, %v", n, cached, err)
	}
}

// TestGPUKernelCache: memory hit (a new plan, same kernel), disk hit (a fresh
// executor and cache, same LOOM_CACHE_DIR), corrupt entry recompiled, and
// LOOM_DUMP files.
func TestGPUKernelCache(t *testing.T) {
	openGPU(t)
	dir, dump := t.TempDir(), t.TempDir()
	t.Setenv(CacheDirEnv, dir)
	t.Setenv(DumpEnv, dump)
	w, _ := workloads.ByID("W2")
	g, _ := w.Build(workloads.Size{Elems: 1 << 20})
	in, _ := workloads.Inputs(g, 5)
	plan := func() *graph.Program {
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(e *Executor, p *graph.Program) (*tensor.Tensor, time.Duration) {
		t0 := time.Now()
		out, err := p.Run(ctx, e, in)
		if err != nil {
			t.Fatal(err)
		}
		return out["out"], time.Since(t0)
	}
	e1 := freshGPU(t)
	e1.codes = newCodeCache()
	p1 := plan()
	want, firstRun := run(e1, p1)
	s := e1.Stats().Kernels
	if s.Compiles != 1 || s.DiskHits != 0 || s.ModuleLoads != 1 {
		t.Errorf("first run: %+v", s)
	}
	t.Logf("first run (generate, compile, load, run): %v; compile %v, module load %v", firstRun, s.CompileTime, s.ModuleTime)
	_, again := run(e1, p1)
	t.Logf("second run of the plan (kernel cached on plan.Kernel): %v", again)
	_, newPlan := run(e1, plan())
	s = e1.Stats().Kernels
	if s.Compiles != 1 || s.MemHits != 1 || s.ModuleLoads != 1 {
		t.Errorf("new plan, same kernel: %+v", s)
	}
	t.Logf("new plan, same kernel (generate, memory hit %v): %v", s.MemTime, newPlan)

	e2 := freshGPU(t)
	e2.codes = newCodeCache()
	got, diskRun := run(e2, plan())
	s = e2.Stats().Kernels
	if s.Compiles != 0 || s.DiskHits != 1 {
		t.Errorf("fresh executor: %+v", s)
	}
	compareTensors(t, "disk-hit result", got, want, exact)
	t.Logf("fresh executor (generate, disk hit %v, module load %v, run): %v", s.DiskTime, s.ModuleTime, diskRun)

	entries, _ := filepath.Glob(filepath.Join(dir, "*.co"))
	if len(entries) != 1 {
		t.Fatalf("cache dir holds %v", entries)
	}
	data, _ := os.ReadFile(entries[0])
	data[len(data)/2] ^= 1
	os.WriteFile(entries[0], data, 0o644)
	e3 := freshGPU(t)
	e3.codes = newCodeCache()
	got, _ = run(e3, plan())
	s = e3.Stats().Kernels
	if s.Corrupt != 1 || s.Compiles != 1 || s.DiskHits != 0 {
		t.Errorf("corrupt entry: %+v", s)
	}
	compareTensors(t, "recompiled result", got, want, exact)

	// LOOM_DUMP is shared with the compiler's pass dumps (loom-NNN-*):
	// look for the kernel's two files only.
	hips, _ := filepath.Glob(filepath.Join(dump, "E_*.hip"))
	logs, _ := filepath.Glob(filepath.Join(dump, "E_*.log"))
	if len(hips) != 1 || len(logs) != 1 || strings.TrimSuffix(hips[0], ".hip") != strings.TrimSuffix(logs[0], ".log") {
		t.Fatalf("LOOM_DUMP holds sources %v and logs %v, want one of each for the kernel", hips, logs)
	}
	logText, _ := os.ReadFile(logs[0])
	t.Logf("LOOM_DUMP: %s (%d bytes of source) and its log:\n%s", filepath.Base(hips[0]), fileSize(hips[0]), logText)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// TestGPUResident chains plans through resident tensors and keeps weights
// on the device.
func TestGPUResident(t *testing.T) {
	e := openGPU(t)
	mem0 := e.Stats().Memory.InUse
	gA := graph.New()
	gA.Output("h", gA.Input("x", dtype.F32, 64, 1000).Add(gA.Input("bias", dtype.F32, 1000)).Gelu())
	gB := graph.New()
	h := gB.Input("h", dtype.F32, 64, 1000)
	gB.Output("y", h.Mul(gB.Input("w", dtype.F32, 1000)).Tanh().Add(h))
	pA, err := gA.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pB, err := gB.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inA, _ := workloads.Inputs(gA, 11)
	inB, _ := workloads.Inputs(gB, 12)
	w := inB["w"]

	// Host paths: CPU, and GPU with copies.
	ref := cpu.New()
	hC, _ := pA.Run(ctx, ref, inA)
	yC, _ := pB.Run(ctx, ref, map[string]*tensor.Tensor{"h": hC["h"], "w": w})
	hG, err := pA.Run(ctx, e, inA)
	if err != nil {
		t.Fatal(err)
	}
	yG, err := pB.Run(ctx, e, map[string]*tensor.Tensor{"h": hG["h"], "w": w})
	if err != nil {
		t.Fatal(err)
	}
	compareTensors(t, "host path vs cpu", yG["y"], yC["y"], chain)

	// Resident: weights uploaded once, h stays on the device.
	biasR, err := e.FromHost(inA["bias"])
	if err != nil {
		t.Fatal(err)
	}
	wR, _ := e.FromHost(w)
	outA, err := pA.RunValues(ctx, e, map[string]exec.Value{"x": inA["x"], "bias": biasR}, true)
	if err != nil {
		t.Fatal(err)
	}
	hR, ok := outA["h"].(*Tensor)
	if !ok {
		t.Fatalf("keep=true returned %T", outA["h"])
	}
	hH, err := hR.ToHost()
	if err != nil {
		t.Fatal(err)
	}
	compareTensors(t, "resident h", hH, hG["h"], exact)
	for _, keep := range []bool{false, true} {
		outB, err := pB.RunValues(ctx, e, map[string]exec.Value{"h": hR, "w": wR}, keep)
		if err != nil {
			t.Fatal(err)
		}
		y := outB["y"]
		if r, ok := y.(*Tensor); ok != keep {
			t.Fatalf("keep=%v returned %T", keep, y)
		} else if ok {
			y, _ = r.ToHost()
			r.Free()
		}
		compareTensors(t, fmt.Sprintf("resident chain keep=%v", keep), y.(*tensor.Tensor), yG["y"], exact)
	}

	// A resident tensor on the wrong executor, or freed.
	_, err = pB.RunValues(ctx, ref, map[string]exec.Value{"h": hR, "w": w}, false)
	t.Logf("on the cpu: %v", err)
	if err == nil || !strings.Contains(err.Error(), "resident on rocm executor") || !strings.Contains(err.Error(), "runs on cpu executor") {
		t.Errorf("rocm tensor on the cpu: %v", err)
	}
	e2 := freshGPU(t)
	_, err = pB.RunValues(ctx, e2, map[string]exec.Value{"h": hR, "w": w}, false)
	t.Logf("on another rocm executor: %v", err)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%p", e)) || !strings.Contains(err.Error(), fmt.Sprintf("%p", e2)) {
		t.Errorf("rocm tensor on another executor: %v", err)
	}
	hR.Free()
	hR.Free()
	if _, err := pB.RunValues(ctx, e, map[string]exec.Value{"h": hR, "w": wR}, false); err == nil || !strings.Contains(err.Error(), "was freed") {
		t.Errorf("freed input: %v", err)
	}
	if _, err := hR.ToHost(); err == nil {
		t.Error("ToHost of a freed tensor succeeded")
	}
	biasR.Free()
	wR.Free()
	if m := e.Stats().Memory.InUse; m != mem0 {
		t.Errorf("bytes in use %d after freeing everything, %d before", m, mem0)
	}
}

// TestGPUConcurrent runs several plans from many goroutines on one executor.
func TestGPUConcurrent(t *testing.T) {
	e := openGPU(t)
	ref := cpu.New()
	var cases []opCase
	for _, c := range opCases() {
		switch c.name {
		case "W1", "W6", "chain/i64", "chain/u8", "cast/f32-f16", "strided-add/bf16", "where/u8-f32":
			cases = append(cases, c)
		}
	}
	var wg sync.WaitGroup
	for gi := range 16 {
		c := cases[gi%len(cases)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, p, err := buildCase(c, gi%2 == 0)
			if err != nil {
				t.Error(err)
				return
			}
			in, _ := genInputs(g, uint64(gi), c.workload != nil)
			want, _ := p.Run(ctx, ref, in)
			for range 10 {
				got, err := p.Run(ctx, e, in)
				if err != nil {
					t.Error(err)
					return
				}
				for name, w := range want {
					compareTensors(t, c.name+"/"+name, got[name], w, c.tol)
				}
			}
		}()
	}
	wg.Wait()
}

// TestGPUBandwidth times the workloads with resident inputs and outputs
// (kernels only) and a device-to-device copy for reference.
func TestGPUBandwidth(t *testing.T) {
	e := freshGPU(t)
	// Reference: a 1 GiB device-to-device copy.
	const cb = 1 << 30
	a, _ := e.alloc.alloc(cb)
	b, _ := e.alloc.alloc(cb)
	e.dev.MemcpyDtoD(b.ptr, a.ptr, cb, e.stream)
	e.Sync()
	t0 := time.Now()
	for range 10 {
		e.dev.MemcpyDtoD(b.ptr, a.ptr, cb, e.stream)
	}
	e.Sync()
	copyBW := 2 * cb * 10 / time.Since(t0).Seconds() / 1e9
	e.alloc.release(a)
	e.alloc.release(b)
	t.Logf("device-to-device copy of 1 GiB: %.0f GB/s (read + write)", copyBW)
	for _, id := range []string{"W1", "W2", "W6"} {
		w, _ := workloads.ByID(id)
		g, _ := w.Build(workloads.Size{Elems: 1 << 26, Rows: 4096, Cols: 8192})
		in, _ := workloads.Inputs(g, 1)
		res := residentValues(t, e, in)
		line := id
		for _, fused := range []bool{true, false} {
			p, err := g.Compile(graph.Options{NoFusion: !fused})
			if err != nil {
				t.Fatal(err)
			}
			once := func() time.Duration {
				t0 := time.Now()
				out, err := p.RunValues(ctx, e, res, true)
				if err != nil {
					t.Fatal(err)
				}
				d := time.Since(t0)
				for _, v := range out {
					v.(*Tensor).Free()
				}
				return d
			}
			once()
			var best time.Duration
			for range 10 {
				if d := once(); best == 0 || d < best {
					best = d
				}
			}
			line += fmt.Sprintf("  fused=%v: %d kernels, %v, %.0f GB/s", fused, len(p.Plan().Steps), best.Round(time.Microsecond), float64(workloads.Bytes(g))/best.Seconds()/1e9)
		}
		t.Log(line)
	}
}

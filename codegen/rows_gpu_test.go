package codegen

// Row kernels on the device (skipped without one): every row case against
// the CPU twin, the NVRTC compile of every row kernel, and the bandwidth of
// W3, W4, W5 and W7 against a device-to-device copy.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/loomgraph/loom/exec/rocm/hip"
)

// compileParallel compiles srcs for the GPU in batches, on every core,
// loads the modules and returns a runner of every launch.
func compileParallel(t *testing.T, srcs []*Source) *gpuRunner {
	t.Helper()
	r := &gpuRunner{fns: map[string]hip.Function{}}
	var batches [][]*Source
	for lo := 0; lo < len(srcs); lo += batchSize {
		batches = append(batches, srcs[lo:min(lo+batchSize, len(srcs))])
	}
	codes := make([][]byte, len(batches))
	errs := make([]error, len(batches))
	inParallel(len(batches), func(i int) {
		var b strings.Builder
		b.WriteString(Prelude(gpu.tg))
		for _, s := range batches[i] {
			b.WriteString(s.Body)
		}
		codes[i], _, errs[i] = gpu.c.Compile(b.String(), fmt.Sprintf("rows%d.cu", i), gpu.tg.Arch, nil)
	})
	for i, batch := range batches {
		if errs[i] != nil {
			// Name the culprits.
			for _, s := range batch {
				if _, _, err := gpu.c.Compile(s.Code, s.Name+".cu", gpu.tg.Arch, nil); err != nil {
					t.Errorf("%s: %v\n--- body ---\n%s", s.Name, err, s.Body)
					break
				}
			}
			t.Fatalf("compile batch %d for %s: %v", i, gpu.tg.Arch, errs[i])
		}
		m, err := gpu.d.LoadModule(codes[i])
		if err != nil {
			t.Fatalf("load module: %v", err)
		}
		t.Cleanup(func() { gpu.d.UnloadModule(m) })
		for _, s := range batch {
			for _, l := range s.Launches {
				if r.fns[l.Name], err = m.Function(l.Name); err != nil {
					t.Fatalf("function %s: %v", l.Name, err)
				}
			}
		}
	}
	return r
}

// altSubset are the cases run with the alternative row options on the
// device: the f32 reductions and normalisations, and the layouts.
func altSubset(cs []rowCase) []rowCase {
	var out []rowCase
	for _, c := range cs {
		if strings.Contains(c.name, "/f32/") || strings.HasPrefix(c.name, "layout/") || strings.HasPrefix(c.name, "W") {
			out = append(out, c)
		}
	}
	return out
}

// TestGPURows runs every row case on the device (default options; the
// alternatives on a subset; the full-size workloads and a whole-tensor
// reduction) and compares with the CPU twin.
func TestGPURows(t *testing.T) {
	openGPU(t)
	cases, big := rowCases(), bigRowCases()
	start := time.Now()
	srcs := rowSources(t, append(slices.Clone(cases), big...), gpu.tg)
	for _, o := range altRowOptions {
		srcs = append(srcs, rowSources(t, altSubset(cases), gpu.tg, o)...)
	}
	seen := map[string]bool{}
	var uniq []*Source
	for _, s := range srcs {
		if !seen[s.Name] {
			seen[s.Name] = true
			uniq = append(uniq, s)
		}
	}
	r := compileParallel(t, uniq)
	t.Logf("%s: %d kernels compiled and loaded in %v", gpu.tg, len(uniq), time.Since(start).Round(time.Millisecond))
	t.Run("default", func(t *testing.T) { checkRowCases(t, r, gpu.tg, cases, defaultRowOptions) })
	for i, o := range altRowOptions {
		t.Run(fmt.Sprintf("alt%d", i), func(t *testing.T) { checkRowCases(t, r, gpu.tg, altSubset(cases), o) })
	}
	t.Run("big", func(t *testing.T) { checkRowCases(t, r, gpu.tg, big, defaultRowOptions) })
}

// TestCompileRowsNVIDIA compiles every row kernel with NVRTC for sm_90 and
// sm_80 where libnvrtc loads (skipped elsewhere).
func TestCompileRowsNVIDIA(t *testing.T) {
	c, err := hip.LoadCompiler(hip.NVIDIA)
	if err != nil {
		t.Skipf("NVRTC unavailable, NVIDIA compile tests skipped: %v", err)
	}
	cases := append(rowCases(), bigRowCases()...)
	for _, arch := range []string{"sm_90", "sm_80"} {
		t.Run(arch, func(t *testing.T) {
			t.Parallel()
			tg := Target{Platform: NVIDIA, Arch: arch}
			start := time.Now()
			srcs := rowSources(t, cases, tg)
			units := compileAll(t, c, tg, arch, srcs)
			t.Logf("%d row kernels in %d translation units: %v", len(srcs), units, time.Since(start).Round(time.Millisecond))
		})
	}
}

// median of a sample (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// TestGPURowBandwidth times W3, W4, W5 and W7 (8192 × 8192 f32, fused: one
// row kernel each) with the default row options and alternatives, and a
// device-to-device copy in the same run: median of 25 timed runs each
// (device events around every run), GB/s of inputs read once plus output
// written once. It asserts nothing: numbers for the report. With
// LOOM_CODEGEN_DUMP set it writes the default kernels' sources and code
// objects there.
func TestGPURowBandwidth(t *testing.T) {
	openGPU(t)
	d, s := gpu.d, gpu.s
	const reps = 25
	e0, _ := d.NewEvent()
	e1, _ := d.NewEvent()
	defer d.DestroyEvent(e0)
	defer d.DestroyEvent(e1)
	timeRuns := func(f func() error) float64 {
		t.Helper()
		for range 3 {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		var ms []float64
		for range reps {
			d.Record(e0, s)
			if err := f(); err != nil {
				t.Fatal(err)
			}
			d.Record(e1, s)
			if err := d.EventSynchronize(e1); err != nil {
				t.Fatal(err)
			}
			v, err := d.ElapsedMs(e0, e1)
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, float64(v))
		}
		return median(ms) / 1e3
	}
	const copyBytes = 1 << 30
	a, err := d.Malloc(copyBytes)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Malloc(copyBytes)
	if err != nil {
		t.Fatal(err)
	}
	d.MemsetD8(a, 0x3c, copyBytes, s)
	sec := timeRuns(func() error { return d.MemcpyDtoD(b, a, copyBytes, s) })
	copyGBs := 2 * copyBytes / sec / 1e9
	t.Logf("%s: device-to-device copy of 1 GiB: %.3f ms, %.0f GB/s (median of %d)", d.Info().Name, sec*1e3, copyGBs, reps)
	d.Free(a)
	d.Free(b)

	configs := []struct {
		name string
		opt  rowOptions
	}{
		{"default", defaultRowOptions},
		{"4 chunks/lane, 3 blocks/SM", rowOptions{vecsPerThread: 4, maxGroup: 1024, cacheWords: 64, splitRows: 512, splitBlock: 256, splitVecs: 8, minBlocks: 3}},
		{"4 chunks/lane, 4 blocks/SM", rowOptions{vecsPerThread: 4, maxGroup: 1024, cacheWords: 64, splitRows: 512, splitBlock: 256, splitVecs: 8, minBlocks: 4}},
		{"8 chunks/lane (group 256)", rowOptions{vecsPerThread: 8, maxGroup: 1024, cacheWords: 64, splitRows: 512, splitBlock: 256, splitVecs: 8}},
		{"2 chunks/lane (group 1024), 2 blocks/SM", rowOptions{vecsPerThread: 2, maxGroup: 1024, cacheWords: 64, splitRows: 512, splitBlock: 256, splitVecs: 8, minBlocks: 2}},
		{"default, no register cache", rowOptions{vecsPerThread: 4, maxGroup: 1024, cacheWords: 0, splitRows: 512, splitBlock: 256, splitVecs: 8}},
		{"2 chunks/lane (group 1024)", rowOptions{vecsPerThread: 2, maxGroup: 1024, cacheWords: 64, splitRows: 512, splitBlock: 256, splitVecs: 8}},
		{"2 chunks/lane (group 1024), 2 blocks/SM, no cache", rowOptions{vecsPerThread: 2, maxGroup: 1024, cacheWords: 0, splitRows: 512, splitBlock: 256, splitVecs: 8, minBlocks: 2}},
		{"4 chunks/lane, 2 blocks/SM", rowOptions{vecsPerThread: 4, maxGroup: 1024, cacheWords: 64, splitRows: 512, splitBlock: 256, splitVecs: 8, minBlocks: 2}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range workloadRowCases(8192, 8192) {
		p := c.plan(t, true)
		if len(p.Steps) != 1 {
			t.Errorf("%s: %d steps, want one row kernel", c.name, len(p.Steps))
		}
		bufs := map[int]hip.DevPtr{}
		bytes := 0
		for _, buf := range p.Buffers {
			ptr, err := d.Malloc(uint64(max(buf.Bytes(), 256)))
			if err != nil {
				t.Fatal(err)
			}
			bufs[buf.ID] = ptr
		}
		for _, in := range p.Inputs {
			// Normal values, like the workloads' inputs.
			vals := make([]float64, in.Numel())
			for i := range vals {
				vals[i] = rng.NormFloat64()
			}
			host := randomBytes(in.DType, vals)
			if err := d.MemcpyHtoD(bufs[in.ID], unsafe.Pointer(&host[0]), uint64(len(host)), s); err != nil {
				t.Fatal(err)
			}
			bytes += in.Bytes()
		}
		for _, o := range p.Outputs {
			bytes += o.Bytes()
		}
		for _, cfg := range configs {
			var launches []func() error
			var descs []string
			var mods []*hip.Module
			for _, st := range p.Steps {
				src, err := render(st.Kernel, gpu.tg, defaultOptions, cfg.opt)
				if err != nil {
					t.Fatal(err)
				}
				code, _, err := gpu.c.Compile(src.Code, src.Name, gpu.tg.Arch, nil)
				if err != nil {
					t.Fatal(err)
				}
				if dir := os.Getenv("LOOM_CODEGEN_DUMP"); dir != "" && (cfg.name == "default" || c.name[:2] == "W3") {
					os.WriteFile(filepath.Join(dir, src.Name+".co"), code, 0o644)
				}
				m, err := d.LoadModule(code)
				if err != nil {
					t.Fatal(err)
				}
				mods = append(mods, m)
				var args hip.Args
				for _, in := range st.Kernel.Ins {
					args.Ptr(bufs[in.Buf.ID])
				}
				args.Ptr(bufs[st.Kernel.Out.ID])
				for _, l := range src.Launches {
					fn, err := m.Function(l.Name)
					if err != nil {
						t.Fatal(err)
					}
					descs = append(descs, fmt.Sprintf("%s grid %d × block %d", l.Name, l.Grid[0], l.Block[0]))
					launches = append(launches, func() error { return d.Launch(fn, l.Grid, l.Block, 0, s, &args) })
				}
			}
			sec := timeRuns(func() error {
				for _, l := range launches {
					if err := l(); err != nil {
						return err
					}
				}
				return nil
			})
			gbs := float64(bytes) / sec / 1e9
			t.Logf("%s, %s: %.3f ms, %.0f GB/s = %.1f%% of copy (%s)", c.name, cfg.name, sec*1e3, gbs, 100*gbs/copyGBs, strings.Join(descs, ", "))
			for _, m := range mods {
				d.UnloadModule(m)
			}
		}
		for _, ptr := range bufs {
			d.Free(ptr)
		}
	}
}

package codegen

// GPU checks, run where a device is present (skipped elsewhere): the same
// plans as the host emulation, executed on the device and compared with
// the CPU twin, and a bandwidth measurement of W1, W2 and W6 against a
// device-to-device copy.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
)

var gpu struct {
	once sync.Once
	d    *hip.Device
	c    hip.Compiler
	tg   Target
	s    hip.Stream
	err  error
}

// openGPU opens device 0 of the first platform with one, or skips.
func openGPU(t *testing.T) {
	t.Helper()
	gpu.once.Do(func() {
		p, err := hip.Load()
		if err != nil {
			gpu.err = err
			return
		}
		if gpu.d, err = p.OpenDevice(0); err != nil {
			gpu.err = err
			return
		}
		if gpu.c, err = p.Compiler(); err != nil {
			gpu.err = err
			return
		}
		info := gpu.d.Info()
		gpu.tg = Target{Platform: info.Platform, Arch: info.Arch, WaveSize: info.WaveSize}
		gpu.s, gpu.err = gpu.d.NewStream()
	})
	if gpu.d == nil {
		t.Skipf("no GPU, device tests skipped: %v", gpu.err)
	}
	if gpu.err != nil {
		t.Fatalf("GPU setup: %v", gpu.err)
	}
}

// gpuRunner runs kernels on the device, from code objects compiled in
// batches up front (compileParallel).
type gpuRunner struct {
	mu  sync.Mutex
	fns map[string]hip.Function
}

func (r *gpuRunner) run(src *Source, ins [][]byte, outBytes int) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, s := gpu.d, gpu.s
	var ptrs []hip.DevPtr
	defer func() {
		for _, p := range ptrs {
			d.Free(p)
		}
	}()
	var args hip.Args
	for _, b := range ins {
		p, err := d.Malloc(uint64(max(len(b), 256)))
		if err != nil {
			return nil, err
		}
		ptrs = append(ptrs, p)
		if len(b) > 0 {
			if err := d.MemcpyHtoD(p, unsafe.Pointer(&b[0]), uint64(len(b)), s); err != nil {
				return nil, err
			}
		}
		args.Ptr(p)
	}
	op, err := d.Malloc(uint64(max(outBytes, 256)))
	if err != nil {
		return nil, err
	}
	ptrs = append(ptrs, op)
	if err := d.MemsetD8(op, 0xA5, uint64(max(outBytes, 256)), s); err != nil {
		return nil, err
	}
	args.Ptr(op)
	if src.ScratchBytes > 0 {
		sp, err := d.Malloc(uint64(src.ScratchBytes))
		if err != nil {
			return nil, err
		}
		ptrs = append(ptrs, sp)
		if err := d.MemsetD8(sp, 0xA5, uint64(src.ScratchBytes), s); err != nil {
			return nil, err
		}
		args.Ptr(sp)
	}
	for _, l := range src.Launches {
		fn, ok := r.fns[l.Name]
		if !ok {
			return nil, fmt.Errorf("kernel %s was not compiled", l.Name)
		}
		if err := d.Launch(fn, l.Grid, l.Block, 0, s, &args); err != nil {
			return nil, fmt.Errorf("launch %s: %w", l.Name, err)
		}
	}
	if err := d.Synchronize(s); err != nil {
		return nil, err
	}
	out := make([]byte, outBytes)
	if outBytes > 0 {
		if err := d.MemcpyDtoH(unsafe.Pointer(&out[0]), op, uint64(outBytes), s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TestGPU runs every runnable case on the device and compares with the CPU
// twin.
func TestGPU(t *testing.T) {
	openGPU(t)
	start := time.Now()
	r := compileParallel(t, sourcesOf(t, gpu.tg))
	t.Logf("%s: %d kernels compiled and loaded in %v", gpu.tg, len(r.fns), time.Since(start).Round(time.Millisecond))
	checkCases(t, r, gpu.tg, runnableCases())
	t.Run("options", func(t *testing.T) { checkOptions(t, r, gpu.tg) })
	t.Run("math", func(t *testing.T) { checkMath(t, r, gpu.tg) })
}

// TestGPUBandwidth times W1, W2 (2^28 elements) and W6 (8192×8192) fused,
// against a device-to-device copy of 1 GiB, and logs GB/s (bytes = inputs
// read once + output written once), with the default options and the
// alternatives. It asserts nothing: numbers for the report. With
// LOOM_CODEGEN_DUMP set it writes the default kernels' sources and code
// objects there.
func TestGPUBandwidth(t *testing.T) {
	openGPU(t)
	d, s := gpu.d, gpu.s
	timeIt := func(iters int, f func() error) float64 {
		t.Helper()
		for range 3 {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		e0, _ := d.NewEvent()
		e1, _ := d.NewEvent()
		defer d.DestroyEvent(e0)
		defer d.DestroyEvent(e1)
		d.Record(e0, s)
		for range iters {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		d.Record(e1, s)
		if err := d.EventSynchronize(e1); err != nil {
			t.Fatal(err)
		}
		ms, err := d.ElapsedMs(e0, e1)
		if err != nil {
			t.Fatal(err)
		}
		return float64(ms) / 1e3 / float64(iters)
	}
	// Random-looking data: a 4 MiB random block repeated.
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(p hip.DevPtr, dt dtype.DType, n int) {
		const block = 1 << 20
		vals := make([]float64, block)
		for i := range vals {
			vals[i] = rng.NormFloat64() * 2
		}
		host := randomBytes(dt, vals)
		for off := 0; off < n*dt.Size(); off += len(host) {
			m := min(len(host), n*dt.Size()-off)
			if err := d.MemcpyHtoD(p+hip.DevPtr(off), unsafe.Pointer(&host[0]), uint64(m), s); err != nil {
				t.Fatal(err)
			}
		}
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
	sec := timeIt(20, func() error { return d.MemcpyDtoD(b, a, copyBytes, s) })
	copyGBs := 2 * copyBytes / sec / 1e9
	t.Logf("%s: device-to-device copy of 1 GiB: %.3f ms, %.0f GB/s", d.Info().Name, sec*1e3, copyGBs)
	d.Free(a)
	d.Free(b)

	sms := d.Info().MultiProcessors
	configs := []struct {
		name string
		opt  options
	}{
		{"16 B/thread, exact grid (default)", defaultOptions},
		{"32 B/thread, exact grid", options{threadBytes: 32, maxThreadBytes: 128}},
		{fmt.Sprintf("16 B/thread, loop over %d blocks", 8*sms), options{threadBytes: 16, maxThreadBytes: 64, gridBlocks: 8 * sms}},
		{fmt.Sprintf("32 B/thread, loop over %d blocks", 8*sms), options{threadBytes: 32, maxThreadBytes: 128, gridBlocks: 8 * sms}},
	}
	copyCase := graphCase{name: "copy/f32/268435456", big: true, build: func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 1<<28))
	}}
	cases := append(workloadCases(1<<14, 1<<14, true)[:2], workloadCases(8192, 8192, true)[2], copyCase)
	for _, c := range cases {
		p := c.plan(t)
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
			fill(bufs[in.ID], in.DType, in.Numel())
			bytes += in.Bytes()
		}
		for _, o := range p.Outputs {
			bytes += o.Bytes()
		}
		for _, cfg := range configs {
			var launches []func() error
			var names []string
			var mods []*hip.Module
			for _, st := range p.Steps {
				src, err := elementwise(st.Kernel, gpu.tg, cfg.opt)
				if err != nil {
					t.Fatal(err)
				}
				code, _, err := gpu.c.Compile(src.Code, src.Name, gpu.tg.Arch, nil)
				if err != nil {
					t.Fatal(err)
				}
				if dir := os.Getenv("LOOM_CODEGEN_DUMP"); dir != "" && cfg.opt == defaultOptions {
					// Source and code object, for a look at the machine code.
					os.WriteFile(filepath.Join(dir, src.Name+".hip"), []byte(src.Code), 0o644)
					os.WriteFile(filepath.Join(dir, src.Name+".co"), code, 0o644)
				}
				m, err := d.LoadModule(code)
				if err != nil {
					t.Fatal(err)
				}
				mods = append(mods, m)
				fn, err := m.Function(src.Name)
				if err != nil {
					t.Fatal(err)
				}
				var args hip.Args
				for _, in := range st.Kernel.Ins {
					args.Ptr(bufs[in.Buf.ID])
				}
				args.Ptr(bufs[st.Kernel.Out.ID])
				names = append(names, fmt.Sprintf("%s grid %d, %d/thread", src.Name, src.Grid[0], src.Elems))
				launches = append(launches, func() error { return d.Launch(fn, src.Grid, src.Block, 0, s, &args) })
			}
			sec := timeIt(20, func() error {
				for _, l := range launches {
					if err := l(); err != nil {
						return err
					}
				}
				return nil
			})
			gbs := float64(bytes) / sec / 1e9
			t.Logf("%s, %s: %.3f ms, %.0f GB/s = %.1f%% of copy %v", c.name, cfg.name, sec*1e3, gbs, 100*gbs/copyGBs, names)
			for _, m := range mods {
				d.UnloadModule(m)
			}
		}
		for _, ptr := range bufs {
			d.Free(ptr)
		}
	}
}

// randomBytes encodes vals as dt.
func randomBytes(dt dtype.DType, vals []float64) []byte {
	out := make([]byte, 0, len(vals)*dt.Size())
	for _, v := range vals {
		var bits uint64
		switch dt {
		case dtype.F32:
			bits = uint64(math.Float32bits(float32(v)))
		case dtype.F64:
			bits = math.Float64bits(v)
		case dtype.F16:
			bits = uint64(dtype.ToF16(float32(v)))
		case dtype.BF16:
			bits = uint64(dtype.ToBF16(float32(v)))
		case dtype.F8E4M3:
			bits = uint64(dtype.ToF8E4M3(float32(v)))
		default:
			bits = uint64(int64(v))
		}
		for k := range dt.Size() {
			out = append(out, byte(bits>>(8*k)))
		}
	}
	return out
}

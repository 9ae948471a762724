package hip

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// gpuKernels compiles unchanged with hiprtc and NVRTC (no includes).
const gpuKernels = `
extern "C" __global__ void saxpy(const float* __restrict__ x, const float* __restrict__ y,
                                 float* __restrict__ out, float a, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}
extern "C" __global__ void args_echo(unsigned long long* out, int i32, unsigned int u32,
                                     long long i64, unsigned long long u64, float f32, double f64) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = (unsigned long long)(long long)i32;
        out[1] = u32;
        out[2] = (unsigned long long)i64;
        out[3] = u64;
        out[4] = __float_as_uint(f32);
        out[5] = (unsigned long long)__double_as_longlong(f64);
    }
}
`

// openGPU opens device 0 of the first platform with a device, or skips.
func openGPU(t *testing.T) *Device {
	t.Helper()
	p, err := Load()
	if err != nil {
		t.Skipf("no GPU, execution test skipped: %v", err)
	}
	d, err := p.OpenDevice(0)
	if err != nil {
		t.Fatalf("OpenDevice(0): %v", err)
	}
	return d
}

// must fails the test on err.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func TestGPU(t *testing.T) {
	d := openGPU(t)
	info := d.Info()
	t.Logf("device: %+v", info)
	if info.Name == "" || info.Arch == "" || info.TotalMem == 0 || info.MultiProcessors <= 0 ||
		(info.WaveSize != 32 && info.WaveSize != 64) {
		t.Errorf("implausible DeviceInfo %+v", info)
	}
	if info.Platform == NVIDIA && !smArch.MatchString(info.Arch) {
		t.Errorf("NVIDIA arch %q is not sm_XX", info.Arch)
	}

	p, err := LoadPlatform(info.Platform)
	must(t, "LoadPlatform", err)
	c, err := p.Compiler()
	must(t, "Compiler", err)
	code, _, err := c.Compile(gpuKernels, "gpu_test", info.Arch, nil)
	must(t, "Compile for "+info.Arch, err)
	m, err := d.LoadModule(code)
	must(t, "LoadModule", err)
	saxpy, err := m.Function("saxpy")
	must(t, "Function(saxpy)", err)
	s, err := d.NewStream()
	must(t, "NewStream", err)
	free0, total, err := d.MemInfo()
	must(t, "MemInfo", err)
	t.Logf("%s %s, memory free %d MiB of %d MiB", c.Version(), info.Arch, free0>>20, total>>20)

	t.Run("saxpy", func(t *testing.T) {
		const n = 1 << 22
		const bytes = 4 * n
		rng := rand.New(rand.NewPCG(1, 2))
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = nonZero(rng)
			y[i] = nonZero(rng)
		}
		const a = float32(1.75)

		var bufs [3]DevPtr
		for i := range bufs {
			bufs[i], err = d.Malloc(bytes)
			must(t, "Malloc", err)
		}
		dx, dy, dout := bufs[0], bufs[1], bufs[2]
		free1, _, err := d.MemInfo()
		must(t, "MemInfo", err)
		const tolerance = 16 << 20
		if free0-free1+tolerance < 3*bytes {
			t.Errorf("after allocating %d MiB, free memory went from %d to %d MiB", 3*bytes>>20, free0>>20, free1>>20)
		}

		must(t, "MemcpyHtoD x", d.MemcpyHtoD(dx, unsafe.Pointer(&x[0]), bytes, s))
		must(t, "MemcpyHtoD y", d.MemcpyHtoD(dy, unsafe.Pointer(&y[0]), bytes, s))
		must(t, "MemsetD8", d.MemsetD8(dout, 0xFF, bytes, s))
		out := make([]uint32, n)
		must(t, "MemcpyDtoH poison", d.MemcpyDtoH(unsafe.Pointer(&out[0]), dout, bytes, s))
		for i, v := range out {
			if v != 0xFFFFFFFF {
				t.Fatalf("after MemsetD8(0xFF), out[%d] = %#x", i, v)
			}
		}

		start, err := d.NewEvent()
		must(t, "NewEvent", err)
		end, err := d.NewEvent()
		must(t, "NewEvent", err)
		args := new(Args).Ptr(dx).Ptr(dy).Ptr(dout).F32(a).U32(n)
		const block = 256
		must(t, "Record start", d.Record(start, s))
		must(t, "Launch", d.Launch(saxpy, [3]uint32{n / block, 1, 1}, [3]uint32{block, 1, 1}, 0, s, args))
		must(t, "Record end", d.Record(end, s))
		must(t, "EventSynchronize", d.EventSynchronize(end))
		ms, err := d.ElapsedMs(start, end)
		must(t, "ElapsedMs", err)
		t.Logf("saxpy over %d floats: %.4f ms", n, ms)
		if !(ms > 0) {
			t.Errorf("ElapsedMs = %v, want > 0", ms)
		}

		got := make([]float32, n)
		must(t, "MemcpyDtoH", d.MemcpyDtoH(unsafe.Pointer(&got[0]), dout, bytes, s))
		bad := 0
		for i := range got {
			ax := float32(a * x[i])
			want := float32(ax + y[i])
			// The GPU may fuse a*x+y: allow the rounding of the product.
			tol := 1e-6 * (abs(ax) + abs(y[i]))
			if !(abs(got[i]-want) <= tol) {
				if bad++; bad <= 5 {
					t.Errorf("out[%d] = %v, want %v (a=%v x=%v y=%v)", i, got[i], want, a, x[i], y[i])
				}
			}
		}
		if bad > 0 {
			t.Errorf("%d of %d elements wrong", bad, n)
		}

		// MemsetD32 + MemcpyDtoD.
		must(t, "MemsetD32", d.MemsetD32(dx, 0xDEADBEEF, n, s))
		must(t, "MemcpyDtoD", d.MemcpyDtoD(dy, dx, bytes, s))
		must(t, "Synchronize", d.Synchronize(s))
		must(t, "MemcpyDtoH", d.MemcpyDtoH(unsafe.Pointer(&out[0]), dy, bytes, s))
		for i, v := range out {
			if v != 0xDEADBEEF {
				t.Fatalf("after MemsetD32+MemcpyDtoD, word %d = %#x", i, v)
			}
		}

		must(t, "DestroyEvent", d.DestroyEvent(start))
		must(t, "DestroyEvent", d.DestroyEvent(end))
		// Free memory is device-wide: other processes (the GPU suite runs
		// four test binaries at once) allocate meanwhile, so compare just
		// before and just after the frees rather than with free0.
		freeHeld, _, err := d.MemInfo()
		must(t, "MemInfo", err)
		for _, b := range bufs {
			must(t, "Free", d.Free(b))
		}
		free2, _, err := d.MemInfo()
		must(t, "MemInfo", err)
		// Another process can allocate between the two readings (seen
		// with seven test binaries at once), so a miss is retried with
		// fresh buffers, up to four times: a Free that frees nothing
		// misses every time.
		for try := 0; ; try++ {
			gained := int64(free2) - int64(freeHeld)
			if gained+tolerance >= int64(3*bytes) {
				break
			}
			if try == 4 {
				t.Errorf("freeing %d MiB took free memory from %d to %d MiB (5 tries)", 3*bytes>>20, freeHeld>>20, free2>>20)
				break
			}
			var again []DevPtr
			for range 3 {
				b, err := d.Malloc(bytes)
				must(t, "Malloc", err)
				again = append(again, b)
			}
			freeHeld, _, err = d.MemInfo()
			must(t, "MemInfo", err)
			for _, b := range again {
				must(t, "Free", d.Free(b))
			}
			free2, _, err = d.MemInfo()
			must(t, "MemInfo", err)
		}
	})

	t.Run("args", func(t *testing.T) {
		echo, err := m.Function("args_echo")
		must(t, "Function(args_echo)", err)
		dout, err := d.Malloc(6 * 8)
		must(t, "Malloc", err)
		defer func() { must(t, "Free", d.Free(dout)) }()
		var (
			i32 int32   = -7
			u32 uint32  = 0xFFFFFFF0
			i64 int64   = -1 << 40
			u64 uint64  = 1<<63 | 9
			f32 float32 = -0.5
			f64         = math.Pi
		)
		args := new(Args).Ptr(dout).I32(i32).U32(u32).I64(i64).U64(u64).F32(f32).F64(f64)
		must(t, "Launch", d.Launch(echo, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0, args))
		got := make([]uint64, 6)
		must(t, "MemcpyDtoH", d.MemcpyDtoH(unsafe.Pointer(&got[0]), dout, 6*8, 0))
		want := []uint64{uint64(i32), uint64(u32), uint64(i64), u64, uint64(math.Float32bits(f32)), math.Float64bits(f64)}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("kernel saw argument %d as %#x, want %#x", i+1, got[i], want[i])
			}
		}
	})

	// The occupancy query of a kernel: a plausible count of resident blocks.
	t.Run("occupancy", func(t *testing.T) {
		blocks, err := d.ActiveBlocks(saxpy, 256, 0)
		must(t, "ActiveBlocks", err)
		if blocks < 1 || blocks > 64 {
			t.Errorf("ActiveBlocks(saxpy, 256 threads) = %d, want 1…64", blocks)
		}
	})

	t.Run("errors", func(t *testing.T) {
		_, err := m.Function("no_such_kernel")
		var e *Error
		if !errors.As(err, &e) || !strings.HasSuffix(e.Call, "ModuleGetFunction") || e.Code == 0 || e.Name == "" ||
			!strings.Contains(err.Error(), e.Call) || !strings.Contains(err.Error(), e.Name) {
			t.Errorf("Function(no_such_kernel): err = %v (%#v), want an *Error naming the lookup call", err, e)
		}
		t.Logf("missing kernel: %v", err)
		_, err = d.Malloc(1 << 40)
		if !errors.As(err, &e) || e.Code != 2 {
			t.Errorf("Malloc(1<<40): err = %v, want an *Error with the out-of-memory code 2", err)
		} else if info.Platform == NVIDIA && err.Error() != "hip: cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)" {
			t.Errorf("Malloc(1<<40): err = %q", err)
		}
		t.Logf("huge Malloc: %v", err)
	})

	// Goroutines migrate between OS threads; each call must make the device
	// current on whichever thread it runs.
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- roundTrip(d, uint32(g))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})

	must(t, "DestroyStream", d.DestroyStream(s))
	must(t, "UnloadModule", d.UnloadModule(m))
	if err := d.Launch(saxpy, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0, nil); err == nil {
		t.Error("Launch of a function of an unloaded module succeeded")
	}
	must(t, "Close", d.Close())
	must(t, "second Close", d.Close())
	if _, err := d.Malloc(16); !errors.Is(err, ErrClosed) {
		t.Errorf("Malloc after Close: err = %v, want ErrClosed", err)
	}
}

// roundTrip copies a pattern through device memory on its own stream.
func roundTrip(d *Device, seed uint32) error {
	const n = 4096
	in, out := make([]uint32, n), make([]uint32, n)
	for i := range in {
		in[i] = seed<<16 | uint32(i)
	}
	s, err := d.NewStream()
	if err != nil {
		return err
	}
	p, err := d.Malloc(4 * n)
	if err != nil {
		return err
	}
	for range 20 {
		if err := d.MemcpyHtoD(p, unsafe.Pointer(&in[0]), 4*n, s); err != nil {
			return err
		}
		if err := d.MemcpyDtoH(unsafe.Pointer(&out[0]), p, 4*n, s); err != nil {
			return err
		}
		for i := range in {
			if out[i] != in[i] {
				return errors.New("round trip corrupted data")
			}
		}
	}
	return errors.Join(d.Free(p), d.DestroyStream(s))
}

// nonZero returns a value in ±[0.5, 2).
func nonZero(rng *rand.Rand) float32 {
	v := float32(0.5 + 1.5*rng.Float64())
	if rng.IntN(2) == 0 {
		v = -v
	}
	return v
}

func abs(v float32) float32 { return float32(math.Abs(float64(v))) }

// TestGPUCallLatency logs the host time of the small calls a decode step
// makes after its run (a 4-byte download, an idle stream's sync, an
// enqueued 4-byte memset, a 4-byte upload), each the mean of 200 calls,
// to say where a step's host time goes. LOOM_HIP_LATENCY=1 runs it.
func TestGPUCallLatency(t *testing.T) {
	if os.Getenv("LOOM_HIP_LATENCY") != "1" {
		t.Skip("set LOOM_HIP_LATENCY=1 to time small driver calls")
	}
	d := openGPU(t)
	s, err := d.NewStream()
	must(t, "NewStream", err)
	p, err := d.Malloc(256)
	must(t, "Malloc", err)
	defer d.Free(p)
	var v uint32
	const n = 200
	timeIt := func(name string, f func() error) {
		for range 10 {
			must(t, name, f())
		}
		start := time.Now()
		for range n {
			must(t, name, f())
		}
		t.Logf("%-32s %8.2f µs/call", name, float64(time.Since(start).Microseconds())/n)
	}
	timeIt("MemcpyDtoH 4 bytes", func() error { return d.MemcpyDtoH(unsafe.Pointer(&v), p, 4, s) })
	timeIt("MemcpyHtoD 4 bytes", func() error { return d.MemcpyHtoD(p, unsafe.Pointer(&v), 4, s) })
	timeIt("Synchronize (idle stream)", func() error { return d.Synchronize(s) })
	timeIt("MemsetD8 4 bytes (enqueued)", func() error { return d.MemsetD8(p, 0, 4, s) })
	timeIt("MemsetD8 + Synchronize", func() error {
		if err := d.MemsetD8(p, 0, 4, s); err != nil {
			return err
		}
		return d.Synchronize(s)
	})
	// A decode step's pattern: ~1 ms of device work, the wait, then the
	// downloads; the wait as one blocking call or as a poll of an event.
	pl, err := LoadPlatform(d.Info().Platform)
	must(t, "LoadPlatform", err)
	c, err := pl.Compiler()
	must(t, "Compiler", err)
	code, _, err := c.Compile(`extern "C" __global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
`, "spin", d.Info().Arch, nil)
	must(t, "Compile spin", err)
	m, err := d.LoadModule(code)
	must(t, "LoadModule", err)
	spin, err := m.Function("spin")
	must(t, "Function(spin)", err)
	ev, err := d.NewEvent()
	must(t, "NewEvent", err)
	defer d.DestroyEvent(ev)
	for _, poll := range []bool{false, true} {
		var wait, down time.Duration
		const steps = 100
		for range steps {
			var a Args
			a.I64(2_000_000)
			must(t, "Launch", d.Launch(spin, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, &a))
			t0 := time.Now()
			if poll {
				must(t, "Record", d.Record(ev, s))
				for {
					done, err := d.EventQuery(ev)
					must(t, "EventQuery", err)
					if done {
						break
					}
				}
			} else {
				must(t, "Synchronize", d.Synchronize(s))
			}
			t1 := time.Now()
			must(t, "MemcpyDtoH", d.MemcpyDtoH(unsafe.Pointer(&v), p, 4, s))
			must(t, "MemcpyDtoH", d.MemcpyDtoH(unsafe.Pointer(&v), p, 4, s))
			wait += t1.Sub(t0)
			down += time.Since(t1)
		}
		t.Logf("after ~1 ms of device work (poll %v): wait %v, then two 4-byte downloads %v", poll, wait/steps, down/steps)
	}
	timeIt("MemsetD8 + MemcpyDtoH", func() error {
		if err := d.MemsetD8(p, 0, 4, s); err != nil {
			return err
		}
		return d.MemcpyDtoH(unsafe.Pointer(&v), p, 4, s)
	})
}

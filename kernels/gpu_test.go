package kernels

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
	"golang.org/x/sync/errgroup"
)

// compileCache shares code objects between tests: (arch, code) → object.
var compileCache = struct {
	sync.Mutex
	m map[string][]byte
}{m: map[string][]byte{}}

func compileCached(c hip.Compiler, code, name, arch string) ([]byte, error) {
	key := arch + "\x00" + code
	compileCache.Lock()
	obj, ok := compileCache.m[key]
	compileCache.Unlock()
	if ok {
		return obj, nil
	}
	obj, _, err := c.Compile(code, name+".hip", arch, compileOptions(c.Platform()))
	if err != nil {
		return nil, err
	}
	compileCache.Lock()
	compileCache.m[key] = obj
	compileCache.Unlock()
	return obj, nil
}

// rig is a minimal launcher: it runs a plan whose steps are all indexing
// kernels, through Plan's launches.
type rig struct {
	dev    *hip.Device
	comp   hip.Compiler
	target codegen.Target
	mu     sync.Mutex
	fns    map[string]hip.Function // by arch+code+name
	// counters is Counters: zero between launches.
	counters hip.DevPtr
}

var (
	rigOnce sync.Once
	theRig  *rig
	rigErr  error
)

func gpu(t *testing.T) *rig {
	t.Helper()
	rigOnce.Do(func() {
		p, err := hip.Load()
		if err != nil {
			rigErr = err
			return
		}
		dev, err := p.OpenDevice(0)
		if err != nil {
			rigErr = err
			return
		}
		comp, err := p.Compiler()
		if err != nil {
			rigErr = err
			return
		}
		info := dev.Info()
		// The counters Counters launches count in: zeroed once, as the
		// executor's.
		cnt, err := dev.Malloc(4 * CounterWords)
		if err == nil {
			if err = dev.MemsetD8(cnt, 0, 4*CounterWords, 0); err == nil {
				err = dev.Synchronize(0)
			}
		}
		if err != nil {
			rigErr = err
			return
		}
		theRig = &rig{dev: dev, comp: comp, fns: map[string]hip.Function{}, counters: cnt,
			target: codegen.Target{Platform: info.Platform, Arch: info.Arch, WaveSize: info.WaveSize}}
	})
	if rigErr != nil {
		t.Skipf("no GPU (hip.Load: %v): GPU execution tests skipped", rigErr)
	}
	return theRig
}

func (r *rig) function(l Launch) (hip.Function, error) {
	key := l.Code + "\x00" + l.Name
	r.mu.Lock()
	defer r.mu.Unlock()
	if f, ok := r.fns[key]; ok {
		return f, nil
	}
	obj, err := compileCached(r.comp, l.Code, l.Name, r.dev.Info().Arch)
	if err != nil {
		return hip.Function{}, fmt.Errorf("compile %s: %w", l.Name, err)
	}
	m, err := r.dev.LoadModule(obj)
	if err != nil {
		return hip.Function{}, err
	}
	f, err := m.Function(l.Name)
	if err != nil {
		return hip.Function{}, err
	}
	r.fns[key] = f
	return f, nil
}

// devRun is a plan's buffers on the device.
type devRun struct {
	r    *rig
	p    *plan.Plan
	mem  []hip.DevPtr
	flag hip.DevPtr
}

func (r *rig) upload(tc testCase) (*devRun, error) {
	p := tc.prog.Plan()
	d := &devRun{r: r, p: p, mem: make([]hip.DevPtr, len(p.Buffers))}
	for i, b := range p.Buffers {
		ptr, err := r.dev.Malloc(uint64(max(b.Bytes(), 16)))
		if err != nil {
			d.free()
			return nil, err
		}
		d.mem[i] = ptr
	}
	for _, b := range p.Inputs {
		data := tc.inputs[b.Name].Bytes()
		if len(data) == 0 {
			continue
		}
		if err := r.dev.MemcpyHtoD(d.mem[b.ID], unsafe.Pointer(&data[0]), uint64(len(data)), 0); err != nil {
			d.free()
			return nil, err
		}
	}
	var err error
	if d.flag, err = r.dev.Malloc(8 * ErrorFlagWords); err != nil {
		d.free()
		return nil, err
	}
	return d, nil
}

func (d *devRun) free() {
	for _, p := range d.mem {
		if p != 0 {
			d.r.dev.Free(p)
		}
	}
	if d.flag != 0 {
		d.r.dev.Free(d.flag)
	}
}

// prepared is one step's launches with their functions and arguments.
type prepared struct {
	k       *plan.Kernel
	ls      []Launch
	fns     []hip.Function
	args    []*hip.Args
	scratch []hip.DevPtr
}

func (d *devRun) prepare(k *plan.Kernel) (*prepared, error) {
	if !strings.HasPrefix(k.Name, "I_") && !strings.HasPrefix(k.Name, "W_") {
		return nil, fmt.Errorf("step %s is neither an indexing nor a window kernel", k.Name)
	}
	ls, ss, err := Plan(k, d.r.target)
	if err != nil {
		return nil, err
	}
	pr := &prepared{k: k, ls: ls}
	for _, s := range ss {
		p, err := d.r.dev.Malloc(uint64(max(s.Bytes, 16)))
		if err != nil {
			pr.release(d.r)
			return nil, err
		}
		pr.scratch = append(pr.scratch, p)
	}
	for _, l := range ls {
		f, err := d.r.function(l)
		if err != nil {
			pr.release(d.r)
			return nil, err
		}
		a := new(hip.Args)
		for _, arg := range l.Args {
			switch arg.Kind {
			case Operand:
				a.Ptr(d.mem[k.Ins[arg.Index].Buf.ID])
			case Output:
				a.Ptr(d.mem[k.Out.ID])
			case ErrorFlag:
				a.Ptr(d.flag)
			case Scratch:
				a.Ptr(pr.scratch[arg.Index])
			case Counters:
				a.Ptr(d.r.counters)
			case AheadInPlace:
				a.Ptr(0) // the rig runs a step alone: nothing ahead in place
			}
		}
		pr.fns = append(pr.fns, f)
		pr.args = append(pr.args, a)
	}
	return pr, nil
}

func (pr *prepared) release(r *rig) {
	for _, p := range pr.scratch {
		r.dev.Free(p)
	}
}

// launch enqueues the step's launches.
func (pr *prepared) launch(r *rig) error {
	for i, l := range pr.ls {
		if err := r.dev.Launch(pr.fns[i], l.Grid, l.Block, l.SharedMem, 0, pr.args[i]); err != nil {
			return fmt.Errorf("launch %s: %w", l.Name, err)
		}
	}
	return nil
}

// run executes every step, checking the error flag after each.
func (d *devRun) run() error {
	for _, s := range d.p.Steps {
		pr, err := d.prepare(s.Kernel)
		if err != nil {
			return err
		}
		err = d.r.dev.MemsetD8(d.flag, 0, 8*ErrorFlagWords, 0)
		if err == nil {
			err = pr.launch(d.r)
		}
		if err == nil {
			err = d.r.dev.Synchronize(0)
		}
		pr.release(d.r)
		if err != nil {
			return err
		}
		var words [4]int64
		if err := d.r.dev.MemcpyDtoH(unsafe.Pointer(&words[0]), d.flag, 8*ErrorFlagWords, 0); err != nil {
			return err
		}
		if err := DecodeError(s.Kernel.Instrs[0].Node.Op.String(), words); err != nil {
			return err
		}
	}
	return nil
}

func (d *devRun) output() ([]byte, error) {
	b := d.p.Outputs[0]
	out := make([]byte, b.Bytes())
	if len(out) == 0 {
		return out, nil
	}
	err := d.r.dev.MemcpyDtoH(unsafe.Pointer(&out[0]), d.mem[b.ID], uint64(len(out)), 0)
	return out, err
}

// runGPU runs a test case on the device and returns the output's bytes.
func (r *rig) runGPU(tc testCase) ([]byte, error) {
	d, err := r.upload(tc)
	if err != nil {
		return nil, err
	}
	defer d.free()
	if err := d.run(); err != nil {
		return nil, err
	}
	return d.output()
}

func runCPU(tc testCase) ([]byte, error) {
	outs, err := tc.prog.Run(context.Background(), cpu.New(), tc.inputs)
	if err != nil {
		return nil, err
	}
	return outs["out"].Bytes(), nil
}

// precompile compiles every launch of the cases' indexing steps, each
// distinct source once and runtime.NumCPU() at a time, into compileCache,
// so that the checks that follow load code objects instead of compiling
// one after another. Errors are left for the checks to report.
func (r *rig) precompile(cases []testCase) {
	seen := map[string]bool{}
	var ls []Launch
	for _, tc := range cases {
		for _, s := range tc.prog.Plan().Steps {
			if !strings.HasPrefix(s.Kernel.Name, "I_") && !strings.HasPrefix(s.Kernel.Name, "W_") {
				continue
			}
			kls, _, err := Plan(s.Kernel, r.target)
			if err != nil {
				continue
			}
			for _, l := range kls {
				if !seen[l.Code] {
					seen[l.Code] = true
					ls = append(ls, l)
				}
			}
		}
	}
	arch := r.dev.Info().Arch
	var g errgroup.Group
	g.SetLimit(runtime.NumCPU())
	for _, l := range ls {
		g.Go(func() error {
			compileCached(r.comp, l.Code, l.Name, arch)
			return nil
		})
	}
	g.Wait()
}

// check runs tc on both executors and compares bit for bit.
func check(t *testing.T, r *rig, tc testCase) {
	t.Helper()
	want, err := runCPU(tc)
	if err != nil {
		t.Errorf("%s: CPU: %v", tc.name, err)
		return
	}
	got, err := r.runGPU(tc)
	if err != nil {
		t.Errorf("%s: GPU: %v", tc.name, firstLines(err.Error(), 20))
		return
	}
	dt := tc.prog.Plan().Outputs[0].DType
	if diff := sameBits(dt, got, want, tc.addOp); diff != "" {
		t.Errorf("%s: GPU differs from CPU: %s", tc.name, diff)
	}
}

// opsCases are every indexing op × value dtype × ids dtype, on
// strided/offset views (variant 0) and contiguous operands with the indexed
// dim first or last (variant 1), with sentinels and duplicate ids.
func opsCases(t testing.TB) []testCase {
	seed := uint64(100)
	var cases []testCase
	for _, op := range []ir.Op{ir.OpIndexSelect, ir.OpGather, ir.OpScatter, ir.OpScatterAdd, ir.OpIndexAdd, ir.OpCat, ir.OpSliceAssign} {
		for _, vdt := range valueDTypes {
			idts := idsDTypes
			if op.Info().IDArg() < 0 {
				idts = idts[:1]
			}
			for _, idt := range idts {
				for variant := range 2 {
					if variant == 1 && idt != idts[len(idts)-1] {
						continue
					}
					cases = append(cases, caseFor(t, op, vdt, idt, variant, seed))
					seed++
				}
			}
		}
	}
	return cases
}

// TestGPUOps compares every op × value dtype × ids dtype with the CPU, on
// strided/offset views (variant 0) and contiguous operands with the indexed
// dim first or last (variant 1), with sentinels and duplicate ids.
func TestGPUOps(t *testing.T) {
	r := gpu(t)
	t.Logf("device: %s (%s, wave %d)", r.dev.Info().Name, r.dev.Info().Arch, r.dev.Info().WaveSize)
	cases := opsCases(t)
	r.precompile(cases)
	for _, tc := range cases {
		check(t, r, tc)
	}
	n := len(cases)
	t.Logf("%d cases compared", n)
}

// TestGPUBadIDs: a bad id (too large, or negative) sets the flag, and the
// decoded error names the op and the id, as the CPU's does.
func TestGPUBadIDs(t *testing.T) {
	r := gpu(t)
	for _, op := range indexOps {
		for _, idt := range idsDTypes {
			tc := caseFor(t, op, dtype.F32, idt, 1, 7)
			ids := tc.inputs["ids"]
			bad := 7.0 // the indexed dim has size 7
			if idt == dtype.I64 {
				bad = -3
			}
			pos := ids.Numel() / 2
			ids.SetFloat64(pos, bad)
			_, cpuErr := runCPU(tc)
			_, gpuErr := r.runGPU(tc)
			name := fmt.Sprintf("%v/%v", op, idt)
			if cpuErr == nil || gpuErr == nil {
				t.Errorf("%s: CPU error %v, GPU error %v: want both", name, cpuErr, gpuErr)
				continue
			}
			want := fmt.Sprintf("%v: id %d at position %d ", op, int64(bad), pos)
			if !strings.HasPrefix(gpuErr.Error(), want) {
				t.Errorf("%s: GPU error %q, want prefix %q", name, gpuErr, want)
			}
			if !strings.Contains(cpuErr.Error(), fmt.Sprintf("%v: id %d ", op, int64(bad))) {
				t.Errorf("%s: CPU error %q", name, cpuErr)
			}
			t.Logf("%s:\n  GPU: %v\n  CPU: %v", name, gpuErr, cpuErr)
		}
	}
}

// TestGPUArgsort: rows of length 1, 2, 1023, 1024, 1025 (short path) and
// 100000 (tiles + merges), both orders, with ties and NaNs, contiguous and
// strided; every dtype on a short and a long row.
func TestGPUArgsort(t *testing.T) {
	r := gpu(t)
	seed := uint64(500)
	var cases []testCase
	for _, n := range []int{1, 2, 1023, 1024, 1025, 4097, 100000} {
		rows := 3
		if n == 100000 {
			rows = 2
		}
		for _, desc := range []bool{false, true} {
			for _, strided := range []bool{false, true} {
				cases = append(cases, argsortCase(t, dtype.F32, rows, n, desc, strided, seed))
				seed++
			}
		}
	}
	for _, dt := range valueDTypes {
		for _, n := range []int{777, 2049, 30000} {
			for _, desc := range []bool{false, true} {
				cases = append(cases, argsortCase(t, dt, 3, n, desc, false, seed))
				seed++
			}
		}
	}
	// Many short rows: several rows per block.
	cases = append(cases, argsortCase(t, dtype.I64, 1000, 5, true, true, seed))
	cases = append(cases, argsortCase(t, dtype.F16, 777, 33, false, false, seed+1))
	r.precompile(cases)
	for _, tc := range cases {
		check(t, r, tc)
	}
}

// timeSteps times the plan's (single) step with events: the median of
// reps runs, in milliseconds.
func (r *rig) timeStep(t *testing.T, tc testCase, reps int) (float64, []byte) {
	t.Helper()
	d, err := r.upload(tc)
	if err != nil {
		t.Fatal(err)
	}
	defer d.free()
	pr, err := d.prepare(tc.prog.Plan().Steps[0].Kernel)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.release(r)
	start, err1 := r.dev.NewEvent()
	stop, err2 := r.dev.NewEvent()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	defer r.dev.DestroyEvent(start)
	defer r.dev.DestroyEvent(stop)
	if err := pr.launch(r); err != nil { // warm-up
		t.Fatal(err)
	}
	var ms []float64
	for range reps {
		err := errors.Join(r.dev.Record(start, 0), pr.launch(r), r.dev.Record(stop, 0), r.dev.EventSynchronize(stop))
		if err != nil {
			t.Fatal(err)
		}
		v, err := r.dev.ElapsedMs(start, stop)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, float64(v))
	}
	sort.Float64s(ms)
	out, err := d.output()
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)/2], out
}

// TestGPUArgsortW8 measures W8: argsort of 8192 rows × 1024 f32 (PyTorch:
// 0.298 ms on an H200), median of 20, for the default configuration and a
// few alternatives, each checked against the CPU.
func TestGPUArgsortW8(t *testing.T) {
	r := gpu(t)
	tc := argsortCase(t, dtype.F32, 8192, 1024, false, false, 42)
	want, err := runCPU(tc)
	if err != nil {
		t.Fatal(err)
	}
	saved := argsortConfig
	defer func() { argsortConfig = saved }()
	for _, cfg := range []sortConfig{
		saved,
		{E: 4, MinThreads: 128, MaxSeg32: 4096, MaxSeg64: 2048},
		{E: 16, MinThreads: 64, MaxSeg32: 4096, MaxSeg64: 2048},
		{E: 8, MinThreads: 256, MaxSeg32: 4096, MaxSeg64: 2048},
	} {
		argsortConfig = cfg
		ms, got := r.timeStep(t, tc, 20)
		ok := "matches CPU"
		if diff := sameBits(dtype.U32, got, want, false); diff != "" {
			ok = "DIFFERS: " + diff
			t.Errorf("W8 config %+v: %s", cfg, diff)
		}
		line := fmt.Sprintf("W8 argsort 8192x1024 f32 on %s, config %+v: median %.4f ms (%s)", r.dev.Info().Name, cfg, ms, ok)
		t.Log(line)
		fmt.Println(line)
	}
	argsortConfig = saved
	long := argsortCase(t, dtype.F32, 64, 100000, false, false, 43)
	ms, _ := r.timeStep(t, long, 5)
	line := fmt.Sprintf("argsort 64x100000 f32 (tiles + 5 merge passes): median %.4f ms", ms)
	t.Log(line)
	fmt.Println(line)
}

// TestGPUWide runs kernels whose tensors reach 2^31 elements (64-bit index
// math) and checks them against the input: index_select of two rows of a
// 3 × 2^30 u8 tensor, and argsort of 2^21 rows × 1024 u8 (sampled rows,
// many ties). It needs about 12 GiB of device and host memory.
func TestGPUWide(t *testing.T) {
	r := gpu(t)
	if testing.Short() {
		t.Skip("-short: wide tensors skipped")
	}
	if free, _, err := r.dev.MemInfo(); err != nil || free < 24<<30 {
		t.Skipf("needs 24 GiB of free device memory (free %d, %v)", free, err)
	}
	const big = 1 << 30
	pattern := func(n int) []uint8 {
		x := make([]uint8, n)
		for i := range x {
			x[i] = uint8(uint32(i) * 2654435761 >> 24)
		}
		return x
	}

	g := graph.New()
	g.Output("out", g.Input("x", dtype.U8, 3, big).IndexSelect(g.Input("ids", dtype.U32, 2), 0))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := pattern(3 * big)
	xt, _ := tensor.New(x, 3, big)
	ids, _ := tensor.New([]uint32{2, 0}, 2)
	start := time.Now()
	got, err := r.runGPU(testCase{prog: p, inputs: map[string]*tensor.Tensor{"x": xt, "ids": ids}})
	if err != nil {
		t.Fatalf("index_select: %v", err)
	}
	if !bytes.Equal(got[:big], x[2*big:]) || !bytes.Equal(got[big:], x[:big]) {
		t.Errorf("wide index_select: wrong rows")
	}
	t.Logf("wide index_select 3x2^30 u8: ok (%v with transfers)", time.Since(start).Round(time.Millisecond))
	x, xt, got = nil, nil, nil

	const rows, n = 1 << 21, 1024
	g = graph.New()
	g.Output("out", g.Input("x", dtype.U8, rows, n).Argsort(true))
	p, err = g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x = pattern(rows * n)
	xt, _ = tensor.New(x, rows, n)
	start = time.Now()
	got, err = r.runGPU(testCase{prog: p, inputs: map[string]*tensor.Tensor{"x": xt}})
	if err != nil {
		t.Fatalf("argsort: %v", err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	sample := []int{0, 1, rows - 2, rows - 1}
	for range 20 {
		sample = append(sample, rng.IntN(rows))
	}
	for _, row := range sample {
		vals := x[row*n : (row+1)*n]
		want := make([]uint32, n)
		for i := range want {
			want[i] = uint32(i)
		}
		sort.SliceStable(want, func(a, b int) bool { return vals[want[a]] > vals[want[b]] })
		for i, w := range want {
			if g := binary.LittleEndian.Uint32(got[(row*n+i)*4:]); g != w {
				t.Errorf("wide argsort row %d position %d: got %d, want %d", row, i, g, w)
				break
			}
		}
	}
	t.Logf("wide argsort 2^21x1024 u8 desc: %d sampled rows checked (%v with transfers)", len(sample), time.Since(start).Round(time.Millisecond))
}

package rocm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// Executor runs plans on one GPU through package hip. It is safe for
// concurrent use.
type Executor struct {
	chlRev int // conv.go: chlRevX | chlRevY
	// counters is kernels.Counters: CounterWords uint32s, zero between
	// launches.
	counters hip.DevPtr
	dev      *hip.Device
	info     hip.DeviceInfo
	comp     hip.Compiler
	target   codegen.Target
	opts     []string // compiler options
	stream   hip.Stream
	alloc    *allocator
	codes    *codeCache
	// runsAllKey is plan.KeyOf(e, runsAllKey{}), made once: a run asks it
	// every time (RunsAll), and a weak pointer is not free to make.
	runsAllKey plan.Key[Executor]
	stage      stage  // pinned staging for copies to the host (hostcopy.go)
	events     events // the marks of runs in flight (pending.go)

	launchMu sync.Mutex // launches are serialised on the one stream
	// gate keeps everyone but the capturing run off the stream while a
	// run is recorded (replay.go); capturing is that recording.
	gate      sync.RWMutex
	capturing atomic.Pointer[recording]
	rp        replays
	memInfo   struct { // AvailableBytes' last query of the driver
		mu                   sync.Mutex
		free, mallocs, frees int64
		at                   time.Time
	}
	poison atomic.Int32

	modMu sync.Mutex
	mods  map[string]*hip.Module  // code-object key → module loaded here
	fns   map[string]hip.Function // key + "\x00" + name → function

	timer    deviceTimer                 // DeviceTime (benchmarks)
	prof     atomic.Pointer[stepProfile] // ProfileSteps (nil: off)
	gemmS    gemmState                   // matmul: vendor BLAS or the portable kernel
	gemmWarm sync.Map                    // gemmWarmKey → true: vendor calls made once (gemmwarm.go)
	dnnS     dnnState                    // conv: vendor library or the portable kernels
	// libFns memoizes the entry points of the kernel libraries (GEMM, conv,
	// quant) loaded here: lib + "\x00" + name → hip.Function.
	libFns sync.Map
	// occupancy memoizes hip.Device.ActiveBlocks per kernel (activeBlocks).
	occupancy sync.Map

	moduleLoads, moduleNs, ready, launches atomic.Int64
	closed                                 atomic.Bool
}

// Interface checks.
var (
	_ exec.Executor = (*Executor)(nil)
	_ exec.Resident = (*Executor)(nil)
	_ exec.Replayer = (*Executor)(nil)
)

func init() {
	exec.Register("rocm", func() (exec.Executor, error) {
		e, err := Open()
		if err != nil {
			return nil, err
		}
		return e, nil
	})
}

// Open opens the first GPU of the first platform with a device (hip.Load:
// AMD, then NVIDIA) and its runtime compiler. The error says why no GPU
// could be used.
func Open() (*Executor, error) { return OpenDevice(0) }

// DeviceCount is the number of GPUs of the first platform with a device
// (0 and the reason when there is none).
func DeviceCount() (int, error) {
	p, err := hip.Load()
	if err != nil {
		return 0, fmt.Errorf("rocm: %w", err)
	}
	return p.DeviceCount()
}

// OpenDevice opens GPU i (0 … DeviceCount()−1) of the first platform with
// a device: one executor per GPU, for a group over several (NewGroup).
func OpenDevice(i int) (*Executor, error) {
	p, err := hip.Load()
	if err != nil {
		return nil, fmt.Errorf("rocm: %w", err)
	}
	comp, err := p.Compiler()
	if err != nil {
		return nil, fmt.Errorf("rocm: %s platform has a device but no runtime compiler: %w", p.Name(), err)
	}
	if n, err := p.DeviceCount(); err == nil && (i < 0 || i >= n) {
		return nil, fmt.Errorf("rocm: device %d of the %s platform's %d", i, p.Name(), n)
	}
	dev, err := p.OpenDevice(i)
	if err != nil {
		return nil, fmt.Errorf("rocm: open %s device %d: %w", p.Name(), i, err)
	}
	e, err := newExecutor(dev, comp)
	if err != nil {
		dev.Close()
		return nil, err
	}
	return e, nil
}

func newExecutor(dev *hip.Device, comp hip.Compiler) (*Executor, error) {
	info := dev.Info()
	s, err := dev.NewStream()
	if err != nil {
		return nil, fmt.Errorf("rocm: create stream on %s: %w", info.Name, err)
	}
	e := &Executor{
		dev: dev, info: info, comp: comp, stream: s, codes: shared,
		target: codegen.Target{Platform: info.Platform, Arch: info.Arch, WaveSize: info.WaveSize},
		opts:   compileOptions(info.Platform, comp.Version()),
		mods:   map[string]*hip.Module{}, fns: map[string]hip.Function{},
		chlRev: chlRevX | chlRevY,
	}
	e.poison.Store(-1)
	e.runsAllKey = plan.KeyOf(e, runsAllKey{})
	// The counters kernels count their blocks in (kernels.Counters): zeroed
	// once here, left zero by every launch.
	cb := uint64(4 * kernels.CounterWords)
	if e.counters, err = dev.Malloc(cb); err == nil {
		if err = dev.MemsetD8(e.counters, 0, cb, s); err == nil {
			err = dev.Synchronize(s)
		}
		if err != nil {
			dev.Free(e.counters)
		}
	}
	if err != nil {
		dev.DestroyStream(s)
		return nil, fmt.Errorf("rocm: the kernels' counters on %s: %w", info.Name, err)
	}
	// The allocator's drain passes the stream gate (replay.go): it can run
	// under the allocator's lock, which a capturing run may wait for. A
	// drain during a capture fails that capture; the run goes step by step.
	e.alloc = newAllocator(dev, func() error { return dev.Synchronize(s) }, dev.MemInfo)
	open.Store(e, struct{}{})
	return e, nil
}

// open holds every executor until Close. A loaded hip.Module keeps its code
// object pinned (runtime.Pinner) until it is unloaded, and the runtime panics
// when it collects a Pinner that still pins: an executor dropped without
// Close must therefore never be collected. It lives (with its device memory)
// until the process exits, as it would in C.
var open sync.Map // *Executor → struct{}

// compileOptions are the options every kernel is compiled with: no
// contraction of a·b + c into a fused multiply-add, so that results match the
// CPU executor (which rounds every product) bit for bit. NVRTC 13 also gets
// -minimal (no implicit CUDA runtime headers: Loom's kernels use none) and
// -no-source-include, which halve its fixed cost per compile (one fused
// kernel on an H100: 25 → 13 ms; an empty one 12.7 → 8.0 ms).
func compileOptions(platform, version string) []string {
	if platform == hip.NVIDIA {
		opts := []string{"--fmad=false"}
		var major, minor int
		if _, err := fmt.Sscanf(version, "nvrtc %d.%d", &major, &minor); err == nil && major >= 13 {
			opts = append(opts, "-minimal", "-no-source-include")
		}
		return opts
	}
	return []string{"-ffp-contract=off"}
}

// Name is "rocm".
func (e *Executor) Name() string { return "rocm" }

// Info describes the device.
func (e *Executor) Info() hip.DeviceInfo { return e.info }

// Target is the code generation target of the device.
func (e *Executor) Target() codegen.Target { return e.target }

// Compiler is the runtime compiler kernels are compiled with.
func (e *Executor) Compiler() hip.Compiler { return e.comp }

func (e *Executor) String() string {
	return fmt.Sprintf("rocm executor %p (%s device %d: %s, %s)", e, e.info.Platform, e.info.Index, e.info.Name, e.info.Arch)
}

// Poison makes every later allocation of temporaries and outputs start with
// every byte set to b (a MemsetD8 queued before the memory is used), so that
// tests can tell elements a kernel never wrote. It returns e. It sets e
// for every run: runs that need different bytes at the same time use
// WithPoison views instead.
func (e *Executor) Poison(b byte) *Executor {
	e.poison.Store(int32(b))
	return e
}

// Stats is a snapshot of the executor's counters.
type Stats struct {
	Memory  AllocStats
	Kernels KernelStats
}

// Stats returns the allocator's and the kernel cache's counters.
func (e *Executor) Stats() Stats {
	k := e.codes.stats()
	k.ModuleLoads = e.moduleLoads.Load()
	k.ModuleTime = time.Duration(e.moduleNs.Load())
	k.KernelsReady = e.ready.Load()
	k.Launches = e.launches.Load()
	return Stats{Memory: e.alloc.stats(), Kernels: k}
}

// Trim returns every cached device block to the driver (after waiting for
// queued work) and reports how many bytes it returned.
func (e *Executor) Trim() (int64, error) { return e.alloc.trim() }

// AvailableBytes is the device's free memory plus the allocator's cached
// blocks (exec.MemoryBudget): the runner refuses a plan whose peak bytes
// exceed it before allocating anything.
//
// The device's free memory is queried again only when this executor's
// allocator has taken memory from the driver or given some back since the
// last query, or a second has passed: the query costs ~25 µs, a run of a
// decode step ~2 ms, and in a steady loop nothing changes. (Another
// process's allocations go unseen for up to that second; the budget is a
// guard against certain failure, and an allocation that fails anyway is
// an error, not a crash.)
func (e *Executor) AvailableBytes() (int64, error) {
	st := e.alloc.stats()
	c := &e.memInfo
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || st.Mallocs != c.mallocs || st.Frees != c.frees || time.Since(c.at) > time.Second {
		free, _, err := e.dev.MemInfo()
		if err != nil {
			return 0, err
		}
		c.free, c.mallocs, c.frees, c.at = int64(free), st.Mallocs, st.Frees, time.Now()
	}
	return c.free + st.Cached, nil
}

// memory is the executor's exec.Memory: a block of device memory.
type memory struct {
	e   *Executor
	blk *block
}

func (e *Executor) mem(m exec.Memory) (*memory, error) {
	mm, ok := m.(*memory)
	if !ok || mm == nil {
		return nil, fmt.Errorf("rocm: memory %T is not from a rocm executor", m)
	}
	if mm.e != e {
		return nil, fmt.Errorf("rocm: memory belongs to %v, not %v", mm.e, e)
	}
	return mm, nil
}

func (e *Executor) checkOpen() error {
	if e.closed.Load() {
		return errors.New("rocm: executor is closed")
	}
	return nil
}

// Alloc returns device memory for n bytes from the caching allocator;
// temporaries and outputs are poisoned when Poison is set.
func (e *Executor) Alloc(n int, kind plan.BufferKind) (exec.Memory, error) {
	return e.allocPoison(n, kind, e.poison.Load())
}

// Free returns memory to the allocator's cache. Work already queued on it
// finishes first (one stream orders everything).
func (e *Executor) Free(m exec.Memory) {
	if mm, err := e.mem(m); err == nil {
		e.alloc.release(mm.blk)
	}
}

// Upload copies a host tensor into new device memory; the copy is finished
// when Upload returns.
func (e *Executor) Upload(t *tensor.Tensor) (exec.Memory, error) {
	src := t.Bytes()
	m, err := e.Alloc(len(src), plan.BufInput)
	if err != nil {
		return nil, err
	}
	if len(src) > 0 {
		mm := m.(*memory)
		leave := e.enter(nil)
		err := e.dev.MemcpyHtoD(mm.blk.ptr, unsafe.Pointer(&src[0]), uint64(len(src)), e.stream)
		leave()
		if err != nil {
			e.Free(m)
			return nil, fmt.Errorf("rocm: upload %v: %w", t, err)
		}
	}
	return m, nil
}

// Release frees uploaded memory.
func (e *Executor) Release(m exec.Memory) { e.Free(m) }

// Download copies b's contents from device memory into a new host tensor,
// after the work queued before it (the copy is ordered on the stream and
// waits for it).
func (e *Executor) Download(m exec.Memory, b *plan.Buffer) (*tensor.Tensor, error) {
	mm, err := e.mem(m)
	if err != nil {
		return nil, err
	}
	return e.download(mm.blk, b.DType, b.Shape, false)
}

// Sync waits for all work queued on the executor's stream.
func (e *Executor) Sync() error {
	defer e.enter(nil)()
	if ev := e.timer.end.Load(); ev != nil { // DeviceTime: the end of the timed work
		if err := e.dev.Record(*ev, e.stream); err != nil {
			return fmt.Errorf("rocm: record timing event: %w", err)
		}
	}
	if err := e.dev.Synchronize(e.stream); err != nil {
		return fmt.Errorf("rocm: synchronize: %w", err)
	}
	return nil
}

// Wait is Sync that gives up when ctx is done (exec.Waiter): the run
// returns ctx's error at once while the queued kernels finish on the
// device. That is safe because every buffer the abandoned run frees goes
// back to the caching allocator, whose blocks are only handed to work
// queued later on the same stream, behind the abandoned kernels; the
// waiting goroutine ends when the stream drains.
func (e *Executor) Wait(ctx context.Context) error {
	if st := exec.RunStateOf(ctx); st != nil {
		if u, _ := st.Value(runCommsKey{e}).(*runComms); u != nil {
			return e.waitCollectives(ctx, u)
		}
	}
	if ctx.Done() == nil {
		return e.Sync()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("rocm: cancelled before waiting for the device: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Sync() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("rocm: cancelled while waiting for the device (the queued kernels finish in the background): %w", ctx.Err())
	}
}

// Close waits for queued work, returns cached memory, unloads the modules
// and releases the device. Memory still held (resident tensors) is released
// with the device's context; using the executor afterwards is an error. An
// executor that is never closed stays alive until the process exits.
func (e *Executor) Close() error {
	if e.closed.Swap(true) {
		return nil
	}
	defer open.Delete(e)
	errs := []error{e.Sync(), e.ProfileSteps(false), e.closeDNN(), e.closeGemm()}
	e.DropReplays()
	_, err := e.alloc.trim()
	errs = append(errs, err)
	e.modMu.Lock()
	for _, m := range e.mods {
		errs = append(errs, e.dev.UnloadModule(m))
	}
	clear(e.mods)
	clear(e.fns)
	e.modMu.Unlock()
	e.timer.mu.Lock()
	if e.timer.start != 0 {
		errs = append(errs, e.dev.DestroyEvent(e.timer.start))
		e.timer.start = 0
	}
	e.timer.mu.Unlock()
	errs = append(errs, e.closeEvents(), e.closeStage(), e.dev.Free(e.counters), e.dev.DestroyStream(e.stream), e.dev.Close())
	return errors.Join(errs...)
}

// kernel is a plan kernel prepared for this executor: its generated source's
// launches with their loaded functions. It is kept in plan.Kernel.Cache
// under the executor.
type kernel struct {
	launches []launch
	scratch  int64   // bytes of scratch memory the launches share (0: none)
	empty    bool    // no output elements: nothing to launch
	need     []int64 // bytes each operand's layout reaches (then the output)
}

// launch is one kernel launch of a step.
type launch struct {
	fn    hip.Function
	grid  [3]uint32
	block [3]uint32
}

// Run queues one step on the stream: the step's launches (one, or two for a
// two-stage row reduction, which also get a scratch buffer from the
// allocator for the step), generated by codegen and compiled on first use.
// It does not wait for the kernels.
func (e *Executor) Run(ctx context.Context, s *plan.Step, mem []exec.Memory) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	defer e.enter(ctx)()
	if p := e.prof.Load(); p != nil {
		return e.profiledRun(ctx, p, s, mem)
	}
	return e.run(ctx, s, mem)
}

func (e *Executor) run(ctx context.Context, s *plan.Step, mem []exec.Memory) error {
	k := s.Kernel
	if isIndexKernel(k) {
		return e.runIndex(ctx, k, mem)
	}
	if k.IsMatmul() {
		return e.runMatmul(k, mem)
	}
	if k.IsFusedMatmul() {
		return e.runFusedMatmul(ctx, k, mem)
	}
	if k.IsFusedConv() {
		return e.runFusedConv(ctx, k, mem)
	}
	if k.IsFusedQMatmul() {
		return e.runFusedQMatmul(ctx, k, mem)
	}
	if k.IsFusedDequant() {
		return e.runFusedDequant(ctx, k, mem)
	}
	if k.IsWindow() {
		return e.runWindow(ctx, k, mem)
	}
	if k.IsQuant() {
		return e.runQuant(k, mem)
	}
	if k.IsCollective() {
		return e.runCollective(ctx, k, mem)
	}
	kp, err := e.prepare(k)
	if err != nil {
		return err
	}
	if kp.empty {
		return nil
	}
	var args hip.Args
	ptr := func(b *plan.Buffer, need int64) error {
		mm, err := e.mem(mem[b.ID])
		if err != nil {
			return fmt.Errorf("buffer b%d: %w", b.ID, err)
		}
		if !mm.blk.live {
			return fmt.Errorf("buffer b%d: memory was freed", b.ID)
		}
		if mm.blk.n < need {
			return fmt.Errorf("buffer b%d: kernel reaches %d bytes of a %d-byte allocation", b.ID, need, mm.blk.n)
		}
		args.Ptr(mm.blk.ptr)
		return nil
	}
	for i, op := range k.Ins {
		if err := ptr(op.Buf, kp.need[i]); err != nil {
			return fmt.Errorf("rocm: kernel %s operand %d: %w", k.Name, i, err)
		}
	}
	if err := ptr(k.Out, kp.need[len(k.Ins)]); err != nil {
		return fmt.Errorf("rocm: kernel %s output: %w", k.Name, err)
	}
	if kp.scratch > 0 {
		// Released once the launches are queued: the one stream orders
		// every later use of the block after them.
		sb, err := e.alloc.alloc(kp.scratch)
		if err != nil {
			return fmt.Errorf("rocm: kernel %s: scratch of %d bytes: %w", k.Name, kp.scratch, err)
		}
		defer e.releaseScratch(sb)
		args.Ptr(sb.ptr)
	}
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	for _, l := range kp.launches {
		if err := e.launchDep(l.fn, l.grid, l.block, 0, &args); err != nil {
			return fmt.Errorf("rocm: launch %s (grid %v, block %v): %w", k.Name, l.grid, l.block, err)
		}
		e.launches.Add(1)
	}
	return nil
}

// prepare returns k's prepared form, from k.Cache or by generating,
// compiling (or finding in the code cache) and loading it.
func (e *Executor) prepare(k *plan.Kernel) (*kernel, error) {
	if v, ok := k.Cache.Load(plan.KeyOf(e, nil)); ok {
		return v.(*kernel), nil
	}
	kp, err := e.build(k)
	if err != nil {
		return nil, err
	}
	v, _ := k.Cache.LoadOrStore(plan.KeyOf(e, nil), kp)
	return v.(*kernel), nil
}

func (e *Executor) build(k *plan.Kernel) (*kernel, error) {
	kp := &kernel{}
	for _, op := range k.Ins {
		_, hi := op.Layout.Span()
		if op.Layout.Numel() == 0 {
			hi = 0
		}
		kp.need = append(kp.need, int64(hi)*int64(op.Buf.DType.Size()))
	}
	kp.need = append(kp.need, int64(k.Out.Bytes()))
	if k.Out.Numel() == 0 { // a row kernel over empty rows still writes its row values
		kp.empty = true
		return kp, nil
	}
	src, obj, err := e.compileKernel(k)
	if err != nil {
		return nil, err
	}
	for _, l := range src.Launches {
		fn, err := e.function(obj, l.Name)
		if err != nil {
			return nil, err
		}
		kp.launches = append(kp.launches, launch{fn: fn, grid: l.Grid, block: l.Block})
	}
	kp.scratch = src.ScratchBytes
	e.ready.Add(1)
	return kp, nil
}

// compileKernel generates k's source and finds its code object in the
// code cache (memory, then disk) or compiles it. It needs the compiler but
// not the device. With LOOM_DUMP set it writes the source and the compile
// log there.
func (e *Executor) compileKernel(k *plan.Kernel) (*codegen.Source, *codeObject, error) {
	src, err := e.source(k)
	if err != nil {
		return nil, nil, fmt.Errorf("rocm: generate kernel %s: %w", k.Name, err)
	}
	want := len(k.Ins) + 1
	if src.ScratchBytes > 0 {
		want++
	}
	if len(src.Params) != want {
		return nil, nil, fmt.Errorf("rocm: kernel %s: generated source takes %d parameters, want %d (operands, output and scratch)", src.Name, len(src.Params), want)
	}
	if len(src.Launches) == 0 {
		return nil, nil, fmt.Errorf("rocm: kernel %s: generated source has no launch", src.Name)
	}
	for _, l := range src.Launches {
		for d := range 3 {
			if l.Grid[d] == 0 || l.Block[d] == 0 {
				return nil, nil, fmt.Errorf("rocm: kernel %s: generated launch %s grid %v, block %v has a zero dimension", src.Name, l.Name, l.Grid, l.Block)
			}
		}
	}
	dump := os.Getenv(DumpEnv)
	if dump != "" {
		writeDump(dump, src.Name+".hip", src.Code)
	}
	obj, how, err := e.codes.get(e.comp, CacheDir(), src.Code, src.Name, e.info.Arch, e.opts)
	if dump != "" {
		writeDump(dump, src.Name+".log", dumpLog(e, src.Name, obj, how, err))
	}
	if err != nil {
		return nil, nil, err
	}
	return src, obj, nil
}

// function returns the function name of a code object, loading the module
// once per executor.
func (e *Executor) function(obj *codeObject, name string) (hip.Function, error) {
	e.modMu.Lock()
	defer e.modMu.Unlock()
	if err := e.checkOpen(); err != nil {
		return hip.Function{}, err
	}
	fk := obj.key + "\x00" + name
	if f, ok := e.fns[fk]; ok {
		return f, nil
	}
	m := e.mods[obj.key]
	if m == nil {
		t0 := time.Now()
		var err error
		m, err = e.dev.LoadModule(obj.code)
		if err != nil {
			return hip.Function{}, fmt.Errorf("rocm: load module of kernel %s (%d bytes): %w", name, len(obj.code), err)
		}
		e.moduleLoads.Add(1)
		e.moduleNs.Add(int64(time.Since(t0)))
		e.mods[obj.key] = m
	}
	f, err := m.Function(name)
	if err != nil {
		return hip.Function{}, fmt.Errorf("rocm: kernel %s: %w", name, err)
	}
	e.fns[fk] = f
	return f, nil
}

// writeDump writes one LOOM_DUMP file; failures are reported on stderr
// (dumps are a debugging aid, never a reason to fail a run).
func writeDump(dir, name, text string) {
	if err := writeAtomic(filepath.Join(dir, name), []byte(text)); err != nil {
		fmt.Fprintf(os.Stderr, "loom: %s: %v\n", DumpEnv, err)
	}
}

func dumpLog(e *Executor, name string, obj *codeObject, how string, err error) string {
	s := fmt.Sprintf("kernel %s\ncompiler %s, arch %s, options %q\n", name, e.comp.Version(), e.info.Arch, e.opts)
	switch {
	case err != nil:
		return s + "result: FAILED\n" + err.Error() + "\n"
	case how == fromCompile:
		return s + "result: compiled\n--- log ---\n" + obj.log + "\n"
	}
	return s + "result: code object from the " + how + " cache (no compile, no log)\n"
}

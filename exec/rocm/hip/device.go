package hip

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Stream is a queue of device work. The zero Stream is the platform's default
// (legacy NULL) stream; streams from NewStream synchronize with it.
type Stream uintptr

// Event marks a point in a stream, for timing and synchronization.
type Event uintptr

// runtimeAPI is the part of the driver API the two platforms share: libcuda
// and libamdhip64 expose the same shapes under different names (runtimeNames).
type runtimeAPI struct {
	status statusFunc

	malloc            cfunc[func(p *DevPtr, n uint64) int32]
	free              cfunc[func(p DevPtr) int32]
	htod              cfunc[func(dst DevPtr, src unsafe.Pointer, n uint64, s Stream) int32]
	dtoh              cfunc[func(dst unsafe.Pointer, src DevPtr, n uint64, s Stream) int32]
	dtod              cfunc[func(dst, src DevPtr, n uint64, s Stream) int32]
	memsetD8          cfunc[func(dst DevPtr, v uint8, n uint64, s Stream) int32]
	memsetD32         cfunc[func(dst DevPtr, v uint32, n uint64, s Stream) int32]
	streamCreate      cfunc[func(s *Stream, flags uint32) int32]
	streamSync        cfunc[func(s Stream) int32]
	streamDestroy     cfunc[func(s Stream) int32]
	moduleLoadData    cfunc[func(m *uintptr, image unsafe.Pointer) int32]
	moduleGetFunction cfunc[func(f *uintptr, m uintptr, name string) int32]
	moduleUnload      cfunc[func(m uintptr) int32]
	launchKernel      cfunc[func(f uintptr, gx, gy, gz, bx, by, bz, sharedMem uint32, s Stream, params, extra unsafe.Pointer) int32]
	eventCreate       cfunc[func(e *Event, flags uint32) int32]
	eventRecord       cfunc[func(e Event, s Stream) int32]
	eventSync         cfunc[func(e Event) int32]
	eventQuery        cfunc[func(e Event) int32]
	eventElapsed      cfunc[func(ms *float32, start, end Event) int32]
	eventDestroy      cfunc[func(e Event) int32]
	memGetInfo        cfunc[func(free, total *uint64) int32]
	occupancy         cfunc[func(blocks *int32, f uintptr, blockSize int32, sharedMem uint64) int32]
	// launchEx is cuLaunchKernelEx, bound where the platform has it
	// (NVIDIA; launchdep.go): only raw calls.
	launchEx cfunc[func() int32]

	graph graphAPI // optional (graph.go)
	host  hostAPI  // optional (pinned.go)
}

// runtimeNames are the symbols behind runtimeAPI on one platform.
type runtimeNames struct {
	malloc, free, htod, dtoh, dtod, memsetD8, memsetD32             string
	streamCreate, streamSync, streamDestroy                         string
	moduleLoadData, moduleGetFunction, moduleUnload, launchKernel   string
	eventCreate, eventRecord, eventSync, eventElapsed, eventDestroy string
	eventQuery                                                      string
	memGetInfo, occupancy                                           string
}

func (a *runtimeAPI) bind(b *binder, n runtimeNames) {
	bind(b, &a.malloc, n.malloc)
	bind(b, &a.free, n.free)
	bind(b, &a.htod, n.htod)
	bind(b, &a.dtoh, n.dtoh)
	bind(b, &a.dtod, n.dtod)
	bind(b, &a.memsetD8, n.memsetD8)
	bind(b, &a.memsetD32, n.memsetD32)
	bind(b, &a.streamCreate, n.streamCreate)
	bind(b, &a.streamSync, n.streamSync)
	bind(b, &a.streamDestroy, n.streamDestroy)
	bind(b, &a.moduleLoadData, n.moduleLoadData)
	bind(b, &a.moduleGetFunction, n.moduleGetFunction)
	bind(b, &a.moduleUnload, n.moduleUnload)
	bind(b, &a.launchKernel, n.launchKernel)
	bind(b, &a.eventCreate, n.eventCreate)
	bind(b, &a.eventRecord, n.eventRecord)
	bind(b, &a.eventSync, n.eventSync)
	bind(b, &a.eventQuery, n.eventQuery)
	bind(b, &a.eventElapsed, n.eventElapsed)
	bind(b, &a.eventDestroy, n.eventDestroy)
	bind(b, &a.memGetInfo, n.memGetInfo)
	bind(b, &a.occupancy, n.occupancy)
}

// Device is one opened GPU. It is safe for concurrent use: the vendor APIs
// are thread-safe, so calls run in parallel under a read lock; only Close and
// UnloadModule take the lock exclusively.
//
// The current device/context is per OS thread in both APIs and goroutines
// migrate between threads, so every call locks its goroutine to its thread,
// makes the device current there (cuCtxSetCurrent of the device's primary
// context, or hipSetDevice: both only set a thread-local) and then makes the
// call.
type Device struct {
	api        *runtimeAPI
	info       DeviceInfo
	setCurrent func() error // makes the device current on the calling thread
	launchDep  bool         // LaunchDep launches with programmatic dependence
	release    func() error // undoes OpenDevice's acquisition; nil if none

	mu     sync.RWMutex
	closed bool
}

// Module is a code object loaded on a device.
type Module struct {
	d *Device
	h uintptr // 0 once unloaded
	// image is the module's copy of the code object, kept until
	// UnloadModule: hipModuleLoadData may refer to the image after it
	// returns. It lives in an anonymous mapping, outside the Go heap, so a
	// Module that is dropped without UnloadModule leaks the mapping but
	// never trips the runtime's check for pinned memory left pinned.
	image []byte
}

// Function is a kernel of a loaded module.
type Function struct {
	m    *Module
	h    uintptr
	name string
}

// Name is the kernel's symbol name.
func (f Function) Name() string { return f.name }

// do runs call with the device current on a locked OS thread, under the read
// lock.
func (d *Device) do(call func(a *runtimeAPI) error) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.call(call)
}

// doExclusive is do under the write lock.
func (d *Device) doExclusive(call func(a *runtimeAPI) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.call(call)
}

func (d *Device) call(call func(a *runtimeAPI) error) error {
	if d.closed {
		return ErrClosed
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.setCurrent(); err != nil {
		return err
	}
	if t := tracer.Load(); t != nil {
		start := time.Now()
		defer func() {
			d := time.Since(start) // before naming the caller: the frame walk is not the call's time
			t.add(callerName(), d)
		}()
	}
	return call(d.api)
}

// Info describes the device.
func (d *Device) Info() DeviceInfo { return d.info }

// Malloc allocates n bytes of device memory.
func (d *Device) Malloc(n uint64) (DevPtr, error) {
	var p DevPtr
	err := d.do(func(a *runtimeAPI) error { return a.status(a.malloc.name, a.malloc.fn(&p, n)) })
	return p, err
}

// Free releases memory from Malloc.
func (d *Device) Free(p DevPtr) error {
	return d.do(func(a *runtimeAPI) error { return a.status(a.free.name, a.free.fn(p)) })
}

// MemcpyHtoD copies n bytes from host memory at src to dst. The copy is
// ordered on s, and MemcpyHtoD waits for s to drain before returning, so src
// (typically ordinary, pageable Go memory) may be reused at once.
func (d *Device) MemcpyHtoD(dst DevPtr, src unsafe.Pointer, n uint64, s Stream) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(src)
	return d.do(func(a *runtimeAPI) error {
		if err := a.status(a.htod.name, a.htod.fn(dst, src, n, s)); err != nil {
			return err
		}
		return a.status(a.streamSync.name, a.streamSync.fn(s))
	})
}

// MemcpyDtoH copies n bytes from src to host memory at dst. The copy is
// ordered on s, and MemcpyDtoH waits for s to drain before returning, so dst
// holds the data when it returns.
func (d *Device) MemcpyDtoH(dst unsafe.Pointer, src DevPtr, n uint64, s Stream) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(dst)
	return d.do(func(a *runtimeAPI) error {
		if err := a.status(a.dtoh.name, a.dtoh.fn(dst, src, n, s)); err != nil {
			return err
		}
		return a.status(a.streamSync.name, a.streamSync.fn(s))
	})
}

// MemcpyDtoD enqueues a copy of n bytes from src to dst on s; it does not wait.
func (d *Device) MemcpyDtoD(dst, src DevPtr, n uint64, s Stream) error {
	return d.do(func(a *runtimeAPI) error { return a.status(a.dtod.name, a.dtod.fn(dst, src, n, s)) })
}

// MemsetD8 enqueues setting n bytes at dst to v on s; it does not wait.
func (d *Device) MemsetD8(dst DevPtr, v byte, n uint64, s Stream) error {
	return d.do(func(a *runtimeAPI) error { return a.status(a.memsetD8.name, a.memsetD8.fn(dst, v, n, s)) })
}

// MemsetD32 enqueues setting n 32-bit words (4n bytes) at dst to v on s; it
// does not wait. dst must be 4-byte aligned.
func (d *Device) MemsetD32(dst DevPtr, v uint32, n uint64, s Stream) error {
	return d.do(func(a *runtimeAPI) error { return a.status(a.memsetD32.name, a.memsetD32.fn(dst, v, n, s)) })
}

// NewStream creates a stream with default flags (it synchronizes with the
// default stream).
func (d *Device) NewStream() (Stream, error) {
	var s Stream
	err := d.do(func(a *runtimeAPI) error { return a.status(a.streamCreate.name, a.streamCreate.fn(&s, 0)) })
	return s, err
}

// Synchronize waits until all work enqueued on s has completed.
func (d *Device) Synchronize(s Stream) error {
	return d.do(func(a *runtimeAPI) error { return a.status(a.streamSync.name, a.streamSync.fn(s)) })
}

// DestroyStream destroys a stream from NewStream.
func (d *Device) DestroyStream(s Stream) error {
	return d.do(func(a *runtimeAPI) error { return a.status(a.streamDestroy.name, a.streamDestroy.fn(s)) })
}

// LoadModule loads a code object from Compiler.Compile (a CUBIN on NVIDIA, an
// AMDGPU ELF or offload bundle on AMD). The module keeps its own copy of code.
func (d *Device) LoadModule(code []byte) (*Module, error) {
	if len(code) == 0 {
		return nil, errors.New("hip: LoadModule: empty code object")
	}
	image, err := syscall.Mmap(-1, 0, len(code), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("hip: LoadModule: mapping %d bytes for the code object: %w", len(code), err)
	}
	copy(image, code)
	m := &Module{d: d, image: image}
	err = d.do(func(a *runtimeAPI) error {
		return a.status(a.moduleLoadData.name, a.moduleLoadData.fn(&m.h, unsafe.Pointer(&m.image[0])))
	})
	if err != nil {
		_ = syscall.Munmap(image)
		return nil, err
	}
	return m, nil
}

// Function looks up a kernel by its symbol name (declare kernels extern "C"
// so that the name is not mangled).
func (m *Module) Function(name string) (Function, error) {
	f := Function{m: m, name: name}
	err := m.d.do(func(a *runtimeAPI) error {
		if m.h == 0 {
			return fmt.Errorf("hip: Function(%q): module is unloaded", name)
		}
		return a.status(a.moduleGetFunction.name, a.moduleGetFunction.fn(&f.h, m.h, name))
	})
	return f, err
}

// UnloadModule unloads m; its Functions become invalid.
func (d *Device) UnloadModule(m *Module) error {
	if m.d != d {
		return errors.New("hip: UnloadModule: module belongs to another device")
	}
	return d.doExclusive(func(a *runtimeAPI) error {
		if m.h == 0 {
			return errors.New("hip: UnloadModule: module is already unloaded")
		}
		err := a.status(a.moduleUnload.name, a.moduleUnload.fn(m.h))
		m.h = 0
		if uerr := syscall.Munmap(m.image); err == nil && uerr != nil {
			err = fmt.Errorf("hip: UnloadModule: unmapping the code object: %w", uerr)
		}
		m.image = nil
		return err
	})
}

// Launch enqueues f on s with a grid of grid blocks of block threads each,
// sharedMem bytes of dynamic shared memory and the kernel arguments args
// (nil: none). It does not wait for the kernel; args may be reused as soon as
// Launch returns, because the launch copies the argument values.
func (d *Device) Launch(f Function, grid, block [3]uint32, sharedMem uint32, s Stream, args *Args) error {
	return d.launch("Launch", false, f, grid, block, sharedMem, s, args)
}

// launch is Launch, and with dep LaunchDep's cuLaunchKernelEx with
// programmatic stream serialization (launchdep.go); op names the caller in
// errors.
func (d *Device) launch(op string, dep bool, f Function, grid, block [3]uint32, sharedMem uint32, s Stream, args *Args) error {
	if f.m == nil || f.m.d != d {
		return fmt.Errorf("hip: %s(%q): function does not belong to this device", op, f.name)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	params := args.kernelParams(&pin)
	var cfg *launchConfig
	if dep {
		cfg = depConfig(grid, block, sharedMem, s, &pin)
	}
	return d.do(func(a *runtimeAPI) error {
		if f.m.h == 0 {
			return fmt.Errorf("hip: %s(%q): module is unloaded", op, f.name)
		}
		if dep {
			return a.status(a.launchEx.name, a.launchEx.raw(uintptr(unsafe.Pointer(cfg)), f.h, uintptr(params), 0))
		}
		rc := a.launchKernel.raw(f.h, uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
			uintptr(block[0]), uintptr(block[1]), uintptr(block[2]), uintptr(sharedMem), uintptr(s), uintptr(params), 0)
		return a.status(a.launchKernel.name, rc)
	})
}

// ActiveBlocks is how many blocks of f, each of blockSize threads with
// sharedMem bytes of dynamic shared memory, one multiprocessor holds at
// once (cuOccupancyMaxActiveBlocksPerMultiprocessor,
// hipModuleOccupancyMaxActiveBlocksPerMultiprocessor): for kernels whose
// blocks stay resident and walk their work (grid-stride loops).
func (d *Device) ActiveBlocks(f Function, blockSize int, sharedMem uint64) (int, error) {
	if f.m == nil || f.m.d != d {
		return 0, fmt.Errorf("hip: ActiveBlocks(%q): function does not belong to this device", f.name)
	}
	var n int32
	err := d.do(func(a *runtimeAPI) error {
		return a.status(a.occupancy.name, a.occupancy.fn(&n, f.h, int32(blockSize), sharedMem))
	})
	return int(n), err
}

// NewEvent creates an event that records timing.
func (d *Device) NewEvent() (Event, error) {
	var e Event
	err := d.do(func(a *runtimeAPI) error { return a.status(a.eventCreate.name, a.eventCreate.fn(&e, 0)) })
	return e, err
}

// Record enqueues e on s.
func (d *Device) Record(e Event, s Stream) error {
	return d.do(func(a *runtimeAPI) error { return a.status(a.eventRecord.name, a.eventRecord.fn(e, s)) })
}

// EventSynchronize waits until e has completed.
func (d *Device) EventSynchronize(e Event) error {
	return d.do(func(a *runtimeAPI) error { return a.status(a.eventSync.name, a.eventSync.fn(e)) })
}

// EventQuery reports whether e has completed, without waiting
// (cuEventQuery, hipEventQuery: "not ready" is false, not an error).
func (d *Device) EventQuery(e Event) (bool, error) {
	var done bool
	err := d.do(func(a *runtimeAPI) error {
		switch rc := a.eventQuery.fn(e); rc {
		case 0:
			done = true
			return nil
		case errNotReady:
			return nil
		default:
			return a.status(a.eventQuery.name, rc)
		}
	})
	return done, err
}

// errNotReady is CUDA_ERROR_NOT_READY and hipErrorNotReady (both 600).
const errNotReady = 600

// ElapsedMs is the time in milliseconds between two completed events.
func (d *Device) ElapsedMs(start, end Event) (float32, error) {
	var ms float32
	err := d.do(func(a *runtimeAPI) error { return a.status(a.eventElapsed.name, a.eventElapsed.fn(&ms, start, end)) })
	return ms, err
}

// DestroyEvent destroys an event from NewEvent.
func (d *Device) DestroyEvent(e Event) error {
	return d.do(func(a *runtimeAPI) error { return a.status(a.eventDestroy.name, a.eventDestroy.fn(e)) })
}

// MemInfo reports the free and total device memory in bytes.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.do(func(a *runtimeAPI) error { return a.status(a.memGetInfo.name, a.memGetInfo.fn(&free, &total)) })
	return free, total, err
}

// Close releases the device (NVIDIA: the primary-context reference taken by
// OpenDevice; dropping the last one destroys the context and everything
// allocated in it). Later calls return ErrClosed; Close itself is idempotent.
// Close does not free memory, streams, events or modules: do that first.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	if d.release == nil {
		return nil
	}
	return d.release()
}

package hip

import (
	"errors"
	"fmt"
	"unsafe"
)

// Pinned host memory: page-locked host memory the device copies to and
// from directly (cuMemHostAlloc, hipHostMalloc). A copy between the device
// and ordinary (pageable) memory is staged by the driver through its own
// pinned buffers, at a fraction of the bus's speed: a decode step's 513 KB
// of f32 logits came down in ~70 µs that way. Copies through a pinned
// buffer of Loom's own run at the bus's speed, the staging copy in host
// memory being the cheaper part.
//
// The entry points are optional, like the graph API: a runtime without
// them copies through pageable memory, and Device.CanPin says why.

// hostAPI is the pinned-memory part of the runtime, bound apart from
// runtimeAPI so that a runtime lacking it only loses pinned copies.
type hostAPI struct {
	err   error // why pinned memory is unavailable (nil: bound)
	alloc cfunc[func(p *unsafe.Pointer, n uint64, flags uint32) int32]
	free  cfunc[func(p unsafe.Pointer) int32]
}

// hostNames are the symbols behind hostAPI on one platform.
type hostNames struct{ alloc, free string }

var (
	cudaHostNames = hostNames{alloc: "cuMemHostAlloc", free: "cuMemFreeHost"}
	hipHostNames  = hostNames{alloc: "hipHostMalloc", free: "hipHostFree"}
)

func (h *hostAPI) bind(lib uintptr, path string, n hostNames) {
	b := &binder{lib: lib, path: path}
	bind(b, &h.alloc, n.alloc)
	bind(b, &h.free, n.free)
	if err := b.err(); err != nil {
		h.err = fmt.Errorf("hip: no pinned host memory: %w", err)
	}
}

// CanPin returns nil when the runtime allocates pinned host memory, or why
// it does not.
func (d *Device) CanPin() error { return d.api.host.err }

// HostAlloc allocates n bytes (n > 0) of pinned host memory, outside the Go
// heap: the caller frees it with HostFree before the device is closed.
func (d *Device) HostAlloc(n uint64) ([]byte, error) {
	if err := d.api.host.err; err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("hip: pinned host memory of 0 bytes")
	}
	var p unsafe.Pointer
	err := d.do(func(a *runtimeAPI) error { return a.status(a.host.alloc.name, a.host.alloc.fn(&p, n, 0)) })
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// HostFree frees memory from HostAlloc.
func (d *Device) HostFree(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := d.api.host.err; err != nil {
		return err
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	return d.do(func(a *runtimeAPI) error { return a.status(a.host.free.name, a.host.free.fn(p)) })
}

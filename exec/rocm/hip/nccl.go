package hip

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Collectives: the platform's collective library, NCCL on NVIDIA
// (libnccl.so.2) and RCCL on AMD (librccl.so.1, the same API under the
// same names), loaded at run time with purego like the BLAS. No transport
// of Loom's own: the library moves the data (NVLink, PCIe, the network).
//
// A communicator (Comm) joins one device to a group of nranks ranks; its
// calls queue on a stream of that device and return at once. It is set up
// once: InitAll for one process driving several GPUs (ncclCommInitAll),
// or UniqueID + InitRank for one process per GPU, the caller handing the
// id to every rank by any means (so any launcher works). Errors: a call's
// status, and the asynchronous ones a communicator can raise later
// (network failures, a peer that died), which Comm.AsyncError polls; Wait
// waits for a stream while polling, so a failed peer never hangs the
// caller past its deadline (the communicator is then aborted).

// CommID is the library's ncclUniqueId: 128 opaque bytes, created by one
// rank (UniqueID) and given to all.
type CommID struct{ Internal [128]byte }

// CollType is an element type of a collective (ncclDataType_t; RCCL's
// values are the same).
type CollType int32

// The element types Loom's tensors use.
const (
	CollI8   CollType = 0
	CollU8   CollType = 1
	CollI32  CollType = 2
	CollU32  CollType = 3
	CollI64  CollType = 4
	CollU64  CollType = 5
	CollF16  CollType = 6
	CollF32  CollType = 7
	CollF64  CollType = 8
	CollBF16 CollType = 9
)

// Size is the element's size in bytes.
func (t CollType) Size() int {
	switch t {
	case CollI8, CollU8:
		return 1
	case CollF16, CollBF16:
		return 2
	case CollI32, CollU32, CollF32:
		return 4
	case CollI64, CollU64, CollF64:
		return 8
	}
	return 0
}

// RedOp is a reduction of AllReduce and ReduceScatter (ncclRedOp_t).
type RedOp int32

// Reductions.
const (
	RedSum  RedOp = 0
	RedProd RedOp = 1
	RedMax  RedOp = 2
	RedMin  RedOp = 3
	RedAvg  RedOp = 4
)

// ncclInProgress is the status of a non-blocking communicator still busy
// (ncclCommGetAsyncError's value while an operation is pending).
const ncclInProgress = 7

var ncclLibs = withCUDALibDir("libnccl.so.2")
var rcclLibs = []string{"librccl.so.1", "/opt/rocm/lib/librccl.so.1"}

type ncclAPI struct {
	path    string
	name    string // "nccl" or "rccl"
	version int    // NCCL_VERSION_CODE: major·10000 + minor·100 + patch

	getVersion    cfunc[func(v *int32) int32]
	getUniqueID   cfunc[func(id *CommID) int32]
	commInitRank  cfunc[func(c *uintptr, nranks int32, id CommID, rank int32) int32]
	commInitAll   cfunc[func(c *uintptr, ndev int32, devs *int32) int32]
	commDestroy   cfunc[func(c uintptr) int32]
	commAbort     cfunc[func(c uintptr) int32]
	commAsyncErr  cfunc[func(c uintptr, rc *int32) int32]
	commCount     cfunc[func(c uintptr, n *int32) int32]
	commUserRank  cfunc[func(c uintptr, r *int32) int32]
	errorString   cfunc[func(rc int32) *byte]
	lastError     cfunc[func(c uintptr) *byte]
	allReduce     cfunc[func(send, recv uintptr, count uint64, dt, op int32, c uintptr, s Stream) int32]
	broadcast     cfunc[func(send, recv uintptr, count uint64, dt, root int32, c uintptr, s Stream) int32]
	reduceScatter cfunc[func(send, recv uintptr, count uint64, dt, op int32, c uintptr, s Stream) int32]
	allGather     cfunc[func(send, recv uintptr, count uint64, dt int32, c uintptr, s Stream) int32]
	groupStart    cfunc[func() int32]
	groupEnd      cfunc[func() int32]

	status statusFunc
}

var ncclLoad struct {
	once sync.Once
	api  map[string]*ncclAPI
	err  map[string]error
}

// Collectives is the collective library of one platform, loaded once per
// process.
type Collectives struct{ api *ncclAPI }

// LoadCollectives loads the collective library of platform (NVIDIA: NCCL,
// AMD: RCCL). The error says why none could be used.
func LoadCollectives(platform string) (*Collectives, error) {
	ncclLoad.once.Do(func() {
		ncclLoad.api, ncclLoad.err = map[string]*ncclAPI{}, map[string]error{}
		for _, p := range []string{NVIDIA, AMD} {
			libs, name := ncclLibs, "nccl"
			if p == AMD {
				libs, name = rcclLibs, "rccl"
			}
			ncclLoad.api[p], ncclLoad.err[p] = loadNCCL(libs, name)
		}
	})
	api, ok := ncclLoad.api[platform]
	if !ok {
		return nil, fmt.Errorf("hip: no collective library for platform %q", platform)
	}
	if err := ncclLoad.err[platform]; err != nil {
		return nil, err
	}
	return &Collectives{api: api}, nil
}

func loadNCCL(libs []string, name string) (*ncclAPI, error) {
	h, path, err := dlopen(libs)
	if err != nil {
		return nil, fmt.Errorf("no %s: %v", strings.ToUpper(name), err)
	}
	a := &ncclAPI{path: path, name: name}
	b := &binder{lib: h, path: path}
	bind(b, &a.getVersion, "ncclGetVersion")
	bind(b, &a.getUniqueID, "ncclGetUniqueId")
	bind(b, &a.commInitRank, "ncclCommInitRank")
	bind(b, &a.commInitAll, "ncclCommInitAll")
	bind(b, &a.commDestroy, "ncclCommDestroy")
	bind(b, &a.commAbort, "ncclCommAbort")
	bind(b, &a.commAsyncErr, "ncclCommGetAsyncError")
	bind(b, &a.commCount, "ncclCommCount")
	bind(b, &a.commUserRank, "ncclCommUserRank")
	bind(b, &a.errorString, "ncclGetErrorString")
	bind(b, &a.allReduce, "ncclAllReduce")
	bind(b, &a.broadcast, "ncclBroadcast")
	bind(b, &a.reduceScatter, "ncclReduceScatter")
	bind(b, &a.allGather, "ncclAllGather")
	bind(b, &a.groupStart, "ncclGroupStart")
	bind(b, &a.groupEnd, "ncclGroupEnd")
	if err := b.err(); err != nil {
		return nil, err
	}
	// ncclGetLastError (2.13+) explains a failure in words; optional, so
	// its binder's error is ignored.
	bind(&binder{lib: h, path: path}, &a.lastError, "ncclGetLastError")
	a.status = newStatusFunc(func(rc int32) string { return cString(a.errorString.fn(rc)) })
	var v int32
	if err := a.status(a.getVersion.name, a.getVersion.fn(&v)); err != nil {
		return nil, err
	}
	a.version = int(v)
	return a, nil
}

// Name names the library, its version and path, e.g. "nccl 2.28.3
// (/usr/lib/x86_64-linux-gnu/libnccl.so.2)".
func (c *Collectives) Name() string {
	v := c.api.version
	return fmt.Sprintf("%s %d.%d.%d (%s)", c.api.name, v/10000, v/100%100, v%100, c.api.path)
}

// UniqueID creates the id of a new group (ncclGetUniqueId): one rank calls
// it and hands the id to the others.
func (c *Collectives) UniqueID() (CommID, error) {
	var id CommID
	a := c.api
	err := a.status(a.getUniqueID.name, a.getUniqueID.fn(&id))
	return id, err
}

// Comm is one rank's communicator on one device.
type Comm struct {
	c      *Collectives
	d      *Device
	h      uintptr
	rank   int
	nranks int
	mu     sync.Mutex // calls on one communicator are serialised
}

// InitRank joins d to the group id as rank (of nranks), collectively: every
// rank must call it (from its own process or goroutine) before any
// returns.
func (c *Collectives) InitRank(d *Device, id CommID, nranks, rank int) (*Comm, error) {
	if nranks < 1 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("hip: %s: rank %d of %d ranks", c.api.name, rank, nranks)
	}
	a := c.api
	cm := &Comm{c: c, d: d, rank: rank, nranks: nranks}
	err := d.do(func(*runtimeAPI) error {
		return a.status(a.commInitRank.name, a.commInitRank.fn(&cm.h, int32(nranks), id, int32(rank)))
	})
	if err != nil {
		return nil, fmt.Errorf("hip: %s: rank %d of %d on %s: %w", a.name, rank, nranks, d.info.Name, err)
	}
	return cm, nil
}

// InitAll makes one communicator per device of devs, ranks in that order,
// from one process (ncclCommInitAll). The devices must be distinct GPUs of
// one platform.
func (c *Collectives) InitAll(devs []*Device) ([]*Comm, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("hip: %s: InitAll of no devices", c.api.name)
	}
	ords := make([]int32, len(devs))
	seen := map[int]bool{}
	for i, d := range devs {
		if seen[d.info.Index] {
			return nil, fmt.Errorf("hip: %s: InitAll: device %d given twice", c.api.name, d.info.Index)
		}
		seen[d.info.Index] = true
		ords[i] = int32(d.info.Index)
	}
	hs := make([]uintptr, len(devs))
	a := c.api
	// The library makes each device current itself; the first device's
	// context is current for the call.
	err := devs[0].do(func(*runtimeAPI) error {
		return a.status(a.commInitAll.name, a.commInitAll.fn(&hs[0], int32(len(devs)), &ords[0]))
	})
	if err != nil {
		return nil, fmt.Errorf("hip: %s: InitAll over %d devices: %w", a.name, len(devs), err)
	}
	out := make([]*Comm, len(devs))
	for i, d := range devs {
		out[i] = &Comm{c: c, d: d, h: hs[i], rank: i, nranks: len(devs)}
	}
	return out, nil
}

// Rank and Size are the communicator's rank and its group's size.
func (cm *Comm) Rank() int { return cm.rank }
func (cm *Comm) Size() int { return cm.nranks }

// Device is the communicator's device.
func (cm *Comm) Device() *Device { return cm.d }

// call runs one library call with the communicator's device current and
// turns its status into an error naming what and the library's last words.
func (cm *Comm) call(what string, f func(a *ncclAPI) int32) error {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if cm.h == 0 {
		return fmt.Errorf("hip: %s: %s on a destroyed communicator", cm.c.api.name, what)
	}
	a := cm.c.api
	return cm.d.do(func(*runtimeAPI) error {
		rc := f(a)
		if rc == 0 {
			return nil
		}
		err := a.status(what, rc)
		if a.lastError.sym != 0 {
			if s := cString(a.lastError.fn(cm.h)); s != "" {
				err = fmt.Errorf("%w: %s", err, s)
			}
		}
		return fmt.Errorf("hip: %s rank %d/%d: %w", a.name, cm.rank, cm.nranks, err)
	})
}

// checkColl rejects an element type the library does not know and a
// buffer size that overflows.
func checkColl(what string, count int, t CollType) error {
	if t.Size() == 0 {
		return fmt.Errorf("hip: %s: unknown element type %d", what, t)
	}
	if count < 0 || uint64(count) > (1<<62)/uint64(t.Size()) {
		return fmt.Errorf("hip: %s: %d elements", what, count)
	}
	return nil
}

// AllReduce queues recv[i] = op over ranks of send[i] (count elements) on
// s. send and recv may be the same buffer (in place).
func (cm *Comm) AllReduce(send, recv DevPtr, count int, t CollType, op RedOp, s Stream) error {
	if err := checkColl("AllReduce", count, t); err != nil {
		return err
	}
	return cm.call("ncclAllReduce", func(a *ncclAPI) int32 {
		return a.allReduce.fn(uintptr(send), uintptr(recv), uint64(count), int32(t), int32(op), cm.h, s)
	})
}

// Broadcast queues recv = root's send (count elements) on every rank.
func (cm *Comm) Broadcast(send, recv DevPtr, count int, t CollType, root int, s Stream) error {
	if err := checkColl("Broadcast", count, t); err != nil {
		return err
	}
	if root < 0 || root >= cm.nranks {
		return fmt.Errorf("hip: Broadcast: root %d of %d ranks", root, cm.nranks)
	}
	return cm.call("ncclBroadcast", func(a *ncclAPI) int32 {
		return a.broadcast.fn(uintptr(send), uintptr(recv), uint64(count), int32(t), int32(root), cm.h, s)
	})
}

// ReduceScatter queues recv = block rank of (op over ranks of send): send
// holds Size()·count elements, recv count.
func (cm *Comm) ReduceScatter(send, recv DevPtr, count int, t CollType, op RedOp, s Stream) error {
	if err := checkColl("ReduceScatter", count, t); err != nil {
		return err
	}
	return cm.call("ncclReduceScatter", func(a *ncclAPI) int32 {
		return a.reduceScatter.fn(uintptr(send), uintptr(recv), uint64(count), int32(t), int32(op), cm.h, s)
	})
}

// AllGather queues recv = the ranks' send (count elements each)
// concatenated in rank order: recv holds Size()·count elements.
func (cm *Comm) AllGather(send, recv DevPtr, count int, t CollType, s Stream) error {
	if err := checkColl("AllGather", count, t); err != nil {
		return err
	}
	return cm.call("ncclAllGather", func(a *ncclAPI) int32 {
		return a.allGather.fn(uintptr(send), uintptr(recv), uint64(count), int32(t), cm.h, s)
	})
}

// Group runs f between ncclGroupStart and ncclGroupEnd, so that the
// collectives f queues on several communicators of this process (one per
// device, from InitAll) are launched together instead of each waiting for
// the others. The library requires it when one thread drives several
// ranks. Group end's error is returned after f's.
func (c *Collectives) Group(f func() error) error {
	a := c.api
	if err := a.status(a.groupStart.name, a.groupStart.fn()); err != nil {
		return err
	}
	ferr := f()
	gerr := a.status(a.groupEnd.name, a.groupEnd.fn())
	return errors.Join(ferr, gerr)
}

// AsyncError returns the communicator's asynchronous error, nil while
// there is none (or an operation is still in progress).
func (cm *Comm) AsyncError() error {
	var rc int32
	if err := cm.call("ncclCommGetAsyncError", func(a *ncclAPI) int32 { return a.commAsyncErr.fn(cm.h, &rc) }); err != nil {
		return err
	}
	if rc == 0 || rc == ncclInProgress {
		return nil
	}
	return fmt.Errorf("hip: %s rank %d/%d: asynchronous error: %w", cm.c.api.name, cm.rank, cm.nranks, cm.c.api.status("ncclCommGetAsyncError", rc))
}

// Wait waits until the work queued on s so far is done, polling the
// communicator's asynchronous error; at deadline (zero: none) or on an
// asynchronous error it aborts the communicator (which ends its pending
// operations) and returns the error. A failed peer therefore costs the
// caller at most its deadline.
func (cm *Comm) Wait(s Stream, deadline time.Time) error {
	ev, err := cm.d.NewEvent()
	if err != nil {
		return err
	}
	defer cm.d.DestroyEvent(ev)
	if err := cm.d.Record(ev, s); err != nil {
		return err
	}
	for pause := 20 * time.Microsecond; ; pause = min(2*pause, time.Millisecond) {
		done, err := cm.d.EventQuery(ev)
		if err != nil {
			return err
		}
		if done {
			return cm.AsyncError()
		}
		if err := cm.AsyncError(); err != nil {
			cm.Abort()
			return err
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			cm.Abort()
			return fmt.Errorf("hip: %s rank %d/%d: the collectives did not finish by the deadline; the communicator is aborted", cm.c.api.name, cm.rank, cm.nranks)
		}
		time.Sleep(pause)
	}
}

// Live reports whether the communicator can still be used: it has not
// been aborted or destroyed.
func (cm *Comm) Live() bool {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	return cm.h != 0
}

// Abort ends the communicator at once, abandoning pending operations
// (ncclCommAbort); it cannot be used afterwards.
func (cm *Comm) Abort() error {
	return cm.end("ncclCommAbort", func(a *ncclAPI) int32 { return a.commAbort.fn(cm.h) })
}

// Destroy frees the communicator after its pending operations
// (ncclCommDestroy). Destroying twice is a no-op.
func (cm *Comm) Destroy() error {
	return cm.end("ncclCommDestroy", func(a *ncclAPI) int32 { return a.commDestroy.fn(cm.h) })
}

func (cm *Comm) end(what string, f func(a *ncclAPI) int32) error {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if cm.h == 0 {
		return nil
	}
	a := cm.c.api
	err := cm.d.do(func(*runtimeAPI) error { return a.status(what, f(a)) })
	cm.h = 0
	return err
}

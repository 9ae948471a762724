package rocm

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/loomgraph/loom/exec/rocm/hip"
)

// Copies to the host go through a pinned staging buffer of the executor's
// own (hip.Device.HostAlloc), in chunks of at most stageBytes: the device
// writes pinned memory at the bus's speed, and the chunk is then copied
// into the caller's memory. Straight into Go memory, the driver stages the
// copy itself, far slower: a decode step's logits (128256 f32, 513 KB)
// took ~70 µs on the H200, and even a step's 4-byte token and error
// flags ~10 µs each. Without pinned memory (hip.Device.CanPin), copies go
// straight into the caller's memory as before.

// stageBytes is the staging buffer's size: the largest chunk one copy
// moves.
const stageBytes = 4 << 20

// stage is the executor's staging buffer, allocated on first use, and the
// side stream of the copies of finished work.
type stage struct {
	mu  sync.Mutex
	buf []byte // pinned; nil until first use or where pinning failed
	err error  // why there is no buffer (then copies go straight)
	// side is a second stream (made on first use) for copies of work known
	// to be done (doneToHost): on the executor's stream they would wait
	// for the work queued since, a pipelined run's successor.
	side hip.Stream
}

// toHost copies len(dst) bytes from src into dst, after the work queued on
// the executor's stream: through the staging buffer where there is one.
func (e *Executor) toHost(dst []byte, src hip.DevPtr) error {
	return e.copyToHost(dst, src, false)
}

// doneToHost is toHost for memory whose writers are known to be done (a
// wait for them returned): the copy goes on the side stream, not behind
// the work queued since.
func (e *Executor) doneToHost(dst []byte, src hip.DevPtr) error {
	return e.copyToHost(dst, src, true)
}

func (e *Executor) copyToHost(dst []byte, src hip.DevPtr, done bool) error {
	if len(dst) == 0 {
		return nil
	}
	st := &e.stage
	st.mu.Lock()
	defer st.mu.Unlock()
	s := e.stream
	if done {
		if st.side == 0 {
			side, err := e.dev.NewStream()
			if err != nil {
				return fmt.Errorf("rocm: a stream for copies of finished work: %w", err)
			}
			st.side = side
		}
		s = st.side
	}
	if st.buf == nil && st.err == nil {
		if st.err = e.dev.CanPin(); st.err == nil {
			st.buf, st.err = e.dev.HostAlloc(stageBytes)
		}
	}
	if st.buf == nil {
		return e.dev.MemcpyDtoH(unsafe.Pointer(&dst[0]), src, uint64(len(dst)), s)
	}
	for off := 0; off < len(dst); off += len(st.buf) {
		n := min(len(st.buf), len(dst)-off)
		if err := e.dev.MemcpyDtoH(unsafe.Pointer(&st.buf[0]), src+hip.DevPtr(off), uint64(n), s); err != nil {
			return err
		}
		copy(dst[off:off+n], st.buf[:n])
	}
	return nil
}

// closeStage frees the staging buffer and the side stream (Close).
func (e *Executor) closeStage() error {
	st := &e.stage
	st.mu.Lock()
	defer st.mu.Unlock()
	buf, side := st.buf, st.side
	st.buf, st.side, st.err = nil, 0, fmt.Errorf("rocm: executor is closed")
	var err error
	if side != 0 {
		err = e.dev.DestroyStream(side)
	}
	return errors.Join(err, e.dev.HostFree(buf))
}

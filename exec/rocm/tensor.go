package rocm

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// Tensor is a tensor resident in an executor's device memory: a contiguous
// row-major array. Plans run with exec.RunValues (or graph's
// Program.RunValues) with keep return their outputs as Tensors, and take
// Tensors of the same executor as inputs without a copy. A Tensor owns its
// memory until Free; it must not be freed while a run that reads it is in
// progress.
type Tensor struct {
	e     *Executor
	dt    dtype.DType
	shape []int

	mu  sync.Mutex
	blk *block // nil once freed
	// m is the memory Adopt hands out for blk, made on the first run that
	// reads the tensor: a weight is adopted by every run (a decode step
	// adopts hundreds), and the memory values are never changed.
	m *memory
}

var _ exec.ResidentValue = (*Tensor)(nil)

// DType is the element type.
func (t *Tensor) DType() dtype.DType { return t.dt }

// Shape returns a copy of the dims.
func (t *Tensor) Shape() []int { return slices.Clone(t.shape) }

// ShapeEqual reports whether the dims are shape's (exec.ShapeEqualer: a
// run checks every input's shape without copying it).
func (t *Tensor) ShapeEqual(shape []int) bool { return slices.Equal(t.shape, shape) }

// Numel is the number of elements.
func (t *Tensor) Numel() int { return tensor.Numel(t.shape) }

// Owner is the executor whose memory holds the tensor.
func (t *Tensor) Owner() exec.Executor { return t.e }

func (t *Tensor) String() string {
	return fmt.Sprintf("rocm.Tensor(%v, %v)", t.dt, t.shape)
}

// ToHost copies the tensor into a new host tensor, after the work queued
// before it.
func (t *Tensor) ToHost() (*tensor.Tensor, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blk == nil {
		return nil, fmt.Errorf("rocm: ToHost of %v: the tensor was freed", t)
	}
	return t.e.download(t.blk, t.dt, t.shape, false)
}

// Free returns the tensor's memory to its executor's cache. It is
// idempotent.
func (t *Tensor) Free() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blk != nil {
		t.e.alloc.release(t.blk)
		t.blk = nil
	}
}

// FromHost copies a host tensor into a new resident Tensor (weights that
// many runs read, for example).
func (e *Executor) FromHost(h *tensor.Tensor) (*Tensor, error) {
	m, err := e.Upload(h)
	if err != nil {
		return nil, err
	}
	return &Tensor{e: e, dt: h.DType(), shape: h.Shape(), blk: m.(*memory).blk}, nil
}

// Adopt returns the memory of a Tensor of this executor without a copy. A
// value that is not a Tensor of e is not adopted (ok false); a freed Tensor
// of e is an error.
func (e *Executor) Adopt(v exec.Value) (exec.Memory, bool, error) {
	t, ok := v.(*Tensor)
	if !ok || t == nil || t.e != e {
		return nil, false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blk == nil {
		return nil, false, fmt.Errorf("rocm: %v was freed", t)
	}
	if t.m == nil || t.m.blk != t.blk {
		t.m = &memory{e: e, blk: t.blk}
	}
	return t.m, true, nil
}

// Disown takes its memory away from a Tensor of e whose memory a run's
// output now holds (exec.Donate): the Tensor reads as freed from then on,
// and freeing it does nothing.
func (e *Executor) Disown(v exec.Value) error {
	t, ok := v.(*Tensor)
	if !ok || t == nil || t.e != e {
		return fmt.Errorf("rocm: disown %v: not a tensor of this executor", v)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.blk = nil
	return nil
}

// WriteHost implements exec.HostWriter: src's bytes into v's memory,
// ordered on the stream after the work queued before.
func (e *Executor) WriteHost(v exec.Value, src *tensor.Tensor) error {
	t, ok := v.(*Tensor)
	if !ok || t == nil || t.e != e {
		return fmt.Errorf("rocm: write host data into %v: not a tensor of this executor", v)
	}
	if src == nil {
		return fmt.Errorf("rocm: write host data into %v: nil tensor", t)
	}
	if src.DType() != t.dt || !slices.Equal(src.Shape(), t.shape) {
		return fmt.Errorf("rocm: write host data %v%v into %v: dtypes or shapes differ", src.DType(), src.Shape(), t)
	}
	if err := e.checkOpen(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blk == nil {
		return fmt.Errorf("rocm: write host data into %v: it was freed", t)
	}
	b := src.Bytes()
	if len(b) == 0 {
		return nil
	}
	leave := e.enter(nil)
	defer leave()
	if err := e.dev.MemcpyHtoD(t.blk.ptr, unsafe.Pointer(&b[0]), uint64(len(b)), e.stream); err != nil {
		return fmt.Errorf("rocm: write host data into %v: %w", t, err)
	}
	return nil
}

var _ exec.HostWriter = (*Executor)(nil)

var _ exec.Donor = (*Executor)(nil)

// Wrap hands output memory over to a resident Tensor holding buffer b.
func (e *Executor) Wrap(m exec.Memory, b *plan.Buffer) (exec.ResidentValue, error) {
	mm, err := e.mem(m)
	if err != nil {
		return nil, err
	}
	if mm.blk.n < int64(b.Bytes()) {
		return nil, fmt.Errorf("rocm: wrap %v: %d bytes of memory for %d bytes of data", b, mm.blk.n, b.Bytes())
	}
	return &Tensor{e: e, dt: b.DType, shape: slices.Clone(b.Shape), blk: mm.blk}, nil
}

// download copies a block into a new host tensor: after the work queued
// on the stream, or with done (its writers are known to be finished) on
// the side stream (doneToHost).
func (e *Executor) download(blk *block, dt dtype.DType, shape []int, done bool) (*tensor.Tensor, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	t, err := tensor.Zeros(dt, shape...)
	if err != nil {
		return nil, err
	}
	dst := t.Bytes()
	if len(dst) == 0 {
		return t, nil
	}
	if blk.n < int64(len(dst)) {
		return nil, fmt.Errorf("rocm: download %v%v: %d bytes of device memory for %d bytes", dt, shape, blk.n, len(dst))
	}
	leave := e.enter(nil)
	err = e.copyToHost(dst, blk.ptr, done)
	leave()
	if err != nil {
		return nil, fmt.Errorf("rocm: download %v%v: %w", dt, shape, err)
	}
	return t, nil
}

package cpu

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// Executor runs plans on the CPU with all cores. Its temporaries come from
// arenas it keeps between runs (arena.go); Close releases them.
type Executor struct {
	workers int
	poison  int     // -1: off; else the byte every new allocation is filled with
	arenas  *arenas // apart from the executor: its cleanup releases them
	// The host BLAS of matmul steps, opened on first use (matmul.go).
	blasOnce sync.Once
	blasHost blas.Host
	blasWhy  string
	// memLimit, when > 0, is SetMemLimit's limit (memlimit.go).
	memLimit atomic.Int64
}

// New returns a CPU executor using GOMAXPROCS workers.
func New() *Executor { return NewWithWorkers(runtime.GOMAXPROCS(0)) }

// NewWithWorkers returns a CPU executor using n workers (n ≥ 1).
func NewWithWorkers(n int) *Executor {
	e := &Executor{workers: max(n, 1), poison: -1, arenas: &arenas{}}
	// An executor dropped without Close gives its idle arenas back when it
	// is collected (plans hold executors only weakly: plan.KeyOf).
	runtime.AddCleanup(e, (*arenas).releaseIdle, e.arenas)
	return e
}

// Poison makes every later allocation (outputs and temporaries, and output
// tensors bound by RunInto) start filled with byte b, so that tests can tell
// elements a kernel never wrote. It returns e for chaining.
func (e *Executor) Poison(b byte) *Executor {
	e.poison = int(b)
	return e
}

// Name is "cpu".
func (e *Executor) Name() string { return "cpu" }

// memory is a CPU allocation: 8-byte aligned bytes.
type memory struct {
	b     []byte
	arena *arena // a temporary from Alloc: its arena goes back to the free list on Free
	t     *tensor.Tensor
}

// Alloc returns 8-byte aligned memory: a temporary is a whole arena from
// the free list (given back by Free); an output is fresh Go memory that
// Download hands to the caller.
func (e *Executor) Alloc(bytes int, kind plan.BufferKind) (exec.Memory, error) {
	if bytes < 0 {
		return nil, fmt.Errorf("cpu: alloc of %d bytes", bytes)
	}
	if kind == plan.BufTemp {
		ar, err := e.take(bytes)
		if err != nil {
			return nil, err
		}
		m := &memory{b: ar.b[:bytes:bytes], arena: ar}
		e.poisonBytes(m.b)
		return m, nil
	}
	if e.isClosed() {
		return nil, errClosed
	}
	if err := e.checkAlloc(bytes); err != nil {
		return nil, err
	}
	m := &memory{}
	if words := (bytes + 7) / 8; words > 0 {
		w := make([]uint64, words)
		m.b = unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), bytes)
	}
	e.poisonBytes(m.b)
	return m, nil
}

// Free gives a temporary's arena back; output memory belongs to the tensor
// Download made of it.
func (e *Executor) Free(m exec.Memory) {
	if mm, ok := m.(*memory); ok && mm.arena != nil {
		ar := mm.arena
		mm.arena, mm.b = nil, nil
		e.give(ar)
	}
}

// BindOutput returns memory that is dst's own bytes, so the run writes
// straight into the caller's tensor (exec.OutputBinder); it is poisoned
// first when Poison is set.
func (e *Executor) BindOutput(b *plan.Buffer, dst *tensor.Tensor) (exec.Memory, error) {
	if e.isClosed() {
		return nil, errClosed
	}
	if got := len(dst.Bytes()); got != b.Bytes() {
		return nil, fmt.Errorf("cpu: output of %d bytes bound to a tensor of %d", b.Bytes(), got)
	}
	m := &memory{b: dst.Bytes(), t: dst}
	e.poisonBytes(m.b)
	return m, nil
}

// Upload aliases the tensor's memory: no copy.
func (e *Executor) Upload(t *tensor.Tensor) (exec.Memory, error) {
	return &memory{b: t.Bytes(), t: t}, nil
}

// Release does nothing: uploads alias caller memory.
func (e *Executor) Release(exec.Memory) {}

// Download wraps output memory as a tensor without copying.
func (e *Executor) Download(m exec.Memory, b *plan.Buffer) (*tensor.Tensor, error) {
	mm := m.(*memory)
	n := b.Numel()
	p := unsafe.Pointer(nil)
	if len(mm.b) > 0 {
		p = unsafe.Pointer(&mm.b[0])
	}
	switch b.DType {
	case dtype.F32:
		return tensor.New(unsafe.Slice((*float32)(p), n), b.Shape...)
	case dtype.F64:
		return tensor.New(unsafe.Slice((*float64)(p), n), b.Shape...)
	case dtype.F16:
		return tensor.New(unsafe.Slice((*dtype.Float16)(p), n), b.Shape...)
	case dtype.BF16:
		return tensor.New(unsafe.Slice((*dtype.BFloat16)(p), n), b.Shape...)
	case dtype.F8E4M3:
		return tensor.New(unsafe.Slice((*dtype.Float8E4M3)(p), n), b.Shape...)
	case dtype.U8:
		return tensor.New(unsafe.Slice((*uint8)(p), n), b.Shape...)
	case dtype.U32:
		return tensor.New(unsafe.Slice((*uint32)(p), n), b.Shape...)
	case dtype.I64:
		return tensor.New(unsafe.Slice((*int64)(p), n), b.Shape...)
	}
	return nil, fmt.Errorf("cpu: download of unknown dtype %v", b.DType)
}

// Sync does nothing: CPU steps finish before Run returns.
func (e *Executor) Sync() error { return nil }

// Run executes one step.
func (e *Executor) Run(ctx context.Context, s *plan.Step, mem []exec.Memory) error {
	if e.isClosed() {
		return errClosed
	}
	k := s.Kernel
	if isIndexKernel(k) {
		return e.runIndex(ctx, k, mem)
	}
	if k.IsMatmul() {
		return e.runMatmul(ctx, k, mem)
	}
	if k.IsQuant() {
		return e.runQuant(ctx, k, mem)
	}
	if k.IsCollective() {
		return e.runCollective(ctx, k, mem)
	}
	if k.IsWindow() {
		return e.runWindow(ctx, k, mem)
	}
	if k.CoreAt() >= 0 {
		// Prologue, core (a pool, an upsampling, a matmul) and epilogue
		// over two temporaries: a Go loop cannot recompute the prologue per
		// read as cheaply as a GPU thread can.
		return exec.RunFusedParts(ctx, e, k, mem)
	}
	pi, ok := k.Cache.Load(plan.KeyOf(e, nil))
	if !ok {
		p, err := compileKernel(k)
		if err != nil {
			return err
		}
		pi, _ = k.Cache.LoadOrStore(plan.KeyOf(e, nil), p)
	}
	p := pi.(*program)
	ins := make([][]byte, len(k.Ins))
	for i, op := range k.Ins {
		ins[i] = mem[op.Buf.ID].(*memory).b
	}
	return p.run(ctx, e.workers, ins, mem[k.Out.ID].(*memory).b)
}

func init() { exec.Register("cpu", func() (exec.Executor, error) { return New(), nil }) }

// Write copies a host tensor's bytes into memory from Alloc.
func (e *Executor) Write(m exec.Memory, t *tensor.Tensor) error {
	mm, ok := m.(*memory)
	if !ok {
		return fmt.Errorf("cpu: write into memory of another executor (%T)", m)
	}
	if len(t.Bytes()) > len(mm.b) {
		return fmt.Errorf("cpu: write of %d bytes into %d", len(t.Bytes()), len(mm.b))
	}
	copy(mm.b, t.Bytes())
	return nil
}

package rocm

import (
	"fmt"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/plan"
)

// Poisoned is a view of an Executor whose temporaries and outputs start with
// every byte set to its own poison byte; everything else (device, stream,
// allocator, kernel and module caches, resident tensors, CPU fallback) is
// the Executor's, through the embedded pointer. Views with different bytes
// can run plans on one Executor at the same time, which Poison, a setting of
// the Executor itself, cannot do.
type Poisoned struct {
	*Executor
	poison byte
}

// Interface checks.
var (
	_ exec.Executor   = (*Poisoned)(nil)
	_ exec.Resident   = (*Poisoned)(nil)
	_ exec.Fallbacker = (*Poisoned)(nil)
)

// WithPoison returns a view of e that poisons with b (see Poisoned). It
// costs one small allocation; e's own Poison setting is unchanged.
func (e *Executor) WithPoison(b byte) *Poisoned { return &Poisoned{Executor: e, poison: b} }

// Alloc is Executor.Alloc with the view's poison byte.
func (p *Poisoned) Alloc(n int, kind plan.BufferKind) (exec.Memory, error) {
	return p.Executor.allocPoison(n, kind, int32(p.poison))
}

// String names the executor and the poison byte.
func (p *Poisoned) String() string {
	return fmt.Sprintf("%v poisoned with 0x%02X", p.Executor, p.poison)
}

// allocPoison returns device memory for n bytes from the caching
// allocator; temporaries and outputs start with every byte set to poison
// (a MemsetD8 queued before the memory is used) unless poison is negative.
func (e *Executor) allocPoison(n int, kind plan.BufferKind, poison int32) (exec.Memory, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	b, err := e.alloc.alloc(int64(n))
	if err != nil {
		return nil, err
	}
	m := &memory{e: e, blk: b}
	if poison >= 0 && n > 0 && kind != plan.BufInput {
		leave := e.enter(nil)
		err := e.dev.MemsetD8(b.ptr, byte(poison), uint64(n), e.stream)
		leave()
		if err != nil {
			e.alloc.release(b)
			return nil, fmt.Errorf("rocm: poison %d bytes: %w", n, err)
		}
	}
	return m, nil
}

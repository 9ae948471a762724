package rocm

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
)

// Indexing, sorting and data-movement steps run the hand-written kernels of
// package kernels: one source per step (compiled once, several entry
// points), launched in order, with scratch buffers and a device error flag.
// After the launches the flag is read back (which waits for the stream), so
// a bad id fails the run at that step with the op and the id, and the
// executor stays usable.

// isIndexKernel reports whether k is a step that package kernels plans: a
// single indexing op, or a window step with a kernel there (window.go).
func isIndexKernel(k *plan.Kernel) bool { return kernels.Handles(k) }

// indexKernel is an indexing step prepared for this executor.
type indexKernel struct {
	launches []kernels.Launch
	fns      []hip.Function
	scratch  []kernels.ScratchBuf
	usesFlag bool
}

type indexKey struct{}

func (e *Executor) prepareIndex(k *plan.Kernel) (*indexKernel, error) {
	if v, ok := k.Cache.Load(plan.KeyOf(e, indexKey{})); ok {
		return v.(*indexKernel), nil
	}
	ls, scratch, err := kernels.Plan(k, e.target)
	if err != nil {
		return nil, fmt.Errorf("rocm: kernel %s: %w", k.Name, err)
	}
	ik := &indexKernel{launches: ls, scratch: scratch}
	if len(ls) > 0 {
		obj, _, err := e.codes.get(e.comp, CacheDir(), ls[0].Code, ls[0].Name, e.info.Arch, e.opts)
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			f, err := e.function(obj, l.Name)
			if err != nil {
				return nil, err
			}
			ik.fns = append(ik.fns, f)
			for _, a := range l.Args {
				ik.usesFlag = ik.usesFlag || a.Kind == kernels.ErrorFlag
			}
		}
	}
	v, _ := k.Cache.LoadOrStore(plan.KeyOf(e, indexKey{}), ik)
	return v.(*indexKernel), nil
}

// runIndex runs an indexing step and checks its error flag.
func (e *Executor) runIndex(_ context.Context, k *plan.Kernel, mem []exec.Memory) error {
	ik, err := e.prepareIndex(k)
	if err != nil {
		return err
	}
	if len(ik.launches) == 0 {
		return nil
	}
	var temps []*block
	defer func() {
		for _, b := range temps {
			e.alloc.release(b)
		}
	}()
	temp := func(n int64) (*block, error) {
		b, err := e.alloc.alloc(n)
		if err == nil {
			temps = append(temps, b)
		}
		return b, err
	}
	var flag *block
	if ik.usesFlag {
		if flag, err = temp(8 * kernels.ErrorFlagWords); err != nil {
			return err
		}
		if err := e.dev.MemsetD8(flag.ptr, 0, 8*kernels.ErrorFlagWords, e.stream); err != nil {
			return fmt.Errorf("rocm: clear error flag: %w", err)
		}
	}
	scratch := make([]*block, len(ik.scratch))
	for i, s := range ik.scratch {
		if scratch[i], err = temp(s.Bytes); err != nil {
			return err
		}
	}
	ptrOf := func(b *plan.Buffer) (hip.DevPtr, error) {
		mm, err := e.mem(mem[b.ID])
		if err != nil {
			return 0, fmt.Errorf("buffer b%d: %w", b.ID, err)
		}
		return mm.blk.ptr, nil
	}
	for i, l := range ik.launches {
		var args hip.Args
		for _, a := range l.Args {
			switch a.Kind {
			case kernels.Operand:
				p, err := ptrOf(k.Ins[a.Index].Buf)
				if err != nil {
					return fmt.Errorf("rocm: kernel %s: %w", l.Name, err)
				}
				args.Ptr(p)
			case kernels.Output:
				p, err := ptrOf(k.Out)
				if err != nil {
					return fmt.Errorf("rocm: kernel %s: %w", l.Name, err)
				}
				args.Ptr(p)
			case kernels.ErrorFlag:
				args.Ptr(flag.ptr)
			case kernels.Scratch:
				args.Ptr(scratch[a.Index].ptr)
			}
		}
		e.launchMu.Lock()
		err := e.dev.Launch(ik.fns[i], l.Grid, l.Block, l.SharedMem, e.stream, &args)
		e.launchMu.Unlock()
		if err != nil {
			return fmt.Errorf("rocm: launch %s (grid %v, block %v): %w", l.Name, l.Grid, l.Block, err)
		}
		e.launches.Add(1)
	}
	if !ik.usesFlag {
		return nil
	}
	var words [kernels.ErrorFlagWords]int64
	if err := e.dev.MemcpyDtoH(unsafe.Pointer(&words[0]), flag.ptr, 8*kernels.ErrorFlagWords, e.stream); err != nil {
		return fmt.Errorf("rocm: read error flag: %w", err)
	}
	return kernels.DecodeError(k.Instrs[0].Node.Op.String(), words)
}

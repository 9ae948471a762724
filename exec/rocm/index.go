package rocm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
)

// Indexing, sorting and data-movement steps run the hand-written kernels of
// package kernels: one source per step (compiled once, several entry
// points), launched in order, with scratch buffers and a device error flag.
// The flag is read back after the run's final wait (errorFlag below), so a
// bad id fails the run naming that step, the op and the id, and the
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
func (e *Executor) runIndex(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
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
			e.releaseScratch(b)
		}
	}()
	temp := func(n int64) (*block, error) {
		b, err := e.alloc.alloc(n)
		if err == nil {
			temps = append(temps, b)
		}
		return b, err
	}
	var flag hip.DevPtr
	var check func() error // nil: the flag is checked at the run's end
	if ik.usesFlag {
		if flag, check, err = e.errorFlag(ctx, k); err != nil {
			return err
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
		if l.CopyOnly {
			// A copy of the destination into the output: nothing to do when
			// the output is written in the destination's own memory
			// (plan.InPlace, exec.Donate).
			src, err := ptrOf(k.Ins[l.Args[0].Index].Buf)
			if err != nil {
				return fmt.Errorf("rocm: kernel %s: %w", l.Name, err)
			}
			if dst, err := ptrOf(k.Out); err == nil && dst == src {
				continue
			}
		}
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
				args.Ptr(flag)
			case kernels.Scratch:
				args.Ptr(scratch[a.Index].ptr)
			case kernels.Counters:
				args.Ptr(e.counters)
			case kernels.AheadInPlace:
				p, err := aheadInPlace(k, ptrOf)
				if err != nil {
					return fmt.Errorf("rocm: kernel %s: %w", l.Name, err)
				}
				args.Ptr(p)
			}
		}
		e.launchMu.Lock()
		err := e.launchDep(ik.fns[i], l.Grid, l.Block, l.SharedMem, &args)
		e.launchMu.Unlock()
		if err != nil {
			return fmt.Errorf("rocm: launch %s (grid %v, block %v): %w", l.Name, l.Grid, l.Block, err)
		}
		e.launches.Add(1)
	}
	if check != nil {
		return check()
	}
	return nil
}

// Error flags. A step run by exec's runner gets a slot of a per-run flag
// pool: chunks of flagChunk slots, each chunk zeroed by one memset when it
// is taken and read back by one copy after the run's final wait
// (exec.DeferCheck), the first set flag failing the run with its step.
// Reading each step's flag back at once would stop the host at every
// indexing step until the device caught up (35 times in a llama decode
// step). A step run outside the runner allocates, zeroes and reads back
// its own flag.

const flagChunk = 64

type flagPoolKey struct{ e *Executor }

// flagPool is one run's error flags on e.
type flagPool struct {
	mu     sync.Mutex
	chunks []*block
	owners []flagOwner // slot i of the run: chunk i / flagChunk
}

type flagOwner struct {
	step int
	name string
	op   string
}

// errorFlag returns a zeroed error flag for step k and, when the step runs
// outside a runner, the check to call once its launches are queued.
func (e *Executor) errorFlag(ctx context.Context, k *plan.Kernel) (hip.DevPtr, func() error, error) {
	const slotBytes = 8 * kernels.ErrorFlagWords
	op := k.Instrs[0].Node.Op.String()
	state := exec.RunStateOf(ctx)
	if state == nil {
		b, err := e.alloc.alloc(slotBytes)
		if err != nil {
			return 0, nil, err
		}
		if err := e.dev.MemsetD8(b.ptr, 0, slotBytes, e.stream); err != nil {
			e.alloc.release(b)
			return 0, nil, fmt.Errorf("rocm: clear error flag: %w", err)
		}
		return b.ptr, func() error {
			defer e.alloc.release(b)
			var words [kernels.ErrorFlagWords]int64
			if err := e.toHost(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), slotBytes), b.ptr); err != nil {
				return fmt.Errorf("rocm: read error flag: %w", err)
			}
			return kernels.DecodeError(op, words)
		}, nil
	}
	var fresh bool
	var p *flagPool
	if rec := e.capturing.Load(); rec != nil && ctx.Value(captureKey{}) == e {
		// A recorded run: the flags belong to the recording, which checks
		// them after every replay (replay.go).
		if rec.flags == nil {
			rec.flags = &flagPool{}
		}
		p = rec.flags
	} else {
		p = state.Local(flagPoolKey{e}, func() any { fresh = true; return &flagPool{} }).(*flagPool)
	}
	if fresh {
		exec.DeferCheck(ctx, func() error { return e.checkFlags(p) }, func() {
			for _, b := range p.chunks {
				e.alloc.release(b)
			}
		})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	i := len(p.owners)
	if i%flagChunk == 0 {
		b, err := e.alloc.alloc(flagChunk * slotBytes)
		if err != nil {
			return 0, nil, err
		}
		p.chunks = append(p.chunks, b)
		if err := e.dev.MemsetD8(b.ptr, 0, flagChunk*slotBytes, e.stream); err != nil {
			return 0, nil, fmt.Errorf("rocm: clear error flags: %w", err)
		}
	}
	p.owners = append(p.owners, flagOwner{step: state.Step(), name: k.Name, op: op})
	return p.chunks[i/flagChunk].ptr + hip.DevPtr((i%flagChunk)*slotBytes), nil, nil
}

// checkFlags reads a run's flags back (after its final wait: on the side
// stream, not behind runs queued since, exec.Start) and returns the first
// step's error.
func (e *Executor) checkFlags(p *flagPool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	words := make([]int64, flagChunk*kernels.ErrorFlagWords)
	for c, b := range p.chunks {
		n := min(flagChunk, len(p.owners)-c*flagChunk)
		if err := e.doneToHost(unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 8*n*kernels.ErrorFlagWords), b.ptr); err != nil {
			return fmt.Errorf("rocm: read error flags: %w", err)
		}
		for j := range n {
			var w [kernels.ErrorFlagWords]int64
			copy(w[:], words[j*kernels.ErrorFlagWords:])
			o := p.owners[c*flagChunk+j]
			if err := kernels.DecodeError(o.op, w); err != nil {
				return fmt.Errorf("step %d (%s): %w", o.step, o.name, err)
			}
		}
	}
	return nil
}

// aheadInPlace is an attention step's kernels.AheadInPlace argument: the
// base of its queries' buffer (which holds the new keys and values) where
// the scatter ahead of it (plan.Kernel.NewKV) writes its output in its
// destination's memory in this run, so that it writes only the new
// position; null where it does not (a copy of the whole cache comes
// first), and the kernel waits for it before any load.
func aheadInPlace(k *plan.Kernel, ptrOf func(*plan.Buffer) (hip.DevPtr, error)) (hip.DevPtr, error) {
	nk := k.NewKV
	if nk == nil {
		return 0, fmt.Errorf("an ahead-in-place argument without the plan's NewKV")
	}
	dst, err := ptrOf(nk.Scatter.Ins[nk.Dst].Buf)
	if err != nil {
		return 0, err
	}
	out, err := ptrOf(nk.Scatter.Out)
	if err != nil {
		return 0, err
	}
	if dst != out {
		aheadCopied.Add(1)
		return 0, nil
	}
	aheadInPlaceLaunches.Add(1)
	return ptrOf(nk.Src.Buf)
}

// aheadInPlaceLaunches and aheadCopied count attention launches that read
// before their wait (the scatter ahead in place) and those that waited
// (tests).
var aheadInPlaceLaunches, aheadCopied atomic.Int64

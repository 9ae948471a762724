package cpu

import (
	"context"
	"sync/atomic"
	"unsafe"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// scatterDirect runs a scatter or a slice assignment whose destination is
// a contiguous operand in the output's dtype straight through the buffers:
// the destination's bytes are copied into the output (nothing to copy where
// the output is the destination's own memory, plan.InPlace), then only the
// written elements are stored. The generic path (runIndex) widens the whole
// destination into a tile, copies it into an output tile and narrows that
// back: four passes and two allocations the size of the destination, which
// for a decode step's KV-cache update is the whole cache of a layer, for a
// row of new keys. Every id is checked before anything is written, so a
// bad id leaves the output untouched, as the generic path does. It reports
// false (doing nothing) for other steps, which take the generic path.
func scatterDirect(ctx context.Context, k *plan.Kernel, mem []exec.Memory) (bool, error) {
	done, err := scatterBuffers(ctx, k, mem)
	if done {
		scatterDirectRuns.Add(1)
	}
	return done, err
}

// scatterDirectRuns counts the steps scatterDirect took (tests).
var scatterDirectRuns atomic.Int64

func scatterBuffers(ctx context.Context, k *plan.Kernel, mem []exec.Memory) (bool, error) {
	n := k.Instrs[0].Node
	if n.Op != ir.OpScatter && n.Op != ir.OpSliceAssign {
		return false, nil
	}
	args := k.Instrs[0].Args
	for _, a := range args {
		if !a.Operand {
			return false, nil
		}
	}
	dst := k.Ins[args[0].Index]
	numel := n.Numel()
	l := dst.Layout.Merged()
	if dst.Buf.DType != k.Out.DType || numel == 0 || dst.Layout.Numel() != numel ||
		len(l.Dims) != 1 || l.Dims[0] != numel || l.Strides[0] != 1 {
		return false, nil
	}
	// The written elements' values (and ids) are widened as the generic
	// path widens them: small next to the destination.
	load := func(i int) tile { return loadOperand(k.Ins[args[i].Index], mem) }
	dim := int(n.Params[0])
	left, d, r := split(n.Shape, dim)
	type put struct{ di, si int } // output element ← src element
	var puts []put
	var src tile
	switch n.Op {
	case ir.OpScatter:
		ids, s := load(1).i64, 0
		src, s = load(2), n.Args[2].Shape[dim]
		idDT := n.Args[1].DType
		puts = make([]put, 0, len(ids))
		for li := range left {
			if ctx.Err() != nil {
				return true, ctx.Err()
			}
			for j := range s {
				for ri := range r {
					si := (li*s+j)*r + ri
					ok, err := idCheck(n.Op, ids[si], idDT, d, si)
					if err != nil {
						return true, err
					}
					if ok {
						puts = append(puts, put{(li*d+int(ids[si]))*r + ri, si})
					}
				}
			}
		}
	case ir.OpSliceAssign:
		src = load(1)
		start, s := int(n.Params[1]), n.Args[1].Shape[dim]
		puts = make([]put, 0, left*s*r)
		for li := range left {
			for e := range s * r {
				puts = append(puts, put{(li*d+start)*r + e, li*s*r + e})
			}
		}
	}
	size := k.Out.DType.Size()
	from := mem[dst.Buf.ID].(*memory).b[l.Offset*size : (l.Offset+numel)*size]
	to := mem[k.Out.ID].(*memory).b[:numel*size]
	if pf, pt := uintptr(unsafe.Pointer(unsafe.SliceData(from))), uintptr(unsafe.Pointer(unsafe.SliceData(to))); pf != pt {
		if pf < pt+uintptr(len(to)) && pt < pf+uintptr(len(from)) {
			return false, nil // partly overlapping: the generic path's copies keep it right
		}
		copy(to, from)
	}
	// Stored in runs of consecutive elements on both sides (a scatter's
	// innermost dim: a decode step's key row), in order, so a later put
	// still overwrites an earlier one; one store an element cost a 1B
	// llama's CPU decode step 1 ms in its 16 cache scatters.
	out := asBuf(to, k.Out.DType)
	for i := 0; i < len(puts); {
		j := i + 1
		for j < len(puts) && puts[j].di == puts[j-1].di+1 && puts[j].si == puts[j-1].si+1 {
			j++
		}
		store(out, puts[i].di, src.window(puts[i].si, j-i))
		i = j
	}
	return true, nil
}

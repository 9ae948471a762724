package cpu

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// Indexing ops run on whole tensors: each operand is loaded (through its
// layout, widened to its compute kind) in full, the op runs in plain loops
// over (left, dim, right) index decompositions, and the result is stored.
// These loops are the Go twins of the HIP kernels in package kernels.

// isIndexKernel reports whether a kernel is a single indexing op.
func isIndexKernel(k *plan.Kernel) bool {
	return len(k.Instrs) == 1 && k.Instrs[0].Node.Info().Class == ir.ClassIndex
}

// runIndex executes an indexing kernel. Bad ids are errors naming the op,
// the id, its position and the valid range.
func (e *Executor) runIndex(k *plan.Kernel, mem []exec.Memory) error {
	n := k.Instrs[0].Node
	args := make([]tile, len(k.Ins))
	for i, op := range k.Ins {
		l := op.Layout
		t := newTile(op.Buf.DType.Kind(), l.Numel())
		var w walker
		w.load(t, asBuf(mem[op.Buf.ID].(*memory).b, op.Buf.DType), reduce(l), 0, l.Numel())
		args[i] = t
	}
	argOf := func(j int) tile { return args[k.Instrs[0].Args[j].Index] }
	out := newTile(n.DType.Kind(), n.Numel())
	var err error
	switch n.Op {
	case ir.OpArgsort:
		argsort(out.i64, argOf(0), n.Args[0].Shape, n.Params[0] == 1, e.workers)
	case ir.OpCat:
		vals := make([]tile, len(n.Args))
		for j := range n.Args {
			vals[j] = argOf(j)
		}
		cat(out, vals, n)
	case ir.OpSliceAssign:
		sliceAssign(out, argOf(0), argOf(1), n)
	default:
		err = indexOp(n, out, argOf)
	}
	if err != nil {
		return err
	}
	store(asBuf(mem[k.Out.ID].(*memory).b, k.Out.DType), 0, out)
	return nil
}

// split returns the sizes before, at and after dim.
func split(shape []int, dim int) (left, mid, right int) {
	return ir.Numel(shape[:dim]), shape[dim], ir.Numel(shape[dim+1:])
}

// idCheck validates one id: ok=false with no error means a sentinel.
func idCheck(op ir.Op, id int64, dt dtype.DType, size, pos int) (ok bool, err error) {
	if uint64(id) == dt.MaxID() && id >= 0 {
		return false, nil
	}
	if id < 0 || id >= int64(size) {
		return false, fmt.Errorf("%s: id %d at position %d is out of range [0, %d) (the sentinel %d is the only id allowed outside it)", op, id, pos, size, dt.MaxID())
	}
	return true, nil
}

func setElem(dst tile, di int, src tile, si int) {
	switch {
	case dst.f32 != nil:
		dst.f32[di] = src.f32[si]
	case dst.f64 != nil:
		dst.f64[di] = src.f64[si]
	default:
		dst.i64[di] = src.i64[si]
	}
}

func addElem(dst tile, di int, src tile, si int) {
	switch {
	case dst.f32 != nil:
		dst.f32[di] += src.f32[si]
	case dst.f64 != nil:
		dst.f64[di] += src.f64[si]
	default:
		dst.i64[di] += src.i64[si]
	}
}

// indexOp runs index_select, gather, scatter, scatter_add and index_add.
func indexOp(n *ir.Node, out tile, argOf func(int) tile) error {
	dim := int(n.Params[0])
	ids := argOf(1).i64
	idDT := n.Args[1].DType
	switch n.Op {
	case ir.OpIndexSelect, ir.OpGather:
		src := argOf(0)
		l, s, r := split(n.Args[0].Shape, dim)
		_, m, _ := split(n.Shape, dim)
		for li := range l {
			for j := range m {
				for ri := range r {
					o := (li*m+j)*r + ri
					pos := j // the position in ids, as the GPU kernels report it
					if n.Op == ir.OpGather {
						pos = o
					}
					id := ids[pos]
					ok, err := idCheck(n.Op, id, idDT, s, pos)
					if err != nil {
						return err
					}
					if ok {
						setElem(out, o, src, (li*s+int(id))*r+ri)
					} // a sentinel reads 0: out starts zeroed
				}
			}
		}
	default: // scatter, scatter_add, index_add write into a copy of dst
		copyTile(out, argOf(0))
		src := argOf(2)
		l, d, r := split(n.Shape, dim)
		_, s, _ := split(n.Args[2].Shape, dim)
		for li := range l {
			for j := range s {
				for ri := range r {
					si := (li*s+j)*r + ri
					pos := si // the position in ids
					if n.Op == ir.OpIndexAdd {
						pos = j
					}
					id := ids[pos]
					ok, err := idCheck(n.Op, id, idDT, d, pos)
					if err != nil {
						return err
					}
					if !ok {
						continue
					}
					di := (li*d+int(id))*r + ri
					if n.Op == ir.OpScatter {
						setElem(out, di, src, si)
					} else {
						addElem(out, di, src, si)
					}
				}
			}
		}
	}
	return nil
}

func cat(out tile, vals []tile, n *ir.Node) {
	dim := int(n.Params[0])
	l, d, r := split(n.Shape, dim)
	off := 0
	for j, a := range n.Args {
		s := a.Shape[dim]
		for li := range l {
			for k := range s * r {
				setElem(out, (li*d+off)*r+k, vals[j], li*s*r+k)
			}
		}
		off += s
	}
}

func sliceAssign(out, dst, src tile, n *ir.Node) {
	dim, start := int(n.Params[0]), int(n.Params[1])
	copyTile(out, dst)
	l, d, r := split(n.Shape, dim)
	s := n.Args[1].Shape[dim]
	for li := range l {
		for k := range s * r {
			setElem(out, (li*d+start)*r+k, src, li*s*r+k)
		}
	}
}

// argsort stably sorts each row of the last dim, rows spread over workers.
// NaN compares greater than every number, so it sorts last ascending and
// first descending; −0 and +0 are equal (ties keep index order).
func argsort(out []int64, x tile, shape []int, desc bool, workers int) {
	c := shape[len(shape)-1]
	if c == 0 {
		return
	}
	rows := ir.Numel(shape) / c
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, rows) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys := make([]uint64, c)
			idx := make([]int64, c)
			for {
				row := int(next.Add(1) - 1)
				if row >= rows {
					return
				}
				sortRow(out[row*c:(row+1)*c], x, row*c, c, desc, keys, idx)
			}
		}()
	}
	wg.Wait()
}

// sortRow sorts one row. Keys that fit 32 bits (float32 kind, and u8/u32
// values) are mapped to order-preserving unsigned ints and packed with
// their index, key high and index low, into uint64s: one plain sort of
// those is a stable argsort (equal keys order by index). Other keys (f64,
// i64) use a stable comparison sort.
func sortRow(out []int64, x tile, base, c int, desc bool, keys []uint64, idx []int64) {
	fits := x.f32 != nil
	if x.i64 != nil {
		fits = true
		for _, v := range x.i64[base : base+c] {
			if v < 0 || v > math.MaxUint32 {
				fits = false
				break
			}
		}
	}
	if fits {
		for i := range c {
			var k uint32
			if x.f32 != nil {
				k = sortKey32(x.f32[base+i])
			} else {
				k = uint32(x.i64[base+i])
			}
			if desc {
				k = ^k
			}
			keys[i] = uint64(k)<<32 | uint64(i)
		}
		slices.Sort(keys)
		for i, k := range keys {
			out[i] = int64(uint32(k))
		}
		return
	}
	for i := range idx {
		idx[i] = int64(i)
	}
	var cmpf func(a, b int64) int
	if x.f64 != nil {
		cmpf = func(a, b int64) int { return cmpNaNLast(x.f64[base+int(a)], x.f64[base+int(b)]) }
	} else {
		cmpf = func(a, b int64) int { return cmp.Compare(x.i64[base+int(a)], x.i64[base+int(b)]) }
	}
	if desc {
		asc := cmpf
		cmpf = func(a, b int64) int { return asc(b, a) }
	}
	slices.SortStableFunc(idx, cmpf)
	copy(out, idx)
}

// sortKey32 maps a float32 to a uint32 with the same order: NaN (every
// payload) above +Inf, −0 equal to +0.
func sortKey32(v float32) uint32 {
	if v != v {
		return math.MaxUint32
	}
	if v == 0 {
		v = 0 // −0 → +0
	}
	b := math.Float32bits(v)
	if b&(1<<31) != 0 {
		return ^b
	}
	return b | 1<<31
}

// cmpNaNLast orders floats with NaN after every number (NaNs equal).
func cmpNaNLast(a, b float64) int {
	an, bn := a != a, b != b
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}

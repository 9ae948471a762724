package cpu

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

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
func (e *Executor) runIndex(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	n := k.Instrs[0].Node
	if n.Op == ir.OpCumsum {
		return e.runCumsum(ctx, k, mem) // scan.go
	}
	if n.Op == ir.OpArgsort {
		if done, err := argsortDirect(ctx, k, mem, e.workers); done {
			return err
		}
	}
	if n.Op == ir.OpIndexSelect {
		if done, err := indexSelectRows(ctx, k, mem); done {
			return err
		}
	}
	if done, err := scatterDirect(ctx, k, mem); done { // scatter.go
		return err
	}
	if n.Op == ir.OpAttention {
		if done, err := attentionDirect(ctx, k, mem, e.workers); done { // attention.go
			return err
		}
	}
	args := make([]tile, len(k.Ins))
	for i, op := range k.Ins {
		var err error
		if args[i], err = loadOperandCtx(ctx, op, mem); err != nil {
			return err
		}
	}
	argOf := func(j int) tile { return args[k.Instrs[0].Args[j].Index] }
	if err := ctx.Err(); err != nil {
		return err
	}
	out := newTile(n.DType.Kind(), n.Numel())
	var err error
	switch n.Op {
	case ir.OpArgsort:
		err = argsort(ctx, out.i64, argOf(0), n.Args[0].Shape, n.Params[0] == 1, e.workers)
	case ir.OpCat:
		vals := make([]tile, len(n.Args))
		for j := range n.Args {
			vals[j] = argOf(j)
		}
		cat(out, vals, n)
	case ir.OpSliceAssign:
		sliceAssign(out, argOf(0), argOf(1), n)
	case ir.OpAttention:
		err = attention(ctx, n, out, argOf(0), argOf(1), argOf(2), argOf(3), e.workers) // attention.go
	default:
		err = indexOp(ctx, n, out, argOf)
	}
	if err != nil {
		return err
	}
	store(asBuf(mem[k.Out.ID].(*memory).b, k.Out.DType), 0, out)
	return nil
}

// loadOperand reads an index step's operand whole into a tile of its
// compute kind, in row-major order of its layout.
func loadOperand(op plan.Operand, mem []exec.Memory) tile {
	t, _ := loadOperandCtx(context.Background(), op, mem)
	return t
}

// loadChunk is how many elements loadOperandCtx widens between looks at
// its context: an index op's operands can be tens of MiB (2^23 ids widen
// to 64 MiB of int64 in 50–300 ms on a loaded CI machine), and a cancel
// that arrives during the widening should not wait for all of it.
const loadChunk = 1 << 20

// loadOperandCtx is loadOperand, giving up with ctx's error between chunks.
func loadOperandCtx(ctx context.Context, op plan.Operand, mem []exec.Memory) (tile, error) {
	l := op.Layout
	numel := l.Numel()
	t := newTile(op.Buf.DType.Kind(), numel)
	src, rl := asBuf(mem[op.Buf.ID].(*memory).b, op.Buf.DType), l.Merged()
	var w walker
	for lo := 0; lo < numel; lo += loadChunk {
		if err := ctx.Err(); err != nil {
			return tile{}, err
		}
		c := min(loadChunk, numel-lo)
		w.load(t.window(lo, c), src, rl, lo, c)
	}
	return t, nil
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
func indexOp(ctx context.Context, n *ir.Node, out tile, argOf func(int) tile) error {
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
				if j%cancelEvery == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
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
				if j%cancelEvery == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
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

// argsortDirect sorts a contiguous f32 operand straight from its buffer
// into the u32 output, with no widened copies of either; it reports false
// (doing nothing) for other operands, which go through tiles.
func argsortDirect(ctx context.Context, k *plan.Kernel, mem []exec.Memory, workers int) (bool, error) {
	op := k.Ins[0]
	l := op.Layout.Merged()
	numel := op.Layout.Numel()
	if op.Buf.DType != dtype.F32 || k.Out.DType != dtype.U32 || numel == 0 ||
		len(l.Dims) != 1 || l.Dims[0] != numel || l.Strides[0] != 1 {
		return false, nil
	}
	n := k.Instrs[0].Node
	x := asBuf(mem[op.Buf.ID].(*memory).b, dtype.F32).f32[l.Offset : l.Offset+numel]
	out := asBuf(mem[k.Out.ID].(*memory).b, dtype.U32).u32[:numel]
	c := n.Shape[len(n.Shape)-1]
	desc := n.Params[0] == 1
	err := forRows(ctx, numel/c, c, workers, func(s *sortScratch, row int) {
		keys := s.a
		for i, v := range x[row*c : (row+1)*c] {
			k := sortKey32(v)
			if desc {
				k = ^k
			}
			keys[i] = uint64(k)<<32 | uint64(i)
		}
		for i, v := range s.sort() {
			out[row*c+i] = uint32(v)
		}
	})
	return true, err
}

// sortScratch is one worker's memory for sorting rows of c elements.
type sortScratch struct {
	a, b []uint64
	idx  []int64
}

// cancelEvery is how many ids (or rows of ids) an index op handles between
// looks at its context.
const cancelEvery = 4096

// forRows runs body for rows 0…rows-1 of c elements on up to workers
// goroutines, each with its own scratch, reused for all its rows. The
// context is checked before each row: a cancelled sort stops within a row.
func forRows(ctx context.Context, rows, c, workers int, body func(s *sortScratch, row int)) error {
	return forUnits(ctx, rows, workers, func() *sortScratch {
		return &sortScratch{a: make([]uint64, c), b: make([]uint64, c), idx: make([]int64, c)}
	}, body)
}

// radixMin is the row length from which rows are radix sorted; shorter rows
// use a comparison sort, cheaper than clearing 4×256 counters.
const radixMin = 64

// sort sorts s.a, packed keys (key<<32 | index) written in index order, by
// their key (the high 32 bits), stably, and returns the sorted slice (s.a
// or s.b). Long rows use an LSD radix sort on the four key bytes, stable by
// construction, so equal keys keep index order; a pass whose byte is the
// same in every key is skipped. Short rows sort the packed values whole,
// which orders equal keys by index too.
func (s *sortScratch) sort() []uint64 {
	src, dst := s.a, s.b
	n := len(src)
	if n < radixMin {
		slices.Sort(src)
		return src
	}
	var count [4][256]uint32
	for _, v := range src {
		k := uint32(v >> 32)
		count[0][uint8(k)]++
		count[1][uint8(k>>8)]++
		count[2][uint8(k>>16)]++
		count[3][uint8(k>>24)]++
	}
	for pass := range 4 {
		shift := 32 + 8*uint(pass)
		c := &count[pass]
		if c[uint8(src[0]>>shift)] == uint32(n) {
			continue
		}
		var sum uint32
		for i, t := range c {
			c[i] = sum
			sum += t
		}
		dst = dst[:n]
		for _, v := range src {
			d := uint8(v >> shift)
			dst[c[d]] = v
			c[d]++
		}
		src, dst = dst, src
	}
	return src
}

// argsort stably sorts each row of the last dim, rows spread over workers.
// NaN compares greater than every number, so it sorts last ascending and
// first descending; −0 and +0 are equal (ties keep index order).
func argsort(ctx context.Context, out []int64, x tile, shape []int, desc bool, workers int) error {
	c := shape[len(shape)-1]
	if c == 0 {
		return nil
	}
	return forRows(ctx, ir.Numel(shape)/c, c, workers, func(s *sortScratch, row int) {
		sortRow(out[row*c:(row+1)*c], x, row*c, c, desc, s)
	})
}

// sortRow sorts one row. Keys that fit 32 bits (float32 kind, and u8/u32
// values) are mapped to order-preserving unsigned ints and packed with
// their index, key high and index low, into uint64s, and sorted by key
// (sortScratch.sort): a stable argsort. Other keys (f64, i64) use a stable
// comparison sort.
func sortRow(out []int64, x tile, base, c int, desc bool, s *sortScratch) {
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
		keys := s.a
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
		for i, k := range s.sort() {
			out[i] = int64(uint32(k))
		}
		return
	}
	idx := s.idx
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

// indexSelectRows runs an index_select that reads less than half of its
// source by loading only the selected rows, straight from the source's
// buffer through its layout into the output (issue 12 B12: selecting one
// 1 KiB row of a 64 MiB u8 table widened the whole table to int64, 512 MiB).
// It reports done=false, doing nothing, when most of the source is read
// anyway and the whole-source path is as cheap.
func indexSelectRows(ctx context.Context, k *plan.Kernel, mem []exec.Memory) (done bool, err error) {
	n := k.Instrs[0].Node
	srcOp, idsOp := k.Ins[k.Instrs[0].Args[0].Index], k.Ins[k.Instrs[0].Args[1].Index]
	if srcOp.Layout.Numel() <= 2*n.Numel() {
		return false, nil
	}
	dim := int(n.Params[0])
	l, s, r := split(n.Args[0].Shape, dim)
	_, m, _ := split(n.Shape, dim)
	var w walker
	ids := newTile(idsOp.Buf.DType.Kind(), idsOp.Layout.Numel())
	w.load(ids, asBuf(mem[idsOp.Buf.ID].(*memory).b, idsOp.Buf.DType), idsOp.Layout.Merged(), 0, idsOp.Layout.Numel())
	src := asBuf(mem[srcOp.Buf.ID].(*memory).b, srcOp.Buf.DType)
	sl := srcOp.Layout.Merged()
	out := newTile(n.DType.Kind(), n.Numel())
	for li := range l {
		for j := range m {
			if j%cancelEvery == 0 && ctx.Err() != nil {
				return true, ctx.Err()
			}
			ok, err := idCheck(n.Op, ids.i64[j], n.Args[1].DType, s, j)
			if err != nil {
				return true, err
			}
			if !ok || r == 0 {
				continue // a sentinel reads 0: out starts zeroed
			}
			o := (li*m + j) * r
			w.load(out.window(o, r), src, sl, (li*s+int(ids.i64[j]))*r, r)
		}
	}
	store(asBuf(mem[k.Out.ID].(*memory).b, k.Out.DType), 0, out)
	return true, nil
}

// window is elements [lo, lo+n) of t, sharing its memory.
func (t tile) window(lo, n int) tile {
	switch {
	case t.f32 != nil:
		return tile{f32: t.f32[lo : lo+n]}
	case t.f64 != nil:
		return tile{f64: t.f64[lo : lo+n]}
	}
	return tile{i64: t.i64[lo : lo+n]}
}

package cpu

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// tileSize is the number of elements a worker processes at once: 4096
// float32 values are 16 KiB, so a dozen live tiles of a fused group stay in
// the L2 cache of one core while the group's ops run over them.
const tileSize = 4096

// serialBelow is the kernel size under which one goroutine does all tiles:
// fanning out costs more than it saves.
const serialBelow = 1 << 15

// tile is one value of a kernel over a tile, in its compute kind: exactly
// one of the slices is in use.
type tile struct {
	f32 []float32
	f64 []float64
	i64 []int64
}

func newTile(k dtype.Kind, n int) tile {
	switch k {
	case dtype.KF64:
		return tile{f64: make([]float64, n)}
	case dtype.KI64:
		return tile{i64: make([]int64, n)}
	}
	return tile{f32: make([]float32, n)}
}

// capacity is the capacity of the slice in use.
func (t tile) capacity() int { return cap(t.f32) + cap(t.f64) + cap(t.i64) }

// slice returns the first n elements of every non-nil slice.
func (t tile) slice(n int) tile {
	switch {
	case t.f32 != nil:
		return tile{f32: t.f32[:n]}
	case t.f64 != nil:
		return tile{f64: t.f64[:n]}
	}
	return tile{i64: t.i64[:n]}
}

// operand is how one kernel operand is read.
type operand struct {
	wide   bool // read as whole rows (else one value per row)
	dt     dtype.DType
	layout ir.Layout // reduced: unit dims dropped, mergeable dims merged
	// direct: contiguous and stored in its compute kind (f32, f64, i64), so
	// a tile is a sub-slice of the buffer itself, with no copy.
	direct bool
	// innerRun, for a native dtype whose innermost stride is 1, is the
	// innermost dim's size: a span inside one such run is read in place.
	innerRun int
}

// instr is one compiled instruction.
type instr struct {
	node *ir.Node
	kind dtype.Kind
	args []plan.Ref
	wide bool // whole rows (else one value per row)
	fn   opFunc
	// round narrows results to the node's dtype (f16, bf16, f8e4m3, u8, u32) so
	// that fused and unfused execution agree bit for bit.
	round func(tile)
	// rowScalar ≥ 0 (0 add, 1 sub, 2 mul, 3 div) marks a float32 whole-row
	// op whose second argument is a row value: it runs row by row against
	// that one value, without expanding it (softmax's x − max, a norm's
	// x·inv). The result is the same IEEE operation.
	rowScalar int
}

// opFunc computes dst[i] = op(args[k][i]) for one tile; start is the flat
// index of the tile's first element (Arange, Rand and Randn need it).
type opFunc func(dst tile, args []tile, start int)

// program is a kernel compiled for the CPU. It runs in tiles of whole rows:
// a plain elementwise kernel has rows of one element, so a tile is
// rowsPerTile elements; a row kernel's tile holds rowsPerTile rows of rowLen
// elements (at least one row, however long).
type program struct {
	k           *plan.Kernel
	rowLen      int
	rows        int
	rowsPerTile int
	ops         []operand
	instrs      []instr
	outDT       dtype.DType
	outKind     dtype.Kind
	// direct: the last instruction writes straight into the output buffer.
	direct bool
	// chunked: a long-row reduction (one reduction, the last instruction)
	// runs in two stages: chunks of tileSize elements of every row reduce
	// in parallel to partials, which then combine in chunk order. Both the
	// scratch memory and the parallelism then stop depending on row length.
	chunked bool
	scratch sync.Pool // *worker
}

// worker holds one goroutine's scratch tiles, reused for every tile.
type worker struct {
	inBuf []tile   // load buffers for non-direct operands
	vals  []tile   // per instruction
	ins   []tile   // per operand, the current tile (loaded or direct)
	args  []tile   // argument scratch
	bcast [][]tile // per instruction and arg: row values expanded to rows
	// filled[i] is how much of a constant instruction's tile holds its value.
	filled []int
	walk   walker
}

func compileKernel(k *plan.Kernel) (*program, error) {
	p := &program{k: k, outDT: k.Out.DType, outKind: k.Out.DType.Kind(), rowLen: k.RowLen()}
	p.rows = ir.Numel(k.RowShape())
	// Rows of 0: tileSize rows a tile. No more rows than the kernel has, so
	// a small kernel of many instructions keeps small scratch tiles.
	p.rowsPerTile = max(1, min(tileSize/max(p.rowLen, 1), p.rows))
	rowShape := k.RowShape()
	for i, o := range k.Ins {
		wide := slices.Equal(o.Layout.Dims, k.Shape)
		if !wide && !slices.Equal(o.Layout.Dims, rowShape) {
			return nil, fmt.Errorf("cpu: kernel %s operand %d has dims %v, kernel shape %v", k.Name, i, o.Layout.Dims, k.Shape)
		}
		l := o.Layout.Merged()
		op := operand{wide: wide || k.RowAxes == 0, dt: o.Buf.DType, layout: l, direct: l.IsContiguous() && native(o.Buf.DType)}
		if r := len(l.Dims); r > 0 && native(o.Buf.DType) && l.Strides[r-1] == 1 {
			op.innerRun = l.Dims[r-1]
		}
		p.ops = append(p.ops, op)
	}
	for _, in := range k.Instrs {
		fn, err := opFor(in.Node, in.Args, k, p.ops, p.rowLen)
		if err != nil {
			return nil, fmt.Errorf("cpu: kernel %s: %w", k.Name, err)
		}
		ins := instr{node: in.Node, kind: in.Node.DType.Kind(), args: in.Args, wide: !k.IsRowValue(in.Node), fn: fn, rowScalar: -1}
		// Comparisons (0 or 1) and arg reductions (indices) are always in
		// their dtype's range: nothing to narrow.
		if out := in.Node.Info().Out; out != ir.OutU8 && out != ir.OutU32 {
			ins.round = rounder(in.Node.DType)
		}
		if op, ok := rowScalarOps[in.Node.Op]; ok && hasAVX2 && ins.kind == dtype.KF32 && len(in.Args) == 2 && in.Args[1].Broadcast && !in.Args[0].Broadcast {
			ins.rowScalar = op
		}
		p.instrs = append(p.instrs, ins)
	}
	last := p.instrs[len(p.instrs)-1]
	if last.node.DType != p.outDT {
		return nil, fmt.Errorf("cpu: kernel %s stores %v into a %v buffer", k.Name, last.node.DType, p.outDT)
	}
	p.direct = native(p.outDT)
	p.chunked = p.rowLen > tileSize && reductions(p.instrs) == 1 && last.node.Info().Class == ir.ClassReduce
	p.scratch.New = func() any { return p.newWorker() }
	return p, nil
}

func reductions(ins []instr) int {
	n := 0
	for _, in := range ins {
		if in.node.Info().Class == ir.ClassReduce {
			n++
		}
	}
	return n
}

// native reports whether a dtype is stored exactly as its compute kind.
func native(d dtype.DType) bool { return d == dtype.F32 || d == dtype.F64 || d == dtype.I64 }

func (p *program) newWorker() *worker {
	wideN, rowN := p.rowsPerTile*p.rowLen, p.rowsPerTile
	if p.k.RowAxes == 0 {
		wideN = p.rowsPerTile
	}
	if p.chunked {
		wideN = tileSize // a chunk of a long row
	}
	size := func(wide bool) int {
		if wide {
			return wideN
		}
		return rowN
	}
	w := &worker{ins: make([]tile, len(p.ops)), vals: make([]tile, len(p.instrs)), inBuf: make([]tile, len(p.ops)), bcast: make([][]tile, len(p.instrs)), filled: make([]int, len(p.instrs))}
	for i, o := range p.ops {
		if !o.direct {
			w.inBuf[i] = newTile(o.dt.Kind(), size(o.wide))
		}
	}
	maxArgs := 0
	for i, in := range p.instrs {
		if i < len(p.instrs)-1 || !p.direct || p.chunked {
			w.vals[i] = newTile(in.kind, size(in.wide))
		}
		maxArgs = max(maxArgs, len(in.args))
		w.bcast[i] = make([]tile, len(in.args))
		for a, r := range in.args {
			if r.Broadcast {
				w.bcast[i][a] = newTile(p.argKind(r), wideN)
			}
		}
	}
	w.args = make([]tile, maxArgs)
	return w
}

// argKind is the compute kind of a ref.
func (p *program) argKind(r plan.Ref) dtype.Kind {
	if r.Operand {
		return p.ops[r.Index].dt.Kind()
	}
	return p.instrs[r.Index].kind
}

// run executes the kernel over its whole output.
func (p *program) run(ctx context.Context, workers int, ins [][]byte, out []byte) error {
	n := p.rows
	if n == 0 {
		return nil
	}
	srcs := make([]buf, len(ins))
	for i, b := range ins {
		srcs[i] = asBuf(b, p.ops[i].dt)
	}
	dst := asBuf(out, p.outDT)
	if p.chunked {
		return p.runChunked(ctx, workers, srcs, dst)
	}
	per := p.rowsPerTile
	tiles := (n + per - 1) / per
	if n*max(p.rowLen, 1) < serialBelow {
		workers = 1
	}
	return p.forEach(ctx, workers, tiles, func(w *worker, t int) {
		p.tile(w, srcs, dst, t*per, min(n, (t+1)*per))
	})
}

// forEach runs work over items 0…n-1 on up to workers goroutines, each with
// its own scratch worker from the pool, handing out items one at a time
// (tiles of rows, or chunks of long rows); one worker runs them on the
// calling goroutine. The context is checked every 8 items.
func (p *program) forEach(ctx context.Context, workers, n int, work func(w *worker, item int)) error {
	if workers <= 1 || n <= 1 {
		w := p.scratch.Get().(*worker)
		defer p.scratch.Put(w)
		for item := range n {
			if item%8 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			work(w, item)
		}
		return nil
	}
	var next atomic.Int64
	parallel(min(workers, n), func(int) {
		w := p.scratch.Get().(*worker)
		defer p.scratch.Put(w)
		for {
			item := int(next.Add(1) - 1)
			if item >= n {
				return
			}
			if item%8 == 0 && ctx.Err() != nil {
				return
			}
			work(w, item)
		}
	})
	return ctx.Err()
}

// tile computes rows [r0, r1): whole-row values cover flat elements
// [r0·rowLen, r1·rowLen), row values [r0, r1).
func (p *program) tile(w *worker, srcs []buf, dst buf, r0, r1 int) {
	L := p.rowLen // 0 for empty rows: whole-row values are empty
	if p.k.RowAxes == 0 {
		L = 1
	}
	p.span(w, srcs, dst, r0*L, (r1-r0)*L, r0, r1-r0, L, true)
}

// span computes whole-row values over flat elements [ws, ws+wn) and row
// values over rows [rs, rs+rn), where each row contributes L elements of the
// whole-row span (a tile of rows, or with rn = 1 one chunk of a long row).
// With store, the last instruction's values go to dst; otherwise they stay
// in w.vals (a chunk's partial reduction).
func (p *program) span(w *worker, srcs []buf, dst buf, ws, wn, rs, rn, L int, storeOut bool) {
	span := func(wide bool) (int, int) {
		if wide {
			return ws, wn
		}
		return rs, rn
	}
	for i, o := range p.ops {
		s, n := span(o.wide)
		if o.direct {
			w.ins[i] = srcs[i].tile(o.layout.Offset+s, n)
			continue
		}
		if D := o.innerRun; D > 0 && n > 0 && s%D+n <= D {
			// The span lies in one contiguous run of the innermost dim
			// (a bias row broadcast over rows, a row of a narrowed
			// tensor): read it in place.
			w.ins[i] = srcs[i].tile(o.layout.Index(s), n)
			continue
		}
		w.ins[i] = w.inBuf[i].slice(n)
		w.walk.load(w.ins[i], srcs[i], o.layout, s, n)
	}
	lastI := len(p.instrs) - 1
	for i := range p.instrs {
		in := &p.instrs[i]
		s, n := span(in.wide)
		var out tile
		if i == lastI && p.direct && storeOut {
			out = dst.tile(s, n)
		} else {
			out = w.vals[i].slice(n)
		}
		if in.rowScalar >= 0 {
			x, sv := w.ref(in.args[0]), w.ref(in.args[1])
			for r := range rn {
				lo := r * L
				rowScalarF32(out.f32[lo:lo+L], x.f32[lo:lo+L], sv.f32[r], in.rowScalar)
			}
			if i < lastI && in.round != nil {
				in.round(out)
			}
			w.vals[i] = out
			continue
		}
		for a, r := range in.args {
			v := w.ref(r)
			if r.Broadcast {
				// Expanded to whole rows, whatever the reader (a reduction
				// reads whole rows and writes row values).
				_, wn := span(true)
				b := w.bcast[i][a].slice(wn)
				expand(b, v, L)
				v = b
			}
			w.args[a] = v
		}
		if in.node.Op == ir.OpFull && !(i == lastI && p.direct && storeOut) {
			// A constant: its scratch tile, once filled, stays filled.
			if w.filled[i] < n {
				c := w.vals[i].capacity()
				in.fn(w.vals[i].slice(c), nil, 0)
				w.filled[i] = c
			}
			w.vals[i] = out
			continue
		}
		in.fn(out, w.args[:len(in.args)], s)
		if i < lastI && in.round != nil {
			in.round(out)
		}
		w.vals[i] = out
	}
	if !p.direct && storeOut {
		s, _ := span(p.instrs[lastI].wide)
		store(dst, s, w.vals[lastI])
	}
}

// expand writes each row value of v L times into b.
func expand(b, v tile, L int) {
	switch {
	case b.f32 != nil:
		expandRows(b.f32, v.f32, L)
	case b.f64 != nil:
		expandRows(b.f64, v.f64, L)
	default:
		expandRows(b.i64, v.i64, L)
	}
}

func expandRows[T any](b, v []T, L int) {
	if L == 0 {
		return
	}
	for r := range len(b) / L {
		splat(b[r*L:(r+1)*L], v[r])
	}
}

// buf is a buffer viewed as its dtype's Go slice.
type buf struct {
	dt  dtype.DType
	f32 []float32
	f64 []float64
	f16 []dtype.Float16
	b16 []dtype.BFloat16
	f8  []dtype.Float8E4M3
	u8  []uint8
	u32 []uint32
	i64 []int64
}

func asBuf(b []byte, dt dtype.DType) buf {
	out := buf{dt: dt}
	if len(b) == 0 {
		return out
	}
	p := unsafe.Pointer(&b[0])
	n := len(b) / dt.Size()
	switch dt {
	case dtype.F32:
		out.f32 = unsafe.Slice((*float32)(p), n)
	case dtype.F64:
		out.f64 = unsafe.Slice((*float64)(p), n)
	case dtype.F16:
		out.f16 = unsafe.Slice((*dtype.Float16)(p), n)
	case dtype.BF16:
		out.b16 = unsafe.Slice((*dtype.BFloat16)(p), n)
	case dtype.F8E4M3:
		out.f8 = unsafe.Slice((*dtype.Float8E4M3)(p), n)
	case dtype.U8:
		out.u8 = unsafe.Slice((*uint8)(p), n)
	case dtype.U32:
		out.u32 = unsafe.Slice((*uint32)(p), n)
	case dtype.I64:
		out.i64 = unsafe.Slice((*int64)(p), n)
	}
	return out
}

// tile returns elements [off, off+n) of a native buffer as a tile. An empty
// tile may carry any offset (a narrow of an empty tensor keeps its start), so
// it is taken at 0: off may lie past the end of an empty buffer.
func (b buf) tile(off, n int) tile {
	if n == 0 {
		off = 0
	}
	switch b.dt {
	case dtype.F32:
		return tile{f32: b.f32[off : off+n]}
	case dtype.F64:
		return tile{f64: b.f64[off : off+n]}
	}
	return tile{i64: b.i64[off : off+n]}
}

// rowScalarOps are the binary ops with a row-scalar fast path.
var rowScalarOps = map[ir.Op]int{ir.OpAdd: 0, ir.OpSub: 1, ir.OpMul: 2, ir.OpDiv: 3}

// rowScalarF32 computes dst = x op s over one row.
func rowScalarF32(dst, x []float32, s float32, op int) {
	n := len(x) &^ 7
	if n > 0 {
		binScalarF32(&dst[0], &x[0], n, s, op)
	}
	for i := n; i < len(x); i++ {
		switch op {
		case 0:
			dst[i] = x[i] + s
		case 1:
			dst[i] = x[i] - s
		case 2:
			dst[i] = x[i] * s
		default:
			dst[i] = x[i] / s
		}
	}
}

// ref is the current tile of an operand or an earlier instruction.
func (w *worker) ref(r plan.Ref) tile {
	if r.Operand {
		return w.ins[r.Index]
	}
	return w.vals[r.Index]
}

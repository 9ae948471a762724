package cpu

import (
	"context"
	"sync/atomic"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// Cumsum: the inclusive scan along one dim, in the order ir/scan.go
// defines (chunks of 16, groups of 16 chunks, tiles of 16 groups, then a
// sequential carry of tile totals). These loops are the executable spec of
// the order and the twin of the GPU kernels (kernels/scan.hip computes
// the same levels with threads and shared memory: kernels.CumsumTwin
// models that and is tested against these loops bit for bit).
//
// The tensor is seen as [left, n, right] around the scanned dim:
//   - right == 1 (the last dim, or trailing dims of size 1): each sequence
//     is a row of n elements, scanned a tile (4096) at a time in a scratch
//     copy in the compute kind, loaded through the operand's layout and
//     narrowed into the output — or, for a contiguous f32, f64 or i64
//     operand, copied into the output and scanned there. Rows are spread
//     over the workers (short rows several to a unit of work).
//   - right > 1: the sequences are strided columns. A unit of work is a
//     block of up to cumsumLanes adjacent columns of one left index: a tile
//     of it is loaded as [positions × lanes] (each position's lanes are
//     adjacent in the logical order, so one strided load reads them) and
//     every level of the scan runs along the positions with the lanes as
//     the inner loop. No transposed copy is made.
//   - Few long sequences (fewer units of work than workers, more than one
//     tile each): a two-pass scan. Pass 1 computes the total of every tile
//     but the last in parallel, a sequential loop makes the carries
//     O_k = O_{k−1} + A_{k−1}, and pass 2 scans every tile in parallel with
//     its carry. That is the order's own structure, so the bits are those
//     of the one-pass scan; the input is read twice.

// cumsumLanes is the most columns a unit of work of a non-last-dim scan
// holds: a tile is then at most 4096 × 32 values (1 MiB of float64).
const cumsumLanes = 32

// cumsumSerial is the element count below which a cumsum runs on the
// calling goroutine.
const cumsumSerial = 1 << 15

// scanNum is a compute kind: float32 (f32, f16, bf16), float64, int64
// (u8, u32 and i64, narrowed with wrapping on store).
type scanNum interface {
	float32 | float64 | int64
}

// cumsumJob is one cumsum step: the operand's buffer and (reduced) layout,
// the output, and the [left, n, right] view of the shape.
type cumsumJob struct {
	src            buf
	l              ir.Layout
	dst            buf
	left, n, right int
	workers        int
}

// runCumsum runs a cumsum step.
func (e *Executor) runCumsum(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	n := k.Instrs[0].Node
	op := k.Ins[k.Instrs[0].Args[0].Index]
	left, mid, right := split(n.Shape, n.CumsumDim())
	j := cumsumJob{
		src: asBuf(mem[op.Buf.ID].(*memory).b, op.Buf.DType), l: op.Layout.Merged(),
		dst: asBuf(mem[k.Out.ID].(*memory).b, k.Out.DType), left: left, n: mid, right: right,
		workers: e.workers,
	}
	if n.Numel() == 0 {
		return nil
	}
	if n.Numel() < cumsumSerial {
		j.workers = 1
	}
	switch n.DType.Kind() {
	case dtype.KF64:
		return cumsumRun[float64](ctx, j)
	case dtype.KI64:
		return cumsumRun[int64](ctx, j)
	}
	return cumsumRun[float32](ctx, j)
}

// asTile wraps a compute slice as a tile (for load and store).
func asTile[T scanNum](x []T) tile {
	switch v := any(x).(type) {
	case []float32:
		return tile{f32: v}
	case []float64:
		return tile{f64: v}
	case []int64:
		return tile{i64: v}
	}
	panic("unreachable")
}

// cumsumRun picks the row or column form and the one- or two-pass scan.
func cumsumRun[T scanNum](ctx context.Context, j cumsumJob) error {
	tiles := (j.n + ir.ScanTile - 1) / ir.ScanTile
	if j.right == 1 {
		rows := j.left
		if tiles > 1 && rows < j.workers {
			return cumsumRowsTwoPass[T](ctx, j, rows, tiles)
		}
		return cumsumRows[T](ctx, j, rows)
	}
	lanes := min(j.right, cumsumLanes)
	blocks := (j.right + lanes - 1) / lanes
	units := j.left * blocks
	if tiles > 1 && units < j.workers {
		return cumsumColsTwoPass[T](ctx, j, lanes, blocks, tiles)
	}
	return cumsumCols[T](ctx, j, lanes, blocks)
}

// forUnits runs body(s, u) for u in [0, units) on up to workers goroutines,
// each with its own scratch from newScratch; the context is checked before
// each unit (and by the bodies between tiles), and its error returned.
func forUnits[S any](ctx context.Context, units, workers int, newScratch func() S, body func(s S, u int)) error {
	workers = max(1, min(workers, units))
	if workers == 1 {
		s := newScratch()
		for u := range units {
			if ctx.Err() != nil {
				break
			}
			body(s, u)
		}
		return ctx.Err()
	}
	var next atomic.Int64
	parallel(workers, func(int) {
		s := newScratch()
		for {
			u := int(next.Add(1) - 1)
			if u >= units || ctx.Err() != nil {
				return
			}
			body(s, u)
		}
	})
	return ctx.Err()
}

// --- rows (right == 1) ---

// typed returns b's elements as []T when the dtype is stored in compute
// kind T (f32, f64, i64), else nil.
func typed[T scanNum](b buf) []T {
	var z T
	switch any(z).(type) {
	case float32:
		if b.dt == dtype.F32 {
			return any(b.f32).([]T)
		}
	case float64:
		if b.dt == dtype.F64 {
			return any(b.f64).([]T)
		}
	case int64:
		if b.dt == dtype.I64 {
			return any(b.i64).([]T)
		}
	}
	return nil
}

// rowIO moves segments of rows (logical flat ranges) between the buffers
// and the compute kind. A contiguous operand whose dtype is its own compute
// kind (f32, f64, i64) is copied straight into the output and scanned there
// (direct); anything else is loaded through its layout into scratch,
// widened, and narrowed into the output after the scan.
type rowIO[T scanNum] struct {
	j        *cumsumJob
	src, dst []T // direct only
}

func newRowIO[T scanNum](j *cumsumJob) rowIO[T] {
	io := rowIO[T]{j: j}
	src, dst := typed[T](j.src), typed[T](j.dst)
	if src != nil && dst != nil && len(j.l.Dims) == 1 && j.l.Strides[0] == 1 {
		io.src, io.dst = src[j.l.Offset:], dst
	}
	return io
}

// get returns elements [s, s+n) to scan in place: the output's own
// memory (direct) or scratch[:n].
func (io rowIO[T]) get(w *walker, scratch []T, s, n int) []T {
	if io.dst != nil {
		seg := io.dst[s : s+n]
		copy(seg, io.src[s:s+n])
		return seg
	}
	seg := scratch[:n]
	w.load(asTile(seg), io.j.src, io.j.l, s, n)
	return seg
}

// put writes a scanned segment from get back to the output.
func (io rowIO[T]) put(seg []T, s int) {
	if io.dst == nil {
		store(io.j.dst, s, asTile(seg))
	}
}

// cumsumRows scans every row in one pass. Rows shorter than a tile go
// several to a unit (loaded and stored together); a longer row is a unit
// of its own, scanned tile after tile with the carry.
func cumsumRows[T scanNum](ctx context.Context, j cumsumJob, rows int) error {
	n := j.n
	per := max(1, ir.ScanTile/n)
	units := (rows + per - 1) / per
	io := newRowIO[T](&j)
	newScratch := func() []T { return make([]T, max(per*n, min(n, ir.ScanTile))) }
	return forUnits(ctx, units, j.workers, newScratch, func(x []T, u int) {
		var w walker
		if n <= ir.ScanTile {
			r0, r1 := u*per, min(rows, (u+1)*per)
			seg := io.get(&w, x, r0*n, (r1-r0)*n)
			for r := range r1 - r0 {
				scanTile1(seg[r*n:(r+1)*n], 0, false)
			}
			io.put(seg, r0*n)
			return
		}
		var o T
		for k := 0; k*ir.ScanTile < n; k++ {
			if ctx.Err() != nil {
				return // forUnits reports it
			}
			s := u*n + k*ir.ScanTile
			seg := io.get(&w, x, s, min(ir.ScanTile, n-k*ir.ScanTile))
			a := scanTile1(seg, o, k > 0)
			io.put(seg, s)
			if k == 0 {
				o = a
			} else {
				o += a
			}
		}
	})
}

// cumsumRowsTwoPass scans few long rows: tile totals in parallel, the
// carries in sequence, then every tile in parallel with its carry.
func cumsumRowsTwoPass[T scanNum](ctx context.Context, j cumsumJob, rows, tiles int) error {
	n := j.n
	io := newRowIO[T](&j)
	newScratch := func() []T { return make([]T, ir.ScanTile) }
	// Pass 1: totals of every tile but each row's last (read into scratch:
	// the output is written by pass 2 only).
	totals := make([]T, rows*tiles)
	err := forUnits(ctx, rows*(tiles-1), j.workers, newScratch, func(x []T, u int) {
		r, k := u/(tiles-1), u%(tiles-1)
		s := r*n + k*ir.ScanTile
		if io.src != nil {
			totals[r*tiles+k] = tileTotal1(io.src[s : s+ir.ScanTile])
			return
		}
		var w walker
		w.load(asTile(x), j.src, j.l, s, ir.ScanTile)
		totals[r*tiles+k] = tileTotal1(x)
	})
	if err != nil {
		return err
	}
	carries := cumsumCarries(totals, rows, tiles, 1)
	// Pass 2: every tile with its carry.
	return forUnits(ctx, rows*tiles, j.workers, newScratch, func(x []T, u int) {
		r, k := u/tiles, u%tiles
		s := r*n + k*ir.ScanTile
		var w walker
		seg := io.get(&w, x, s, min(ir.ScanTile, n-k*ir.ScanTile))
		scanTile1(seg, carries[r*tiles+k], k > 0)
		io.put(seg, s)
	})
}

// cumsumCarries turns tile totals [seqs, tiles, lanes] into the carries
// O_k of the same layout: O_0 unused, O_1 = A_0, O_k = O_{k−1} + A_{k−1}.
func cumsumCarries[T scanNum](totals []T, seqs, tiles, lanes int) []T {
	carries := make([]T, len(totals))
	for s := range seqs {
		for k := 1; k < tiles; k++ {
			o := carries[(s*tiles+k)*lanes : (s*tiles+k+1)*lanes]
			a := totals[(s*tiles+k-1)*lanes : (s*tiles+k)*lanes]
			if k == 1 {
				copy(o, a)
				continue
			}
			prev := carries[(s*tiles+k-1)*lanes : (s*tiles+k)*lanes]
			for i := range o {
				o[i] = prev[i] + a[i]
			}
		}
	}
	return carries
}

// scanTile1 scans one tile of one sequence in place (x: its m ≤ 4096
// elements) in ir/scan.go's order and adds the tile offset o when hasO.
// It returns the tile total A (the sum of a whole tile; for a short last
// tile it is never used).
func scanTile1[T scanNum](x []T, o T, hasO bool) T {
	var c [ir.ScanGroup * ir.ScanGroups]T // chunk totals, then their group prefixes l1
	var d [ir.ScanGroups]T                // group totals, then their tile prefixes l2
	m := len(x)
	if m == 0 {
		return 0
	}
	nc := (m + ir.ScanChunk - 1) / ir.ScanChunk
	// Level 0: sequential prefix in each chunk; whole chunks four at a
	// time, whose chains are independent (each still in its own order).
	q := 0
	for ; (q+4)*ir.ScanChunk <= m; q += 4 {
		a := (*[4 * ir.ScanChunk]T)(x[q*ir.ScanChunk:])
		s0, s1, s2, s3 := a[0], a[16], a[32], a[48]
		for p := 1; p < ir.ScanChunk; p++ {
			s0 += a[p]
			a[p] = s0
			s1 += a[16+p]
			a[16+p] = s1
			s2 += a[32+p]
			a[32+p] = s2
			s3 += a[48+p]
			a[48+p] = s3
		}
		c[q], c[q+1], c[q+2], c[q+3] = s0, s1, s2, s3
	}
	for ; q < nc; q++ {
		ch := x[q*ir.ScanChunk : min((q+1)*ir.ScanChunk, m)]
		s := ch[0]
		for p := 1; p < len(ch); p++ {
			s += ch[p]
			ch[p] = s
		}
		c[q] = s
	}
	// Level 1: sequential prefix of the chunk totals in each group.
	ng := (nc + ir.ScanGroup - 1) / ir.ScanGroup
	for g := range ng {
		cs := c[g*ir.ScanGroup : min((g+1)*ir.ScanGroup, nc)]
		s := cs[0]
		for q := 1; q < len(cs); q++ {
			s += cs[q]
			cs[q] = s
		}
		d[g] = s
	}
	// Level 2: sequential prefix of the group totals.
	for g := 1; g < ng; g++ {
		d[g] = d[g-1] + d[g]
	}
	// The chunk offsets e and the tile offset o: out = o + (e + l0).
	for q := range nc {
		ch := x[q*ir.ScanChunk : min((q+1)*ir.ScanChunk, m)]
		g, qi := q/ir.ScanGroup, q%ir.ScanGroup
		var e T
		switch {
		case q == 0:
			if hasO {
				for p := range ch {
					ch[p] = o + ch[p]
				}
			}
			continue
		case g == 0:
			e = c[q-1]
		case qi == 0:
			e = d[g-1]
		default:
			e = d[g-1] + c[q-1]
		}
		if hasO {
			for p := range ch {
				ch[p] = o + (e + ch[p])
			}
		} else {
			for p := range ch {
				ch[p] = e + ch[p]
			}
		}
	}
	return d[ng-1]
}

// tileTotal1 is the total of a whole tile (4096 elements) as scanTile1
// computes it, without the prefixes: the chunk sums, their sum per group,
// the group sums, each in sequence.
func tileTotal1[T scanNum](x []T) T {
	var t T
	for g := range ir.ScanGroups {
		var l1 T
		for q := range ir.ScanGroup {
			ch := x[(g*ir.ScanGroup+q)*ir.ScanChunk:][:ir.ScanChunk]
			s := ch[0]
			for _, v := range ch[1:] {
				s += v
			}
			if q == 0 {
				l1 = s
			} else {
				l1 += s
			}
		}
		if g == 0 {
			t = l1
		} else {
			t += l1
		}
	}
	return t
}

// --- columns (right > 1) ---

// colScratch is one worker's memory for column tiles: the tile
// [positions × lanes], chunk totals [256 × lanes], group totals
// [16 × lanes], an offset row and the carries of the unit's lanes.
type colScratch[T scanNum] struct {
	x, c, d, e, o, a []T
}

func newColScratch[T scanNum](lanes int) *colScratch[T] {
	return &colScratch[T]{
		x: make([]T, ir.ScanTile*lanes), c: make([]T, ir.ScanGroup*ir.ScanGroups*lanes),
		d: make([]T, ir.ScanGroups*lanes), e: make([]T, lanes), o: make([]T, lanes), a: make([]T, lanes),
	}
}

// colLoad loads positions [i0, i0+m) of lanes [r0, r0+w) of left index li
// into x[(i−i0)·w + lane]; colStore writes them back to the output.
func (j *cumsumJob) colLoad(w *walker, x tile, li, r0, wl, i0, m int) {
	for i := range m {
		w.load(x.window(i*wl, wl), j.src, j.l, (li*j.n+i0+i)*j.right+r0, wl)
	}
}

func (j *cumsumJob) colStore(x tile, li, r0, wl, i0, m int) {
	for i := range m {
		store(j.dst, (li*j.n+i0+i)*j.right+r0, x.window(i*wl, wl))
	}
}

// unitCols maps a unit of work to its left index, first lane and width.
func (j *cumsumJob) unitCols(u, lanes, blocks int) (li, r0, wl int) {
	li, b := u/blocks, u%blocks
	r0 = b * lanes
	return li, r0, min(lanes, j.right-r0)
}

// cumsumCols scans strided columns in one pass: each unit a block of
// lanes of one left index, tile after tile with per-lane carries.
func cumsumCols[T scanNum](ctx context.Context, j cumsumJob, lanes, blocks int) error {
	newScratch := func() *colScratch[T] { return newColScratch[T](lanes) }
	return forUnits(ctx, j.left*blocks, j.workers, newScratch, func(s *colScratch[T], u int) {
		li, r0, wl := j.unitCols(u, lanes, blocks)
		var w walker
		for k := 0; k*ir.ScanTile < j.n; k++ {
			if ctx.Err() != nil {
				return // forUnits reports it
			}
			i0 := k * ir.ScanTile
			m := min(ir.ScanTile, j.n-i0)
			x := s.x[:m*wl]
			j.colLoad(&w, asTile(x), li, r0, wl, i0, m)
			scanTileW(x, wl, s, s.o[:wl], k > 0)
			j.colStore(asTile(x), li, r0, wl, i0, m)
			o, a := s.o[:wl], s.a[:wl]
			for i := range o {
				if k == 0 {
					o[i] = a[i]
				} else {
					o[i] += a[i]
				}
			}
		}
	})
}

// cumsumColsTwoPass is cumsumRowsTwoPass for strided columns.
func cumsumColsTwoPass[T scanNum](ctx context.Context, j cumsumJob, lanes, blocks, tiles int) error {
	units := j.left * blocks
	newScratch := func() *colScratch[T] { return newColScratch[T](lanes) }
	totals := make([]T, units*tiles*lanes)
	err := forUnits(ctx, units*(tiles-1), j.workers, newScratch, func(s *colScratch[T], v int) {
		u, k := v/(tiles-1), v%(tiles-1)
		li, r0, wl := j.unitCols(u, lanes, blocks)
		var w walker
		x := s.x[:ir.ScanTile*wl]
		j.colLoad(&w, asTile(x), li, r0, wl, k*ir.ScanTile, ir.ScanTile)
		tileTotalW(x, wl, s, totals[(u*tiles+k)*lanes:][:wl])
	})
	if err != nil {
		return err
	}
	carries := cumsumCarries(totals, units, tiles, lanes)
	return forUnits(ctx, units*tiles, j.workers, newScratch, func(s *colScratch[T], v int) {
		u, k := v/tiles, v%tiles
		li, r0, wl := j.unitCols(u, lanes, blocks)
		i0 := k * ir.ScanTile
		m := min(ir.ScanTile, j.n-i0)
		var w walker
		x := s.x[:m*wl]
		j.colLoad(&w, asTile(x), li, r0, wl, i0, m)
		scanTileW(x, wl, s, carries[(u*tiles+k)*lanes:][:wl], k > 0)
		j.colStore(asTile(x), li, r0, wl, i0, m)
	})
}

// addRow sets dst[i] = a[i] + b[i].
func addRow[T scanNum](dst, a, b []T) {
	b = b[:len(a)]
	dst = dst[:len(a)]
	for i := range a {
		dst[i] = a[i] + b[i]
	}
}

// scanTileW is scanTile1 for wl lanes at once: x is [m × wl] (position
// major), every level runs along the positions, lane by lane in the inner
// loops, in exactly scanTile1's order per lane. The tile total of each
// lane goes to s.a.
func scanTileW[T scanNum](x []T, wl int, s *colScratch[T], o []T, hasO bool) {
	m := len(x) / wl
	row := func(buf []T, i int) []T { return buf[i*wl : (i+1)*wl] }
	nc := (m + ir.ScanChunk - 1) / ir.ScanChunk
	for q := range nc {
		end := min((q+1)*ir.ScanChunk, m)
		for i := q*ir.ScanChunk + 1; i < end; i++ {
			addRow(row(x, i), row(x, i-1), row(x, i))
		}
		copy(row(s.c, q), row(x, end-1))
	}
	ng := (nc + ir.ScanGroup - 1) / ir.ScanGroup
	for g := range ng {
		end := min((g+1)*ir.ScanGroup, nc)
		for q := g*ir.ScanGroup + 1; q < end; q++ {
			addRow(row(s.c, q), row(s.c, q-1), row(s.c, q))
		}
		copy(row(s.d, g), row(s.c, end-1))
	}
	for g := 1; g < ng; g++ {
		addRow(row(s.d, g), row(s.d, g-1), row(s.d, g))
	}
	e := s.e[:wl]
	for q := 1; q < nc; q++ {
		g, qi := q/ir.ScanGroup, q%ir.ScanGroup
		switch {
		case g == 0:
			copy(e, row(s.c, q-1))
		case qi == 0:
			copy(e, row(s.d, g-1))
		default:
			addRow(e, row(s.d, g-1), row(s.c, q-1))
		}
		for i := q * ir.ScanChunk; i < min((q+1)*ir.ScanChunk, m); i++ {
			addRow(row(x, i), e, row(x, i))
		}
	}
	if hasO {
		for i := range m {
			addRow(row(x, i), o, row(x, i))
		}
	}
	copy(s.a[:wl], row(s.d, ng-1))
}

// tileTotalW is tileTotal1 for wl lanes: x is a whole tile [4096 × wl];
// the totals go to out.
func tileTotalW[T scanNum](x []T, wl int, s *colScratch[T], out []T) {
	row := func(buf []T, i int) []T { return buf[i*wl : (i+1)*wl] }
	c, l1 := s.c[:wl], s.d[:wl]
	for g := range ir.ScanGroups {
		for q := range ir.ScanGroup {
			i0 := (g*ir.ScanGroup + q) * ir.ScanChunk
			copy(c, row(x, i0))
			for i := i0 + 1; i < i0+ir.ScanChunk; i++ {
				addRow(c, c, row(x, i))
			}
			if q == 0 {
				copy(l1, c)
			} else {
				addRow(l1, l1, c)
			}
		}
		if g == 0 {
			copy(out, l1)
		} else {
			addRow(out, out, l1)
		}
	}
}

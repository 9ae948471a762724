package cpu

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// Pools and upsampling (window steps: ir.ClassWindow) run as direct loops
// over the input, read as the packed array fuse hands every window op
// (plan.WindowOperandOf: contiguous at an offset). The semantics are
// ir.PoolParams' and ir.UpsampleParams'; these loops are the Go twins of
// the HIP kernels in kernels/window.hip, which compute every element with
// the same operations in the same order, so the GPU's results equal these
// bit for bit.
//
// The work is cut into items — one plane (n, c) × a band of output rows,
// about windowItemWork units of work each — handed out to the executor's
// workers one at a time; the context is checked before every item.
// f32 and f64 are read and written in place. f16 and bf16 are widened to
// float32 (the band's input rows), u8 and u32 to int64, and the results
// narrowed on store (f16/bf16 NaNs become the canonical NaN).

// windowItemWork is the work of one item (output elements × window reads):
// enough to amortise handing it out, small enough to balance the workers
// and to notice a cancellation within a fraction of a millisecond.
const windowItemWork = 1 << 15

// runWindow executes a window step: a convolution (conv.go), a pool or an
// upsampling.
func (e *Executor) runWindow(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	n := k.Instrs[0].Node
	if n.Op == ir.OpConv || n.Op == ir.OpConvTranspose {
		return e.runConv(ctx, k, mem)
	}
	op := k.Ins[k.Instrs[0].Args[0].Index]
	if !plan.WindowOperandOf(op.Layout) || !slices.Equal(op.Layout.Dims, n.Args[0].Shape) || op.Buf.DType != n.DType {
		return fmt.Errorf("cpu: kernel %s: %s operand %v %v is not a packed %v%v", k.Name, n.Op, op.Buf.DType, op.Layout, n.DType, n.Args[0].Shape)
	}
	src := asBuf(mem[op.Buf.ID].(*memory).b, op.Buf.DType)
	dst := asBuf(mem[k.Out.ID].(*memory).b, k.Out.DType)
	if n.Numel() == 0 {
		return nil
	}
	g := windowGeomOf(n)
	var s windowStep
	switch n.Op {
	case ir.OpMaxPool, ir.OpAvgPool:
		s = newPoolStep(n, g)
	case ir.OpUpsampleNearest:
		s = newNearestStep(n, g)
	case ir.OpUpsampleBilinear:
		if g.oh == g.h && g.ow == g.w { // a copy (ir.UpsampleParams)
			s = &nearestStep{g: g, hIdx: identity(g.h), wIdx: identity(g.w)}
		} else {
			s = newBilinearStep(n, g)
		}
	default:
		return fmt.Errorf("cpu: kernel %s: no CPU window kernel for %s", k.Name, n.Op)
	}
	return forWindowItems(ctx, e.workers, g, s, src.slice(op.Layout.Offset), dst)
}

// windowGeom is a window op's shape: planes (N·C) of h×w inputs and oh×ow
// outputs (h = oh = 1 for one spatial dim).
type windowGeom struct {
	planes, h, w, oh, ow int
}

func windowGeomOf(n *ir.Node) windowGeom {
	x, y := n.Args[0].Shape, n.Shape
	g := windowGeom{planes: x[0] * x[1], h: 1, oh: 1}
	if len(x) == 3 {
		g.w, g.ow = x[2], y[2]
	} else {
		g.h, g.w, g.oh, g.ow = x[2], x[3], y[2], y[3]
	}
	return g
}

// windowStep computes output rows [oh0, oh1) of plane p.
type windowStep interface {
	// cost is the work of one output element.
	cost() int
	band(sc *windowScratch, src, dst buf, p, oh0, oh1 int)
}

// windowScratch is one worker's memory, reused for all its items.
type windowScratch struct {
	f32 []float32
	f64 []float64
	i64 []int64
	o32 []float32
	o64 []float64
	oi  []int64
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// forWindowItems runs s over every (plane, band of output rows) on up to
// workers goroutines (on the calling one for small steps). The parallelism
// is over planes and bands of rows: a 1-D upsampling of a single long row
// runs on one worker.
func forWindowItems(ctx context.Context, workers int, g windowGeom, s windowStep, src, dst buf) error {
	rows := max(1, min(g.oh, windowItemWork/max(g.ow*s.cost(), 1)))
	bands := (g.oh + rows - 1) / rows
	items := g.planes * bands
	if g.planes*g.oh*g.ow*s.cost() < serialBelow {
		workers = 1
	}
	var next atomic.Int64
	work := func() {
		var sc windowScratch
		for {
			it := int(next.Add(1) - 1)
			if it >= items || ctx.Err() != nil {
				return
			}
			p, b := it/bands, it%bands
			s.band(&sc, src, dst, p, b*rows, min(g.oh, (b+1)*rows))
		}
	}
	if workers <= 1 || items == 1 {
		work()
		return ctx.Err()
	}
	parallel(min(workers, items), func(int) { work() })
	return ctx.Err()
}

// slice returns the buffer from element off on.
func (b buf) slice(off int) buf {
	switch b.dt {
	case dtype.F32:
		b.f32 = b.f32[off:]
	case dtype.F64:
		b.f64 = b.f64[off:]
	case dtype.F16:
		b.f16 = b.f16[off:]
	case dtype.BF16:
		b.b16 = b.b16[off:]
	case dtype.U8:
		b.u8 = b.u8[off:]
	case dtype.U32:
		b.u32 = b.u32[off:]
	case dtype.I64:
		b.i64 = b.i64[off:]
	}
	return b
}

// ---- pools ----

// poolStep is a max or avg pool.
type poolStep struct {
	g      windowGeom
	p      ir.PoolParams
	isMax  bool
	kh, kw int
	// cols[j] is the range [lo, hi) of output columns whose window column
	// j lies inside the input; colsIn[ow] and colsPad[ow] are the number of
	// input columns in output column ow's window, and of columns of the
	// padded input.
	cols            [][2]int
	colsIn, colsPad []int
}

func newPoolStep(n *ir.Node, g windowGeom) *poolStep {
	p := n.Pool()
	s := &poolStep{g: g, p: p, isMax: n.Op == ir.OpMaxPool, kh: p.Kernel[0], kw: p.Kernel[1]}
	sw, pw := p.Stride[1], p.Padding[1]
	for j := range s.kw {
		// Column ow·sw − pw + j is inside [0, w): ow ≥ ⌈(pw − j)/sw⌉ and
		// ow ≤ ⌊(w − 1 + pw − j)/sw⌋ (both numerators may be negative).
		lo, hi := 0, 0
		if d := pw - j; d > 0 {
			lo = (d + sw - 1) / sw
		}
		if d := g.w - 1 + pw - j; d >= 0 {
			hi = min(g.ow, d/sw+1)
		}
		lo = min(lo, g.ow)
		s.cols = append(s.cols, [2]int{lo, max(lo, hi)})
	}
	for ow := range g.ow {
		ws := ow*sw - pw
		s.colsIn = append(s.colsIn, min(ws+s.kw, g.w)-max(ws, 0))
		s.colsPad = append(s.colsPad, min(ws+s.kw, g.w+pw)-ws)
	}
	return s
}

func (s *poolStep) cost() int { return s.kh * s.kw }

// inRows returns the input rows [r0, r1) that output rows [oh0, oh1) read.
func (s *poolStep) inRows(oh0, oh1 int) (int, int) {
	r0 := max(0, oh0*s.p.Stride[0]-s.p.Padding[0])
	r1 := min(s.g.h, (oh1-1)*s.p.Stride[0]-s.p.Padding[0]+s.kh)
	return r0, r1
}

func (s *poolStep) band(sc *windowScratch, src, dst buf, p, oh0, oh1 int) {
	g := s.g
	plane, out := p*g.h*g.w, (p*g.oh+oh0)*g.ow
	n := (oh1 - oh0) * g.ow
	switch src.dt {
	case dtype.F32:
		poolBand(s, dst.f32[out:out+n], src.f32[plane:plane+g.h*g.w], 0, oh0, oh1)
		return
	case dtype.F64:
		poolBand(s, dst.f64[out:out+n], src.f64[plane:plane+g.h*g.w], 0, oh0, oh1)
		return
	}
	r0, r1 := s.inRows(oh0, oh1)
	in := (r1 - r0) * g.w
	if src.dt == dtype.F16 || src.dt == dtype.BF16 {
		sc.f32, sc.o32 = grow(sc.f32, in), grow(sc.o32, n)
		fill(tile{f32: sc.f32}, src, plane+r0*g.w, 1, 0, in)
		poolBand(s, sc.o32, sc.f32, r0, oh0, oh1)
		store(dst, out, tile{f32: sc.o32})
		return
	}
	sc.i64, sc.oi = grow(sc.i64, in), grow(sc.oi, n)
	fill(tile{i64: sc.i64}, src, plane+r0*g.w, 1, 0, in)
	poolBand(s, sc.oi, sc.i64, r0, oh0, oh1)
	store(dst, out, tile{i64: sc.oi})
}

type poolNum interface{ float32 | float64 | int64 }

// lowest is the identity of max for the compute kind (−∞; 0 for the
// widened u8/u32 values, which are never negative) and nan its canonical
// NaN (0 for int64, which has none).
func lowest[T poolNum]() (low, nan T) {
	switch p := any(&low).(type) {
	case *float32:
		*p = float32(math.Inf(-1))
		*any(&nan).(*float32) = float32(math.NaN())
	case *float64:
		*p = math.Inf(-1)
		*any(&nan).(*float64) = math.NaN()
	}
	return low, nan
}

// poolBand computes output rows [oh0, oh1) of one plane into dst from src,
// which holds the plane's input rows from r0 on. Output (oh, ow) reads the
// window [hs, hs+kh) × [ws, ws+kw) (hs = oh·stride − pad) clipped to the
// input:
//   - max: IEEE 754-2019 maximum (Go's max: NaN propagates, canonical on
//     store; +0 > −0), so the order of the reads does not matter;
//   - avg: the sum in T (the kind's arithmetic: float32, float64, or exact
//     int64 for u8/u32) of the window's input elements in row-major order,
//     starting from 0, then one division by the divisor, T(div) — a
//     truncating division for the unsigned integers.
//
// The loops run over window offsets (i, j) outside and output columns
// inside — a long strided loop with no bounds logic — which for every
// output element visits its window's input elements in row-major order,
// the order the GPU kernel sums them in.
func poolBand[T poolNum](s *poolStep, dst, src []T, r0, oh0, oh1 int) {
	g, p := s.g, s.p
	sh, sw, ph, pw := p.Stride[0], p.Stride[1], p.Padding[0], p.Padding[1]
	low, nan := lowest[T]()
	for oh := oh0; oh < oh1; oh++ {
		out := dst[(oh-oh0)*g.ow : (oh-oh0+1)*g.ow]
		if s.isMax {
			for i := range out {
				out[i] = low
			}
		} else {
			clear(out)
		}
		hs := oh*sh - ph
		for r := max(hs, 0); r < min(hs+s.kh, g.h); r++ {
			row := src[(r-r0)*g.w : (r-r0+1)*g.w]
			for j, c := range s.cols {
				lo, hi := c[0], c[1]
				if lo == hi {
					continue
				}
				in := row[lo*sw+j-pw : (hi-1)*sw+j-pw+1]
				acc := out[lo:hi]
				if s.isMax {
					for q := range acc {
						acc[q] = max(acc[q], in[q*sw])
					}
				} else {
					for q := range acc {
						acc[q] += in[q*sw]
					}
				}
			}
		}
		if s.isMax {
			for i, v := range out {
				if v != v {
					out[i] = nan
				}
			}
			continue
		}
		rows := min(hs+s.kh, g.h) - max(hs, 0)
		cols := s.colsIn
		if p.CountIncludePad {
			rows, cols = min(hs+s.kh, g.h+ph)-hs, s.colsPad
		}
		for i := range out {
			out[i] /= T(rows * cols[i])
		}
	}
}

// ---- upsampling ----

// identity is the index table 0, 1, …, n−1.
func identity(n int) []int {
	t := make([]int, n)
	for i := range t {
		t[i] = i
	}
	return t
}

// nearestIndex returns the source index of every output index of an axis
// of size in upsampled to out: ⌊d·in/out⌋ exactly (a 128-bit product), or
// min(⌊d/scale⌋, in − 1) in float64 with a scale factor.
func nearestIndex(in, out int, scale float64) []int {
	t := make([]int, out)
	for d := range t {
		if scale > 0 {
			t[d] = min(int(math.Floor(float64(d)/scale)), in-1)
		} else {
			hi, lo := bits.Mul64(uint64(d), uint64(in))
			q, _ := bits.Div64(hi, lo, uint64(out)) // hi < out: d < out
			t[d] = int(q)
		}
	}
	return t
}

// nearestStep copies each output element from its source element.
type nearestStep struct {
	g          windowGeom
	hIdx, wIdx []int
}

func newNearestStep(n *ir.Node, g windowGeom) *nearestStep {
	p := n.Upsample()
	s := &nearestStep{g: g, hIdx: []int{0}}
	if p.Rank == 2 {
		s.hIdx = nearestIndex(g.h, g.oh, p.Scale[0])
		s.wIdx = nearestIndex(g.w, g.ow, p.Scale[1])
	} else {
		s.wIdx = nearestIndex(g.w, g.ow, p.Scale[0])
	}
	return s
}

func (s *nearestStep) cost() int { return 1 }

func (s *nearestStep) band(_ *windowScratch, src, dst buf, p, oh0, oh1 int) {
	g := s.g
	plane, out := p*g.h*g.w, (p*g.oh+oh0)*g.ow
	n := (oh1 - oh0) * g.ow
	switch src.dt {
	case dtype.F32:
		nearestBand(s, dst.f32[out:out+n], src.f32[plane:plane+g.h*g.w], oh0, oh1)
	case dtype.F64:
		nearestBand(s, dst.f64[out:out+n], src.f64[plane:plane+g.h*g.w], oh0, oh1)
	case dtype.U8:
		nearestBand(s, dst.u8[out:out+n], src.u8[plane:plane+g.h*g.w], oh0, oh1)
	case dtype.U32:
		nearestBand(s, dst.u32[out:out+n], src.u32[plane:plane+g.h*g.w], oh0, oh1)
	case dtype.F16:
		d := dst.f16[out : out+n]
		nearestBand(s, d, src.f16[plane:plane+g.h*g.w], oh0, oh1)
		for i, v := range d {
			if v&0x7fff > 0x7c00 {
				d[i] = canonNaNF16
			}
		}
	case dtype.BF16:
		d := dst.b16[out : out+n]
		nearestBand(s, d, src.b16[plane:plane+g.h*g.w], oh0, oh1)
		for i, v := range d {
			if v&0x7fff > 0x7f80 {
				d[i] = canonNaNBF16
			}
		}
	}
}

func nearestBand[E any](s *nearestStep, dst, src []E, oh0, oh1 int) {
	g := s.g
	o := 0
	for oh := oh0; oh < oh1; oh++ {
		row := src[s.hIdx[oh]*g.w : (s.hIdx[oh]+1)*g.w]
		for _, c := range s.wIdx {
			dst[o] = row[c]
			o++
		}
	}
}

// lerpAxis is one output index's interpolation along an axis: source
// indices i0, i1 and weights 1 − λ and λ.
type lerpAxis struct {
	i0, i1 int
	w0, w1 float64
}

// bilinearAxis computes the interpolation of every output index of an axis
// of size in resized to out (ir.UpsampleParams), in float64.
func bilinearAxis(in, out int, align bool, scale float64) []lerpAxis {
	var c float64
	switch {
	case align && out > 1:
		c = float64(in-1) / float64(out-1)
	case align:
		c = 0
	case scale > 0:
		c = 1 / scale
	default:
		c = float64(in) / float64(out)
	}
	t := make([]lerpAxis, out)
	for d := range t {
		var src float64
		if align {
			src = c * float64(d)
		} else {
			src = max(float64(c*(float64(d)+0.5))-0.5, 0)
		}
		i0 := min(int(math.Floor(src)), in-1)
		l := src - float64(i0)
		t[d] = lerpAxis{i0: i0, i1: min(i0+1, in-1), w0: 1 - l, w1: l}
	}
	return t
}

// bilinearStep interpolates between four source elements in float64.
type bilinearStep struct {
	g      windowGeom
	hs, ws []lerpAxis
}

func newBilinearStep(n *ir.Node, g windowGeom) *bilinearStep {
	p := n.Upsample()
	return &bilinearStep{g: g,
		hs: bilinearAxis(g.h, g.oh, p.AlignCorners, p.Scale[0]),
		ws: bilinearAxis(g.w, g.ow, p.AlignCorners, p.Scale[1])}
}

func (s *bilinearStep) cost() int { return 4 }

func (s *bilinearStep) band(sc *windowScratch, src, dst buf, p, oh0, oh1 int) {
	g := s.g
	plane := src.slice(p * g.h * g.w)
	sc.o64 = grow(sc.o64, g.ow)
	sc.f64 = grow(sc.f64, 2*g.w)
	for oh := oh0; oh < oh1; oh++ {
		a := s.hs[oh]
		var top, bot []float64
		if src.dt == dtype.F64 {
			top, bot = plane.f64[a.i0*g.w:(a.i0+1)*g.w], plane.f64[a.i1*g.w:(a.i1+1)*g.w]
		} else {
			top, bot = sc.f64[:g.w], sc.f64[g.w:]
			rowF64(top, plane, a.i0*g.w)
			rowF64(bot, plane, a.i1*g.w)
		}
		out := (p*g.oh + oh) * g.ow
		if dst.dt == dtype.F64 {
			bilinearRow(dst.f64[out:out+g.ow], top, bot, s.ws, a)
			continue
		}
		row := sc.o64
		bilinearRow(row, top, bot, s.ws, a)
		switch dst.dt {
		case dtype.F32:
			d := dst.f32[out : out+g.ow]
			for i, v := range row {
				d[i] = float32(v)
				if v != v {
					d[i] = canonNaN32
				}
			}
		default: // f16, bf16: round to odd in float32, then once to half
			sc.o32 = grow(sc.o32, g.ow)
			for i, v := range row {
				sc.o32[i] = dtype.F32RoundOdd(v)
			}
			store(dst, out, tile{f32: sc.o32})
		}
	}
}

// bilinearRow computes one output row from source rows top (i0) and bot
// (i1): (v00·(1−λw) + v01·λw)·(1−λh) + (v10·(1−λw) + v11·λw)·λh, each
// product and sum rounded to float64 (the conversions forbid fused
// multiply-adds), a NaN result canonical.
func bilinearRow(dst, top, bot []float64, ws []lerpAxis, a lerpAxis) {
	for i, b := range ws {
		t := float64(top[b.i0]*b.w0) + float64(top[b.i1]*b.w1)
		u := float64(bot[b.i0]*b.w0) + float64(bot[b.i1]*b.w1)
		v := float64(t*a.w0) + float64(u*a.w1)
		if v != v {
			v = math.NaN()
		}
		dst[i] = v
	}
}

// rowF64 widens len(dst) elements of src from pos to float64 (f16 and bf16
// through float32, NaNs canonical).
func rowF64(dst []float64, src buf, pos int) {
	switch src.dt {
	case dtype.F32:
		for i, v := range src.f32[pos : pos+len(dst)] {
			dst[i] = float64(v)
		}
	case dtype.F16:
		for i, v := range src.f16[pos : pos+len(dst)] {
			dst[i] = float64(f16ToF32[v])
		}
	case dtype.BF16:
		for i, v := range src.b16[pos : pos+len(dst)] {
			dst[i] = float64(v.Float32())
		}
	}
}

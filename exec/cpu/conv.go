package cpu

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// Convolution steps (ir.OpConv, ir.OpConvTranspose) are GEMMs around
// copies, 1-D convolutions as 2-D ones of height 1. The float32 GEMMs run
// on the executor's AVX-512 kernel where the CPU has it (sgemm.go), the
// others on the host BLAS of matmul steps (matmul.go).
//
//   - conv with vertical stride 1 (forwardRows): the input is copied once
//     per kernel column kx into padded rows of OW pixels (the taps' column
//     shifts and the horizontal stride baked in), and one GEMM per kernel
//     row ky, w_ky [Cout/G, Cin/G·KW] times those rows shifted down by ky,
//     accumulates into the NCHW output: KW copies of the input instead of
//     im2col's KH·KW, with GEMMs as large as im2col's. In bands of output
//     rows when whole images do not fit.
//   - other convs (forward): im2col + GEMM. For each image and group, a tile
//     of output pixels becomes a column matrix [Cin/G·KH·KW, pixels] (zeros
//     where a tap falls in the padding) and one GEMM w_g [Cout/G,
//     Cin/G·KH·KW] · col writes the tile's rows of the NCHW output in place
//     (ldc = the output plane). When whole images fit, several images share
//     one strided-batched call. A 1×1 kernel with stride 1 and no padding
//     needs no column matrix: the input is the GEMM's B operand as it is.
//   - depthwise (groups = Cin, one input channel per group): a direct loop
//     over the output planes, faster than GEMMs with one output row.
//   - conv_transpose (transposed): GEMM + col2im. w_gᵀ [Cout/G·KH·KW,
//     Cin/G] · x_g [Cin/G, pixels] gives every tap's contribution of a tile
//     of input pixels; col2im adds each into the output pixel it lands on
//     (the same index map as im2col's, from input to output). The output is
//     zeroed first.
//
// f32 and f64 operands are read in place and accumulate in their own
// precision; f16 and bf16 inputs are widened to float32 as they are read
// (the weights once per step), products accumulate in float32 and each
// output element is rounded once on store.
//
// Scratch memory (column tiles or row copies, repacked weights, the own
// GEMM's packed weights, and for f16/bf16 the widened weights and float32
// staging) is bounded by
// convScratchMax per step and by what the executor's memory limit leaves
// (scratchRoom): the tiles shrink to fit, down to one output row or one
// pixel; a step whose smallest tiling does not fit returns an error. (An
// f16/bf16 conv_transpose accumulates whole output planes in float32, so
// one plane must fit: 8M pixels.)
// The scratch is one arena (arena.go), so reruns reuse it. Padding, im2col,
// col2im, the stores and the direct loops run on the executor's workers;
// the GEMMs on the host BLAS's own threads; the context is checked before
// every tile.

// convScratchMax bounds a convolution step's scratch memory: 32 MiB. A
// tile of this size is already far larger than the caches, so larger ones
// would only save GEMM calls (each of millions of multiply-adds by then).
const convScratchMax = 32 << 20

// convTileTarget is the tile the GEMMs are fed when the scratch allows:
// 8 MiB, a few images of a ResNet stage, which stays in a large L3 cache
// between the copy writing it and the GEMM reading it (W12 on 2 cores, best
// of 40 runs: 4, 8 and 16 MiB within 4%, 32 MiB 10% slower).
var convTileTarget = 8 << 20

// convSlack is what the alignment of the scratch's parts (at most five,
// each cache-line aligned) may add to their sizes.
const convSlack = 5 * slotAlign

// convOwnGemm lets float32 conv steps run their GEMMs on the executor's
// AVX-512 kernel (sgemm.go) where the CPU has it (tests turn it off to run
// the host BLAS path too).
var convOwnGemm = true

// convRows enables forwardRows (tests turn it off to run every conv
// through im2col tiles too).
var convRows = true

// convGeom is a convolution step's geometry, 1-D steps as 2-D of height 1.
// For conv the "source" grid is the output and the "target" grid the
// input (im2col gathers from input positions); for conv_transpose the
// source is the input and the target the output (col2im scatters into
// output positions). Either way a source position i and tap k address
// target position i·stride − pad + k·dil.
type convGeom struct {
	transposed       bool
	n, cin, cout, gr int
	cig, cog         int // channels per group, in and out
	ih, iw, oh, ow   int
	kh, kw           int
	sh, sw, ph, pw   int
	dh, dw           int
}

func convGeomOf(nd *ir.Node) convGeom {
	p := nd.Conv()
	x, w, o := nd.Args[0].Shape, nd.Args[1].Shape, nd.Shape
	g := convGeom{transposed: nd.Op == ir.OpConvTranspose, n: x[0], cin: x[1], cout: o[1], gr: p.Groups,
		ih: 1, iw: x[2], oh: 1, ow: o[2], kh: 1, kw: w[2], sh: 1, sw: p.Stride[0], ph: 0, pw: p.Padding[0], dh: 1, dw: p.Dilation[0]}
	if p.Rank == 2 {
		g.ih, g.iw, g.oh, g.ow, g.kh, g.kw = x[2], x[3], o[2], o[3], w[2], w[3]
		g.sh, g.sw, g.ph, g.pw, g.dh, g.dw = p.Stride[0], p.Stride[1], p.Padding[0], p.Padding[1], p.Dilation[0], p.Dilation[1]
	}
	g.cig, g.cog = g.cin/g.gr, g.cout/g.gr
	return g
}

// taps is the kernel's size KH·KW.
func (g convGeom) taps() int { return g.kh * g.kw }

// source returns the source grid's height and width.
func (g convGeom) source() (int, int) {
	if g.transposed {
		return g.ih, g.iw
	}
	return g.oh, g.ow
}

// pointwise reports a 1×1 conv with stride 1 and no padding: its column
// matrix is the input itself.
func (g convGeom) pointwise() bool {
	return !g.transposed && g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0
}

// rowShift reports a conv with vertical stride 1 that is not a plain GEMM:
// forwardRows runs it.
func (g convGeom) rowShift() bool {
	return !g.transposed && g.sh == 1 && !g.pointwise()
}

// depthwise reports a conv with one input channel per group.
func (g convGeom) depthwise() bool { return !g.transposed && g.cig == 1 && g.gr > 1 }

// tapRange returns the source positions [lo, hi) of [0, n) whose target
// i·s − p + off lies in [0, tn); hi ≤ lo when there is none.
func tapRange(n, s, p, off, tn int) (lo, hi int) {
	if a := p - off; a > 0 {
		lo = (a + s - 1) / s
	}
	b := tn - 1 + p - off
	if b < 0 {
		return lo, lo
	}
	return lo, min(n, b/s+1)
}

// runConv executes a conv or conv_transpose step.
func (e *Executor) runConv(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	nd := k.Instrs[0].Node
	g := convGeomOf(nd)
	if len(k.Ins) != 2 || !plan.WindowOperandOf(k.Ins[0].Layout) || !plan.WindowOperandOf(k.Ins[1].Layout) {
		return fmt.Errorf("cpu: %s: operands must be packed arrays", k.Name)
	}
	dt := k.Out.DType
	x := asBuf(mem[k.Ins[0].Buf.ID].(*memory).b, dt)
	w := asBuf(mem[k.Ins[1].Buf.ID].(*memory).b, dt)
	out := asBuf(mem[k.Out.ID].(*memory).b, dt)
	xOff, wOff := k.Ins[0].Layout.Offset, k.Ins[1].Layout.Offset
	if k.Out.Numel() == 0 {
		return nil
	}
	if g.cig == 0 { // no input channels: every sum is empty
		clear(mem[k.Out.ID].(*memory).b) // +0 is all zero bits in every float dtype
		return nil
	}
	if xOff+ir.Numel(nd.Args[0].Shape) > k.Ins[0].Buf.Numel() || wOff+ir.Numel(nd.Args[1].Shape) > k.Ins[1].Buf.Numel() {
		return fmt.Errorf("cpu: %s: operands read past their buffers", k.Name)
	}
	if dt == dtype.F64 {
		j := &convJob[float64]{e: e, k: k, g: g, x: x, xOff: xOff, out: out, outT: out.f64, w: w.f64[wOff:]}
		return j.run(ctx)
	}
	j := &convJob[float32]{e: e, k: k, g: g, x: x, xOff: xOff, out: out}
	if dt == dtype.F32 {
		j.outT, j.w = out.f32, w.f32[wOff:]
	} else {
		j.wHalf, j.wOff = w, wOff
	}
	return j.run(ctx)
}

// convJob is one run of a convolution step in compute type T (float32 for
// f32, f16 and bf16; float64 for f64).
type convJob[T float32 | float64] struct {
	e    *Executor
	k    *plan.Kernel
	g    convGeom
	x    buf // the input, any float dtype, at element offset xOff
	xOff int
	out  buf
	// outT is the output as T when it is stored as T (f32, f64); nil for
	// f16 and bf16, whose results go through float32 scratch.
	outT []T
	// w is the weights as T: in place for f32 and f64, widened into
	// scratch from wHalf (at wOff) for f16 and bf16.
	w     []T
	wHalf buf
	wOff  int
	// g512 runs the float32 GEMMs that fit it (sgemm.go); nil for the
	// host BLAS.
	g512 *gemm512
}

// convPlan is a step's tiling: nb images of tile source pixels at a time
// (nb > 1 only with whole images), cc output channels per col2im pass, and
// the scratch layout.
type convPlan struct {
	nb, tile, cc int
	bytes        int  // scratch bytes
	rows         bool // forwardRows, in bands of tile output rows
	gm, gk       int  // the largest GEMM M and K for the own kernel; 0 for the host BLAS
}

// native reports whether results are stored as T (no float32 staging).
func (j *convJob[T]) native() bool { return j.outT != nil }

func (j *convJob[T]) run(ctx context.Context) error {
	g := j.g
	if g.depthwise() {
		return j.depthwise(ctx)
	}
	pl, err := j.plan()
	if err != nil {
		return err
	}
	var sc carver
	if pl.bytes > 0 {
		ar, err := j.e.take(pl.bytes)
		if err != nil {
			return fmt.Errorf("cpu: %s: scratch: %w", j.k.Name, err)
		}
		defer j.e.give(ar)
		sc.b = ar.b[:pl.bytes]
		j.e.poisonBytes(sc.b)
	}
	if j.w == nil {
		j.w = carve[T](&sc, ir.Numel(j.k.Instrs[0].Node.Args[1].Shape))
		fill(tileOf(j.w), j.wHalf, j.wOff, 1, 0, len(j.w))
	}
	if pl.gm > 0 {
		n := gemm512Floats(pl.gm, pl.gk, j.e.workers)
		j.g512 = newGemm512(carve[float32](&sc, n), pl.gm, pl.gk, j.e.workers)
	}
	switch {
	case g.transposed:
		return j.transposed(ctx, pl, &sc)
	case pl.rows:
		return j.forwardRows(ctx, pl, &sc)
	}
	return j.forward(ctx, pl, &sc)
}

// plan picks the path and its tiling: whole images, as many as fit
// convTileTarget, else bands of output rows (forwardRows) or tiles of
// pixels (im2col, col2im); smaller when the memory limit leaves less room.
func (j *convJob[T]) plan() (convPlan, error) {
	g := j.g
	var z T
	esz := int(unsafe.Sizeof(z))
	sh, sw := g.source()
	P := sh * sw
	pl := convPlan{cc: g.cog}
	fixed := 0
	if !j.native() {
		fixed += align(ir.Numel(j.k.Instrs[0].Node.Args[1].Shape) * 4) // widened weights
	}
	var perPixel int // bytes per source pixel of one image
	switch {
	case g.transposed:
		perPixel = g.cog * g.taps() * esz // col
		if !j.native() {
			perPixel += g.cig * 4 // widened input
			// The float32 accumulator of cc output planes: a fraction of the
			// scratch at most, in channel chunks when the planes are large.
			planeBytes := g.oh * g.ow * 4
			pl.cc = max(1, min(g.cog, convScratchMax/4/max(planeBytes, 1)))
			fixed += align(pl.cc * planeBytes)
			perPixel = pl.cc*g.taps()*esz + g.cig*4
		}
	case g.pointwise() && j.native():
		perPixel = 0 // the input is the column matrix
	default:
		perPixel = g.cig * g.taps() * esz // col
		if !j.native() {
			perPixel += g.cog * 4 // the GEMM's float32 output
		}
	}
	room := min(int64(convScratchMax), j.e.scratchRoom(j.k))
	// ownBytes is the scratch of the own GEMM kernel for calls up to m × k,
	// or 0 where the host BLAS runs them: for f64, without AVX-512, and
	// when its packed weights would take more than a quarter of the room.
	ownBytes := func(m, k int) int {
		if _, f32 := any(z).(float32); !f32 || !hasGemm512 || !convOwnGemm {
			return 0
		}
		if b := align(gemm512Floats(m, k, j.e.workers) * 4); int64(b) <= room/4 {
			return b
		}
		return 0
	}
	// own adds the kernel's scratch for m × k to fixed and records it.
	own := func(m, k int) {
		if b := ownBytes(m, k); b > 0 {
			fixed += b
			pl.gm, pl.gk = m, k
		}
	}
	switch {
	case g.transposed:
		own(pl.cc*g.taps(), g.cig)
	case !(g.rowShift() && convRows):
		own(g.cog, g.cig*g.taps())
	}
	if g.rowShift() && convRows {
		// Bands of output rows: whole images when one fits (several per
		// GEMM call when they fit), else the most rows that fit; else
		// im2col tiles, which can be as small as a pixel.
		rowsOwn := ownBytes(g.cog, g.cig*g.kw)
		rowsFixed := fixed + rowsOwn + align(g.cout*g.cig*g.taps()*esz) + convSlack
		perRow := g.cin * g.kw * g.ow * esz // one padded row of every copy
		if !j.native() {
			perRow += g.cout * g.ow * 4 // the float32 output rows
		}
		halo := (g.kh - 1) * g.dh * g.cin * g.kw * g.ow * esz // rows below the band
		perImage := g.oh*perRow + halo
		// The target, but at least one row where the room allows.
		budget := min(int(room)-rowsFixed, max(convTileTarget, perRow+halo))
		switch {
		case budget >= perImage:
			pl.rows, pl.tile, pl.nb = true, g.oh, min(g.n, budget/perImage)
		case budget >= perRow+halo:
			pl.rows, pl.tile, pl.nb = true, (budget-halo)/perRow, 1
		}
		if pl.rows {
			if rowsOwn > 0 {
				pl.gm, pl.gk = g.cog, g.cig*g.kw
			}
			pl.bytes = rowsFixed + pl.nb*(pl.tile*perRow+halo)
			return pl, nil
		}
		own(g.cog, g.cig*g.taps()) // im2col tiles after all
	}
	if perPixel == 0 {
		pl.nb, pl.tile = g.n, P
		if int64(fixed) > room {
			return pl, j.noRoom(fixed, room)
		}
		pl.bytes = fixed
		return pl, nil
	}
	least := fixed + perPixel + convSlack // one pixel, and alignment
	if int64(least) > room {
		return pl, j.noRoom(least, room)
	}
	budget := min(int(room)-fixed-convSlack, max(convTileTarget, perPixel))
	pixels := max(1, budget/perPixel)
	if pixels >= P {
		pl.tile, pl.nb = P, min(g.n, pixels/P)
		if g.transposed && !j.native() {
			pl.nb = 1 // one accumulator
		}
	} else {
		pl.tile, pl.nb = pixels, 1
	}
	pl.bytes = fixed + perPixel*pl.tile*pl.nb + convSlack
	return pl, nil
}

func (j *convJob[T]) noRoom(need int, room int64) error {
	return fmt.Errorf("cpu: %s: needs %d bytes of scratch at the least, %d available (memory limit: %s or SetMemLimit)", j.k.Name, need, room, MemLimitEnv)
}

// forward runs conv: per batch of images, group and pixel tile, im2col
// then one GEMM.
func (j *convJob[T]) forward(ctx context.Context, pl convPlan, sc *carver) error {
	g := j.g
	P := g.oh * g.ow
	K := g.cig * g.taps()
	direct := g.pointwise() && j.native()
	var col, cs []T
	if !direct {
		col = carve[T](sc, pl.nb*K*pl.tile)
	}
	if !j.native() {
		cs = carve[T](sc, pl.nb*g.cog*pl.tile)
	}
	for n0 := 0; n0 < g.n; n0 += pl.nb {
		nb := min(pl.nb, g.n-n0)
		for gi := range g.gr {
			for p0 := 0; p0 < P; p0 += pl.tile {
				if err := ctx.Err(); err != nil {
					return err
				}
				t := min(pl.tile, P-p0)
				c := blas.Call{M: g.cog, N: t, K: K, LDA: K, Batch: nb, Alpha: 1}
				var b []T
				if direct {
					b = j.xT()[j.xOff+(n0*g.cin+gi*g.cig)*P+p0:]
					c.LDB, c.StrideB = P, g.cin*P
				} else {
					b = col[:nb*K*t]
					c.LDB, c.StrideB = t, K*t
					j.im2col(b, n0, nb, gi, p0, t)
				}
				var cc []T
				if j.native() {
					cc = j.outT[(n0*g.cout+gi*g.cog)*P+p0:]
					c.LDC, c.StrideC = P, g.cout*P
				} else {
					cc = cs[:nb*g.cog*t]
					c.LDC, c.StrideC = t, g.cog*t
				}
				if err := j.gemm(c, j.w[gi*g.cog*K:], b, cc); err != nil {
					return err
				}
				if !j.native() {
					j.parallel(nb*g.cog, t, func(r int) {
						bi, co := r/g.cog, r%g.cog
						store(j.out, ((n0+bi)*g.cout+gi*g.cog+co)*P+p0, tileOf(cc[r*t:(r+1)*t]))
					})
				}
			}
		}
	}
	return nil
}

// forwardRows runs a conv with vertical stride 1 without a column matrix.
// For a band of output rows [oy0, oy1) it writes, per input channel ci and
// kernel column kx, the rows xr[ci][kx][y][ox] = x[ci][oy0 + y − ph][ox·sw
// + kx·dw − pw] (0 in the padding) for y over the band and the (KH − 1)·dh
// rows below it. Output pixel (oy, ox)'s tap (ky, kx) is then
// xr[ci][kx][oy − oy0 + ky·dh][ox]: for one ky, over the band's pixels, a
// matrix [Cin/G·KW, band·OW] with the copy's plane as its leading
// dimension, shifted by ky·dh rows. So the band's output is Σ_ky w_ky
// [Cout/G, Cin/G·KW] · xr shifted by ky, one GEMM per ky (beta = 1 after
// the first) writing the output rows in place.
func (j *convJob[T]) forwardRows(ctx context.Context, pl convPlan, sc *carver) error {
	g := j.g
	P, KW := g.oh*g.ow, g.cig*g.kw
	halo := (g.kh - 1) * g.dh
	wt := carve[T](sc, g.kh*g.cout*KW)
	// wt[ky][co][ci·KW + kx] = w[co][ci][ky][kx].
	j.parallel(g.cout, g.cig*g.taps(), func(co int) {
		for ci := range g.cig {
			for tap := range g.taps() {
				ky, kx := tap/g.kw, tap%g.kw
				wt[(ky*g.cout+co)*KW+ci*g.kw+kx] = j.w[(co*g.cig+ci)*g.taps()+tap]
			}
		}
	})
	xr := carve[T](sc, pl.nb*g.cin*g.kw*(pl.tile+halo)*g.ow)
	var cs []T
	if !j.native() {
		cs = carve[T](sc, pl.nb*g.cout*pl.tile*g.ow)
	}
	lo := make([]int, g.kw) // the output columns whose tap kx is inside the input
	hi := make([]int, g.kw)
	for kx := range g.kw {
		lo[kx], hi[kx] = tapRange(g.ow, g.sw, g.pw, kx*g.dw, g.iw)
	}
	for n0 := 0; n0 < g.n; n0 += pl.nb {
		nb := min(pl.nb, g.n-n0)
		for oy0 := 0; oy0 < g.oh; oy0 += pl.tile {
			if err := ctx.Err(); err != nil {
				return err
			}
			band := min(pl.tile, g.oh-oy0)
			rows := band + halo
			plane := rows * g.ow // one (ci, kx) copy
			j.parallel(nb*g.cin*g.kw, plane, func(r int) {
				kx, ci := r%g.kw, r/g.kw // ci counts over the batch's images
				dst := xr[r*plane : (r+1)*plane]
				src := j.xOff + (n0*g.cin+ci)*g.ih*g.iw
				a, b := lo[kx], hi[kx]
				for y := range rows {
					row := dst[y*g.ow : (y+1)*g.ow]
					iy := oy0 + y - g.ph
					if iy < 0 || iy >= g.ih || a >= b {
						clear(row)
						continue
					}
					clear(row[:a])
					clear(row[b:])
					j.read(row[a:b], src+iy*g.iw+a*g.sw-g.pw+kx*g.dw, g.sw)
				}
			})
			for gi := range g.gr {
				for ky := range g.kh {
					c := blas.Call{M: g.cog, N: band * g.ow, K: KW, LDA: KW, LDB: plane, StrideB: g.cin * g.kw * plane, Batch: nb, Alpha: 1}
					if ky > 0 {
						c.Beta = 1
					}
					var cc []T
					if j.native() {
						cc = j.outT[(n0*g.cout+gi*g.cog)*P+oy0*g.ow:]
						c.LDC, c.StrideC = P, g.cout*P
					} else {
						cc = cs[gi*g.cog*band*g.ow:]
						c.LDC, c.StrideC = band*g.ow, g.cout*band*g.ow
					}
					b := xr[gi*KW*plane+ky*g.dh*g.ow:]
					if err := j.gemm(c, wt[(ky*g.cout+gi*g.cog)*KW:], b, cc); err != nil {
						return err
					}
				}
			}
			if !j.native() {
				t := band * g.ow
				j.parallel(nb*g.cout, t, func(r int) {
					store(j.out, (n0*g.cout+r)*P+oy0*g.ow, tileOf(cs[r*t:(r+1)*t]))
				})
			}
		}
	}
	return nil
}

// im2col writes col [nb][K][t]: row (ci, ky, kx) of image n0+b holds, for
// output pixels p0 … p0+t−1 of group gi, the input element that tap reads
// (0 in the padding).
func (j *convJob[T]) im2col(col []T, n0, nb, gi, p0, t int) {
	g := j.g
	K := g.cig * g.taps()
	j.parallel(nb*K, t, func(r int) {
		bi, row := r/K, r%K
		ci, tap := row/g.taps(), row%g.taps()
		ky, kx := tap/g.kw, tap%g.kw
		plane := j.xOff + ((n0+bi)*g.cin+gi*g.cig+ci)*g.ih*g.iw
		dst := col[r*t : (r+1)*t]
		lo, hi := tapRange(g.ow, g.sw, g.pw, kx*g.dw, g.iw)
		for p := p0; p < p0+t; {
			oy, ox := p/g.ow, p%g.ow
			end := min(p0+t, p-ox+g.ow) // the end of this output row in the tile
			seg := dst[p-p0 : end-p0]
			iy := oy*g.sh - g.ph + ky*g.dh
			a, b := max(lo, ox), min(hi, ox+len(seg))
			if iy < 0 || iy >= g.ih || a >= b {
				clear(seg)
			} else {
				clear(seg[:a-ox])
				clear(seg[b-ox:])
				j.read(seg[a-ox:b-ox], plane+iy*g.iw+a*g.sw-g.pw+kx*g.dw, g.sw)
			}
			p = end
		}
	})
}

// transposed runs conv_transpose: per batch of images, group, channel
// chunk and input pixel tile, one GEMM then col2im into the output (or,
// for f16 and bf16, a float32 accumulator stored at the end).
func (j *convJob[T]) transposed(ctx context.Context, pl convPlan, sc *carver) error {
	g := j.g
	Pin, Pout := g.ih*g.iw, g.oh*g.ow
	mAll := g.cog * g.taps()
	var xs, acc []T
	col := carve[T](sc, pl.nb*pl.cc*g.taps()*pl.tile)
	if !j.native() {
		xs = carve[T](sc, g.cig*pl.tile)
		acc = carve[T](sc, pl.cc*Pout)
	} else {
		j.parallel(g.n*g.cout, Pout, func(r int) { clear(j.outT[r*Pout : (r+1)*Pout]) })
	}
	for n0 := 0; n0 < g.n; n0 += pl.nb {
		nb := min(pl.nb, g.n-n0)
		for gi := range g.gr {
			for c0 := 0; c0 < g.cog; c0 += pl.cc {
				cc := min(pl.cc, g.cog-c0)
				if !j.native() {
					clear(acc)
				}
				for p0 := 0; p0 < Pin; p0 += pl.tile {
					if err := ctx.Err(); err != nil {
						return err
					}
					t := min(pl.tile, Pin-p0)
					m := cc * g.taps()
					c := blas.Call{M: m, N: t, K: g.cig, TransA: true, LDA: mAll, LDC: t, StrideC: m * t, Batch: nb, Alpha: 1}
					var b []T
					if j.native() {
						b = j.xT()[j.xOff+(n0*g.cin+gi*g.cig)*Pin+p0:]
						c.LDB, c.StrideB = Pin, g.cin*Pin
					} else { // nb = 1
						b = xs[:g.cig*t]
						c.LDB = t
						j.parallel(g.cig, t, func(ci int) {
							j.read(b[ci*t:(ci+1)*t], j.xOff+(n0*g.cin+gi*g.cig+ci)*Pin+p0, 1)
						})
					}
					cols := col[:nb*m*t]
					if err := j.gemm(c, j.w[gi*g.cig*mAll+c0*g.taps():], b, cols); err != nil {
						return err
					}
					j.parallel(nb*cc, m*t/cc, func(r int) {
						bi, co := r/cc, r%cc
						var plane []T
						if j.native() {
							plane = j.outT[((n0+bi)*g.cout+gi*g.cog+c0+co)*Pout:][:Pout]
						} else {
							plane = acc[co*Pout : (co+1)*Pout]
						}
						for tap := range g.taps() {
							src := cols[(bi*m+co*g.taps()+tap)*t:][:t]
							j.col2im(plane, src, tap/g.kw, tap%g.kw, p0)
						}
					})
				}
				if !j.native() {
					j.parallel(cc, Pout, func(co int) {
						store(j.out, (n0*g.cout+gi*g.cog+c0+co)*Pout, tileOf(acc[co*Pout:(co+1)*Pout]))
					})
				}
			}
		}
	}
	return nil
}

// col2im adds src, tap (ky, kx)'s contributions of input pixels p0 … into
// the output plane.
func (j *convJob[T]) col2im(plane, src []T, ky, kx, p0 int) {
	g := j.g
	lo, hi := tapRange(g.iw, g.sw, g.pw, kx*g.dw, g.ow)
	for p := p0; p < p0+len(src); {
		iy, ix := p/g.iw, p%g.iw
		end := min(p0+len(src), p-ix+g.iw)
		oy := iy*g.sh - g.ph + ky*g.dh
		a, b := max(lo, ix), min(hi, ix+end-p)
		if oy >= 0 && oy < g.oh && a < b {
			s := src[p-p0+a-ix : p-p0+b-ix]
			d := plane[oy*g.ow+a*g.sw-g.pw+kx*g.dw:]
			if g.sw == 1 {
				d = d[:len(s)]
				for i, v := range s {
					d[i] += v
				}
			} else {
				for i, v := range s {
					d[i*g.sw] += v
				}
			}
		}
		p = end
	}
}

// depthwise runs a conv with one input channel per group directly: each
// output plane (n, co) is the sum over taps of the weight times the
// shifted input plane co / (Cout/G), accumulated row by row in T.
func (j *convJob[T]) depthwise(ctx context.Context) error {
	g := j.g
	workers := j.e.workers
	var sc carver
	nw := 0
	if !j.native() {
		nw = ir.Numel(j.k.Instrs[0].Node.Args[1].Shape)
		sc.add(nw * 4)
		for range workers {
			sc.add(g.ow * 4) // an output row
			sc.add(g.iw * 4) // a widened input row
		}
		room := min(int64(convScratchMax), j.e.scratchRoom(j.k))
		if int64(sc.off) > room {
			return j.noRoom(sc.off, room)
		}
		ar, err := j.e.take(sc.off)
		if err != nil {
			return fmt.Errorf("cpu: %s: scratch: %w", j.k.Name, err)
		}
		defer j.e.give(ar)
		sc.b, sc.off = ar.b[:sc.off], 0
		j.e.poisonBytes(sc.b)
		j.w = carve[T](&sc, nw)
		fill(tileOf(j.w), j.wHalf, j.wOff, 1, 0, nw)
	}
	rows := make([][]T, workers)
	xrows := make([][]T, workers)
	if !j.native() {
		for i := range workers {
			rows[i], xrows[i] = carve[T](&sc, g.ow), carve[T](&sc, g.iw)
		}
	}
	planes := g.n * g.cout
	Pin, Pout := g.ih*g.iw, g.oh*g.ow
	// Planes between context checks: about 4M multiply-adds, and at least
	// a few per worker.
	chunk := max(4*workers, (4<<20)/max(1, Pout*g.taps()))
	for p0 := 0; p0 < planes; p0 += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		p1 := min(planes, p0+chunk)
		j.parallelW(p1-p0, Pout*g.taps(), func(wk, r int) {
			pi := p0 + r
			n, co := pi/g.cout, pi%g.cout
			ci := co / g.cog // the group's one input channel
			plane := j.xOff + (n*g.cin+ci)*Pin
			wts := j.w[co*g.taps() : (co+1)*g.taps()]
			for oy := range g.oh {
				var acc []T
				if j.native() {
					acc = j.outT[pi*Pout+oy*g.ow:][:g.ow]
				} else {
					acc = rows[wk]
				}
				clear(acc)
				for ky := range g.kh {
					iy := oy*g.sh - g.ph + ky*g.dh
					if iy < 0 || iy >= g.ih {
						continue
					}
					var xr []T
					if j.native() {
						xr = j.xT()[plane+iy*g.iw:][:g.iw]
					} else {
						xr = xrows[wk]
						j.read(xr, plane+iy*g.iw, 1)
					}
					for kx := range g.kw {
						a, b := tapRange(g.ow, g.sw, g.pw, kx*g.dw, g.iw)
						if a >= b {
							continue
						}
						wv := wts[ky*g.kw+kx]
						s := xr[a*g.sw-g.pw+kx*g.dw:]
						d := acc[a:b]
						if g.sw == 1 {
							s = s[:len(d)]
							for i := range d {
								d[i] += wv * s[i]
							}
						} else {
							for i := range d {
								d[i] += wv * s[i*g.sw]
							}
						}
					}
				}
				if !j.native() {
					store(j.out, pi*Pout+oy*g.ow, tileOf(acc))
				}
			}
		})
	}
	return nil
}

// read copies n = len(dst) input elements x[pos + i·stride] into dst,
// widening f16 and bf16. The f32 and f64 loops are written out: im2col's
// runs are short (an output row), and a conversion called per element
// cost more than the copy.
func (j *convJob[T]) read(dst []T, pos, stride int) {
	switch d := any(dst).(type) {
	case []float32:
		switch j.x.dt {
		case dtype.F32:
			copyStrided(d, j.x.f32, pos, stride)
			return
		case dtype.BF16:
			src := j.x.b16[pos:]
			for i := range d {
				d[i] = math.Float32frombits(uint32(src[i*stride]) << 16)
			}
			return
		}
	case []float64:
		copyStrided(d, j.x.f64, pos, stride)
		return
	}
	fill(tileOf(dst), j.x, pos, stride, 0, len(dst))
}

// copyStrided sets dst[i] = src[pos + i·stride].
func copyStrided[T float32 | float64](dst, src []T, pos, stride int) {
	if stride == 1 {
		copy(dst, src[pos:pos+len(dst)])
		return
	}
	if len(dst) == 0 {
		return
	}
	src = src[pos : pos+(len(dst)-1)*stride+1]
	for i := range dst {
		dst[i] = src[i*stride]
	}
}

// xT is the input as T (f32 with float32, f64 with float64).
func (j *convJob[T]) xT() []T {
	var z T
	if _, ok := any(z).(float32); ok {
		return any(j.x.f32).([]T)
	}
	return any(j.x.f64).([]T)
}

// parallel runs body(r) for r in [0, n) on the executor's workers; work is
// each item's size in elements, so that small steps run on the calling
// goroutine.
func (j *convJob[T]) parallel(n, work int, body func(r int)) {
	j.parallelW(n, work, func(_, r int) { body(r) })
}

// parallelW is parallel passing each item's worker index (0 … workers−1)
// for per-worker scratch.
func (j *convJob[T]) parallelW(n, work int, body func(w, r int)) {
	workers := min(j.e.workers, n)
	if workers <= 1 || n*work < serialBelow {
		for r := range n {
			body(0, r)
		}
		return
	}
	var next atomic.Int64
	// Part w runs on one goroutine at a time: its scratch is its own.
	parallel(workers, func(w int) {
		for {
			r := int(next.Add(1) - 1)
			if r >= n {
				return
			}
			body(w, r)
		}
	})
}

// gemm runs c: on the own AVX-512 kernel when it fits, else on the host
// BLAS in T's precision.
func (j *convJob[T]) gemm(c blas.Call, a, b, cc []T) error {
	var err error
	name := "own avx-512 gemm"
	switch a := any(a).(type) {
	case []float32:
		if j.g512.fits(c) {
			err = j.g512.run(c, a, any(b).([]float32), any(cc).([]float32), j.e.workers)
			break
		}
		h, _ := j.e.gemmHost()
		name, err = h.Name(), h.Sgemm(c, a, any(b).([]float32), any(cc).([]float32))
	case []float64:
		h, _ := j.e.gemmHost()
		name, err = h.Name(), h.Dgemm(c, a, any(b).([]float64), any(cc).([]float64))
	}
	if err != nil {
		return fmt.Errorf("cpu: %s: %s: %w", j.k.Name, name, err)
	}
	return nil
}

// tileOf wraps a float32 or float64 slice as a tile.
func tileOf[T float32 | float64](s []T) tile {
	switch s := any(s).(type) {
	case []float32:
		return tile{f32: s}
	case []float64:
		return tile{f64: s}
	}
	return tile{}
}

// carver cuts cache-line aligned typed slices out of one block of
// scratch; with no block it only adds up the sizes (add).
type carver struct {
	b   []byte
	off int
}

func align(n int) int { return (n + slotAlign - 1) &^ (slotAlign - 1) }

// add reserves n bytes and returns their offset.
func (c *carver) add(n int) int {
	off := align(c.off)
	c.off = off + n
	return off
}

// carve returns the next n elements of T.
func carve[T any](c *carver, n int) []T {
	var z T
	off := c.add(n * int(unsafe.Sizeof(z)))
	if n == 0 {
		return []T{}
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&c.b[off])), n)
}

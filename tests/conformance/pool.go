package conformance

// Pools and upsampling: max_pool2d, avg_pool2d, upsample_nearest1d/2d and
// upsample_bilinear2d.
//
// The reference here (every package-level name starts with pl) is written
// from PyTorch's definitions as ir.PoolParams and ir.UpsampleParams state
// them — pooling_output_shape, windows clipped to the input, the divisor
// with and without the padding, nearest_idx, area_pixel_compute_source_index
// — in float64 (exact int64 for u8/u32). It never calls exec/cpu. Candle's
// own expected values (candle-core/tests/pool_tests.rs and
// bilinear_tests.rs at 2a13b0f3, transcribed as data) are checked too.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
)

// Pools runs the pools/upsampling group: every case compiled with fusion on
// and off, each run on two executors with poisoned memory, against the
// float64 reference; then the builder errors.
func Pools(t *testing.T, newExec func(poison byte) exec.Executor) {
	for _, o := range []struct {
		name string
		opts graph.Options
	}{{"fused", graph.Options{}}, {"unfused", graph.Options{NoFusion: true}}} {
		t.Run(o.name, func(t *testing.T) {
			s := newSuite(t, newExec, o.opts)
			t.Run("PoolParams", s.plPoolParams)
			t.Run("PoolDTypes", s.plPoolDTypes)
			t.Run("PoolSpecials", s.plPoolSpecials)
			t.Run("Views", s.plViews)
			t.Run("Degenerate", s.plDegenerate)
			t.Run("Nearest", s.plNearest)
			t.Run("Bilinear", s.plBilinear)
			t.Run("Chains", s.plChains)
			t.Run("Fused", s.plFused)
			t.Run("Large", s.plLarge)
			t.Run("Candle", s.plCandle)
		})
	}
	t.Run("Errors", plErrors)
}

// plDTypes are the dtypes of pools and nearest upsampling.
var plDTypes = []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16, dtype.U8, dtype.U32}

// plGen draws pool inputs: uniform floats in [−4, 4) with NaN, ±0 and ±Inf
// one time in twelve; integers over their whole range.
var plGen = gen{f: uniform(-4, 4), specials: infSpec}

// plPlain is plGen without specials (chains, large cases).
var plPlain = gen{f: uniform(-4, 4)}

// plPool is a pool's parameters, as the user gives them.
type plPool struct {
	kh, kw, sh, sw, ph, pw int
	ceil, exclude          bool // exclude: count_include_pad=False
}

func (q plPool) String() string {
	s := fmt.Sprintf("k%dx%d_s%dx%d_p%dx%d", q.kh, q.kw, q.sh, q.sw, q.ph, q.pw)
	if q.ceil {
		s += "_ceil"
	}
	if q.exclude {
		s += "_nopad"
	}
	return s
}

// opts is q as graph options.
func (q plPool) opts(avg bool) []graph.PoolOption {
	o := []graph.PoolOption{graph.PoolStride(q.sh, q.sw), graph.PoolPadding(q.ph, q.pw), graph.CeilMode(q.ceil)}
	if avg {
		o = append(o, graph.CountIncludePad(!q.exclude))
	}
	return o
}

// plOutSize is PyTorch's pooling_output_shape (dilation 1).
func plOutSize(in, k, s, p int, ceil bool) int {
	num := in + 2*p - k
	if !ceil {
		return num/s + 1
	}
	o := (num+s-1)/s + 1
	if (o-1)*s >= in+p {
		o--
	}
	return o
}

// plPoolRef pools x [N, C, H, W]: for floats the exact result (max: IEEE
// 754-2019 maximum, +0 above −0, NaN if the window has one; avg: the float64 sum
// over the window's input elements divided by the divisor) and the scale
// Σ|x|/divisor its rounding errors are relative to; for u8/u32 the exact
// maximum or the truncated mean.
func plPoolRef(x vals, q plPool, isMax bool) (vals, []float64) {
	n, c, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	oh, ow := plOutSize(h, q.kh, q.sh, q.ph, q.ceil), plOutSize(w, q.kw, q.sw, q.pw, q.ceil)
	out := newVals(x.dt, []int{n, c, oh, ow})
	scale := make([]float64, out.n())
	fl := x.dt.IsFloat()
	k := 0
	for p := range n * c {
		for i := range oh {
			for j := range ow {
				hs, ws := i*q.sh-q.ph, j*q.sw-q.pw
				// The divisor with padding: the window clipped to the
				// padded input; without: the input elements in it.
				padded := (min(hs+q.kh, h+q.ph) - hs) * (min(ws+q.kw, w+q.pw) - ws)
				count := 0
				var sum, abs, best float64
				var isum, ibest int64
				first, nan := true, false
				for r := max(hs, 0); r < min(hs+q.kh, h); r++ {
					for cc := max(ws, 0); cc < min(ws+q.kw, w); cc++ {
						e := (p*h+r)*w + cc
						count++
						if fl {
							v := x.f[e]
							nan = nan || math.IsNaN(v)
							if first {
								best = v
							}
							best = math.Max(best, v) // +0 > −0
							sum += v
							abs += math.Abs(v)
						} else {
							v := x.i[e]
							if first || v > ibest {
								ibest = v
							}
							isum += v
						}
						first = false
					}
				}
				div := padded
				if q.exclude {
					div = count
				}
				switch {
				case fl && isMax && nan:
					out.f[k] = math.NaN()
				case fl && isMax:
					out.f[k] = best
				case fl:
					out.f[k], scale[k] = sum/float64(div), abs/float64(div)
				case isMax:
					out.i[k] = ibest
				default:
					out.i[k] = isum / int64(div)
				}
				k++
			}
		}
	}
	return out, scale
}

// plAvgTol is the tolerance of a mean of k terms against the scale
// Σ|x|/divisor: a float32 sum of k terms errs by at most about k·2^−24 of
// Σ|x| (f16/bf16 sum in float32 and round once: 1 ulp plus that), float64
// by k·2^−53.
func plAvgTol(k int) tolerance {
	kf := float64(k + 1)
	return tolerance{name: fmt.Sprintf("avg of %d", k), ulps: 1, rel16: kf * 0x1p-24, rel32: kf * 0x1p-24, rel64: kf * 0x1p-52}
}

// plPoolCase runs one pool of x (logical value xv, a graph tensor of the
// case) and declares its expected output.
func (c *tcase) plPoolExpect(name string, x *graph.Tensor, xv vals, q plPool, isMax bool) {
	c.t.Helper()
	ref, scale := plPoolRef(xv, q, isMax)
	if isMax {
		c.expect(name, x.MaxPool2d(q.kh, q.kw, q.opts(false)...), want{v: ref, tol: exact})
		return
	}
	c.expect(name, x.AvgPool2d(q.kh, q.kw, q.opts(true)...), want{v: ref, tol: plAvgTol(q.kh * q.kw), scale: scale})
}

// plParamSweep is every stride 1–3 × padding 0–2 × ceil mode ×
// count_include_pad, with kernels that allow the padding (2·pad ≤ k), both
// square and not, on input sizes that make the last window partial (odd
// and even sizes, and sizes where ceil mode adds a window and where it
// would start in the padding).
func plParamSweep() []plPool {
	var qs []plPool
	for s := 1; s <= 3; s++ {
		for p := 0; p <= 2; p++ {
			for _, ceil := range []bool{false, true} {
				for _, exclude := range []bool{false, true} {
					kh := max(2*p, 1) + (s+p)%2
					kw := max(2*p, 1) + (s+1)%3
					qs = append(qs, plPool{kh: kh, kw: kw, sh: s, sw: 4 - s, ph: p, pw: min(p, kw/2), ceil: ceil, exclude: exclude})
				}
			}
		}
	}
	return qs
}

// plInputHW draws input sizes for q: between the padded kernel and a few
// windows more, odd or even.
func plInputHW(r *rand.Rand, q plPool) (int, int) {
	h := max(q.kh-2*q.ph, 1) + r.IntN(7)
	w := max(q.kw-2*q.pw, 1) + r.IntN(8)
	return h, w
}

// plPoolParams: the parameter sweep on f32 (float path) and u8 (integer
// path), max and avg (count_include_pad matters to avg only).
func (s *suite) plPoolParams(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.U8} {
		for _, q := range plParamSweep() {
			for _, isMax := range []bool{true, false} {
				if isMax && q.exclude {
					continue
				}
				t.Run(fmt.Sprintf("%s/%v/%v", plPoolName(isMax), dt, q), func(t *testing.T) {
					c := s.newCase(t)
					h, w := plInputHW(c.r, q)
					x, xv := c.input("x", dt, []int{2, 3, h, w}, plGen)
					c.plPoolExpect("y", x, xv, q, isMax)
					c.run()
				})
			}
		}
	}
}

func plPoolName(isMax bool) string {
	if isMax {
		return "max_pool2d"
	}
	return "avg_pool2d"
}

// plPoolDTypes: every pool dtype through a few parameter sets (the
// common 2×2/2, 3×3/2 pad 1, a ceil-mode window that hangs over the edge,
// count_include_pad off).
func (s *suite) plPoolDTypes(t *testing.T) {
	qs := []plPool{
		{kh: 2, kw: 2, sh: 2, sw: 2},
		{kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1},
		{kh: 3, kw: 2, sh: 2, sw: 3, ph: 1, pw: 1, ceil: true},
		{kh: 4, kw: 3, sh: 1, sw: 2, ph: 2, pw: 1, ceil: true, exclude: true},
	}
	for _, dt := range plDTypes {
		for _, q := range qs {
			for _, isMax := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%v/%v", plPoolName(isMax), dt, q), func(t *testing.T) {
					c := s.newCase(t)
					x, xv := c.input("x", dt, []int{2, 3, 7, 10}, plGen)
					c.plPoolExpect("y", x, xv, q, isMax)
					c.run()
				})
			}
		}
	}
}

// plPoolSpecials: windows of NaN, ±Inf, −∞ only, ±0, the float extremes
// (sums that overflow f16's range stay finite in the float32 accumulator).
func (s *suite) plPoolSpecials(t *testing.T) {
	rows := [][]float64{
		{nan, 1, 2, 3, -1, nan, negZero, 0},
		{inf, -inf, 1, 2, -inf, -inf, 0, negZero},
		{-inf, -inf, 5, nan, 60000, 60000, -60000, 1},
		{negZero, negZero, 0, 0, 3, inf, 2, 2},
	}
	for _, dt := range wideFloats {
		for _, q := range []plPool{{kh: 2, kw: 2, sh: 2, sw: 2}, {kh: 3, kw: 3, sh: 1, sw: 2, ph: 1, pw: 1, ceil: true}} {
			for _, isMax := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%v/%v", plPoolName(isMax), dt, q), func(t *testing.T) {
					c := s.newCase(t)
					xv := newVals(dt, []int{1, 1, 4, 8})
					for i, row := range rows {
						for j, v := range row {
							xv.f[i*8+j] = roundFloat(dt, v)
						}
					}
					c.plPoolExpect("y", c.inputVals("x", xv), xv, q, isMax)
					c.run()
				})
			}
		}
	}
}

// plViews: inputs read through views — a transposed one, a permuted one,
// narrowed spatially and along channels, a broadcast (all copied first)
// and a batch slice (a packed array at an offset, read in place).
func (s *suite) plViews(t *testing.T) {
	q := plPool{kh: 3, kw: 2, sh: 2, sw: 1, ph: 1, pw: 1}
	views := []struct {
		name  string
		shape []int
		view  func(x *graph.Tensor) *graph.Tensor
		ref   func(v vals) vals
	}{
		{"transposed", []int{2, 3, 9, 7}, func(x *graph.Tensor) *graph.Tensor { return x.T() }, func(v vals) vals { return v.transpose(2, 3) }},
		{"permuted", []int{3, 2, 7, 9}, func(x *graph.Tensor) *graph.Tensor { return x.Permute(1, 0, 2, 3) }, func(v vals) vals { return v.permute([]int{1, 0, 2, 3}) }},
		{"narrow_h", []int{2, 3, 12, 9}, func(x *graph.Tensor) *graph.Tensor { return x.Narrow(2, 3, 7) }, func(v vals) vals { return v.narrow(2, 3, 7) }},
		{"narrow_c", []int{2, 5, 7, 9}, func(x *graph.Tensor) *graph.Tensor { return x.Narrow(1, 1, 3) }, func(v vals) vals { return v.narrow(1, 1, 3) }},
		{"offset_batch", []int{4, 3, 7, 9}, func(x *graph.Tensor) *graph.Tensor { return x.Narrow(0, 1, 2) }, func(v vals) vals { return v.narrow(0, 1, 2) }},
		{"broadcast", []int{1, 3, 7, 9}, func(x *graph.Tensor) *graph.Tensor { return x.BroadcastTo(2, 3, 7, 9) }, func(v vals) vals { return v.broadcast([]int{2, 3, 7, 9}) }},
	}
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16, dtype.U32} {
		for _, v := range views {
			t.Run(fmt.Sprintf("%s/%v", v.name, dt), func(t *testing.T) {
				c := s.newCase(t)
				x, xv := c.input("x", dt, v.shape, plGen)
				in, iv := v.view(x), v.ref(xv)
				c.plPoolExpect("max", in, iv, q, true)
				c.plPoolExpect("avg", in, iv, q, false)
				c.plNearestExpect("nearest", in, iv, [2]int{11, 5}, [2]float64{})
				if dt.IsFloat() {
					c.plBilinearExpect("bilinear", in, iv, [2]int{4, 13}, [2]float64{}, false)
				}
				c.run()
			})
		}
	}
}

// plDegenerate: an empty batch, no channels, one element, a kernel the
// size of the input (global pooling), 1×1 upsampling targets.
func (s *suite) plDegenerate(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.U8} {
		for _, shape := range [][]int{{0, 3, 5, 5}, {2, 0, 5, 5}, {1, 1, 1, 1}, {3, 2, 5, 6}} {
			t.Run(fmt.Sprintf("%v%v", dt, shape), func(t *testing.T) {
				c := s.newCase(t)
				x, xv := c.input("x", dt, shape, plGen)
				h, w := shape[2], shape[3]
				c.plPoolExpect("max_global", x, xv, plPool{kh: h, kw: w, sh: 1, sw: 1}, true)
				c.plPoolExpect("avg_global", x, xv, plPool{kh: h, kw: w, sh: 2, sw: 3, ceil: true}, false)
				c.plPoolExpect("max_1", x, xv, plPool{kh: 1, kw: 1, sh: 1, sw: 1}, true)
				c.plPoolExpect("avg_1", x, xv, plPool{kh: 1, kw: 1, sh: 2, sw: 1}, false)
				c.plNearestExpect("nearest_1x1", x, xv, [2]int{1, 1}, [2]float64{})
				c.plNearestExpect("nearest_up", x, xv, [2]int{3, 2}, [2]float64{})
				if dt.IsFloat() {
					c.plBilinearExpect("bilinear_1x1", x, xv, [2]int{1, 1}, [2]float64{}, false)
					c.plBilinearExpect("bilinear_1x1_ac", x, xv, [2]int{1, 1}, [2]float64{}, true)
					c.plBilinearExpect("bilinear_3x3", x, xv, [2]int{3, 3}, [2]float64{}, true)
				}
				c.run()
			})
		}
	}
}

// plNearestIdx is PyTorch's nearest source index: ⌊d·in/out⌋ (exact) or,
// with a scale factor, ⌊d/scale⌋ in float64, clamped to in − 1.
func plNearestIdx(in, out int, scale float64) []int {
	idx := make([]int, out)
	for d := range idx {
		if scale > 0 {
			idx[d] = min(int(math.Floor(float64(d)/scale)), in-1)
		} else {
			idx[d] = d * in / out
		}
	}
	return idx
}

// plNearestRef upsamples x [N, C, (H,) W] to size (scale > 0: from the
// scale factors) by nearest neighbour.
func plNearestRef(x vals, size [2]int, scale [2]float64) vals {
	r := len(x.shape) - 2
	in := x.shape[2:]
	out := make([]int, r)
	idx := make([][]int, r)
	for a := range r {
		out[a] = size[a]
		if scale[a] > 0 {
			out[a] = int(math.Floor(float64(in[a]) * scale[a]))
		}
		idx[a] = plNearestIdx(in[a], out[a], scale[a])
	}
	shape := append(slices.Clone(x.shape[:2]), out...)
	sc := make([]int, len(shape))
	return x.gather(shape, func(c []int) int {
		copy(sc, c)
		for a := range r {
			sc[2+a] = idx[a][c[2+a]]
		}
		return flat(x.shape, sc)
	})
}

// plNearestExpect declares name = nearest upsampling of x (rank from x).
func (c *tcase) plNearestExpect(name string, x *graph.Tensor, xv vals, size [2]int, scale [2]float64) {
	var y *graph.Tensor
	switch {
	case len(xv.shape) == 3 && scale[0] > 0:
		y = x.UpsampleNearest1dScale(scale[0])
	case len(xv.shape) == 3:
		y = x.UpsampleNearest1d(size[0])
	case scale[0] > 0:
		y = x.UpsampleNearest2dScale(scale[0], scale[1])
	default:
		y = x.UpsampleNearest2d(size[0], size[1])
	}
	c.expect(name, y, want{v: plNearestRef(xv, size, scale), tol: exact})
}

// plNearest: 1-D and 2-D, up and down, by sizes and by scale factors
// (integer, fractional, below 1), every dtype.
func (s *suite) plNearest(t *testing.T) {
	for _, dt := range plDTypes {
		t.Run(fmt.Sprintf("1d/%v", dt), func(t *testing.T) {
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{2, 3, 7}, plGen)
			for i, size := range []int{7, 14, 20, 3, 1} {
				c.plNearestExpect(fmt.Sprintf("size%d_%d", i, size), x, xv, [2]int{size}, [2]float64{})
			}
			for i, sc := range []float64{2, 1.5, 0.5, 3, 1.1, 2.7} {
				c.plNearestExpect(fmt.Sprintf("scale%d", i), x, xv, [2]int{}, [2]float64{sc})
			}
			c.run()
		})
		t.Run(fmt.Sprintf("2d/%v", dt), func(t *testing.T) {
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{2, 3, 5, 6}, plGen)
			for i, size := range [][2]int{{10, 12}, {5, 6}, {7, 17}, {2, 3}, {13, 1}} {
				c.plNearestExpect(fmt.Sprintf("size%d", i), x, xv, size, [2]float64{})
			}
			for i, sc := range [][2]float64{{2, 2}, {1.5, 3}, {0.5, 1.3}, {2.2, 0.7}} {
				c.plNearestExpect(fmt.Sprintf("scale%d", i), x, xv, [2]int{}, sc)
			}
			c.run()
		})
	}
}

// plLerp is one output index's source indices and weights along an axis.
type plLerp struct {
	i0, i1 int
	l      float64
}

// plLerpAxis is PyTorch's area_pixel_compute_source_index for linear
// interpolation, in float64.
func plLerpAxis(in, out int, align bool, scale float64) []plLerp {
	var r float64
	switch {
	case align:
		if out > 1 {
			r = float64(in-1) / float64(out-1)
		}
	case scale > 0:
		r = 1 / scale
	default:
		r = float64(in) / float64(out)
	}
	ls := make([]plLerp, out)
	for d := range ls {
		src := r * float64(d)
		if !align {
			src = math.Max(r*(float64(d)+0.5)-0.5, 0)
		}
		i0 := int(math.Floor(src))
		ls[d] = plLerp{i0: i0, i1: min(i0+1, in-1), l: src - float64(i0)}
	}
	return ls
}

// plBilinearRef interpolates x [N, C, H, W] bilinearly: the float64 value
// and the scale Σ|weight·v| of its terms. An output of the input's size is
// the input itself.
func plBilinearRef(x vals, size [2]int, scale [2]float64, align bool) (vals, []float64) {
	n, c, h, w := x.shape[0], x.shape[1], x.shape[2], x.shape[3]
	oh, ow := size[0], size[1]
	if scale[0] > 0 {
		oh, ow = int(math.Floor(float64(h)*scale[0])), int(math.Floor(float64(w)*scale[1]))
	}
	out := newVals(x.dt, []int{n, c, oh, ow})
	sc := make([]float64, out.n())
	if oh == h && ow == w {
		copy(out.f, x.f)
		return out, nil
	}
	hs, ws := plLerpAxis(h, oh, align, scale[0]), plLerpAxis(w, ow, align, scale[1])
	k := 0
	for p := range n * c {
		at := func(i, j int) float64 { return x.f[(p*h+i)*w+j] }
		for _, a := range hs {
			for _, b := range ws {
				terms := []float64{
					(1 - a.l) * (1 - b.l) * at(a.i0, b.i0), (1 - a.l) * b.l * at(a.i0, b.i1),
					a.l * (1 - b.l) * at(a.i1, b.i0), a.l * b.l * at(a.i1, b.i1),
				}
				// The spec's association: (v00·(1−λw) + v01·λw)·(1−λh) + …,
				// which decides NaN from 0·∞ (a zero weight on an infinite
				// neighbour).
				top := at(a.i0, b.i0)*(1-b.l) + at(a.i0, b.i1)*b.l
				bot := at(a.i1, b.i0)*(1-b.l) + at(a.i1, b.i1)*b.l
				out.f[k] = top*(1-a.l) + bot*a.l
				for _, tm := range terms {
					sc[k] += math.Abs(tm)
				}
				k++
			}
		}
	}
	return out, sc
}

// plBilinearTol: a few float64 roundings of terms bounded by the scale;
// the f32/f16/bf16 results are that value rounded once (1 ulp with the
// double rounding).
var plBilinearTol = tolerance{name: "bilinear", ulps: 1, rel16: 1e-15, rel32: 0x1p-24 + 1e-15, rel64: 1e-15}

// plBilinearExpect declares name = bilinear upsampling of x.
func (c *tcase) plBilinearExpect(name string, x *graph.Tensor, xv vals, size [2]int, scale [2]float64, align bool) {
	var y *graph.Tensor
	if scale[0] > 0 {
		y = x.UpsampleBilinear2dScale(scale[0], scale[1], align)
	} else {
		y = x.UpsampleBilinear2d(size[0], size[1], align)
	}
	ref, sc := plBilinearRef(xv, size, scale, align)
	tol := plBilinearTol
	if sc == nil {
		tol = exact // a copy
	}
	c.expect(name, y, want{v: ref, tol: tol, scale: sc})
}

// plBilinear: align_corners on and off, up and down, non-square, by sizes
// and scale factors, the identity (a copy), inputs with NaN and ±Inf.
func (s *suite) plBilinear(t *testing.T) {
	for _, dt := range wideFloats {
		for _, align := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/align=%v", dt, align), func(t *testing.T) {
				c := s.newCase(t)
				x, xv := c.input("x", dt, []int{2, 3, 5, 7}, plPlain)
				for i, size := range [][2]int{{10, 14}, {5, 7}, {3, 4}, {9, 2}, {1, 8}, {17, 23}} {
					c.plBilinearExpect(fmt.Sprintf("size%d", i), x, xv, size, [2]float64{}, align)
				}
				for i, sc := range [][2]float64{{2, 2}, {1.5, 0.5}, {3, 1.3}, {0.7, 2.5}} {
					c.plBilinearExpect(fmt.Sprintf("scale%d", i), x, xv, [2]int{}, sc, align)
				}
				c.run()
			})
		}
		t.Run(fmt.Sprintf("%v/specials", dt), func(t *testing.T) {
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{1, 2, 4, 5}, plGen)
			c.plBilinearExpect("up", x, xv, [2]int{8, 10}, [2]float64{}, false)
			c.plBilinearExpect("up_ac", x, xv, [2]int{7, 9}, [2]float64{}, true)
			c.plBilinearExpect("same", x, xv, [2]int{4, 5}, [2]float64{}, false)
			c.plBilinearExpect("same_scale", x, xv, [2]int{}, [2]float64{1.1, 1.05}, false)
			c.run()
		})
	}
}

// plChains: pools and upsampling between elementwise chains, which fuse
// into kernels before and after the window step (the window step itself
// reads a buffer): relu → max pool → + bias → avg pool → cast, and
// x·2 → nearest → + x's upsampling.
func (s *suite) plChains(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16} {
		t.Run(dt.String(), func(t *testing.T) {
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{2, 3, 9, 8}, plPlain)
			b, bv := c.input("b", dt, []int{3, 1, 1}, plPlain)
			q1 := plPool{kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1}
			q2 := plPool{kh: 2, kw: 2, sh: 1, sw: 1, ceil: true}
			y := x.Relu().MaxPool2d(3, 3, q1.opts(false)...).Add(b).AvgPool2d(2, 2, q2.opts(true)...).Cast(dtype.F32)
			// Reference: each op rounds to dt (relu and max are exact).
			rv := xv
			rv.f = slices.Clone(xv.f)
			for i, v := range rv.f {
				rv.f[i] = math.Max(v, 0)
			}
			mv, _ := plPoolRef(rv, q1, true)
			bb := bv.broadcast(mv.shape)
			for i := range mv.f {
				mv.f[i] = roundFloat(dt, mv.f[i]+bb.f[i])
			}
			av, sc := plPoolRef(mv, q2, false)
			av.dt = dtype.F32
			tol := plAvgTol(4)
			if dt == dtype.F16 {
				// The mean is rounded to f16 (half an ulp, 2^−11 of its
				// magnitude) before the exact cast to f32.
				tol = tolerance{name: "avg of 4 rounded to f16", rel32: 0x1p-10}
			}
			c.expect("y", y, want{v: av, tol: tol, scale: sc})
			// Upsampling between elementwise ops: nearest(x·2) + nearest(x),
			// exact (a doubling and a sum of two values, one rounding).
			z := x.Affine(2, 0).UpsampleNearest2d(18, 12).Add(x.UpsampleNearest2d(18, 12))
			zv := plNearestRef(xv, [2]int{18, 12}, [2]float64{})
			for i := range zv.f {
				zv.f[i] *= 3
			}
			c.expect("z", z, want{v: zv, tol: exact})
			c.run()
		})
	}
}

// plFused: pools and upsamplings with elementwise chains before and after
// them, which fusion computes in the window's own kernel (fuse's
// core-fusion: the prologue at every element the window reads, the
// epilogue at every element it writes), for every dtype, with a broadcast
// and a transposed operand in the prologue and a residual in the
// epilogue:
//
//	y1 = maxpool3×3/2 pad 1(relu(x + b)) + r, cast to f32 (relu for floats)
//	y2 = −avgpool2×2 ceil(x·s)                            (floats)
//	y3 = nearest ×2(max(x, mᵀ)), cast to f32
//	y4 = −bilinear ×2(|x|·0.5 + 0.25)                      (floats)
//
// Each op rounds to the dtype (u8 and u32 wrap) in the reference.
func (s *suite) plFused(t *testing.T) {
	for _, dt := range plDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			c := s.newCase(t)
			fl := dt.IsFloat()
			shape := []int{2, 3, 9, 12}
			x, xv := c.input("x", dt, shape, plGen)
			b, bv := c.input("b", dt, []int{1, 3, 1, 1}, plPlain)
			r, rv := c.input("r", dt, []int{2, 3, 5, 6}, plPlain)
			m, mv := c.input("m", dt, []int{2, 3, 12, 9}, plGen)
			round := func(v float64) float64 { return roundFloat(dt, v) }
			wrap := func(v int64) int64 {
				if dt == dtype.U8 {
					return v & 0xff
				}
				return v & 0xffffffff
			}
			// y1
			pre := newVals(dt, shape)
			bb := bv.broadcast(shape)
			for i := range pre.n() {
				if fl {
					pre.f[i] = round(xv.f[i] + bb.f[i])
					if pre.f[i] < 0 { // relu: NaN and −0 stay
						pre.f[i] = 0
					}
				} else {
					pre.i[i] = wrap(xv.i[i] + bb.i[i])
				}
			}
			in := x.Add(b)
			if fl {
				in = in.Relu()
			}
			q := plPool{kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1}
			y1v, _ := plPoolRef(pre, q, true)
			for i := range y1v.n() {
				if fl {
					y1v.f[i] = round(y1v.f[i] + rv.f[i])
				} else {
					y1v.i[i] = wrap(y1v.i[i] + rv.i[i])
				}
			}
			y1v = plAsF32(y1v)
			c.expect("y1", in.MaxPool2d(3, 3, q.opts(false)...).Add(r).Cast(dtype.F32), want{v: y1v, tol: exact})
			// y3
			mt := mv.transpose(2, 3)
			mx := newVals(dt, shape)
			for i := range mx.n() {
				if fl {
					// maximum: NaN if either is, else a > b ? a : b
					// (maximum(+0, −0) is −0).
					a, b := xv.f[i], mt.f[i]
					switch {
					case math.IsNaN(a) || math.IsNaN(b):
						mx.f[i] = math.NaN()
					case a > b:
						mx.f[i] = a
					default:
						mx.f[i] = b
					}
				} else {
					mx.i[i] = max(xv.i[i], mt.i[i])
				}
			}
			y3v := plAsF32(plNearestRef(mx, [2]int{18, 24}, [2]float64{}))
			c.expect("y3", x.Maximum(m.T()).UpsampleNearest2dScale(2, 2).Cast(dtype.F32), want{v: y3v, tol: exact})
			if fl {
				// y2
				sv := plPlain
				s2, s2v := c.input("s", dt, shape, sv)
				prod := newVals(dt, shape)
				for i := range prod.n() {
					prod.f[i] = round(xv.f[i] * s2v.f[i])
				}
				q2 := plPool{kh: 2, kw: 2, sh: 2, sw: 2, ceil: true}
				y2v, sc := plPoolRef(prod, q2, false)
				for i := range y2v.f {
					y2v.f[i] = -y2v.f[i]
				}
				c.expect("y2", x.Mul(s2).AvgPool2d(2, 2, q2.opts(true)...).Neg(), want{v: y2v, tol: plAvgTol(4), scale: sc})
				// y4
				av := newVals(dt, shape)
				for i := range av.n() {
					av.f[i] = round(math.Abs(xv.f[i])*0.5 + 0.25)
				}
				y4v, sc4 := plBilinearRef(av, [2]int{}, [2]float64{2, 2}, false)
				for i := range y4v.f {
					y4v.f[i] = -y4v.f[i]
				}
				c.expect("y4", x.Abs().Affine(0.5, 0.25).UpsampleBilinear2dScale(2, 2, false).Neg(), want{v: y4v, tol: plBilinearTol, scale: sc4})
			}
			c.run()
		})
	}
}

// plAsF32 is v converted to f32 exactly (every value of the pool dtypes
// but f64 and u32 is an f32; those round once, as the cast does).
func plAsF32(v vals) vals {
	out := newVals(dtype.F32, v.shape)
	for i := range out.n() {
		if v.dt.IsFloat() {
			out.f[i] = float64(float32(v.f[i]))
		} else {
			out.f[i] = float64(float32(v.i[i]))
		}
	}
	return out
}

// plLarge: sizes that spread over every worker (many planes and bands of
// rows) and, on the GPU, over many blocks.
func (s *suite) plLarge(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{2, 16, 57, 66}, plPlain)
			c.plPoolExpect("max", x, xv, plPool{kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1}, true)
			c.plPoolExpect("avg", x, xv, plPool{kh: 3, kw: 3, sh: 2, sw: 2, ph: 1, pw: 1, ceil: true, exclude: true}, false)
			c.plBilinearExpect("bilinear", x, xv, [2]int{}, [2]float64{2, 2}, false)
			c.plNearestExpect("nearest", x, xv, [2]int{114, 99}, [2]float64{})
			c.run()
		})
	}
}

// plCandle checks Candle's own expected values (candle-core/tests/
// pool_tests.rs and bilinear_tests.rs), with the tests' tolerances: an
// exact match, agreement after rounding to 4 decimals (to_vec*_round),
// or an absolute difference.
func (s *suite) plCandle(t *testing.T) {
	type check struct {
		name  string
		build func(x *graph.Tensor) *graph.Tensor
		want  []float64
		shape []int
		tol   float64 // 0: exact; 5e-5: equal after rounding to 4 decimals
	}
	arange := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i)
		}
		return v
	}
	const round4 = 0.5e-4 + 1e-7
	cases := []struct {
		name   string
		x      []float64
		shape  []int
		checks []check
	}{
		{"avg_pool2d", []float64{1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, []int{1, 1, 4, 4}, []check{
			{"k2", func(x *graph.Tensor) *graph.Tensor { return x.AvgPool2d(2, 2) }, []float64{0.5, 1, 1, 1}, []int{1, 1, 2, 2}, 0},
		}},
		{"avg_pool2d_2x8", []float64{1, 2, 1, 3, 0, 0, 1, 1, 1, 1, 1, 1, 5, 1, 1, 1}, []int{1, 1, 2, 8}, []check{
			{"k2", func(x *graph.Tensor) *graph.Tensor { return x.AvgPool2d(2, 2) }, []float64{5. / 4, 6. / 4, 6. / 4, 1}, []int{1, 1, 1, 4}, 0},
			{"max_k2", func(x *graph.Tensor) *graph.Tensor { return x.MaxPool2d(2, 2) }, []float64{2, 3, 5, 1}, []int{1, 1, 1, 4}, 0},
		}},
		{"max_pool2d", []float64{1, 2, 1, 3, 0, 0, 1, 1, 1, 1, 1, 1, 5, 1, 1, 1}, []int{1, 1, 4, 4}, []check{
			{"k2", func(x *graph.Tensor) *graph.Tensor { return x.MaxPool2d(2, 2) }, []float64{2, 3, 5, 1}, []int{1, 1, 2, 2}, 0},
		}},
		{"avg_pool2d_pytorch", []float64{
			0.4056, -0.8689, -0.0773, -1.5630, -2.8012, -1.5059, 0.3972, 1.0852, 0.4997, 3.0616,
			1.6541, 0.0964, -0.8338, -1.6523, -0.8323, -0.1699, 0.0823, 0.3526, 0.6843, 0.2395,
			1.2279, -0.9287, -1.7030, 0.1370, 0.6047, 0.3770, -0.6266, 0.3529, 2.2013, -0.6836,
			0.2477, 1.3127}, []int{1, 2, 4, 4}, []check{
			{"k2", func(x *graph.Tensor) *graph.Tensor { return x.AvgPool2d(2, 2) },
				[]float64{-1.1926, -0.0395, 0.2688, 0.1871, 0.1835, -0.1606, 0.6249, 0.3217}, []int{1, 2, 2, 2}, round4},
			{"k3", func(x *graph.Tensor) *graph.Tensor { return x.AvgPool2d(3, 3) }, []float64{0.085, 0.0078}, []int{1, 2, 1, 1}, round4},
			{"1x1x4x8_k2", func(x *graph.Tensor) *graph.Tensor { return x.Reshape(1, 1, 4, 8).AvgPool2d(2, 2) },
				[]float64{0.7745, 0.0276, -1.6983, 0.12, 0.3542, 0.1625, 0.4542, -0.0014}, []int{1, 1, 2, 4}, round4},
		}},
		{"upsample_nearest2d", arange(6), []int{1, 1, 2, 3}, []check{
			{"4x6", func(x *graph.Tensor) *graph.Tensor { return x.UpsampleNearest2d(4, 6) }, []float64{
				0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 3, 3, 4, 4, 5, 5}, []int{1, 1, 4, 6}, 0},
		}},
		{"bilinear_4x4", arange(16), []int{1, 1, 4, 4}, []check{
			{"2x_upscale", func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2d(8, 8, false) }, []float64{
				0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3, 1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4,
				3, 3.25, 3.75, 4.25, 4.75, 5.25, 5.75, 6, 5, 5.25, 5.75, 6.25, 6.75, 7.25, 7.75, 8,
				7, 7.25, 7.75, 8.25, 8.75, 9.25, 9.75, 10, 9, 9.25, 9.75, 10.25, 10.75, 11.25, 11.75, 12,
				11, 11.25, 11.75, 12.25, 12.75, 13.25, 13.75, 14, 12, 12.25, 12.75, 13.25, 13.75, 14.25, 14.75, 15},
				[]int{1, 1, 8, 8}, 1e-4},
			{"scale_2", func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2dScale(2, 2, false) }, []float64{
				0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3, 1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4,
				3, 3.25, 3.75, 4.25, 4.75, 5.25, 5.75, 6, 5, 5.25, 5.75, 6.25, 6.75, 7.25, 7.75, 8,
				7, 7.25, 7.75, 8.25, 8.75, 9.25, 9.75, 10, 9, 9.25, 9.75, 10.25, 10.75, 11.25, 11.75, 12,
				11, 11.25, 11.75, 12.25, 12.75, 13.25, 13.75, 14, 12, 12.25, 12.75, 13.25, 13.75, 14.25, 14.75, 15},
				[]int{1, 1, 8, 8}, 1e-4},
			{"identity", func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2d(4, 4, false) }, arange(16), []int{1, 1, 4, 4}, 0},
		}},
		{"bilinear_downscale", arange(64), []int{1, 1, 8, 8}, []check{
			{"4x4", func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2d(4, 4, false) }, []float64{
				4.5, 6.5, 8.5, 10.5, 20.5, 22.5, 24.5, 26.5, 36.5, 38.5, 40.5, 42.5, 52.5, 54.5, 56.5, 58.5}, []int{1, 1, 4, 4}, 1e-4},
		}},
		{"bilinear_align_corners", []float64{1, 2, 3, 4}, []int{1, 1, 2, 2}, []check{
			{"4x4", func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2d(4, 4, true) }, []float64{
				1, 1.3333, 1.6667, 2, 1.6667, 2, 2.3333, 2.6667, 2.3333, 2.6667, 3, 3.3333, 3, 3.3333, 3.6667, 4}, []int{1, 1, 4, 4}, 1e-3},
		}},
		{"bilinear_non_square", arange(24), []int{1, 1, 4, 6}, []check{
			{"8x12", func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2d(8, 12, false) }, []float64{
				0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4.25, 4.75, 5,
				1.5, 1.75, 2.25, 2.75, 3.25, 3.75, 4.25, 4.75, 5.25, 5.75, 6.25, 6.5,
				4.5, 4.75, 5.25, 5.75, 6.25, 6.75, 7.25, 7.75, 8.25, 8.75, 9.25, 9.5,
				7.5, 7.75, 8.25, 8.75, 9.25, 9.75, 10.25, 10.75, 11.25, 11.75, 12.25, 12.5,
				10.5, 10.75, 11.25, 11.75, 12.25, 12.75, 13.25, 13.75, 14.25, 14.75, 15.25, 15.5,
				13.5, 13.75, 14.25, 14.75, 15.25, 15.75, 16.25, 16.75, 17.25, 17.75, 18.25, 18.5,
				16.5, 16.75, 17.25, 17.75, 18.25, 18.75, 19.25, 19.75, 20.25, 20.75, 21.25, 21.5,
				18, 18.25, 18.75, 19.25, 19.75, 20.25, 20.75, 21.25, 21.75, 22.25, 22.75, 23}, []int{1, 1, 8, 12}, 1e-4},
		}},
		{"bilinear_1x1", []float64{5}, []int{1, 1, 1, 1}, []check{
			{"3x3", func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2d(3, 3, false) }, []float64{5, 5, 5, 5, 5, 5, 5, 5, 5}, []int{1, 1, 3, 3}, 1e-6},
		}},
		{"bilinear_1x2", []float64{2, 8}, []int{1, 1, 1, 2}, []check{
			{"3x6", func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2d(3, 6, false) }, []float64{
				2, 2, 4, 6, 8, 8, 2, 2, 4, 6, 8, 8, 2, 2, 4, 6, 8, 8}, []int{1, 1, 3, 6}, 1e-6},
		}},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			c := s.newCase(t)
			xv := newVals(dtype.F32, cs.shape)
			for i, v := range cs.x {
				xv.f[i] = roundFloat(dtype.F32, v)
			}
			x := c.inputVals("x", xv)
			for _, ch := range cs.checks {
				wv := newVals(dtype.F32, ch.shape)
				copy(wv.f, ch.want)
				tol := exact
				if ch.tol > 0 {
					tol = tolerance{name: fmt.Sprintf("Candle's test, ±%g", ch.tol), abs32: ch.tol}
				}
				c.expect(ch.name, ch.build(x), want{v: wv, tol: tol})
			}
			c.run()
		})
	}
	// bilinear_pytorch_multi_channel: the first output row of each channel
	// (±1e-3), and Candle's output-dimension checks.
	t.Run("bilinear_multi_channel", func(t *testing.T) {
		c := s.newCase(t)
		xv := newVals(dtype.F32, []int{1, 2, 4, 4})
		for i, v := range []float64{
			1.9269, 1.4873, 0.9007, -2.1055, 0.6784, -1.2345, -0.0431, -1.6047, -0.7521, 1.6487,
			-0.3925, -1.4036, -0.7279, -0.5594, -0.7688, 0.7624,
			1.6423, -0.1596, -0.4974, 0.4396, -0.7581, 1.0783, 0.8008, 1.6806, 1.2791, 1.2964,
			0.6105, 1.3347, -0.2316, 0.0418, -0.2516, 0.8599} {
			xv.f[i] = roundFloat(dtype.F32, v)
		}
		x := c.inputVals("x", xv)
		y := x.UpsampleBilinear2d(8, 8, false)
		wv := newVals(dtype.F32, []int{2, 8})
		copy(wv.f, []float64{1.9269, 1.8170, 1.5972, 1.3406, 1.0474, 0.1492, -1.3540, -2.1055,
			1.6423, 1.1918, 0.2909, -0.2440, -0.4129, -0.2632, 0.2053, 0.4396})
		c.expect("rows", y.Narrow(2, 0, 1).Reshape(2, 8), want{v: wv, tol: tolerance{name: "±1e-3", abs32: 1e-3}})
		c.run()
	})
	t.Run("bilinear_dimensions", func(t *testing.T) {
		g := graph.New()
		x48 := g.Input("a", dtype.F32, 1, 1, 4, 8)
		x44 := g.Input("b", dtype.F32, 1, 1, 4, 4)
		x22 := g.Input("c", dtype.F32, 1, 1, 2, 2)
		for _, d := range []struct {
			y    *graph.Tensor
			want []int
		}{
			{x48.UpsampleBilinear2d(6, 12, false), []int{1, 1, 6, 12}},
			{x44.UpsampleBilinear2dScale(2, 3, false), []int{1, 1, 8, 12}},
			{x44.UpsampleBilinear2dScale(1.5, 1.5, false), []int{1, 1, 6, 6}},
			{x44.UpsampleBilinear2d(1, 1, false), []int{1, 1, 1, 1}},
			{x22.UpsampleBilinear2dScale(5, 5, false), []int{1, 1, 10, 10}},
		} {
			if err := d.y.Err(); err != nil || !slices.Equal(d.y.Shape(), d.want) {
				t.Errorf("shape %v (%v), want %v", d.y.Shape(), err, d.want)
			}
		}
	})
}

// plErrors: every bad parameter is a builder error naming the op called,
// the input's dtype and shape and the parameter; Compile refuses the graph;
// nothing panics.
func plErrors(t *testing.T) {
	cases := []struct {
		name      string
		dt        dtype.DType
		shape     []int
		call      func(x *graph.Tensor) *graph.Tensor
		fragments []string
	}{
		{"kernel 0", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.MaxPool2d(0, 2) }, []string{"max_pool2d", "f32[1 2 5 5]", "kernel 0"}},
		{"negative kernel", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.AvgPool2d(2, -1) }, []string{"avg_pool2d", "kernel -1"}},
		{"stride 0", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.MaxPool2d(2, 2, graph.PoolStride(0)) }, []string{"max_pool2d", "stride 0"}},
		{"negative stride", dtype.U8, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.AvgPool2d(2, 2, graph.PoolStride(1, -2)) }, []string{"avg_pool2d", "u8[1 2 5 5]", "stride -2"}},
		{"three strides", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.MaxPool2d(2, 2, graph.PoolStride(1, 2, 3)) }, []string{"max_pool2d", "stride [1 2 3]"}},
		{"padding over half", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.MaxPool2d(3, 3, graph.PoolPadding(2)) }, []string{"max_pool2d", "padding 2", "half the kernel"}},
		{"negative padding", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.AvgPool2d(3, 3, graph.PoolPadding(0, -1)) }, []string{"avg_pool2d", "padding -1"}},
		{"kernel over padded input", dtype.F16, []int{1, 2, 4, 6}, func(x *graph.Tensor) *graph.Tensor { return x.MaxPool2d(7, 2, graph.PoolPadding(1, 0)) }, []string{"max_pool2d", "f16[1 2 4 6]", "kernel 7", "larger than the padded input", "4 + 2·1"}},
		{"rank 3", dtype.F32, []int{2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.MaxPool2d(2, 2) }, []string{"max_pool2d", "f32[2 5 5]", "rank 3"}},
		{"i64", dtype.I64, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.AvgPool2d(2, 2) }, []string{"avg_pool2d", "i64[1 2 5 5]", "dtype i64 not supported"}},
		{"empty H", dtype.F32, []int{1, 2, 0, 5}, func(x *graph.Tensor) *graph.Tensor { return x.MaxPool2d(1, 1) }, []string{"max_pool2d", "empty on H"}},
		{"count_include_pad on max", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.MaxPool2d(2, 2, graph.CountIncludePad(false)) }, []string{"max_pool2d", "count_include_pad"}},
		{"nil option", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.AvgPool2d(2, 2, nil) }, []string{"avg_pool2d", "nil option"}},
		{"nearest size 0", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleNearest2d(0, 4) }, []string{"upsample_nearest2d", "f32[1 2 5 5]", "output size 0 on H"}},
		{"nearest negative size", dtype.U32, []int{1, 2, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleNearest1d(-3) }, []string{"upsample_nearest1d", "u32[1 2 5]", "output size -3 on L"}},
		{"nearest scale to 0", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleNearest2dScale(2, 0.1) }, []string{"upsample_nearest2d", "output size 0 on W"}},
		{"nearest scale NaN", dtype.F32, []int{1, 2, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleNearest1dScale(math.NaN()) }, []string{"upsample_nearest1d", "scale factor NaN"}},
		{"nearest scale negative", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleNearest2dScale(-2, 2) }, []string{"upsample_nearest2d", "scale factor -2"}},
		{"nearest scale Inf", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2dScale(2, math.Inf(1), true) }, []string{"upsample_bilinear2d", "scale factor +Inf"}},
		{"nearest1d rank 4", dtype.F32, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleNearest1d(10) }, []string{"upsample_nearest1d", "f32[1 2 5 5]", "rank 4"}},
		{"nearest2d rank 3", dtype.F32, []int{2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleNearest2d(10, 10) }, []string{"upsample_nearest2d", "rank 3"}},
		{"nearest i64", dtype.I64, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleNearest2d(10, 10) }, []string{"upsample_nearest2d", "dtype i64 not supported"}},
		{"nearest empty L", dtype.F32, []int{1, 2, 0}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleNearest1d(4) }, []string{"upsample_nearest1d", "empty on L"}},
		{"bilinear u8", dtype.U8, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2d(10, 10, false) }, []string{"upsample_bilinear2d", "u8[1 2 5 5]", "dtype u8 not supported"}},
		{"bilinear size 0", dtype.BF16, []int{1, 2, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2d(3, 0, true) }, []string{"upsample_bilinear2d", "bf16[1 2 5 5]", "output size 0 on W"}},
		{"bilinear rank 5", dtype.F32, []int{1, 2, 3, 5, 5}, func(x *graph.Tensor) *graph.Tensor { return x.UpsampleBilinear2d(3, 3, false) }, []string{"upsample_bilinear2d", "rank 5"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noPanic(t, tc.name, func() {
				g := graph.New()
				x := g.Input("x", tc.dt, tc.shape...)
				y := tc.call(x)
				wantErr(t, tc.name, y.Err(), tc.fragments...)
				g.Output("y", y)
				_, err := g.Compile(graph.Options{})
				wantErr(t, tc.name+": compile", err, tc.fragments...)
				// The error is carried through later ops.
				wantErr(t, tc.name+": carried", y.Relu().Err(), tc.fragments[0])
			})
		})
	}
	t.Run("scalar and nil", func(t *testing.T) {
		noPanic(t, "scalar", func() {
			wantErr(t, "scalar", graph.Scalar(1).MaxPool2d(2, 2).Err(), "max_pool2d", "untyped scalar")
			var nilT *graph.Tensor
			wantErr(t, "nil", nilT.UpsampleBilinear2d(2, 2, false).Err(), "upsample_bilinear2d", "nil tensor")
			wantErr(t, "nil", nilT.UpsampleNearest1dScale(2).Err(), "upsample_nearest1d", "nil tensor")
		})
	})
	t.Run("error operand", func(t *testing.T) {
		noPanic(t, "error operand", func() {
			g := graph.New()
			bad := g.Input("x", dtype.F32, 2, 3).Reshape(7)
			wantErr(t, "carried", bad.AvgPool2d(2, 2).Err(), "reshape")
			if msg := bad.AvgPool2d(2, 2).Err().Error(); strings.Contains(msg, "avg_pool2d") {
				t.Errorf("a pool of an error tensor reports %q, want the operand's error", msg)
			}
		})
	})
}

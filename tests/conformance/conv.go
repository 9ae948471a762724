package conformance

// Convolutions: conv1d, conv2d, conv_transpose1d and conv_transpose2d.
//
// The reference is a float64 sum written from PyTorch's definitions
// (torch.nn.functional; graph/conv.go documents Loom's): for conv, each
// output element gathers every input element a kernel tap reads; for
// conv_transpose, each output element gathers every (input element, tap)
// pair that lands on it — where an executor scatters (col2im), the two
// formulations check each other. It never calls exec/cpu or a BLAS. Each
// expected element carries the scale Σ|x·w| of its terms, and the
// tolerance is the matmul group's for the number of terms (mmTol).

import (
	"context"
	"fmt"
	"github.com/loomgraph/loom/ir"
	"math"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// Conv runs the convolution group: every combination of stride 1–3,
// padding 0–2, dilation 1–2 and groups 1, 2 and C (and output padding for
// the transposed ops) on odd and even sizes, 1-D and 2-D; every float
// dtype; operands read through views (in place at an offset, or copied);
// empty batches, one-element and degenerate shapes; the fused epilogue;
// Candle's own expected values; and the builder errors.
func Conv(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	s := newSuite(t, newExec, opts)
	t.Run("Conv2d", s.convParams2d)
	t.Run("Conv1d", s.convParams1d)
	t.Run("ConvTranspose2d", s.convTParams2d)
	t.Run("ConvTranspose1d", s.convTParams1d)
	t.Run("DTypes", s.convDTypes)
	t.Run("Views", s.convViews)
	t.Run("Edges", s.convEdges)
	t.Run("Epilogue", s.convEpilogue)
	t.Run("Candle", s.convCandle)
	t.Run("Errors", convErrors)
}

// convSpec is one convolution: operand shapes and per-axis parameters
// (one entry per spatial axis; nil for the default).
type convSpec struct {
	transposed               bool
	x, w                     []int
	stride, pad, dil, outPad []int
	groups                   int
}

func (c convSpec) rank() int { return len(c.x) - 2 }

func (c convSpec) String() string {
	op := "conv"
	if c.transposed {
		op = "convT"
	}
	s := fmt.Sprintf("%s%dd_x%v_w%v", op, c.rank(), c.x, c.w)
	for _, p := range []struct {
		n string
		v []int
	}{{"s", c.stride}, {"p", c.pad}, {"d", c.dil}, {"op", c.outPad}} {
		if p.v != nil {
			s += fmt.Sprintf("_%s%v", p.n, p.v)
		}
	}
	if c.groups > 1 {
		s += fmt.Sprintf("_g%d", c.groups)
	}
	return s
}

// options returns the graph options: nil lists stay nil (the defaults),
// equal entries become one value (PyTorch's int form), others per axis.
func (c convSpec) options() graph.ConvOptions {
	short := func(v []int) []int {
		if len(v) > 1 && slices.Equal(v, slices.Repeat(v[:1], len(v))) {
			return v[:1]
		}
		return v
	}
	return graph.ConvOptions{Stride: short(c.stride), Padding: short(c.pad), Dilation: short(c.dil), OutputPadding: short(c.outPad), Groups: c.groups}
}

// build records the convolution of x by w.
func (c convSpec) build(x, w *graph.Tensor) *graph.Tensor {
	o := c.options()
	switch {
	case c.rank() == 1 && !c.transposed:
		return graph.Conv1d(x, w, o)
	case c.rank() == 1:
		return graph.ConvTranspose1d(x, w, o)
	case !c.transposed:
		return graph.Conv2d(x, w, o)
	}
	return graph.ConvTranspose2d(x, w, o)
}

// axis returns parameter v's value on axis a of a 2-D view of the spec
// (a 1-D spec is 2-D with a height of 1: axis 0 has the defaults).
func (c convSpec) axis(v []int, a, def int) int {
	a -= 2 - c.rank()
	if a < 0 || v == nil {
		return def
	}
	return v[a]
}

// dims2 returns the spatial dims of shape as (height, width), height 1 for
// 1-D.
func dims2(shape []int) (int, int) {
	if len(shape) == 3 {
		return 1, shape[2]
	}
	return shape[2], shape[3]
}

// outShape is the output shape by PyTorch's size formulas.
func (c convSpec) outShape() []int {
	g := max(c.groups, 1)
	cout := c.w[0]
	if c.transposed {
		cout = c.w[1] * g
	}
	out := []int{c.x[0], cout}
	for a := range c.rank() {
		in, k := c.x[2+a], c.w[2+a]
		s, p, d := c.axis(c.stride, a+2-c.rank(), 1), c.axis(c.pad, a+2-c.rank(), 0), c.axis(c.dil, a+2-c.rank(), 1)
		if c.transposed {
			out = append(out, (in-1)*s-2*p+d*(k-1)+c.axis(c.outPad, a+2-c.rank(), 0)+1)
		} else {
			out = append(out, (in+2*p-d*(k-1)-1)/s+1)
		}
	}
	return out
}

// terms is the number of products in each output element's sum at most.
func (c convSpec) terms() int {
	k := numel(c.w[2:])
	if c.transposed {
		return c.x[1] / max(c.groups, 1) * k
	}
	return c.w[1] * k
}

// convRef is the convolution of x by w in float64 and each element's
// scale Σ|x·w|.
func convRef(c convSpec, dt dtype.DType, x, w vals) (vals, []float64) {
	out := newVals(dt, c.outShape())
	scale := make([]float64, out.n())
	G := max(c.groups, 1)
	N, C := c.x[0], c.x[1]
	ih, iw := dims2(c.x)
	kh, kw := dims2(c.w)
	oh, ow := dims2(out.shape)
	cout := out.shape[1]
	cig, cog := C/G, cout/G
	sh, sw := c.axis(c.stride, 0, 1), c.axis(c.stride, 1, 1)
	ph, pw := c.axis(c.pad, 0, 0), c.axis(c.pad, 1, 0)
	dh, dw := c.axis(c.dil, 0, 1), c.axis(c.dil, 1, 1)
	// src returns the input position a tap reads for output position o
	// (conv), or the input position whose tap lands on o (transposed).
	src := func(o, k, s, p, d, in int) (int, bool) {
		if !c.transposed {
			i := o*s - p + k*d
			return i, i >= 0 && i < in
		}
		num := o + p - k*d
		if num < 0 || num%s != 0 || num/s >= in {
			return 0, false
		}
		return num / s, true
	}
	for n := range N {
		for co := range cout {
			gi := co / cog
			for oy := range oh {
				for ox := range ow {
					var sum, abs float64
					for ci := range cig {
						cin := gi*cig + ci
						for ky := range kh {
							iy, ok := src(oy, ky, sh, ph, dh, ih)
							if !ok {
								continue
							}
							for kx := range kw {
								ix, ok := src(ox, kx, sw, pw, dw, iw)
								if !ok {
									continue
								}
								xv := x.f[((n*C+cin)*ih+iy)*iw+ix]
								var wv float64
								if c.transposed {
									wv = w.f[((cin*cog+co-gi*cog)*kh+ky)*kw+kx]
								} else {
									wv = w.f[((co*cig+ci)*kh+ky)*kw+kx]
								}
								sum += xv * wv
								abs += math.Abs(xv * wv)
							}
						}
					}
					k := ((n*cout+co)*oh+oy)*ow + ox
					out.f[k], scale[k] = sum, abs
				}
			}
		}
	}
	return out, scale
}

// convExpect declares output name = y, expected to be c applied to the
// logical values x and w.
func (tc *tcase) convExpect(name string, y *graph.Tensor, c convSpec, x, w vals) {
	ref, scale := convRef(c, x.dt, x, w)
	tc.expect(name, y, want{v: ref, tol: mmTol(c.terms()), scale: scale})
}

// runConv runs spec c in dtype dt on fresh inputs.
func (s *suite) runConv(t *testing.T, c convSpec, dt dtype.DType) {
	tc := s.newCase(t)
	x, xv := tc.input("x", dt, c.x, mmGen)
	w, wv := tc.input("w", dt, c.w, mmGen)
	tc.convExpect("y", c.build(x, w), c, xv, wv)
	tc.run()
}

// paramGrid lists stride 1–3 × padding 0–2 × dilation 1–2 × groups
// {1, 2, C}, the same value on every axis, then a few per-axis mixes.
func paramGrid(rank, C int, each func(stride, pad, dil []int, groups int)) {
	rep := func(v int) []int { return slices.Repeat([]int{v}, rank) }
	for s := 1; s <= 3; s++ {
		for p := 0; p <= 2; p++ {
			for d := 1; d <= 2; d++ {
				for _, g := range []int{1, 2, C} {
					each(rep(s), rep(p), rep(d), g)
				}
			}
		}
	}
	if rank == 2 {
		each([]int{1, 2}, []int{2, 0}, []int{2, 1}, 2)
		each([]int{3, 1}, []int{0, 1}, []int{1, 2}, 1)
		each([]int{2, 3}, []int{1, 2}, []int{2, 2}, C)
	}
}

// gridDType spreads the float dtypes over a grid's cases: each
// combination runs once, in one dtype, and every dtype sees a quarter of
// them (DTypes runs larger cases in every dtype).
func gridDType(i int) dtype.DType { return wideFloats[i%len(wideFloats)] }

func (s *suite) convParams2d(t *testing.T) {
	const C = 4
	i := 0
	paramGrid(2, C, func(st, p, d []int, g int) {
		// H 7 (odd) and W 6 (even); a 3×2 kernel (odd and even).
		c := convSpec{x: []int{2, C, 7, 6}, w: []int{8, C / g, 3, 2}, stride: st, pad: p, dil: d, groups: g}
		dt := gridDType(i)
		i++
		t.Run(c.String()+"/"+dt.String(), func(t *testing.T) { s.runConv(t, c, dt) })
	})
}

func (s *suite) convParams1d(t *testing.T) {
	const C = 4
	i := 0
	paramGrid(1, C, func(st, p, d []int, g int) {
		L, K := 9, 3 // odd
		if i%2 == 1 {
			L, K = 8, 2 // even
		}
		c := convSpec{x: []int{2, C, L}, w: []int{6, C / g, K}, stride: st, pad: p, dil: d, groups: g}
		if g == C {
			c.w[0] = 8
		}
		dt := gridDType(i)
		i++
		t.Run(c.String()+"/"+dt.String(), func(t *testing.T) { s.runConv(t, c, dt) })
	})
}

// outPads are the output paddings tried with a stride and dilation: 0,
// and the largest allowed (smaller than the stride or the dilation).
func outPads(s, d int) []int {
	if m := max(s, d) - 1; m > 0 {
		return []int{0, m}
	}
	return []int{0}
}

func (s *suite) convTParams2d(t *testing.T) {
	const C = 4
	i := 0
	paramGrid(2, C, func(st, p, d []int, g int) {
		for _, op := range outPads(max(st[0], st[1]), max(d[0], d[1])) {
			ops := []int{min(op, max(st[0], d[0])-1), min(op, max(st[1], d[1])-1)}
			// H 5 (odd), W 4 (even); a 3×2 kernel; Cout = 2 per group.
			c := convSpec{transposed: true, x: []int{2, C, 5, 4}, w: []int{C, 2, 3, 2}, stride: st, pad: p, dil: d, outPad: ops, groups: g}
			if op == 0 {
				c.outPad = nil
			}
			dt := gridDType(i)
			i++
			t.Run(c.String()+"/"+dt.String(), func(t *testing.T) { s.runConv(t, c, dt) })
		}
	})
}

func (s *suite) convTParams1d(t *testing.T) {
	const C = 4
	i := 0
	paramGrid(1, C, func(st, p, d []int, g int) {
		for _, op := range outPads(st[0], d[0]) {
			L, K := 6, 3
			if i%2 == 1 {
				L, K = 5, 4
			}
			c := convSpec{transposed: true, x: []int{2, C, L}, w: []int{C, 3, K}, stride: st, pad: p, dil: d, groups: g}
			if op > 0 {
				c.outPad = []int{op}
			}
			dt := gridDType(i)
			i++
			t.Run(c.String()+"/"+dt.String(), func(t *testing.T) { s.runConv(t, c, dt) })
		}
	})
}

// convDTypes: larger cases (tens of channels, many pixels) in every float
// dtype, each path: im2col, depthwise, 1-D, and both transposed ops.
func (s *suite) convDTypes(t *testing.T) {
	cases := []convSpec{
		{x: []int{2, 16, 12, 11}, w: []int{24, 16, 3, 3}, pad: []int{1, 1}},
		{x: []int{3, 12, 9, 10}, w: []int{8, 6, 3, 2}, stride: []int{2, 1}, groups: 2},
		{x: []int{2, 6, 10, 9}, w: []int{12, 1, 3, 3}, pad: []int{1, 1}, groups: 6},
		{x: []int{2, 16, 33}, w: []int{8, 16, 5}, pad: []int{2}, dil: []int{2}},
		{transposed: true, x: []int{2, 16, 6, 5}, w: []int{16, 8, 4, 4}, stride: []int{2, 2}, pad: []int{1, 1}},
		{transposed: true, x: []int{3, 8, 10}, w: []int{8, 4, 3}, stride: []int{3}, pad: []int{1}, outPad: []int{2}, groups: 2},
	}
	for _, dt := range wideFloats {
		for _, c := range cases {
			t.Run(c.String()+"/"+dt.String(), func(t *testing.T) { s.runConv(t, c, dt) })
		}
	}
}

// convViews: operands that are views. A view that is a packed array at an
// offset (a narrowed batch, a narrowed output-channel range of a weight) is
// read in place; a transposed input, a narrowed channel range or a
// transposed weight is copied first; a computed operand is read from the
// step that wrote it.
func (s *suite) convViews(t *testing.T) {
	const N, C, H, W, O = 2, 4, 6, 5, 6
	c2 := convSpec{x: []int{N, C, H, W}, w: []int{O, C, 3, 3}, pad: []int{1, 1}}
	cT := convSpec{transposed: true, x: []int{N, C, H, W}, w: []int{C, O, 3, 2}, stride: []int{2, 2}}
	c1 := convSpec{x: []int{N, C, 7}, w: []int{O, C / 2, 3}, pad: []int{1}, groups: 2}
	type built struct {
		x, w   *graph.Tensor
		xv, wv vals
	}
	// steps is the plan's step count: 1 when both operands are read in
	// place, one more per copied or computed operand.
	cases := []struct {
		name  string
		c     convSpec
		steps int
		mk    func(tc *tcase, dt dtype.DType, c convSpec) built
	}{
		{"x-permuted", c2, 2, func(tc *tcase, dt dtype.DType, c convSpec) built {
			x, xv := tc.input("x", dt, []int{N, H, C, W}, mmGen)
			w, wv := tc.input("w", dt, c.w, mmGen)
			return built{x.Permute(0, 2, 1, 3), w, xv.permute([]int{0, 2, 1, 3}), wv}
		}},
		{"x-channel-narrow", c2, 2, func(tc *tcase, dt dtype.DType, c convSpec) built {
			x, xv := tc.input("x", dt, []int{N, C + 3, H, W}, mmGen)
			w, wv := tc.input("w", dt, c.w, mmGen)
			return built{x.Narrow(1, 2, C), w, xv.narrow(1, 2, C), wv}
		}},
		{"x-batch-offset", c2, 1, func(tc *tcase, dt dtype.DType, c convSpec) built {
			x, xv := tc.input("x", dt, []int{N + 2, C, H, W}, mmGen)
			w, wv := tc.input("w", dt, c.w, mmGen)
			return built{x.Narrow(0, 1, N), w, xv.narrow(0, 1, N), wv}
		}},
		{"w-transposed", c2, 2, func(tc *tcase, dt dtype.DType, c convSpec) built {
			x, xv := tc.input("x", dt, c.x, mmGen)
			w, wv := tc.input("w", dt, []int{C, O, 3, 3}, mmGen)
			return built{x, w.Transpose(0, 1), xv, wv.transpose(0, 1)}
		}},
		{"w-offset", c2, 1, func(tc *tcase, dt dtype.DType, c convSpec) built {
			x, xv := tc.input("x", dt, c.x, mmGen)
			w, wv := tc.input("w", dt, []int{O + 1, C, 3, 3}, mmGen)
			return built{x, w.Narrow(0, 1, O), xv, wv.narrow(0, 1, O)}
		}},
		{"x-computed", c2, 2, func(tc *tcase, dt dtype.DType, c convSpec) built {
			// x·2 − 1 is exact in every float dtype for inputs in [0, 1]
			// that are dtype values.
			xv := mmGen.draw(tc.r, dt, c.x)
			for i := range xv.f {
				xv.f[i] = math.Abs(xv.f[i])
			}
			x := tc.inputVals("x", xv)
			want := newVals(dt, xv.shape)
			for i, v := range xv.f {
				want.f[i] = roundFloat(dt, v*2-1)
			}
			w, wv := tc.input("w", dt, c.w, mmGen)
			return built{x.Affine(2, -1), w, want, wv}
		}},
		{"transposed-x-offset-w-transposed", cT, 2, func(tc *tcase, dt dtype.DType, c convSpec) built {
			x, xv := tc.input("x", dt, []int{N + 1, C, H, W}, mmGen)
			w, wv := tc.input("w", dt, []int{O, C, 3, 2}, mmGen)
			return built{x.Narrow(0, 1, N), w.Transpose(0, 1), xv.narrow(0, 1, N), wv.transpose(0, 1)}
		}},
		{"transposed-x-channel-narrow", cT, 2, func(tc *tcase, dt dtype.DType, c convSpec) built {
			x, xv := tc.input("x", dt, []int{N, C + 1, H, W}, mmGen)
			w, wv := tc.input("w", dt, c.w, mmGen)
			return built{x.Narrow(1, 1, C), w, xv.narrow(1, 1, C), wv}
		}},
		{"1d-x-transposed", c1, 2, func(tc *tcase, dt dtype.DType, c convSpec) built {
			x, xv := tc.input("x", dt, []int{N, 7, C}, mmGen)
			w, wv := tc.input("w", dt, c.w, mmGen)
			return built{x.Transpose(1, 2), w, xv.transpose(1, 2), wv}
		}},
	}
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		for _, vc := range cases {
			t.Run(vc.name+"/"+dt.String(), func(t *testing.T) {
				tc := s.newCase(t)
				b := vc.mk(tc, dt, vc.c)
				tc.convExpect("y", vc.c.build(b.x, b.w), vc.c, b.xv, b.wv)
				tc.run()
				if n := len(tc.compile().Plan().Steps); n != vc.steps {
					t.Errorf("the plan has %d steps, want %d", n, vc.steps)
				}
			})
		}
	}
}

// convEdges: empty batches and channels, one element, a kernel as large
// as the padded input, 1×1 kernels (the GEMM-only path and its strided
// variant), depthwise with a channel multiplier, strides larger than the
// kernel (inputs skipped; transposed outputs with gaps).
func (s *suite) convEdges(t *testing.T) {
	cases := []convSpec{
		{x: []int{0, 4, 5, 5}, w: []int{6, 4, 3, 3}},
		{transposed: true, x: []int{0, 4, 5}, w: []int{4, 2, 3}, stride: []int{2}},
		{x: []int{1, 1, 1, 1}, w: []int{1, 1, 1, 1}},
		{x: []int{1, 1, 1}, w: []int{1, 1, 1}},
		{transposed: true, x: []int{1, 1, 1, 1}, w: []int{1, 1, 1, 1}},
		{transposed: true, x: []int{1, 1, 1}, w: []int{1, 1, 1}},
		{x: []int{1, 2, 3, 3}, w: []int{2, 2, 5, 5}, pad: []int{1, 1}},
		{x: []int{2, 8, 5, 6}, w: []int{4, 8, 1, 1}},
		{x: []int{2, 8, 5, 6}, w: []int{4, 4, 1, 1}, groups: 2},
		{x: []int{2, 8, 5, 6}, w: []int{4, 8, 1, 1}, stride: []int{2, 2}},
		{x: []int{2, 8, 7}, w: []int{3, 8, 1}},
		{x: []int{2, 3, 6, 7}, w: []int{6, 1, 3, 3}, pad: []int{1, 1}, stride: []int{2, 2}, groups: 3},
		{x: []int{2, 3, 7, 9}, w: []int{3, 1, 3, 3}, pad: []int{2, 2}, dil: []int{2, 2}, groups: 3},
		{x: []int{2, 4, 12}, w: []int{4, 1, 3}, pad: []int{1}, dil: []int{3}, groups: 4},
		{x: []int{2, 3, 11}, w: []int{9, 1, 4}, dil: []int{2}, groups: 3},
		{x: []int{1, 2, 9, 9}, w: []int{2, 2, 2, 2}, stride: []int{4, 4}},
		{transposed: true, x: []int{1, 2, 3, 3}, w: []int{2, 2, 2, 2}, stride: []int{3, 3}},
		{transposed: true, x: []int{2, 3, 4}, w: []int{3, 2, 3}, pad: []int{2}},
		{x: []int{2, 0, 5, 5}, w: []int{3, 0, 3, 3}},
		{transposed: true, x: []int{2, 0, 4}, w: []int{0, 3, 2}},
		{x: []int{2, 3, 5, 5}, w: []int{0, 3, 3, 3}},
	}
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16} {
		for _, c := range cases {
			t.Run(c.String()+"/"+dt.String(), func(t *testing.T) { s.runConv(t, c, dt) })
		}
	}
}

// convEpilogue: conv → bias → relu → residual add → cast is one fused
// kernel, the conv with its epilogue (fusion on), against the float64
// reference; the bias is an Add the caller writes.
func (s *suite) convEpilogue(t *testing.T) {
	const N, C, H, W, O = 2, 5, 6, 7, 4
	c := convSpec{x: []int{N, C, H, W}, w: []int{O, C, 3, 3}, pad: []int{1, 1}}
	tc := s.newCase(t)
	x, xv := tc.input("x", dtype.F32, c.x, mmGen)
	w, wv := tc.input("w", dtype.F32, c.w, mmGen)
	b, bv := tc.input("b", dtype.F32, []int{O}, mmGen)
	r, rv := tc.input("r", dtype.F32, []int{N, O, H, W}, mmGen)
	y := graph.Conv2d(x, w, c.options()).Add(b.Reshape(1, O, 1, 1)).Relu().Add(r).Cast(dtype.F64)
	ref, scale := convRef(c, dtype.F32, xv, wv)
	exp := newVals(dtype.F64, ref.shape)
	for i := range ref.f {
		o := i / (H * W) % O
		// Each step rounds to f32: the conv's error (mmTol, against its
		// scale) carries through the add, relu and add, which round once
		// each (two f32 half-ulps of the terms' magnitude more).
		exp.f[i] = math.Max(ref.f[i]+bv.f[o], 0) + rv.f[i]
		scale[i] += math.Abs(bv.f[o]) + math.Abs(rv.f[i])
	}
	tol := mmTol(c.terms())
	tol.rel64 = tol.rel32 // the f64 result carries the f32 error
	tc.expect("y", y, want{v: exp, tol: tol, scale: scale})
	tc.run()
	prog := tc.compile()
	if steps := len(prog.Plan().Steps); prog.Plan().Fused && steps != 1 {
		t.Errorf("fused plan has %d steps, want 1 (the conv with its epilogue)", steps)
	}
}

// convErrors: every bad-input class is a builder error naming the op the
// caller used, both operands and the parameter at fault; the graph then
// refuses to compile; nothing panics.
func convErrors(t *testing.T) {
	in := func(g *graph.Graph, name string, dt dtype.DType, shape ...int) *graph.Tensor {
		return g.Input(name, dt, shape...)
	}
	x2 := func(g *graph.Graph) *graph.Tensor { return in(g, "x", dtype.F32, 1, 4, 5, 5) }
	w2 := func(g *graph.Graph) *graph.Tensor { return in(g, "w", dtype.F32, 6, 4, 3, 3) }
	type op func(g *graph.Graph) *graph.Tensor
	both := []string{"f32[1 4 5 5]", "f32[6 4 3 3]"}
	cases := []struct {
		name  string
		build op
		frags []string
	}{
		{"zero stride", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), w2(g), graph.ConvOptions{Stride: []int{0}})
		}, append([]string{"conv2d", "stride 0"}, both...)},
		{"negative stride", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), w2(g), graph.ConvOptions{Stride: []int{1, -2}})
		}, append([]string{"conv2d", "stride -2", "axis W"}, both...)},
		{"negative padding", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), w2(g), graph.ConvOptions{Padding: []int{-1}})
		}, append([]string{"conv2d", "padding -1"}, both...)},
		{"zero dilation", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), w2(g), graph.ConvOptions{Dilation: []int{0}})
		}, append([]string{"conv2d", "dilation 0"}, both...)},
		{"huge padding", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), w2(g), graph.ConvOptions{Padding: []int{1 << 40}})
		}, append([]string{"conv2d", "padding", "too large"}, both...)},
		{"kernel larger than padded input", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), in(g, "w", dtype.F32, 6, 4, 7, 3))
		}, []string{"conv2d", "f32[1 4 5 5]", "f32[6 4 7 3]", "kernel 7", "larger than the padded input", "axis H"}},
		{"dilated kernel larger than padded input", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv1d(in(g, "x", dtype.F32, 2, 3, 6), in(g, "w", dtype.F32, 4, 3, 3), graph.ConvOptions{Dilation: []int{3}})
		}, []string{"conv1d", "f32[2 3 6]", "f32[4 3 3]", "dilated to 7", "larger than the padded input", "dilation [3]"}},
		{"input channels not divisible by groups", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), in(g, "w", dtype.F32, 6, 2, 3, 3), graph.ConvOptions{Groups: 3})
		}, []string{"conv2d", "f32[1 4 5 5]", "f32[6 2 3 3]", "4 channels are not divisible by groups 3"}},
		{"output channels not divisible by groups", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), in(g, "w", dtype.F32, 5, 2, 3, 3), graph.ConvOptions{Groups: 2})
		}, []string{"conv2d", "f32[1 4 5 5]", "f32[5 2 3 3]", "not divisible by groups 2"}},
		{"channel mismatch", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), in(g, "w", dtype.F32, 6, 3, 3, 3))
		}, []string{"conv2d", "f32[1 4 5 5]", "f32[6 3 3 3]", "channels"}},
		{"transposed channels not divisible by groups", func(g *graph.Graph) *graph.Tensor {
			return graph.ConvTranspose2d(in(g, "x", dtype.F32, 1, 5, 4, 4), in(g, "w", dtype.F32, 5, 2, 3, 3), graph.ConvOptions{Groups: 2})
		}, []string{"conv_transpose2d", "f32[1 5 4 4]", "f32[5 2 3 3]", "not divisible by groups 2"}},
		{"transposed output size zero", func(g *graph.Graph) *graph.Tensor {
			return graph.ConvTranspose1d(in(g, "x", dtype.F32, 1, 2, 1), in(g, "w", dtype.F32, 2, 3, 1), graph.ConvOptions{Padding: []int{1}})
		}, []string{"conv_transpose1d", "f32[1 2 1]", "f32[2 3 1]", "output size -1", "≤ 0", "padding 1"}},
		{"output padding too large", func(g *graph.Graph) *graph.Tensor {
			return graph.ConvTranspose2d(in(g, "x", dtype.F32, 1, 4, 4, 4), in(g, "w", dtype.F32, 4, 2, 3, 3), graph.ConvOptions{Stride: []int{2}, OutputPadding: []int{2}})
		}, []string{"conv_transpose2d", "f32[1 4 4 4]", "f32[4 2 3 3]", "output_padding 2", "smaller than the stride"}},
		{"output padding on conv", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), w2(g), graph.ConvOptions{Stride: []int{2}, OutputPadding: []int{1}})
		}, append([]string{"conv2d", "output_padding 1", "only transposed"}, both...)},
		{"empty input rows", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(in(g, "x", dtype.F32, 1, 4, 0, 5), w2(g), graph.ConvOptions{Padding: []int{2}})
		}, []string{"conv2d", "f32[1 4 0 5]", "f32[6 4 3 3]", "empty on axis H"}},
		{"input rank", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(in(g, "x", dtype.F32, 4, 5, 5), w2(g))
		}, []string{"conv2d", "f32[4 5 5]", "f32[6 4 3 3]", "rank 3, want 4"}},
		{"weight rank", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv1d(in(g, "x", dtype.F32, 1, 4, 5), w2(g))
		}, []string{"conv1d", "f32[1 4 5]", "f32[6 4 3 3]", "rank 4, want 3"}},
		{"dtype mismatch", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), in(g, "w", dtype.F16, 6, 4, 3, 3))
		}, []string{"conv2d", "f32[1 4 5 5]", "f16[6 4 3 3]", "mismatch"}},
		{"integer dtype", func(g *graph.Graph) *graph.Tensor {
			return graph.ConvTranspose1d(in(g, "x", dtype.U8, 1, 4, 5), in(g, "w", dtype.U8, 4, 2, 3))
		}, []string{"conv_transpose1d", "u8[1 4 5]", "u8[4 2 3]", "not supported"}},
		{"parameter list length", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), w2(g), graph.ConvOptions{Padding: []int{1, 1, 1}})
		}, append([]string{"conv2d", "padding [1 1 1]", "one value or 2"}, both...)},
		{"negative groups", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), w2(g), graph.ConvOptions{Groups: -1})
		}, append([]string{"conv2d", "groups -1"}, both...)},
		{"two options", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), w2(g), graph.ConvOptions{}, graph.ConvOptions{})
		}, append([]string{"conv2d", "2 ConvOptions"}, both...)},
		{"scalar operand", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), graph.Scalar(1))
		}, []string{"conv2d", "scalar"}},
		{"other graph", func(g *graph.Graph) *graph.Tensor {
			return graph.Conv2d(x2(g), graph.New().Input("w", dtype.F32, 6, 4, 3, 3))
		}, []string{"conv2d", "different graphs"}},
	}
	for _, tc := range cases {
		noPanic(t, tc.name, func() {
			g := graph.New()
			y := tc.build(g)
			wantErr(t, tc.name, y.Err(), tc.frags...)
			g.Output("y", y)
			g.Output("ok", g.Input("z", dtype.F32, 2).Exp())
			_, err := g.Compile(graph.Options{})
			wantErr(t, tc.name+": compile", err, tc.frags[0])
		})
	}
	noPanic(t, "nil operands", func() {
		wantErr(t, "nil x", graph.Conv2d(nil, nil).Err(), "conv2d", "nil")
		wantErr(t, "zero tensor", graph.ConvTranspose1d(&graph.Tensor{}, &graph.Tensor{}).Err(), "conv_transpose1d")
	})
}

// convCandle checks Candle's expected values (conv_candle_data.go), each
// to the decimals Candle's test rounds to. Candle's argument orders map
// as: conv1d/conv2d(w, padding, stride, dilation, groups);
// conv_transpose1d(w, padding, output_padding, stride, dilation, groups);
// conv_transpose2d(w, padding, output_padding, stride, dilation).
func (s *suite) convCandle(t *testing.T) {
	type check struct {
		name     string
		y        func(x, w *graph.Tensor) *graph.Tensor
		want     []float64
		shape    []int
		decimals int
	}
	cases := []struct {
		name   string
		x, w   []float64
		xs, ws []int
		checks []check
	}{
		{"conv1d", candleC1X, candleC1W, []int{1, 4, 5}, []int{2, 4, 3}, []check{
			{"p0", func(x, w *graph.Tensor) *graph.Tensor { return graph.Conv1d(x, w) }, candleC1P0, []int{1, 2, 3}, 4},
			{"p1", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.Conv1d(x, w, graph.ConvOptions{Padding: []int{1}})
			}, candleC1P1, []int{1, 2, 5}, 4},
			{"batch-p1", func(x, w *graph.Tensor) *graph.Tensor {
				z := x.Affine(0, 0)
				return graph.Conv1d(graph.Cat(0, z, x, z), w, graph.ConvOptions{Padding: []int{1}})
			}, slices.Concat(make([]float64, 10), candleC1P1, make([]float64, 10)), []int{3, 2, 5}, 4},
			{"transposed", func(x, w *graph.Tensor) *graph.Tensor { return graph.ConvTranspose1d(x, w.Transpose(0, 1)) }, candleC1T1, []int{1, 2, 7}, 4},
			{"transposed-contiguous", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.ConvTranspose1d(x, w.Transpose(0, 1).Contiguous())
			}, candleC1T1, []int{1, 2, 7}, 4},
			{"transposed-g2", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.ConvTranspose1d(x, w.Transpose(0, 1), graph.ConvOptions{Groups: 2})
			}, candleC1T2, []int{1, 4, 7}, 4},
		}},
		{"conv1d_small", []float64{0.4056, -0.8689, -0.0773, -1.5630}, []float64{1, 0, 0}, []int{1, 1, 4}, []int{1, 1, 3}, []check{
			{"p0", func(x, w *graph.Tensor) *graph.Tensor { return graph.Conv1d(x, w) }, []float64{0.4056, -0.8689}, []int{1, 1, 2}, 4},
			{"p1", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.Conv1d(x, w, graph.ConvOptions{Padding: []int{1}})
			}, []float64{0, 0.4056, -0.8689, -0.0773}, []int{1, 1, 4}, 4},
		}},
		{"conv2d", candleC2X, candleC2W, []int{1, 4, 5, 5}, []int{2, 4, 3, 3}, []check{
			{"p0", func(x, w *graph.Tensor) *graph.Tensor { return graph.Conv2d(x, w) }, candleC2P0, []int{1, 2, 3, 3}, 4},
			{"batch", func(x, w *graph.Tensor) *graph.Tensor {
				z := x.Affine(0, 0)
				return graph.Conv2d(graph.Cat(0, z, x, z), w)
			}, slices.Concat(make([]float64, 18), candleC2P0, make([]float64, 18)), []int{3, 2, 3, 3}, 4},
			{"transposed", func(x, w *graph.Tensor) *graph.Tensor { return graph.ConvTranspose2d(x, w.Transpose(0, 1)) }, candleC2T, []int{1, 2, 7, 7}, 4},
			{"d2", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.Conv2d(x, w, graph.ConvOptions{Dilation: []int{2}})
			}, candleC2D2, []int{1, 2, 1, 1}, 4},
			{"transposed-d2", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.ConvTranspose2d(x, w.Transpose(0, 1), graph.ConvOptions{Dilation: []int{2}})
			}, candleC2TD2, []int{1, 2, 9, 9}, 4},
			// conv2d_grad: d(Σ conv²)/dx = conv_transpose2d(2·conv, w),
			// with the conv's stride.
			{"grad-x", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.ConvTranspose2d(graph.Conv2d(x, w).Affine(2, 0), w)
			}, candleGradX1, []int{1, 4, 5, 5}, 2},
			{"grad-x-s2", func(x, w *graph.Tensor) *graph.Tensor {
				o := graph.ConvOptions{Stride: []int{2}}
				return graph.ConvTranspose2d(graph.Conv2d(x, w, o).Affine(2, 0), w, o)
			}, candleGradX2, []int{1, 4, 5, 5}, 2},
			{"loss", func(x, w *graph.Tensor) *graph.Tensor { return graph.Conv2d(x, w).Sqr().Sum(0, 1, 2, 3) }, []float64{741.12}, []int{}, 2},
			{"loss-s2", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.Conv2d(x, w, graph.ConvOptions{Stride: []int{2}}).Sqr().Sum(0, 1, 2, 3)
			}, []float64{277.16}, []int{}, 2},
		}},
		{"conv2d_small", candleSX, candleSW, []int{1, 2, 3, 3}, []int{1, 2, 1, 1}, []check{
			{"p0", func(x, w *graph.Tensor) *graph.Tensor { return graph.Conv2d(x, w) }, candleSP0, []int{1, 1, 3, 3}, 4},
			{"p2", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{2}})
			}, candleSP2, []int{1, 1, 7, 7}, 4},
			{"transposed", func(x, w *graph.Tensor) *graph.Tensor { return graph.ConvTranspose2d(x, w.Transpose(0, 1)) }, candleST, []int{1, 1, 3, 3}, 4},
			{"transposed-x-t", func(x, w *graph.Tensor) *graph.Tensor { return graph.ConvTranspose2d(x.Transpose(0, 1), w) }, candleSTT, []int{2, 2, 3, 3}, 4},
		}},
		{"conv2d_smaller", candleSmX, slices.Repeat([]float64{1}, 9), []int{1, 1, 3, 3}, []int{1, 1, 3, 3}, []check{
			{"p0", func(x, w *graph.Tensor) *graph.Tensor { return graph.Conv2d(x, w) }, []float64{-0.6197}, []int{1, 1, 1, 1}, 4},
		}},
		{"conv2d_non_square", candleNsX, candleNsW, []int{1, 2, 4, 2}, []int{1, 2, 1, 1}, []check{
			{"p0", func(x, w *graph.Tensor) *graph.Tensor { return graph.Conv2d(x, w) }, candleNsP0, []int{1, 1, 4, 2}, 4},
		}},
		// conv_transpose2d's gradient tests: d(Σ y²)/dx for y =
		// conv_transpose2d(x, w, …) is conv2d(2·y, w, …) with the same
		// stride, padding and dilation.
		{"conv_transpose2d_grad", candleTgX, candleTgW, []int{1, 4, 7, 5}, []int{4, 2, 3, 5}, []check{
			{"p4-op2-s3-d3", func(x, w *graph.Tensor) *graph.Tensor {
				y := graph.ConvTranspose2d(x, w, graph.ConvOptions{Padding: []int{4}, OutputPadding: []int{2}, Stride: []int{3}, Dilation: []int{3}})
				return graph.Conv2d(y.Affine(2, 0), w, graph.ConvOptions{Padding: []int{4}, Stride: []int{3}, Dilation: []int{3}})
			}, candleTgGradX1, []int{1, 4, 7, 5}, 1},
			{"loss-p4-op2-s3-d3", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.ConvTranspose2d(x, w, graph.ConvOptions{Padding: []int{4}, OutputPadding: []int{2}, Stride: []int{3}, Dilation: []int{3}}).Sqr().Sum(0, 1, 2, 3)
			}, []float64{2904}, []int{}, 0},
			{"p1-op1-s2", func(x, w *graph.Tensor) *graph.Tensor {
				y := graph.ConvTranspose2d(x, w, graph.ConvOptions{Padding: []int{1}, OutputPadding: []int{1}, Stride: []int{2}})
				return graph.Conv2d(y.Affine(2, 0), w, graph.ConvOptions{Padding: []int{1}, Stride: []int{2}})
			}, candleTgGradX2, []int{1, 4, 7, 5}, 1},
			{"loss-p1-op1-s2", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.ConvTranspose2d(x, w, graph.ConvOptions{Padding: []int{1}, OutputPadding: []int{1}, Stride: []int{2}}).Sqr().Sum(0, 1, 2, 3)
			}, []float64{3627}, []int{}, 0},
		}},
		// conv2d_c_eq_h_eq_w (C = H = W, a regression in Candle's NHWC
		// path): with an all-ones kernel both output channels are equal,
		// and the top-left corner is 1.4310 (Candle's hand sum).
		{"conv2d_c_eq_h_eq_w", candleEqX, slices.Repeat([]float64{1}, 72), []int{1, 4, 4, 4}, []int{2, 4, 3, 3}, []check{
			{"corner", func(x, w *graph.Tensor) *graph.Tensor {
				return graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}}).Narrow(2, 0, 1).Narrow(3, 0, 1)
			}, []float64{1.4310, 1.4310}, []int{1, 2, 1, 1}, 3},
			{"channels-equal", func(x, w *graph.Tensor) *graph.Tensor {
				y := graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}})
				return y.Narrow(1, 0, 1).Sub(y.Narrow(1, 1, 1)).Abs().Max(false, 0, 1, 2, 3)
			}, []float64{0}, []int{}, 6},
		}},
	}
	for _, cc := range cases {
		for _, ck := range cc.checks {
			t.Run(cc.name+"/"+ck.name, func(t *testing.T) {
				g := graph.New()
				x, w := g.Input("x", dtype.F32, cc.xs...), g.Input("w", dtype.F32, cc.ws...)
				g.Output("y", ck.y(x, w))
				opts := s.opts
				opts.Check = true
				prog, err := g.Compile(opts)
				if err != nil {
					t.Fatal(err)
				}
				xt, err := toTensor(vals{dt: dtype.F32, shape: cc.xs, f: cc.x})
				if err != nil {
					t.Fatal(err)
				}
				wt, err := toTensor(vals{dt: dtype.F32, shape: cc.ws, f: cc.w})
				if err != nil {
					t.Fatal(err)
				}
				// Candle asserts values rounded to the decimals; an f32
				// computation in another order may round the other way at
				// a half: half a unit of the last decimal, plus f32 noise.
				tol := 0.5 * math.Pow(10, -float64(ck.decimals))
				inputs := map[string]*tensor.Tensor{"x": xt, "w": wt}
				for i, e := range s.execs {
					out, err := prog.Run(context.Background(), e, inputs)
					if err != nil {
						t.Fatalf("run on %s: %v", e.Name(), err)
					}
					got, err := fromTensor(out["y"])
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got.shape, ck.shape) {
						t.Fatalf("%s: shape %v, want %v", e.Name(), got.shape, ck.shape)
					}
					bad := 0
					for k, v := range ck.want {
						if d := math.Abs(got.f[k] - v); !(d <= tol+1e-6*max(1, math.Abs(v))) {
							if bad++; bad <= maxReported {
								t.Errorf("%s (poison 0x%02X): element %d: got %.6g, Candle's test wants %v (±%g)", e.Name(), Poisons[i], k, got.f[k], v, tol)
							}
						}
					}
				}
			})
		}
	}
}

// wideFloats are the float dtypes of the ops with no f8e4m3 form (matmul,
// conv, pools, bilinear upsampling, cumsum): f8e4m3 is a storage dtype.
var wideFloats = ir.WideFloatDTypes.List()

// scanDTypes are cumsum's dtypes (every dtype but f8e4m3).
var scanDTypes = ir.ScanDTypes.List()

package ir

import (
	"fmt"
	"math"
	"slices"

	"github.com/loomgraph/loom/dtype"
)

// Window ops: convolutions, pools and upsampling over channels-first
// tensors — NCL for one spatial dim, NCHW for two — with PyTorch's
// parameters and Candle's arithmetic (see shared/candle-kernels.md §10).
// Each op's parameters live in Node.Params as a fixed-length encoding of
// one of the structs below; Encode and the Node accessors convert. Spatial
// parameters are per axis: index 0 is L (1-D) or H (2-D), index 1 is W
// (2-D only; for 1-D ops it holds the neutral value and is ignored).
//
// Shapes are checked by OutShape (the builder and the verifier call the
// same function), so an error names the parameter that does not fit.

// PoolDTypes are the dtypes pools and nearest upsampling take: the floats
// and, as Candle has them, u8 and u32.
var PoolDTypes = SetOf(dtype.F32, dtype.F64, dtype.F16, dtype.BF16, dtype.U8, dtype.U32)

var (
	convParamNames     = []string{"rank", "stride0", "stride1", "pad0", "pad1", "dil0", "dil1", "out_pad0", "out_pad1", "groups"}
	poolParamNames     = []string{"rank", "kernel0", "kernel1", "stride0", "stride1", "pad0", "pad1", "ceil_mode", "count_include_pad"}
	upsampleParamNames = []string{"rank", "align_corners", "scale0", "scale1"}
)

func windowOp(name string, arity int, in DTypeSet, params []string) OpInfo {
	return OpInfo{Name: name, Arity: arity, Class: ClassWindow, In: in, Params: params}
}

// ConvParams are a convolution's parameters (OpConv, OpConvTranspose).
//
// Conv: x [N, Cin, in...] · w [Cout, Cin/Groups, k...] → [N, Cout, out...]
// with out = (in + 2·Padding − Dilation·(k − 1) − 1) / Stride + 1.
//
// ConvTranspose (the gradient of Conv with respect to its input, PyTorch's
// conv_transpose): x [N, Cin, in...] · w [Cin, Cout/Groups, k...] →
// [N, Cout, out...] with out = (in − 1)·Stride − 2·Padding +
// Dilation·(k − 1) + OutputPadding + 1, and OutputPadding smaller than
// Stride or Dilation (as PyTorch requires).
type ConvParams struct {
	Rank          int // spatial dims: 1 (NCL) or 2 (NCHW)
	Stride        [2]int
	Padding       [2]int // zeros on both sides of each spatial axis
	Dilation      [2]int
	OutputPadding [2]int // ConvTranspose only; 0 for Conv
	Groups        int
}

// Encode returns the params as Node.Params.
func (p ConvParams) Encode() []float64 {
	return f64s(p.Rank, p.Stride[0], p.Stride[1], p.Padding[0], p.Padding[1],
		p.Dilation[0], p.Dilation[1], p.OutputPadding[0], p.OutputPadding[1], p.Groups)
}

// Conv decodes a conv node's params.
func (n *Node) Conv() ConvParams {
	q := ints(n.Params, len(convParamNames))
	return ConvParams{Rank: q[0], Stride: [2]int{q[1], q[2]}, Padding: [2]int{q[3], q[4]},
		Dilation: [2]int{q[5], q[6]}, OutputPadding: [2]int{q[7], q[8]}, Groups: q[9]}
}

// OutShape returns the output shape of a convolution (transposed or not) of
// x by w, or an error naming what does not fit: the parameter, its value
// and the spatial axis (L for 1-D; H or W for 2-D). The checks are
// PyTorch's (aten's check_shape_forward and conv output sizes), plus a
// bound of MaxConvParam on every spatial parameter so that no size
// computation overflows.
func (p ConvParams) OutShape(x, w []int, transposed bool) ([]int, error) {
	r := p.Rank
	if r != 1 && r != 2 {
		return nil, fmt.Errorf("%d spatial dims: want 1 (NCL) or 2 (NCHW)", r)
	}
	if len(x) != r+2 {
		return nil, fmt.Errorf("input %v has rank %d, want %d (%s)", x, len(x), r+2, layoutName(r))
	}
	if len(w) != r+2 {
		return nil, fmt.Errorf("weight %v has rank %d, want %d", w, len(w), r+2)
	}
	if p.Groups < 1 || p.Groups > MaxConvParam {
		return nil, fmt.Errorf("groups %d: want between 1 and %d", p.Groups, MaxConvParam)
	}
	for a := 0; a < r; a++ {
		ax := p.axis(a)
		for _, v := range []struct {
			name string
			v    int
		}{{"stride", p.Stride[a]}, {"padding", p.Padding[a]}, {"dilation", p.Dilation[a]}, {"output_padding", p.OutputPadding[a]}} {
			if v.v > MaxConvParam {
				return nil, fmt.Errorf("%s %d on %s: too large (at most %d)", v.name, v.v, ax, MaxConvParam)
			}
		}
		switch {
		case p.Stride[a] < 1:
			return nil, fmt.Errorf("stride %d on %s: want ≥ 1", p.Stride[a], ax)
		case p.Dilation[a] < 1:
			return nil, fmt.Errorf("dilation %d on %s: want ≥ 1", p.Dilation[a], ax)
		case p.Padding[a] < 0:
			return nil, fmt.Errorf("padding %d on %s: want ≥ 0", p.Padding[a], ax)
		case p.OutputPadding[a] < 0:
			return nil, fmt.Errorf("output_padding %d on %s: want ≥ 0", p.OutputPadding[a], ax)
		case !transposed && p.OutputPadding[a] != 0:
			return nil, fmt.Errorf("output_padding %d on %s: only transposed convolutions have it", p.OutputPadding[a], ax)
		case transposed && p.OutputPadding[a] >= max(p.Stride[a], p.Dilation[a]):
			return nil, fmt.Errorf("output_padding %d on %s: must be smaller than the stride (%d) or the dilation (%d)",
				p.OutputPadding[a], ax, p.Stride[a], p.Dilation[a])
		}
	}
	n, cin := x[0], x[1]
	var cout int
	if !transposed {
		if cin%p.Groups != 0 {
			return nil, fmt.Errorf("input %v: %d channels are not divisible by groups %d", x, cin, p.Groups)
		}
		if w[0]%p.Groups != 0 {
			return nil, fmt.Errorf("weight %v: %d output channels are not divisible by groups %d", w, w[0], p.Groups)
		}
		if cin != w[1]*p.Groups {
			return nil, fmt.Errorf("input %v has %d channels, weight %v expects %d (weight dim 1 × groups %d)", x, cin, w, w[1]*p.Groups, p.Groups)
		}
		cout = w[0]
	} else {
		if cin%p.Groups != 0 {
			return nil, fmt.Errorf("input %v: %d channels are not divisible by groups %d", x, cin, p.Groups)
		}
		if cin != w[0] {
			return nil, fmt.Errorf("input %v has %d channels, weight %v expects %d (weight dim 0)", x, cin, w, w[0])
		}
		if w[1] > math.MaxInt/p.Groups {
			return nil, fmt.Errorf("weight %v: %d output channels per group × groups %d overflows", w, w[1], p.Groups)
		}
		cout = w[1] * p.Groups
	}
	out := []int{n, cout}
	for a := 0; a < r; a++ {
		in, k, ax := x[2+a], w[2+a], p.axis(a)
		if k < 1 {
			return nil, fmt.Errorf("weight %v has an empty kernel on %s", w, ax)
		}
		if k > MaxConvParam || in > math.MaxInt/4 {
			return nil, fmt.Errorf("input %v or weight %v too large on %s", x, w, ax)
		}
		if in < 1 {
			// PyTorch's rule: only the batch and channel dims may be empty.
			return nil, fmt.Errorf("input %v is empty on %s", x, ax)
		}
		span := p.Dilation[a]*(k-1) + 1 // the dilated kernel's extent (< 2^62)
		var o int
		if !transposed {
			padded := in + 2*p.Padding[a]
			if span > padded {
				return nil, fmt.Errorf("kernel %d (dilated to %d) on %s is larger than the padded input (%d + 2·%d = %d)",
					k, span, ax, in, p.Padding[a], padded)
			}
			o = (padded-span)/p.Stride[a] + 1
		} else {
			if in-1 > (math.MaxInt/4)/p.Stride[a] {
				return nil, fmt.Errorf("output size on %s overflows: (in %d − 1)·stride %d", ax, in, p.Stride[a])
			}
			o = (in-1)*p.Stride[a] - 2*p.Padding[a] + span + p.OutputPadding[a]
			if o < 1 {
				return nil, fmt.Errorf("output size %d on %s ≤ 0: (in %d − 1)·stride %d − 2·padding %d + dilated kernel %d + output_padding %d",
					o, ax, in, p.Stride[a], p.Padding[a], span, p.OutputPadding[a])
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// MaxConvParam bounds every stride, padding, dilation, output padding,
// kernel extent and group count (2^31 − 1, the largest 32-bit int, which is
// what the vendor libraries take): sizes computed from them then stay far
// from overflow.
const MaxConvParam = 1<<31 - 1

// axis names spatial axis a for messages: "axis L" for 1-D, "axis H" or
// "axis W" for 2-D.
func (p ConvParams) axis(a int) string {
	if p.Rank == 1 {
		return "axis L"
	}
	return "axis " + string("HW"[a])
}

// PoolParams are a pool's parameters (OpMaxPool, OpAvgPool) over NCHW
// (Rank 2), PyTorch's max_pool2d / avg_pool2d without dilation. Output
// sizes follow PyTorch's pooling_output_shape:
// out = ⌊(in + 2·Padding − Kernel) / Stride⌋ + 1, or the ceiling with
// CeilMode, where a last window that would start inside the right padding
// is dropped (so every window holds at least one input element). Padding is
// at most half the kernel (2·Padding ≤ Kernel, PyTorch's pad ≤ k/2) and
// every spatial size is ≥ 1 (N and C may be 0).
//
// Output (oh, ow) reads the window of rows [oh·Stride[0] − Padding[0],
// + Kernel[0]) and columns likewise, clipped to the input:
//   - max: the largest element of the window (padding is −∞, so it is
//     never the max) by IEEE 754-2019 maximum: a NaN makes the result NaN
//     (the canonical NaN), as in PyTorch's kernels (Candle's f32/f64
//     kernels skip NaN), and +0 counts as larger than −0, so the result
//     does not depend on the order the window is read in (PyTorch keeps
//     the first of equal elements: for zeros of both signs, the first
//     one's sign).
//   - avg: the sum of the window's input elements in row-major order,
//     divided by the divisor: with CountIncludePad (PyTorch's default) the
//     window's size clipped to the padded input [−Padding, in + Padding),
//     else the number of input elements in the window. Floats sum in their
//     compute type (f16/bf16 in float32, rounded once; f32 in float32; f64
//     in float64) and divide (PyTorch divides; Candle multiplies by the
//     reciprocal of the full window). u8/u32 sum exactly (64-bit) and divide
//     with truncation, as PyTorch's integer avg_pool2d: Candle's CUDA kernel
//     accumulates in the element type (wrapping) and its CPU kernel
//     multiplies by a reciprocal converted to the element type (0 for any
//     window of more than one element), so neither is followed.
//
// Without padding and ceil mode these are Candle's avg_pool2d (up to the
// division) and max_pool2d.
type PoolParams struct {
	Rank            int
	Kernel          [2]int
	Stride          [2]int
	Padding         [2]int
	CeilMode        bool
	CountIncludePad bool
}

// Encode returns the params as Node.Params.
func (p PoolParams) Encode() []float64 {
	return f64s(p.Rank, p.Kernel[0], p.Kernel[1], p.Stride[0], p.Stride[1], p.Padding[0], p.Padding[1],
		b2i(p.CeilMode), b2i(p.CountIncludePad))
}

// Pool decodes a pool node's params.
func (n *Node) Pool() PoolParams {
	q := ints(n.Params, len(poolParamNames))
	return PoolParams{Rank: q[0], Kernel: [2]int{q[1], q[2]}, Stride: [2]int{q[3], q[4]},
		Padding: [2]int{q[5], q[6]}, CeilMode: q[7] != 0, CountIncludePad: q[8] != 0}
}

// OutShape returns a pool's output shape for input x, or an error naming
// the parameter that does not fit.
func (p PoolParams) OutShape(x []int) ([]int, error) {
	r := p.Rank
	if r != 2 {
		return nil, fmt.Errorf("%d spatial dims: pools take 2 (NCHW)", r)
	}
	if len(x) != r+2 {
		return nil, fmt.Errorf("input %v has rank %d, want %d (%s)", x, len(x), r+2, layoutName(r))
	}
	out := []int{x[0], x[1]}
	for a := 0; a < r; a++ {
		in, k, s, pad := x[2+a], p.Kernel[a], p.Stride[a], p.Padding[a]
		ax := axisName(r, a)
		switch {
		case k < 1:
			return nil, fmt.Errorf("kernel %d on %s: want ≥ 1", k, ax)
		case s < 1:
			return nil, fmt.Errorf("stride %d on %s: want ≥ 1", s, ax)
		case pad < 0 || 2*pad > k:
			return nil, fmt.Errorf("padding %d on %s: want between 0 and half the kernel (kernel %d)", pad, ax, k)
		case in < 1:
			return nil, fmt.Errorf("input %v is empty on %s", x, ax)
		case k > in+2*pad:
			return nil, fmt.Errorf("kernel %d on %s is larger than the padded input (%d + 2·%d = %d)", k, ax, in, pad, in+2*pad)
		}
		num := in + 2*pad - k
		o := num/s + 1
		if p.CeilMode {
			o = (num+s-1)/s + 1
			if (o-1)*s >= in+pad { // the last window starts in the right padding
				o--
			}
		}
		out = append(out, o)
	}
	return out, nil
}

// UpsampleParams are an upsampling's parameters (OpUpsampleNearest over NCL
// or NCHW, OpUpsampleBilinear over NCHW); the output sizes are the node's
// shape. Scale[a], where > 0, is the user's scale factor for spatial axis a
// (the output size is then ⌊in·Scale⌋, as torch.nn.functional.interpolate
// computes it) and sets the source coordinate; 0 means none was given (the
// output size was). For Rank 1, Scale[1] is 0.
//
// Nearest (PyTorch's "nearest", Candle's upsample_nearest1d/2d): output
// index d reads input index min(⌊d·in/out⌋, in − 1) without a scale — exact
// integer arithmetic (Candle computes d·(in/out) in float64, PyTorch in
// float32; at exact multiples their rounding can land one below) — or
// min(⌊d / Scale⌋, in − 1) with one, in float64 (PyTorch's CUDA kernel
// multiplies by the float32 reciprocal; its CPU kernel also maps out = in
// to the identity and out = 2·in to d/2 whatever the scale).
//
// Bilinear (PyTorch's upsample_bilinear2d, Candle's with its arithmetic):
// per axis, in float64, scale = (in − 1)/(out − 1) (0 when out = 1) with
// AlignCorners, else 1/Scale when a scale was given, else in/out; the source
// coordinate is src = scale·d with AlignCorners, else
// max(0, scale·(d + 0.5) − 0.5); i0 = ⌊src⌋, i1 = min(i0 + 1, in − 1),
// λ = src − i0 (in [0, 1): src < in always). The value is (v00·(1 − λw) + v01·λw)·(1 − λh) +
// (v10·(1 − λw) + v11·λw)·λh in float64, each product and sum rounded (no
// fused multiply-add), then rounded once to the dtype. An output of the
// input's size on both axes is a copy of the input, whatever the scale (as
// Candle and PyTorch's CUDA kernel special-case it).
//
// AlignCorners is for bilinear only. Values move unchanged except that an
// f16/bf16 NaN becomes the canonical NaN, as in every Loom copy.
type UpsampleParams struct {
	Rank         int
	AlignCorners bool
	Scale        [2]float64
}

// Encode returns the params as Node.Params.
func (p UpsampleParams) Encode() []float64 {
	return []float64{float64(p.Rank), float64(b2i(p.AlignCorners)), p.Scale[0], p.Scale[1]}
}

// Upsample decodes an upsampling node's params.
func (n *Node) Upsample() UpsampleParams {
	var q [4]float64
	copy(q[:], n.Params)
	return UpsampleParams{Rank: int(q[0]), AlignCorners: q[1] != 0, Scale: [2]float64{q[2], q[3]}}
}

// OutShape checks an upsampling of x to the spatial sizes size (for Rank 1,
// size[1] is ignored) and returns the output shape. When Scale[a] > 0 the
// size of axis a must be ⌊in·Scale[a]⌋ (SizeFromScale).
func (p UpsampleParams) OutShape(op Op, x []int, size [2]int) ([]int, error) {
	r := p.Rank
	switch {
	case r != 1 && r != 2:
		return nil, fmt.Errorf("%d spatial dims: want 1 (NCL) or 2 (NCHW)", r)
	case op == OpUpsampleBilinear && r != 2:
		return nil, fmt.Errorf("%d spatial dims: bilinear upsampling takes 2 (NCHW)", r)
	case op != OpUpsampleBilinear && p.AlignCorners:
		return nil, fmt.Errorf("align_corners applies to bilinear upsampling only")
	case len(x) != r+2:
		return nil, fmt.Errorf("input %v has rank %d, want %d (%s)", x, len(x), r+2, layoutName(r))
	case r == 1 && p.Scale[1] != 0:
		return nil, fmt.Errorf("scale %v on a second spatial axis of a 1-D upsampling", p.Scale[1])
	}
	out := []int{x[0], x[1]}
	for a := 0; a < r; a++ {
		in, sc, o := x[2+a], p.Scale[a], size[a]
		ax := axisName(r, a)
		switch {
		case in < 1:
			return nil, fmt.Errorf("input %v is empty on %s", x, ax)
		case sc < 0 || math.IsNaN(sc) || math.IsInf(sc, 0):
			return nil, fmt.Errorf("scale factor %v on %s: want a finite number > 0", sc, ax)
		case sc > 0 && o != SizeFromScale(in, sc):
			return nil, fmt.Errorf("output size %d on %s does not follow from scale factor %v (⌊%d·%v⌋ = %d)", o, ax, sc, in, sc, SizeFromScale(in, sc))
		case o < 1:
			return nil, fmt.Errorf("output size %d on %s: want ≥ 1", o, ax)
		}
		out = append(out, o)
	}
	return out, nil
}

// SizeFromScale is the output size of an axis of size in upsampled by scale
// factor scale: ⌊in·scale⌋ in float64, as PyTorch computes it (saturating
// at the largest int for huge products).
func SizeFromScale(in int, scale float64) int {
	f := math.Floor(float64(in) * scale)
	if f >= math.MaxInt64 || f != f {
		return math.MaxInt
	}
	return int(f)
}

// axisName names spatial axis a of a rank-r window op: L, or H and W.
func axisName(r, a int) string {
	if r == 1 {
		return "L"
	}
	return [...]string{"H", "W"}[a]
}

func layoutName(rank int) string {
	if rank == 1 {
		return "N, C, L"
	}
	return "N, C, H, W"
}

// verifyWindow checks a window node against its args and params.
func verifyWindow(n *Node, info *OpInfo, bad func(*Node, string, ...any)) {
	if len(n.Args) != info.Arity {
		bad(n, "has %d args, want %d", len(n.Args), info.Arity)
		return
	}
	if len(n.Params) != len(info.Params) {
		bad(n, "has %d params, want %d", len(n.Params), len(info.Params))
		return
	}
	for _, a := range n.Args {
		if a.DType != n.DType {
			bad(n, "arg %v has dtype %v, want %v", a, a.DType, n.DType)
			return
		}
	}
	if !info.In.Has(n.DType) {
		bad(n, "dtype %v not in {%v}", n.DType, info.In)
		return
	}
	var want []int
	var err error
	switch n.Op {
	case OpConv, OpConvTranspose:
		want, err = n.Conv().OutShape(n.Args[0].Shape, n.Args[1].Shape, n.Op == OpConvTranspose)
	case OpMaxPool, OpAvgPool:
		want, err = n.Pool().OutShape(n.Args[0].Shape)
	case OpUpsampleNearest, OpUpsampleBilinear:
		p, x := n.Upsample(), n.Args[0].Shape
		if (p.Rank != 1 && p.Rank != 2) || len(n.Shape) != p.Rank+2 {
			bad(n, "upsampling rank %d of %v to %v", p.Rank, x, n.Shape)
			return
		}
		var size [2]int
		copy(size[:], n.Shape[2:])
		want, err = p.OutShape(n.Op, x, size)
	}
	if err != nil {
		bad(n, "%v", err)
		return
	}
	if !slices.Equal(want, n.Shape) {
		bad(n, "shape %v, want %v", n.Shape, want)
	}
}

func f64s(xs ...int) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

func ints(ps []float64, n int) []int {
	out := make([]int, n)
	for i := 0; i < n && i < len(ps); i++ {
		out[i] = int(ps[i])
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

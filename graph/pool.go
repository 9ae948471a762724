package graph

import (
	"fmt"
	"math"

	"github.com/loomgraph/loom/ir"
)

// Pools and upsampling over channels-first tensors: x [N, C, H, W] (NCHW)
// for the 2-D ops, x [N, C, L] (NCL) for UpsampleNearest1d. Each is one
// window step (ir.ClassWindow; the exact arithmetic is documented on
// ir.PoolParams and ir.UpsampleParams): it reads its input as a packed
// array, so a transposed or narrowed input is copied first (the compile
// log's matmul-operands entry says so), and it is a barrier to fusion — an
// elementwise chain before or after it is its own fused kernel. Parameters
// are PyTorch's (torch.nn.functional.max_pool2d, avg_pool2d, interpolate);
// without padding and ceil mode the pools are Candle's.
//
// Every parameter is checked when the op is recorded: a bad one returns a
// tensor carrying an error that names the op called, the input's dtype and
// shape, and the parameter, e.g. `loom: max_pool2d: f32[1 3 4 4]: kernel 5
// on H is larger than the padded input (4 + 2·0 = 4)`.

// PoolOption sets an optional parameter of MaxPool2d and AvgPool2d.
type PoolOption func(*poolConfig)

type poolConfig struct {
	stride, padding []int // nil: the default
	ceil            bool
	excludePad      bool // AvgPool2d: count_include_pad=False
	includePadSet   bool // CountIncludePad was given (an error for MaxPool2d)
}

// PoolStride sets the stride: one value for both axes or two (H, W). The
// default is the kernel size, as in PyTorch.
func PoolStride(s ...int) PoolOption {
	return func(c *poolConfig) { c.stride = append([]int(nil), s...) }
}

// PoolPadding pads both sides of each axis: one value for both axes or two
// (H, W); at most half the kernel. Default 0. MaxPool2d pads with −∞,
// AvgPool2d with zeros (see CountIncludePad).
func PoolPadding(p ...int) PoolOption {
	return func(c *poolConfig) { c.padding = append([]int(nil), p...) }
}

// CeilMode rounds the output size up instead of down (PyTorch's ceil_mode),
// keeping a last window that starts inside the input or the left padding.
func CeilMode(on bool) PoolOption { return func(c *poolConfig) { c.ceil = on } }

// CountIncludePad says whether AvgPool2d's divisor counts the padding inside
// a window (true, PyTorch's default) or only the input elements (false).
// Given to MaxPool2d it is an error.
func CountIncludePad(on bool) PoolOption {
	return func(c *poolConfig) { c.excludePad, c.includePadSet = !on, true }
}

// MaxPool2d is the largest element of each kh×kw window of t [N, C, H, W]
// (PyTorch's max_pool2d without dilation or indices; Candle's max_pool2d
// when there is no padding or ceil mode). Options: PoolStride (default the
// kernel), PoolPadding (−∞ padding), CeilMode. A NaN in a window is the
// result (PyTorch's rule; Candle's f32/f64 kernels skip NaN), and +0
// counts as larger than −0 (IEEE 754-2019 maximum; PyTorch keeps the
// first of equal elements). Dtypes f32, f64, f16, bf16, u8, u32; NaN
// results are the canonical NaN.
func (t *Tensor) MaxPool2d(kh, kw int, opts ...PoolOption) *Tensor {
	return t.pool2d(ir.OpMaxPool, "max_pool2d", kh, kw, opts)
}

// AvgPool2d is the mean of each kh×kw window of t [N, C, H, W] (PyTorch's
// avg_pool2d without divisor_override). Options: PoolStride (default the
// kernel), PoolPadding (zeros), CeilMode, CountIncludePad (default true).
// Floats sum in float32 (f16, bf16, f32) or float64 and divide once;
// u8/u32 sum exactly and divide with truncation. Candle's avg_pool2d
// multiplies by the reciprocal of the window size instead (within an ulp;
// for u8/u32 its results differ: see ir.PoolParams).
func (t *Tensor) AvgPool2d(kh, kw int, opts ...PoolOption) *Tensor {
	return t.pool2d(ir.OpAvgPool, "avg_pool2d", kh, kw, opts)
}

func (t *Tensor) pool2d(op ir.Op, name string, kh, kw int, opts []PoolOption) *Tensor {
	if r, ok := t.ready(name); !ok {
		return r
	}
	in := fmt.Sprintf("%v%v", t.n.DType, t.n.Shape)
	var c poolConfig
	for _, o := range opts {
		if o == nil {
			return t.g.fail(opErr(name, "%s: nil option", in))
		}
		o(&c)
	}
	if c.includePadSet && op == ir.OpMaxPool {
		return t.g.fail(opErr(name, "%s: count_include_pad applies to avg_pool2d only", in))
	}
	// CountIncludePad means nothing to a max pool: left false there, so
	// that equal max pools have equal params.
	p := ir.PoolParams{Rank: 2, Kernel: [2]int{kh, kw}, Stride: [2]int{kh, kw}, CeilMode: c.ceil, CountIncludePad: op == ir.OpAvgPool && !c.excludePad}
	if c.stride != nil {
		s, err := pair("stride", c.stride)
		if err != nil {
			return t.g.fail(opErr(name, "%s: %v", in, err))
		}
		p.Stride = s
	}
	if c.padding != nil {
		s, err := pair("padding", c.padding)
		if err != nil {
			return t.g.fail(opErr(name, "%s: %v", in, err))
		}
		p.Padding = s
	}
	if !ir.PoolDTypes.Has(t.n.DType) {
		return t.g.fail(opErr(name, "%s: dtype %v not supported (supports %v)", in, t.n.DType, ir.PoolDTypes))
	}
	shape, err := p.OutShape(t.n.Shape)
	if err != nil {
		return t.g.fail(opErr(name, "%s: %v", in, err))
	}
	return t.g.intern(op, t.n.DType, shape, []*ir.Node{t.n}, p.Encode(), nil, "")
}

// pair expands one value (both axes) or two (H, W).
func pair(what string, v []int) ([2]int, error) {
	switch len(v) {
	case 1:
		return [2]int{v[0], v[0]}, nil
	case 2:
		return [2]int{v[0], v[1]}, nil
	}
	return [2]int{}, fmt.Errorf("%s %v: want one value (both axes) or two (H, W)", what, v)
}

// UpsampleNearest1d resizes t [N, C, L] to [N, C, size] by nearest
// neighbour: output index d reads input index ⌊d·L/size⌋ (exactly, in
// integers; Candle and PyTorch compute the same product in floating point
// and can land one below at exact multiples). Dtypes f32, f64, f16, bf16,
// u8, u32.
func (t *Tensor) UpsampleNearest1d(size int) *Tensor {
	return t.upsample(ir.OpUpsampleNearest, "upsample_nearest1d", ir.UpsampleParams{Rank: 1}, [2]int{size})
}

// UpsampleNearest1dScale resizes t [N, C, L] by a scale factor (PyTorch's
// interpolate with scale_factor): the output has ⌊L·scale⌋ elements and
// output index d reads input index min(⌊d/scale⌋, L − 1), in float64.
func (t *Tensor) UpsampleNearest1dScale(scale float64) *Tensor {
	p := ir.UpsampleParams{Rank: 1, Scale: [2]float64{scale}}
	return t.upsampleScale(ir.OpUpsampleNearest, "upsample_nearest1d", p)
}

// UpsampleNearest2d resizes t [N, C, H, W] to [N, C, h, w] by nearest
// neighbour, each axis as in UpsampleNearest1d (Candle's
// upsample_nearest2d).
func (t *Tensor) UpsampleNearest2d(h, w int) *Tensor {
	return t.upsample(ir.OpUpsampleNearest, "upsample_nearest2d", ir.UpsampleParams{Rank: 2}, [2]int{h, w})
}

// UpsampleNearest2dScale resizes t [N, C, H, W] by scale factors (sh, sw),
// each axis as in UpsampleNearest1dScale.
func (t *Tensor) UpsampleNearest2dScale(sh, sw float64) *Tensor {
	p := ir.UpsampleParams{Rank: 2, Scale: [2]float64{sh, sw}}
	return t.upsampleScale(ir.OpUpsampleNearest, "upsample_nearest2d", p)
}

// UpsampleBilinear2d resizes t [N, C, H, W] to [N, C, h, w] by bilinear
// interpolation (PyTorch's interpolate(mode="bilinear", antialias=False),
// Candle's upsample_bilinear2d), computed in float64 and rounded once; see
// ir.UpsampleParams for the source coordinates with and without
// alignCorners. An output of t's own size is a copy of t. Float dtypes only.
func (t *Tensor) UpsampleBilinear2d(h, w int, alignCorners bool) *Tensor {
	p := ir.UpsampleParams{Rank: 2, AlignCorners: alignCorners}
	return t.upsample(ir.OpUpsampleBilinear, "upsample_bilinear2d", p, [2]int{h, w})
}

// UpsampleBilinear2dScale resizes t [N, C, H, W] by scale factors (sh, sw):
// the output is [N, C, ⌊H·sh⌋, ⌊W·sw⌋] and, without alignCorners, the
// source coordinates use 1/scale rather than in/out (PyTorch's rule when
// scale factors are given; Candle's upsample_bilinear2d_with_scale).
func (t *Tensor) UpsampleBilinear2dScale(sh, sw float64, alignCorners bool) *Tensor {
	p := ir.UpsampleParams{Rank: 2, AlignCorners: alignCorners, Scale: [2]float64{sh, sw}}
	return t.upsampleScale(ir.OpUpsampleBilinear, "upsample_bilinear2d", p)
}

// upsampleScale computes the output sizes from p's scale factors.
func (t *Tensor) upsampleScale(op ir.Op, name string, p ir.UpsampleParams) *Tensor {
	if r, ok := t.ready(name); !ok {
		return r
	}
	var size [2]int
	for a := range p.Rank {
		sc := p.Scale[a]
		if !(sc > 0) || math.IsInf(sc, 0) {
			return t.g.fail(opErr(name, "%v%v: scale factor %v: want a finite number > 0", t.n.DType, t.n.Shape, sc))
		}
		if len(t.n.Shape) == p.Rank+2 {
			size[a] = ir.SizeFromScale(t.n.Shape[2+a], sc)
		}
	}
	return t.upsample(op, name, p, size)
}

func (t *Tensor) upsample(op ir.Op, name string, p ir.UpsampleParams, size [2]int) *Tensor {
	if r, ok := t.ready(name); !ok {
		return r
	}
	in := fmt.Sprintf("%v%v", t.n.DType, t.n.Shape)
	if info := op.Info(); !info.In.Has(t.n.DType) {
		return t.g.fail(opErr(name, "%s: dtype %v not supported (supports %v)", in, t.n.DType, info.In))
	}
	shape, err := p.OutShape(op, t.n.Shape, size)
	if err != nil {
		return t.g.fail(opErr(name, "%s: %v", in, err))
	}
	return t.g.intern(op, t.n.DType, shape, []*ir.Node{t.n}, p.Encode(), nil, "")
}

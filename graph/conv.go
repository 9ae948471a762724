package graph

import (
	"fmt"

	"github.com/loomgraph/loom/ir"
)

// Convolutions over channels-first tensors: NCL for the 1-D ops, NCHW for
// the 2-D ones, with PyTorch's parameters (torch.nn.functional.conv1d,
// conv2d, conv_transpose1d, conv_transpose2d) and Candle's arithmetic
// (cross-correlation, zero padding). Each is one step of the plan (a
// barrier to fusion, like a matmul), reading its operands as packed arrays:
// a view that is not one (a transpose, a narrowed channel range) is copied
// first, and the compile log says so. The elementwise ops after it — bias,
// activation, residual, cast — fuse into one kernel after the step.
//
// Dtypes f32, f64, f16 and bf16, one for both operands; f16 and bf16
// accumulate in float32 and round once on store, f64 accumulates in f64.
//
// Where Loom differs from PyTorch and Candle:
//   - No bias argument: add it, as conv(x, w).Add(b.Reshape(1, C, 1, 1)),
//     and the add fuses with whatever follows the convolution.
//   - Inputs have a batch dim: PyTorch's unbatched (C, H, W) input is
//     x.Unsqueeze(0) here.
//   - Padding is a count of zeros on both sides of each axis: PyTorch's
//     padding="same"/"valid" strings and non-zero padding modes are not
//     offered.
//   - Stride, padding, dilation and output padding are per axis, as in
//     PyTorch (Candle takes one value for both axes), and conv_transpose2d
//     has groups (Candle's has none).
//   - Empty channel dims are sums of nothing: no input channels give zeros
//     (PyTorch 1.13 returns a tensor with no channels), no output channels
//     an empty output (PyTorch refuses the weight). Empty spatial dims of
//     the input are errors, as in PyTorch.

// ConvOptions are a convolution's parameters. Each spatial parameter is a
// list: nil (or empty) for the default, one value for every spatial axis
// (as PyTorch's int), or one value per axis (L; or H then W). An explicit 0
// stride or dilation is an error, not the default.
type ConvOptions struct {
	Stride        []int // default 1
	Padding       []int // zeros on both sides of each axis; default 0
	Dilation      []int // spacing of kernel taps; default 1
	OutputPadding []int // transposed convolutions only: extra size on one side of each output axis; default 0
	Groups        int   // 0 means 1; channels split into this many independent convolutions
}

// Conv1d is PyTorch's conv1d: x [N, Cin, L] · w [Cout, Cin/Groups, K] →
// [N, Cout, Lout] with Lout = (L + 2·padding − dilation·(K − 1) − 1) /
// stride + 1. At most one ConvOptions.
func Conv1d(x, w *Tensor, opts ...ConvOptions) *Tensor {
	return conv("conv1d", ir.OpConv, 1, x, w, opts)
}

// Conv2d is PyTorch's conv2d: x [N, Cin, H, W] · w [Cout, Cin/Groups, KH,
// KW] → [N, Cout, Hout, Wout], each output size as Conv1d's. At most one
// ConvOptions.
func Conv2d(x, w *Tensor, opts ...ConvOptions) *Tensor {
	return conv("conv2d", ir.OpConv, 2, x, w, opts)
}

// ConvTranspose1d is PyTorch's conv_transpose1d, the gradient of Conv1d
// with respect to its input: x [N, Cin, L] · w [Cin, Cout/Groups, K] →
// [N, Cout, Lout] with Lout = (L − 1)·stride − 2·padding + dilation·(K − 1)
// + output_padding + 1; output_padding must be smaller than the stride or
// the dilation. At most one ConvOptions.
func ConvTranspose1d(x, w *Tensor, opts ...ConvOptions) *Tensor {
	return conv("conv_transpose1d", ir.OpConvTranspose, 1, x, w, opts)
}

// ConvTranspose2d is PyTorch's conv_transpose2d: x [N, Cin, H, W] · w [Cin,
// Cout/Groups, KH, KW] → [N, Cout, Hout, Wout], each output size as
// ConvTranspose1d's. At most one ConvOptions.
func ConvTranspose2d(x, w *Tensor, opts ...ConvOptions) *Tensor {
	return conv("conv_transpose2d", ir.OpConvTranspose, 2, x, w, opts)
}

// conv checks and records one convolution; op is the name the caller used.
func conv(op string, irOp ir.Op, rank int, x, w *Tensor, opts []ConvOptions) *Tensor {
	g, err := sameGraph(op, x, w)
	if err != nil {
		return failOr(g, err)
	}
	shapes := fmt.Sprintf("x %v%v, w %v%v", x.n.DType, x.n.Shape, w.n.DType, w.n.Shape)
	if x.n.DType != w.n.DType {
		return g.fail(opErr(op, "%s: dtype mismatch", shapes))
	}
	if in := irOp.Info().In; !in.Has(x.n.DType) {
		return g.fail(opErr(op, "%s: dtype %v not supported (supports %v)", shapes, x.n.DType, in))
	}
	if len(opts) > 1 {
		return g.fail(opErr(op, "%s: %d ConvOptions given, want at most one", shapes, len(opts)))
	}
	var o ConvOptions
	if len(opts) == 1 {
		o = opts[0]
	}
	p, err := o.params(rank)
	if err != nil {
		return g.fail(opErr(op, "%s: %v", shapes, err))
	}
	shape, err := p.OutShape(x.n.Shape, w.n.Shape, irOp == ir.OpConvTranspose)
	if err != nil {
		return g.fail(opErr(op, "%s, %s: %v", shapes, o.describe(p), err))
	}
	return g.intern(irOp, x.n.DType, shape, []*ir.Node{x.n, w.n}, p.Encode(), nil, "")
}

// params resolves the options for rank spatial axes. Values are checked by
// ConvParams.OutShape; only list lengths are checked here.
func (o ConvOptions) params(rank int) (ir.ConvParams, error) {
	p := ir.ConvParams{Rank: rank, Groups: o.Groups}
	if p.Groups == 0 {
		p.Groups = 1
	}
	for _, f := range []struct {
		name string
		vals []int
		def  int
		dst  *[2]int
	}{
		{"stride", o.Stride, 1, &p.Stride},
		{"padding", o.Padding, 0, &p.Padding},
		{"dilation", o.Dilation, 1, &p.Dilation},
		{"output_padding", o.OutputPadding, 0, &p.OutputPadding},
	} {
		// The unused second entry of a 1-D op holds the neutral value.
		*f.dst = [2]int{f.def, f.def}
		switch len(f.vals) {
		case 0:
		case 1:
			for a := range rank {
				f.dst[a] = f.vals[0]
			}
		case rank:
			copy(f.dst[:], f.vals)
		default:
			return p, fmt.Errorf("%s %v: want one value or %d (one per spatial axis)", f.name, f.vals, rank)
		}
	}
	return p, nil
}

// describe lists the resolved parameters for messages.
func (o ConvOptions) describe(p ir.ConvParams) string {
	r := p.Rank
	s := fmt.Sprintf("stride %v, padding %v, dilation %v", p.Stride[:r], p.Padding[:r], p.Dilation[:r])
	if o.OutputPadding != nil || p.OutputPadding != [2]int{} {
		s += fmt.Sprintf(", output_padding %v", p.OutputPadding[:r])
	}
	return s + fmt.Sprintf(", groups %d", p.Groups)
}

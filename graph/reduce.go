package graph

import (
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// reduce records a reduction of t over dims (negative dims count from the
// end). The IR reduces trailing axes only, so t is first viewed with the
// reduced dims moved last (a free permutation); the result, which keeps
// the reduced axes as size 1 at the end and is contiguous, is then viewed
// back in the caller's dim order — with size-1 dims where the reduced dims
// were (keepdim) or without them. Both views are reshapes of a contiguous
// buffer and cost nothing.
func (t *Tensor) reduce(op ir.Op, dims []int, keepdim bool) *Tensor {
	name := op.String()
	if r, ok := t.ready(name); !ok {
		return r
	}
	rank := t.Rank()
	red, err := t.reduceDims(name, dims)
	if err != nil {
		return t.g.fail(err)
	}
	if (op == ir.OpArgmax || op == ir.OpArgmin) && len(red) != 1 {
		return t.g.fail(opErr(name, "reduces exactly one dim, got %v for %v%v", dims, t.n.DType, t.n.Shape))
	}
	for _, d := range red {
		if t.n.Shape[d] == 0 && op != ir.OpSum {
			return t.g.fail(opErr(name, "dim %d of %v%v is empty: %s of no elements is undefined", d, t.n.DType, t.n.Shape, name))
		}
	}
	perm := make([]int, 0, rank)
	for d := range rank {
		if !slices.Contains(red, d) {
			perm = append(perm, d)
		}
	}
	perm = append(perm, red...)
	src := t.Permute(perm...)
	if src.err != nil {
		return src
	}
	shape := slices.Clone(src.n.Shape)
	for d := rank - len(red); d < rank; d++ {
		shape[d] = 1
	}
	out := t.g.intern(op, op.Info().OutDType(t.n.DType), shape, []*ir.Node{src.n}, []float64{float64(len(red))}, nil, "")
	final := make([]int, 0, rank)
	for d := range rank {
		switch {
		case !slices.Contains(red, d):
			final = append(final, t.n.Shape[d])
		case keepdim:
			final = append(final, 1)
		}
	}
	return out.Reshape(final...)
}

// reduceDims normalises the dims of a reduction named op: at least one, in
// range, none twice; sorted.
func (t *Tensor) reduceDims(op string, dims []int) ([]int, error) {
	if len(dims) == 0 {
		return nil, opErr(op, "no dims given for %v%v", t.n.DType, t.n.Shape)
	}
	var red []int
	for _, d := range dims {
		nd, err := t.normDim(op, d, t.Rank())
		if err != nil {
			return nil, err
		}
		if slices.Contains(red, nd) {
			return nil, opErr(op, "dim %d given twice for %v%v", d, t.n.DType, t.n.Shape)
		}
		red = append(red, nd)
	}
	slices.Sort(red)
	return red, nil
}

// composite checks what a composite named op needs before it builds its
// parts, so that bad input is reported under op and not under a part
// (max, sum, mul): t a float tensor, dims valid reduction dims, with
// nonEmpty each of them non-empty (softmax takes a max over it), and each
// weight a tensor of t's graph and dtype that broadcasts to t's shape.
func (t *Tensor) composite(op string, dims []int, nonEmpty bool, weights ...*Tensor) (*Tensor, bool) {
	if r, ok := t.floatOnly(op); !ok {
		return r, false
	}
	red, err := t.reduceDims(op, dims)
	if err != nil {
		return t.g.fail(err), false
	}
	for _, d := range red {
		if nonEmpty && t.n.Shape[d] == 0 {
			return t.g.fail(opErr(op, "dim %d of %v%v is empty", d, t.n.DType, t.n.Shape)), false
		}
	}
	for i, w := range weights {
		if _, err := sameGraph(op, t, w); err != nil {
			return t.g.fail(err), false
		}
		s, err := ir.BroadcastShapes(t.n.Shape, w.n.Shape)
		if w.n.DType != t.n.DType || err != nil || !slices.Equal(s, t.n.Shape) {
			return t.g.fail(opErr(op, "weight %d is %v%v: want %v broadcasting to x %v%v", i, w.n.DType, w.n.Shape, t.n.DType, t.n.DType, t.n.Shape)), false
		}
	}
	return nil, true
}

// Sum adds over dims, dropping them.
func (t *Tensor) Sum(dims ...int) *Tensor { return t.reduce(ir.OpSum, dims, false) }

// SumKeepDim adds over dims, keeping them with size 1.
func (t *Tensor) SumKeepDim(dims ...int) *Tensor { return t.reduce(ir.OpSum, dims, true) }

// Max is the largest element over dims (NaN if any is NaN).
func (t *Tensor) Max(keepdim bool, dims ...int) *Tensor { return t.reduce(ir.OpMax, dims, keepdim) }

// Min is the smallest element over dims (NaN if any is NaN).
func (t *Tensor) Min(keepdim bool, dims ...int) *Tensor { return t.reduce(ir.OpMin, dims, keepdim) }

// Argmax is the u32 index of the largest element along dim: the first one
// on ties, the first NaN if there is one.
func (t *Tensor) Argmax(dim int, keepdim bool) *Tensor {
	return t.reduce(ir.OpArgmax, []int{dim}, keepdim)
}

// Argmin is the u32 index of the smallest element along dim: the first one
// on ties, the first NaN if there is one.
func (t *Tensor) Argmin(dim int, keepdim bool) *Tensor {
	return t.reduce(ir.OpArgmin, []int{dim}, keepdim)
}

// count returns the number of elements reduced over dims (validated later
// by reduce).
func (t *Tensor) count(dims []int) int {
	n := 1
	for _, d := range dims {
		if d < 0 {
			d += t.Rank()
		}
		if d >= 0 && d < t.Rank() {
			n *= t.n.Shape[d]
		}
	}
	return n
}

// floatOnly fails for non-float tensors.
func (t *Tensor) floatOnly(op string) (*Tensor, bool) {
	if r, ok := t.ready(op); !ok {
		return r, false
	}
	if !t.n.DType.IsFloat() {
		return t.g.fail(opErr(op, "needs a float dtype, got %v%v", t.n.DType, t.n.Shape)), false
	}
	return nil, true
}

// inFloat32 runs a composite on f16/bf16/f8e4m3 tensors in float32 and
// rounds the result back once, like Candle's kernels, which accumulate half
// inputs in float: a sum of many halves overflows 65504 or loses most of
// its bits if every partial result is rounded to half (f8e4m3, with 3
// mantissa bits and a maximum of 448, far sooner). The casts fuse into the
// composite's kernel, so this costs no memory traffic.
func (t *Tensor) inFloat32(f func(*Tensor) *Tensor, others ...*Tensor) *Tensor {
	dt := t.n.DType
	if !dt.IsReduced() {
		return f(t)
	}
	for i, o := range others {
		if o != nil && o.err == nil && o.n != nil && o.n.DType == dt {
			// Broadcast before casting, so that the cast reads the weight
			// through a view and fuses into the row kernel (a cast of
			// the [C] weight itself would be read through a broadcast
			// and need its own kernel).
			if b := o.BroadcastTo(t.n.Shape...); b.err == nil {
				o = b
			}
			others[i] = o.Cast(dtype.F32)
		}
	}
	return f(t.Cast(dtype.F32)).Cast(dt)
}

// Mean is Sum(dims)·(1/n), a composite (floats only; f16/bf16 in float32).
func (t *Tensor) Mean(keepdim bool, dims ...int) *Tensor {
	if r, ok := t.composite("mean", dims, false); !ok {
		return r
	}
	return t.inFloat32(func(x *Tensor) *Tensor {
		return x.reduce(ir.OpSum, dims, keepdim).Affine(1/float64(x.count(dims)), 0)
	})
}

// Var is the unbiased (sample) variance over dims, Candle's var and
// var_keepdim: Σ(x − mean)² · (1/(n − 1)), with n the number of elements
// reduced, two-pass (the mean first, then the squares of the differences).
// Candle's var takes one dim; Loom's takes several, n being their product.
// One element gives NaN (0·∞, as in Candle and PyTorch), and so does an
// empty reduction (Loom's choice: Candle underflows n − 1). VarPopulation
// divides by n.
func (t *Tensor) Var(keepdim bool, dims ...int) *Tensor {
	if r, ok := t.composite("var", dims, false); !ok {
		return r
	}
	return t.inFloat32(func(x *Tensor) *Tensor {
		sq := x.Sub(x.Mean(true, dims...)).Sqr()
		// n ≤ 1 scales by +Inf: 0·∞ = NaN (a constant NaN is not an
		// affine parameter the builder takes).
		return sq.reduce(ir.OpSum, dims, keepdim).Affine(1/float64(max(x.count(dims)-1, 0)), 0)
	})
}

// VarPopulation is the population variance over dims, mean((x − mean)²),
// two-pass: the variance LayerNorm computes, and what Var computed before
// it matched Candle's (n − 1). An empty reduction gives NaN.
func (t *Tensor) VarPopulation(keepdim bool, dims ...int) *Tensor {
	if r, ok := t.composite("var_population", dims, false); !ok {
		return r
	}
	return t.inFloat32(func(x *Tensor) *Tensor {
		c := x.Sub(x.Mean(true, dims...))
		return c.Sqr().Mean(keepdim, dims...)
	})
}

// Softmax over dim, the numerically stable composite
// exp(x − max) · (1 / Σ exp(x − max)). Fusion turns it into one row kernel.
// Like Candle's softmax_last_dim kernel (inv = 1/Σ; dst *= inv), it divides
// once per row and multiplies per element: within an ulp of a division per
// element, and on the GPU a division per element made the row kernel
// compute-bound (an IEEE division is ~10 instructions; a [B·H·S, S] bf16
// attention softmax issued ~80 instructions an element).
func (t *Tensor) Softmax(dim int) *Tensor {
	if r, ok := t.composite("softmax", []int{dim}, true); !ok {
		return r
	}
	return t.inFloat32(func(x *Tensor) *Tensor {
		e := x.Sub(x.Max(true, dim)).Exp()
		return e.Mul(e.SumKeepDim(dim).Recip())
	})
}

// LogSoftmax over dim: (x − max) − log Σ exp(x − max).
func (t *Tensor) LogSoftmax(dim int) *Tensor {
	if r, ok := t.composite("log_softmax", []int{dim}, true); !ok {
		return r
	}
	return t.inFloat32(func(x *Tensor) *Tensor {
		c := x.Sub(x.Max(true, dim))
		return c.Sub(c.Exp().SumKeepDim(dim).Log())
	})
}

// LayerNorm normalises over the last dim: (x − mean)/√(var + eps)·w + b,
// with the two-pass variance (Candle's kernel uses E[x²] − mean², which
// cancels badly when |mean| ≫ std). w and b have the last dim's size.
func (t *Tensor) LayerNorm(w, b *Tensor, eps float64) *Tensor {
	if r, ok := t.composite("layer_norm", []int{-1}, false, w, b); !ok {
		return r
	}
	ws := []*Tensor{w, b}
	return t.inFloat32(func(x *Tensor) *Tensor {
		c := x.Sub(x.Mean(true, -1))
		inv := c.Sqr().Mean(true, -1).Add(Scalar(eps)).Sqrt().Recip()
		return c.Mul(inv).Mul(ws[0]).Add(ws[1])
	}, ws...)
}

// RmsNorm normalises over the last dim: x / √(mean(x²) + eps) · w.
func (t *Tensor) RmsNorm(w *Tensor, eps float64) *Tensor {
	if r, ok := t.composite("rms_norm", []int{-1}, false, w); !ok {
		return r
	}
	ws := []*Tensor{w}
	return t.inFloat32(func(x *Tensor) *Tensor {
		inv := x.Sqr().Mean(true, -1).Add(Scalar(eps)).Sqrt().Recip()
		return x.Mul(inv).Mul(ws[0])
	}, ws...)
}

package graph

import (
	"math"
	"slices"

	"github.com/loomgraph/loom/dtype"
)

// Math composites with Candle's semantics (candle-core's tensor.rs), built
// from elementwise ops, reductions and sorting, so every executor runs them
// with the kernels it has and fusion turns the elementwise and reduction
// parts into row kernels. f16 and bf16 inputs are computed in float32 and
// rounded once (inFloat32), where Candle computes in half.

// LogSumExp is log Σ exp(x) over dims, dropping them (Candle's
// log_sum_exp), computed stably: with m the maximum over dims,
// m + log Σ exp(x − m). Where m is ±∞ the shift is 0 instead, so a row of
// −∞ gives −∞ and a row holding +∞ gives +∞ (Candle's shift makes both
// NaN: −∞ − (−∞)); a NaN anywhere in a row gives NaN. With no dims it
// returns t, as Candle does. Floats only; an empty reduced dim is an error
// (its maximum is undefined).
func (t *Tensor) LogSumExp(dims ...int) *Tensor {
	const op = "log_sum_exp"
	if len(dims) == 0 {
		if r, ok := t.floatOnly(op); !ok {
			return r
		}
		return t
	}
	if r, ok := t.composite(op, dims, true); !ok {
		return r
	}
	red, _ := t.reduceDims(op, dims) // checked by composite
	var drop []int
	for d, n := range t.n.Shape {
		if !slices.Contains(red, d) {
			drop = append(drop, n)
		}
	}
	return t.inFloat32(func(x *Tensor) *Tensor {
		m := x.Max(true, dims...)
		m = Where(m.Abs().Eq(Scalar(math.Inf(1))), Scalar(0), m)
		s := x.Sub(m).Exp().Sum(dims...)
		return s.Log().Add(m.Reshape(drop...))
	})
}

// Norm is the Frobenius (L2) norm √Σx² over dims, dropping them, or over
// every dim when none are given (a 0-d result, Candle's norm). Floats only,
// as in Candle; f16/bf16 accumulate in float32. Like Candle and PyTorch it
// squares without rescaling, so elements beyond √max of the compute dtype
// (about 1.8e19 in float32) overflow to +Inf.
func (t *Tensor) Norm(dims ...int) *Tensor { return t.normP("norm", 2, dims) }

// NormP is the p-norm (Σ|x|^p)^(1/p) over dims, dropping them, or over every
// dim when none are given (PyTorch's vector_norm; Candle has only norm):
// p = 2 is Norm, p = 1 Σ|x|, p = +Inf max|x|, p = −Inf min|x| (both an
// error over an empty dim), p = 0 the number of non-zero elements (NaN
// counts), any other p the formula with powf. A NaN p is an error.
func (t *Tensor) NormP(p float64, dims ...int) *Tensor { return t.normP("norm_p", p, dims) }

func (t *Tensor) normP(op string, p float64, dims []int) *Tensor {
	if r, ok := t.floatOnly(op); !ok {
		return r
	}
	if p != p {
		return t.g.fail(opErr(op, "p is NaN, for %v%v", t.n.DType, t.n.Shape))
	}
	x := t
	if len(dims) == 0 {
		if x.Rank() == 0 {
			x = x.Reshape(1)
		}
		for d := range x.Rank() {
			dims = append(dims, d)
		}
	}
	if r, ok := x.composite(op, dims, math.IsInf(p, 0)); !ok {
		return r
	}
	return x.inFloat32(func(x *Tensor) *Tensor {
		a := x.Abs()
		switch {
		case p == 2:
			return x.Sqr().Sum(dims...).Sqrt()
		case p == 1:
			return a.Sum(dims...)
		case math.IsInf(p, 1):
			return a.Max(false, dims...)
		case math.IsInf(p, -1):
			return a.Min(false, dims...)
		case p == 0:
			return x.Ne(Scalar(0)).Cast(x.n.DType).Sum(dims...)
		}
		return a.Powf(p).Sum(dims...).Powf(1 / p)
	})
}

// Pow raises t to the power y elementwise, with broadcasting (Candle's pow
// and broadcast_pow; y may be a Scalar): exp(y · log t), Candle's formula,
// not a true power. So a negative base gives NaN even for an integer
// exponent, 0^0 is NaN (0 · −∞), 0^y is 0 for y > 0 and +Inf for y < 0, and
// the relative error grows with |y · log t| (about that many ulps). Floats
// only; f16/bf16 in float32 with one rounding (Candle rounds log and the
// product to half). Powf(e) is the true power for a constant exponent.
func (t *Tensor) Pow(y *Tensor) *Tensor {
	const op = "pow"
	nodes, g, err := operands(op, t, y)
	if err != nil {
		return failOr(g, err)
	}
	dt := nodes[0].DType
	if !dt.IsFloat() {
		return g.fail(opErr(op, "needs a float dtype, got %s", describe([]*Tensor{t, y}, nil)))
	}
	x, e := &Tensor{g: g, n: nodes[0]}, &Tensor{g: g, n: nodes[1]}
	half := narrowFloat(dt)
	if half {
		x, e = x.Cast(dtype.F32), e.Cast(dtype.F32)
	}
	out := e.Mul(x.Log()).Exp()
	if half {
		out = out.Cast(dt)
	}
	return out
}

// narrowFloat reports whether dt is a float narrower than float32, which
// the composites compute in float32 and round once (f16, bf16; a new
// narrow float dtype belongs here and in inFloat32).
func narrowFloat(dt dtype.DType) bool { return dt == dtype.F16 || dt == dtype.BF16 }

// roundToLimit bounds |decimals| for RoundTo: 10^±decimals must be normal
// numbers of the compute dtype (float64, or float32 for f32, f16 and bf16,
// which compute in float32): 1e±307 for float64, 1e±37 for float32.
func roundToLimit(dt dtype.DType) int {
	if dt == dtype.F64 {
		return 307
	}
	return 37
}

// RoundTo rounds to decimals decimal places with Candle's formula
// round(x · 10^d) · (1/10^d) (Candle's round_to): round is half away from
// zero, the products are rounded in the compute dtype (so the result is
// the nearest representable value only approximately, and a result of
// zero is +0, as in Candle), and a negative d rounds to tens, hundreds, ….
// x · 10^d overflows to ±Inf for large |x|, as in Candle. Floats only
// (f16/bf16 computed in float32 and rounded once); |d| beyond 307 for f64
// or 37 otherwise is an error (10^d or its inverse would not be a normal
// number).
func (t *Tensor) RoundTo(decimals int) *Tensor {
	const op = "round_to"
	if r, ok := t.floatOnly(op); !ok {
		return r
	}
	if lim := roundToLimit(t.n.DType); decimals < -lim || decimals > lim {
		return t.g.fail(opErr(op, "decimals %d out of range [%d, %d] for %v%v", decimals, -lim, lim, t.n.DType, t.n.Shape))
	}
	mult := math.Pow10(decimals)
	return t.inFloat32(func(x *Tensor) *Tensor {
		return x.Affine(mult, 0).Round().Affine(1/mult, 0)
	})
}

// Topk returns the k largest elements along dim and their u32 indices, in
// descending order (PyTorch's topk with largest=true; Candle has none). It
// is argsort(descending) + narrow + gather: ties keep the lower index
// first (the sort is stable), NaN counts as the largest value, and every
// dtype works. k must be in [0, size of dim]. The composite sorts every row
// in full and writes all its indices before keeping k: O(n log n) work and
// n indices of memory per row where a selection would need k; fine for
// moderate rows, wasteful for k ≪ n on long ones.
func (t *Tensor) Topk(k, dim int) (values, indices *Tensor) {
	const op = "topk"
	if r, ok := t.ready(op); !ok {
		return r, r
	}
	if t.Rank() == 0 {
		r := t.g.fail(opErr(op, "needs at least one dim, got %v%v", t.n.DType, t.n.Shape))
		return r, r
	}
	d, err := t.normDim(op, dim, t.Rank())
	if err != nil {
		r := t.g.fail(err)
		return r, r
	}
	if size := t.n.Shape[d]; k < 0 || k > size {
		r := t.g.fail(opErr(op, "k = %d out of range for dim %d of size %d of %v%v (want 0 ≤ k ≤ %d)", k, dim, size, t.n.DType, t.n.Shape, size))
		return r, r
	}
	last := t.Rank() - 1
	x := t
	if d != last {
		x = t.Transpose(d, last)
	}
	idx := x.Argsort(true).Narrow(last, 0, k)
	vals := x.Gather(idx, last)
	if d != last {
		vals, idx = vals.Transpose(d, last), idx.Transpose(d, last)
	}
	return vals, idx
}

package ir

import (
	"math"
	"slices"

	"github.com/loomgraph/loom/dtype"
)

// Attention (OpAttention) is causal scaled dot-product attention with a
// per-sequence offset, the attention of a decoder over its KV cache:
//
//	q [B, H, T, D], k [B, KV, S, D], v [B, KV, S, Dv], start u32 [B]
//	→ out [B, H, T, Dv], q's dtype
//
// H is a multiple of KV (grouped-query attention: query head h reads key
// and value head h / (H / KV)). Query t of sequence b sees the keys s ≤
// start[b] + t (and s < S): with start = 0 it is the causal attention of a
// prompt; with start = the number of positions already in a cache it is
// the attention of the next T positions over that cache (a decode step has
// T = 1, start = its position). Every query sees key 0, so no row is
// empty. With scale = Params[0] and the visible keys s:
//
//	out[b, h, t] = Σ_s p_s · v[b, h/G, s],
//	p_s = exp(x_s − m) / Σ_s' exp(x_s' − m),  x_s = scale · q[b, h, t] · k[b, h/G, s],
//	m = max_s x_s
//
// computed in float32 for f32, f16 and bf16 (float64 for f64) from the
// operands as stored, and rounded once to the output dtype: the scores and
// probabilities are not rounded to the dtype in between, as a matmul,
// softmax, matmul chain in f16/bf16 would round them. The order of the
// additions is not part of the definition (as for a matmul): results agree
// with the float64 value within the accumulation error of S + D terms. A
// NaN among a row's visible scores, or a largest score of ±Inf, makes the
// row's output NaN; a NaN or Inf in a visible value reaches the output.
// Masked keys and values are never read into a row.
//
// The op exists for speed: a decode step's attention as one step (two
// GPU launches over key blocks, in parallel over the cache), instead of a
// product, a masked softmax row kernel and a second product, with the
// scores and probabilities written out and read back in between.
//
// AttentionShape checks the operand shapes and dtypes of Attention and
// returns the output shape, or a description of what does not fit.
func AttentionShape(q, k, v, start []int, dt, kdt, vdt, sdt dtype.DType) ([]int, string) {
	switch {
	case !WideFloatDTypes.Has(dt):
		return nil, "dtype " + dt.String() + " not supported (supports " + WideFloatDTypes.String() + ")"
	case kdt != dt || vdt != dt:
		return nil, "q, k and v must share one dtype"
	case sdt != dtype.U32:
		return nil, "start must be u32, not " + sdt.String()
	case len(q) != 4 || len(k) != 4 || len(v) != 4:
		return nil, "q, k and v must be 4-D: [B, H, T, D], [B, KV, S, D], [B, KV, S, Dv]"
	case len(start) != 1 || start[0] != q[0]:
		return nil, "start must be 1-D with one position per sequence (B)"
	case k[0] != q[0] || v[0] != q[0]:
		return nil, "q, k and v must have the same batch B"
	case k[1] < 1 || k[1] != v[1] || q[1]%k[1] != 0:
		return nil, "k and v must have the same heads KV ≥ 1, and q's heads H a multiple of KV"
	case k[3] != q[3]:
		return nil, "q and k must have the same head dim D"
	case k[2] != v[2] || k[2] < 1:
		return nil, "k and v must have the same number of keys S ≥ 1"
	}
	return []int{q[0], q[1], q[2], v[3]}, ""
}

// verifyAttention checks an attention node: AttentionShape and a finite
// scale.
func verifyAttention(n *Node, bad func(*Node, string, ...any)) {
	a := n.Args
	shape, why := AttentionShape(a[0].Shape, a[1].Shape, a[2].Shape, a[3].Shape, a[0].DType, a[1].DType, a[2].DType, a[3].DType)
	if why != "" {
		bad(n, "%s (q %v%v, k %v%v, v %v%v, start %v%v)", why, a[0].DType, a[0].Shape, a[1].DType, a[1].Shape, a[2].DType, a[2].Shape, a[3].DType, a[3].Shape)
		return
	}
	if !slices.Equal(n.Shape, shape) || n.DType != a[0].DType {
		bad(n, "output %v%v, want %v%v", n.DType, n.Shape, a[0].DType, shape)
	}
	if s := n.Params[0]; math.IsNaN(s) || math.IsInf(s, 0) {
		bad(n, "scale %v is not finite", s)
	}
}

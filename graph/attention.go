package graph

import (
	"math"

	"github.com/loomgraph/loom/ir"
)

// CausalAttention is the causal scaled dot-product attention of a decoder
// over its KV cache (ir.AttentionShape states it exactly): q [B, H, T, D],
// k [B, KV, S, D], v [B, KV, S, Dv] and start u32 [B] give [B, H, T, Dv],
// where query t of sequence b attends to the keys s ≤ start[b] + t with
// weights softmax(scale · q·k), and query head h reads key/value head
// h / (H / KV) (grouped-query attention; H a multiple of KV). start = 0
// is a prompt's causal attention; start = the positions already cached is
// the next T positions' attention over the cache (a decode step: T = 1).
// It is PyTorch's scaled_dot_product_attention with is_causal=True and
// enable_gqa=True when start is 0 and S = T, and its decode-step form
// otherwise.
//
// f32, f16, bf16 and f64; f16 and bf16 compute in float32 and round the
// output once (the scores and probabilities are not rounded in between).
// It runs as its own step, one kernel pass over the keys in blocks on the
// GPU: a decode step's attention in two launches instead of a product, a
// softmax and a product. Keys a query does not see are never read into
// its output.
func CausalAttention(q, k, v, start *Tensor, scale float64) *Tensor {
	g, err := sameGraph("attention", q, k, v, start)
	if err != nil {
		return failOr(g, err)
	}
	if math.IsNaN(scale) || math.IsInf(scale, 0) {
		return g.fail(opErr("attention", "scale %v is not finite", scale))
	}
	shape, why := ir.AttentionShape(q.n.Shape, k.n.Shape, v.n.Shape, start.n.Shape, q.n.DType, k.n.DType, v.n.DType, start.n.DType)
	if why != "" {
		return g.fail(opErr("attention", "q %v%v, k %v%v, v %v%v, start %v%v: %s", q.n.DType, q.n.Shape, k.n.DType, k.n.Shape,
			v.n.DType, v.n.Shape, start.n.DType, start.n.Shape, why))
	}
	return g.intern(ir.OpAttention, q.n.DType, shape, []*ir.Node{q.n, k.n, v.n, start.n}, []float64{scale}, nil, "")
}

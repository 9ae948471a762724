package workloads

import (
	"fmt"
	"math"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// BlockSize shapes Block: T tokens, model width D, Heads attention heads
// (D/Heads wide), MLP hidden width Hidden.
type BlockSize struct{ T, D, Heads, Hidden int }

// DefaultBlock is the block `loom bench` prepares to time compiles: small
// tensors, the full set of kernels.
var DefaultBlock = BlockSize{T: 64, D: 128, Heads: 4, Hidden: 352}

// Block builds one pre-norm llama-style transformer block with the graph API
// as it must be written without a matrix product: every product is a
// broadcast multiply and a sum over the contracted dim. Its plan holds the
// kernels of a real model's block — rms norms, rope, scaled and masked
// softmax, the gated SiLU MLP, residual adds, head permutes — and serves
// `loom bench` as the many-kernel plan whose cold and warm preparation it
// times.
func Block(s BlockSize) (*graph.Graph, error) {
	if s.T < 1 || s.D < 1 || s.Heads < 1 || s.D%s.Heads != 0 || (s.D/s.Heads)%2 != 0 || s.Hidden < 1 {
		return nil, fmt.Errorf("workloads: block %+v: want positive sizes, D divisible by Heads into even head widths", s)
	}
	g := graph.New()
	T, D, H, hd := s.T, s.D, s.Heads, s.D/s.Heads
	x := g.Input("x", dtype.F32, T, D)
	w := func(name string, dims ...int) *graph.Tensor { return g.Input(name, dtype.F32, dims...) }
	// mm(a[M,K], b[K,N]) = Σ_k a[m,k]·b[k,n].
	mm := func(a, b *graph.Tensor) *graph.Tensor {
		return a.Unsqueeze(2).Mul(b.Unsqueeze(0)).Sum(1)
	}
	cos, sin := w("cos", T, hd/2), w("sin", T, hd/2)
	mask := w("mask", T, T) // 0 on and below the diagonal, -inf above

	h := x.RmsNorm(w("attn_norm", D), 1e-6)
	heads := func(t *graph.Tensor) *graph.Tensor { // [T, D] → [1, H, T, hd]
		return t.Reshape(T, H, hd).Permute(1, 0, 2).Unsqueeze(0)
	}
	q := heads(mm(h, w("wq", D, D))).Rope(cos, sin)
	k := heads(mm(h, w("wk", D, D))).Rope(cos, sin)
	v := heads(mm(h, w("wv", D, D)))
	// scores[h, i, j] = q[h, i]·k[h, j] / √hd + mask[i, j]
	scores := q.Unsqueeze(3).Mul(k.Unsqueeze(2)).Sum(4).Affine(1/math.Sqrt(float64(hd)), 0).Add(mask)
	p := scores.Softmax(3)
	// att[h, i] = Σ_j p[h, i, j]·v[h, j]
	att := p.Unsqueeze(4).Mul(v.Unsqueeze(2)).Sum(3) // [1, H, T, hd]
	att = att.Squeeze(0).Permute(1, 0, 2).Reshape(T, D)
	x2 := x.Add(mm(att, w("wo", D, D)))

	h2 := x2.RmsNorm(w("mlp_norm", D), 1e-6)
	gate := mm(h2, w("w_gate", D, s.Hidden)).Silu()
	up := mm(h2, w("w_up", D, s.Hidden))
	y := x2.Add(mm(gate.Mul(up), w("w_down", s.Hidden, D)))
	// A final layer norm and a GELU head, as a model's last block has, so
	// the plan also holds those kernel families.
	g.Output("out", y)
	g.Output("head", y.LayerNorm(w("ln_w", D), w("ln_b", D), 1e-5).Gelu())
	return g, g.Err()
}

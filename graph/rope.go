package graph

import (
	"github.com/loomgraph/loom/dtype"
)

// Rotary embeddings, Candle's rope family (candle-kernels §9.5), written as
// one elementwise kernel each: the output is computed over a view of it that
// splits the last dim into (pair half, pair member), and every operand —
// x's two pair members, cos and sin — is a broadcast view of an input, so
// nothing is copied and fusion puts the whole rotation in one kernel (plus a
// two-element arange that selects the member). Candle computes in T; Loom
// computes f16/bf16 in float32 and rounds once.
//
// cos and sin are (t, d/2), or (b, t, d/2) per batch; rope_i and rope take x
// as (b, h, t, d), rope_thd as (b, t, h, d).

// rotate computes the rotation over a 5-D domain where axis `pair` (3 or 4)
// has size 2 and indexes the member of each rotated pair (x0, x1):
// out = member 0 ? x0·c − x1·s : x0·s + x1·c. x5 is x reshaped to the
// domain; cs5 views cos/sin broadcast to the domain. It also returns x
// itself over the domain as a selection between the members (member 0 ?
// x0 : x1), for heads that pass through: so every read of x is a view of
// one member, and an interleaved rope after a product joins it as a pair
// epilogue (plan.Kernel.PairKeep).
func rotate(x5, c5, s5 *Tensor, pair int, dims []int) (rot, same *Tensor) {
	g := x5.g
	x0 := x5.Narrow(pair, 0, 1).BroadcastTo(dims...)
	x1 := x5.Narrow(pair, 1, 1).BroadcastTo(dims...)
	sel := make([]int, 5)
	for i := range sel {
		sel[i] = 1
	}
	sel[pair] = 2
	member := g.Arange(dtype.U8, 0, 2, 1).Reshape(sel...).BroadcastTo(dims...)
	first := x0.Mul(c5).Sub(x1.Mul(s5))
	second := x0.Mul(s5).Add(x1.Mul(c5))
	return Where(member, second, first), Where(member, x1, x0)
}

// ropeCheck validates shapes: x is rank 4 with an even last dim d, cos and
// sin are (tRows ≥ t, d/2) or (b, t, d/2).
func ropeCheck(op string, x, cos, sin *Tensor, b, t, d int) error {
	if _, err := sameGraph(op, x, cos, sin); err != nil {
		return err
	}
	if x.Rank() != 4 || d%2 != 0 || !x.n.DType.IsFloat() {
		return opErr(op, "x must be a rank-4 float tensor with an even last dim, got %v%v", x.n.DType, x.n.Shape)
	}
	for _, c := range []*Tensor{cos, sin} {
		cs := c.n.Shape
		ok := c.n.DType == x.n.DType && (len(cs) == 2 && cs[0] >= t && cs[1] == d/2 || len(cs) == 3 && cs[0] == b && cs[1] == t && cs[2] == d/2)
		if !ok {
			return opErr(op, "cos/sin must be %v (t ≥ %d, %d) or (%d, %d, %d), got %v%v for x %v%v", x.n.DType, t, d/2, b, t, d/2, c.n.DType, cs, x.n.DType, x.n.Shape)
		}
	}
	return nil
}

// ropeForm describes one member of the family over its 5-D domain: x
// (rank 4) is viewed with its last dim split into (pair half, pair member)
// or (pair member, pair half); pair is the member axis (size 2), tAxis the
// axis of t and halfAxis the axis of size d/2 that indexes the tables.
type ropeForm struct {
	name                  string
	layout                string // "(b, h, t, d)" or "(b, t, h, d)"
	interleaved           bool   // pairs (x[2k], x[2k+1]) rather than (x[k], x[k+d/2])
	tDim, pair, tAxis, hf int
}

var (
	ropeIForm    = ropeForm{name: "rope_i", layout: "(b, h, t, d)", interleaved: true, tDim: 2, pair: 4, tAxis: 2, hf: 3}
	ropeForm2    = ropeForm{name: "rope", layout: "(b, h, t, d)", tDim: 2, pair: 3, tAxis: 2, hf: 4}
	ropeThdForm  = ropeForm{name: "rope_thd", layout: "(b, t, h, d)", tDim: 1, pair: 3, tAxis: 1, hf: 4}
	ropeIThdForm = ropeForm{name: "rope_i_thd", layout: "(b, t, h, d)", interleaved: true, tDim: 1, pair: 4, tAxis: 1, hf: 3}
)

// rope checks shapes and builds the rotation for one form: of every head
// when heads < 0, else of the first heads heads (x's axis 2 in the
// (b, t, h, d) form), the others passed through.
func (x *Tensor) rope(f ropeForm, cos, sin *Tensor, heads int) *Tensor {
	if r, ok := x.ready(f.name); !ok {
		return r
	}
	s := x.n.Shape
	if len(s) != 4 {
		return x.g.fail(opErr(f.name, "x must be rank 4 %s, got %v%v", f.layout, x.n.DType, s))
	}
	b, t, d := s[0], s[f.tDim], s[3]
	if err := ropeCheck(f.name, x, cos, sin, b, t, d); err != nil {
		return failOr(x.g, err)
	}
	headAxis := 1
	if f.tDim == 1 {
		headAxis = 2
	}
	if heads > s[headAxis] {
		return x.g.fail(opErr(f.name, "%d heads to rotate, x %v%v has %d", heads, x.n.DType, s, s[headAxis]))
	}
	dims := []int{s[0], s[1], s[2], 2, d / 2}
	if f.interleaved {
		dims[3], dims[4] = d/2, 2
	}
	// The tables viewed over the domain: (t, d/2) narrowed to t rows (the
	// table may have more), or per batch (b, t, d/2).
	table := func(c *Tensor) *Tensor {
		shape := []int{1, 1, 1, 1, 1}
		if cs := c.n.Shape; len(cs) == 3 {
			shape[0] = cs[0]
		} else {
			c = c.Narrow(0, 0, t)
		}
		shape[f.tAxis], shape[f.hf] = t, d/2
		return c.Reshape(shape...).BroadcastTo(dims...)
	}
	x5 := x.Reshape(dims...)
	y, same := rotate(x5, table(cos), table(sin), f.pair, dims)
	if heads >= 0 && heads < s[headAxis] {
		// The same domain, so the selection joins the rotation's kernel;
		// the mask (heads of the domain < heads) is computed once a run.
		sel := []int{1, 1, 1, 1, 1}
		sel[headAxis] = s[headAxis]
		rot := x.g.Arange(dtype.U32, 0, float64(s[headAxis]), 1).Lt(x.g.Full(dtype.U32, float64(heads)))
		y = Where(rot.Reshape(sel...).BroadcastTo(dims...), y, same)
	}
	return y.Reshape(s...)
}

// RopeI is the interleaved rotary embedding: pairs (x[2k], x[2k+1]) of the
// last dim rotate by (cos, sin)[t, k]. x is (b, h, t, d).
func (x *Tensor) RopeI(cos, sin *Tensor) *Tensor { return x.rope(ropeIForm, cos, sin, -1) }

// Rope is the half-split (GPT-NeoX) rotary embedding: x[k] and x[k + d/2]
// rotate by (cos, sin)[t, k]. x is (b, h, t, d).
func (x *Tensor) Rope(cos, sin *Tensor) *Tensor { return x.rope(ropeForm2, cos, sin, -1) }

// RopeThd is Rope on the (b, t, h, d) layout.
func (x *Tensor) RopeThd(cos, sin *Tensor) *Tensor { return x.rope(ropeThdForm, cos, sin, -1) }

// RopeThdHeads is RopeThd on x's first heads heads (axis 2); the other
// heads pass through unchanged, in the same kernel. A fused query, key
// and value projection viewed as (b, t, Heads + 2·KVHeads, d) rotates its
// queries and keys and keeps its values with one launch, and its output
// holds each position's keys and values side by side for the cache.
// heads must be between 0 and x's head count.
func (x *Tensor) RopeThdHeads(cos, sin *Tensor, heads int) *Tensor {
	return x.ropeHeads(ropeThdForm, cos, sin, heads)
}

// RopeIThdHeads is RopeThdHeads with the interleaved pairs of RopeI:
// x[2k] and x[2k+1] of each of x's first heads heads rotate by (cos,
// sin)[t, k]; the other heads pass through. x is (b, t, h, d). A model
// whose query and key weights interleave each head's halves (llama.cpp's
// layout) rotates its fused projection with it, and the rotation reads
// the product's output in adjacent pairs: it joins a product as its pair
// epilogue (plan.Kernel.PairKeep).
func (x *Tensor) RopeIThdHeads(cos, sin *Tensor, heads int) *Tensor {
	return x.ropeHeads(ropeIThdForm, cos, sin, heads)
}

// ropeHeads is rope over the first heads heads, which must be ≥ 0.
func (x *Tensor) ropeHeads(f ropeForm, cos, sin *Tensor, heads int) *Tensor {
	if heads < 0 {
		if r, ok := x.ready(f.name); !ok {
			return r
		}
		return x.g.fail(opErr(f.name, "%d heads to rotate for x %v%v", heads, x.n.DType, x.n.Shape))
	}
	return x.rope(f, cos, sin, heads)
}

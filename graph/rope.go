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
// domain; cs5 views cos/sin broadcast to the domain.
func rotate(op string, x5, c5, s5 *Tensor, pair int, dims []int) *Tensor {
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
	return Where(member, second, first)
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

// csView views cos or sin (rows for t, then d/2) as the 5-D domain: tAxis is
// the domain axis of t, pair the axis of the pair member (size 2, broadcast)
// and the remaining axis of size d/2 takes the table's last dim.
func csView(c *Tensor, t, tAxis, halfAxis int, dims []int) *Tensor {
	cs := c.n.Shape
	shape := []int{1, 1, 1, 1, 1}
	if len(cs) == 3 {
		shape[0] = cs[0] // per-batch tables
	} else {
		c = c.Narrow(0, 0, t) // the table may have more rows than t
	}
	shape[tAxis] = t
	shape[halfAxis] = cs[len(cs)-1]
	return c.Reshape(shape...).BroadcastTo(dims...)
}

// RopeI is the interleaved rotary embedding: pairs (x[2k], x[2k+1]) of the
// last dim rotate by (cos, sin)[t, k]. x is (b, h, t, d).
func (x *Tensor) RopeI(cos, sin *Tensor) *Tensor {
	if r, ok := x.ready("rope_i"); !ok {
		return r
	}
	s := x.n.Shape
	if len(s) != 4 {
		return x.g.fail(opErr("rope_i", "x must be rank 4 (b, h, t, d), got %v%v", x.n.DType, s))
	}
	b, h, t, d := s[0], s[1], s[2], s[3]
	if err := ropeCheck("rope_i", x, cos, sin, b, t, d); err != nil {
		return failOr(x.g, err)
	}
	dims := []int{b, h, t, d / 2, 2}
	x5 := x.Reshape(dims...)
	out := rotate("rope_i", x5, csView(cos, t, 2, 3, dims), csView(sin, t, 2, 3, dims), 4, dims)
	return out.Reshape(s...)
}

// Rope is the half-split (GPT-NeoX) rotary embedding: x[k] and x[k + d/2]
// rotate by (cos, sin)[t, k]. x is (b, h, t, d).
func (x *Tensor) Rope(cos, sin *Tensor) *Tensor {
	if r, ok := x.ready("rope"); !ok {
		return r
	}
	s := x.n.Shape
	if len(s) != 4 {
		return x.g.fail(opErr("rope", "x must be rank 4 (b, h, t, d), got %v%v", x.n.DType, s))
	}
	b, h, t, d := s[0], s[1], s[2], s[3]
	if err := ropeCheck("rope", x, cos, sin, b, t, d); err != nil {
		return failOr(x.g, err)
	}
	if len(cos.n.Shape) == 3 {
		return x.ropeBatched(cos, sin, false)
	}
	dims := []int{b * h, t, 1, 2, d / 2}
	x5 := x.Reshape(dims...)
	out := rotate("rope", x5, csView(cos, t, 1, 4, dims), csView(sin, t, 1, 4, dims), 3, dims)
	return out.Reshape(s...)
}

// RopeThd is Rope on the (b, t, h, d) layout.
func (x *Tensor) RopeThd(cos, sin *Tensor) *Tensor {
	if r, ok := x.ready("rope_thd"); !ok {
		return r
	}
	s := x.n.Shape
	if len(s) != 4 {
		return x.g.fail(opErr("rope_thd", "x must be rank 4 (b, t, h, d), got %v%v", x.n.DType, s))
	}
	b, t, h, d := s[0], s[1], s[2], s[3]
	if err := ropeCheck("rope_thd", x, cos, sin, b, t, d); err != nil {
		return failOr(x.g, err)
	}
	if len(cos.n.Shape) == 3 {
		return x.ropeBatched(cos, sin, true)
	}
	dims := []int{b, t, h, 2, d / 2}
	x5 := x.Reshape(dims...)
	out := rotate("rope_thd", x5, csView(cos, t, 1, 4, dims), csView(sin, t, 1, 4, dims), 3, dims)
	return out.Reshape(s...)
}

// ropeBatched handles per-batch (b, t, d/2) tables for the half-split forms
// by folding the batch into the table view.
func (x *Tensor) ropeBatched(cos, sin *Tensor, thd bool) *Tensor {
	s := x.n.Shape
	dims := []int{s[0], s[1], s[2], 2, s[3] / 2}
	tAxis := 2 // (b, h, t, …)
	if thd {
		tAxis = 1 // (b, t, h, …)
	}
	view := func(c *Tensor) *Tensor {
		cs := c.n.Shape
		shape := []int{cs[0], 1, 1, 1, cs[2]}
		shape[tAxis] = cs[1]
		return c.Reshape(shape...).BroadcastTo(dims...)
	}
	x5 := x.Reshape(dims...)
	return rotate("rope", x5, view(cos), view(sin), 3, dims).Reshape(s...)
}

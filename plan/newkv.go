package plan

import (
	"slices"

	"github.com/loomgraph/loom/ir"
)

// NewKV says where an attention step finds its query position's new key
// and value without waiting for the step ahead of it (MarkNewKV): that
// step is the one-position scatter of the key/value cache the attention
// reads (a decode step's, model's cache update), run in place, and Src is
// what it scatters — the new keys and values, [2, B, KV, 1, D], in the
// memory of the attention's queries (the q/k/v product's output), which
// the scatter does not write. A GPU attention kernel may then issue every
// load before its programmatic-dependence wait: the cache's other
// positions were written by earlier runs (the scatter writes only the
// new one), the queries and the positions by steps before the scatter,
// and the new position's key and value come from Src, not the cache.
// Whether the scatter ran in place is known only at run time (a caller
// that does not donate the cache gets a copy of it first, which writes
// every position): the executor checks it for every launch (Scatter's
// destination and output in one memory) and waits first otherwise.
type NewKV struct {
	// Scatter is the step ahead: Ins[Dst] its destination (the cache).
	Scatter *Kernel
	Dst     int
	// Src is the scatter's source operand; its buffer is the attention's
	// queries'.
	Src Operand
}

// MarkNewKV sets Kernel.NewKV on each attention step that takes one query
// position (T = 1) right behind the scatter that writes that position of
// the cache it reads: the scatter's destination is an input read whole
// that the plan lets it write in place (InPlace), its dim is the cache's
// key axis (3 of [2, B, KV, S, D]), its ids are the attention's start
// positions (the same buffer, offset and batch stride, broadcast over
// the rest), its source is [2, B, KV, 1, D] in the attention's queries'
// buffer, the attention's keys and values are the cache's two halves
// (the first S' ≤ S keys of each, the cache's strides), and the step
// ahead writes neither the queries nor the positions (Ahead). Call it
// after MarkAhead.
func (p *Plan) MarkNewKV() {
	inPlace := p.InPlace()
	for i := 1; i < len(p.Steps); i++ {
		a, s := p.Steps[i].Kernel, p.Steps[i-1].Kernel
		a.NewKV = nil
		if nk, ok := newKV(a, s, inPlace); ok {
			a.NewKV = nk
		}
	}
}

// newKV is MarkNewKV's test of attention step a behind step s.
func newKV(a, s *Kernel, inPlace map[int]*Buffer) (*NewKV, bool) {
	if len(a.Instrs) != 1 || len(s.Instrs) != 1 || s.Out == nil || len(a.Ahead) != len(a.Ins) {
		return nil, false
	}
	an, sn := a.Instrs[0], s.Instrs[0]
	if an.Node.Op != ir.OpAttention || sn.Node.Op != ir.OpScatter || len(an.Args) != 4 || len(sn.Args) != 3 {
		return nil, false
	}
	arg := func(in Instr, k *Kernel, j int) (Operand, int, bool) {
		r := in.Args[j]
		if !r.Operand || r.Broadcast || r.Index < 0 || r.Index >= len(k.Ins) {
			return Operand{}, 0, false
		}
		return k.Ins[r.Index], r.Index, true
	}
	q, qi, ok1 := arg(an, a, 0)
	kk, _, ok2 := arg(an, a, 1)
	vv, _, ok3 := arg(an, a, 2)
	st, sti, ok4 := arg(an, a, 3)
	dst, di, ok5 := arg(sn, s, 0)
	ids, _, ok6 := arg(sn, s, 1)
	src, _, ok7 := arg(sn, s, 2)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 {
		return nil, false
	}
	// One query position; the step ahead writes neither the queries nor
	// the positions.
	if len(q.Layout.Dims) != 4 || q.Layout.Dims[2] != 1 || !a.Ahead[qi] || !a.Ahead[sti] {
		return nil, false
	}
	// The scatter: along the key axis of a [2, B, KV, S, D] cache read
	// whole, which the plan lets it write in place.
	c := dst.Layout
	if len(sn.Node.Params) < 1 || sn.Node.Params[0] != 3 || len(c.Dims) != 5 || c.Dims[0] != 2 ||
		!c.IsIdentity() || inPlace[s.Out.ID] != dst.Buf {
		return nil, false
	}
	b, kv, d := c.Dims[1], c.Dims[2], c.Dims[4]
	// Its source: the new keys and values, in the queries' buffer.
	if src.Buf != q.Buf || !slices.Equal(src.Layout.Dims, []int{2, b, kv, 1, d}) {
		return nil, false
	}
	// Its ids: the attention's start positions, broadcast (a dim of one
	// element may have any stride).
	il, sl := ids.Layout, st.Layout
	if ids.Buf != st.Buf || len(sl.Dims) != 1 || sl.Dims[0] != b || !slices.Equal(il.Dims, []int{2, b, kv, 1, d}) ||
		il.Offset != sl.Offset {
		return nil, false
	}
	for i, want := range []int{0, sl.Strides[0], 0, 0, 0} {
		if i != 3 && il.Dims[i] > 1 && il.Strides[i] != want {
			return nil, false
		}
	}
	// The attention's keys and values: the cache's halves.
	for h, o := range []Operand{kk, vv} {
		l := o.Layout
		if o.Buf != s.Out || len(l.Dims) != 4 || l.Dims[0] != b || l.Dims[1] != kv || l.Dims[2] > c.Dims[3] ||
			l.Dims[3] != d || l.Offset != h*c.Strides[0] || !slices.Equal(l.Strides, c.Strides[1:]) {
			return nil, false
		}
	}
	return &NewKV{Scatter: s, Dst: di, Src: src}, true
}

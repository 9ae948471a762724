package cpu

import (
	"context"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// partial is one chunk's reduction: its value (in the reduction's input
// kind) and, for argmax/argmin, the row index of that value.
type partial struct {
	f32 float32
	f64 float64
	i64 int64
	idx int64
}

// runChunked is the two-stage path for long rows: every (row, chunk) pair
// is a work item computing its chunk of the row's prologue and reducing it;
// the partials of a row then combine in a fixed order (sums pairwise, as
// rowSum adds a whole row; max/min/arg in chunk order), so the result does
// not depend on how many workers ran, nor on whether the row's kernel ran
// chunked.
func (p *program) runChunked(ctx context.Context, workers int, srcs []buf, dst buf) error {
	L, rows := p.rowLen, p.rows
	chunks := (L + tileSize - 1) / tileSize
	parts := make([]partial, rows*chunks)
	last := &p.instrs[len(p.instrs)-1]
	op := last.node.Op
	items := rows * chunks
	work := func(w *worker, item int) {
		row, c := item/chunks, item%chunks
		c0, c1 := c*tileSize, min(L, (c+1)*tileSize)
		p.span(w, srcs, dst, row*L+c0, c1-c0, row, 1, c1-c0, false)
		out := w.vals[len(p.instrs)-1]
		var pt partial
		switch op {
		case ir.OpArgmax, ir.OpArgmin:
			i := out.i64[0]
			pt.idx = i + int64(c0)
			x := w.ref(last.args[0])
			switch {
			case x.f32 != nil:
				pt.f32 = x.f32[i]
			case x.f64 != nil:
				pt.f64 = x.f64[i]
			default:
				pt.i64 = x.i64[i]
			}
		default:
			switch {
			case out.f32 != nil:
				pt.f32 = out.f32[0]
			case out.f64 != nil:
				pt.f64 = out.f64[0]
			default:
				pt.i64 = out.i64[0]
			}
		}
		parts[item] = pt
	}
	if err := p.forEach(ctx, workers, items, work); err != nil {
		return err
	}
	res := newTile(p.instrs[len(p.instrs)-1].kind, rows)
	argKind := p.argKind(last.args[0])
	for row := range rows {
		combine(op, argKind, parts[row*chunks:(row+1)*chunks], res, row)
	}
	store(dst, 0, res)
	return nil
}

// combine folds a row's partials (sums in rowSum's pairwise order, the
// rest in chunk order) with the reduction's own
// rules (NaN propagation for max/min, first index on ties and first NaN for
// argmax/argmin) into res[row].
func combine(op ir.Op, kind dtype.Kind, ps []partial, res tile, row int) {
	switch op {
	case ir.OpSum:
		// rowSum's order: chunks are its blocks (tileSize = sumBlock).
		setPartial(res, row, pairwiseSum(ps))
	case ir.OpMax, ir.OpMin:
		isMax := op == ir.OpMax
		acc := ps[0]
		for _, q := range ps[1:] {
			if better(kind, q, acc, isMax) {
				acc = q
			}
		}
		setPartial(res, row, acc)
	default:
		isMax := op == ir.OpArgmax
		acc := ps[0]
		for _, q := range ps[1:] {
			if better(kind, q, acc, isMax) {
				acc = q
			}
		}
		res.i64[row] = acc.idx
	}
}

// better reports whether q beats the running best acc: strictly larger
// (smaller) or NaN where acc is not — so ties keep the earlier chunk.
func better(kind dtype.Kind, q, acc partial, isMax bool) bool {
	switch kind {
	case dtype.KF32:
		a, b := q.f32, acc.f32
		if b != b {
			return false
		}
		return a != a || isMax && a > b || !isMax && a < b
	case dtype.KF64:
		a, b := q.f64, acc.f64
		if b != b {
			return false
		}
		return a != a || isMax && a > b || !isMax && a < b
	}
	return isMax && q.i64 > acc.i64 || !isMax && q.i64 < acc.i64
}

func setPartial(res tile, row int, v partial) {
	switch {
	case res.f32 != nil:
		res.f32[row] = v.f32
	case res.f64 != nil:
		res.f64[row] = v.f64
	default:
		res.i64[row] = v.i64
	}
}

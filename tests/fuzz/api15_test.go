package fuzz

import (
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/loomgraph/loom/graph"
)

// apiStep makes one call of the Candle-parity API (issue 15: shape ops,
// creation helpers, composites, losses) with fuzzed, often invalid,
// arguments. It is its own fuzz target so that FuzzBuilder's op numbering,
// and with it its regression corpus, stays as it is.
func (b *builder) apiStep() {
	r := b.r
	t := b.pick()
	switch r.n(20) {
	case 0:
		b.push(fmt.Sprintf("%v.Flip(...)", t), t.Flip(r.ints(3)...))
	case 1:
		d, l, rt := r.small(), r.small(), r.small()
		b.push(fmt.Sprintf("%v.PadWithZeros(%d, %d, %d)", t, d, l, rt), t.PadWithZeros(d, l, rt))
	case 2:
		d, l, rt := r.small(), r.small(), r.small()
		b.push(fmt.Sprintf("%v.PadWithSame(%d, %d, %d)", t, d, l, rt), t.PadWithSame(d, l, rt))
	case 3:
		s, d := r.small()*7, r.small()
		b.push(fmt.Sprintf("%v.Roll(%d, %d)", t, s, d), t.Roll(s, d))
	case 4:
		c := r.ints(5)
		b.push(fmt.Sprintf("%v.Repeat(%v)", t, c), t.Repeat(c...))
	case 5:
		ts, d := []*graph.Tensor{t}, r.small()
		for range r.n(3) {
			ts = append(ts, b.pick())
		}
		b.push(fmt.Sprintf("Stack(%d, %v)", d, ts), graph.Stack(d, ts...))
	case 6:
		n, d := r.small(), r.small()
		for i, p := range t.Chunk(n, d) {
			b.push(fmt.Sprintf("%v.Chunk(%d, %d)[%d]", t, n, d, i), p)
		}
	case 7:
		s, d := r.ints(3), r.small()
		for i, p := range t.Split(s, d) {
			b.push(fmt.Sprintf("%v.Split(%v, %d)[%d]", t, s, d, i), p)
		}
	case 8:
		s := r.shape()
		switch r.n(3) {
		case 0:
			b.push(fmt.Sprintf("%v.BroadcastAs(%v)", t, s), t.BroadcastAs(s...))
		case 1:
			b.push(fmt.Sprintf("%v.Expand(%v)", t, s), t.Expand(s...))
		default:
			b.push(fmt.Sprintf("%v.BroadcastLeft(%v)", t, s), t.BroadcastLeft(s...))
		}
	case 9:
		switch r.n(3) {
		case 0:
			b.push(fmt.Sprintf("%v.ZerosLike()", t), t.ZerosLike())
		case 1:
			b.push(fmt.Sprintf("%v.OnesLike()", t), t.OnesLike())
		default:
			b.push(fmt.Sprintf("%v.FullLike(300)", t), t.FullLike(300))
		}
	case 10:
		var rs []graph.Range
		for range r.n(4) {
			rs = append(rs, graph.Range{Start: r.small(), End: r.small(), Step: r.small()})
		}
		b.push(fmt.Sprintf("%v.ConstSet(7, %v)", t, rs), t.ConstSet(7, rs...))
	case 11:
		k := r.small()
		if r.n(2) == 0 {
			b.push(fmt.Sprintf("%v.Tril(%d)", t, k), t.Tril(k))
		} else {
			b.push(fmt.Sprintf("%v.Triu(%d)", t, k), t.Triu(k))
		}
	case 12:
		n, dt := r.small(), r.dt()
		switch r.n(3) {
		case 0:
			b.push(fmt.Sprintf("Eye(%d, %v)", n, dt), b.g.Eye(n, dt))
		case 1:
			b.push(fmt.Sprintf("Tril2(%d, %v)", n, dt), b.g.Tril2(n, dt))
		default:
			b.push(fmt.Sprintf("Triu2(%d, %v)", n, dt), b.g.Triu2(n, dt))
		}
	case 13:
		d := r.ints(3)
		b.push(fmt.Sprintf("%v.LogSumExp(%v)", t, d), t.LogSumExp(d...))
	case 14:
		d := r.ints(3)
		p := []float64{2, 1, 0, -1, 0.5, math.Inf(1), math.Inf(-1), math.NaN()}[r.n(8)]
		if p == 2 {
			b.push(fmt.Sprintf("%v.Norm(%v)", t, d), t.Norm(d...))
		} else {
			b.push(fmt.Sprintf("%v.NormP(%v, %v)", t, p, d), t.NormP(p, d...))
		}
	case 15:
		y := b.pick()
		b.push(fmt.Sprintf("%v.Pow(%v)", t, y), t.Pow(y))
	case 16:
		d := r.small() * 13
		b.push(fmt.Sprintf("%v.RoundTo(%d)", t, d), t.RoundTo(d))
	case 17:
		k, d := r.small(), r.small()
		v, i := t.Topk(k, d)
		b.push(fmt.Sprintf("%v.Topk(%d, %d) values", t, k, d), v)
		b.push(fmt.Sprintf("%v.Topk(%d, %d) indices", t, k, d), i)
	case 18:
		d := r.ints(2)
		b.push(fmt.Sprintf("%v.VarPopulation(true, %v)", t, d), t.VarPopulation(true, d...))
	default:
		y := b.pick()
		if r.n(2) == 0 {
			b.push(fmt.Sprintf("Nll(%v, %v)", t, y), graph.Nll(t, y))
		} else {
			b.push(fmt.Sprintf("CrossEntropy(%v, %v)", t, y), graph.CrossEntropy(t, y))
		}
	}
}

// FuzzBuilderAPI is FuzzBuilder with the Candle-parity API mixed in: each
// step is either one of FuzzBuilder's calls or one of apiStep's. Nothing may
// panic, and every line of a compile error must name an op.
func FuzzBuilderAPI(f *testing.F) {
	f.Add([]byte{1, 0, 0, 1, 3, 0, 0, 1, 1, 0, 2, 2, 1, 17, 3, 4, 0, 60, 0})
	f.Add([]byte{1, 12, 2, 4, 0, 1, 11, 3, 1, 0, 0, 5, 0, 1, 19, 1, 0, 59, 0})
	f.Add([]byte{1, 0, 1, 2, 1, 1, 10, 2, 4, 7, 1, 3, 1, 14, 3, 5, 0, 59, 0})
	f.Add([]byte{1, 0, 2, 1, 4, 1, 6, 1, 2, 1, 7, 2, 3, 1, 4, 1, 16, 4, 0, 59, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &builder{r: &reader{b: data}, g: graph.New()}
		stage := "build"
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("panic in %s: %v\ncalls:\n  %s\n%s", stage, p, strings.Join(b.log, "\n  "), debug.Stack())
			}
		}()
		for i := 0; i < 64 && !b.r.done(); i++ {
			if b.r.n(2) == 0 {
				b.step()
			} else {
				b.apiStep()
			}
		}
		for _, opts := range []graph.Options{{Check: true}, {NoFusion: true, Check: true}} {
			stage = fmt.Sprintf("compile (NoFusion=%v)", opts.NoFusion)
			_, err := b.g.Compile(opts)
			if err == nil {
				continue
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !errLine.MatchString(line) {
					t.Fatalf("%s: error line does not name an op: %q\nwhole error: %v\ncalls:\n  %s", stage, line, err, strings.Join(b.log, "\n  "))
				}
			}
		}
	})
}

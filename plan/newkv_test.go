package plan_test

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/catalog"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
)

// TestMarkNewKV: a decode step's attention right behind the scatter of
// its position into the cache it reads is marked, with that scatter, its
// destination and its source (the queries' buffer); the same attention
// is not marked where the scatter cannot write in place, where its ids
// are not the attention's positions, where its source is not in the
// queries' buffer, where a step sits between them, or where the query
// holds more than one position.
func TestMarkNewKV(t *testing.T) {
	const b, h, kv, s, d, win = 2, 8, 2, 64, 16, 40
	marked := func(t *testing.T, build func(g *graph.Graph)) int {
		t.Helper()
		g := graph.New()
		build(g)
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, st := range p.Plan().Steps {
			nk := st.Kernel.NewKV
			if nk == nil {
				continue
			}
			n++
			prev := p.Plan().Steps[i-1].Kernel
			if nk.Scatter != prev || prev.Instrs[0].Node.Op != ir.OpScatter || st.Kernel.Instrs[0].Node.Op != ir.OpAttention {
				t.Errorf("step %d (%s) marked behind %s", i, st.Kernel.Name, prev.Name)
			}
			qb := st.Kernel.Ins[st.Kernel.Instrs[0].Args[0].Index].Buf
			if nk.Scatter.Ins[nk.Dst].Buf.Name != "cache" || nk.Src.Buf != qb || nk.Src.Buf.Name != "y" {
				t.Errorf("step %d: destination %v, source %v, queries %v", i, nk.Scatter.Ins[nk.Dst].Buf, nk.Src.Buf, qb)
			}
		}
		return n
	}
	// decode builds catalog.DecodeAttention's graph by hand with one part
	// changed by f (nil: as it is).
	type parts struct{ q, nkv, at, cache, start *graph.Tensor }
	decode := func(f func(g *graph.Graph, p *parts)) func(g *graph.Graph) {
		return func(g *graph.Graph) {
			y := g.Input("y", dtype.BF16, b, 1, h+2*kv, d)
			pos := g.Input("pos", dtype.U32, b)
			p := &parts{
				q:     y.Narrow(2, 0, h).Transpose(1, 2),
				nkv:   y.Narrow(2, h, 2*kv).Reshape(b, 1, 2, kv, d).Permute(2, 0, 3, 1, 4),
				at:    pos.Reshape(1, b, 1, 1, 1).BroadcastTo(2, b, kv, 1, d),
				start: pos,
			}
			if f != nil {
				f(g, p)
			}
			if p.cache == nil {
				p.cache = g.Input("cache", dtype.BF16, 2, b, kv, s, d)
			}
			c := p.cache.Scatter(p.at, p.nkv, 3)
			g.Output("cache.out", c)
			k := c.Narrow(0, 0, 1).Squeeze(0).Narrow(2, 0, win)
			v := c.Narrow(0, 1, 1).Squeeze(0).Narrow(2, 0, win)
			g.Output("o", graph.CausalAttention(p.q, k, v, p.start, 0.25))
		}
	}
	if n := marked(t, func(g *graph.Graph) { g.Output("o", catalog.DecodeAttention(g, dtype.BF16, b, h, kv, s, d, win)) }); n != 1 {
		t.Errorf("catalog's decode attention: %d steps marked, want 1", n)
	}
	// The plan dump says which step reads ahead, and from where.
	g := graph.New()
	g.Output("o", catalog.DecodeAttention(g, dtype.BF16, b, h, kv, s, d, win))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var dump strings.Builder
	if err := p.Dump(&dump, graph.DumpPlan); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(dump.String(), "  new key and value: b"); n != 1 {
		t.Errorf("the plan dump names %d steps' new key and value, want 1:\n%s", n, dump.String())
	}
	// One key head (multi-query attention): the ids' dims of one element.
	if n := marked(t, func(g *graph.Graph) { g.Output("o", catalog.DecodeAttention(g, dtype.BF16, 1, 4, 1, s, d, win)) }); n != 1 {
		t.Errorf("one sequence, one key head: %d steps marked, want 1", n)
	}
	if n := marked(t, decode(nil)); n != 1 {
		t.Errorf("decode attention: %d steps marked, want 1", n)
	}
	for _, c := range []struct {
		name string
		f    func(g *graph.Graph, p *parts)
	}{
		{"the cache a view (no scatter in place)", func(g *graph.Graph, p *parts) {
			p.cache = g.Input("cache", dtype.BF16, 2, b, kv, s+8, d).Narrow(3, 0, s)
		}},
		{"ids other than the positions", func(g *graph.Graph, p *parts) {
			p.at = g.Input("pos2", dtype.U32, b).Reshape(1, b, 1, 1, 1).BroadcastTo(2, b, kv, 1, d)
		}},
		{"the source in another buffer", func(g *graph.Graph, p *parts) {
			p.nkv = g.Input("kv", dtype.BF16, 2, b, kv, 1, d)
		}},
		{"a step between them", func(g *graph.Graph, p *parts) {
			c := g.Full(dtype.U32, 3)
			p.start = p.start.Add(c).Sub(c)
		}},
	} {
		if n := marked(t, decode(c.f)); n != 0 {
			t.Errorf("%s: %d steps marked, want 0", c.name, n)
		}
	}
	// Two query positions (a prompt's chunk): the scatter writes two.
	if n := marked(t, func(g *graph.Graph) {
		y := g.Input("y", dtype.BF16, 1, 2, h+2*kv, d)
		pos := g.Input("pos", dtype.U32, 1)
		q := y.Narrow(2, 0, h).Transpose(1, 2)
		nkv := y.Narrow(2, h, 2*kv).Reshape(1, 2, 2, kv, d).Permute(2, 0, 3, 1, 4)
		at := g.Input("at", dtype.U32, 2, 1, kv, 2, d)
		c := g.Input("cache", dtype.BF16, 2, 1, kv, s, d).Scatter(at, nkv, 3)
		g.Output("cache.out", c)
		k, v := c.Narrow(0, 0, 1).Squeeze(0), c.Narrow(0, 1, 1).Squeeze(0)
		g.Output("o", graph.CausalAttention(q, k, v, pos, 0.25))
	}); n != 0 {
		t.Errorf("two query positions: %d steps marked, want 0", n)
	}
}

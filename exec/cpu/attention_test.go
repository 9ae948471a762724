package cpu_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// BenchmarkAttentionDecode is a 1B llama's decode attention on the CPU: 32
// query heads over 8 key heads of 64, one new row against 512 cached
// positions (f32; the heads of a group together, in assembly on AVX2 and
// FMA: 0.29–0.43 ms against 0.91–0.93 ms a head at a time in Go, on a
// 2-core Zen 4 VM; with float32 exponentials, 0.21–0.25 ms against
// 0.28–0.31 in float64, alternating).
//
// The other shapes' groups are not multiples of four: SmolLM-135M's 9 over
// 3 (G = 3), Qwen2-0.5B's 14 over 2 (G = 7: a unit of 4 and one of 3), and
// plain multi-head attention (G = 1).
func BenchmarkAttentionDecode(b *testing.B) {
	for _, c := range []struct {
		name  string
		h, kv int
	}{{"llama1b", 32, 8}, {"smollm", 9, 3}, {"qwen05b", 14, 2}, {"mha", 8, 8}} {
		b.Run(c.name, func(b *testing.B) { benchAttentionDecode(b, c.h, c.kv) })
	}
}

func benchAttentionDecode(b *testing.B, H, KV int) {
	const S, D = 512, 64
	g := graph.New()
	q := g.Input("q", dtype.F32, 1, H, 1, D)
	k, v := g.Input("k", dtype.F32, 1, KV, S, D), g.Input("v", dtype.F32, 1, KV, S, D)
	g.Output("y", graph.CausalAttention(q, k, v, g.Input("start", dtype.U32, 1), 0.125))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	rnd := func(n ...int) *tensor.Tensor {
		vals := make([]float32, n[0]*n[1]*n[2]*n[3])
		for i := range vals {
			vals[i] = float32(r.NormFloat64())
		}
		t, err := tensor.New(vals, n...)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	start, _ := tensor.New([]uint32{S - 1}, 1)
	out, _ := tensor.Zeros(dtype.F32, 1, H, 1, D)
	in := map[string]*tensor.Tensor{"q": rnd(1, H, 1, D), "k": rnd(1, KV, S, D), "v": rnd(1, KV, S, D), "start": start}
	e := cpu.New()
	for b.Loop() {
		if err := p.RunInto(context.Background(), e, in, map[string]*tensor.Tensor{"y": out}); err != nil {
			b.Fatal(err)
		}
	}
}

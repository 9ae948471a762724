package cpu

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"github.com/loomgraph/loom/ir"
)

// attention runs ir.OpAttention over whole operand tiles (runIndex loads
// them through their layouts): one output row (b, h, t) at a time on up to
// workers goroutines, in float64 (f64 is exact to the definition's
// tolerance; f32, f16 and bf16 round once on store). This is the Go twin
// of kernels/attention.hip, which computes the same sums in float32 in
// blocks of keys.
func attention(ctx context.Context, n *ir.Node, out, q, k, v, start tile, workers int) error {
	if out.f32 != nil {
		return attentionRows(ctx, n, out.f32, q.f32, k.f32, v.f32, start.i64, workers)
	}
	return attentionRows(ctx, n, out.f64, q.f64, k.f64, v.f64, start.i64, workers)
}

// attentionRows is attention on one compute type's slices.
func attentionRows[F float32 | float64](ctx context.Context, n *ir.Node, out, q, k, v []F, start []int64, workers int) error {
	qs, ks, vs := n.Args[0].Shape, n.Args[1].Shape, n.Args[2].Shape
	B, H, T, D := qs[0], qs[1], qs[2], qs[3]
	KV, S, Dv := ks[1], ks[2], vs[3]
	G := H / KV
	scale := n.Params[0]
	rows := B * H * T
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(workers, rows)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := make([]float64, S)
			acc := make([]float64, Dv)
			for {
				row := int(next.Add(1) - 1)
				if row >= rows || ctx.Err() != nil {
					return
				}
				b, h, t := row/(H*T), row/T%H, row%T
				kh := h / G
				// Keys s ≤ start + t (and s < S) are visible; start is
				// u32, so the bound is at least t ≥ 0: key 0 always is.
				vis := int(min(int64(S), start[b]+int64(t)+1))
				m := math.Inf(-1)
				qr := q[((b*H+h)*T+t)*D:][:D]
				for s := range vis {
					kr := k[((b*KV+kh)*S+s)*D:][:D]
					dot := 0.0
					for d, qv := range qr {
						dot += float64(qv) * float64(kr[d])
					}
					x[s] = scale * dot
					m = math.Max(m, x[s])
				}
				clear(acc)
				sum := 0.0
				for s := range vis {
					p := math.Exp(x[s] - m) // NaN for every s when m is NaN or ±Inf
					sum += p
					for d, vv := range v[((b*KV+kh)*S+s)*Dv:][:Dv] {
						acc[d] += p * float64(vv)
					}
				}
				o := out[((b*H+h)*T+t)*Dv:][:Dv]
				for d := range o {
					o[d] = F(acc[d] / sum)
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

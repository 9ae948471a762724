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
	qs, ks, vs := n.Args[0].Shape, n.Args[1].Shape, n.Args[2].Shape
	B, H, T, D := qs[0], qs[1], qs[2], qs[3]
	KV, S, Dv := ks[1], ks[2], vs[3]
	G := H / KV
	scale := n.Params[0]
	at := func(t tile, i int) float64 {
		if t.f32 != nil {
			return float64(t.f32[i])
		}
		return t.f64[i]
	}
	put := func(i int, x float64) {
		if out.f32 != nil {
			out.f32[i] = float32(x)
		} else {
			out.f64[i] = x
		}
	}
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
				vis := min(int64(S), start.i64[b]+int64(t)+1)
				m := math.Inf(-1)
				qo := ((b*H+h)*T + t) * D
				for s := range int(vis) {
					ko := ((b*KV+kh)*S + s) * D
					dot := 0.0
					for d := range D {
						dot += at(q, qo+d) * at(k, ko+d)
					}
					x[s] = scale * dot
					m = math.Max(m, x[s])
				}
				clear(acc)
				sum := 0.0
				for s := range int(vis) {
					p := math.Exp(x[s] - m) // NaN for every s when m is NaN or ±Inf
					sum += p
					vo := ((b*KV+kh)*S + s) * Dv
					for d := range Dv {
						acc[d] += p * at(v, vo+d)
					}
				}
				oo := ((b*H+h)*T + t) * Dv
				for d := range Dv {
					put(oo+d, acc[d]/sum)
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

package cpu_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// BenchmarkQMatmulPrefill: a prompt's quantized products on the CPU, M
// activation rows (bf16) times a Q4_K weight of a 1B llama's shapes: the
// gate/up product's 8,192 rows of 2,048 and the down product's 2,048 rows
// of 8,192. SetBytes counts the weight once.
//
// A prompt's product costs about M/2 one-row passes (the two-row kernel,
// quant.VecDotRows2, a pass a pair of rows): session 49, this 2-core Zen 4
// VM, M = 64 took 17–20 ms against 0.57–0.71 ms for one row. Tried and
// taken back in the same session: the weight rows in tiles of 256 KB,
// every activation row against a tile before the next (so that the tile
// stays in the core's L2): 17–21 ms, no faster — the passes are bound by
// the kernel's arithmetic, not by reading the weight.
func BenchmarkQMatmulPrefill(b *testing.B) {
	for _, c := range []struct{ M, N, K int }{{64, 8192, 2048}, {64, 2048, 8192}, {1, 8192, 2048}} {
		b.Run(fmt.Sprintf("M%dN%dK%d", c.M, c.N, c.K), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			wv := make([]float32, c.N*c.K)
			for i := range wv {
				wv[i] = float32(r.NormFloat64())
			}
			wt, _ := tensor.New(wv, c.N, c.K)
			raw, err := graph.QuantizeValue(quant.Q4_K, wt)
			if err != nil {
				b.Fatal(err)
			}
			xv := make([]float64, c.M*c.K)
			for i := range xv {
				xv[i] = r.NormFloat64()
			}
			x, _ := tensor.FromFloat64s(dtype.BF16, xv, c.M, c.K)
			g := graph.New()
			q, err := g.QInput("w", quant.Q4_K, c.N, c.K)
			if err != nil {
				b.Fatal(err)
			}
			g.Output("y", g.Input("x", dtype.BF16, c.M, c.K).QMatmul(q))
			p, err := g.Compile(graph.Options{})
			if err != nil {
				b.Fatal(err)
			}
			e := cpu.New()
			in := map[string]*tensor.Tensor{"w": raw, "x": x}
			b.SetBytes(int64(len(raw.Bytes())))
			for b.Loop() {
				if _, err := p.Run(context.Background(), e, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

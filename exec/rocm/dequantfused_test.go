package rocm

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUDequantFused: a dequantization read by a chain (·s, then a cast
// to f32) runs as one launch of kernels.DequantFused (the launch counter
// moves; the word-load body's counter too where the format has one and
// the count is a multiple of 256, and not otherwise) and stores what the
// CPU stores, bit for bit, for the formats of a quantized llama and every
// output dtype; the output starts poisoned, so an element the launch
// misses fails.
func TestGPUDequantFused(t *testing.T) {
	e := openGPU(t)
	r := rand.New(rand.NewPCG(17, 19))
	for _, c := range []struct {
		f       quant.Type
		rows, k int
	}{{quant.Q4_0, 37, 512}, {quant.Q4_0, 5, 96}, {quant.Q4_K, 37, 512}, {quant.Q6_K, 37, 512}, {quant.Q8_0, 37, 512}, {quant.Q8_0, 3, 160}, {quant.Q2_K, 37, 512}} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			f, rows, k := c.f, c.rows, c.k
			word := kernels.DequantFusedWord(f, dt) && rows*k%256 == 0
			t.Run(fmt.Sprintf("%v/%v/%dx%d", f, dt, rows, k), func(t *testing.T) {
				raw := randomQuantized(t, r, f, rows, k)
				sv := make([]float64, k)
				for i := range sv {
					sv[i] = r.Float64()*2 - 1
				}
				st, _ := tensor.FromFloat64s(dt, sv, k)
				g := graph.New()
				q, err := g.QInput("w", f, rows, k)
				if err != nil {
					t.Fatal(err)
				}
				g.Output("y", q.Dequantize(dt).Mul(g.Input("s", dt, k)).Cast(dtype.F32))
				p, err := g.Compile(graph.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if n := len(p.Plan().Steps); n != 1 || !p.Plan().Steps[0].Kernel.IsFusedDequant() {
					t.Fatalf("want one fused dequantization, have %d steps", n)
				}
				in := map[string]*tensor.Tensor{"w": raw, "s": st}
				before, beforeWord := fusedDequantLaunches.Load(), fusedDequantWordLaunches.Load()
				got, err := p.Run(context.Background(), e, in)
				if err != nil {
					t.Fatal(err)
				}
				if fusedDequantLaunches.Load() == before {
					t.Fatal("the fused dequantization did not run as one launch")
				}
				if ran := fusedDequantWordLaunches.Load() != beforeWord; ran != word {
					t.Fatalf("word-load body ran: %v, want %v", ran, word)
				}
				want, err := p.Run(context.Background(), cpu.New(), in)
				if err != nil {
					t.Fatal(err)
				}
				gv, wv := got["y"].Float64s(), want["y"].Float64s()
				for i := range wv {
					if math.Float64bits(gv[i]) != math.Float64bits(wv[i]) {
						t.Fatalf("y[%d] = %v, the CPU's %v", i, gv[i], wv[i])
					}
				}
			})
		}
	}
}

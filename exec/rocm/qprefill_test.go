package rocm

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUQPrefillChunks: a prefill qmatmul whose dequantized weight does
// not fit qmatmulScratch runs in chunks of rows — a multiple of 64 where a
// chunk holds more, the last one shorter — each dequantized, then
// multiplied into its columns of the output. The output starts poisoned
// (NaN), so a chunk not multiplied, or written to the wrong columns,
// fails; the values are checked against the float64 product of the
// dequantized weight.
func TestGPUQPrefillChunks(t *testing.T) {
	e := openGPU(t)
	defer func(s int64) { qmatmulScratch = s }(qmatmulScratch)
	r := rand.New(rand.NewPCG(7, 11))
	for _, c := range []struct{ m, n, k, chunkRows int }{
		{16, 300, 512, 100}, // chunks of 64 rows (100 rounded down), the last 44
		{9, 301, 256, 37},   // chunks of 37 (64 or fewer: not rounded), the last 5
		{33, 130, 1024, 64}, // 64, 64, 2
	} {
		for _, f := range []quant.Type{quant.Q4_0, quant.Q4_K, quant.Q6_K, quant.Q8_0} {
			for _, dt := range []dtype.DType{dtype.F32, dtype.BF16, dtype.F16} {
				t.Run(fmt.Sprintf("%v/%v/M%dN%dK%d/chunk%d", f, dt, c.m, c.n, c.k, c.chunkRows), func(t *testing.T) {
					qmatmulScratch = int64(c.chunkRows * c.k * dt.Size())
					raw := randomQuantized(t, r, f, c.n, c.k)
					xv := make([]float64, c.m*c.k)
					for i := range xv {
						xv[i] = r.Float64()*2 - 1
					}
					xt, _ := tensor.FromFloat64s(dt, xv, c.m, c.k)
					p := qmatmulProgram(t, f, dt, c.m, c.n, c.k)
					out, err := p.Run(context.Background(), e, map[string]*tensor.Tensor{"w": raw, "x": xt})
					if err != nil {
						t.Fatal(err)
					}
					wq := make([]float32, c.n*c.k)
					if err := quant.Dequantize(f, raw.Bytes(), wq); err != nil {
						t.Fatal(err)
					}
					// The weight rounds to dt, the GEMM accumulates in f32
					// and rounds its output to dt.
					ulp := map[dtype.DType]float64{dtype.F32: 0x1p-23, dtype.F16: 0x1p-10, dtype.BF16: 0x1p-7}[dt]
					xs, got := xt.Float64s(), out["y"].Float64s()
					for i := range c.m {
						for j := range c.n {
							var sum, abs float64
							for l := range c.k {
								v := float64(wq[j*c.k+l]) * xs[i*c.k+l]
								sum += v
								abs += math.Abs(v)
							}
							tol := abs*(ulp+1e-5) + math.Abs(sum)*ulp
							if d := math.Abs(got[i*c.n+j] - sum); !(d <= tol) {
								t.Fatalf("y[%d][%d] = %v, want %v ± %v", i, j, got[i*c.n+j], sum, tol)
							}
						}
					}
				})
			}
		}
	}
}

package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/blas"
)

// TestGemm512 checks the AVX-512 kernel's driver against a float64
// reference: sizes on and off the 8×32 blocks (edge tiles in both
// directions), A transposed or not, beta 0 (C overwritten, NaN there
// ignored) and 1 (accumulated), batches, leading dimensions wider than the
// rows, K = 0, and one and two workers.
func TestGemm512(t *testing.T) {
	if !hasGemm512 {
		t.Skip("no AVX-512 on this CPU: convolutions use the host BLAS")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, sz := range [][3]int{{8, 32, 16}, {64, 96, 192}, {13, 45, 7}, {1, 1, 1}, {9, 33, 1}, {17, 70, 0}, {24, 31, 300}, {16, 64, 600}} {
		for _, trans := range []bool{false, true} {
			for _, beta := range []float64{0, 1} {
				for _, workers := range []int{1, 2} {
					M, N, K := sz[0], sz[1], sz[2]
					c := blas.Call{M: M, N: N, K: K, TransA: trans, LDA: K + 3, LDB: N + 5, LDC: N + 2, Batch: 3, Alpha: 1, Beta: beta}
					if trans {
						c.LDA = M + 3
					}
					c.StrideB, c.StrideC = (K+1)*c.LDB, (M+1)*c.LDC
					name := fmt.Sprintf("%dx%dx%d/T=%v/beta=%v/w=%d", M, N, K, trans, beta, workers)
					t.Run(name, func(t *testing.T) {
						rows := M
						if trans {
							rows = K
						}
						a := make([]float32, max(1, rows*c.LDA))
						b := make([]float32, c.Batch*c.StrideB)
						cc := make([]float32, c.Batch*c.StrideC)
						for _, s := range [][]float32{a, b, cc} {
							for i := range s {
								s[i] = r.Float32()*2 - 1
							}
						}
						if beta == 0 {
							for i := range cc {
								cc[i] = float32(math.NaN()) // must not survive
							}
						}
						want := make([]float64, len(cc))
						for i, v := range cc {
							want[i] = float64(v)
						}
						for bi := range c.Batch {
							for i := range M {
								for j := range N {
									var sum float64
									for k := range K {
										var av float32
										if trans {
											av = a[k*c.LDA+i]
										} else {
											av = a[i*c.LDA+k]
										}
										p := float64(av) * float64(b[bi*c.StrideB+k*c.LDB+j])
										sum += p
									}
									o := bi*c.StrideC + i*c.LDC + j
									if beta == 1 {
										sum += want[o]
									}
									want[o] = sum
								}
							}
						}
						g := newGemm512(make([]float32, gemm512Floats(M, K, workers)), M, K, workers)
						if !g.fits(c) {
							t.Fatal("call does not fit")
						}
						if err := g.run(c, a, b, cc, workers); err != nil {
							t.Fatal(err)
						}
						for bi := range c.Batch {
							for i := range M {
								for j := range N {
									o := bi*c.StrideC + i*c.LDC + j
									if d := math.Abs(float64(cc[o]) - want[o]); !(d <= 1e-5*(1+float64(K))) {
										t.Fatalf("item %d C[%d][%d] = %v, want %v", bi, i, j, cc[o], want[o])
									}
								}
								// Elements between rows (past N) are not touched.
								for j := N; j < c.LDC && i < M-1; j++ {
									o := bi*c.StrideC + i*c.LDC + j
									if g, w := cc[o], float32(want[o]); g != w && !(g != g && w != w) {
										t.Fatalf("item %d C[%d][%d] past the row changed: %v, was %v", bi, i, j, g, w)
									}
								}
							}
						}
					})
				}
			}
		}
	}
}

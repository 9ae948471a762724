package blas

// Benchmarks: square 1024 Sgemm on each backend with GOMAXPROCS threads,
// reported as GFLOP/s (2·n³ flops per call).

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

func BenchmarkSgemm1024(b *testing.B) {
	const n = 1024
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			h, err := be.open(runtime.GOMAXPROCS(0))
			if err != nil {
				b.Skipf("OpenBLAS not available: %v", err)
			}
			rng := rand.New(rand.NewPCG(1, 1))
			x, y, z := randSlice[float32](rng, n*n), randSlice[float32](rng, n*n), make([]float32, n*n)
			c := Call{M: n, N: n, K: n, LDA: n, LDB: n, LDC: n, Batch: 1, Alpha: 1}
			for b.Loop() {
				if err := h.Sgemm(c, x, y, z); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*n*n*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

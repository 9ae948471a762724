package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
)

// TestGemvTwin: the skinny-product twin agrees with a float64 product
// within f32 accumulation error, for every lane count and vector width.
func TestGemvTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sz := range [][3]int{{1, 7, 2048}, {3, 33, 64}, {8, 5, 129}, {2, 1, 1}} {
		m, n, k := sz[0], sz[1], sz[2]
		a, b := make([]float32, m*k), make([]float32, n*k)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		for _, lv := range [][2]int{{32, 1}, {8, 1}, {32, 4}, {8, 8}, {64, 4}, {128, 8}, {256, 1}} {
			if k%lv[1] != 0 {
				continue
			}
			c := make([]float32, m*n)
			Gemv(a, b, c, m, n, k, k, k, n, lv[0], lv[1])
			for i := range m {
				for j := range n {
					want, mag := 0.0, 0.0
					for q := range k {
						p := float64(a[i*k+q]) * float64(b[j*k+q])
						want += p
						mag += math.Abs(p)
					}
					if d := math.Abs(float64(c[i*n+j]) - want); d > 4e-7*math.Sqrt(float64(k))*mag+1e-30 {
						t.Errorf("m %d n %d k %d lanes %d vec %d: c[%d][%d] = %v, want %v", m, n, k, lv[0], lv[1], i, j, c[i*n+j], want)
					}
				}
			}
		}
	}
}

// TestPlanGemv: which calls the skinny kernels take, and the variant.
func TestPlanGemv(t *testing.T) {
	nt := blas.Call{M: 1, N: 4096, K: 2048, TransB: true, LDA: 2048, LDB: 2048, LDC: 4096, Batch: 1, Alpha: 1}
	for _, c := range []struct {
		d       dtype.DType
		mod     func(*blas.Call)
		aligned bool
		want    string
	}{
		{dtype.BF16, func(*blas.Call) {}, true, "loom_gemv_bf16_v64_m1"},
		{dtype.BF16, func(*blas.Call) {}, false, "loom_gemv_bf16_s64_m1"},
		{dtype.BF16, func(c *blas.Call) { c.M = 2 }, true, "loom_gemv_bf16_v64"},
		{dtype.BF16, func(c *blas.Call) { c.N = 14336; c.K = 4096; c.LDA, c.LDB = 4096, 4096 }, true, "loom_gemv_bf16_v32_m1"},
		{dtype.BF16, func(c *blas.Call) { c.N = 2048; c.K = 8192; c.LDA, c.LDB = 8192, 8192 }, true, "loom_gemv_bf16_v128_m1"},
		{dtype.F32, func(c *blas.Call) { c.N = 64; c.K = 8192; c.LDA, c.LDB = 8192, 8192 }, true, "loom_gemv_f32_v256_m1"},
		{dtype.F32, func(c *blas.Call) { c.K, c.LDA, c.LDB = 64, 64, 64; c.M = 4; c.Batch = 8 }, true, "loom_gemv_f32_v8"},
		{dtype.F16, func(c *blas.Call) { c.K, c.LDA, c.LDB = 64, 64, 64 }, true, "loom_gemv_f16_v8_m1"},
		{dtype.F16, func(c *blas.Call) { c.M = 9 }, true, ""},
		{dtype.F64, func(*blas.Call) {}, true, ""},
		{dtype.F32, func(c *blas.Call) { c.TransB = false }, true, ""},
		{dtype.F32, func(c *blas.Call) { c.Beta = 1 }, true, ""},
	} {
		call := nt
		c.mod(&call)
		l, ok := PlanGemv(c.d, call, c.aligned)
		if got := map[bool]string{true: l.Name, false: ""}[ok]; got != c.want {
			t.Errorf("%v %v aligned %v: %q, want %q", c.d, call, c.aligned, got, c.want)
		}
	}
}

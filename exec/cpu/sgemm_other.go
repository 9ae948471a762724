//go:build !amd64

package cpu

// hasGemm512 reports whether the AVX-512 GEMM kernel can run: only on
// amd64.
const hasGemm512 = false

func sgemm8x32(k int, a, b *float32, ldb int, c *float32, ldc int, acc int) {
	panic("cpu: sgemm8x32 without AVX-512")
}

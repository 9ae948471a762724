package cpu

import "golang.org/x/sys/cpu"

// hasGemm512 reports whether the AVX-512 GEMM kernel can run.
var hasGemm512 = cpu.X86.HasAVX512F

//go:noescape
func sgemm8x32(k int, a, b *float32, ldb int, c *float32, ldc int, acc int)

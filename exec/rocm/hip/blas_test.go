package hip

import (
	"testing"
	"unsafe"
)

// TestGemmArgsMapping: a GemmArgs becomes each vendor's argument values
// (the part both Gemm calls share): ops, sizes, leading dimensions of at
// least 1, element and compute types per dtype, and alpha/beta = 1/0 in
// float, or double for f64.
func TestGemmArgsMapping(t *testing.T) {
	g := GemmArgs{TransA: true, M: 3, N: 0, K: 5, LDA: 7, LDB: 0, LDC: 2, A: 0x100, B: 0x200, C: 0x300,
		StrideA: 35, StrideB: 0, StrideC: 6, Batch: 4, Type: GemmBF16}
	v := cublasEnums.args(g)
	if v.ta != cublasOpT || v.tb != cublasOpN || v.m != 3 || v.n != 0 || v.k != 5 || v.batch != 4 {
		t.Errorf("ops/sizes: %+v", v)
	}
	if v.lda != 7 || v.ldb != 1 || v.ldc != 2 {
		t.Errorf("leading dims %d %d %d, want 7 1 2", v.lda, v.ldb, v.ldc)
	}
	if v.a != 0x100 || v.b != 0x200 || v.c != 0x300 || v.sa != 35 || v.sb != 0 || v.sc != 6 {
		t.Errorf("pointers/strides: %+v", v)
	}
	if v.data != cudaR16BF || v.compute != cublasCompute32F || *(*float32)(v.alpha) != 1 || *(*float32)(v.beta) != 0 {
		t.Errorf("bf16 on cuBLAS: data %d compute %d", v.data, v.compute)
	}
	g.Type = GemmF64
	v = rocblasEnums.args(g)
	if v.ta != rocblasOpT || v.tb != rocblasOpN || v.data != rocblasF64 || v.compute != rocblasF64 {
		t.Errorf("f64 on rocBLAS: %+v", v)
	}
	if *(*float64)(v.alpha) != 1 || *(*float64)(v.beta) != 0 || v.alpha != unsafe.Pointer(&one64) {
		t.Error("f64 scalars are not double 1 and 0")
	}
	g.Type = GemmF16
	if v = rocblasEnums.args(g); v.data != rocblasF16 || v.compute != rocblasF32 {
		t.Errorf("f16 on rocBLAS: data %d compute %d", v.data, v.compute)
	}
}

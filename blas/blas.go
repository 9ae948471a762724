package blas

import "fmt"

// Call is one strided-batched GEMM on row-major matrices (see the package
// comment for the exact element addressing).
type Call struct {
	M, N, K        int
	TransA, TransB bool
	LDA, LDB, LDC  int
	// StrideA, StrideB and StrideC are the element offsets between batch
	// items; 0 broadcasts A or B over the batch.
	StrideA, StrideB, StrideC int
	Batch                     int
	Alpha, Beta               float64
}

func (c Call) String() string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	return fmt.Sprintf("gemm %s%s M=%d N=%d K=%d lda=%d ldb=%d ldc=%d batch=%d strides=(%d,%d,%d)",
		t(c.TransA), t(c.TransB), c.M, c.N, c.K, c.LDA, c.LDB, c.LDC, c.Batch, c.StrideA, c.StrideB, c.StrideC)
}

// Host runs GEMMs on host memory. Implementations are safe for concurrent
// use.
type Host interface {
	// Name says which library runs the calls ("openblas 0.3.21 (pthread)",
	// "gonum").
	Name() string
	// Sgemm and Dgemm run c. The slices hold every element the call
	// touches (Call.Check); c is written in place.
	Sgemm(c Call, a, b, cc []float32) error
	Dgemm(c Call, a, b, cc []float64) error
}

// Package blas is Loom's one interface to dense matrix products (GEMM):
// C[b] = alpha·op(A[b])·op(B[b]) + beta·C[b] for every batch item b, on
// row-major matrices with leading dimensions and batch strides, as the
// executors need them for Matmul steps.
//
// Host (CPU) backends live here: OpenBLAS, loaded at run time with purego
// (libopenblas.so.0) when present, else gonum's pure-Go BLAS. Device
// backends (cuBLAS, rocBLAS, Loom's own HIP kernel) take the same Call and
// live with their executor (exec/rocm), which owns the device memory and
// stream they run on.
//
// Contract:
//   - Matrices are row-major. A is M×K (TransA: stored K×M, element
//     A[m,k] at a[k·LDA + m]); B is K×N (TransB: stored N×K); C is M×N with
//     C[m,n] at c[m·LDC + n]. Batch item b starts StrideA·b, StrideB·b,
//     StrideC·b elements in; a stride of 0 broadcasts an operand over the
//     batch (never C's).
//   - Call.Check validates dims, leading dimensions and that every element
//     the call touches lies inside the given slices, so a backend never
//     reads or writes out of bounds; it names the call in its error.
//   - Empty products are valid: M, N or Batch 0 do nothing; K 0 makes
//     C = beta·C (BLAS itself leaves C alone; the backends scale).
//   - f32 and f64 on the host; the executor converts f16/bf16 to f32 around
//     the call (accumulation in f32, as Candle does).
//   - A missing library is never an error: Open says which backend it
//     chose and why. LOOM_BLAS=gonum forces gonum; OpenGonum and
//     OpenOpenBLAS pick one explicitly (tests run both).
//   - Threads: the executor passes its worker count. OpenBLAS's thread
//     count is process-global (openblas.go says how hosts share it); gonum
//     spreads batches of small items over that many goroutines.
package blas

package cpu

import (
	"context"
	"unsafe"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
)

// Products with few rows. A decode step's linear layers are GEMMs of one
// row (a few for a small prompt or a batch) against a weight stored as
// rows of K values (NT: C = A·Bᵀ). In f16 and bf16 the general path
// widens both operands to float32 — the whole weight, every step — and
// hands them to the host BLAS: SmolLM-135M in bf16 spent 80% of a step
// converting, clearing and collecting those copies (4 tokens/s on 2
// cores). Here each weight row is read once per row of A, in place,
// widened in registers (hdotRowsBF16, hdotRowsF16: AVX2, FMA and F16C; f32
// rows as they are, hdotRowsF32), and dotted with the row of A widened
// once; the weight's rows are spread over the workers (the host BLAS took
// f32 calls one at a time behind its lock). float32 accumulation as before
// (in another order than the BLAS's: eight-lane fused multiply-adds), the
// product rounded once into the output.

// hgemvMaxM is the most rows of A that take this path: each reads the
// whole weight, so past a few rows the widened GEMM's one pass is cheaper.
const hgemvMaxM = 4

// hgemv runs c (f32, f16 or bf16 operands a and b at offsets offA and
// offB, output out of dt) when it is a product with few rows of A against
// weight rows (TransB) and this CPU has the kernels; false where it does
// not take c. f32 weights are read as they are, where the host BLAS took
// such calls one at a time behind its lock (on one thread below 2²⁴
// multiply-adds, blas.openblasSmall).
func (e *Executor) hgemv(ctx context.Context, c blas.Call, dt dtype.DType, a, b buf, offA, offB int, out []byte) (bool, error) {
	if !hasHGemv || !c.TransB || c.M > hgemvMaxM || c.K < 8 || c.Alpha != 1 || c.Beta != 0 {
		return false, nil
	}
	var (
		at, bt func(i int) float32 // element i of a and b as float32
		bp     unsafe.Pointer      // b's first element
		dot    func(w unsafe.Pointer, ldw, n int, x *float32, k int, out *float32)
		esize  int
	)
	switch dt {
	case dtype.F32:
		at, bt = func(i int) float32 { return a.f32[i] }, func(i int) float32 { return b.f32[i] }
		bp, dot, esize = unsafe.Pointer(unsafe.SliceData(b.f32)), hdotRowsF32, 4
	case dtype.F16:
		at, bt = func(i int) float32 { return a.f16[i].Float32() }, func(i int) float32 { return b.f16[i].Float32() }
		bp, dot, esize = unsafe.Pointer(unsafe.SliceData(b.f16)), hdotRowsF16, 2
	case dtype.BF16:
		at, bt = func(i int) float32 { return a.b16[i].Float32() }, func(i int) float32 { return b.b16[i].Float32() }
		bp, dot, esize = unsafe.Pointer(unsafe.SliceData(b.b16)), hdotRowsBF16, 2
	default:
		return false, nil
	}
	K, K8 := c.K, c.K&^7
	x := make([]float32, c.M*K)
	for bi := range c.Batch {
		ab, bb, cb := offA+bi*c.StrideA, offB+bi*c.StrideB, bi*c.StrideC
		// A's rows widened once: A(m, k) is a[m·lda + k], or a[k·lda + m]
		// transposed.
		for m := range c.M {
			xm := x[m*K : (m+1)*K]
			for k := range K {
				i := ab + m*c.LDA + k
				if c.TransA {
					i = ab + k*c.LDA + m
				}
				xm[k] = at(i)
			}
		}
		// The last weight element any row reads, checked once for the
		// assembly (the caller checked the call's extents too).
		_ = bt(bb + (c.N-1)*c.LDB + K - 1)
		err := e.parallelRows(ctx, c.N, func(n0, n1 int) error {
			vals := make([]float32, n1-n0)
			w := unsafe.Add(bp, (bb+n0*c.LDB)*esize)
			for m := range c.M {
				xm := x[m*K : (m+1)*K]
				dot(w, c.LDB, n1-n0, &xm[0], K8, &vals[0])
				for k := K8; k < K; k++ { // the last K mod 8 values
					for j := range vals {
						vals[j] += xm[k] * bt(bb+(n0+j)*c.LDB+k)
					}
				}
				storeRowF32(dt, out, cb+m*c.LDC+n0, vals)
			}
			return nil
		})
		if err != nil {
			return true, err
		}
	}
	return true, nil
}

package cpu

import (
	"context"
	"unsafe"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
)

// Half-precision products with few rows. A decode step's linear layers in
// f16 or bf16 are GEMMs of one row (a few for a small prompt or a batch)
// against a weight stored as rows of K values (NT: C = A·Bᵀ). The general
// path widens both operands to float32 — the whole weight, every step,
// allocated afresh — and hands them to the host BLAS: SmolLM-135M in bf16
// spent 80% of a step converting, clearing and collecting those copies
// (4 tokens/s on 2 cores). Here each weight row is read once per row of A,
// in place, widened in registers (hdotRowsBF16, hdotRowsF16: AVX2, FMA and
// F16C), and dotted with the row of A widened once; the weight's rows are
// spread over the workers. float32 accumulation as before (in another
// order than the BLAS's: eight-lane fused multiply-adds), the product
// rounded once into the output.

// hgemvMaxM is the most rows of A that take this path: each reads the
// whole weight, so past a few rows the widened GEMM's one pass is cheaper.
const hgemvMaxM = 4

// hgemv runs c (f16 or bf16 operands a and b at offsets offA and offB,
// output out of dt) when it is a product with few rows of A against
// weight rows (TransB) and this CPU has the kernels; false where it does
// not take c.
func (e *Executor) hgemv(ctx context.Context, c blas.Call, dt dtype.DType, a, b buf, offA, offB int, out []byte) (bool, error) {
	if !hasHGemv || !c.TransB || c.M > hgemvMaxM || c.K < 8 || c.Alpha != 1 || c.Beta != 0 || (dt != dtype.F16 && dt != dtype.BF16) {
		return false, nil
	}
	halves := func(x buf) []uint16 {
		if dt == dtype.F16 {
			return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(x.f16))), len(x.f16))
		}
		return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(x.b16))), len(x.b16))
	}
	aw, bw := halves(a), halves(b)
	dot := hdotRowsBF16
	if dt == dtype.F16 {
		dot = hdotRowsF16
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
				xm[k] = widenOne(dt, aw[i])
			}
		}
		// The last weight element any row reads, checked once for the
		// assembly (the caller checked the call's extents too).
		_ = bw[bb+(c.N-1)*c.LDB+K-1]
		err := e.parallelRows(ctx, c.N, func(n0, n1 int) error {
			vals := make([]float32, n1-n0)
			for m := range c.M {
				xm := x[m*K : (m+1)*K]
				dot(&bw[bb+n0*c.LDB], c.LDB, n1-n0, &xm[0], K8, &vals[0])
				for k := K8; k < K; k++ { // the last K mod 8 values
					for j := range vals {
						vals[j] += xm[k] * widenOne(dt, bw[bb+(n0+j)*c.LDB+k])
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

// widenOne is the float32 of one f16 or bf16 value (exact).
func widenOne(dt dtype.DType, h uint16) float32 {
	if dt == dtype.F16 {
		return dtype.Float16(h).Float32()
	}
	return dtype.BFloat16(h).Float32()
}

package cpu

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/plan"
)

// Matmul steps run as one GEMM call (plan.Gemm maps the step) on the host
// BLAS the executor opens once (blas.Open with its worker count): f32 and
// f64 operands are handed to the BLAS in place, at their offsets; f16 and
// bf16 operands are widened to float32 (only the span of elements the call
// reads), multiplied with f32 accumulation, and the product is rounded once
// into the output — except products of a few rows against weight rows
// (a decode step's), which read the weight in place in every float dtype
// but f64 (hgemv.go). An empty product writes nothing; K = 0 writes zeros.

var _ exec.BLASNamer = (*Executor)(nil)

// gemmHost returns the executor's BLAS, opening it on first use.
func (e *Executor) gemmHost() (blas.Host, string) {
	e.blasOnce.Do(func() { e.blasHost, e.blasWhy = blas.Open(e.workers) })
	return e.blasHost, e.blasWhy
}

// BLAS names the host BLAS matmul steps run on, and why it was chosen.
func (e *Executor) BLAS() string {
	h, why := e.gemmHost()
	if why == "" || why == h.Name() {
		return h.Name()
	}
	return fmt.Sprintf("%s (%s)", h.Name(), why)
}

// gemmKey keys a kernel's mapped GEMM in plan.Kernel.Cache.
type gemmKey struct{}

// runMatmul executes a matmul step.
func (e *Executor) runMatmul(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	gi, ok := k.Cache.Load(plan.KeyOf(e, gemmKey{}))
	if !ok {
		g, err := plan.Gemm(k)
		if err != nil {
			return err
		}
		gi, _ = k.Cache.LoadOrStore(plan.KeyOf(e, gemmKey{}), g)
	}
	g := gi.(plan.GemmStep)
	c := g.Call
	out := mem[g.C.ID].(*memory).b
	if c.M == 0 || c.N == 0 || c.Batch == 0 {
		return nil
	}
	if c.K == 0 {
		clear(out) // every float dtype's +0 is all zero bits
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	a := asBuf(mem[g.A.ID].(*memory).b, g.DType)
	b := asBuf(mem[g.B.ID].(*memory).b, g.DType)
	dst := asBuf(out, g.DType)
	na, nb, _ := c.Extents()
	if g.OffA+na > g.A.Numel() || g.OffB+nb > g.B.Numel() || c.Batch*c.StrideC > g.C.Numel() {
		return fmt.Errorf("cpu: %s: %v reads past its operands (a: %d+%d of %d, b: %d+%d of %d)", k.Name, c, g.OffA, na, g.A.Numel(), g.OffB, nb, g.B.Numel())
	}
	h, _ := e.gemmHost()
	var err error
	if ok, err := e.hgemv(ctx, c, g.DType, a, b, g.OffA, g.OffB, out); ok {
		if err != nil {
			return fmt.Errorf("cpu: %s: %w", k.Name, err)
		}
		return nil
	}
	switch g.DType {
	case dtype.F32:
		err = h.Sgemm(c, a.f32[g.OffA:g.OffA+na], b.f32[g.OffB:g.OffB+nb], dst.f32)
	case dtype.F64:
		err = h.Dgemm(c, a.f64[g.OffA:g.OffA+na], b.f64[g.OffB:g.OffB+nb], dst.f64)
	case dtype.F16, dtype.BF16:
		a32, b32, c32 := getF32(na), getF32(nb), getF32(g.C.Numel())
		e.widen(*a32, a, g.OffA)
		e.widen(*b32, b, g.OffB)
		clear(*c32) // elements between rows (LDC > N) are stored too
		if err = h.Sgemm(c, *a32, *b32, *c32); err == nil {
			store(dst, 0, tile{f32: *c32})
		}
		f32Bufs.Put(a32)
		f32Bufs.Put(b32)
		f32Bufs.Put(c32)
	default:
		return fmt.Errorf("cpu: %s: matmul of %v", k.Name, g.DType)
	}
	if err != nil {
		return fmt.Errorf("cpu: %s: %s: %w", k.Name, h.Name(), err)
	}
	return nil
}

// f32Bufs pools the float32 operands of half-precision GEMMs: a prompt's
// products widen every weight, and fresh slices of that size were most of
// the time the CPU spent in them (cleared by make, then collected).
var f32Bufs sync.Pool

// getF32 returns a pooled slice of n float32 (contents undefined), for
// f32Bufs.Put after use.
func getF32(n int) *[]float32 {
	if p, _ := f32Bufs.Get().(*[]float32); p != nil && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

// widenChunk is the elements one part of a parallel widening converts.
const widenChunk = 1 << 16

// widen sets dst to elements [off, off+len(dst)) of an f16 or bf16 buffer
// as float32 (exact), in chunks spread over the workers: with F16C for
// f16 (NaN canonical, as widenF16 gives it), with AVX2 for bf16.
func (e *Executor) widen(dst []float32, b buf, off int) {
	n := len(dst)
	chunks := (n + widenChunk - 1) / widenChunk
	var next atomic.Int64
	parallel(min(e.workers, chunks), func(int) {
		for {
			c := int(next.Add(1) - 1)
			if c >= chunks {
				return
			}
			lo, hi := c*widenChunk, min(n, (c+1)*widenChunk)
			if b.dt == dtype.F16 {
				widenF16(dst[lo:hi], b.f16[off+lo:off+hi])
				continue
			}
			widenBF16(dst[lo:hi], b.b16[off+lo:off+hi])
		}
	})
}

// widenBF16 sets dst to src as float32 (exact: a bf16 is a float32's high
// half).
func widenBF16(dst []float32, src []dtype.BFloat16) {
	src = src[:len(dst)]
	n := len(dst) &^ 7
	if hasAVX2 && n > 0 {
		bf16to32(&dst[0], (*uint16)(&src[0]), n)
	} else {
		n = 0
	}
	for i := n; i < len(dst); i++ {
		dst[i] = src[i].Float32()
	}
}

package cpu

import (
	"context"
	"fmt"

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
// (a decode step's), which read the weight in place (hgemv.go). An empty product writes nothing; K = 0 writes zeros.

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
	switch g.DType {
	case dtype.F32:
		err = h.Sgemm(c, a.f32[g.OffA:g.OffA+na], b.f32[g.OffB:g.OffB+nb], dst.f32)
	case dtype.F64:
		err = h.Dgemm(c, a.f64[g.OffA:g.OffA+na], b.f64[g.OffB:g.OffB+nb], dst.f64)
	case dtype.F16, dtype.BF16:
		if ok, err := e.hgemv(ctx, c, g.DType, a, b, g.OffA, g.OffB, out); ok {
			if err != nil {
				return fmt.Errorf("cpu: %s: %w", k.Name, err)
			}
			return nil
		}
		a32, b32 := widen(a, g.OffA, na), widen(b, g.OffB, nb)
		c32 := make([]float32, g.C.Numel())
		if err = h.Sgemm(c, a32, b32, c32); err == nil {
			store(dst, 0, tile{f32: c32})
		}
	default:
		return fmt.Errorf("cpu: %s: matmul of %v", k.Name, g.DType)
	}
	if err != nil {
		return fmt.Errorf("cpu: %s: %s: %w", k.Name, h.Name(), err)
	}
	return nil
}

// widen returns elements [off, off+n) of an f16 or bf16 buffer as float32.
func widen(b buf, off, n int) []float32 {
	out := make([]float32, n)
	if b.dt == dtype.F16 {
		widenF16(out, b.f16[off:off+n])
		return out
	}
	for i, x := range b.b16[off : off+n] {
		out[i] = x.Float32()
	}
	return out
}

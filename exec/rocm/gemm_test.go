package rocm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/tensor"
)

// gemmCase is one row-major call and the dtype it runs in.
type gemmCase struct {
	d dtype.DType
	c blas.Call
}

// gemmCases: every dtype × transpose pair at odd sizes (tails of every
// tile), padded leading dims, batches with a broadcast operand, gemv and
// outer-product shapes, K = 1 and large K.
func gemmCases() []gemmCase {
	var cs []gemmCase
	call := func(m, n, k, batch int, ta, tb bool, pad int, bcastA, bcastB bool) blas.Call {
		c := blas.Call{M: m, N: n, K: k, TransA: ta, TransB: tb, Batch: batch, Alpha: 1, LDC: n, StrideC: m * n}
		c.LDA = k + pad
		if ta {
			c.LDA = m + pad
		}
		c.LDB = n + pad
		if tb {
			c.LDB = k + pad
		}
		rowsA, rowsB := m, k
		if ta {
			rowsA = k
		}
		if tb {
			rowsB = n
		}
		c.StrideA, c.StrideB = rowsA*c.LDA, rowsB*c.LDB
		if bcastA {
			c.StrideA = 0
		}
		if bcastB {
			c.StrideB = 0
		}
		return c
	}
	for _, d := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				cs = append(cs, gemmCase{d, call(131, 67, 45, 1, ta, tb, 3, false, false)})
				cs = append(cs, gemmCase{d, call(33, 260, 17, 3, ta, tb, 0, false, true)})
			}
		}
		cs = append(cs, gemmCase{d, call(1, 300, 129, 2, false, false, 0, true, false)}) // gemv
		cs = append(cs, gemmCase{d, call(70, 1, 64, 1, false, true, 1, false, false)})   // N = 1
		cs = append(cs, gemmCase{d, call(40, 50, 1, 1, false, false, 0, false, false)})  // K = 1
		// Skinny products (gemv.hip): decode-shaped x·Wᵀ, attention-shaped
		// batches of short rows, unaligned leading dims (the scalar
		// kernels), a broadcast weight.
		if d != dtype.F64 {
			cs = append(cs, gemmCase{d, call(1, 1031, 2048, 1, false, true, 0, false, false)})
			cs = append(cs, gemmCase{d, call(8, 300, 512, 1, false, true, 0, false, false)})
			cs = append(cs, gemmCase{d, call(4, 77, 64, 5, false, true, 0, false, false)})
			cs = append(cs, gemmCase{d, call(3, 65, 129, 2, false, true, 1, false, true)})
			cs = append(cs, gemmCase{d, call(5, 9, 8, 1, false, true, 0, false, false)})
			// One row (the _m1 kernels): short rows in a batch, unaligned.
			cs = append(cs, gemmCase{d, call(1, 33, 64, 3, false, true, 0, false, false)})
			cs = append(cs, gemmCase{d, call(1, 65, 129, 2, false, true, 1, false, true)})
			// Few long rows: groups of 64–256 lanes over several waves
			// (kernels.GemvLanes).
			cs = append(cs, gemmCase{d, call(2, 100, 1024, 2, false, true, 0, false, false)})
			cs = append(cs, gemmCase{d, call(3, 37, 2048, 1, false, true, 3, false, false)})
			// Several rows of A over thousands of rows of B (a batched
			// decode step's products), a batch over a broadcast weight.
			cs = append(cs, gemmCase{d, call(8, 4100, 2048, 1, false, true, 0, false, false)})
			cs = append(cs, gemmCase{d, call(3, 1030, 1024, 2, false, true, 0, false, true)})
		}
	}
	cs = append(cs, gemmCase{dtype.F32, call(64, 64, 16384, 1, false, false, 0, false, false)})
	return cs
}

func (g gemmCase) spans() (na, nb, nc int) {
	c := g.c
	rowsA, rowsB := c.M, c.K
	if c.TransA {
		rowsA = c.K
	}
	if c.TransB {
		rowsB = c.N
	}
	na = (c.Batch-1)*c.StrideA + rowsA*c.LDA
	nb = (c.Batch-1)*c.StrideB + rowsB*c.LDB
	nc = c.Batch * c.StrideC
	return
}

// tolerance is the normwise relative error allowed against the float64
// reference: f32 accumulation error grows like √K·2⁻²⁴; halves are
// dominated by rounding the output once.
func gemmTol(d dtype.DType, k int) float64 {
	switch d {
	case dtype.F64:
		return 1e-13 * math.Sqrt(float64(k))
	case dtype.F32:
		return 2e-7 * math.Sqrt(float64(k)) * 4
	case dtype.F16:
		return 1e-3
	}
	return 8e-3
}

// TestGPUGemm checks the vendor BLAS (when one loads) and the portable
// kernel on every case against a float64 reference, with a poisoned output;
// and the portable f32 kernel against its twin.
func TestGPUGemm(t *testing.T) {
	e := openGPU(t)
	t.Logf("GEMM backend: %s", e.GEMMBackend())
	rng := rand.New(rand.NewPCG(7, 11))
	for _, gc := range gemmCases() {
		for _, portable := range []bool{false, true} {
			if !portable && e.gemm().vendor == nil {
				continue
			}
			name := fmt.Sprintf("%v/%v/portable=%v", gc.d, gc.c, portable)
			na, nb, nc := gc.spans()
			a, b := make([]float64, na), make([]float64, nb)
			for i := range a {
				a[i] = roundTo(gc.d, rng.NormFloat64())
			}
			for i := range b {
				b[i] = roundTo(gc.d, rng.NormFloat64())
			}
			ref := make([]float64, nc) // float64 accumulation: the reference
			kernels.GemmTwin(gc.c, a, b, ref, false)
			got := runGemmOnce(t, e, gc, a, b, nc, portable)
			num, den := 0.0, 0.0
			for i := range ref {
				if math.IsNaN(got[i]) {
					t.Fatalf("%s: element %d not written (poison) or NaN", name, i)
				}
				num += (got[i] - ref[i]) * (got[i] - ref[i])
				den += ref[i] * ref[i]
			}
			rel := math.Sqrt(num / math.Max(den, 1e-300))
			if tol := gemmTol(gc.d, gc.c.K); rel > tol {
				t.Errorf("%s: normwise relative error %.3g > %.3g", name, rel, tol)
			}
			if l, ok := kernels.PlanGemv(gc.d, gc.c, gemvAligned(gc.d, gc.c, 0, 0)); ok && gc.d == dtype.F32 && gemvEnabled {
				checkGemvTwin(t, name, gc.c, l, a, b, got)
			} else if portable && gc.d == dtype.F32 {
				twin := make([]float64, nc)
				kernels.GemmTwin(gc.c, a, b, twin, true)
				bad := 0
				for i := range twin {
					if got[i] != float64(float32(twin[i])) && math.Abs(got[i]-twin[i]) > 1e-6*math.Abs(twin[i]) {
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("%s: %d elements differ from the twin by more than a rounding", name, bad)
				}
			}
		}
	}
}

func roundTo(d dtype.DType, v float64) float64 {
	t, _ := tensor.FromFloat64s(d, []float64{v}, 1)
	return t.Float64(0)
}

// runGemmOnce uploads a and b in dtype gc.d, poisons the output with NaNs,
// runs the call and returns the output as float64.
func runGemmOnce(t *testing.T, e *Executor, gc gemmCase, a, b []float64, nc int, portable bool) []float64 {
	t.Helper()
	up := func(v []float64) *block {
		tt, err := tensor.FromFloat64s(gc.d, v, len(v))
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.Upload(tt)
		if err != nil {
			t.Fatal(err)
		}
		return m.(*memory).blk
	}
	ab, bb := up(a), up(b)
	nan := make([]float64, nc)
	for i := range nan {
		nan[i] = math.NaN()
	}
	cb := up(nan)
	defer e.alloc.release(ab)
	defer e.alloc.release(bb)
	defer e.alloc.release(cb)
	if err := e.runGemm(gc.d, gc.c, ab.ptr, bb.ptr, cb.ptr, false, portable); err != nil {
		t.Fatal(err)
	}
	out, err := tensor.Zeros(gc.d, nc)
	if err != nil {
		t.Fatal(err)
	}
	if nc > 0 {
		dst := out.Bytes()
		if err := e.dev.MemcpyDtoH(unsafe.Pointer(&dst[0]), cb.ptr, uint64(len(dst)), e.stream); err != nil {
			t.Fatal(err)
		}
		if err := e.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Float64s()
}

// TestGPUGemmSpeed logs the TFLOP/s of 4096³ products in every dtype for the
// vendor library and the portable kernel (device events, median of 10). It
// asserts nothing: numbers for the report (loom bench W9 is the benchmark).
func TestGPUGemmSpeed(t *testing.T) {
	e := openGPU(t)
	const n = 4096
	for _, d := range []dtype.DType{dtype.F32, dtype.BF16, dtype.F16} {
		c := blas.Call{M: n, N: n, K: n, LDA: n, LDB: n, LDC: n, Batch: 1, StrideA: n * n, StrideB: n * n, StrideC: n * n, Alpha: 1}
		bytes := int64(n * n * d.Size())
		var bl [3]*block
		for i := range bl {
			var err error
			if bl[i], err = e.alloc.alloc(bytes); err != nil {
				t.Fatal(err)
			}
			defer e.alloc.release(bl[i])
			e.dev.MemsetD32(bl[i].ptr, 0x3c003c00, uint64(bytes/4), e.stream)
		}
		for _, portable := range []bool{false, true} {
			if !portable && e.gemm().vendor == nil {
				continue
			}
			ms, err := e.DeviceTime(func() error {
				for range 10 {
					if err := e.runGemm(d, c, bl[0].ptr, bl[1].ptr, bl[2].ptr, false, portable); err != nil {
						return err
					}
				}
				return e.Sync()
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("GEMM 4096³ %v portable=%v: %.3f ms, %.1f TFLOP/s", d, portable, ms/10, 2*float64(n)*n*n/(ms/10*1e-3)/1e12)
		}
	}
}

// checkGemvTwin compares an f32 skinny product with the kernels' twin
// (kernels.Gemv), batch item by batch item: equal up to the last bit of
// rare halfway cases of the twin's emulated fused multiply-add.
func checkGemvTwin(t *testing.T, name string, c blas.Call, l kernels.GemmLaunch, a, b, got []float64) {
	t.Helper()
	aligned := strings.Contains(l.Name, "_f32_v") // fresh allocations: aligned iff the dims are
	// loom_gemv_<dt>_<v|s><lanes>[_m1]
	kind := strings.Split(strings.TrimPrefix(l.Name, "loom_gemv_"), "_")[1]
	lanes, err := strconv.Atoi(kind[1:])
	if err != nil {
		t.Fatalf("%s: launch %s: no lane count", name, l.Name)
	}
	vec := 1
	if aligned {
		vec = 4
	}
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	fa, fb := f32(a), f32(b)
	out := make([]float32, c.M*c.LDC)
	bad := 0
	for bi := range c.Batch {
		kernels.Gemv(fa[bi*c.StrideA:], fb[bi*c.StrideB:], out, c.M, c.N, c.K, c.LDA, c.LDB, c.LDC, lanes, vec)
		for i := range c.M {
			for j := range c.N {
				w := float64(out[i*c.LDC+j])
				g := got[bi*c.StrideC+i*c.LDC+j]
				if g != w && math.Abs(g-w) > 2e-7*math.Abs(w) {
					bad++
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s (%s): %d elements differ from the gemv twin by more than a rounding", name, l.Name, bad)
	}
}

package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
)

// TestWiden: the parallel widening of half-precision GEMM operands gives
// each element's exact float32 (f16 NaNs canonical, as widenF16 makes
// them; bf16 NaNs as the bits say), over several chunks with a tail that
// is not a multiple of 8, from an offset, every bit pattern possible.
func TestWiden(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const off = 3
	n := 3*widenChunk + 13
	h := make([]uint16, off+n)
	for i := range h {
		h[i] = uint16(r.Uint32())
	}
	e := NewWithWorkers(3)
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		var b buf
		b.dt = dt
		if dt == dtype.F16 {
			b.f16 = make([]dtype.Float16, len(h))
			for i, v := range h {
				b.f16[i] = dtype.Float16(v)
			}
		} else {
			b.b16 = make([]dtype.BFloat16, len(h))
			for i, v := range h {
				b.b16[i] = dtype.BFloat16(v)
			}
		}
		dst := make([]float32, n)
		for i := range dst {
			dst[i] = -7 // poisoned
		}
		e.widen(dst, b, off)
		for i, got := range dst {
			var want float32
			if dt == dtype.F16 {
				want = f16ToF32[h[off+i]]
			} else {
				want = dtype.BFloat16(h[off+i]).Float32()
			}
			if math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("%v element %d (%#04x): %#08x, want %#08x", dt, i, h[off+i], math.Float32bits(got), math.Float32bits(want))
			}
		}
	}
}

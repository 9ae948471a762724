package quant

import (
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
)

// The expected values below are C's results on x86-64 (cvttss2si,
// roundf, GGML's nearest_int), worked out by hand from those definitions.
func TestScalarHelpers(t *testing.T) {
	inf := float32(math.Inf(1))
	nan := float32(math.NaN())
	for _, c := range []struct {
		f    float32
		want int32
	}{
		{-2.7, -2}, {2.7, 2}, {0, 0}, {-2147483648, math.MinInt32}, {2147483520, 2147483520},
		{2147483648, math.MinInt32}, {-2147483904, math.MinInt32}, {3e9, math.MinInt32},
		{inf, math.MinInt32}, {-inf, math.MinInt32}, {nan, math.MinInt32},
	} {
		if got := truncI32(c.f); got != c.want {
			t.Errorf("truncI32(%g) = %d, want %d", c.f, got, c.want)
		}
	}
	for _, c := range []struct {
		f    float32
		want int32
	}{
		{2.5, 2}, {3.5, 4}, {-2.5, -2}, {-3.5, -4}, {0.49999997, 0}, {-0.5, 0}, {4194303, 4194303}, {-4194303, -4194303},
		// Out of GGML's asserted range the bit trick wraps; NaN and Inf give
		// these values (the k-quant searches depend on it for subnormal rows).
		{inf, -0x400000}, {nan, 0},
	} {
		if got := nearestInt(c.f); got != c.want {
			t.Errorf("nearestInt(%g) = %d, want %d", c.f, got, c.want)
		}
	}
	for _, c := range []struct {
		f    float32
		want int8
	}{
		{2.5, 3}, {-2.5, -3}, {0.4999, 0}, {126.5, 127}, {-127.5, -128}, {200, -56}, {inf, 0}, {nan, 0},
	} {
		if got := roundI8(c.f); got != c.want {
			t.Errorf("roundI8(%g) = %d, want %d", c.f, got, c.want)
		}
	}
}

// TestF16Widening checks f16to32 on all 65536 patterns against dtype's
// float64 widening (NaN: quiet, sign and payload kept).
func TestF16Widening(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got := f16to32(uint16(h))
		want := dtype.Float16(h).Float64()
		if math.IsNaN(want) {
			wantBits := uint32(h&0x8000)<<16 | 0x7fc00000 | uint32(h&0x3ff)<<13
			if math.Float32bits(got) != wantBits {
				t.Fatalf("f16to32(%#04x) = %#08x, want %#08x", h, math.Float32bits(got), wantBits)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("f16to32(%#04x) = %g, want %g", h, got, want)
		}
	}
}

package cpu

import (
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
)

func BenchmarkSiluLoop(b *testing.B) {
	x := make([]float32, tileSize)
	d := make([]float32, tileSize)
	for i := range x {
		x[i] = float32(i%200)*0.03 - 3
	}
	for b.Loop() {
		for i, v := range x {
			dd := float64(v)
			d[i] = float32(dd / (1 + expFast(-dd)))
		}
	}
}

func TestExpFastAccuracy(t *testing.T) {
	for x := -100.0; x < 88; x += 0.0137 {
		got, want := expFast(x), math.Exp(x)
		if math.Abs(got-want) > 1e-8*want {
			t.Fatalf("expFast(%v) = %v, want %v", x, got, want)
		}
	}
	for _, x := range []float64{math.Inf(1), math.Inf(-1), 709, -745, -744, 0, -0.0} {
		got, want := expFast(x), math.Exp(x)
		if math.Abs(got-want) > 1e-8*want {
			t.Fatalf("expFast(%v) = %v, want %v", x, got, want)
		}
	}
	if !math.IsNaN(expFast(math.NaN())) {
		t.Fatal("expFast(NaN) is not NaN")
	}
}

func TestVMathAccuracy(t *testing.T) {
	if !hasVMath {
		t.Skip("no AVX2/FMA: the vector exp family is not used on this CPU")
	}
	var xs []float32
	for x := -110.0; x < 95; x += 0.00731 {
		xs = append(xs, float32(x))
	}
	xs = append(xs, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, -0.0, 88.72, 88.73, -87.3, -103.9, -104.5, 1e-8, -1e-8)
	refs := map[int]func(float64) float64{
		vExp:     math.Exp,
		vSigmoid: sigmoid64,
		vSilu:    silu64,
		vGelu:    gelu64,
	}
	for mode, ref := range refs {
		out := make([]float32, len(xs))
		vmath(out, xs, mode)
		worst := 0.0
		for i, x := range xs {
			want := float64(float32(ref(float64(x))))
			got := float64(out[i])
			if math.IsNaN(want) != math.IsNaN(got) {
				t.Fatalf("mode %d x=%v: got %v want %v", mode, x, got, want)
			}
			if math.IsNaN(want) || got == want {
				continue
			}
			if math.IsInf(want, 0) {
				t.Fatalf("mode %d x=%v: got %v want %v", mode, x, got, want)
			}
			// Error in units of the float32 spacing at want (subnormals
			// have a fixed spacing of 2^-149).
			ulp := math.Max(float64(math.Nextafter32(float32(math.Abs(want)), float32(math.Inf(1))))-math.Abs(want), 0x1p-149)
			err := math.Abs(got-want) / ulp
			worst = math.Max(worst, err)
			// Every result within 4 ulps, subnormal ones included (the
			// tails are recomputed in float64: vmathTails).
			if err > 4 {
				t.Fatalf("mode %d x=%v: got %v want %v (%.1f ulp)", mode, x, got, want, err)
			}
		}
		t.Logf("mode %d: worst %.2f ulp over %d points", mode, worst, len(xs))
	}
}

func BenchmarkVSilu(b *testing.B) {
	x := make([]float32, tileSize)
	d := make([]float32, tileSize)
	for i := range x {
		x[i] = float32(i%200)*0.03 - 3
	}
	for b.Loop() {
		vmath(d, x, vSilu)
	}
}

func TestF16Conversions(t *testing.T) {
	src := make([]float32, 0, 1<<17)
	for i := range 1 << 16 {
		h := dtype.Float16(i)
		v := h.Float32()
		src = append(src, v, math.Nextafter32(v, float32(math.Inf(1))))
	}
	src = append(src, 65519, 65520, 1e-8, -3e-8, 5.96e-8, 2.98e-8)
	h := make([]dtype.Float16, len(src))
	narrowF16(h, src)
	for i, v := range src {
		want := dtype.ToF16(v)
		if v != v {
			if h[i]&0x7c00 != 0x7c00 || h[i]&0x3ff == 0 {
				t.Fatalf("NaN %x narrowed to %#04x", math.Float32bits(v), h[i])
			}
			continue
		}
		if h[i] != want {
			t.Fatalf("narrowF16(%v) = %#04x, want %#04x", v, h[i], want)
		}
	}
	back := make([]float32, len(h))
	widenF16(back, h)
	for i := range h {
		if w := h[i].Float32(); back[i] != w && w == w {
			t.Fatalf("widenF16(%#04x) = %v, want %v", h[i], back[i], w)
		}
	}
}

func TestVMathExtremes(t *testing.T) {
	if !hasVMath {
		t.Skip("no AVX2/FMA")
	}
	xs := []float32{-1e30, -1e10, -200, 1e30, 200}
	for mode, want := range map[int][]float64{
		vExp:     {0, 0, 0, math.Inf(1), math.Inf(1)},
		vSigmoid: {0, 0, 0, 1, 1},
		vSilu:    {0, 0, 0, 1e30, 200},
		vGelu:    {0, 0, 0, 1e30, 200},
	} {
		out := make([]float32, len(xs))
		vmath(out, xs, mode)
		for i := range xs {
			if float64(out[i]) != float64(float32(want[i])) {
				t.Errorf("mode %d x=%v: got %v want %v", mode, xs[i], out[i], want[i])
			}
		}
	}
}

package cpu

import (
	"math"
	"testing"
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

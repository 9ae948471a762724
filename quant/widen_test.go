package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestWidenToQ8_0: Q4_0 and Q5_0 blocks (random bytes, so every integer
// and fifth bit occurs, and scales of every size) widened to Q8_0
// dequantize to the same bits; other formats and partial blocks are
// refused.
func TestWidenToQ8_0(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, f := range []Type{Q4_0, Q5_0, Q8_0} {
		tr, _ := f.Traits()
		const blocks = 257
		src := make([]byte, blocks*tr.Size)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		for b := range blocks {
			// A finite scale (random f16 bits minus the NaN/Inf exponent).
			src[b*tr.Size+1] &= 0x7b
		}
		w, err := WidenToQ8_0(f, src)
		if err != nil {
			t.Fatal(err)
		}
		if len(w) != blocks*34 {
			t.Fatalf("%v: %d bytes widened, want %d", f, len(w), blocks*34)
		}
		want := make([]float32, blocks*32)
		got := make([]float32, blocks*32)
		if err := Dequantize(f, src, want); err != nil {
			t.Fatal(err)
		}
		if err := Dequantize(Q8_0, w, got); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%v: value %d is %v widened, %v before", f, i, got[i], want[i])
			}
		}
	}
	if _, err := WidenToQ8_0(Q4_1, make([]byte, 20)); err == nil {
		t.Fatal("Q4_1 (an offset a block) widened")
	}
	if _, err := WidenToQ8_0(Q5_0, make([]byte, 23)); err == nil {
		t.Fatal("a partial block widened")
	}
}

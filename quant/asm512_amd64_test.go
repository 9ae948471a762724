package quant

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestQ4_0x2AVX512: the AVX-512 two-row Q4_0 kernel gives the AVX2 one's
// bits, and the twin's, row by row: random, biased (large integer sums)
// and extreme codes (0x00, 0x80, 0x7f, 0xff in either operand), every
// block count 1…40 (whole quads and every tail), and fresh random bytes
// with scales of any magnitude.
func TestQ4_0x2AVX512(t *testing.T) {
	if !hasDotAVX512 {
		t.Skip("no AVX-512 F, BW, VL, VBMI and VNNI here (or LOOM_CPU_AVX512=off): VecDotRows runs the AVX2 two-row kernel, which TestVecDotRows checks")
	}
	check := func(name string, x0, x1, y []byte, nb int) {
		t.Helper()
		var want [2]float32
		dotQ4_0Q8_0x2AVX2(&x0[0], &x1[0], &y[0], nb, &want)
		t0, t1 := dotQ4_0Q8_0(x0, y, nb), dotQ4_0Q8_0(x1, y, nb)
		// The activations prepared at both alignments a pooled buffer can
		// give, the assembly's layout the Go spec's.
		for _, shift := range []int{0, 8} {
			buf := make([]byte, nb*200+128)[shift:]
			yp, _ := prepQ4_0Y512(y, nb, buf)
			spec := make([]byte, len(yp))
			prepQ4_0Y512Go(y, nb/4, spec)
			if !bytes.Equal(yp, spec) {
				t.Fatalf("%s, %d blocks: prepQ4_0Y512Asm's layout differs from prepQ4_0Y512Go's", name, nb)
			}
			g0, g1 := dotQ4_0Q8_0x2Prep(x0, x1, y, yp, nb)
			if !sameBits(g0, want[0]) || !sameBits(g1, want[1]) || !sameBits(g0, t0) || !sameBits(g1, t1) {
				t.Fatalf("%s, %d blocks: AVX-512 [%v %v], AVX2 %v, twin [%v %v]", name, nb, g0, g1, want, t0, t1)
			}
		}
	}
	const maxNB = 40
	for nb := 1; nb <= maxNB; nb++ {
		s := uint64(nb)
		check("random", fillCodes(Q4_0, nb, -1, s), fillCodes(Q4_0, nb, -1, s+100), fillCodes(Q8_0, nb, -1, s+200), nb)
		check("biased", biasedCodes(Q4_0, nb, s), biasedCodes(Q4_0, nb, s+100), biasedCodes(Q8_0, nb, s+200), nb)
		for _, wf := range []int{0x00, 0x80, 0x7f, 0xff} {
			for _, af := range []int{0x00, 0x80, 0x7f, 0xff} {
				check("fill", fillCodes(Q4_0, nb, wf, s), fillCodes(Q4_0, nb, -1, s+100), fillCodes(Q8_0, nb, af, s+200), nb)
			}
		}
	}
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 5))
	for trial := range 300 {
		nb := 1 + r.IntN(maxNB)
		bufs := [][]byte{make([]byte, nb*18), make([]byte, nb*18), make([]byte, nb*34)}
		for _, b := range bufs {
			for i := range b {
				b[i] = byte(r.Uint32())
			}
		}
		if trial%10 != 0 { // finite scales, except one trial in ten
			for _, b := range bufs {
				bs := len(b) / nb
				for blk := range nb {
					b[blk*bs+1] &^= 0x40
				}
			}
		}
		check(fmt.Sprintf("fresh (seed %d)", seed), bufs[0], bufs[1], bufs[2], nb)
	}
}

// BenchmarkQ4_0x2AVX512: the two-row AVX-512 kernel over 64 rows of
// 4096 values in cache, the activations prepared outside the loop (a
// mat-vec prepares a row once for all its pairs of rows), bytes per
// weight.
func BenchmarkQ4_0x2AVX512(b *testing.B) {
	if !hasDotAVX512 {
		b.Skip("no AVX-512 F, BW, VL, VBMI and VNNI here")
	}
	const rows, nb = 64, 4096 / 32
	w := fillCodes(Q4_0, rows*nb, -1, 1)
	y := fillCodes(Q8_0, nb, -1, 2)
	yp, _ := prepQ4_0Y512(y, nb, nil)
	rb := nb * 18
	var out [2]float32
	b.SetBytes(int64(len(w)))
	for b.Loop() {
		for i := 0; i < rows; i += 2 {
			dotQ4_0Q8_0x2AVX512(&w[i*rb], &w[(i+1)*rb], &y[0], &yp[0], nb, &out)
		}
	}
}

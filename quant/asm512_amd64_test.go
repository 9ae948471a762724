package quant

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestQ4_0x4AVX512: the AVX-512 four-row Q4_0 kernel gives the AVX2 two-row
// one's bits, and the twin's, row by row: random, biased (large integer
// sums) and extreme codes (0x00, 0x80, 0x7f, 0xff in either operand),
// every block count 1…40 (whole quads and every tail, which the kernel
// does for rows a, b and then c, d), rows given twice (as VecDotRows's
// last two or three are), and fresh random bytes with scales of any
// magnitude.
func TestQ4_0x4AVX512(t *testing.T) {
	if !hasDotAVX512 {
		t.Skip("no AVX-512 F, BW, VL, VBMI and VNNI here (or LOOM_CPU_AVX512=off): VecDotRows runs the AVX2 two-row kernel, which TestVecDotRows checks")
	}
	check := func(name string, x0, x1, y []byte, nb int) {
		t.Helper()
		// Rows c and d: the two rows swapped, so that all four differ
		// where the rows do, then a row repeated.
		for _, rows := range [][4][]byte{{x0, x1, x1, x0}, {x0, x1, x1, x1}} {
			var want [4]float32
			var pair [2]float32
			dotQ4_0Q8_0x2AVX2(&rows[0][0], &rows[1][0], &y[0], nb, &pair)
			want[0], want[1] = pair[0], pair[1]
			dotQ4_0Q8_0x2AVX2(&rows[2][0], &rows[3][0], &y[0], nb, &pair)
			want[2], want[3] = pair[0], pair[1]
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
				got := dotQ4_0Q8_0x4Prep(rows[0], rows[1], rows[2], rows[3], y, yp, nb, 4*len(x0))
				for r := range 4 {
					if tw := dotQ4_0Q8_0(rows[r], y, nb); !sameBits(got[r], want[r]) || !sameBits(got[r], tw) {
						t.Fatalf("%s, %d blocks, row %d: AVX-512 %v, AVX2 %v, twin %v", name, nb, r, got[r], want[r], tw)
					}
				}
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

// BenchmarkQ4_0x4AVX512: the four-row AVX-512 kernel over 64 rows of
// 4096 values in cache, the activations prepared outside the loop (a
// mat-vec prepares a row once for all its rows), bytes per weight.
func BenchmarkQ4_0x4AVX512(b *testing.B) {
	if !hasDotAVX512 {
		b.Skip("no AVX-512 F, BW, VL, VBMI and VNNI here")
	}
	const rows, nb = 64, 4096 / 32
	w := fillCodes(Q4_0, rows*nb, -1, 1)
	y := fillCodes(Q8_0, nb, -1, 2)
	yp, _ := prepQ4_0Y512(y, nb, nil)
	rb := nb * 18
	var out [4]float32
	b.SetBytes(int64(len(w)))
	for b.Loop() {
		for i := 0; i < rows; i += 4 {
			dotQ4_0Q8_0x4AVX512(&w[i*rb], &w[(i+1)*rb], &w[(i+2)*rb], &w[(i+3)*rb], &y[0], &yp[0], nb, 4*rb, &out)
		}
	}
}

// TestPrepQ4_KY: the assembly layout of the Q4_K rows' prepared
// activations is its Go spec's.
func TestPrepQ4_KY(t *testing.T) {
	if !hasDotAVX2 {
		t.Skip("no AVX2 here: the Q4_K rows take no prepared activations")
	}
	for nb := 1; nb <= 5; nb++ {
		y := fillCodes(Q8_K, nb, -1, uint64(nb))
		want := make([]byte, 256*nb)
		prepQ4_KYGo(y, nb, want)
		if got := prepQ4_KY(y, nb, nil); !bytes.Equal(got, want) {
			t.Fatalf("%d blocks: prepQ4_KYAsm's layout differs from prepQ4_KYGo's", nb)
		}
	}
}

// TestPrepQ5_0Y: the assembly layout of the Q5_0 rows' prepared
// activations is its Go spec's, for whole quads and every tail (the last
// quad's missing blocks zero), random and extreme quants (−128 and 127
// throughout: the widest 16·Σy).
func TestPrepQ5_0Y(t *testing.T) {
	if !hasDotAVX2 {
		t.Skip("no AVX2 here: the Q5_0 rows take no prepared activations")
	}
	for nb := 1; nb <= 9; nb++ {
		for _, fill := range []int{-1, 0x80, 0x7f} {
			y := fillCodes(Q8_0, nb, fill, uint64(nb))
			want := make([]byte, q50Quad*((nb+3)/4))
			prepQ5_0YGo(y, nb, want)
			got := prepQ5_0Y(y, nb, bytes.Repeat([]byte{0xa5}, len(want))) // poisoned: the padding must be cleared
			if !bytes.Equal(got, want) {
				t.Fatalf("%d blocks, fill %#x: prepQ5_0YAsm's layout differs from prepQ5_0YGo's", nb, fill)
			}
		}
	}
}

// TestQ4_KRowsAVX512: the AVX-512 Q4_K row kernels (one activation row
// and two) give the AVX2 row kernel's bits and the twin's, row by row: random, biased (large
// integer sums) and extreme bytes (0x00, 0x80, 0x7f, 0xff in the codes
// and scales of either operand: scales and minimums of 63, codes of 15,
// q8 bytes of −128), 1…12 blocks, several rows a call; and its activation
// layout is prepQ4_KY's with each block's groups 1 and 2, 5 and 6
// swapped.
func TestQ4_KRowsAVX512(t *testing.T) {
	if !hasDotAVX512 {
		t.Skip("no AVX-512 F, BW, VL, VBMI and VNNI here (or LOOM_CPU_AVX512=off): VecDotRows runs the AVX2 Q4_K row kernel, which TestVecDotRows checks")
	}
	check := func(name string, w, y []byte, nb int) {
		t.Helper()
		rows := len(w) / (144 * nb)
		yp := prepQ4_KY512(y, nb, nil)
		yq := prepQ4_KY(y, nb, nil)
		for b := range nb {
			for g := range 8 {
				src := [8]int{0, 2, 1, 3, 4, 6, 5, 7}[g]
				if !bytes.Equal(yp[256*b+32*g:256*b+32*g+32], yq[256*b+32*src:256*b+32*src+32]) {
					t.Fatalf("%s, %d blocks: prepared group %d of block %d is not prepQ4_KY's group %d", name, nb, g, b, src)
				}
			}
		}
		got, want := make([]float32, rows), make([]float32, rows)
		dotRowsQ4_KQ8_KAVX512P(&w[0], 144*nb, rows, &y[0], &yp[0], nb, &got[0])
		dotRowsQ4_KQ8_KAVX2P(&w[0], 144*nb, rows, &y[0], &yq[0], nb, &want[0])
		for r := range rows {
			tw := dotQ4_KQ8_K(w[r*144*nb:(r+1)*144*nb], y, nb)
			if !sameBits(got[r], want[r]) || !sameBits(got[r], tw) {
				t.Fatalf("%s, %d blocks, row %d: AVX-512 %v, AVX2 %v, twin %v", name, nb, r, got[r], want[r], tw)
			}
		}
		// The two-row kernel: y as row a, and as row b beside another.
		y2 := fillCodes(Q8_K, nb, -1, uint64(7*nb+1))
		for _, ab := range [][2][]byte{{y, y2}, {y2, y}} {
			yp2 := prepQ4_KY2_512(ab[0], ab[1], nb, nil)
			outA, outB := make([]float32, rows), make([]float32, rows)
			dotRowsQ4_KQ8_KAVX512P2(&w[0], 144*nb, rows, &ab[0][0], &ab[1][0], &yp2[0], nb, &outA[0], &outB[0])
			for r := range rows {
				ta := dotQ4_KQ8_K(w[r*144*nb:(r+1)*144*nb], ab[0], nb)
				tb := dotQ4_KQ8_K(w[r*144*nb:(r+1)*144*nb], ab[1], nb)
				if !sameBits(outA[r], ta) || !sameBits(outB[r], tb) {
					t.Fatalf("%s, %d blocks, row %d, two rows: AVX-512 %v, %v; twin %v, %v", name, nb, r, outA[r], outB[r], ta, tb)
				}
			}
		}
	}
	for nb := 1; nb <= 12; nb++ {
		s := uint64(nb)
		rows := func(f func(i int) []byte) []byte {
			var w []byte
			for i := range 3 {
				w = append(w, f(i)...)
			}
			return w
		}
		check("random", rows(func(i int) []byte { return fillCodes(Q4_K, nb, -1, s+uint64(10*i)) }), fillCodes(Q8_K, nb, -1, s+200), nb)
		check("biased", rows(func(i int) []byte { return biasedCodes(Q4_K, nb, s+uint64(10*i)) }), biasedCodes(Q8_K, nb, s+200), nb)
		for _, wf := range []int{0x00, 0x80, 0x7f, 0xff} {
			for _, af := range []int{0x00, 0x80, 0x7f, 0xff} {
				check(fmt.Sprintf("fill %#x·%#x", wf, af), rows(func(i int) []byte { return fillCodes(Q4_K, nb, wf, s+uint64(10*i)) }), fillCodes(Q8_K, nb, af, s+200), nb)
			}
		}
	}
}

// TestQ6_KRowsAVX512: the AVX-512 Q6_K row kernels (one activation row
// and two) give the AVX2 row kernels' bits and the twin's, row by row:
// random, biased (large integer sums) and extreme bytes (0x00, 0x80, 0x7f,
// 0xff in the codes and scales of either operand: codes of 0 and 63, int8
// scales of −128 and 127, q8 bytes of −128), extreme scales d of either
// operand (f16 and float32: largest, smallest normal, subnormal, zero, ±∞,
// NaN), wholly random bytes, 1…20 blocks, 1…5 rows a call; and the
// prepared activations are prepQ6_KY512Go's at either alignment of the
// buffer given. VecDotRows and VecDotRows2 (which take these kernels
// here) are checked against the twin on the same bytes.
func TestQ6_KRowsAVX512(t *testing.T) {
	if !hasDotAVX512 {
		t.Skip("no AVX-512 F, BW, VL, VBMI and VNNI here (or LOOM_CPU_AVX512=off): VecDotRows runs the AVX2 Q6_K row kernels, which TestVecDotRows checks")
	}
	checked := 0
	check := func(name string, w, y []byte, nb int) {
		t.Helper()
		checked++
		rows := len(w) / (210 * nb)
		for _, shift := range []int{0, 8} {
			buf := make([]byte, nb*q6kPrep+128)[shift:]
			yp, _ := prepQ6_KY512(y, nb, buf)
			spec := make([]byte, nb*q6kPrep)
			prepQ6_KY512Go(y, nb, spec)
			if !bytes.Equal(yp, spec) {
				t.Fatalf("%s, %d blocks: prepQ6_KY512Asm's layout differs from prepQ6_KY512Go's", name, nb)
			}
		}
		yp, _ := prepQ6_KY512(y, nb, nil)
		got, want := make([]float32, rows), make([]float32, rows)
		dotRowsQ6_KQ8_KAVX512P(&w[0], 210*nb, rows, &y[0], &yp[0], nb, &got[0])
		dotRowsQ6_KQ8_KAVX2(&w[0], 210*nb, rows, &y[0], nb, &want[0])
		viaRows := make([]float32, rows)
		if err := VecDotRows(Q6_K, w, Q8_K, y, 256*nb, viaRows); err != nil {
			t.Fatal(err)
		}
		for r := range rows {
			tw := dotQ6_KQ8_K(w[r*210*nb:(r+1)*210*nb], y, nb)
			if !sameBits(got[r], want[r]) || !sameBits(got[r], tw) || !sameBits(viaRows[r], tw) {
				t.Fatalf("%s, %d blocks, row %d of %d: AVX-512 %v, AVX2 %v, twin %v, VecDotRows %v", name, nb, r, rows, got[r], want[r], tw, viaRows[r])
			}
		}
		// The two-row kernel: y as row a, and as row b beside another.
		y2 := fillCodes(Q8_K, nb, -1, uint64(7*nb+1))
		for _, ab := range [][2][]byte{{y, y2}, {y2, y}} {
			yp2, _ := prepQ6_KY2_512(ab[0], ab[1], nb, nil)
			for blk := range nb {
				for k, yr := range ab {
					at := 2*q6kPrep*blk + q6kPrep*k
					if !bytes.Equal(yp2[at:at+q6kPrep], spec1(yr, blk)) {
						t.Fatalf("%s, %d blocks: prepQ6_KY2_512's block %d of row %d is not prepQ6_KY512Go's", name, nb, blk, k)
					}
				}
			}
			outA, outB := make([]float32, rows), make([]float32, rows)
			wantA, wantB := make([]float32, rows), make([]float32, rows)
			viaA, viaB := make([]float32, rows), make([]float32, rows)
			dotRowsQ6_KQ8_KAVX512P2(&w[0], 210*nb, rows, &ab[0][0], &ab[1][0], &yp2[0], nb, &outA[0], &outB[0])
			dotRowsQ6_KQ8_KAVX2x2(&w[0], 210*nb, rows, &ab[0][0], &ab[1][0], nb, &wantA[0], &wantB[0])
			if err := VecDotRows2(Q6_K, w, Q8_K, ab[0], ab[1], 256*nb, viaA, viaB); err != nil {
				t.Fatal(err)
			}
			for r := range rows {
				ta := dotQ6_KQ8_K(w[r*210*nb:(r+1)*210*nb], ab[0], nb)
				tb := dotQ6_KQ8_K(w[r*210*nb:(r+1)*210*nb], ab[1], nb)
				if !sameBits(outA[r], ta) || !sameBits(outB[r], tb) || !sameBits(outA[r], wantA[r]) || !sameBits(outB[r], wantB[r]) ||
					!sameBits(viaA[r], ta) || !sameBits(viaB[r], tb) {
					t.Fatalf("%s, %d blocks, row %d of %d, two rows: AVX-512 %v, %v; AVX2 %v, %v; twin %v, %v; VecDotRows2 %v, %v",
						name, nb, r, rows, outA[r], outB[r], wantA[r], wantB[r], ta, tb, viaA[r], viaB[r])
				}
			}
		}
	}
	// rowsOf makes n weight rows of nb blocks from f.
	rowsOf := func(n int, f func(i int) []byte) []byte {
		var w []byte
		for i := range n {
			w = append(w, f(i)...)
		}
		return w
	}
	// setD sets every weight block's f16 d (bytes 208, 209) to h, or every
	// activation block's float32 d to f.
	setD16 := func(w []byte, h uint16) []byte {
		for b := 0; b < len(w); b += 210 {
			binary.LittleEndian.PutUint16(w[b+208:], h)
		}
		return w
	}
	setD32 := func(y []byte, f uint32) []byte {
		for b := 0; b < len(y); b += 292 {
			binary.LittleEndian.PutUint32(y[b:], f)
		}
		return y
	}
	// setScales sets every weight block's sixteen int8 scales to v (or,
	// v < 0, alternately −128 and 127).
	setScales := func(w []byte, v int) []byte {
		for b := 0; b < len(w); b += 210 {
			for j := range 16 {
				s := byte(v)
				if v < 0 {
					s = [2]byte{0x80, 0x7f}[j%2]
				}
				w[b+192+j] = s
			}
		}
		return w
	}
	for nb := 1; nb <= 20; nb++ {
		s := uint64(nb)
		nr := 1 + nb%5
		check("random", rowsOf(nr, func(i int) []byte { return fillCodes(Q6_K, nb, -1, s+uint64(10*i)) }), fillCodes(Q8_K, nb, -1, s+200), nb)
		check("biased", rowsOf(nr, func(i int) []byte { return biasedCodes(Q6_K, nb, s+uint64(10*i)) }), biasedCodes(Q8_K, nb, s+200), nb)
		for _, wf := range []int{0x00, 0x80, 0x7f, 0xff} {
			for _, af := range []int{0x00, 0x80, 0x7f, 0xff} {
				check(fmt.Sprintf("fill %#x·%#x", wf, af), rowsOf(nr, func(i int) []byte { return fillCodes(Q6_K, nb, wf, s+uint64(10*i)) }), fillCodes(Q8_K, nb, af, s+200), nb)
			}
		}
		// Extreme codes with extreme scales: all-0xff quants (codes 63)
		// and all-0x00 (codes 0, −32 after the offset) under scales of
		// −128, 127 and both, against q8 bytes of −128 and 127.
		for _, wf := range []int{0x00, 0xff} {
			for _, sc := range []int{0x80, 0x7f, -1} {
				for _, af := range []int{0x80, 0x7f} {
					check(fmt.Sprintf("fill %#x, scales %d·%#x", wf, sc, af), rowsOf(nr, func(i int) []byte { return setScales(fillCodes(Q6_K, nb, wf, s+uint64(10*i)), sc) }), fillCodes(Q8_K, nb, af, s+200), nb)
				}
			}
		}
		if nb > 6 {
			continue
		}
		// Every f16 d of the weights, and float32 d of the activations,
		// at the edges of their range.
		for _, h := range []uint16{0x7bff, 0x0400, 0x0001, 0x03ff, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfbff} {
			check(fmt.Sprintf("d %#04x", h), rowsOf(nr, func(i int) []byte { return setD16(fillCodes(Q6_K, nb, -1, s+uint64(10*i)), h) }), fillCodes(Q8_K, nb, -1, s+200), nb)
		}
		for _, f := range []uint32{0x7f7fffff, 0x00800000, 0x00000001, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x5f000000, 0x20000000} {
			check(fmt.Sprintf("dy %#08x", f), rowsOf(nr, func(i int) []byte { return biasedCodes(Q6_K, nb, s+uint64(10*i)) }), setD32(biasedCodes(Q8_K, nb, s+200), f), nb)
		}
	}
	// Wholly random bytes, d included (any magnitude, ∞ and NaN).
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 6))
	for range 200 {
		nb, nr := 1+r.IntN(20), 1+r.IntN(6)
		w, y := randomBytes(r, nr*nb*210), randomBytes(r, nb*292)
		check(fmt.Sprintf("fresh (seed %d)", seed), w, y, nb)
	}
	t.Logf("%d cases", checked)
}

// spec1 is prepQ6_KY512Go's 512 bytes for block blk of y.
func spec1(y []byte, blk int) []byte {
	p := make([]byte, q6kPrep)
	prepQ6_KY512Go(y[blk*292:(blk+1)*292], 1, p)
	return p
}

// rowsOf makes n weight rows from f (row i's bytes).
func rowsOf(n int, f func(i int) []byte) []byte {
	var w []byte
	for i := range n {
		w = append(w, f(i)...)
	}
	return w
}

// setF16 sets the f16 at offset off of every size-byte block of b to h.
func setF16(b []byte, size, off int, h uint16) []byte {
	for at := 0; at < len(b); at += size {
		binary.LittleEndian.PutUint16(b[at+off:], h)
	}
	return b
}

// setQ8KD sets every Q8_K block's float32 d to f.
func setQ8KD(y []byte, f uint32) []byte {
	for at := 0; at < len(y); at += 292 {
		binary.LittleEndian.PutUint32(y[at:], f)
	}
	return y
}

// f16Edges are f16 scales at the edges of their range: largest, smallest
// normal, smallest and largest subnormal, ±0, ±∞, NaN, most negative.
var f16Edges = []uint16{0x7bff, 0x0400, 0x0001, 0x03ff, 0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfbff}

// f32Edges are float32 activation scales at the edges of their range.
var f32Edges = []uint32{0x7f7fffff, 0x00800000, 0x00000001, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x5f000000, 0x20000000}

// TestQ5_KRowsAVX512: the AVX-512 Q5_K row kernels (one activation row
// and two) give the AVX2 row kernels' bits and the twin's, row by row, and
// so do VecDotRows and VecDotRows2 (which take them here): random, biased
// (large integer sums) and extreme bytes (0x00, 0x80, 0x7f, 0xff in the
// codes, qh and scales of either operand: scales and minimums of 63,
// codes of 0 and 31, q8 bytes of −128), extreme d and dmin of the weights
// (f16: largest, smallest normal, subnormal, ±0, ±∞, NaN) and d of the
// activations (float32), wholly random bytes, 1…20 blocks, 1…6 rows a
// call.
func TestQ5_KRowsAVX512(t *testing.T) {
	if !hasDotAVX512 {
		t.Skip("no AVX-512 F, BW, VL, VBMI and VNNI here (or LOOM_CPU_AVX512=off): VecDotRows runs the AVX2 Q5_K row kernels, which TestVecDotRows checks")
	}
	checked := 0
	check := func(name string, w, y []byte, nb int) {
		t.Helper()
		checked++
		rb := 176 * nb
		rows := len(w) / rb
		yp := prepQ4_KY512(y, nb, nil)
		got, want := make([]float32, rows), make([]float32, rows)
		dotRowsQ5_KQ8_KAVX512P(&w[0], rb, rows, &y[0], &yp[0], nb, &got[0])
		dotRowsQ5_KQ8_KAVX2(&w[0], rb, rows, &y[0], nb, &want[0])
		viaRows := make([]float32, rows)
		if err := VecDotRows(Q5_K, w, Q8_K, y, 256*nb, viaRows); err != nil {
			t.Fatal(err)
		}
		for r := range rows {
			tw := dotQ5_KQ8_K(w[r*rb:(r+1)*rb], y, nb)
			if !sameBits(got[r], want[r]) || !sameBits(got[r], tw) || !sameBits(viaRows[r], tw) {
				t.Fatalf("%s, %d blocks, row %d of %d: AVX-512 %v, AVX2 %v, twin %v, VecDotRows %v", name, nb, r, rows, got[r], want[r], tw, viaRows[r])
			}
		}
		// The two-row kernel: y as row a, and as row b beside another.
		y2 := fillCodes(Q8_K, nb, -1, uint64(7*nb+1))
		for _, ab := range [][2][]byte{{y, y2}, {y2, y}} {
			yp2 := prepQ4_KY2_512(ab[0], ab[1], nb, nil)
			outA, outB := make([]float32, rows), make([]float32, rows)
			wantA, wantB := make([]float32, rows), make([]float32, rows)
			viaA, viaB := make([]float32, rows), make([]float32, rows)
			dotRowsQ5_KQ8_KAVX512P2(&w[0], rb, rows, &ab[0][0], &ab[1][0], &yp2[0], nb, &outA[0], &outB[0])
			dotRowsQ5_KQ8_KAVX2x2(&w[0], rb, rows, &ab[0][0], &ab[1][0], nb, &wantA[0], &wantB[0])
			if err := VecDotRows2(Q5_K, w, Q8_K, ab[0], ab[1], 256*nb, viaA, viaB); err != nil {
				t.Fatal(err)
			}
			for r := range rows {
				ta := dotQ5_KQ8_K(w[r*rb:(r+1)*rb], ab[0], nb)
				tb := dotQ5_KQ8_K(w[r*rb:(r+1)*rb], ab[1], nb)
				if !sameBits(outA[r], ta) || !sameBits(outB[r], tb) || !sameBits(outA[r], wantA[r]) || !sameBits(outB[r], wantB[r]) ||
					!sameBits(viaA[r], ta) || !sameBits(viaB[r], tb) {
					t.Fatalf("%s, %d blocks, row %d of %d, two rows: AVX-512 %v, %v; AVX2 %v, %v; twin %v, %v; VecDotRows2 %v, %v",
						name, nb, r, rows, outA[r], outB[r], wantA[r], wantB[r], ta, tb, viaA[r], viaB[r])
				}
			}
		}
	}
	// setScales sets every weight block's 12 scale bytes to v (6-bit
	// scales and minimums of 63 for 0xff, 0 for 0x00).
	setScales := func(w []byte, v byte) []byte {
		for b := 0; b < len(w); b += 176 {
			for j := 4; j < 16; j++ {
				w[b+j] = v
			}
		}
		return w
	}
	for nb := 1; nb <= 20; nb++ {
		s := uint64(nb)
		nr := 1 + nb%6
		check("random", rowsOf(nr, func(i int) []byte { return fillCodes(Q5_K, nb, -1, s+uint64(10*i)) }), fillCodes(Q8_K, nb, -1, s+200), nb)
		check("biased", rowsOf(nr, func(i int) []byte { return biasedCodes(Q5_K, nb, s+uint64(10*i)) }), biasedCodes(Q8_K, nb, s+200), nb)
		for _, wf := range []int{0x00, 0x80, 0x7f, 0xff} {
			for _, af := range []int{0x00, 0x80, 0x7f, 0xff} {
				check(fmt.Sprintf("fill %#x·%#x", wf, af), rowsOf(nr, func(i int) []byte { return fillCodes(Q5_K, nb, wf, s+uint64(10*i)) }), fillCodes(Q8_K, nb, af, s+200), nb)
			}
		}
		// Codes 31 and 0 under scales of 63 and 0, random scales under
		// codes 31, against q8 bytes of −128 and 127.
		for _, wf := range []int{0x00, 0xff} {
			for _, af := range []int{0x80, 0x7f} {
				check(fmt.Sprintf("fill %#x, scales 0·%#x", wf, af), rowsOf(nr, func(i int) []byte { return setScales(fillCodes(Q5_K, nb, wf, s+uint64(10*i)), 0) }), fillCodes(Q8_K, nb, af, s+200), nb)
				check(fmt.Sprintf("fill %#x, random scales·%#x", wf, af), rowsOf(nr, func(i int) []byte {
					w := fillCodes(Q5_K, nb, wf, s+uint64(10*i))
					copy(w, fillCodes(Q5_K, nb, -1, s+uint64(10*i))[:16]) // block 0's scales random
					return w
				}), fillCodes(Q8_K, nb, af, s+200), nb)
			}
		}
		if nb > 6 {
			continue
		}
		// Every f16 d and dmin of the weights, and float32 d of the
		// activations, at the edges of their range.
		for _, h := range f16Edges {
			for _, off := range []int{0, 2} {
				check(fmt.Sprintf("d@%d %#04x", off, h), rowsOf(nr, func(i int) []byte { return setF16(biasedCodes(Q5_K, nb, s+uint64(10*i)), 176, off, h) }), biasedCodes(Q8_K, nb, s+200), nb)
			}
		}
		for _, f := range f32Edges {
			check(fmt.Sprintf("dy %#08x", f), rowsOf(nr, func(i int) []byte { return biasedCodes(Q5_K, nb, s+uint64(10*i)) }), setQ8KD(biasedCodes(Q8_K, nb, s+200), f), nb)
		}
	}
	// Wholly random bytes, d included (any magnitude, ∞ and NaN).
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 7))
	for range 200 {
		nb, nr := 1+r.IntN(20), 1+r.IntN(6)
		w, y := randomBytes(r, nr*nb*176), randomBytes(r, nb*292)
		check(fmt.Sprintf("fresh (seed %d)", seed), w, y, nb)
	}
	t.Logf("%d cases", checked)
}

// TestQ8_0RowsAVX512: the AVX-512 Q8_0 row kernel gives the AVX2 row
// kernel's bits and the twin's, row by row, and so does VecDotRows (which
// takes it here): random, biased (large integer sums) and extreme bytes
// (0x00, 0x80, 0x7f, 0xff in the quants of either operand: −128 against
// −128, 127 against −128, …), extreme f16 d of either operand (largest,
// smallest normal, subnormal, ±0, ±∞, NaN), wholly random bytes, 1…40
// blocks (whole quads and every tail), 1…9 rows a call (whole groups of
// four and every last group); and at either alignment of the buffer the
// activations are prepared in.
func TestQ8_0RowsAVX512(t *testing.T) {
	if !hasDotAVX512 {
		t.Skip("no AVX-512 F, BW, VL, VBMI and VNNI here (or LOOM_CPU_AVX512=off): VecDotRows runs the AVX2 Q8_0 row kernel, which TestVecDotRows checks")
	}
	checked := 0
	check := func(name string, w, y []byte, nb int) {
		t.Helper()
		checked++
		rb := 34 * nb
		rows := len(w) / rb
		want := make([]float32, rows)
		dotRowsQ8_0Q8_0AVX2(&w[0], rb, rows, &y[0], nb, &want[0])
		for _, shift := range []int{0, 8} {
			buf := make([]byte, nb*200+128)[shift:]
			yp, _ := prepQ4_0Y512(y, nb, buf)
			ypp := &y[0]
			if len(yp) > 0 {
				ypp = &yp[0]
			}
			got := make([]float32, rows+1)
			got[rows] = 12345 // not written past the rows
			dotRowsQ8_0Q8_0AVX512P(&w[0], rb, rows, &y[0], ypp, nb, &got[0])
			if got[rows] != 12345 {
				t.Fatalf("%s, %d blocks, %d rows: written past the rows", name, nb, rows)
			}
			for r := range rows {
				tw := dotQ8_0Q8_0(w[r*rb:(r+1)*rb], y, nb)
				if !sameBits(got[r], want[r]) || !sameBits(got[r], tw) {
					t.Fatalf("%s, %d blocks, row %d of %d: AVX-512 %v, AVX2 %v, twin %v", name, nb, r, rows, got[r], want[r], tw)
				}
			}
		}
		viaRows := make([]float32, rows)
		if err := VecDotRows(Q8_0, w, Q8_0, y, 32*nb, viaRows); err != nil {
			t.Fatal(err)
		}
		for r := range rows {
			if !sameBits(viaRows[r], want[r]) {
				t.Fatalf("%s, %d blocks, row %d of %d: VecDotRows %v, AVX2 %v", name, nb, r, rows, viaRows[r], want[r])
			}
		}
	}
	for nb := 1; nb <= 40; nb++ {
		s := uint64(nb)
		nr := 1 + nb%9
		check("random", rowsOf(nr, func(i int) []byte { return fillCodes(Q8_0, nb, -1, s+uint64(10*i)) }), fillCodes(Q8_0, nb, -1, s+200), nb)
		check("biased", rowsOf(nr, func(i int) []byte { return biasedCodes(Q8_0, nb, s+uint64(10*i)) }), biasedCodes(Q8_0, nb, s+200), nb)
		for _, wf := range []int{0x00, 0x80, 0x7f, 0xff} {
			for _, af := range []int{0x00, 0x80, 0x7f, 0xff} {
				check(fmt.Sprintf("fill %#x·%#x", wf, af), rowsOf(nr, func(i int) []byte { return fillCodes(Q8_0, nb, wf, s+uint64(10*i)) }), fillCodes(Q8_0, nb, af, s+200), nb)
			}
		}
		if nb > 9 {
			continue
		}
		// Every f16 d of the weights, or of the activations, at the edges
		// of its range.
		for _, h := range f16Edges {
			check(fmt.Sprintf("dx %#04x", h), rowsOf(nr, func(i int) []byte { return setF16(biasedCodes(Q8_0, nb, s+uint64(10*i)), 34, 0, h) }), biasedCodes(Q8_0, nb, s+200), nb)
			check(fmt.Sprintf("dy %#04x", h), rowsOf(nr, func(i int) []byte { return biasedCodes(Q8_0, nb, s+uint64(10*i)) }), setF16(biasedCodes(Q8_0, nb, s+200), 34, 0, h), nb)
		}
	}
	// Wholly random bytes, d included (any magnitude, ∞ and NaN).
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 8))
	for range 300 {
		nb, nr := 1+r.IntN(40), 1+r.IntN(9)
		w, y := randomBytes(r, nr*nb*34), randomBytes(r, nb*34)
		check(fmt.Sprintf("fresh (seed %d)", seed), w, y, nb)
	}
	t.Logf("%d cases", checked)
}

// randomBytes returns n bytes of r: wholly random blocks, scales
// included (any magnitude, ∞ and NaN).
func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

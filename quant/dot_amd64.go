package quant

import (
	"encoding/binary"
	"math"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasDotAVX2 reports whether the assembly dot products can run: AVX2 for
// the integer work, F16C for the f16 scales (VCVTPH2PS). x/sys/cpu also
// checks that the OS saves the YMM registers.
var hasDotAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasF16C

//go:noescape
func dotQ4_0Q8_0AVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ4_0Q8_0x2AVX2(x0, x1, y *byte, nb int, out *[2]float32)

//go:noescape
func dotRowsQ8_0Q8_0AVX2(x *byte, rb, n int, y *byte, nb int, out *float32)

//go:noescape
func dotRowsQ4_0Q8_0x2PAVX2(x *byte, rb, n int, y, yp *byte, nb int, out *float32)

// q40P2Quad is the bytes prepQ4_0Y2 gives each whole quad of activation
// blocks.
const q40P2Quad = 160

// prepQ4_0Y2 lays the whole quads of Q8_0 activation row y (nb blocks)
// out as dotRowsQ4_0Q8_0x2PAVX2 reads them, in buf if it holds them (else a
// new buffer): per quad of blocks b0…b3, 160 bytes — b0's quants 0–15 then
// b1's, b0's 16–31 then b1's, the same for b2 and b3, then the four
// blocks' 8·Σy as int32 and their scales as float32 (exact: every f16 is
// a float32).
func prepQ4_0Y2(y []byte, nb int, buf []byte) []byte {
	nq := nb / 4
	if cap(buf) < nq*q40P2Quad {
		buf = make([]byte, nq*q40P2Quad)
	}
	buf = buf[:nq*q40P2Quad]
	for q := range nq {
		p := buf[q*q40P2Quad : (q+1)*q40P2Quad]
		for j := range 4 {
			blk := y[(4*q+j)*34 : (4*q+j+1)*34]
			at := 64*(j/2) + 16*(j%2)
			copy(p[at:at+16], blk[2:18])
			copy(p[at+32:at+48], blk[18:34])
			var sum int32
			for _, v := range blk[2:34] {
				sum += int32(int8(v))
			}
			binary.LittleEndian.PutUint32(p[128+4*j:], uint32(8*sum))
			binary.LittleEndian.PutUint32(p[144+4*j:], math.Float32bits(lef16(blk)))
		}
	}
	return buf
}

// quadBuf returns buf (or a new buffer where it is too small) sized for
// the quads of nb activation blocks, quad bytes each, with the last,
// partial quad cleared: its missing blocks read as zeros.
func quadBuf(buf []byte, nb, quad int) []byte {
	n := (nb + 3) / 4 * quad
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	clear(buf[nb/4*quad:])
	return buf
}

//go:noescape
func dotRowsQ5_0Q8_0PAVX2(x *byte, rb, n int, yp *byte, nb int, out *float32)

//go:noescape
func dotRowsQ5_0Q8_0P2AVX2(x *byte, rb, n int, ypa, ypb *byte, nb int, outA, outB *float32)

// q50Quad is the bytes prepQ5_0Y gives each quad of activation blocks.
const q50Quad = 160

// prepQ5_0Y lays Q8_0 activation row y (nb blocks) out as
// dotRowsQ5_0Q8_0PAVX2 reads it, in buf if it holds it (else a new
// buffer): per quad of blocks b0…b3 (the last one padded with zero
// blocks), 160 bytes — the four blocks' 32 quants one after another, then
// their 16·Σy as int32 and their scales as float32 (exact: every f16 is a
// float32).
func prepQ5_0Y(y []byte, nb int, buf []byte) []byte {
	buf = quadBuf(buf, nb, q50Quad)
	if nb > 0 {
		_ = y[nb*34-1]
		prepQ5_0YAsm(&y[0], &buf[0], nb)
	}
	return buf
}

//go:noescape
func prepQ5_0YAsm(y, yp *byte, nb int)

// prepQ5_0YGo is prepQ5_0YAsm in Go: the layout's definition, which
// TestPrepQ5_0Y holds the assembly to.
func prepQ5_0YGo(y []byte, nb int, buf []byte) {
	for b := range nb {
		blk := y[b*34 : b*34+34]
		p := buf[(b/4)*q50Quad:]
		j := b % 4
		copy(p[32*j:32*j+32], blk[2:34])
		var sum int32
		for _, v := range blk[2:34] {
			sum += int32(int8(v))
		}
		binary.LittleEndian.PutUint32(p[128+4*j:], uint32(16*sum))
		binary.LittleEndian.PutUint32(p[144+4*j:], math.Float32bits(lef16(blk)))
	}
}

// dotRowsQ5_0 runs Q5_0 rows [i, len(out)) on dotRowsQ5_0Q8_0PAVX2, the
// activations prepared once for them.
func dotRowsQ5_0(rows, arow []byte, rb, nb, i int, out []float32) int {
	buf := prepBuf()
	*buf = prepQ5_0Y(arow, nb, *buf)
	_ = rows[len(out)*rb-1] // the rows' bytes, checked once
	dotRowsQ5_0Q8_0PAVX2(&rows[i*rb], rb, len(out)-i, &(*buf)[0], nb, &out[i])
	prepBufs.Put(buf)
	return len(out)
}

//go:noescape
func dotRowsQ8_0Q8_0PAVX2(x *byte, rb, n int, yp *byte, nb int, out *float32)

// q80Quad is the bytes prepQ8_0Y gives each quad of activation blocks.
const q80Quad = 144

// prepQ8_0Y lays Q8_0 activation row y (nb blocks) out as
// dotRowsQ8_0Q8_0PAVX2 reads it, in buf if it holds it (else a new
// buffer): per quad of blocks (the last one padded with zero blocks), 144
// bytes — the four blocks' 32 quants one after another, then their scales
// as float32 (exact).
func prepQ8_0Y(y []byte, nb int, buf []byte) []byte {
	buf = quadBuf(buf, nb, q80Quad)
	for b := range nb {
		blk := y[b*34 : b*34+34]
		p := buf[(b/4)*q80Quad:]
		j := b % 4
		copy(p[32*j:32*j+32], blk[2:34])
		binary.LittleEndian.PutUint32(p[128+4*j:], math.Float32bits(lef16(blk)))
	}
	return buf
}

// dotRowsQ8_0P runs Q8_0 rows [i, len(out)) on dotRowsQ8_0Q8_0PAVX2, the
// activations prepared once for them.
func dotRowsQ8_0P(rows, arow []byte, rb, nb, i int, out []float32) int {
	buf := prepBuf()
	*buf = prepQ8_0Y(arow, nb, *buf)
	_ = rows[len(out)*rb-1] // the rows' bytes, checked once
	dotRowsQ8_0Q8_0PAVX2(&rows[i*rb], rb, len(out)-i, &(*buf)[0], nb, &out[i])
	prepBufs.Put(buf)
	return len(out)
}

// hasDotAVX512 reports whether the AVX-512 kernels (dotQ4_0Q8_0x4AVX512,
// the Q4_K, Q5_K, Q6_K and Q8_0 row kernels) can run: AVX-512 F and BW (512-bit byte
// and word operations), VBMI (VPERMT2B, VPERMB), VNNI (VPDPBUSD,
// VPDPWSSD), on top of AVX2 and F16C for their tails and scales.
// LOOM_CPU_AVX512=off turns it off (for comparing the two).
var hasDotAVX512 = hasDotAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VBMI && cpu.X86.HasAVX512VNNI && os.Getenv("LOOM_CPU_AVX512") != "off"

//go:noescape
func dotQ4_0Q8_0x4AVX512(x0, x1, x2, x3, y, yp *byte, nb, ahead int, out *[4]float32)

//go:noescape
func prepQ4_0Y512Asm(y, yp *byte, nq int)

// q40Quad is the bytes prepQ4_0Y512 gives each whole quad of activation
// blocks, and q40Scales the bytes of its scales (after all the quads).
const (
	q40Quad   = 192
	q40Scales = 64
)

// prepQ4_0Y512 lays the whole quads of Q8_0 activation row y (nb blocks)
// out as dotQ4_0Q8_0x4AVX512 reads them (prepQ4_0Y512Asm; prepQ4_0Y512Go
// is its spec), in buf if it holds them (else a new buffer), 64-byte
// aligned. It returns the layout and the buffer that holds it.
func prepQ4_0Y512(y []byte, nb int, buf []byte) (prep, held []byte) {
	nq := nb / 4
	need := nq*(q40Quad+q40Scales) + 64
	if cap(buf) < need {
		buf = make([]byte, need)
	}
	buf = buf[:need]
	off := int((64 - uintptr(unsafe.Pointer(&buf[0]))%64) % 64)
	p := buf[off : off+nq*(q40Quad+q40Scales)]
	if nq > 0 {
		prepQ4_0Y512Asm(&y[0], &p[0], nq)
	}
	return p, buf
}

// prepQ4_0Y512Go is prepQ4_0Y512Asm in Go, into p (nq·224 bytes): per
// quad q, byte 16b+i of its first 64 bytes is quant i of block 4q+b and
// of the next 64 quant 16+i, the next 16 int32 are −8·Σ of the 4 codes of
// each half's dword (the 8s' integer product with both halves), and
// after every quad the quads' four scales as float32, each four times (the
// kernel multiplies four rows' blocks at once: [d0 d0 d0 d0 d1 …]).
func prepQ4_0Y512Go(y []byte, nq int, p []byte) {
	for q := range nq {
		d := p[q*q40Quad : (q+1)*q40Quad]
		for b := range 4 {
			blk := y[(4*q+b)*34:]
			copy(d[16*b:16*b+16], blk[2:18])
			copy(d[64+16*b:64+16*b+16], blk[18:34])
			f := math.Float32bits(lef16(blk))
			for r := range 4 {
				binary.LittleEndian.PutUint32(p[nq*q40Quad+q40Scales*q+16*b+4*r:], f)
			}
		}
		for j := range 16 {
			var sum int32
			for t := range 4 {
				sum += int32(int8(d[4*j+t])) + int32(int8(d[64+4*j+t]))
			}
			binary.LittleEndian.PutUint32(d[128+4*j:], uint32(-8*sum))
		}
	}
}

//go:noescape
func dotRowsQ4_1Q8_1AVX2(x *byte, rb, n int, y *byte, nb int, out *float32)

//go:noescape
func dotRowsQ5_0Q8_0AVX2(x *byte, rb, n int, y *byte, nb int, out *float32)

//go:noescape
func dotRowsQ5_1Q8_1AVX2(x *byte, rb, n int, y *byte, nb int, out *float32)

//go:noescape
func dotQ2_KQ8_KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ3_KQ8_KAVX2(x, y *byte, nb int, sums *[8]float32)

//go:noescape
func dotQ4_KQ8_KAVX2(x, y *byte, nb int, sums *[8]float32) float32

//go:noescape
func dotRowsQ4_KQ8_KAVX2P(x *byte, rb, n int, y, yp *byte, nb int, out *float32)

//go:noescape
func dotRowsQ4_KQ8_KAVX512P(x *byte, rb, n int, y, yp *byte, nb int, out *float32)

//go:noescape
func dotRowsQ4_KQ8_KAVX512P2(x *byte, rb, n int, ya, yb, yp *byte, nb int, outA, outB *float32)

//go:noescape
func dotRowsQ6_KQ8_KAVX2(x *byte, rb, n int, y *byte, nb int, out *float32)

//go:noescape
func dotRowsQ4_KQ8_KAVX2P2(x *byte, rb, n int, ya, yb, yp *byte, nb int, outA, outB *float32)

//go:noescape
func dotRowsQ5_KQ8_KAVX2(x *byte, rb, n int, y *byte, nb int, out *float32)

//go:noescape
func dotRowsQ5_KQ8_KAVX2x2(x *byte, rb, n int, ya, yb *byte, nb int, outA, outB *float32)

//go:noescape
func dotRowsQ6_KQ8_KAVX2x2(x *byte, rb, n int, ya, yb *byte, nb int, outA, outB *float32)

//go:noescape
func dotRowsQ6_KQ8_KAVX512P(x *byte, rb, n int, y, yp *byte, nb int, out *float32)

//go:noescape
func dotRowsQ6_KQ8_KAVX512P2(x *byte, rb, n int, ya, yb, yp *byte, nb int, outA, outB *float32)

//go:noescape
func prepQ6_KY512Asm(y, yp *byte, nb, stride int)

//go:noescape
func dotRowsQ8_0Q8_0AVX512P(x *byte, rb, n int, y, yp *byte, nb int, out *float32)

//go:noescape
func dotRowsQ5_KQ8_KAVX512P(x *byte, rb, n int, y, yp *byte, nb int, out *float32)

//go:noescape
func dotRowsQ5_KQ8_KAVX512P2(x *byte, rb, n int, ya, yb, yp *byte, nb int, outA, outB *float32)

// The wrappers run on rows VecDot has checked (whole blocks, exact
// lengths), so the assembly reads only inside them; nb = 0 never reaches it.

// dotQ4_0Q8_0x2Asm is the Q4_0 dot of two weight rows against one
// activation row with AVX2 (with AVX-512, VecDotRows takes dotRowsPrepared
// first).
func dotQ4_0Q8_0x2Asm(x0, x1, y []byte, nb int) (float32, float32) {
	if nb == 0 {
		return 0, 0
	}
	var out [2]float32
	dotQ4_0Q8_0x2AVX2(&x0[0], &x1[0], &y[0], nb, &out)
	return out[0], out[1]
}

// dotQ4_0Q8_0x4Prep is the AVX-512 Q4_0 dot of four weight rows against
// activation row y, its quads prepared by prepQ4_0Y512 (yp) once for all
// the rows; it prefetches each row ahead bytes past where it reads (a
// prefetch only: any distance is safe).
func dotQ4_0Q8_0x4Prep(x0, x1, x2, x3, y, yp []byte, nb, ahead int) [4]float32 {
	var out [4]float32
	if nb == 0 {
		return out
	}
	ypp := &y[0] // not read without a whole quad
	if len(yp) > 0 {
		ypp = &yp[0]
	}
	dotQ4_0Q8_0x4AVX512(&x0[0], &x1[0], &x2[0], &x3[0], &y[0], ypp, nb, ahead, &out)
	return out
}

// prepBufs keeps prepQ4_0Y512's buffers for VecDotRows's calls (a decode
// step's products call it per chunk of rows).
var prepBufs sync.Pool

// prepBuf takes a buffer from prepBufs (a new empty one if it has none);
// the caller puts the same pointer back, so a call allocates nothing once
// the buffer has grown.
func prepBuf() *[]byte {
	if buf, _ := prepBufs.Get().(*[]byte); buf != nil {
		return buf
	}
	return new([]byte)
}

// dotRowsPrepared runs VecDotRows's rows [i, len(out)) on a kernel that
// takes the activations prepared once for all the rows (Q4_0, Q4_K; Q5_K,
// Q6_K and Q8_0 with AVX-512), or
// walks the rows itself (Q4_K, Q5_K, Q6_K, Q8_0, Q4_1, Q5_0, Q5_1: no call
// and Go loop a row), where
// there is one for w on this CPU, and returns the first row it did not do
// (ok false: none).
func dotRowsPrepared(w Type, rows, arow []byte, rb, nb, i int, out []float32) (int, bool) {
	switch {
	case w == Q4_0 && hasDotAVX512 && len(out)-i >= 2 && nb >= 4:
		return dotRowsQ4_0(rows, arow, rb, nb, i, out), true
	case w == Q4_0 && hasDotAVX2 && len(out)-i >= 2 && nb >= 4:
		return dotRowsQ4_0x2(rows, arow, rb, nb, i, out), true
	case w == Q4_K && hasDotAVX2 && len(out)-i >= 2:
		return dotRowsQ4_K(rows, arow, rb, nb, i, out), true
	case w == Q6_K && hasDotAVX512 && len(out)-i >= 2 && nb > 0:
		return dotRowsQ6_K(rows, arow, rb, nb, i, out), true
	case w == Q5_K && hasDotAVX512 && len(out)-i >= 2 && nb > 0:
		return dotRowsQ5_K(rows, arow, rb, nb, i, out), true
	case w == Q8_0 && hasDotAVX512 && len(out)-i >= 2 && nb > 0:
		return dotRowsQ8_0(rows, arow, rb, nb, i, out), true
	case w == Q5_0 && hasDotAVX2 && len(out)-i >= 2 && nb > 0:
		return dotRowsQ5_0(rows, arow, rb, nb, i, out), true
	case w == Q8_0 && hasDotAVX2 && len(out)-i >= 2 && nb > 0:
		return dotRowsQ8_0P(rows, arow, rb, nb, i, out), true
	case (w == Q5_K || w == Q6_K || w == Q8_0 || w == Q4_1 || w == Q5_1) && hasDotAVX2 && len(out)-i >= 2 && nb > 0:
		f := dotRowsQ6_KQ8_KAVX2
		switch w {
		case Q5_K:
			f = dotRowsQ5_KQ8_KAVX2
		case Q8_0:
			f = dotRowsQ8_0Q8_0AVX2
		case Q4_1:
			f = dotRowsQ4_1Q8_1AVX2
		case Q5_1:
			f = dotRowsQ5_1Q8_1AVX2
		}
		_ = rows[len(out)*rb-1] // the rows' bytes, checked once
		f(&rows[i*rb], rb, len(out)-i, &arow[0], nb, &out[i])
		return len(out), true
	}
	return i, false
}

// dotRowsQ4_0 runs Q4_0 rows [i, len(out)) four at a time on the AVX-512
// kernel (the last two or three rows as four, some twice).
func dotRowsQ4_0(rows, arow []byte, rb, nb, i int, out []float32) int {
	buf := prepBuf()
	var yp []byte
	yp, *buf = prepQ4_0Y512(arow, nb, *buf)
	row := func(r int) []byte { return rows[r*rb : (r+1)*rb] }
	for ; i+3 < len(out); i += 4 {
		// Prefetched a group of four rows ahead: the next group's bytes.
		s := dotQ4_0Q8_0x4Prep(row(i), row(i+1), row(i+2), row(i+3), arow, yp, nb, 4*rb)
		copy(out[i:i+4], s[:])
	}
	if n := len(out) - i; n >= 2 {
		// Rows i, i+1 and, if there, i+2 (the fourth a repeat).
		s := dotQ4_0Q8_0x4Prep(row(i), row(i+1), row(i+n-1), row(i), arow, yp, nb, 4*rb)
		copy(out[i:i+n], s[:n])
		i += n
	}
	prepBufs.Put(buf)
	return i
}

// dotRowsQ4_0x2 runs the pairs of Q4_0 rows in [i, len(out)) on
// dotRowsQ4_0Q8_0x2PAVX2, the activations prepared once, and returns the
// row after the last pair (an odd last row is VecDotRows's to do).
func dotRowsQ4_0x2(rows, arow []byte, rb, nb, i int, out []float32) int {
	pairs := (len(out) - i) / 2
	if pairs == 0 {
		return i
	}
	buf := prepBuf()
	*buf = prepQ4_0Y2(arow, nb, *buf)
	_ = rows[(i+2*pairs)*rb-1] // the rows' bytes, checked once
	dotRowsQ4_0Q8_0x2PAVX2(&rows[i*rb], rb, pairs, &arow[0], &(*buf)[0], nb, &out[i])
	prepBufs.Put(buf)
	return i + 2*pairs
}

// prepQ4_KY lays the quants of Q8_K activation row y (nb blocks, at
// least one) out as dotRowsQ4_KQ8_KAVX2P reads them, in
// buf if it holds them (else a new buffer): per block 256 bytes, each 32
// of them permuted as LANES32 permutes codes (prepQ4_KYAsm; prepQ4_KYGo
// is its spec).
func prepQ4_KY(y []byte, nb int, buf []byte) []byte {
	if cap(buf) < 256*nb {
		buf = make([]byte, 256*nb)
	}
	buf = buf[:256*nb]
	prepQ4_KYAsm(&y[0], &buf[0], nb)
	return buf
}

// prepQ4_KYGo is prepQ4_KYAsm in Go, into p (256·nb bytes): byte 4p+i of
// each 32 is element p+8i of the 32 (VPERMD by permidx, then VPSHUFB by
// lanemask), so that dword p holds lane p's four elements.
func prepQ4_KYGo(y []byte, nb int, p []byte) {
	for b := range nb {
		q8, d := y[b*292+4:b*292+260], p[b*256:(b+1)*256]
		for g := 0; g < 256; g += 32 {
			for l := range 8 {
				for i := range 4 {
					d[g+4*l+i] = q8[g+l+8*i]
				}
			}
		}
	}
}

//go:noescape
func prepQ4_KYAsm(y, yp *byte, nb int)

// prepQ4_KY512 lays y's quants out as dotRowsQ4_KQ8_KAVX512P reads them:
// prepQ4_KY's 32-byte groups (each permuted as LANES32 permutes codes),
// per block in the order chunk 0's low-nibble elements, chunk 1's, chunk
// 0's high-nibble elements, chunk 1's, then the same for chunks 2 and 3
// (prepQ4_KY has each chunk's low then high: groups 1 and 2, 5 and 6
// change places).
func prepQ4_KY512(y []byte, nb int, buf []byte) []byte {
	buf = prepQ4_KY(y, nb, buf)
	swapQ4_KY512(buf, nb)
	return buf
}

// swapQ4_KY512 turns n 256-byte blocks of prepQ4_KY's layout into
// prepQ4_KY512's: groups 1 and 2, 5 and 6 of each change places.
func swapQ4_KY512(buf []byte, n int) {
	var t [32]byte
	for b := range n {
		for _, g := range [2]int{1, 5} {
			a, c := buf[256*b+32*g:256*b+32*g+32], buf[256*b+32*g+32:256*b+32*g+64]
			copy(t[:], a)
			copy(a, c)
			copy(c, t[:])
		}
	}
}

// dotRowsQ4_K runs Q4_K rows [i, len(out)) on dotRowsQ4_KQ8_KAVX512P
// (where hasDotAVX512) or dotRowsQ4_KQ8_KAVX2P, y's quants prepared once.
//
// The AVX-512 kernel multiplies the codes two chunks a step on 512-bit
// registers (the scales' unpacking, the minimums' sum and the float tail
// are the AVX2 kernel's, ~70 of a block's ~100 instructions now). Session
// 52, this project's 2-core AMD EPYC VM (Zen 5: full-width 512-bit
// units), against the AVX2 kernel: 64 rows of 4,096 weights in cache
// (BenchmarkVecDotRows q4_k, four runs each) 6.5–6.7 µs against 7.9–8.1;
// 16,384 such rows (38 MB) on one thread 21.5–21.6 GB/s against
// 16.4–17.5; the 1B-shaped Q4_K model's decode step on 2 cores (one
// process, the model loaded anew for each of six runs, alternating, 40
// steps each) 28.3, 31.7 and 33.3 tokens/s against 26.3, 27.2 and 26.2.
// (Session 35's VNNI form of the products measured no faster on a Zen 4
// VM, whose 512-bit units take two passes: see dotQ4_KQ8_KAVX2.) Tried
// and taken back (same session, same VM, the same bits): the scales and
// minimums unpacked on vector registers, all sixteen at once (two byte
// shuffles, masks and shifts: 16 instructions where K45SCALES's are ~36,
// most of them scalar), with the products' scales by VPERMW from the
// words, or by VPERMD from doubled words: in cache 7.0–7.2 and 7.3–7.5 µs
// against 6.5–6.8 — the scalar unpacking runs on integer units the
// vector work leaves idle, and the vector one lengthens the chain ahead
// of the products.
func dotRowsQ4_K(rows, arow []byte, rb, nb, i int, out []float32) int {
	if nb == 0 {
		clear(out[i:])
		return len(out)
	}
	buf := prepBuf()
	kernel := dotRowsQ4_KQ8_KAVX2P
	if hasDotAVX512 {
		*buf = prepQ4_KY512(arow, nb, *buf)
		kernel = dotRowsQ4_KQ8_KAVX512P
	} else {
		*buf = prepQ4_KY(arow, nb, *buf)
	}
	yp := *buf
	if n := len(out) - i; n > 0 {
		_ = rows[(i+n)*rb-1] // the rows' bytes, checked once
		kernel(&rows[i*rb], rb, n, &arow[0], &yp[0], nb, &out[i])
	}
	prepBufs.Put(buf)
	return len(out)
}

// blockAsm wraps a one-row assembly dot that returns its whole sum.
func blockAsm(f func(x, y *byte, nb int) float32) func(x, y []byte, nb int) float32 {
	return func(x, y []byte, nb int) float32 {
		if nb == 0 {
			return 0
		}
		return f(&x[0], &y[0], nb)
	}
}

// rowsAsm wraps an assembly dot over rows that stores each row's whole
// sum as a one-row dot.
func rowsAsm(f func(x *byte, rb, n int, y *byte, nb int, out *float32)) func(x, y []byte, nb int) float32 {
	return func(x, y []byte, nb int) float32 {
		if nb == 0 {
			return 0
		}
		var out float32
		f(&x[0], len(x), 1, &y[0], nb, &out)
		return out
	}
}

// minLanesAsm wraps an assembly dot that returns the minimums' sum and
// leaves its eight float lanes in sums (Q4_K, Q5_K): the lanes are added
// to that sum in order, as the twins do.
func minLanesAsm(f func(x, y *byte, nb int, sums *[8]float32) float32) func(x, y []byte, nb int) float32 {
	return func(x, y []byte, nb int) float32 {
		if nb == 0 {
			return 0
		}
		var sums [8]float32
		sumf := f(&x[0], &y[0], nb, &sums)
		for _, s := range sums {
			sumf += s
		}
		return sumf
	}
}

// lanesAsm wraps an assembly dot that leaves its eight float lanes in
// sums: the lanes are added in order at the end, as the twins do.
func lanesAsm(f func(x, y *byte, nb int, sums *[8]float32)) func(x, y []byte, nb int) float32 {
	return func(x, y []byte, nb int) float32 {
		if nb == 0 {
			return 0
		}
		var sums [8]float32
		f(&x[0], &y[0], nb, &sums)
		var sumf float32
		for _, s := range sums {
			sumf += s
		}
		return sumf
	}
}

// asmDots are the assembly replacements of the VecDot twins, installed in
// the codec table when the CPU can run them. They return the twins' bits
// exactly (asm_test.go checks it on the golden rows, random and extreme
// bytes, and every block count up to 40).
var asmDots = map[Type]func(w, a []byte, nb int) float32{
	Q4_0: blockAsm(dotQ4_0Q8_0AVX2),
	Q4_1: rowsAsm(dotRowsQ4_1Q8_1AVX2),
	Q5_0: rowsAsm(dotRowsQ5_0Q8_0AVX2),
	Q5_1: rowsAsm(dotRowsQ5_1Q8_1AVX2),
	Q8_0: rowsAsm(dotRowsQ8_0Q8_0AVX2),
	Q2_K: blockAsm(dotQ2_KQ8_KAVX2),
	Q3_K: lanesAsm(dotQ3_KQ8_KAVX2),
	Q4_K: minLanesAsm(dotQ4_KQ8_KAVX2),
	Q5_K: rowsAsm(dotRowsQ5_KQ8_KAVX2),
	Q6_K: rowsAsm(dotRowsQ6_KQ8_KAVX2),
}

// asmDots2 are the two-row forms (two weight rows, one activation row)
// where there is one; VecDotRows uses them when the CPU can run them.
var asmDots2 = map[Type]func(w0, w1, a []byte, nb int) (float32, float32){
	Q4_0: dotQ4_0Q8_0x2Asm,
}

func init() {
	if !hasDotAVX2 {
		return
	}

	for t, f := range asmDots {
		c := codecs[t]
		c.dot = f
		codecs[t] = c
	}
}

// dotRows2Prepared is dotRowsPrepared for two activation rows at once
// (VecDotRows2): every weight row against arowA into outA and against
// arowB into outB, where a kernel takes both (Q4_K, Q5_K and Q6_K with
// AVX2; Q4_K, Q5_K and Q6_K on 512-bit registers with AVX-512); false where
// none does.
func dotRows2Prepared(w Type, rows, arowA, arowB []byte, rb, nb int, outA, outB []float32) bool {
	if !hasDotAVX2 || nb == 0 {
		return false
	}
	switch w {
	case Q4_K:
		dotRows2Q4_K(rows, arowA, arowB, rb, nb, outA, outB)
		return true
	case Q5_0:
		if n := len(outA); n > 0 {
			bufA, bufB := prepBuf(), prepBuf()
			*bufA = prepQ5_0Y(arowA, nb, *bufA)
			*bufB = prepQ5_0Y(arowB, nb, *bufB)
			_, _ = rows[n*rb-1], outB[n-1] // checked once for the assembly
			dotRowsQ5_0Q8_0P2AVX2(&rows[0], rb, n, &(*bufA)[0], &(*bufB)[0], nb, &outA[0], &outB[0])
			prepBufs.Put(bufA)
			prepBufs.Put(bufB)
		}
		return true
	case Q6_K, Q5_K:
		if hasDotAVX512 {
			if w == Q6_K {
				dotRows2Q6_K(rows, arowA, arowB, rb, nb, outA, outB)
			} else {
				dotRows2Q5_K(rows, arowA, arowB, rb, nb, outA, outB)
			}
			return true
		}
		n := len(outA)
		if n == 0 {
			return true
		}
		_, _ = rows[n*rb-1], outB[n-1] // checked once for the assembly
		// Each row's lanes added in order inside the kernels, as their
		// one-row forms and the twin add them.
		f := dotRowsQ5_KQ8_KAVX2x2
		if w == Q6_K {
			f = dotRowsQ6_KQ8_KAVX2x2
		}
		f(&rows[0], rb, n, &arowA[0], &arowB[0], nb, &outA[0], &outB[0])
		return true
	default:
		return false
	}
}

// dotRows2Q4_K runs every Q4_K row against arowA and arowB on
// dotRowsQ4_KQ8_KAVX512P2 (where hasDotAVX512) or dotRowsQ4_KQ8_KAVX2P2,
// the two rows' quants prepared once (nb > 0). Session 52's Zen 5 VM, 64
// rows of 4,096 weights in cache against two activation rows
// (BenchmarkVecDotRows2 q4_k/pair, six runs each, alternating): 10.5–10.9
// µs against 12.9–13.3 with the AVX2 kernel.
func dotRows2Q4_K(rows, arowA, arowB []byte, rb, nb int, outA, outB []float32) {
	n := len(outA)
	if n == 0 {
		return
	}
	buf := prepBuf()
	kernel := dotRowsQ4_KQ8_KAVX2P2
	if hasDotAVX512 {
		*buf = prepQ4_KY2_512(arowA, arowB, nb, *buf)
		kernel = dotRowsQ4_KQ8_KAVX512P2
	} else {
		*buf = prepQ4_KY2(arowA, arowB, nb, *buf)
	}
	yp := *buf
	_, _ = rows[n*rb-1], outB[n-1] // checked once for the assembly
	// Each row's lanes added in order, as dotRowsQ4_K and the twin do.
	kernel(&rows[0], rb, n, &arowA[0], &arowB[0], &yp[0], nb, &outA[0], &outB[0])
	prepBufs.Put(buf)
}

// prepQ4_KY2_512 is prepQ4_KY2 for dotRowsQ4_KQ8_KAVX512P2: each row's
// 256 bytes a block in prepQ4_KY512's order.
func prepQ4_KY2_512(a, b []byte, nb int, buf []byte) []byte {
	buf = prepQ4_KY2(a, b, nb, buf)
	swapQ4_KY512(buf, 2*nb)
	return buf
}

// prepQ4_KY2 lays two Q8_K activation rows' quants out as
// dotRowsQ4_KQ8_KAVX2P2 reads them, in buf if it holds them: per block a's
// 256 bytes as prepQ4_KY lays them, then b's.
func prepQ4_KY2(a, b []byte, nb int, buf []byte) []byte {
	if cap(buf) < 512*nb {
		buf = make([]byte, 512*nb)
	}
	buf = buf[:512*nb]
	for i := range nb {
		prepQ4_KYAsm(&a[i*292], &buf[512*i], 1)
		prepQ4_KYAsm(&b[i*292], &buf[512*i+256], 1)
	}
	return buf
}

// q6kPrep is the bytes prepQ6_KY512 gives each Q8_K block.
const q6kPrep = 512

// prepQ6_KY512 lays the quants of Q8_K activation row y (nb blocks, at
// least one) out as dotRowsQ6_KQ8_KAVX512P reads them, in buf if it holds
// them (else a new buffer), 64-byte aligned (the kernel reads it 64 bytes
// at a time): per block 512 bytes (prepQ6_KY512Asm; prepQ6_KY512Go is its
// spec). It returns the layout and the buffer that holds it.
func prepQ6_KY512(y []byte, nb int, buf []byte) (prep, held []byte) {
	p, buf := alignedBuf(nb*q6kPrep, buf)
	prepQ6_KY512Asm(&y[0], &p[0], nb, q6kPrep)
	return p, buf
}

// prepQ6_KY2_512 is prepQ6_KY512 for dotRowsQ6_KQ8_KAVX512P2: per block
// a's 512 bytes, then b's.
func prepQ6_KY2_512(a, b []byte, nb int, buf []byte) (prep, held []byte) {
	p, buf := alignedBuf(2*nb*q6kPrep, buf)
	prepQ6_KY512Asm(&a[0], &p[0], nb, 2*q6kPrep)
	prepQ6_KY512Asm(&b[0], &p[q6kPrep], nb, 2*q6kPrep)
	return p, buf
}

// alignedBuf returns n bytes of buf (a new buffer if it is too small)
// starting at a multiple of 64 bytes, and the buffer that holds them.
func alignedBuf(n int, buf []byte) (p, held []byte) {
	if cap(buf) < n+64 {
		buf = make([]byte, n+64)
	}
	buf = buf[:n+64]
	off := int((64 - uintptr(unsafe.Pointer(&buf[0]))%64) % 64)
	return buf[off : off+n], buf
}

// prepQ6_KY512Go is prepQ6_KY512Asm in Go, into p (nb·512 bytes): per
// block, its first 256 bytes are the quants as prepQ4_KY lays them (byte
// 4l+i of each 32 is element l+8i of those 32), and int16 word j of the
// next 256 bytes is 32 times the sum of bytes 2j and 2j+1 of the first
// 256 as int8 — the pair VPMADDUBSW adds (y_l + y_l+8 of a sub-block),
// the −32 offset's term, for the codes at the same place.
func prepQ6_KY512Go(y []byte, nb int, p []byte) {
	for b := range nb {
		d := p[b*q6kPrep : (b+1)*q6kPrep]
		prepQ4_KYGo(y[b*292:(b+1)*292], 1, d[:256])
		for j := range 128 {
			s := 32 * (int32(int8(d[2*j])) + int32(int8(d[2*j+1])))
			binary.LittleEndian.PutUint16(d[256+2*j:], uint16(int16(s)))
		}
	}
}

// dotRowsQ6_K runs Q6_K rows [i, len(out)) on dotRowsQ6_KQ8_KAVX512P, y's
// quants prepared once (nb > 0). The AVX2 kernel permutes y's quants and
// forms their −32 offset terms again for every weight row; here that is
// done once a call, and the kernel's loop only rebuilds and multiplies
// the codes: ~2.1× the AVX2 row kernel in cache, ~1.8× from memory (see
// dotRowsQ6_KQ8_KAVX512P in dot_amd64.s for the numbers).
func dotRowsQ6_K(rows, arow []byte, rb, nb, i int, out []float32) int {
	buf := prepBuf()
	var yp []byte
	yp, *buf = prepQ6_KY512(arow, nb, *buf)
	runRowsP(dotRowsQ6_KQ8_KAVX512P, rows, arow, &yp[0], rb, nb, i, out)
	prepBufs.Put(buf)
	return len(out)
}

// rowsKernelP is a row kernel on activations prepared once a call (yp),
// and rows2KernelP its two-activation-row form.
type (
	rowsKernelP  func(x *byte, rb, n int, y, yp *byte, nb int, out *float32)
	rows2KernelP func(x *byte, rb, n int, ya, yb, yp *byte, nb int, outA, outB *float32)
)

// runRowsP runs rows [i, len(out)) on kernel k, the rows' bytes checked
// once for the assembly.
func runRowsP(k rowsKernelP, rows, arow []byte, yp *byte, rb, nb, i int, out []float32) {
	if n := len(out) - i; n > 0 {
		_ = rows[(i+n)*rb-1]
		k(&rows[i*rb], rb, n, &arow[0], yp, nb, &out[i])
	}
}

// runRows2P runs every row against arowA and arowB on kernel k (at least
// one row), the bytes and outputs checked once for the assembly.
func runRows2P(k rows2KernelP, rows, arowA, arowB []byte, yp *byte, rb, nb int, outA, outB []float32) {
	n := len(outA)
	_, _ = rows[n*rb-1], outB[n-1]
	k(&rows[0], rb, n, &arowA[0], &arowB[0], yp, nb, &outA[0], &outB[0])
}

// dotRows2Q6_K runs every Q6_K row against arowA and arowB on
// dotRowsQ6_KQ8_KAVX512P2, the two rows' quants prepared once (nb > 0):
// 7.9–8.4 µs against 17.8–19.6 for dotRowsQ6_KQ8_KAVX2x2 (64 rows of
// 4,096 weights in cache, session 53's Zen 5 VM).
func dotRows2Q6_K(rows, arowA, arowB []byte, rb, nb int, outA, outB []float32) {
	n := len(outA)
	if n == 0 {
		return
	}
	buf := prepBuf()
	var yp []byte
	yp, *buf = prepQ6_KY2_512(arowA, arowB, nb, *buf)
	runRows2P(dotRowsQ6_KQ8_KAVX512P2, rows, arowA, arowB, &yp[0], rb, nb, outA, outB)
	prepBufs.Put(buf)
}

// dotRowsQ5_K runs Q5_K rows [i, len(out)) on dotRowsQ5_KQ8_KAVX512P, y's
// quants prepared once as for Q4_K (prepQ4_KY512; nb > 0): the AVX2 row
// kernel permutes them again for every weight row (see
// dotRowsQ5_KQ8_KAVX512P in dot_amd64.s for the numbers).
func dotRowsQ5_K(rows, arow []byte, rb, nb, i int, out []float32) int {
	buf := prepBuf()
	*buf = prepQ4_KY512(arow, nb, *buf)
	runRowsP(dotRowsQ5_KQ8_KAVX512P, rows, arow, &(*buf)[0], rb, nb, i, out)
	prepBufs.Put(buf)
	return len(out)
}

// dotRows2Q5_K runs every Q5_K row against arowA and arowB on
// dotRowsQ5_KQ8_KAVX512P2, the two rows' quants prepared once as for Q4_K
// (prepQ4_KY2_512; nb > 0).
func dotRows2Q5_K(rows, arowA, arowB []byte, rb, nb int, outA, outB []float32) {
	n := len(outA)
	if n == 0 {
		return
	}
	buf := prepBuf()
	*buf = prepQ4_KY2_512(arowA, arowB, nb, *buf)
	runRows2P(dotRowsQ5_KQ8_KAVX512P2, rows, arowA, arowB, &(*buf)[0], rb, nb, outA, outB)
	prepBufs.Put(buf)
}

// dotRowsQ8_0 runs Q8_0 rows [i, len(out)) on dotRowsQ8_0Q8_0AVX512P, four
// at a time, y's whole quads prepared once as for Q4_0 (prepQ4_0Y512;
// nb > 0): see dotRowsQ8_0Q8_0AVX512P in dot_amd64.s for the numbers.
func dotRowsQ8_0(rows, arow []byte, rb, nb, i int, out []float32) int {
	buf := prepBuf()
	var yp []byte
	yp, *buf = prepQ4_0Y512(arow, nb, *buf)
	ypp := &arow[0] // not read without a whole quad
	if len(yp) > 0 {
		ypp = &yp[0]
	}
	runRowsP(dotRowsQ8_0Q8_0AVX512P, rows, arow, ypp, rb, nb, i, out)
	prepBufs.Put(buf)
	return len(out)
}

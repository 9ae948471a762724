package quant

import (
	"os"

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
func dotQ8_0Q8_0AVX2(x, y *byte, nb int) float32

// hasDotAVX512 reports whether dotQ4_0Q8_0x2AVX512 can run: AVX-512 F
// and BW (512-bit byte and word operations), VBMI (VPERMT2B), VNNI
// (VPDPBUSD), on top of AVX2 and F16C for its tail and scales.
// LOOM_CPU_AVX512=off turns it off (for comparing the two).
var hasDotAVX512 = hasDotAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VBMI && cpu.X86.HasAVX512VNNI && os.Getenv("LOOM_CPU_AVX512") != "off"

//go:noescape
func dotQ4_0Q8_0x2AVX512(x0, x1, y *byte, nb int, out *[2]float32)

//go:noescape
func dotQ4_1Q8_1AVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ5_0Q8_0AVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ5_1Q8_1AVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ2_KQ8_KAVX2(x, y *byte, nb int) float32

//go:noescape
func dotQ3_KQ8_KAVX2(x, y *byte, nb int, sums *[8]float32)

//go:noescape
func dotQ4_KQ8_KAVX2(x, y *byte, nb int, sums *[8]float32) float32

//go:noescape
func dotQ5_KQ8_KAVX2(x, y *byte, nb int, sums *[8]float32) float32

//go:noescape
func dotQ6_KQ8_KAVX2(x, y *byte, nb int, sums *[8]float32)

// The wrappers run on rows VecDot has checked (whole blocks, exact
// lengths), so the assembly reads only inside them; nb = 0 never reaches it.

// dotQ4_0Q8_0x2Asm is the Q4_0 dot of two weight rows against one
// activation row.
func dotQ4_0Q8_0x2Asm(x0, x1, y []byte, nb int) (float32, float32) {
	if nb == 0 {
		return 0, 0
	}
	var out [2]float32
	if hasDotAVX512 {
		dotQ4_0Q8_0x2AVX512(&x0[0], &x1[0], &y[0], nb, &out)
	} else {
		dotQ4_0Q8_0x2AVX2(&x0[0], &x1[0], &y[0], nb, &out)
	}
	return out[0], out[1]
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
	Q4_1: blockAsm(dotQ4_1Q8_1AVX2),
	Q5_0: blockAsm(dotQ5_0Q8_0AVX2),
	Q5_1: blockAsm(dotQ5_1Q8_1AVX2),
	Q8_0: blockAsm(dotQ8_0Q8_0AVX2),
	Q2_K: blockAsm(dotQ2_KQ8_KAVX2),
	Q3_K: lanesAsm(dotQ3_KQ8_KAVX2),
	Q4_K: minLanesAsm(dotQ4_KQ8_KAVX2),
	Q5_K: minLanesAsm(dotQ5_KQ8_KAVX2),
	Q6_K: lanesAsm(dotQ6_KQ8_KAVX2),
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

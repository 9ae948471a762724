package quant

import "golang.org/x/sys/cpu"

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

//go:noescape
func dotQ4_KQ8_KAVX2(x, y *byte, nb int, sums *[8]float32) float32

//go:noescape
func dotQ6_KQ8_KAVX2(x, y *byte, nb int, sums *[8]float32)

// The wrappers run on rows VecDot has checked (whole blocks, exact
// lengths), so the assembly reads only inside them; nb = 0 never reaches it.

func dotQ4_0Q8_0Asm(x, y []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	return dotQ4_0Q8_0AVX2(&x[0], &y[0], nb)
}

// dotQ4_0Q8_0x2Asm is dotQ4_0Q8_0Asm of two weight rows against one
// activation row.
func dotQ4_0Q8_0x2Asm(x0, x1, y []byte, nb int) (float32, float32) {
	if nb == 0 {
		return 0, 0
	}
	var out [2]float32
	dotQ4_0Q8_0x2AVX2(&x0[0], &x1[0], &y[0], nb, &out)
	return out[0], out[1]
}

func dotQ8_0Q8_0Asm(x, y []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	return dotQ8_0Q8_0AVX2(&x[0], &y[0], nb)
}

func dotQ4_KQ8_KAsm(x, y []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	var sums [8]float32
	sumf := dotQ4_KQ8_KAVX2(&x[0], &y[0], nb, &sums)
	for _, s := range sums {
		sumf += s
	}
	return sumf
}

func dotQ6_KQ8_KAsm(x, y []byte, nb int) float32 {
	if nb == 0 {
		return 0
	}
	var sums [8]float32
	dotQ6_KQ8_KAVX2(&x[0], &y[0], nb, &sums)
	var sumf float32
	for _, s := range sums {
		sumf += s
	}
	return sumf
}

// asmDots are the assembly replacements of the VecDot twins, installed in
// the codec table when the CPU can run them. They return the twins' bits
// exactly (asm_test.go checks it on the golden rows, random and extreme
// bytes, and every block count up to 40).
var asmDots = map[Type]func(w, a []byte, nb int) float32{
	Q4_0: dotQ4_0Q8_0Asm,
	Q8_0: dotQ8_0Q8_0Asm,
	Q4_K: dotQ4_KQ8_KAsm,
	Q6_K: dotQ6_KQ8_KAsm,
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

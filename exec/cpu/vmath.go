package cpu

import "github.com/loomgraph/loom/dtype"

// Vector math modes of vmath8.
const (
	vExp = iota
	vSigmoid
	vSilu
	vGelu
)

// vmath computes one of the exp-family ops over x into dst with the vector
// kernel, including the tail (padded through a small buffer), so that every
// element of every tile takes the same code path: fused and unfused plans
// then agree bit for bit whatever their tile boundaries.
func vmath(dst, x []float32, mode int) {
	n := len(x) &^ 7
	if n > 0 {
		vmath8(&dst[0], &x[0], n, mode)
	}
	if n < len(x) {
		var in, out [8]float32
		copy(in[:], x[n:])
		vmath8(&out[0], &in[0], 8, mode)
		copy(dst[n:], out[:len(x)-n])
	}
}

// widenF16 converts f16 values to float32 (exactly, either way).
func widenF16(dst []float32, src []dtype.Float16) {
	n := len(dst) &^ 7
	if hasF16C && n > 0 {
		f16to32(&dst[0], (*uint16)(&src[0]), n)
	} else {
		n = 0
	}
	for i := n; i < len(dst); i++ {
		dst[i] = f16ToF32[src[i]]
	}
}

// narrowF16 rounds float32 values to f16, nearest even. The hardware and
// dtype.ToF16 agree on every number; NaNs become the canonical quiet NaN
// (sign kept) on both paths, as on the GPU (the hardware alone would keep the
// payload's top bits).
func narrowF16(dst []dtype.Float16, src []float32) {
	n := len(src) &^ 7
	if hasF16C && n > 0 {
		f32to16((*uint16)(&dst[0]), &src[0], n)
		for i, v := range src[:n] {
			if v != v {
				dst[i] = dst[i]&0x8000 | 0x7e00
			}
		}
	} else {
		n = 0
	}
	for i := n; i < len(src); i++ {
		dst[i] = dtype.ToF16(src[i])
	}
}

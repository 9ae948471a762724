package quant

// The 32-element formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1: one scale
// (and for the _1 formats a minimum) per block, stored as f16. Quantizers
// follow GGML's quantize_row_<t>_ref, which is what ggml_quantize_chunk runs
// for these types without an importance matrix; dequantizers follow
// dequantize_row_<t>. Callers have checked the lengths.

// absMaxSigned returns the value of largest magnitude in x (the first one on
// ties) and its magnitude, as the Q4_0/Q5_0 quantizers pick it.
func absMaxSigned(x []float32) (amax, max float32) {
	for _, v := range x {
		if a := absf(v); amax < a {
			amax, max = a, v
		}
	}
	return amax, max
}

// minMax returns the smallest and largest value, starting from ±FLT_MAX as
// GGML's Q4_1/Q5_1 quantizers do.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = 3.40282346638528859811704183484516925440e+38, -3.40282346638528859811704183484516925440e+38
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func recip(d float32) float32 {
	if d != 0 {
		return 1 / d
	}
	return 0
}

// Q4_0: d f16 | qs[16]; element j in the low nibble of qs[j], element j+16
// in the high nibble; value = d·(q − 8). The scale is max/−8 where max is
// the signed value of largest magnitude, so that value maps to q = 0.
func quantizeQ4_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x, y := src[i*32:i*32+32], dst[i*18:i*18+18]
		_, max := absMaxSigned(x)
		d := max / -8
		id := recip(d)
		putf16(y, d)
		for j := 0; j < 16; j++ {
			// (int8_t)(x·id + 8.5), capped at 15 (x·id is ≥ −8 by choice of d).
			xi0 := uint8(min(15, int32(int8(truncI32(float32(x[j]*id)+8.5)))))
			xi1 := uint8(min(15, int32(int8(truncI32(float32(x[j+16]*id)+8.5)))))
			y[2+j] = xi0 | xi1<<4
		}
	}
}

func dequantizeQ4_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		x, y := src[i*18:i*18+18], dst[i*32:i*32+32]
		d := lef16(x)
		for j := 0; j < 16; j++ {
			y[j] = float32(int32(x[2+j]&0xf)-8) * d
			y[j+16] = float32(int32(x[2+j]>>4)-8) * d
		}
	}
}

// Q4_1: d f16, m f16 | qs[16]; value = d·q + m with m the block minimum.
func quantizeQ4_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x, y := src[i*32:i*32+32], dst[i*20:i*20+20]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		id := recip(d)
		putf16(y, d)
		putf16(y[2:], lo)
		for j := 0; j < 16; j++ {
			xi0 := uint8(min(15, int32(int8(truncI32(float32((x[j]-lo)*id)+0.5)))))
			xi1 := uint8(min(15, int32(int8(truncI32(float32((x[j+16]-lo)*id)+0.5)))))
			y[4+j] = xi0 | xi1<<4
		}
	}
}

func dequantizeQ4_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		x, y := src[i*20:i*20+20], dst[i*32:i*32+32]
		d, m := lef16(x), lef16(x[2:])
		for j := 0; j < 16; j++ {
			y[j] = float32(float32(x[4+j]&0xf)*d) + m
			y[j+16] = float32(float32(x[4+j]>>4)*d) + m
		}
	}
}

// Q5_0: d f16 | qh[4] | qs[16]; the fifth bit of element j is bit j of qh
// read as a little-endian uint32; value = d·(q − 16).
func quantizeQ5_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x, y := src[i*32:i*32+32], dst[i*22:i*22+22]
		_, max := absMaxSigned(x)
		d := max / -16
		id := recip(d)
		putf16(y, d)
		var qh uint32
		for j := 0; j < 16; j++ {
			xi0 := uint8(min(31, int32(int8(truncI32(float32(x[j]*id)+16.5)))))
			xi1 := uint8(min(31, int32(int8(truncI32(float32(x[j+16]*id)+16.5)))))
			y[6+j] = xi0&0xf | (xi1&0xf)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		put32(y[2:], qh)
	}
}

func dequantizeQ5_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		x, y := src[i*22:i*22+22], dst[i*32:i*32+32]
		d := lef16(x)
		qh := le32(x[2:])
		for j := 0; j < 16; j++ {
			h0 := int32(qh>>j<<4) & 0x10
			h1 := int32(qh>>(j+12)) & 0x10
			y[j] = float32((int32(x[6+j]&0xf)|h0)-16) * d
			y[j+16] = float32((int32(x[6+j]>>4)|h1)-16) * d
		}
	}
}

// Q5_1: d f16, m f16 | qh[4] | qs[16]; value = d·q + m.
func quantizeQ5_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x, y := src[i*32:i*32+32], dst[i*24:i*24+24]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		id := recip(d)
		putf16(y, d)
		putf16(y[2:], lo)
		var qh uint32
		for j := 0; j < 16; j++ {
			// (uint8_t)(x + 0.5): no cap in GGML (the value is ≤ 31.5).
			xi0 := uint8(truncI32(float32((x[j]-lo)*id) + 0.5))
			xi1 := uint8(truncI32(float32((x[j+16]-lo)*id) + 0.5))
			y[8+j] = xi0&0xf | (xi1&0xf)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		put32(y[4:], qh)
	}
}

func dequantizeQ5_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		x, y := src[i*24:i*24+24], dst[i*32:i*32+32]
		d, m := lef16(x), lef16(x[2:])
		qh := le32(x[4:])
		for j := 0; j < 16; j++ {
			h0 := uint32(qh>>j<<4) & 0x10
			h1 := uint32(qh>>(j+12)) & 0x10
			y[j] = float32(float32(uint32(x[8+j]&0xf)|h0)*d) + m
			y[j+16] = float32(float32(uint32(x[8+j]>>4)|h1)*d) + m
		}
	}
}

// Q8_0: d f16 | qs[32] int8; d = amax/127, q = round(x/d) (half away from
// zero, as roundf); value = d·q.
func quantizeQ8_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x, y := src[i*32:i*32+32], dst[i*34:i*34+34]
		var amax float32
		for _, v := range x {
			amax = cMax(amax, absf(v))
		}
		d := amax / 127
		id := recip(d)
		putf16(y, d)
		for j := 0; j < 32; j++ {
			y[2+j] = byte(roundI8(x[j] * id))
		}
	}
}

func dequantizeQ8_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		x, y := src[i*34:i*34+34], dst[i*32:i*32+32]
		d := lef16(x)
		for j := 0; j < 32; j++ {
			y[j] = float32(int8(x[2+j])) * d
		}
	}
}

// Q8_1: d f16, s f16 | qs[32] int8; as Q8_0 plus s = d·Σq (GGML's
// quantize_row_q8_1_ref; Candle's CUDA quantize_q8_1 stores Σx instead,
// see doc.go). Dequantization is d·q (GGML has none for this activation
// format; s is redundant).
func quantizeQ8_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x, y := src[i*32:i*32+32], dst[i*36:i*36+36]
		var amax float32
		for _, v := range x {
			amax = cMax(amax, absf(v))
		}
		d := amax / 127
		id := recip(d)
		putf16(y, d)
		var sum int32
		for j := 0; j < 16; j++ {
			q0, q1 := roundI8(x[j]*id), roundI8(x[j+16]*id)
			y[4+j], y[4+j+16] = byte(q0), byte(q1)
			sum += int32(q0) + int32(q1)
		}
		putf16(y[2:], float32(sum)*d)
	}
}

func dequantizeQ8_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		x, y := src[i*36:i*36+36], dst[i*32:i*32+32]
		d := lef16(x)
		for j := 0; j < 32; j++ {
			y[j] = float32(int8(x[4+j])) * d
		}
	}
}

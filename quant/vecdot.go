package quant

import "math"

// Dot-product twins. Each computes what GGML's generic (non-SIMD)
// ggml_vec_dot_<w>_<act> computes: an exact integer dot product per block
// (or per sub-block, scaled by the integer sub-block scales), then float32
// arithmetic with the f16/f32 block scales, accumulated in GGML's order.
// They are the specification that assembly and GPU kernels are tested
// against. Callers have checked the lengths; nb is the number of weight
// blocks.

func dotQ4_0Q8_0(x, y []byte, nb int) float32 {
	var sumf float32
	for ib := 0; ib < nb; ib++ {
		xb, yb := x[ib*18:ib*18+18], y[ib*34:ib*34+34]
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			s0 += (int32(xb[2+j]&0xf) - 8) * int32(int8(yb[2+j]))
			s1 += (int32(xb[2+j]>>4) - 8) * int32(int8(yb[2+j+16]))
		}
		// sumi·dx·dy, left to right.
		sumf += float32(float32(s0+s1) * lef16(xb) * lef16(yb))
	}
	return sumf
}

func dotQ4_1Q8_1(x, y []byte, nb int) float32 {
	var sumf float32
	for ib := 0; ib < nb; ib++ {
		xb, yb := x[ib*20:ib*20+20], y[ib*36:ib*36+36]
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			s0 += int32(xb[4+j]&0xf) * int32(int8(yb[4+j]))
			s1 += int32(xb[4+j]>>4) * int32(int8(yb[4+j+16]))
		}
		// (dx·dy)·sumi + m·s: the Q8_1 block's s carries the activation sum.
		sumf += float32(float32(lef16(xb)*lef16(yb))*float32(s0+s1)) + float32(lef16(xb[2:])*lef16(yb[2:]))
	}
	return sumf
}

func dotQ5_0Q8_0(x, y []byte, nb int) float32 {
	var sumf float32
	for ib := 0; ib < nb; ib++ {
		xb, yb := x[ib*22:ib*22+22], y[ib*34:ib*34+34]
		qh := le32(xb[2:])
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			h0 := int32(qh>>j&1) << 4
			h1 := int32(qh>>(j+16)&1) << 4
			s0 += ((int32(xb[6+j]&0xf) | h0) - 16) * int32(int8(yb[2+j]))
			s1 += ((int32(xb[6+j]>>4) | h1) - 16) * int32(int8(yb[2+j+16]))
		}
		sumf += float32(float32(lef16(xb)*lef16(yb)) * float32(s0+s1))
	}
	return sumf
}

func dotQ5_1Q8_1(x, y []byte, nb int) float32 {
	var sumf float32
	for ib := 0; ib < nb; ib++ {
		xb, yb := x[ib*24:ib*24+24], y[ib*36:ib*36+36]
		qh := le32(xb[4:])
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			h0 := int32(qh>>j&1) << 4
			h1 := int32(qh>>(j+16)&1) << 4
			s0 += (int32(xb[8+j]&0xf) | h0) * int32(int8(yb[4+j]))
			s1 += (int32(xb[8+j]>>4) | h1) * int32(int8(yb[4+j+16]))
		}
		sumf += float32(float32(lef16(xb)*lef16(yb))*float32(s0+s1)) + float32(lef16(xb[2:])*lef16(yb[2:]))
	}
	return sumf
}

func dotQ8_0Q8_0(x, y []byte, nb int) float32 {
	var sumf float32
	for ib := 0; ib < nb; ib++ {
		xb, yb := x[ib*34:ib*34+34], y[ib*34:ib*34+34]
		var s int32
		for j := 0; j < 32; j++ {
			s += int32(int8(xb[2+j])) * int32(int8(yb[2+j]))
		}
		// sumi·(dx·dy).
		sumf += float32(float32(s) * float32(lef16(xb)*lef16(yb)))
	}
	return sumf
}

// q8kD reads a Q8_K block's f32 scale.
func q8kD(yb []byte) float32 { return math.Float32frombits(le32(yb)) }

// q8kBsum reads the j-th of a Q8_K block's 16 int16 sums.
func q8kBsum(yb []byte, j int) int32 { return int32(int16(le16(yb[260+2*j:]))) }

func dotQ2_KQ8_K(x, y []byte, nb int) float32 {
	var sumf float32
	for i := 0; i < nb; i++ {
		xb, yb := x[i*84:i*84+84], y[i*292:i*292+292]
		sc, q8 := xb[0:16], yb[4:260]
		var summs int32
		for j := 0; j < 16; j++ {
			summs += q8kBsum(yb, j) * int32(sc[j]>>4)
		}
		dy := q8kD(yb)
		dall := dy * lef16(xb[80:])
		dmin := dy * lef16(xb[82:])
		var isum int32
		is := 0
		for k := 0; k < 2; k++ {
			q2 := xb[16+32*k : 16+32*k+32]
			for j := 0; j < 4; j++ {
				shift := 2 * j
				a := q8[128*k+32*j : 128*k+32*j+32]
				for half := 0; half < 2; half++ {
					d := int32(sc[is] & 0xf)
					is++
					var isuml int32
					for l := 16 * half; l < 16*half+16; l++ {
						isuml += int32(int8(a[l])) * int32(q2[l]>>shift&3)
					}
					isum += d * isuml
				}
			}
		}
		sumf += float32(float32(dall*float32(isum)) - float32(dmin*float32(summs)))
	}
	return sumf
}

// The Q3_K…Q6_K generic dots accumulate, per super-block, eight int32
// lanes aux[l] (lane l takes the elements whose index is l mod 8, each
// product times its sub-block scale), add d·aux[l] into eight float lanes
// sums[l] that live across blocks, and add the lanes into the result at
// the end (after the Q4_K/Q5_K minimum terms, which go straight into
// sumf). Reproducing the lanes is what makes the result bit-exact.

func dotQ3_KQ8_K(x, y []byte, nb int) float32 {
	var sums [8]float32
	var a [256]int8
	for i := 0; i < nb; i++ {
		xb, yb := x[i*110:i*110+110], y[i*292:i*292+292]
		hm, q3, sc, q8 := xb[0:32], xb[32:96], xb[96:108], yb[4:260]
		m := uint8(1)
		for h := 0; h < 2; h++ {
			q := q3[32*h : 32*h+32]
			for s := 0; s < 4; s++ {
				out := a[128*h+32*s : 128*h+32*s+32]
				for l := 0; l < 32; l++ {
					v := int8(q[l] >> (2 * s) & 3)
					if hm[l]&m == 0 {
						v -= 4
					}
					out[l] = v
				}
				m <<= 1
			}
		}
		var aux [8]int32
		for j := 0; j < 16; j++ {
			scale := q3Scale(j, sc) - 32
			for k := 16 * j; k < 16*j+16; k++ {
				aux[k&7] += scale * int32(int16(int32(int8(q8[k]))*int32(a[k])))
			}
		}
		d := lef16(xb[108:]) * q8kD(yb)
		for l := 0; l < 8; l++ {
			sums[l] += float32(d * float32(aux[l]))
		}
	}
	var sumf float32
	for l := 0; l < 8; l++ {
		sumf += sums[l]
	}
	return sumf
}

// k45Scales unpacks a Q4_K/Q5_K scales[12] array into the eight scales and
// eight minimums.
func k45Scales(sc []byte) (scales, mins [8]uint8) {
	for j := 0; j < 8; j++ {
		scales[j], mins[j] = scaleMinK4(j, sc)
	}
	return
}

func dotQ4_KQ8_K(x, y []byte, nb int) float32 {
	var sums [8]float32
	var sumf float32
	for i := 0; i < nb; i++ {
		xb, yb := x[i*144:i*144+144], y[i*292:i*292+292]
		q4, q8 := xb[16:144], yb[4:260]
		scales, mins := k45Scales(xb[4:16])
		var sumi int32
		for j := 0; j < 16; j++ {
			sumi += q8kBsum(yb, j) * int32(mins[j/2])
		}
		var aux [8]int32
		for j := 0; j < 4; j++ {
			q := q4[32*j : 32*j+32]
			lo, hi := q8[64*j:64*j+32], q8[64*j+32:64*j+64]
			s1, s2 := int32(scales[2*j]), int32(scales[2*j+1])
			for l := 0; l < 32; l++ {
				aux[l&7] += s1 * int32(int16(int32(int8(lo[l]))*int32(q[l]&0xf)))
				aux[l&7] += s2 * int32(int16(int32(int8(hi[l]))*int32(q[l]>>4)))
			}
		}
		dy := q8kD(yb)
		d := lef16(xb) * dy
		for l := 0; l < 8; l++ {
			sums[l] += float32(d * float32(aux[l]))
		}
		dmin := lef16(xb[2:]) * dy
		sumf -= float32(dmin * float32(sumi))
	}
	for l := 0; l < 8; l++ {
		sumf += sums[l]
	}
	return sumf
}

func dotQ5_KQ8_K(x, y []byte, nb int) float32 {
	var sums [8]float32
	var sumf float32
	for i := 0; i < nb; i++ {
		xb, yb := x[i*176:i*176+176], y[i*292:i*292+292]
		qh, q5, q8 := xb[16:48], xb[48:176], yb[4:260]
		scales, mins := k45Scales(xb[4:16])
		var sumi int32
		for j := 0; j < 16; j++ {
			sumi += q8kBsum(yb, j) * int32(mins[j/2])
		}
		var aux [8]int32
		u1, u2 := uint8(1), uint8(2)
		for j := 0; j < 4; j++ {
			q := q5[32*j : 32*j+32]
			lo, hi := q8[64*j:64*j+32], q8[64*j+32:64*j+64]
			s1, s2 := int32(scales[2*j]), int32(scales[2*j+1])
			for l := 0; l < 32; l++ {
				v1, v2 := int32(q[l]&0xf), int32(q[l]>>4)
				if qh[l]&u1 != 0 {
					v1 += 16
				}
				if qh[l]&u2 != 0 {
					v2 += 16
				}
				aux[l&7] += s1 * int32(int16(int32(int8(lo[l]))*v1))
				aux[l&7] += s2 * int32(int16(int32(int8(hi[l]))*v2))
			}
			u1 <<= 2
			u2 <<= 2
		}
		dy := q8kD(yb)
		d := lef16(xb) * dy
		for l := 0; l < 8; l++ {
			sums[l] += float32(d * float32(aux[l]))
		}
		dmin := lef16(xb[2:]) * dy
		sumf -= float32(dmin * float32(sumi))
	}
	for l := 0; l < 8; l++ {
		sumf += sums[l]
	}
	return sumf
}

func dotQ6_KQ8_K(x, y []byte, nb int) float32 {
	var sums [8]float32
	var a [256]int8
	for i := 0; i < nb; i++ {
		xb, yb := x[i*210:i*210+210], y[i*292:i*292+292]
		sc, q8 := xb[192:208], yb[4:260]
		for h := 0; h < 2; h++ {
			ql, qh := xb[64*h:64*h+64], xb[128+32*h:128+32*h+32]
			out := a[128*h : 128*h+128]
			for l := 0; l < 32; l++ {
				out[l] = int8(ql[l]&0xf|(qh[l]&3)<<4) - 32
				out[l+32] = int8(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				out[l+64] = int8(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				out[l+96] = int8(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			}
		}
		var aux [8]int32
		for j := 0; j < 16; j++ {
			scale := int32(int8(sc[j]))
			for k := 16 * j; k < 16*j+16; k++ {
				aux[k&7] += scale * int32(int16(int32(int8(q8[k]))*int32(a[k])))
			}
		}
		d := lef16(xb[208:]) * q8kD(yb)
		for l := 0; l < 8; l++ {
			sums[l] += float32(d * float32(aux[l]))
		}
	}
	var sumf float32
	for l := 0; l < 8; l++ {
		sumf += sums[l]
	}
	return sumf
}

// The float dots follow GGML's scalar (non-SIMD) ggml_vec_dot_f32/_f16/
// _bf16: each product rounded to float32, summed in float64, the sum
// rounded to float32 once.

func dotF32(x, y []byte, n int) float32 {
	var s float64
	for i := 0; i < n; i++ {
		s += float64(float32(math.Float32frombits(le32(x[4*i:])) * math.Float32frombits(le32(y[4*i:]))))
	}
	return float32(s)
}

func dotF16(x, y []byte, n int) float32 {
	var s float64
	for i := 0; i < n; i++ {
		s += float64(float32(lef16(x[2*i:]) * lef16(y[2*i:])))
	}
	return float32(s)
}

func dotBF16(x, y []byte, n int) float32 {
	var s float64
	for i := 0; i < n; i++ {
		a := math.Float32frombits(uint32(le16(x[2*i:])) << 16)
		b := math.Float32frombits(uint32(le16(y[2*i:])) << 16)
		s += float64(float32(a * b))
	}
	return float32(s)
}

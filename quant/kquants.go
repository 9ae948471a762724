package quant

import "math"

// The k-quants: 256-element super-blocks of 16 or 32-element sub-blocks,
// each sub-block with a 4-, 6- or 8-bit scale (and for Q2_K/Q4_K/Q5_K a
// minimum) relative to f16 super-block scales. Quantizers follow GGML's
// quantize_row_<t>_ref (what ggml_quantize_chunk runs without an importance
// matrix): a per-sub-block scale search (makeQKX2 for the min/scale formats,
// makeQ3 for Q3_K, makeQX for Q6_K), the scales quantized against their
// maximum, then every value re-quantized with the scale as stored. Every
// float operation below is in GGML's order; see scalar.go for the two rules
// that keep it bit-exact.

const groupMaxEps = 1e-15 // GGML's GROUP_MAX_EPS: a group below this is all zero

// makeQKX2 is GGML's make_qkx2_quants: it fits x ≈ scale·L − theMin with
// L in [0, nmax], trying nstep+1 scales around nmax/(max−min) and keeping
// the one with the smallest weighted error (absolute when mad, squared
// otherwise), each candidate refined by weighted least squares.
func makeQKX2(x, w []float32, L, laux []uint8, nmax int32, rmin, rdelta float32, nstep int, mad bool) (scale, theMin float32) {
	n := len(x)
	lo, hi := x[0], x[0]
	sumW := w[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		sumW += w[i]
		sumX += float32(w[i] * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0, -lo
	}
	iscale := float32(nmax) / (hi - lo)
	scale = 1 / iscale
	var bestErr float32
	for i := 0; i < n; i++ {
		l := clampI32(nearestInt(float32(iscale*(x[i]-lo))), 0, nmax)
		L[i] = uint8(l)
		diff := float32(scale*float32(l)) + lo - x[i]
		if mad {
			diff = absf(diff)
		} else {
			diff = diff * diff
		}
		bestErr += float32(w[i] * diff)
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + float32(nmax)) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := clampI32(nearestInt(float32(iscale*(x[i]-lo))), 0, nmax)
			laux[i] = uint8(l)
			fl := float32(l)
			wl := w[i] * fl
			sumL += float32(wl)
			sumL2 += float32(wl * fl)
			sumXL += float32(wl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var cur float32
			for i := 0; i < n; i++ {
				diff := float32(thisScale*float32(laux[i])) + thisMin - x[i]
				if mad {
					diff = absf(diff)
				} else {
					diff = diff * diff
				}
				cur += float32(w[i] * diff)
			}
			if cur < bestErr {
				copy(L[:n], laux[:n])
				bestErr = cur
				scale = thisScale
				lo = thisMin
			}
		}
	}
	return scale, -lo
}

// makeQ3 is GGML's make_q3_quants with do_rmse: symmetric levels
// L−nmax in [−nmax, nmax−1] (returned as L in [0, 2·nmax−1]), a start from
// −nmax/max, then up to five passes that move single values to the level
// that improves the x²-weighted least-squares fit.
func makeQ3(x []float32, L []int8, nmax int32) float32 {
	n := len(x)
	amax, max := absMaxSigned(x)
	if amax < groupMaxEps {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0
	}
	iscale := float32(-nmax) / max
	var sumlx, suml2 float32
	for i := 0; i < n; i++ {
		l := clampI32(nearestInt(float32(iscale*x[i])), -nmax, nmax-1)
		L[i] = int8(l)
		w := x[i] * x[i]
		fl := float32(l)
		sumlx += float32(float32(w*x[i]) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i := 0; i < n; i++ {
			w := x[i] * x[i]
			fL := float32(L[i])
			slx := sumlx - float32(float32(w*x[i])*fL)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*fL)*fL)
				newL := clampI32(nearestInt(x[i]*sl2/slx), -nmax, nmax-1)
				if newL != int32(L[i]) {
					fn := float32(newL)
					slx += float32(float32(w*x[i]) * fn)
					sl2 += float32(float32(w*fn) * fn)
					if sl2 > 0 && slx*slx*suml2 > sumlx*sumlx*sl2 {
						L[i] = int8(newL)
						sumlx, suml2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := 0; i < n; i++ {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// makeQX is GGML's make_qx_quants with rmse_type 1 and no importance
// weights (the only way the reference Q6_K quantizer calls it): symmetric
// levels in [−nmax, nmax−1] (returned + nmax), weights x², and 18 trial
// scales −(nmax ± 0.1·k)/max around the start, keeping the best
// least-squares fit.
func makeQX(x []float32, L []int8, nmax int32) float32 {
	n := len(x)
	amax, max := absMaxSigned(x)
	if amax < groupMaxEps {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0
	}
	fit := func(iscale float32, store bool) (sumlx, suml2 float32) {
		for i := 0; i < n; i++ {
			l := clampI32(nearestInt(float32(iscale*x[i])), -nmax, nmax-1)
			if store {
				L[i] = int8(l + nmax)
			}
			w := x[i] * x[i]
			fl := float32(l)
			sumlx += float32(float32(w*x[i]) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		return sumlx, suml2
	}
	iscale := float32(-nmax) / max
	sumlx, suml2 := fit(iscale, true)
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / max
		sumlx, suml2 = fit(iscale, false)
		if suml2 > 0 && sumlx*sumlx > best*suml2 {
			fit(iscale, true)
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// scaleMinK4 is GGML's get_scale_min_k4: the j-th 6-bit scale and minimum
// (j = 0…7) of a Q4_K/Q5_K scales[12] array.
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// q3Scale is the j-th (0…15) 6-bit Q3_K scale, still biased by 32.
func q3Scale(j int, sc []byte) int32 {
	switch {
	case j < 4:
		return int32(sc[j]&0xf | (sc[j+8]&3)<<4)
	case j < 8:
		return int32(sc[j]&0xf | (sc[j+4]>>2&3)<<4)
	case j < 12:
		return int32(sc[j-8]>>4 | (sc[j]>>4&3)<<4)
	}
	return int32(sc[j-8]>>4 | (sc[j-4]>>6&3)<<4)
}

// packK2 stores 256 two-bit values as GGML's Q2_K/Q3_K qs: byte j/4+l of
// each 128-value half holds values l, l+32, l+64, l+96 at bits 0, 2, 4, 6.
func packK2(L []uint8, qs []byte) {
	for j := 0; j < 256; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

// Q2_K (84 bytes): scales[16] (low nibble scale, high nibble min) | qs[64]
// | d f16 | dmin f16; value = d·sc·q − dmin·m.
func quantizeQ2_K(src []float32, dst []byte) {
	var (
		L      [256]uint8
		laux   [16]uint8
		w      [16]float32
		mins   [16]float32
		scales [16]float32
	)
	const q4scale = 15
	for i := 0; i < len(src)/256; i++ {
		x, y := src[i*256:i*256+256], dst[i*84:i*84+84]
		sc := y[0:16]
		var maxScale, maxMin float32
		for j := 0; j < 16; j++ {
			for l := 0; l < 16; l++ {
				w[l] = absf(x[16*j+l])
			}
			scales[j], mins[j] = makeQKX2(x[16*j:16*j+16], w[:], L[16*j:], laux[:], 3, -0.5, 0.1, 15, true)
			maxScale = gtMax(maxScale, scales[j])
			maxMin = gtMax(maxMin, mins[j])
		}
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := 0; j < 16; j++ {
				sc[j] = uint8(nearestInt(iscale * scales[j]))
			}
			putf16(y[80:], maxScale/q4scale)
		} else {
			clear(sc)
			putf16(y[80:], 0)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := 0; j < 16; j++ {
				sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
			}
			putf16(y[82:], maxMin/q4scale)
		} else {
			putf16(y[82:], 0)
		}
		dAll, dMin := lef16(y[80:]), lef16(y[82:])
		for j := 0; j < 16; j++ {
			d := dAll * float32(sc[j]&0xf)
			if d == 0 {
				continue
			}
			dm := dMin * float32(sc[j]>>4)
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = uint8(clampI32(nearestInt((x[16*j+ii]+dm)/d), 0, 3))
			}
		}
		packK2(L[:], y[16:80])
	}
}

func dequantizeQ2_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/256; i++ {
		x, y := src[i*84:i*84+84], dst[i*256:i*256+256]
		d, dmin := lef16(x[80:]), lef16(x[82:])
		sc := x[0:16]
		is := 0
		for n := 0; n < 2; n++ {
			q := x[16+32*n : 16+32*n+32]
			for g := 0; g < 4; g++ {
				shift := 2 * g
				for half := 0; half < 2; half++ {
					s := sc[is]
					is++
					dl, ml := d*float32(s&0xf), dmin*float32(s>>4)
					out := y[128*n+32*g+16*half:]
					for l := 0; l < 16; l++ {
						out[l] = float32(dl*float32(q[16*half+l]>>shift&3)) - ml
					}
				}
			}
		}
	}
}

// Q3_K (110 bytes): hmask[32] | qs[64] | scales[12] (16 six-bit scales,
// biased by 32) | d f16; value = d·(sc−32)·(q − 4·(1 − high bit)).
func quantizeQ3_K(src []float32, dst []byte) {
	var (
		L      [256]int8
		scales [16]float32
	)
	for i := 0; i < len(src)/256; i++ {
		x, y := src[i*256:i*256+256], dst[i*110:i*110+110]
		hmask, qs, sc := y[0:32], y[32:96], y[96:108]
		var maxScale, amax float32
		for j := 0; j < 16; j++ {
			scales[j] = makeQ3(x[16*j:16*j+16], L[16*j:], 4)
			if s := absf(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		clear(sc)
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := 0; j < 16; j++ {
				l := int8(nearestInt(iscale * scales[j]))
				l = int8(clampI32(int32(l), -32, 31) + 32)
				if j < 8 {
					sc[j] = uint8(l) & 0xf
				} else {
					sc[j-8] |= (uint8(l) & 0xf) << 4
				}
				l >>= 4
				sc[j%4+8] |= uint8(l) << (2 * (j / 4))
			}
			putf16(y[108:], 1/iscale)
		} else {
			putf16(y[108:], 0)
		}
		dAll := lef16(y[108:])
		for j := 0; j < 16; j++ {
			d := dAll * float32(int8(q3Scale(j, sc))-32)
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = int8(clampI32(nearestInt(x[16*j+ii]/d), -4, 3) + 4)
			}
		}
		// High bits: value j's goes to bit j/32 of hmask[j%32].
		clear(hmask)
		var U [256]uint8
		for j := 0; j < 256; j++ {
			l := L[j]
			if l > 3 {
				hmask[j%32] |= 1 << (j / 32)
				l -= 4
			}
			U[j] = uint8(l)
		}
		packK2(U[:], qs)
	}
}

func dequantizeQ3_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/256; i++ {
		x, y := src[i*110:i*110+110], dst[i*256:i*256+256]
		hm, sc := x[0:32], x[96:108]
		dAll := lef16(x[108:])
		is := 0
		m := uint8(1)
		for n := 0; n < 2; n++ {
			q := x[32+32*n : 32+32*n+32]
			for g := 0; g < 4; g++ {
				shift := 2 * g
				for half := 0; half < 2; half++ {
					dl := dAll * float32(q3Scale(is, sc)-32)
					is++
					out := y[128*n+32*g+16*half:]
					for l := 0; l < 16; l++ {
						v := int32(q[16*half+l] >> shift & 3)
						if hm[16*half+l]&m == 0 {
							v -= 4
						}
						out[l] = dl * float32(v)
					}
				}
				m <<= 1
			}
		}
	}
}

// quantizeK45 is the common part of the Q4_K and Q5_K reference
// quantizers: per 32-value sub-block a makeQKX2 fit with weights
// rms(sub-block) + |x|, the eight scales and mins quantized to 6 bits
// against their maxima (scales[12] | d, dmin), then every value
// re-quantized to [0, nmax] with the stored scale and minimum into L.
func quantizeK45(x []float32, y []byte, L *[256]uint8, nmax int32, rmin float32, nstep int) {
	var (
		laux   [32]uint8
		w      [32]float32
		mins   [8]float32
		scales [8]float32
	)
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrt32(sumX2 / 32)
		for l, v := range xs {
			w[l] = avX + absf(v)
		}
		scales[j], mins[j] = makeQKX2(xs, w[:], L[32*j:], laux[:], nmax, rmin, 0.1, nstep, false)
		maxScale = gtMax(maxScale, scales[j])
		maxMin = gtMax(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := y[4:16]
	for j := 0; j < 8; j++ {
		ls := min(63, uint8(nearestInt(invScale*scales[j])))
		lm := min(63, uint8(nearestInt(invMin*mins[j])))
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&0xf | (lm&0xf)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	putf16(y[0:], maxScale/63)
	putf16(y[2:], maxMin/63)
	dAll, dMin := lef16(y[0:]), lef16(y[2:])
	for j := 0; j < 8; j++ {
		s, m := scaleMinK4(j, sc)
		d := dAll * float32(s)
		if d == 0 {
			continue
		}
		dm := dMin * float32(m)
		for ii := 0; ii < 32; ii++ {
			L[32*j+ii] = uint8(clampI32(nearestInt((x[32*j+ii]+dm)/d), 0, nmax))
		}
	}
}

// Q4_K (144 bytes): d f16 | dmin f16 | scales[12] | qs[128]; value =
// d·sc·q − dmin·m, 64 values per 32 bytes of qs (low nibbles first).
func quantizeQ4_K(src []float32, dst []byte) {
	var L [256]uint8
	for i := 0; i < len(src)/256; i++ {
		x, y := src[i*256:i*256+256], dst[i*144:i*144+144]
		quantizeK45(x, y, &L, 15, -1, 20)
		q := y[16:144]
		for j := 0; j < 4; j++ {
			for l := 0; l < 32; l++ {
				q[32*j+l] = L[64*j+l] | L[64*j+l+32]<<4
			}
		}
	}
}

func dequantizeQ4_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/256; i++ {
		x, y := src[i*144:i*144+144], dst[i*256:i*256+256]
		d, dmin := lef16(x), lef16(x[2:])
		sc := x[4:16]
		for j := 0; j < 4; j++ {
			q := x[16+32*j : 16+32*j+32]
			s1, m1 := scaleMinK4(2*j, sc)
			s2, m2 := scaleMinK4(2*j+1, sc)
			d1, mm1 := d*float32(s1), dmin*float32(m1)
			d2, mm2 := d*float32(s2), dmin*float32(m2)
			out := y[64*j : 64*j+64]
			for l := 0; l < 32; l++ {
				out[l] = float32(d1*float32(q[l]&0xf)) - mm1
				out[l+32] = float32(d2*float32(q[l]>>4)) - mm2
			}
		}
	}
}

// Q5_K (176 bytes): d f16 | dmin f16 | scales[12] | qh[32] | qs[128]; as
// Q4_K with a fifth bit per value in qh (bit 2j for the low nibbles of
// qs chunk j, bit 2j+1 for the high nibbles).
func quantizeQ5_K(src []float32, dst []byte) {
	var L [256]uint8
	for i := 0; i < len(src)/256; i++ {
		x, y := src[i*256:i*256+256], dst[i*176:i*176+176]
		quantizeK45(x, y, &L, 31, -0.5, 15)
		qh, ql := y[16:48], y[48:176]
		clear(qh)
		m1, m2 := uint8(1), uint8(2)
		for n := 0; n < 4; n++ {
			for j := 0; j < 32; j++ {
				l1, l2 := L[64*n+j], L[64*n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[32*n+j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
		}
	}
}

func dequantizeQ5_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/256; i++ {
		x, y := src[i*176:i*176+176], dst[i*256:i*256+256]
		d, dmin := lef16(x), lef16(x[2:])
		sc, qh := x[4:16], x[16:48]
		u1, u2 := uint8(1), uint8(2)
		for j := 0; j < 4; j++ {
			ql := x[48+32*j : 48+32*j+32]
			s1, m1 := scaleMinK4(2*j, sc)
			s2, m2 := scaleMinK4(2*j+1, sc)
			d1, mm1 := d*float32(s1), dmin*float32(m1)
			d2, mm2 := d*float32(s2), dmin*float32(m2)
			out := y[64*j : 64*j+64]
			for l := 0; l < 32; l++ {
				v1, v2 := int32(ql[l]&0xf), int32(ql[l]>>4)
				if qh[l]&u1 != 0 {
					v1 += 16
				}
				if qh[l]&u2 != 0 {
					v2 += 16
				}
				out[l] = float32(d1*float32(v1)) - mm1
				out[l+32] = float32(d2*float32(v2)) - mm2
			}
			u1 <<= 2
			u2 <<= 2
		}
	}
}

// Q6_K (210 bytes): ql[128] (low 4 bits) | qh[64] (high 2 bits) |
// scales[16] int8 | d f16; value = d·sc·(q − 32).
func quantizeQ6_K(src []float32, dst []byte) {
	var (
		L      [256]int8
		scales [16]float32
	)
	for i := 0; i < len(src)/256; i++ {
		x, y := src[i*256:i*256+256], dst[i*210:i*210+210]
		var maxScale, maxAbs float32
		for ib := 0; ib < 16; ib++ {
			scales[ib] = makeQX(x[16*ib:16*ib+16], L[16*ib:], 32)
			if a := absf(scales[ib]); a > maxAbs {
				maxAbs, maxScale = a, scales[ib]
			}
		}
		if maxAbs < groupMaxEps {
			clear(y)
			continue
		}
		iscale := -128 / maxScale
		putf16(y[208:], 1/iscale)
		sc := y[192:208]
		for ib := 0; ib < 16; ib++ {
			sc[ib] = uint8(int8(min(127, nearestInt(iscale*scales[ib]))))
		}
		dAll := lef16(y[208:])
		for j := 0; j < 16; j++ {
			d := dAll * float32(int8(sc[j]))
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				L[16*j+ii] = int8(clampI32(nearestInt(x[16*j+ii]/d), -32, 31) + 32)
			}
		}
		ql, qh := y[0:128], y[128:192]
		for h := 0; h < 2; h++ {
			Lh, qlh, qhh := L[128*h:], ql[64*h:], qh[32*h:]
			for l := 0; l < 32; l++ {
				q1, q2 := uint8(Lh[l])&0xf, uint8(Lh[l+32])&0xf
				q3, q4 := uint8(Lh[l+64])&0xf, uint8(Lh[l+96])&0xf
				qlh[l] = q1 | q3<<4
				qlh[l+32] = q2 | q4<<4
				qhh[l] = uint8(Lh[l]>>4) | uint8(Lh[l+32]>>4)<<2 | uint8(Lh[l+64]>>4)<<4 | uint8(Lh[l+96]>>4)<<6
			}
		}
	}
}

func dequantizeQ6_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/256; i++ {
		x, y := src[i*210:i*210+210], dst[i*256:i*256+256]
		d := lef16(x[208:])
		for h := 0; h < 2; h++ {
			ql, qh, sc := x[64*h:64*h+64], x[128+32*h:128+32*h+32], x[192+8*h:192+8*h+8]
			out := y[128*h : 128*h+128]
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int32(ql[l]&0xf|(qh[l]&3)<<4) - 32
				q2 := int32(ql[l+32]&0xf|(qh[l]>>2&3)<<4) - 32
				q3 := int32(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				out[l] = d * float32(int8(sc[is])) * float32(q1)
				out[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				out[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				out[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
	}
}

// Q8_K (292 bytes): d f32 | qs[256] int8 | bsums[16] int16 (sums of 16
// consecutive qs); d = max/−127 with max the value of largest magnitude,
// q = min(127, nearestInt(x/d)); value = d·q. For an all-zero block GGML
// leaves bsums unwritten; this package writes zeros there.
func quantizeQ8_K(src []float32, dst []byte) {
	for i := 0; i < len(src)/256; i++ {
		x, y := src[i*256:i*256+256], dst[i*292:i*292+292]
		amax, max := absMaxSigned(x)
		if amax == 0 {
			clear(y)
			continue
		}
		iscale := -127 / max
		qs := y[4:260]
		for j := 0; j < 256; j++ {
			qs[j] = uint8(int8(min(127, nearestInt(iscale*x[j]))))
		}
		for j := 0; j < 16; j++ {
			var sum int32
			for _, q := range qs[16*j : 16*j+16] {
				sum += int32(int8(q))
			}
			put16(y[260+2*j:], uint16(int16(sum)))
		}
		put32(y, math.Float32bits(1/iscale))
	}
}

func dequantizeQ8_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/256; i++ {
		x, y := src[i*292:i*292+292], dst[i*256:i*256+256]
		d := math.Float32frombits(le32(x))
		for j, q := range x[4:260] {
			y[j] = d * float32(int8(q))
		}
	}
}

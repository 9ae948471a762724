package philox

// The constants of Philox4x32 (Salmon et al. 2011, Random123's
// philox.h): the round multipliers and the Weyl increments of the key.
const (
	M0     = 0xD2511F53
	M1     = 0xCD9E8D57
	W0     = 0x9E3779B9 // golden ratio
	W1     = 0xBB67AE85 // √3 − 1
	Rounds = 10
)

// Philox4x32 returns Philox4x32-10 of counter ctr under key.
func Philox4x32(ctr [4]uint32, key [2]uint32) [4]uint32 {
	c0, c1, c2, c3 := ctr[0], ctr[1], ctr[2], ctr[3]
	k0, k1 := key[0], key[1]
	for r := range Rounds {
		if r > 0 {
			k0 += W0
			k1 += W1
		}
		p0 := uint64(M0) * uint64(c0)
		p1 := uint64(M1) * uint64(c2)
		c0, c1, c2, c3 = uint32(p1>>32)^c1^k0, uint32(p1), uint32(p0>>32)^c3^k1, uint32(p0)
	}
	return [4]uint32{c0, c1, c2, c3}
}

// Block returns the four words of block b of seed's stream: Philox4x32-10
// of counter (b low, b high, 0, 0) under key (seed low, seed high).
func Block(seed, b uint64) [4]uint32 {
	return Philox4x32([4]uint32{uint32(b), uint32(b >> 32), 0, 0}, [2]uint32{uint32(seed), uint32(seed >> 32)})
}

// block2 returns blocks b and b1 of seed's stream: Block twice, with the
// two rounds' multiplies interleaved so that the CPU overlaps them (a block
// alone is one long dependency chain).
func block2(seed, b, b1 uint64) (x, y [4]uint32) {
	a0, a1, a2, a3 := uint32(b), uint32(b>>32), uint32(0), uint32(0)
	c0, c1, c2, c3 := uint32(b1), uint32(b1>>32), uint32(0), uint32(0)
	k0, k1 := uint32(seed), uint32(seed>>32)
	for r := range Rounds {
		if r > 0 {
			k0 += W0
			k1 += W1
		}
		p0, p1 := uint64(M0)*uint64(a0), uint64(M1)*uint64(a2)
		q0, q1 := uint64(M0)*uint64(c0), uint64(M1)*uint64(c2)
		a0, a1, a2, a3 = uint32(p1>>32)^a1^k0, uint32(p1), uint32(p0>>32)^a3^k1, uint32(p0)
		c0, c1, c2, c3 = uint32(q1>>32)^c1^k0, uint32(q1), uint32(q0>>32)^c3^k1, uint32(q0)
	}
	return [4]uint32{a0, a1, a2, a3}, [4]uint32{c0, c1, c2, c3}
}

// Uniform32 maps a word to [0, 1): (w >> 8)·2⁻²⁴, exact in float32.
func Uniform32(w uint32) float32 { return float32(w>>8) * 0x1p-24 }

// bits53 is the 53-bit integer of two words: (w0 >> 5)·2²⁶ + (w1 >> 6).
func bits53(w0, w1 uint32) uint64 { return uint64(w0>>5)<<26 | uint64(w1>>6) }

// Uniform64 maps two words to [0, 1): their 53-bit integer times 2⁻⁵³,
// exact in float64.
func Uniform64(w0, w1 uint32) float64 { return float64(bits53(w0, w1)) * 0x1p-53 }

// BoxMuller32 returns the two float32 normals of the word pair (a, c):
// r·cos θ and r·sin θ with r = √(−2 ln u1), u1 = ((a >> 8) + 1)·2⁻²⁴ and
// θ = 2π·(c >> 8)·2⁻²⁴.
func BoxMuller32(a, c uint32) (z0, z1 float32) {
	u1 := float32(a>>8+1) * 0x1p-24 // in [2⁻²⁴, 1], exact
	r := sqrt32(-2 * Log32(u1))
	s, co := SinCos32(c >> 8)
	return r * co, r * s
}

// BoxMuller64 returns the two float64 normals of a block's words: r·cos θ
// and r·sin θ with u1 = (m + 1)·2⁻⁵³ for m the 53-bit integer of (w0, w1),
// and θ = 2π·k·2⁻⁵³ for k that of (w2, w3).
func BoxMuller64(w [4]uint32) (z0, z1 float64) {
	u1 := float64(bits53(w[0], w[1])+1) * 0x1p-53 // in [2⁻⁵³, 1], exact
	r := sqrt64(-2 * Log64(u1))
	s, co := SinCos64(bits53(w[2], w[3]))
	return r * co, r * s
}

// The stream functions fill dst with the values at positions pos, pos+1, …
// (wrapping) of seed's stream, computing each block once. They are what
// the executors compute element by element (see the package doc).

// Uniform32s fills dst with float32 uniforms in [0, 1).
func Uniform32s(dst []float32, seed, pos uint64) {
	for i := 0; i < len(dst); {
		if pos&3 == 0 && len(dst)-i >= 8 { // two whole blocks
			x, y := block2(seed, pos>>2, (pos+4)>>2) // the positions wrap at 2⁶⁴
			d := dst[i : i+8 : i+8]
			d[0], d[1], d[2], d[3] = Uniform32(x[0]), Uniform32(x[1]), Uniform32(x[2]), Uniform32(x[3])
			d[4], d[5], d[6], d[7] = Uniform32(y[0]), Uniform32(y[1]), Uniform32(y[2]), Uniform32(y[3])
			i += 8
			pos += 8
			continue
		}
		w := Block(seed, pos>>2)
		for l := int(pos & 3); l < 4 && i < len(dst); l++ {
			dst[i] = Uniform32(w[l])
			i++
			pos++
		}
	}
}

// Normal32s fills dst with float32 standard normals.
func Normal32s(dst []float32, seed, pos uint64) {
	for i := 0; i < len(dst); {
		w := Block(seed, pos>>2)
		var z [4]float32
		l := int(pos & 3)
		end := min(4, l+len(dst)-i) // one past the last lane dst needs
		if l < 2 {
			z[0], z[1] = BoxMuller32(w[0], w[1])
		}
		if end > 2 {
			z[2], z[3] = BoxMuller32(w[2], w[3])
		}
		for ; l < 4 && i < len(dst); l++ {
			dst[i] = z[l]
			i++
			pos++
		}
	}
}

// Uniform64s fills dst with float64 uniforms in [0, 1).
func Uniform64s(dst []float64, seed, pos uint64) {
	for i := 0; i < len(dst); {
		if pos&1 == 0 && len(dst)-i >= 4 { // two whole blocks
			x, y := block2(seed, pos>>1, (pos+2)>>1)
			d := dst[i : i+4 : i+4]
			d[0], d[1], d[2], d[3] = Uniform64(x[0], x[1]), Uniform64(x[2], x[3]), Uniform64(y[0], y[1]), Uniform64(y[2], y[3])
			i += 4
			pos += 4
			continue
		}
		w := Block(seed, pos>>1)
		for h := int(pos & 1); h < 2 && i < len(dst); h++ {
			dst[i] = Uniform64(w[2*h], w[2*h+1])
			i++
			pos++
		}
	}
}

// Normal64s fills dst with float64 standard normals.
func Normal64s(dst []float64, seed, pos uint64) {
	for i := 0; i < len(dst); {
		z0, z1 := BoxMuller64(Block(seed, pos>>1))
		z := [2]float64{z0, z1}
		for h := int(pos & 1); h < 2 && i < len(dst); h++ {
			dst[i] = z[h]
			i++
			pos++
		}
	}
}

package philox

import (
	"math"
	"slices"
	"testing"
)

// The known-answer vectors of Random123 (kat_vectors, "philox4x32 10"
// lines): counter (4 words), key (2 words), expected output (4 words).
var katVectors = []struct {
	name string
	ctr  [4]uint32
	key  [2]uint32
	want [4]uint32
}{
	{"zeros", [4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
	{"ones", [4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
	{"pi", [4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
}

func TestPhiloxKnownAnswers(t *testing.T) {
	for _, v := range katVectors {
		if got := Philox4x32(v.ctr, v.key); got != v.want {
			t.Errorf("%s: Philox4x32-10(%08x, %08x) = %08x, want %08x", v.name, v.ctr, v.key, got, v.want)
		}
	}
	// Block is the counter (b low, b high, 0, 0) under key (seed low, seed
	// high): the all-zeros vector is block 0 of seed 0.
	if got := Block(0, 0); got != katVectors[0].want {
		t.Errorf("Block(0, 0) = %08x, want %08x", got, katVectors[0].want)
	}
	seed, b := uint64(0x299f31d0a4093822), uint64(0x85a308d3243f6a88)
	want := Philox4x32([4]uint32{0x243f6a88, 0x85a308d3, 0, 0}, [2]uint32{0xa4093822, 0x299f31d0})
	if got := Block(seed, b); got != want {
		t.Errorf("Block(%#x, %#x) = %08x, want %08x", seed, b, got, want)
	}
}

// TestStreams checks the stream functions against the per-position
// definitions of the package doc, from aligned and unaligned positions,
// for every length up to two blocks and across the 2⁶⁴ wrap.
func TestStreams(t *testing.T) {
	const seed = 0x0123456789abcdef
	u32 := func(p uint64) float32 { return Uniform32(Block(seed, p>>2)[p&3]) }
	n32 := func(p uint64) float32 {
		w := Block(seed, p>>2)
		j := p & 3 >> 1
		z0, z1 := BoxMuller32(w[2*j], w[2*j+1])
		if p&1 == 0 {
			return z0
		}
		return z1
	}
	u64 := func(p uint64) float64 {
		w := Block(seed, p>>1)
		h := p & 1
		return Uniform64(w[2*h], w[2*h+1])
	}
	n64 := func(p uint64) float64 {
		z0, z1 := BoxMuller64(Block(seed, p>>1))
		if p&1 == 0 {
			return z0
		}
		return z1
	}
	for _, start := range []uint64{0, 1, 2, 3, 5, 1 << 40, math.MaxUint64 - 4} {
		for n := range 20 {
			d32, d64 := make([]float32, n), make([]float64, n)
			check32 := func(name string, fill func([]float32, uint64, uint64), at func(uint64) float32) {
				fill(d32, seed, start)
				for i, v := range d32 {
					if w := at(start + uint64(i)); math.Float32bits(v) != math.Float32bits(w) {
						t.Errorf("%s(pos %d, n %d)[%d] = %v, want %v", name, start, n, i, v, w)
					}
				}
			}
			check64 := func(name string, fill func([]float64, uint64, uint64), at func(uint64) float64) {
				fill(d64, seed, start)
				for i, v := range d64 {
					if w := at(start + uint64(i)); math.Float64bits(v) != math.Float64bits(w) {
						t.Errorf("%s(pos %d, n %d)[%d] = %v, want %v", name, start, n, i, v, w)
					}
				}
			}
			check32("Uniform32s", Uniform32s, u32)
			check32("Normal32s", Normal32s, n32)
			check64("Uniform64s", Uniform64s, u64)
			check64("Normal64s", Normal64s, n64)
		}
	}
}

// TestUniformMaps checks the word → [0, 1) maps at their ends.
func TestUniformMaps(t *testing.T) {
	if Uniform32(0) != 0 || Uniform32(0xff) != 0 || Uniform32(0x100) != 0x1p-24 {
		t.Errorf("Uniform32 low end: %v %v %v", Uniform32(0), Uniform32(0xff), Uniform32(0x100))
	}
	if got := Uniform32(math.MaxUint32); got != 1-0x1p-24 {
		t.Errorf("Uniform32(max) = %v, want 1 − 2⁻²⁴", got)
	}
	if Uniform64(0, 0) != 0 || Uniform64(0, 0x40) != 0x1p-53 || Uniform64(0x20, 0) != 0x1p-27 {
		t.Errorf("Uniform64 low end: %v %v %v", Uniform64(0, 0), Uniform64(0, 0x40), Uniform64(0x20, 0))
	}
	if got := Uniform64(math.MaxUint32, math.MaxUint32); got != 1-0x1p-53 {
		t.Errorf("Uniform64(max) = %v, want 1 − 2⁻⁵³", got)
	}
}

// ulps32 is |got − want| in float32 ulps of want.
func ulps32(got float32, want float64) float64 {
	_, e := math.Frexp(want)
	return math.Abs(float64(got)-want) / math.Ldexp(1, max(e-24, -149))
}

func ulps64(got, want float64) float64 {
	_, e := math.Frexp(want)
	return math.Abs(got-want) / math.Ldexp(1, max(e-53, -1074))
}

// TestLogAccuracy compares Log32 and Log64 with math.Log over the inputs
// Box–Muller gives them: every multiple of 2⁻²⁴ in (0, 1] (a stride
// through them) for Log32, random multiples of 2⁻⁵³ for Log64, and powers
// of two and the points around √2 where the reduction switches.
func TestLogAccuracy(t *testing.T) {
	worst := 0.0
	check := func(m uint32) {
		x := float32(m) * 0x1p-24
		if u := ulps32(Log32(x), math.Log(float64(x))); u > worst {
			worst = u
			if u > 2.5 {
				t.Errorf("Log32(%v) = %v, want %v (%.2f ulp)", x, Log32(x), math.Log(float64(x)), u)
			}
		}
	}
	for m := uint32(1); m <= 1<<24; m += 97 {
		check(m)
	}
	for e := range 25 {
		for d := -3; d <= 3; d++ {
			if m := int64(1)<<e + int64(d); m >= 1 && m <= 1<<24 {
				check(uint32(m))
			}
			if m := int64(float64(int64(1)<<e)*math.Sqrt2) + int64(d); m >= 1 && m <= 1<<24 {
				check(uint32(m))
			}
		}
	}
	if Log32(1) != 0 || math.Signbit(float64(Log32(1))) {
		t.Errorf("Log32(1) = %v, want +0", Log32(1))
	}
	t.Logf("Log32: worst %.2f ulp", worst)

	worst = 0
	w := uint64(0x9e3779b97f4a7c15)
	for i := range 300000 {
		w = w*6364136223846793005 + 1442695040888963407
		m := w>>11&(1<<53-1) + 1
		if i%3 == 0 {
			m >>= uint(i % 53) // small values too
			m++
		}
		x := float64(m) * 0x1p-53
		if u := ulps64(Log64(x), math.Log(x)); u > worst {
			worst = u
			if u > 2.5 {
				t.Errorf("Log64(%v) = %v, want %v (%.2f ulp)", x, Log64(x), math.Log(x), u)
			}
		}
	}
	if Log64(1) != 0 || math.Signbit(Log64(1)) || ulps64(Log64(0x1p-53), -53*math.Ln2) > 1 {
		t.Errorf("Log64(1) = %v (want +0), Log64(2⁻⁵³) = %v (want %v)", Log64(1), Log64(0x1p-53), -53*math.Ln2)
	}
	t.Logf("Log64: worst %.2f ulp", worst)
}

// TestSinCosAccuracy compares SinCos32 and SinCos64 with math.Sin and
// math.Cos of 2π·k/2^bits, in ulps of the result (and, near a zero of the
// function, in ulps of 1: the error of the angle itself).
func TestSinCosAccuracy(t *testing.T) {
	worst := 0.0
	check32 := func(k uint32) {
		th := 2 * math.Pi * float64(k) * 0x1p-24
		s, c := SinCos32(k)
		for _, p := range []struct {
			got  float32
			want float64
		}{{s, math.Sin(th)}, {c, math.Cos(th)}} {
			u := min(ulps32(p.got, p.want), math.Abs(float64(p.got)-p.want)/0x1p-24)
			if u > worst {
				worst = u
			}
			if u > 2.5 {
				t.Errorf("SinCos32(%d): %v, want %v (%.2f ulp)", k, p.got, p.want, u)
			}
		}
	}
	for k := uint32(0); k < 1<<24; k += 61 {
		check32(k)
	}
	for q := uint32(0); q <= 8; q++ { // octant boundaries
		for d := -2; d <= 2; d++ {
			check32(uint32(int64(q)<<21+int64(d)) & (1<<24 - 1))
		}
	}
	if s, c := SinCos32(0); s != 0 || c != 1 {
		t.Errorf("SinCos32(0) = %v, %v", s, c)
	}
	if s, c := SinCos32(1 << 22); s != 1 || c != 0 {
		t.Errorf("SinCos32(2^22) (θ = π/2) = %v, %v", s, c)
	}
	t.Logf("SinCos32: worst %.2f ulp", worst)

	worst = 0
	w := uint64(12345)
	for range 300000 {
		w = w*6364136223846793005 + 1442695040888963407
		k := w >> 11
		th := 2 * math.Pi * float64(k) * 0x1p-53 // k < 2^53: exact; the product rounds once
		// math.Sin of a rounded θ is not sin(2πk/2^53); compare against
		// the reduced angle instead, computed exactly in integers.
		n := (k + 1<<50) >> 51
		a := float64(int64(k)-int64(n<<51)) * 0x1p-51
		phi := a * math.Pi / 2
		ws, wc := math.Sin(phi), math.Cos(phi)
		ws, wc = rotate(uint32(n), ws, wc)
		s, c := SinCos64(k)
		for _, p := range [][2]float64{{s, ws}, {c, wc}} {
			u := min(ulps64(p[0], p[1]), math.Abs(p[0]-p[1])/0x1p-53)
			worst = max(worst, u)
			if u > 3 {
				t.Errorf("SinCos64(%d) (θ %v): %v, want %v (%.2f ulp)", k, th, p[0], p[1], u)
			}
		}
	}
	t.Logf("SinCos64: worst %.2f ulp (against math.Sin/Cos of the reduced angle, themselves within an ulp)", worst)
}

// moments returns the mean, variance, skewness and excess kurtosis.
func moments(x []float64) (mean, variance, skew, kurt float64) {
	n := float64(len(x))
	for _, v := range x {
		mean += v
	}
	mean /= n
	var m2, m3, m4 float64
	for _, v := range x {
		d := v - mean
		m2 += d * d
		m3 += d * d * d
		m4 += d * d * d * d
	}
	m2, m3, m4 = m2/n, m3/n, m4/n
	return mean, m2, m3 / math.Pow(m2, 1.5), m4/(m2*m2) - 3
}

// ksNormal is the Kolmogorov–Smirnov statistic √n·D of x against N(0, 1).
func ksNormal(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	n := float64(len(s))
	d := 0.0
	for i, v := range s {
		f := 0.5 * math.Erfc(-v/math.Sqrt2)
		d = max(d, math.Abs(f-float64(i)/n), math.Abs(float64(i+1)/n-f))
	}
	return d * math.Sqrt(n)
}

// chiUniform is the χ² statistic of x over bins equal bins of [0, 1).
func chiUniform(x []float64, bins int) float64 {
	c := make([]float64, bins)
	for _, v := range x {
		c[int(v*float64(bins))]++
	}
	e := float64(len(x)) / float64(bins)
	chi := 0.0
	for _, o := range c {
		chi += (o - e) * (o - e) / e
	}
	return chi
}

// TestDistributions checks the variates' moments and fit over 10⁶
// float32 and 2·10⁵ float64 values (fixed seeds: the statistics are
// deterministic). Bounds: five standard errors of each moment's
// estimator (var of the sample mean 1/n; of the variance 2/n; of the
// skewness 6/n; of the kurtosis 24/n for normals), and p ≈ 10⁻⁶ for χ²
// (255 degrees of freedom: mean 255, sd 22.6) and Kolmogorov–Smirnov
// (√n·D < 2.7). Uniform: mean ½, variance 1/12 (estimator sd √(1/180/n)).
func TestDistributions(t *testing.T) {
	check := func(name string, x []float64, normal bool) {
		n := float64(len(x))
		mean, variance, skew, kurt := moments(x)
		tol := func(v float64) float64 { return 5 * math.Sqrt(v/n) }
		if normal {
			if math.Abs(mean) > tol(1) || math.Abs(variance-1) > tol(2) || math.Abs(skew) > tol(6) || math.Abs(kurt) > tol(24) {
				t.Errorf("%s: mean %.5f variance %.5f skewness %.5f excess kurtosis %.5f: not N(0, 1) (bounds %.5f %.5f %.5f %.5f)",
					name, mean, variance, skew, kurt, tol(1), tol(2), tol(6), tol(24))
			}
			if ks := ksNormal(x); ks > 2.7 {
				t.Errorf("%s: Kolmogorov–Smirnov √n·D = %.3f against N(0, 1)", name, ks)
			}
			// Box–Muller's two outputs must be uncorrelated.
			var c float64
			for i := 0; i+1 < len(x); i += 2 {
				c += x[i] * x[i+1]
			}
			if c /= n / 2; math.Abs(c) > tol(2) {
				t.Errorf("%s: correlation of the pairs %.5f", name, c)
			}
			t.Logf("%s: mean %.5f variance %.5f skewness %.5f excess kurtosis %.5f", name, mean, variance, skew, kurt)
			return
		}
		if math.Abs(mean-0.5) > tol(1.0/12) || math.Abs(variance-1.0/12) > tol(1.0/180) {
			t.Errorf("%s: mean %.5f variance %.5f: not U[0, 1)", name, mean, variance)
		}
		if chi := chiUniform(x, 256); chi > 255+5*22.6 || chi < 255-5*22.6 {
			t.Errorf("%s: χ² over 256 bins = %.1f (255 ± 113)", name, chi)
		}
		var c float64 // lag-1 correlation
		for i := 0; i+1 < len(x); i++ {
			c += (x[i] - 0.5) * (x[i+1] - 0.5)
		}
		if c = c / n * 12; math.Abs(c) > tol(1) {
			t.Errorf("%s: lag-1 correlation %.5f", name, c)
		}
	}
	const n32, n64 = 1000000, 200000
	f32 := make([]float32, n32)
	wide := func() []float64 {
		out := make([]float64, len(f32))
		for i, v := range f32 {
			out[i] = float64(v)
		}
		return out
	}
	Uniform32s(f32, 42, 0)
	check("Uniform32s", wide(), false)
	Normal32s(f32, 42, 0)
	check("Normal32s", wide(), true)
	f64 := make([]float64, n64)
	Uniform64s(f64, 7, 3)
	check("Uniform64s", f64, false)
	Normal64s(f64, 7, 3)
	check("Normal64s", f64, true)
}

package dtype

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// refF8Value decodes an E4M3FN code from the format's definition (OCP 8-bit
// floating point specification, E4M3: bias 7, no infinities, S.1111.111 is
// NaN), written here independently of Float8E4M3's own decoding.
func refF8Value(code int) float64 {
	sign := 1.0
	if code&0x80 != 0 {
		sign = -1
	}
	exp, man := (code>>3)&0xf, code&7
	if exp == 0xf && man == 7 {
		return math.NaN()
	}
	if exp == 0 {
		return sign * float64(man) / 8 * math.Pow(2, -6) // 0.m × 2^(1-bias)
	}
	return sign * (1 + float64(man)/8) * math.Pow(2, float64(exp-7))
}

// refF8Encode is the conversion spec, by exhaustive search: NaN → NaN with
// its sign (0x7f | sign); ±Inf → ±448 (float8's SatFinite); otherwise the
// nearest of the 127 finite magnitudes (codes 0x00…0x7e) to |x|, ties to the
// even code, with x's sign (so finite values beyond 448 also give ±448, and
// a negative value that rounds to zero gives -0). The distances are
// compared in float64 first (rounding is monotonic, so the true nearest
// codes are among those with the smallest rounded distance) and candidates
// that tie after rounding are compared exactly with big.Float.
func refF8Encode(x float64) uint8 {
	var sign uint8
	if math.Signbit(x) {
		sign = 0x80
	}
	switch {
	case math.IsNaN(x):
		return sign | 0x7f
	case math.IsInf(x, 0):
		return sign | 0x7e
	}
	ax := math.Abs(x)
	best := []int{}
	bestD := math.Inf(1)
	for c := 0; c <= 0x7e; c++ {
		d := math.Abs(ax - refF8Value(c))
		switch {
		case d < bestD:
			best, bestD = []int{c}, d
		case d == bestD:
			best = append(best, c)
		}
	}
	if len(best) > 1 {
		exact := func(c int) *big.Float {
			f := new(big.Float).SetPrec(2200).SetFloat64(ax)
			f.Sub(f, new(big.Float).SetFloat64(refF8Value(c)))
			return f.Abs(f)
		}
		var keep []int
		var kd *big.Float
		for _, c := range best {
			d := exact(c)
			switch {
			case kd == nil || d.Cmp(kd) < 0:
				keep, kd = []int{c}, d
			case d.Cmp(kd) == 0:
				keep = append(keep, c)
			}
		}
		best = keep
	}
	c := best[0]
	if len(best) == 2 && c&1 == 1 { // a tie between neighbours: the even code
		c = best[1]
	}
	return sign | uint8(c)
}

// TestF8E4M3Table checks the value of all 256 codes against the format's
// definition, a few codes against values read off the OCP specification's
// table, and that every finite code converts back to itself.
func TestF8E4M3Table(t *testing.T) {
	for code := 0; code < 256; code++ {
		x := Float8E4M3(code)
		want := refF8Value(code)
		if math.IsNaN(want) {
			if !math.IsNaN(x.Float64()) || !math.IsNaN(float64(x.Float32())) || !x.IsNaN() {
				t.Fatalf("code %#02x: got %v, want NaN", code, x.Float64())
			}
			if got := ToF8E4M3(x.Float32()); got != 0x7f { // widened NaNs are positive
				t.Fatalf("NaN code %#02x converts back to %#02x", code, got)
			}
			continue
		}
		if x.IsNaN() {
			t.Fatalf("code %#02x reports NaN", code)
		}
		if got := x.Float64(); got != want || math.Signbit(got) != math.Signbit(want) {
			t.Fatalf("code %#02x: Float64 = %v, want %v", code, got, want)
		}
		if got := x.Float32(); float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("code %#02x: Float32 = %v, want %v", code, got, want)
		}
		if got := ToF8E4M3(float32(want)); got != x {
			t.Fatalf("ToF8E4M3(%v) = %#02x, want %#02x", want, got, code)
		}
		if got := ToF8E4M3From64(want); got != x {
			t.Fatalf("ToF8E4M3From64(%v) = %#02x, want %#02x", want, got, code)
		}
	}
	// Anchors from the OCP FP8 specification (E4M3 column).
	for _, a := range []struct {
		code uint8
		v    float64
	}{
		{0x01, 0x1p-9}, {0x07, 0.875 * 0x1p-6}, {0x08, 0x1p-6}, {0x38, 1}, {0x40, 2},
		{0x7e, 448}, {0xfe, -448}, {0x80, math.Copysign(0, -1)}, {0x77, 240}, {0xb8, -1},
	} {
		if got := Float8E4M3(a.code).Float64(); got != a.v || math.Signbit(got) != math.Signbit(a.v) {
			t.Fatalf("code %#02x = %v, want %v", a.code, got, a.v)
		}
	}
	if Float8E4M3(0x7e).Float64() != F8E4M3Max {
		t.Fatal("F8E4M3Max is not code 0x7e")
	}
}

// f8Points are the inputs the conversion tests use: every code's value and
// its float32 neighbours, the midpoints between neighbouring codes and
// their neighbours in float32 and float64, the overflow region, the
// specials, and random values over the whole exponent range.
func f8Points() []float64 {
	var pts []float64
	add := func(v float64) { pts = append(pts, v, -v) }
	for c := 0; c < 0x7f; c++ {
		v := refF8Value(c)
		add(v)
		for _, d := range []float32{-1, 1} {
			add(float64(math.Nextafter32(float32(v), float32(d)*1e30)))
		}
		next := 480.0 // the code 0x7f would have, were it not NaN
		if c < 0x7e {
			next = refF8Value(c + 1)
		}
		mid := (v + next) / 2
		add(mid)
		add(math.Nextafter(mid, 0))
		add(math.Nextafter(mid, 1e300))
		add(float64(math.Nextafter32(float32(mid), 0)))
		add(float64(math.Nextafter32(float32(mid), 1e30)))
	}
	for _, v := range []float64{0, 0x1p-10, 0x1p-11, 1e-30, 5e-324, 449, 463.99, 464, 464.0001, 479, 480, 481, 1000, 65504, 1e38, math.MaxFloat32, 1e300, math.MaxFloat64, math.Inf(1), math.NaN()} {
		add(v)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		// Exponents from 2^-14 to 2^11 cover underflow, subnormals, normals
		// and overflow; the mantissa is a full-precision float64.
		add(math.Ldexp(1+r.Float64(), r.IntN(26)-14))
	}
	return pts
}

// TestF8E4M3Rounding checks ToF8E4M3From64 and ToF8E4M3 against the
// exhaustive-search spec.
func TestF8E4M3Rounding(t *testing.T) {
	for _, x := range f8Points() {
		want := refF8Encode(x)
		if got := ToF8E4M3From64(x); uint8(got) != want {
			t.Fatalf("ToF8E4M3From64(%v (bits %#016x)) = %#02x, want %#02x", x, math.Float64bits(x), got, want)
		}
		x32 := float32(x)
		want = refF8Encode(float64(x32))
		if got := ToF8E4M3(x32); uint8(got) != want {
			t.Fatalf("ToF8E4M3(%v (bits %#08x)) = %#02x, want %#02x", x32, math.Float32bits(x32), got, want)
		}
	}
}

// TestF8E4M3Saturation states the overflow and NaN rules of Candle's
// float8 crate (F8E4M3::from_f64 with SatFinite) one by one.
func TestF8E4M3Saturation(t *testing.T) {
	negNaN := math.Copysign(math.NaN(), -1)
	for _, c := range []struct {
		x    float64
		want uint8
	}{
		{448, 0x7e}, {449, 0x7e}, {464, 0x7e}, {464.5, 0x7e}, {480, 0x7e}, {1e10, 0x7e},
		{math.Inf(1), 0x7e}, {math.Inf(-1), 0xfe}, {-1e10, 0xfe},
		{math.NaN(), 0x7f}, {negNaN, 0xff},
		{0x1p-10, 0x00}, {-0x1p-10, 0x80}, {0x1p-10 * 1.0000001, 0x01}, {0x1p-9 * 1.5, 0x02}, {0x1p-9 * 2.5, 0x02},
		{-1e-30, 0x80},
	} {
		if got := ToF8E4M3From64(c.x); uint8(got) != c.want {
			t.Errorf("ToF8E4M3From64(%v) = %#02x, want %#02x", c.x, got, c.want)
		}
		if got := ToF8E4M3(float32(c.x)); uint8(got) != c.want {
			t.Errorf("ToF8E4M3(%v) = %#02x, want %#02x", float32(c.x), got, c.want)
		}
	}
}

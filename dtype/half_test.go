package dtype

import (
	"math"
	"math/big"
	"testing"
)

// refRound rounds x to a binary format with p mantissa bits (incl. implicit),
// minimum normal exponent emin and maximum finite value max, using big.Float
// as an independent reference (ties to even).
func refRound(x float64, p uint, emin int, max float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x == 0 {
		return x
	}
	// Below the normal range the spacing is fixed at 2^(emin-p+1).
	_, e := math.Frexp(x) // x = m*2^e, m in [0.5,1)
	prec := p
	if e-1 < emin {
		d := emin - (e - 1)
		if int(p)-d <= 0 {
			// Could round up to the smallest subnormal: compare to half of it.
			unit := math.Ldexp(1, emin-int(p)+1)
			if math.Abs(x) > unit/2 {
				return math.Copysign(unit, x)
			}
			return math.Copysign(0, x)
		}
		prec = uint(int(p) - d)
	}
	f := new(big.Float).SetMode(big.ToNearestEven).SetPrec(prec).SetFloat64(x)
	r, _ := f.Float64()
	if math.Abs(r) > max {
		return math.Inf(int(math.Copysign(1, x)))
	}
	return r
}

func TestF16Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := Float16(i)
		v := h.Float64()
		if math.IsNaN(v) {
			if !math.IsNaN(ToF16(float32(v)).Float64()) {
				t.Fatalf("NaN %#04x does not round trip", i)
			}
			continue
		}
		if got := ToF16(float32(v)); got != h && !(v == 0 && got&0x7fff == 0) {
			t.Fatalf("f16 %#04x (%g) round trips to %#04x", i, v, got)
		}
	}
}

func TestF16Rounding(t *testing.T) {
	const max16 = 65504
	pts := []float64{1 + 0x1p-11, 1 + 3*0x1p-11, 0x1p-25, 0x1p-25 * 1.5, 0x1p-24 * 2.5, 65519, 65520, -65520, 1e-8, 0x1p-14 - 0x1p-25}
	r := uint64(12345)
	for i := 0; i < 200000; i++ {
		r = r*6364136223846793005 + 1442695040888963407
		e := int(r>>58) - 30
		m := float64(r>>11&(1<<52-1))/(1<<52) + 1
		s := 1.0
		if r&1 == 1 {
			s = -1
		}
		pts = append(pts, s*math.Ldexp(m, e))
	}
	for _, x := range pts {
		want := refRound(x, 11, -14, max16)
		if got := ToF16From64(x).Float64(); got != want {
			t.Fatalf("ToF16From64(%v) = %v, want %v", x, got, want)
		}
		x32 := float64(float32(x))
		want = refRound(x32, 11, -14, max16)
		if got := ToF16(float32(x)).Float64(); got != want {
			t.Fatalf("ToF16(%v) = %v, want %v", x32, got, want)
		}
		wantB := refRound(x, 8, -126, float64(math.Float32frombits(0x7f7f0000)))
		if got := ToBF16From64(x).Float64(); got != wantB {
			t.Fatalf("ToBF16From64(%v) = %v, want %v", x, got, wantB)
		}
		wantB = refRound(x32, 8, -126, float64(math.Float32frombits(0x7f7f0000)))
		if got := ToBF16(float32(x)).Float64(); got != wantB {
			t.Fatalf("ToBF16(%v) = %v, want %v", x32, got, wantB)
		}
	}
}

func TestBF16Exhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		b := BFloat16(i)
		v := b.Float32()
		got := ToBF16(v)
		if v != v {
			if g := got.Float32(); g == g {
				t.Fatalf("bf16 NaN %#04x became %v", i, g)
			}
			continue
		}
		if got != b {
			t.Fatalf("bf16 %#04x round trips to %#04x", i, got)
		}
	}
}

func TestDTypeNames(t *testing.T) {
	for _, d := range All {
		p, err := Parse(d.String())
		if err != nil || p != d {
			t.Fatalf("Parse(%q) = %v, %v", d, p, err)
		}
	}
	if _, err := Parse("f8"); err == nil {
		t.Fatal("Parse(f8) accepted")
	}
}

func TestToF16MatchesExact(t *testing.T) {
	check := func(f float32) {
		got, want := ToF16(f), ToF16From64(float64(f))
		if got != want && !(f != f && got&0x7c00 == 0x7c00 && got&0x3ff != 0) {
			t.Fatalf("ToF16(%g bits %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	// Every f16 value, its neighbours and the midpoints between them.
	for i := 0; i < 1<<15; i++ {
		v := Float16(i).Float32()
		for _, u := range []uint32{math.Float32bits(v) - 1, math.Float32bits(v), math.Float32bits(v) + 1} {
			check(math.Float32frombits(u))
			check(-math.Float32frombits(u))
		}
		mid := float32((Float16(i).Float64() + Float16(i+1).Float64()) / 2)
		check(mid)
		check(math.Nextafter32(mid, 0))
		check(math.Nextafter32(mid, 1e9))
	}
	r := uint32(1)
	for range 2_000_000 {
		r ^= r << 13
		r ^= r >> 17
		r ^= r << 5
		check(math.Float32frombits(r))
	}
}

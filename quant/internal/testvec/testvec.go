// Package testvec makes the deterministic inputs that package quant's golden
// tests and the GGML golden generator (scripts/ggml-golden) share: float rows
// of several distributions and random block bytes with sane scale fields.
//
// The inputs are computed from a fixed seed with integer operations and
// correctly rounded float64 additions and multiplications only (no math
// library calls, every product converted before it is added, so no fused
// multiply-add), so every platform Go runs on makes the same bits. The
// golden file records a SHA-256 of every input and the tests check it
// first: a change here shows up as "inputs changed", not as a codec bug.
package testvec

import "math"

// N is the length of every input row: 16 super-blocks of 256, 128 blocks of 32.
const N = 4096

// Seed is the seed of every input; changing it changes every golden hash.
const Seed uint64 = 0x6c6f6f6d71756e74 // "loomqunt"

// Case is one named input row.
type Case struct {
	Name string
	Data []float32
}

// rng is splitmix64: one 64-bit state, a full period, good enough mixing
// for test inputs, and trivial to reproduce anywhere.
type rng struct{ s uint64 }

func newRNG(stream uint64) *rng { return &rng{Seed ^ stream*0x9e3779b97f4a7c15} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// uniform returns a float64 in [0, 1) with 53 random bits (exact).
func (r *rng) uniform() float64 { return float64(r.next()>>11) * 0x1p-53 }

// normal returns an approximately standard normal value: the Irwin–Hall sum
// of 12 uniforms minus 6 (tails end at ±6, which is fine for test inputs and
// needs no transcendental function whose last bit could differ by platform).
func (r *rng) normal() float64 {
	s := 0.0
	for i := 0; i < 12; i++ {
		s += r.uniform()
	}
	return s - 6
}

func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// Inputs returns the named input rows, N values each, in a fixed order.
// None holds NaN or ±Inf.
func Inputs() []Case {
	var cs []Case
	add := func(name string, stream uint64, f func(r *rng, i int) float64) {
		r := newRNG(stream)
		d := make([]float32, N)
		for i := range d {
			d[i] = float32(f(r, i))
		}
		cs = append(cs, Case{name, d})
	}
	add("normal", 1, func(r *rng, i int) float64 { return r.normal() })
	add("uniform", 2, func(r *rng, i int) float64 { return float64(2*r.uniform()) - 1 })
	// All positive: the min of every block is > 0, which the min/scale
	// formats (q4_1, q5_1, q2_k, q4_k, q5_k) clamp to 0.
	add("positive", 3, func(r *rng, i int) float64 { return float64(1.5*r.uniform()) + 0.5 })
	// 1 value in 64 is scaled by ±40.
	add("outliers", 4, func(r *rng, i int) float64 {
		v := r.normal()
		if r.intn(64) == 0 {
			v = float64(v * 40)
		}
		return v
	})
	// Every other 32-value block and every fourth 256-value block is 0.
	add("zero_blocks", 5, func(r *rng, i int) float64 {
		v := r.normal()
		if (i/32)%2 == 1 || (i/256)%4 == 2 {
			return 0
		}
		return v
	})
	// Small enough that f16 scales are subnormal or round to 0.
	add("tiny", 6, func(r *rng, i int) float64 { return float64(r.normal() * 1e-5) })
	// f32 subnormals: reciprocal scales overflow to +Inf in GGML's code.
	add("subnormal", 7, func(r *rng, i int) float64 { return float64(r.normal() * 1e-39) })
	// One value per 256 of ±5000, at a varying position, among N(0,1).
	add("huge", 8, func(r *rng, i int) float64 {
		v := r.normal()
		if i%256 == (i/256*37)%256 {
			if i/256%2 == 0 {
				return 5000
			}
			return -5000
		}
		return v
	})
	// Constant 32-value blocks (max == min), a different constant each.
	add("constant", 9, func(r *rng, i int) float64 {
		c := float64(i/32%7) - 3
		return float64(c * 0.375)
	})
	// Multiples of 1/4 in [-8, 8]: many exact .5 ties after scaling.
	add("grid", 10, func(r *rng, i int) float64 { return float64(r.intn(65)-32) / 4 })
	// Large magnitudes that still keep every format's scale inside f16.
	add("big", 11, func(r *rng, i int) float64 { return float64(r.normal() * 2000) })
	// A different magnitude per 32-value block, 1e-3 … 1e3.
	add("mixed_scale", 12, func(r *rng, i int) float64 {
		scale := [...]float64{1e-3, 3e-2, 1, 7, 250, 1e3, 0.5, 1e-1}[i/32%8]
		return float64(r.normal() * scale)
	})
	return cs
}

// Activation returns the row that the golden dot products use as the
// activation (before it is quantized to the weight's activation format).
func Activation() []float32 {
	r := newRNG(100)
	d := make([]float32, N)
	for i := range d {
		d[i] = float32(r.normal())
	}
	return d
}

// Layout says where a GGML block keeps its floating-point fields, so that
// random blocks can be given finite, moderate scales (random bytes there
// would be NaN and Inf half the time, and tests would then compare NaN
// payloads, which differ between CPU architectures).
type Layout struct {
	Block, Size int   // elements and bytes per block
	F16         []int // offsets of f16 fields in a block
	F32         []int // offsets of f32 fields in a block
}

// Layouts lists the layouts by GGML type number.
var Layouts = map[uint32]Layout{
	0:  {1, 4, nil, []int{0}},         // f32
	1:  {1, 2, []int{0}, nil},         // f16
	30: {1, 2, nil, nil},              // bf16 (handled in Random)
	2:  {32, 18, []int{0}, nil},       // q4_0: d
	3:  {32, 20, []int{0, 2}, nil},    // q4_1: d, m
	6:  {32, 22, []int{0}, nil},       // q5_0: d
	7:  {32, 24, []int{0, 2}, nil},    // q5_1: d, m
	8:  {32, 34, []int{0}, nil},       // q8_0: d
	9:  {32, 36, []int{0, 2}, nil},    // q8_1: d, s
	10: {256, 84, []int{80, 82}, nil}, // q2_k: d, dmin
	11: {256, 110, []int{108}, nil},   // q3_k: d
	12: {256, 144, []int{0, 2}, nil},  // q4_k: d, dmin
	13: {256, 176, []int{0, 2}, nil},  // q5_k: d, dmin
	14: {256, 210, []int{208}, nil},   // q6_k: d
	15: {256, 292, nil, []int{0}},     // q8_k: d
}

// Random returns nblocks random blocks of GGML type t: random bytes, with
// every scale field replaced by a random finite value of magnitude at most
// 8 (f16 fields: any exponent up to 2^2, subnormals and zero included).
// Rows of the same type from different streams differ (the golden dots
// use stream 0 for weights and 1 for activations).
func Random(t uint32, nblocks int, stream uint64) []byte {
	lay, ok := Layouts[t]
	if !ok {
		return nil
	}
	r := newRNG(1000 + uint64(t) + 100*stream)
	b := make([]byte, nblocks*lay.Size)
	for i := range b {
		b[i] = byte(r.next())
	}
	for blk := 0; blk < nblocks; blk++ {
		base := blk * lay.Size
		for _, o := range lay.F16 {
			h := randF16(r)
			b[base+o], b[base+o+1] = byte(h), byte(h>>8)
		}
		for _, o := range lay.F32 {
			u := math.Float32bits(randF32(r))
			b[base+o], b[base+o+1], b[base+o+2], b[base+o+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		}
		if t == 30 { // bf16: exponent 2^-20 … 2^3
			u := math.Float32bits(randF32(r)) >> 16
			b[base], b[base+1] = byte(u), byte(u>>8)
		}
	}
	return b
}

// randF16 returns f16 bits with a random sign and mantissa and a biased
// exponent in 0…17 (zero and subnormals up to 2^2·(2−2^-10)).
func randF16(r *rng) uint16 {
	v := r.next()
	return uint16(v&0x83ff) | uint16(v>>16%18)<<10
}

// randF32 returns a random float32 of magnitude 2^-20 … 2^3 (or 0).
func randF32(r *rng) float32 {
	v := r.next()
	if v%97 == 0 {
		return 0
	}
	exp := uint32(127-20) + uint32(v>>8%24)
	return math.Float32frombits(uint32(v>>32)&0x807fffff | exp<<23)
}

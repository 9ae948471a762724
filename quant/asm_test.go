package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/quant/internal/testvec"
)

// twinDots are the pure-Go VecDot twins, whatever the codec table runs.
var twinDots = map[Type]func(w, a []byte, nb int) float32{
	Q4_0: dotQ4_0Q8_0, Q4_1: dotQ4_1Q8_1, Q5_0: dotQ5_0Q8_0, Q5_1: dotQ5_1Q8_1,
	Q8_0: dotQ8_0Q8_0, Q2_K: dotQ2_KQ8_K, Q3_K: dotQ3_KQ8_K, Q4_K: dotQ4_KQ8_K,
	Q5_K: dotQ5_KQ8_K, Q6_K: dotQ6_KQ8_K,
	F32: dotF32, F16: dotF16, BF16: dotBF16,
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// fillCodes returns nb random blocks of t (sane scales) with every
// non-scale byte set to fill (or left random when fill < 0).
func fillCodes(t Type, nb int, fill int, stream uint64) []byte {
	b := testvec.Random(uint32(t), nb, stream)
	if fill < 0 {
		return b
	}
	lay := testvec.Layouts[uint32(t)]
	scale := map[int]bool{}
	for _, o := range lay.F16 {
		scale[o], scale[o+1] = true, true
	}
	for _, o := range lay.F32 {
		scale[o], scale[o+1], scale[o+2], scale[o+3] = true, true, true, true
	}
	for i := range b {
		if !scale[i%lay.Size] {
			b[i] = byte(fill)
		}
	}
	return b
}

// biasedCodes returns nb random blocks of t whose codes sit at one end of
// their range (q8 bytes in −128…−100, Q4 codes near 0 or 15, Q6 codes
// near 0), so that the integer sums are large (15 to 19 bits) and the
// float32 products of sum and scales round: this is what tells one order
// of the float multiplications from another.
func biasedCodes(t Type, nb int, stream uint64) []byte {
	b := testvec.Random(uint32(t), nb, stream)
	r := rand.New(rand.NewPCG(uint64(t), stream))
	tr, _ := t.Traits()
	for blk := 0; blk < nb; blk++ {
		x := b[blk*tr.Size : (blk+1)*tr.Size]
		v := func() byte { return byte(r.Uint32()) }
		switch t {
		case Q8_0:
			for i := 2; i < 34; i++ {
				x[i] = 0x80 + v()%29
			}
		case Q8_K:
			for i := 4; i < 260; i++ {
				x[i] = 0x80 + v()%29
			}
		case Q8_1:
			for i := 4; i < 36; i++ {
				x[i] = 0x80 + v()%29
			}
		case Q4_0:
			for i := 2; i < 18; i++ {
				x[i] = v() & 0x11
			}
		case Q4_1:
			for i := 4; i < 20; i++ {
				x[i] = 0xee | v()&0x11
			}
		case Q5_0, Q5_1:
			// Codes near 31: nibbles 14 or 15, fifth bits mostly set.
			h := 2 // qh's offset in the block
			if t == Q5_1 {
				h = 4
			}
			for i := h; i < h+4; i++ {
				x[i] = 0xff ^ v()&0x11
			}
			for i := h + 4; i < h+20; i++ {
				x[i] = 0xee | v()&0x11
			}
		case Q2_K:
			// Scales and minimums near 15, codes near 3.
			for i := 0; i < 16; i++ {
				x[i] = 0xff ^ v()&0x11
			}
			for i := 16; i < 80; i++ {
				x[i] = 0xff ^ v()&0x55
			}
		case Q3_K:
			// Values −4 (code 0, hmask bit clear) and scales at −32 or 31.
			for i := 0; i < 96; i++ {
				x[i] = v() & 0x11
			}
			for i := 96; i < 108; i++ {
				x[i] = 0xff * (v() & 1)
			}
		case Q4_K:
			for i := 16; i < 144; i++ {
				x[i] = 0xee | v()&0x11
			}
		case Q5_K:
			// Codes near 31 (nibbles 14 or 15, fifth bits mostly set).
			for i := 16; i < 48; i++ {
				x[i] = 0xff ^ v()&0x11
			}
			for i := 48; i < 176; i++ {
				x[i] = 0xee | v()&0x11
			}
		case Q6_K:
			for i := 0; i < 128; i++ {
				x[i] = v() & 0x11
			}
			clear(x[128:192])
			for i := 192; i < 208; i++ {
				x[i] = 0x80 + v()%8
			}
		}
	}
	return b
}

// TestAsmDotsMatchTwins checks the assembly dot products bit for bit
// against the Go twins: on every golden input row (quantized) with the
// quantized activation row, on random blocks, on blocks with large integer
// sums (biasedCodes), on blocks whose codes are
// all 0x00, 0x80 (−128 in the activations), 0x7f or 0xff, and on every
// prefix of 0…40 blocks.
func TestAsmDotsMatchTwins(t *testing.T) {
	if !hasDotAVX2 {
		t.Skip("no assembly dot products here (they need amd64 with AVX2 and F16C); VecDot runs the Go twins, which the golden test checks")
	}
	act := testvec.Activation()
	for typ, asm := range asmDots {
		twin := twinDots[typ]
		at := ActivationType(typ)
		tr, _ := typ.Traits()
		atr, _ := at.Traits()
		type pair struct {
			name string
			w, a []byte
		}
		aq := make([]byte, len(act)/atr.Block*atr.Size)
		if err := Quantize(at, act, aq); err != nil {
			t.Fatal(err)
		}
		var rows []pair
		for _, c := range testvec.Inputs() {
			wq := make([]byte, len(c.Data)/tr.Block*tr.Size)
			if err := Quantize(typ, c.Data, wq); err != nil {
				t.Fatal(err)
			}
			rows = append(rows, pair{c.Name, wq, aq})
		}
		nb := testvec.N / tr.Block
		rows = append(rows, pair{"random", fillCodes(typ, nb, -1, 0), fillCodes(at, nb, -1, 1)})
		rows = append(rows, pair{"biased", biasedCodes(typ, nb, 0), biasedCodes(at, nb, 1)})
		for _, wf := range []int{0x00, 0x80, 0x7f, 0xff} {
			for _, af := range []int{0x00, 0x80, 0x7f, 0xff, -1} {
				rows = append(rows, pair{"fill", fillCodes(typ, nb, wf, 0), fillCodes(at, nb, af, 1)})
			}
		}
		for _, r := range rows {
			for _, k := range []int{0, 1, 2, 3, 5, 8, 13, 16, 40, nb} {
				k = min(k, nb)
				w, a := r.w[:k*tr.Size], r.a[:k*tr.Block/atr.Block*atr.Size]
				if got, want := asm(w, a, k), twin(w, a, k); !sameBits(got, want) {
					t.Fatalf("%v·%v %s, %d blocks: assembly %g (%#08x), twin %g (%#08x)", typ, at, r.name, k, got, math.Float32bits(got), want, math.Float32bits(want))
				}
			}
		}
	}
}

// TestAsmDotsFresh compares assembly and twins on fresh random bytes.
func TestAsmDotsFresh(t *testing.T) {
	if !hasDotAVX2 {
		t.Skip("no assembly dot products here (they need amd64 with AVX2 and F16C)")
	}
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 3))
	for typ, asm := range asmDots {
		at := ActivationType(typ)
		tr, _ := typ.Traits()
		atr, _ := at.Traits()
		for trial := 0; trial < 200; trial++ {
			nb := 1 + r.IntN(24)
			w := make([]byte, nb*tr.Size)
			a := make([]byte, nb*tr.Block/atr.Block*atr.Size)
			for i := range w {
				w[i] = byte(r.Uint32())
			}
			for i := range a {
				a[i] = byte(r.Uint32())
			}
			// Scales: random finite f16 (f32 for Q8_K) of any magnitude;
			// Inf and NaN scales too in one trial in ten.
			wild := trial%10 == 0
			for _, buf := range [][]byte{w, a} {
				bt, bs := typ, tr.Size
				if len(buf) == len(a) && &buf[0] == &a[0] {
					bt, bs = at, atr.Size
				}
				lay := testvec.Layouts[uint32(bt)]
				for blk := 0; blk < len(buf)/bs; blk++ {
					for _, o := range lay.F16 {
						h := uint16(r.Uint32())
						if !wild && h&0x7c00 == 0x7c00 {
							h &^= 0x4000
						}
						put16(buf[blk*bs+o:], h)
					}
					for _, o := range lay.F32 {
						f := math.Float32frombits(r.Uint32())
						if !wild && (math.IsNaN(float64(f)) || math.IsInf(float64(f), 0)) {
							f = 1
						}
						put32(buf[blk*bs+o:], math.Float32bits(f))
					}
				}
			}
			if got, want := asm(w, a, nb), twinDots[typ](w, a, nb); !sameBits(got, want) {
				t.Fatalf("seed %d: %v·%v %d blocks: assembly %g (%#08x), twin %g (%#08x)", seed, typ, at, nb, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
}

// TestVecDotRows: VecDotRows gives VecDot's bits row by row (the two-row
// assembly for Q4_0 included), for odd and even row counts, block counts
// that are and are not multiples of four, random and extreme codes; and
// refuses rows that do not divide the bytes.
func TestVecDotRows(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, typ := range []Type{Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, Q4_1, Q5_0, Q5_1} {
		tr, _ := typ.Traits()
		act := ActivationType(typ)
		for trial := range 40 {
			nb := 1 + r.IntN(13)
			rows := 1 + r.IntN(7)
			if trial%4 == 1 { // many rows: the prepared activations serve many pairs
				rows = 16 + r.IntN(25)
			}
			if trial%10 == 3 { // a 4,096-value row (128 blocks of 32)
				nb = 4096 / tr.Block
			}
			n := nb * tr.Block
			w := testRows(typ, nb, rows, trial)
			atr, _ := act.Traits()
			a := fillCodes(act, n/atr.Block, -1, uint64(1000+trial))
			if trial%3 == 0 {
				a = biasedCodes(act, n/atr.Block, uint64(1000+trial))
			}
			if trial%8 == 5 { // the largest codes against −128: the widest integer sums
				w = nil
				for i := range rows {
					w = append(w, fillCodes(typ, nb, 0xff, uint64(trial*8+i))...)
				}
				a = fillCodes(act, n/atr.Block, 0x80, uint64(1000+trial))
			}
			out := make([]float32, rows)
			if err := VecDotRows(typ, w, act, a, n, out); err != nil {
				t.Fatal(err)
			}
			rb := len(w) / rows
			for i := range rows {
				want, err := VecDot(typ, w[i*rb:(i+1)*rb], act, a, n)
				if err != nil {
					t.Fatal(err)
				}
				if !sameBits(out[i], want) {
					t.Fatalf("%v, %d rows of %d blocks: row %d = %v, VecDot %v", typ, rows, nb, i, out[i], want)
				}
			}
		}
	}
	if err := VecDotRows(Q4_0, make([]byte, 37), Q8_0, make([]byte, 34), 32, make([]float32, 2)); err == nil {
		t.Error("37 bytes as 2 rows: no error")
	}
}

// TestVecDotRows2: VecDotRows2 gives VecDot's bits for each weight row
// against each of its two activation rows (Q4_K's, Q5_K's, Q6_K's and
// Q5_0's two-activation assembly where the CPU has AVX2, two VecDotRows
// calls for Q4_0), for
// random and extreme codes, one row and many; and refuses mismatched
// outputs and rows that do not divide the bytes.
func TestVecDotRows2(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, typ := range []Type{Q4_K, Q4_0, Q5_K, Q6_K, Q5_0} {
		tr, _ := typ.Traits()
		act := ActivationType(typ)
		atr, _ := act.Traits()
		for trial := range 30 {
			nb := 1 + r.IntN(13)
			rows := 1 + r.IntN(7)
			if trial%4 == 1 {
				rows = 16 + r.IntN(25)
			}
			n := nb * tr.Block
			w := testRows(typ, nb, rows, trial)
			a := fillCodes(act, n/atr.Block, -1, uint64(2000+trial))
			b := fillCodes(act, n/atr.Block, -1, uint64(3000+trial))
			if trial%3 == 0 {
				a = biasedCodes(act, n/atr.Block, uint64(2000+trial))
			}
			if trial%8 == 5 { // the largest codes against −128 in one row and 127 in the other
				w = nil
				for i := range rows {
					w = append(w, fillCodes(typ, nb, 0xff, uint64(trial*8+i))...)
				}
				a = fillCodes(act, n/atr.Block, 0x80, uint64(2000+trial))
				b = fillCodes(act, n/atr.Block, 0x7f, uint64(3000+trial))
			}
			outA, outB := make([]float32, rows), make([]float32, rows)
			if err := VecDotRows2(typ, w, act, a, b, n, outA, outB); err != nil {
				t.Fatal(err)
			}
			rb := len(w) / rows
			for i := range rows {
				for _, c := range []struct {
					arow []byte
					got  float32
				}{{a, outA[i]}, {b, outB[i]}} {
					want, err := VecDot(typ, w[i*rb:(i+1)*rb], act, c.arow, n)
					if err != nil {
						t.Fatal(err)
					}
					if !sameBits(c.got, want) {
						t.Fatalf("%v, %d rows of %d blocks: row %d = %v, VecDot %v", typ, rows, nb, i, c.got, want)
					}
				}
			}
		}
	}
	if err := VecDotRows2(Q4_K, make([]byte, 145), Q8_K, make([]byte, 292), make([]byte, 292), 256, make([]float32, 1), make([]float32, 1)); err == nil {
		t.Error("145 bytes as a row: no error")
	}
	if err := VecDotRows2(Q4_K, make([]byte, 144), Q8_K, make([]byte, 292), make([]byte, 292), 256, make([]float32, 1), make([]float32, 2)); err == nil {
		t.Error("1 and 2 outputs: no error")
	}
}

// testRows is rows weight rows of nb blocks of typ for trial: extreme
// codes (biasedCodes) every third trial, random ones otherwise.
func testRows(typ Type, nb, rows, trial int) []byte {
	var w []byte
	for i := range rows {
		if trial%3 == 0 {
			w = append(w, biasedCodes(typ, nb, uint64(trial*8+i))...)
		} else {
			w = append(w, fillCodes(typ, nb, -1, uint64(trial*8+i))...)
		}
	}
	return w
}

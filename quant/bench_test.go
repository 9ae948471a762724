package quant

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// Benchmarks over a 4096-value row (a 7B model's hidden size); SetBytes
// counts the quantized bytes read, so MB/s is weight bandwidth.

const benchN = 4096

func benchTypes() []Type {
	var ts []Type
	for t := range codecs {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts
}

func benchRow(t Type) ([]float32, []byte) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, benchN)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	tr, _ := t.Traits()
	q := make([]byte, benchN/tr.Block*tr.Size)
	if err := Quantize(t, x, q); err != nil {
		panic(err)
	}
	return x, q
}

func BenchmarkQuantize(b *testing.B) {
	for _, t := range benchTypes() {
		b.Run(t.String(), func(b *testing.B) {
			x, q := benchRow(t)
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				Quantize(t, x, q)
			}
		})
	}
}

func BenchmarkDequantize(b *testing.B) {
	for _, t := range benchTypes() {
		b.Run(t.String(), func(b *testing.B) {
			x, q := benchRow(t)
			b.SetBytes(int64(len(q)))
			for b.Loop() {
				Dequantize(t, q, x)
			}
		})
	}
}

func BenchmarkVecDot(b *testing.B) {
	for _, t := range benchTypes() {
		c := codecs[t]
		if c.dot == nil {
			continue
		}
		b.Run(t.String()+"·"+c.act.String(), func(b *testing.B) {
			_, w := benchRow(t)
			_, a := benchRow(c.act)
			b.SetBytes(int64(len(w)))
			var s float32
			for b.Loop() {
				s, _ = VecDot(t, w, c.act, a, benchN)
			}
			_ = s
		})
	}
}

// BenchmarkVecDotTwin runs the Go twins of the types that have assembly,
// for the speedup (compare with BenchmarkVecDot on an AVX2 machine).
func BenchmarkVecDotTwin(b *testing.B) {
	for _, t := range benchTypes() {
		if _, ok := asmDots[t]; !ok {
			continue
		}
		act := ActivationType(t)
		b.Run(t.String()+"·"+act.String(), func(b *testing.B) {
			_, w := benchRow(t)
			_, a := benchRow(act)
			tr, _ := t.Traits()
			b.SetBytes(int64(len(w)))
			var s float32
			for b.Loop() {
				s = twinDots[t](w, a, benchN/tr.Block)
			}
			_ = s
		})
	}
}

// BenchmarkVecDotRows is BenchmarkVecDot over 64 weight rows at once
// (VecDotRows: the two-row assembly for Q4_0), bytes per weight row.
func BenchmarkVecDotRows(b *testing.B) {
	for _, t := range []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K} {
		c := codecs[t]
		b.Run(t.String()+"·"+c.act.String(), func(b *testing.B) {
			_, w := benchRow(t)
			_, a := benchRow(c.act)
			const rows = 64
			ws := make([]byte, 0, rows*len(w))
			for range rows {
				ws = append(ws, w...)
			}
			out := make([]float32, rows)
			b.SetBytes(int64(len(ws)))
			for b.Loop() {
				if err := VecDotRows(t, ws, c.act, a, benchN, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVecDotRowsSmol is VecDotRows over rows of 576 values (SmolLM-
// 135M's hidden size, 18 blocks of 32), 1,536 of them (its MLP's gate or
// up matrix), in the formats a k-quant file of it stores such rows in:
// bytes per weight row. Short rows are where a row's call and tail cost
// most.
func BenchmarkVecDotRowsSmol(b *testing.B) {
	const n, rows = 576, 1536
	for _, t := range []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0} {
		c := codecs[t]
		b.Run(t.String()+"·"+c.act.String(), func(b *testing.B) {
			_, w := benchRow(t)
			_, a := benchRow(c.act)
			tr, _ := t.Traits()
			atr, _ := c.act.Traits()
			rb := n / tr.Block * tr.Size
			ws := make([]byte, 0, rows*rb)
			for range rows {
				ws = append(ws, w[:rb]...)
			}
			a = a[:n/atr.Block*atr.Size]
			out := make([]float32, rows)
			b.SetBytes(int64(len(ws)))
			for b.Loop() {
				if err := VecDotRows(t, ws, c.act, a, n, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVecDotRowsMem is BenchmarkVecDotRows over ~38 MB of weight
// rows (more than the last-level cache of the machines it was timed on),
// so the rows come from memory: one thread's streaming rate, bytes per
// weight row. Skipped with -short (it allocates the 38 MB).
func BenchmarkVecDotRowsMem(b *testing.B) {
	if testing.Short() {
		b.Skip("allocates ~38 MB of weights")
	}
	for _, t := range []Type{Q4_K, Q5_K, Q6_K, Q8_0} {
		c := codecs[t]
		b.Run(t.String()+"·"+c.act.String(), func(b *testing.B) {
			_, w := benchRow(t)
			_, a := benchRow(c.act)
			rows := 38_000_000 / len(w)
			ws := make([]byte, 0, rows*len(w))
			for range rows {
				ws = append(ws, w...)
			}
			out := make([]float32, rows)
			b.SetBytes(int64(len(ws)))
			for b.Loop() {
				if err := VecDotRows(t, ws, c.act, a, benchN, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVecDotRows2 is 64 weight rows against two activation rows: as
// one VecDotRows2 call ("pair": Q4_K's and Q6_K's two-activation
// assembly) and as two VecDotRows calls ("two"), bytes per weight row.
func BenchmarkVecDotRows2(b *testing.B) {
	for _, t := range []Type{Q4_K, Q5_K, Q6_K, Q5_0} {
		c := codecs[t]
		_, w := benchRow(t)
		_, a := benchRow(c.act)
		a2 := append([]byte(nil), a...)
		const rows = 64
		ws := make([]byte, 0, rows*len(w))
		for range rows {
			ws = append(ws, w...)
		}
		outA, outB := make([]float32, rows), make([]float32, rows)
		b.Run(t.String()+"/pair", func(b *testing.B) {
			b.SetBytes(int64(len(ws)))
			for b.Loop() {
				if err := VecDotRows2(t, ws, c.act, a, a2, benchN, outA, outB); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(t.String()+"/two", func(b *testing.B) {
			b.SetBytes(int64(len(ws)))
			for b.Loop() {
				if err := VecDotRows(t, ws, c.act, a, benchN, outA); err != nil {
					b.Fatal(err)
				}
				if err := VecDotRows(t, ws, c.act, a2, benchN, outB); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package quant

import (
	"encoding/binary"
	"math"
	"sort"
	"testing"

	"github.com/loomgraph/loom/dtype"
)

// The fuzz targets feed arbitrary bytes (NaN and Inf scales, out-of-range
// codes, every length) to the decoders, the dot products and the
// quantizers. The property is that nothing panics and every call either
// fills exactly its output or returns an error. `go test` runs the seeds;
// `go test -fuzz FuzzX ./quant` explores.

// allTypes lists every known type number in a fixed order.
var allTypes = func() []Type {
	var ts []Type
	for t := range traits {
		ts = append(ts, t)
	}
	ts = append(ts, Type(4), Type(99)) // removed and unknown numbers
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts
}()

func pickType(b byte) Type { return allTypes[int(b)%len(allTypes)] }

func FuzzDequantize(f *testing.F) {
	f.Add(byte(2), []byte{0x00, 0x3c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, uint16(32))
	f.Add(byte(12), make([]byte, 144), uint16(256))
	f.Add(byte(15), make([]byte, 292), uint16(255))
	f.Add(byte(1), []byte{0x00, 0x7e, 0x01, 0x7c}, uint16(2))
	f.Fuzz(func(t *testing.T, tb byte, data []byte, n uint16) {
		typ := pickType(tb)
		dst := make([]float32, n)
		err := Dequantize(typ, data, dst)
		tr, ok := typ.Traits()
		whole := ok && tr.Supported && len(data)%tr.Size == 0 && len(data)/tr.Size*tr.Block == int(n)
		if whole != (err == nil) {
			t.Fatalf("Dequantize(%v, %d bytes, %d values): err = %v", typ, len(data), n, err)
		}
		h := make([]dtype.Float16, n)
		if err2 := DequantizeF16(typ, data, h); (err2 == nil) != (err == nil) {
			t.Fatalf("DequantizeF16 err = %v, Dequantize err = %v", err2, err)
		}
		bf := make([]dtype.BFloat16, n)
		if err2 := DequantizeBF16(typ, data, bf); (err2 == nil) != (err == nil) {
			t.Fatalf("DequantizeBF16 err = %v, Dequantize err = %v", err2, err)
		}
		if err == nil {
			// Each value rounded once from the f32 decode, or, for the
			// same 2-byte type, its bits copied.
			for i, v := range dst {
				raw := uint16(0)
				if tr.Size == 2 {
					raw = le16(data[2*i:])
				}
				switch {
				case typ == F16 && uint16(h[i]) != raw, typ != F16 && h[i] != dtype.ToF16(v) && !(math.IsNaN(float64(v)) && h[i].Float64() != h[i].Float64()):
					t.Fatalf("%v value %d: f16 %#04x, f32 %g", typ, i, h[i], v)
				case typ == BF16 && uint16(bf[i]) != raw, typ != BF16 && bf[i] != dtype.ToBF16(v):
					t.Fatalf("%v value %d: bf16 %#04x, f32 %g", typ, i, bf[i], v)
				}
			}
		}
	})
}

func FuzzVecDot(f *testing.F) {
	f.Add(byte(2), byte(0), []byte{0x00, 0x3c}, uint16(32), uint16(18))
	f.Add(byte(12), byte(0), make([]byte, 144+292), uint16(256), uint16(144))
	f.Add(byte(14), byte(1), make([]byte, 2*(210+292)), uint16(512), uint16(420))
	f.Fuzz(func(t *testing.T, tb, mode byte, data []byte, n uint16, split uint16) {
		w := pickType(tb)
		act := ActivationType(w)
		if mode%4 == 3 {
			act = pickType(mode) // usually a mismatch
		}
		// Pad or cut the bytes to the lengths n asks for unless the mode
		// asks for raw (usually wrong) lengths.
		var wrow, arow []byte
		wtr, wok := w.Traits()
		atr, aok := act.Traits()
		if mode%2 == 0 && wok && aok && wtr.Block > 0 && atr.Block > 0 {
			nb := int(n) / wtr.Block
			wl, al := nb*wtr.Size, nb*wtr.Block/atr.Block*atr.Size
			buf := make([]byte, wl+al)
			copy(buf, data)
			wrow, arow = buf[:wl], buf[wl:]
		} else {
			s := min(int(split), len(data))
			wrow, arow = data[:s], data[s:]
		}
		got, err := VecDot(w, wrow, act, arow, int(n))
		if err != nil && got != 0 {
			t.Fatalf("VecDot returned %g with error %v", got, err)
		}
		// VecDot may run assembly: it must return the Go twin's bits.
		if err == nil {
			if tw := twinDots[w](wrow, arow, int(n)/wtr.Block); !sameBits(got, tw) {
				t.Fatalf("%v·%v n=%d: VecDot %g (%#08x), twin %g (%#08x)", w, act, n, got, math.Float32bits(got), tw, math.Float32bits(tw))
			}
		}
	})
}

func FuzzQuantize(f *testing.F) {
	f.Add(byte(12), []byte{0, 0, 0x80, 0x7f, 0, 0, 0xc0, 0x7f, 1, 0, 0, 0})
	f.Add(byte(11), make([]byte, 1024))
	f.Fuzz(func(t *testing.T, tb byte, data []byte) {
		typ := pickType(tb)
		tr, ok := typ.Traits()
		if !ok || !tr.Supported {
			return
		}
		// Repeat the fuzzed floats (NaN, Inf, subnormal, anything) to whole
		// blocks.
		n := tr.Block * (1 + len(data)/(4*tr.Block))
		src := make([]float32, n)
		for i := range src {
			if len(data) >= 4 {
				k := 4 * (i % (len(data) / 4))
				src[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[k:]))
			}
		}
		dst := make([]byte, n/tr.Block*tr.Size)
		if err := Quantize(typ, src, dst); err != nil {
			t.Fatal(err)
		}
		back := make([]float32, n)
		if err := Dequantize(typ, dst, back); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzVecDotRows: VecDotRows and VecDotRows2 (the row kernels: AVX2, and
// AVX-512 where the CPU has it) give every weight row the Go twin's bits
// against each activation row, whatever the bytes — NaN and Inf scales,
// out-of-range codes — for every format, 1 to 9 rows (the four-row
// kernels' groups and their remainders) and 1 to 8 blocks a row. The
// bytes are the fuzzer's, repeated to fill the rows when it gives fewer.
func FuzzVecDotRows(f *testing.F) {
	f.Add(byte(12), byte(5), byte(2), []byte{0x00, 0x3c, 0xff, 0x01})
	f.Add(byte(14), byte(2), byte(1), []byte{0x7f, 0x80, 0x00, 0x7c, 0x00, 0xfc})
	f.Add(byte(13), byte(9), byte(3), make([]byte, 64))
	f.Add(byte(8), byte(4), byte(7), []byte{0x01, 0x7c, 0x80})
	f.Fuzz(func(t *testing.T, tb, nrows, nblocks byte, data []byte) {
		w := pickType(tb)
		act := ActivationType(w)
		wtr, wok := w.Traits()
		atr, aok := act.Traits()
		if !wok || !aok || !wtr.Supported || !atr.Supported || wtr.Block == 0 || atr.Block == 0 || w == act || len(data) == 0 {
			return
		}
		rows, nb := 1+int(nrows)%9, 1+int(nblocks)%8
		n := nb * wtr.Block
		rb, ab := nb*wtr.Size, n/atr.Block*atr.Size
		buf := make([]byte, rows*rb+2*ab)
		for i := range buf {
			buf[i] = data[i%len(data)] ^ byte(i/len(data))
		}
		wrows, arowA, arowB := buf[:rows*rb], buf[rows*rb:rows*rb+ab], buf[rows*rb+ab:]
		out, outA, outB := make([]float32, rows), make([]float32, rows), make([]float32, rows)
		if err := VecDotRows(w, wrows, act, arowA, n, out); err != nil {
			t.Fatalf("VecDotRows(%v, %d rows of %d): %v", w, rows, n, err)
		}
		if err := VecDotRows2(w, wrows, act, arowA, arowB, n, outA, outB); err != nil {
			t.Fatalf("VecDotRows2(%v, %d rows of %d): %v", w, rows, n, err)
		}
		for i := range rows {
			row := wrows[i*rb : (i+1)*rb]
			ta, tb := twinDots[w](row, arowA, nb), twinDots[w](row, arowB, nb)
			if !sameBits(out[i], ta) || !sameBits(outA[i], ta) || !sameBits(outB[i], tb) {
				t.Fatalf("%v row %d of %d, %d blocks: VecDotRows %#08x, VecDotRows2 %#08x %#08x, twin %#08x %#08x",
					w, i, rows, nb, math.Float32bits(out[i]), math.Float32bits(outA[i]), math.Float32bits(outB[i]),
					math.Float32bits(ta), math.Float32bits(tb))
			}
		}
	})
}

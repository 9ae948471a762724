package cpu

import (
	"math"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// f16ToF32 widens every f16 bit pattern: one table lookup per element.
var f16ToF32 = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = dtype.Float16(i).Float32()
	}
	return &t
}()

// walker walks a reduced layout in runs along its innermost dim.
type walker struct {
	coord []int
}

// load fills dst (n elements, the tile starting at flat index s) from src
// through layout l, widening to dst's kind.
func (w *walker) load(dst tile, src buf, l ir.Layout, s, n int) {
	r := len(l.Dims)
	if n == 0 {
		return
	}
	if r == 0 { // a single element broadcast to the whole tile
		fill(dst, src, l.Offset, 0, 0, n)
		return
	}
	if cap(w.coord) < r {
		w.coord = make([]int, r)
	}
	c := w.coord[:r]
	// Coordinates and memory position of flat index s.
	pos, rem := l.Offset, s
	for d := r - 1; d >= 0; d-- {
		c[d] = rem % l.Dims[d]
		rem /= l.Dims[d]
		pos += c[d] * l.Strides[d]
	}
	inner, stride := l.Dims[r-1], l.Strides[r-1]
	// A short innermost dim (a reduced layout's, so it does not merge with
	// the one before: a pair's two members, a value repeated over a pair)
	// takes whole rows of it at once, as many as the dim before has left
	// (fillRows), where a call a row cost more than the row (a llama's
	// rotary embedding read its operands in runs of 2).
	rows := r >= 2 && inner < shortRun
	for j := 0; j < n; {
		d := r - 1 // the dim whose coordinate moved last
		if m := (n - j) / inner; rows && c[r-1] == 0 && m > 0 {
			m = min(m, l.Dims[r-2]-c[r-2])
			fillRows(dst, src, pos, l.Strides[r-2], stride, inner, j, m)
			j += m * inner
			c[r-2] += m
			pos += m * l.Strides[r-2]
			if c[r-2] < l.Dims[r-2] {
				continue
			}
			d = r - 2
		} else {
			run := min(inner-c[r-1], n-j)
			fill(dst, src, pos, stride, j, run)
			j += run
			c[r-1] += run
			pos += run * stride
			if c[r-1] < inner {
				continue
			}
		}
		// Dim d is at its end: back to 0 and carry into the dims before.
		pos -= l.Dims[d] * l.Strides[d]
		c[d] = 0
		for d--; d >= 0; d-- {
			c[d]++
			pos += l.Strides[d]
			if c[d] < l.Dims[d] {
				break
			}
			pos -= l.Dims[d] * l.Strides[d]
			c[d] = 0
		}
	}
}

// shortRun: an innermost dim shorter than this is loaded a block of rows
// at a time (walker.load).
const shortRun = 16

// fillRows is fill for m rows of k elements: row i starts at pos + i·so,
// its elements si apart, into dst from element j.
func fillRows(dst tile, src buf, pos, so, si, k, j, m int) {
	n := m * k
	switch src.dt {
	case dtype.F16:
		if m == 1 && si == 1 {
			widenF16(dst.f32[j:j+n], src.f16[pos:pos+n])
			return
		}
		gatherRows(dst.f32[j:j+n], src.f16, pos, so, si, k, func(v dtype.Float16) float32 { return f16ToF32[v] })
	case dtype.F32:
		gatherRows(dst.f32[j:j+n], src.f32, pos, so, si, k, func(v float32) float32 { return v })
	case dtype.F64:
		gatherRows(dst.f64[j:j+n], src.f64, pos, so, si, k, func(v float64) float64 { return v })
	case dtype.BF16:
		gatherRows(dst.f32[j:j+n], src.b16, pos, so, si, k, func(v dtype.BFloat16) float32 { return math.Float32frombits(uint32(v) << 16) })
	case dtype.F8E4M3:
		gatherRows(dst.f32[j:j+n], src.f8, pos, so, si, k, func(v dtype.Float8E4M3) float32 { return v.Float32() })
	case dtype.U8:
		gatherRows(dst.i64[j:j+n], src.u8, pos, so, si, k, func(v uint8) int64 { return int64(v) })
	case dtype.U32:
		gatherRows(dst.i64[j:j+n], src.u32, pos, so, si, k, func(v uint32) int64 { return int64(v) })
	case dtype.I64:
		gatherRows(dst.i64[j:j+n], src.i64, pos, so, si, k, func(v int64) int64 { return v })
	}
}

// gatherRows is gather for rows of k elements, row i at pos + i·so.
func gatherRows[S, D any](dst []D, src []S, pos, so, si, k int, conv func(S) D) {
	if len(dst) == k {
		gather(dst, src, pos, si, conv)
		return
	}
	for i := 0; i < len(dst); i += k {
		row, p := dst[i:i+k], pos
		if si == 0 {
			v := conv(src[p])
			for t := range row {
				row[t] = v
			}
		} else {
			for t := range row {
				row[t] = conv(src[p])
				p += si
			}
		}
		pos += so
	}
}

// fill converts run elements src[pos + k*stride] into dst[j+k].
func fill(dst tile, src buf, pos, stride, j, run int) {
	fillRows(dst, src, pos, 0, stride, run, j, 1)
}

// gather is the one strided loop; the conversion is inlined by the compiler
// for each instantiation.
func gather[S, D any](dst []D, src []S, pos, stride int, conv func(S) D) {
	switch stride {
	case 1:
		src = src[pos : pos+len(dst)]
		for k := range dst {
			dst[k] = conv(src[k])
		}
	case 0:
		v := conv(src[pos])
		for k := range dst {
			dst[k] = v
		}
	default:
		for k := range dst {
			dst[k] = conv(src[pos])
			pos += stride
		}
	}
}

// store narrows a tile into a contiguous output buffer at flat index s.
func store(dst buf, s int, v tile) {
	switch dst.dt {
	case dtype.F32:
		copy(dst.f32[s:], v.f32)
	case dtype.F64:
		copy(dst.f64[s:], v.f64)
	case dtype.I64:
		copy(dst.i64[s:], v.i64)
	case dtype.F16:
		narrowF16(dst.f16[s:s+len(v.f32)], v.f32)
	case dtype.BF16:
		out := dst.b16[s : s+len(v.f32)]
		for k, x := range v.f32 {
			out[k] = toBF16(x)
		}
	case dtype.F8E4M3:
		narrowF8(dst.f8[s:s+len(v.f32)], v.f32)
	case dtype.U8:
		out := dst.u8[s : s+len(v.i64)]
		for k, x := range v.i64 {
			out[k] = uint8(x)
		}
	case dtype.U32:
		out := dst.u32[s : s+len(v.i64)]
		for k, x := range v.i64 {
			out[k] = uint32(x)
		}
	}
}

// rounder returns the in-place narrowing of a compute tile to dt's values,
// or nil when the compute kind holds dt exactly.
func rounder(dt dtype.DType) func(tile) {
	switch dt {
	case dtype.F16:
		return func(t tile) {
			var h [tileSize]dtype.Float16
			for s := 0; s < len(t.f32); s += tileSize {
				part := t.f32[s:min(s+tileSize, len(t.f32))]
				narrowF16(h[:len(part)], part)
				widenF16(part, h[:len(part)])
			}
		}
	case dtype.BF16:
		return func(t tile) {
			for k, x := range t.f32 {
				t.f32[k] = math.Float32frombits(uint32(toBF16(x)) << 16)
			}
		}
	case dtype.F8E4M3:
		return func(t tile) {
			for k, x := range t.f32 {
				t.f32[k] = toF8(x).Float32()
			}
		}
	case dtype.U8:
		return func(t tile) {
			for k, x := range t.i64 {
				t.i64[k] = int64(uint8(x))
			}
		}
	case dtype.U32:
		return func(t tile) {
			for k, x := range t.i64 {
				t.i64[k] = int64(uint32(x))
			}
		}
	}
	return nil
}

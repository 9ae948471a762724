package cpu

import (
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// reduceOp returns the tile function of a reduction: dst[r] reduces the
// L elements of row r of a[0]. Semantics (see ir's op table): sums of
// f16/bf16/f32 accumulate in float32, f64 in float64, in the order of
// rowSum (blocks of sumBlock elements, each added in interleaved partial
// sums, the block sums combined pairwise), integers in int64 (u8/u32 wrap
// when narrowed); max and
// min propagate NaN; argmax/argmin return the first index of the extreme
// value, NaN counting as the extreme; an empty row sums to 0.
func reduceOp(op ir.Op, in dtype.DType) opFunc {
	return func(dst tile, a []tile, _ int) {
		x := a[0]
		rows := tileLen(dst)
		L := tileLen(x) / max(rows, 1) // rows in this tile, each of L elements
		for r := range rows {
			lo, hi := r*L, (r+1)*L
			switch op {
			case ir.OpSum:
				// Switch on dst: an empty row's x may be a nil slice.
				switch {
				case dst.f32 != nil:
					dst.f32[r] = rowSum(x.f32[lo:hi], sum32)
				case dst.f64 != nil:
					dst.f64[r] = rowSum(x.f64[lo:hi], sum64)
				default:
					var s int64
					for _, v := range x.i64[lo:hi] {
						s += v
					}
					dst.i64[r] = s
				}
			case ir.OpMax, ir.OpMin:
				isMax := op == ir.OpMax
				switch {
				case x.f32 != nil:
					dst.f32[r] = extreme(x.f32[lo:hi], isMax)
				case x.f64 != nil:
					dst.f64[r] = extreme(x.f64[lo:hi], isMax)
				default:
					dst.i64[r] = extremeInt(x.i64[lo:hi], isMax)
				}
			default: // argmax, argmin
				isMax := op == ir.OpArgmax
				switch {
				case x.f32 != nil:
					dst.i64[r] = argExtreme(x.f32[lo:hi], isMax)
				case x.f64 != nil:
					dst.i64[r] = argExtreme(x.f64[lo:hi], isMax)
				default:
					dst.i64[r] = argExtremeInt(x.i64[lo:hi], isMax)
				}
			}
		}
	}
}

// sumBlock is how many elements of a row one block sum adds; it is the
// chunk of the chunked long-row path (chunked.go), so that a row's sum has
// one order whether its kernel runs chunked (a reduction of a stored
// value, unfused) or as whole rows (a reduction inside a fused composite):
// fused and unfused results are then the same bits.
const sumBlock = tileSize

// rowSum adds a row of floats: blocks of sumBlock elements (from the row's
// start) are added by block, and the block sums combine pairwise as
// pairwiseSum does. The rounding error then grows with the block length
// plus log2 of the block count, not with the row length (a sequential
// float32 sum of 2^25 values near 1e4 is off by 2e-5 relative).
func rowSum[T float32 | float64](x []T, block func([]T) T) T {
	if len(x) <= sumBlock {
		return block(x)
	}
	blocks := (len(x) + sumBlock - 1) / sumBlock
	h := (blocks + 1) / 2 * sumBlock
	return rowSum(x[:h], block) + rowSum(x[h:], block)
}

// pairwiseSum combines block sums in rowSum's tree: the first ⌈n/2⌉, then
// the rest, recursively.
func pairwiseSum(ps []partial) partial {
	if len(ps) == 1 {
		return ps[0]
	}
	h := (len(ps) + 1) / 2
	a, b := pairwiseSum(ps[:h]), pairwiseSum(ps[h:])
	return partial{f32: a.f32 + b.f32, f64: a.f64 + b.f64, i64: a.i64 + b.i64}
}

// sum32 adds a block: the vector kernel over the longest multiple of 32,
// then eight interleaved scalar partial sums over the rest, combined in a
// fixed order (so a row's sum depends only on the row).
func sum32(x []float32) float32 {
	var v float32
	if n := len(x) &^ 31; hasAVX2 && n > 0 {
		v = sumF32(&x[0], n)
		x = x[n:]
	}
	return v + sumScalar32(x)
}

func sumScalar32(x []float32) float32 {
	var s [8]float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		s[0] += x[i]
		s[1] += x[i+1]
		s[2] += x[i+2]
		s[3] += x[i+3]
		s[4] += x[i+4]
		s[5] += x[i+5]
		s[6] += x[i+6]
		s[7] += x[i+7]
	}
	for ; i < len(x); i++ {
		s[0] += x[i]
	}
	return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
}

func sum64(x []float64) float64 {
	var s [4]float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s[0] += x[i]
		s[1] += x[i+1]
		s[2] += x[i+2]
		s[3] += x[i+3]
	}
	for ; i < len(x); i++ {
		s[0] += x[i]
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

// extreme is the NaN-propagating max (or min) of a non-empty row.
func extreme[T float32 | float64](x []T, isMax bool) T {
	m := x[0]
	for _, v := range x {
		if v != v {
			return v
		}
		if isMax && v > m || !isMax && v < m {
			m = v
		}
	}
	return m
}

func extremeInt(x []int64, isMax bool) int64 {
	m := x[0]
	for _, v := range x {
		if isMax && v > m || !isMax && v < m {
			m = v
		}
	}
	return m
}

// argExtreme returns the first index of the max (min), or of the first NaN.
func argExtreme[T float32 | float64](x []T, isMax bool) int64 {
	best := 0
	for i, v := range x {
		if v != v {
			return int64(i)
		}
		if isMax && v > x[best] || !isMax && v < x[best] {
			best = i
		}
	}
	return int64(best)
}

func argExtremeInt(x []int64, isMax bool) int64 {
	best := 0
	for i, v := range x {
		if isMax && v > x[best] || !isMax && v < x[best] {
			best = i
		}
	}
	return int64(best)
}

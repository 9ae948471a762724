package graph

import (
	"math"
	"slices"

	"github.com/loomgraph/loom/dtype"
)

// Shape ops and creation helpers with Candle's semantics (candle-core's
// tensor.rs), built from the existing IR ops so that every executor runs
// them with the kernels it has: views where the result is a view (Chunk,
// Split, Expand, a Repeat of size-1 dims), one cat step where the result
// interleaves regions of the input (pads, Roll, Stack), one index_select
// step per flipped dim (Flip), and masks from arange comparisons, whose
// comparisons fuse with the where that applies them into one elementwise
// pass over the tensor (Tril, Triu, Eye, ConstSet). The aranges themselves
// are small steps of their own (one index vector per masked dim: a fused
// kernel computes an arange only in its own element order, not through the
// broadcast view a mask reads it by). Each op checks its arguments first
// and reports bad input under its own name (pad_with_zeros, roll, …),
// never under a part's.

// idDType is the index dtype for ids up to maxID: u32 where every id is
// below u32's sentinel (its maximum), else i64.
func idDType(maxID int) dtype.DType {
	if maxID < math.MaxUint32 {
		return dtype.U32
	}
	return dtype.I64
}

// dimsOf normalises a list of dims named by op for t: each in range, none
// twice (negative dims count from the end). The order is kept.
func (t *Tensor) dimsOf(op string, dims []int) ([]int, error) {
	var out []int
	for _, d := range dims {
		nd, err := t.normDim(op, d, t.Rank())
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, nd) {
			return nil, opErr(op, "dim %d given twice for %v%v", d, t.n.DType, t.n.Shape)
		}
		out = append(out, nd)
	}
	return out, nil
}

// Flip reverses the order of the elements along each of dims (Candle's
// flip; negative dims count from the end; a dim given twice is an error,
// as in PyTorch). Loom's layouts have no negative strides, so a flip is not
// a view: each flipped dim of size > 1 is one index_select step with
// descending arange ids (one pass over the tensor per dim, a barrier to
// fusion, plus the ids: a small arange step per dim), like Candle's
// implementation. Flipping several dims of a large tensor thus reads and
// writes it once per dim.
func (t *Tensor) Flip(dims ...int) *Tensor {
	if r, ok := t.ready("flip"); !ok {
		return r
	}
	ds, err := t.dimsOf("flip", dims)
	if err != nil {
		return t.g.fail(err)
	}
	out := t
	for _, d := range ds {
		n := t.n.Shape[d]
		if n <= 1 {
			continue
		}
		ids := t.g.Arange(idDType(n-1), float64(n-1), -1, -1)
		out = out.IndexSelect(ids, d)
	}
	return out
}

// padCheck validates a pad named op: dim in range, left and right not
// negative, and the padded dim's size an int.
func (t *Tensor) padCheck(op string, dim, left, right int) (int, error) {
	d, err := t.normDim(op, dim, t.Rank())
	if err != nil {
		return 0, err
	}
	size := t.n.Shape[d]
	switch {
	case left < 0 || right < 0:
		return 0, opErr(op, "negative padding (left %d, right %d) for dim %d of %v%v", left, right, dim, t.n.DType, t.n.Shape)
	case left > math.MaxInt-size || right > math.MaxInt-size-left:
		return 0, opErr(op, "padding (left %d, right %d) of dim %d of %v%v overflows", left, right, dim, t.n.DType, t.n.Shape)
	}
	shape := slices.Clone(t.n.Shape)
	shape[d] = size + left + right
	if err := checkShape(op, t.n.DType, shape); err != nil {
		return 0, err
	}
	return d, nil
}

// withDim returns t's shape with dim d set to n.
func (t *Tensor) withDim(d, n int) []int {
	s := slices.Clone(t.n.Shape)
	s[d] = n
	return s
}

// PadWithZeros adds left zeros before and right zeros after the elements
// along dim (Candle's pad_with_zeros): one cat step of the zero blocks and
// t. With fusion on, the zero blocks are fills written before the cat (a
// pass over the padding only).
func (t *Tensor) PadWithZeros(dim, left, right int) *Tensor {
	const op = "pad_with_zeros"
	if r, ok := t.ready(op); !ok {
		return r
	}
	d, err := t.padCheck(op, dim, left, right)
	if err != nil {
		return t.g.fail(err)
	}
	if left == 0 && right == 0 {
		return t
	}
	var parts []*Tensor
	if left > 0 {
		parts = append(parts, t.g.Zeros(t.n.DType, t.withDim(d, left)...))
	}
	parts = append(parts, t)
	if right > 0 {
		parts = append(parts, t.g.Zeros(t.n.DType, t.withDim(d, right)...))
	}
	return Cat(d, parts...)
}

// PadWithSame pads dim by replicating its edge elements, left copies of the
// first before and right copies of the last after (Candle's pad_with_same).
// The replicated edges are broadcast views of t, so the whole pad is one
// cat step. Padding an empty dim is an error (there is no edge to
// replicate); Candle refuses any empty tensor, Loom pads a dim that is not
// empty even where another dim is (the result is empty).
func (t *Tensor) PadWithSame(dim, left, right int) *Tensor {
	const op = "pad_with_same"
	if r, ok := t.ready(op); !ok {
		return r
	}
	d, err := t.padCheck(op, dim, left, right)
	if err != nil {
		return t.g.fail(err)
	}
	if left == 0 && right == 0 {
		return t
	}
	size := t.n.Shape[d]
	if size == 0 {
		return t.g.fail(opErr(op, "dim %d of %v%v is empty: no edge to replicate (left %d, right %d)", dim, t.n.DType, t.n.Shape, left, right))
	}
	var parts []*Tensor
	if left > 0 {
		parts = append(parts, t.Narrow(d, 0, 1).BroadcastTo(t.withDim(d, left)...))
	}
	parts = append(parts, t)
	if right > 0 {
		parts = append(parts, t.Narrow(d, size-1, 1).BroadcastTo(t.withDim(d, right)...))
	}
	return Cat(d, parts...)
}

// Roll shifts the elements along dim by shift places, those shifted past
// the end coming back at the start (Candle's roll; a negative shift rolls
// the other way, and shift is taken modulo the dim's size). One cat step of
// two narrowed views; t itself when the shift is a multiple of the size or
// the dim is empty.
func (t *Tensor) Roll(shift, dim int) *Tensor {
	const op = "roll"
	if r, ok := t.ready(op); !ok {
		return r
	}
	d, err := t.normDim(op, dim, t.Rank())
	if err != nil {
		return t.g.fail(err)
	}
	size := t.n.Shape[d]
	if size == 0 {
		return t
	}
	s := shift % size
	if s < 0 {
		s += size
	}
	if s == 0 {
		return t
	}
	return Cat(d, t.Narrow(d, size-s, s), t.Narrow(d, 0, size-s))
}

// Repeat tiles t counts[i] times along dim i (Candle's and PyTorch's
// repeat). With more counts than dims, t first gets leading dims of size 1;
// fewer counts than dims is an error (as in PyTorch; Candle applies the
// counts to the leading dims). A count of 0 empties its dim. Repeating
// dims of size 1 is a broadcast (a stride-0 view: no copy, and consumers
// read it in place); repeating a longer dim d views t with a new dim of
// size counts[d] before d, broadcast, and merges the two, which takes one
// copy step writing the tiled result (Candle concatenates the copies, also
// one pass).
func (t *Tensor) Repeat(counts ...int) *Tensor {
	const op = "repeat"
	if r, ok := t.ready(op); !ok {
		return r
	}
	rank := t.Rank()
	if len(counts) < rank {
		return t.g.fail(opErr(op, "%d counts %v for %v%v: give one per dim (at least %d)", len(counts), counts, t.n.DType, t.n.Shape, rank))
	}
	lead := len(counts) - rank
	shape := slices.Concat(slices.Repeat([]int{1}, lead), t.n.Shape)
	final := make([]int, len(counts))
	for i, c := range counts {
		if c < 0 {
			return t.g.fail(opErr(op, "negative count %d for dim %d in %v, for %v%v", c, i, counts, t.n.DType, t.n.Shape))
		}
		if s := shape[i]; s > 0 && c > math.MaxInt/s {
			return t.g.fail(opErr(op, "counts %v for %v%v: dim %d overflows", counts, t.n.DType, t.n.Shape, i))
		}
		final[i] = c * shape[i]
	}
	if err := checkShape(op, t.n.DType, final); err != nil {
		return t.g.fail(err)
	}
	x := t
	for range lead {
		x = x.Unsqueeze(0)
	}
	// wide is the broadcast shape: a size-1 dim (or a count of 1) takes
	// its final size directly; any other repeated dim becomes (count,
	// size), to be merged by a reshape, which copies.
	var wide []int
	merge := false
	for i, c := range counts {
		if c == 1 || shape[i] == 1 {
			wide = append(wide, final[i])
			continue
		}
		x = x.Unsqueeze(len(wide))
		wide = append(wide, c, shape[i])
		merge = true
	}
	x = x.BroadcastTo(wide...)
	if merge {
		x = x.Reshape(final...)
	}
	return x
}

// Stack joins tensors of one dtype and shape along a new dim (Candle's
// stack): dim ranges over 0 … rank (negative counts from rank+1, so −1
// appends a last dim). Each tensor is unsqueezed (a view) and the views are
// concatenated in one cat step.
func Stack(dim int, ts ...*Tensor) *Tensor {
	const op = "stack"
	if len(ts) == 0 {
		return &Tensor{err: opErr(op, "no tensors")}
	}
	g, err := sameGraph(op, ts...)
	if err != nil {
		return failOr(g, err)
	}
	first := ts[0]
	rank := first.Rank()
	d := dim
	if d < 0 {
		d += rank + 1
	}
	if d < 0 || d > rank {
		return g.fail(opErr(op, "dim %d out of range for stacking %v%v (new dim from %d to %d)", dim, first.n.DType, first.n.Shape, -rank-1, rank))
	}
	for i, t := range ts {
		if t.n.DType != first.n.DType || !slices.Equal(t.n.Shape, first.n.Shape) {
			return g.fail(opErr(op, "tensor %d is %v%v, tensor 0 is %v%v: dtypes and shapes must match", i, t.n.DType, t.n.Shape, first.n.DType, first.n.Shape))
		}
	}
	if err := checkShape(op, first.n.DType, slices.Insert(slices.Clone(first.n.Shape), d, len(ts))); err != nil {
		return g.fail(err)
	}
	us := make([]*Tensor, len(ts))
	for i, t := range ts {
		us[i] = t.Unsqueeze(d)
	}
	return Cat(d, us...)
}

// Chunk splits dim into n views of nearly equal size (Candle's chunk): the
// first size%n chunks have one more element. Where the dim has fewer than n
// elements there are only that many chunks (of one element each), so
// len(result) may be less than n; an empty dim gives none. On bad input
// (n < 1, a dim out of range) the result is one tensor carrying the error.
func (t *Tensor) Chunk(n, dim int) []*Tensor {
	const op = "chunk"
	if r, ok := t.ready(op); !ok {
		return []*Tensor{r}
	}
	d, err := t.normDim(op, dim, t.Rank())
	if err != nil {
		return []*Tensor{t.g.fail(err)}
	}
	if n < 1 {
		return []*Tensor{t.g.fail(opErr(op, "%d chunks of dim %d of %v%v: want at least 1", n, dim, t.n.DType, t.n.Shape))}
	}
	size := t.n.Shape[d]
	var out []*Tensor
	if size < n {
		for i := range size {
			out = append(out, t.Narrow(d, i, 1))
		}
		return out
	}
	q, extra := size/n, size%n
	start := 0
	for i := range n {
		l := q
		if i < extra {
			l++
		}
		out = append(out, t.Narrow(d, start, l))
		start += l
	}
	return out
}

// Split splits dim into views of the given sizes, in order (PyTorch's split
// with a list of sizes; Candle has no split). The sizes must be ≥ 0 and add
// up to the dim's size. On bad input the result is one tensor carrying the
// error.
func (t *Tensor) Split(sizes []int, dim int) []*Tensor {
	const op = "split"
	if r, ok := t.ready(op); !ok {
		return []*Tensor{r}
	}
	d, err := t.normDim(op, dim, t.Rank())
	if err != nil {
		return []*Tensor{t.g.fail(err)}
	}
	size, sum := t.n.Shape[d], 0
	for _, s := range sizes {
		if s < 0 || s > size-sum {
			sum = -1
			break
		}
		sum += s
	}
	if sum != size {
		return []*Tensor{t.g.fail(opErr(op, "sizes %v of dim %d of %v%v: want sizes ≥ 0 adding up to %d", sizes, dim, t.n.DType, t.n.Shape, size))}
	}
	out := make([]*Tensor, len(sizes))
	start := 0
	for i, s := range sizes {
		out[i] = t.Narrow(d, start, s)
		start += s
	}
	return out
}

// BroadcastAs is Candle's broadcast_as: BroadcastTo under Candle's name
// (numpy rules, a stride-0 view, no copy).
func (t *Tensor) BroadcastAs(dims ...int) *Tensor {
	if r, ok := t.ready("broadcast_as"); !ok {
		return r
	}
	return t.broadcastTo("broadcast_as", dims)
}

// Expand is Candle's expand, an alias of BroadcastAs (PyTorch's expand also
// takes −1 for "keep this dim"; Loom's, like Candle's, wants every dim).
func (t *Tensor) Expand(dims ...int) *Tensor {
	if r, ok := t.ready("expand"); !ok {
		return r
	}
	return t.broadcastTo("expand", dims)
}

// BroadcastLeft is Candle's broadcast_left: t broadcast to left... followed
// by t's own dims (a view).
func (t *Tensor) BroadcastLeft(left ...int) *Tensor {
	if r, ok := t.ready("broadcast_left"); !ok {
		return r
	}
	return t.broadcastTo("broadcast_left", slices.Concat(left, t.n.Shape))
}

// ZerosLike is a tensor of zeros with t's dtype and shape.
func (t *Tensor) ZerosLike() *Tensor { return t.fullLike("zeros_like", 0) }

// OnesLike is a tensor of ones with t's dtype and shape.
func (t *Tensor) OnesLike() *Tensor { return t.fullLike("ones_like", 1) }

// FullLike is a tensor with t's dtype and shape and every element v
// (converted to the dtype like a cast).
func (t *Tensor) FullLike(v float64) *Tensor { return t.fullLike("full_like", v) }

func (t *Tensor) fullLike(op string, v float64) *Tensor {
	if r, ok := t.ready(op); !ok {
		return r
	}
	return t.g.Full(t.n.DType, v, t.n.Shape...)
}

// Range selects indices Start, Start+Step, … below End along one dim of a
// ConstSet. Step 0 means 1. The zero Range selects the whole dim.
type Range struct{ Start, End, Step int }

// ConstSet returns t with the elements of a region set to v (converted to
// t's dtype like a cast): Candle's const_set on a view of t, which fills the
// view in place, written functionally. region gives one Range per leading
// dim (the dims after them are taken whole): the region is their product,
// which is what a Candle view made by narrowing, indexing and transposing
// covers; Step > 1 selects every Step-th index, as a strided view does. The
// result is where(mask, v, t) with the mask built from arange comparisons:
// one fused elementwise pass that reads t and writes the result (a fill
// through a view cannot write in place in a functional graph, so even a
// small region costs a pass over t), plus one small arange step per
// restricted dim.
func (t *Tensor) ConstSet(v float64, region ...Range) *Tensor {
	const op = "const_set"
	if r, ok := t.ready(op); !ok {
		return r
	}
	if len(region) > t.Rank() {
		return t.g.fail(opErr(op, "%d ranges for %v%v: at most one per dim", len(region), t.n.DType, t.n.Shape))
	}
	for d, r := range region {
		if r != (Range{}) && (r.Start < 0 || r.End < r.Start || r.End > t.n.Shape[d] || r.Step < 0) {
			return t.g.fail(opErr(op, "range %d (start %d, end %d, step %d) is not 0 ≤ start ≤ end ≤ %d with step ≥ 0, for dim %d of %v%v", d, r.Start, r.End, r.Step, t.n.Shape[d], d, t.n.DType, t.n.Shape))
		}
	}
	var mask *Tensor
	for d, r := range region {
		size, step := t.n.Shape[d], max(r.Step, 1)
		switch {
		case r == (Range{}) || r.Start == 0 && r.End == size && step == 1:
			continue // the whole dim
		case r.Start == r.End:
			return t // an empty region: nothing to set
		}
		idx := t.g.Arange(dtype.I64, 0, float64(size), 1)
		c := idx.Ge(Scalar(float64(r.Start))).Mul(idx.Lt(Scalar(float64(r.End))))
		if step > 1 {
			// (i − start) is a multiple of step: integer division
			// truncates, so only multiples survive ÷step·step.
			off := idx.Affine(1, -float64(r.Start))
			c = c.Mul(off.Div(Scalar(float64(step))).Mul(Scalar(float64(step))).Eq(off))
		}
		shape := make([]int, t.Rank())
		for i := range shape {
			shape[i] = 1
		}
		shape[d] = size
		c = c.Reshape(shape...)
		if mask == nil {
			mask = c
		} else {
			mask = mask.Mul(c)
		}
	}
	if mask == nil {
		return t.FullLike(v)
	}
	return Where(mask, Scalar(v), t)
}

// triMask returns the u8 mask over t's last two dims (rows i, columns j)
// that keeps j − i ≤ k (lower) or j − i ≥ k (upper), from two aranges; it
// broadcasts over t's leading dims.
func (t *Tensor) triMask(k int, lower bool) *Tensor {
	r := t.Rank()
	m, n := t.n.Shape[r-2], t.n.Shape[r-1]
	// Clamp k to where the mask no longer changes, so that it converts to
	// i64 exactly.
	k = max(min(k, n), -m)
	rows := t.g.Arange(dtype.I64, 0, float64(m), 1).Reshape(m, 1)
	cols := t.g.Arange(dtype.I64, 0, float64(n), 1)
	diff := cols.Sub(rows)
	if lower {
		return diff.Le(Scalar(float64(k)))
	}
	return diff.Ge(Scalar(float64(k)))
}

func (t *Tensor) tri(op string, k int, lower bool) *Tensor {
	if r, ok := t.ready(op); !ok {
		return r
	}
	if t.Rank() < 2 {
		return t.g.fail(opErr(op, "needs a matrix or a batch of matrices (rank ≥ 2), got %v%v", t.n.DType, t.n.Shape))
	}
	return Where(t.triMask(k, lower), t, Scalar(0))
}

// Tril keeps the elements on and below diagonal k of the last two dims and
// zeroes the rest (PyTorch's tril(diagonal=k); Candle has only tril2, the
// mask itself): element (i, j) is kept where j − i ≤ k, so k = 0 is the
// main diagonal, k < 0 below it, k > 0 above. Any dtype; the leading dims
// are a batch. The mask comes from comparing a row and a column arange
// (two small steps) and fuses with the where that applies it: one
// elementwise pass over t (with batch dims, the [M, N] u8 mask is written
// once and read by every matrix); a NaN above the diagonal becomes 0 (a
// mask multiply, as Candle's tril2 users do, would keep it).
func (t *Tensor) Tril(k int) *Tensor { return t.tri("tril", k, true) }

// Triu keeps the elements on and above diagonal k of the last two dims
// (j − i ≥ k) and zeroes the rest, like Tril.
func (t *Tensor) Triu(k int) *Tensor { return t.tri("triu", k, false) }

// Tril2 is Candle's tril2: an n×n lower-triangular matrix of ones of dtype
// dt (ones on the diagonal).
func (g *Graph) Tril2(n int, dt dtype.DType) *Tensor { return g.triOnes("tril2", n, dt, true) }

// Triu2 is Candle's triu2: an n×n upper-triangular matrix of ones.
func (g *Graph) Triu2(n int, dt dtype.DType) *Tensor { return g.triOnes("triu2", n, dt, false) }

// Eye is the n×n identity matrix of dtype dt (Candle's eye): an arange
// compared with itself transposed and cast to dt, one fused kernel after
// the n-element arange.
func (g *Graph) Eye(n int, dt dtype.DType) *Tensor {
	const op = "eye"
	if err := g.squareCheck(op, n, dt); err != nil {
		return g.fail(err)
	}
	rows := g.Arange(dtype.I64, 0, float64(n), 1).Reshape(n, 1)
	cols := g.Arange(dtype.I64, 0, float64(n), 1)
	return cols.Eq(rows).Cast(dt)
}

func (g *Graph) triOnes(op string, n int, dt dtype.DType, lower bool) *Tensor {
	if err := g.squareCheck(op, n, dt); err != nil {
		return g.fail(err)
	}
	return g.Ones(dt, n, n).tri(op, 0, lower)
}

// squareCheck validates the size and dtype of an n×n creation op.
func (g *Graph) squareCheck(op string, n int, dt dtype.DType) error {
	if err := g.usable(op); err != nil {
		return err
	}
	switch {
	case !dt.Valid():
		return opErr(op, "invalid dtype %v", dt)
	case n < 0:
		return opErr(op, "negative size %d", n)
	}
	return checkShape(op, dt, []int{n, n})
}

package ir

import (
	"fmt"
	"math"
	"slices"

	"github.com/loomgraph/loom/dtype"
)

// Layout maps a logical index (dims, row-major) to an element offset in a
// contiguous base buffer: offset + Σ idx[d]*Strides[d]. Strides are in
// elements and never negative; a stride of 0 broadcasts.
type Layout struct {
	Dims    []int
	Strides []int
	Offset  int
}

// Contiguous returns the row-major layout of dims at offset 0.
func Contiguous(dims []int) Layout {
	l := Layout{Dims: slices.Clone(dims), Strides: make([]int, len(dims))}
	acc := 1
	for d := len(dims) - 1; d >= 0; d-- {
		l.Strides[d] = acc
		acc *= dims[d]
	}
	return l
}

// Clone returns a deep copy.
func (l Layout) Clone() Layout {
	return Layout{Dims: slices.Clone(l.Dims), Strides: slices.Clone(l.Strides), Offset: l.Offset}
}

// Rank is the number of dims.
func (l Layout) Rank() int { return len(l.Dims) }

// Numel is the number of logical elements.
func (l Layout) Numel() int { return Numel(l.Dims) }

// Numel is the product of dims.
func Numel(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

// IsContiguous reports whether the layout is row-major with no gaps
// (Candle's rule: dims of size 1 may have any stride). The offset may be
// non-zero.
func (l Layout) IsContiguous() bool {
	acc := 1
	for d := len(l.Dims) - 1; d >= 0; d-- {
		if l.Dims[d] > 1 && l.Strides[d] != acc {
			return false
		}
		acc *= l.Dims[d]
	}
	return true
}

// Merged drops the unit dims and merges adjacent dims that address memory
// as one (a dim whose stride is the next kept dim's stride times that
// dim's size), keeping the offset: the result addresses the same elements
// in the same order, in the fewest, longest runs, so that walking it (the
// CPU executor) or computing an address from a flat index (the generated
// kernels) takes the fewest steps or divisions.
func (l Layout) Merged() Layout {
	out := Layout{Offset: l.Offset}
	for d, n := range l.Dims {
		if n == 1 {
			continue
		}
		s := l.Strides[d]
		if k := len(out.Dims) - 1; k >= 0 && out.Strides[k] == s*n {
			out.Dims[k] *= n
			out.Strides[k] = s
			continue
		}
		out.Dims = append(out.Dims, n)
		out.Strides = append(out.Strides, s)
	}
	return out
}

// IsIdentity reports whether the layout is contiguous at offset 0: reading
// through it is reading the buffer as is.
func (l Layout) IsIdentity() bool { return l.Offset == 0 && l.IsContiguous() }

// Span returns the smallest and one past the largest element offset the
// layout can address; (Offset, Offset) for an empty layout.
func (l Layout) Span() (lo, hi int) {
	if l.Numel() == 0 {
		return l.Offset, l.Offset
	}
	hi = l.Offset
	for d, n := range l.Dims {
		hi += (n - 1) * l.Strides[d]
	}
	return l.Offset, hi + 1
}

// Equal compares two layouts.
func (l Layout) Equal(o Layout) bool {
	return l.Offset == o.Offset && slices.Equal(l.Dims, o.Dims) && slices.Equal(l.Strides, o.Strides)
}

func (l Layout) String() string {
	return fmt.Sprintf("%v:%v+%d", l.Dims, l.Strides, l.Offset)
}

// Index returns the element offset of logical flat index i.
func (l Layout) Index(i int) int {
	off := l.Offset
	for d := len(l.Dims) - 1; d >= 0; d-- {
		n := l.Dims[d]
		off += (i % n) * l.Strides[d]
		i /= n
	}
	return off
}

// Permute reorders dims: the result's dim k is l's dim perm[k].
func (l Layout) Permute(perm []int) (Layout, error) {
	if len(perm) != l.Rank() {
		return Layout{}, fmt.Errorf("permutation %v has %d entries for rank %d", perm, len(perm), l.Rank())
	}
	seen := make([]bool, len(perm))
	out := Layout{Dims: make([]int, len(perm)), Strides: make([]int, len(perm)), Offset: l.Offset}
	for k, p := range perm {
		if p < 0 || p >= len(perm) || seen[p] {
			return Layout{}, fmt.Errorf("%v is not a permutation of %d dims", perm, len(perm))
		}
		seen[p] = true
		out.Dims[k], out.Strides[k] = l.Dims[p], l.Strides[p]
	}
	return out, nil
}

// Narrow keeps n elements of dim starting at start.
func (l Layout) Narrow(dim, start, n int) (Layout, error) {
	if dim < 0 || dim >= l.Rank() {
		return Layout{}, fmt.Errorf("dim %d out of range for rank %d", dim, l.Rank())
	}
	// Overflow-safe: start+n may wrap, size-start may not (both ≥ 0).
	if size := l.Dims[dim]; start < 0 || n < 0 || start > size || n > size-start {
		if start >= 0 && n >= 0 && n <= math.MaxInt-start {
			return Layout{}, fmt.Errorf("range [%d, %d) out of bounds for dim %d of size %d", start, start+n, dim, size)
		}
		return Layout{}, fmt.Errorf("start %d, length %d out of bounds for dim %d of size %d", start, n, dim, size)
	}
	out := l.Clone()
	out.Dims[dim] = n
	if n > 0 {
		out.Offset += start * l.Strides[dim]
	}
	return out, nil
}

// BroadcastTo expands l to dims with numpy rules: dims are aligned on the
// right, missing leading dims and dims of size 1 get stride 0.
func (l Layout) BroadcastTo(dims []int) (Layout, error) {
	if len(dims) < l.Rank() {
		return Layout{}, fmt.Errorf("cannot broadcast shape %v to %v: target has fewer dims", l.Dims, dims)
	}
	out := Layout{Dims: slices.Clone(dims), Strides: make([]int, len(dims)), Offset: l.Offset}
	lead := len(dims) - l.Rank()
	for d := range l.Dims {
		switch {
		case l.Dims[d] == dims[lead+d]:
			out.Strides[lead+d] = l.Strides[d]
		case l.Dims[d] == 1:
			out.Strides[lead+d] = 0
		default:
			return Layout{}, fmt.Errorf("cannot broadcast shape %v to %v: dim %d is %d, want 1 or %d", l.Dims, dims, d, l.Dims[d], dims[lead+d])
		}
	}
	return out, nil
}

// Reshape re-views l with new dims (the same element count), or says it
// cannot (ok false: the caller copies first). A contiguous layout always
// can. A strided one can when each run of l's dims that is contiguous
// within itself (stride[i] = stride[i+1]·dims[i+1]) is split or merged
// into new dims on its own, never mixed with a neighbouring run: the new
// dims over a run get the run's innermost stride times the sizes inside
// them. So a narrowed last dim reshaped into heads ([B, T, 320] with row
// stride 384 into [B, T, 10, 32]) stays a view of the product it was cut
// from, where it used to be copied (two copies a layer of a llama decode
// step). Dims of size 1 belong to any run. An empty layout re-views as
// contiguous.
func (l Layout) Reshape(dims []int) (out Layout, ok bool) {
	if l.IsContiguous() || l.Numel() == 0 || l.Rank() == 0 {
		out = Contiguous(dims)
		out.Offset = l.Offset
		return out, true
	}
	strides := make([]int, len(dims))
	nd := len(dims) - 1           // the next new dim to place, from the innermost
	base := l.Strides[l.Rank()-1] // the current run's innermost stride
	runN, viewN := 1, 1
	for d := l.Rank() - 1; d >= 0; d-- {
		runN *= l.Dims[d]
		// The run ends at d unless dim d−1 continues it (or is of size 1).
		if d > 0 && (l.Dims[d-1] == 1 || l.Strides[d-1] == runN*base) {
			continue
		}
		for nd >= 0 && (viewN < runN || dims[nd] == 1) {
			strides[nd] = viewN * base
			viewN *= dims[nd]
			nd--
		}
		if viewN != runN {
			return Layout{}, false
		}
		if d > 0 {
			base, runN, viewN = l.Strides[d-1], 1, 1
		}
	}
	if nd >= 0 {
		return Layout{}, false
	}
	return Layout{Dims: slices.Clone(dims), Strides: strides, Offset: l.Offset}, true
}

// Unsqueeze inserts a dim of size 1 at position dim (0 ≤ dim ≤ rank).
func (l Layout) Unsqueeze(dim int) (Layout, error) {
	if dim < 0 || dim > l.Rank() {
		return Layout{}, fmt.Errorf("dim %d out of range for unsqueeze of rank %d", dim, l.Rank())
	}
	stride := 1
	if dim < l.Rank() {
		stride = l.Strides[dim] * l.Dims[dim]
	}
	out := Layout{Dims: slices.Insert(slices.Clone(l.Dims), dim, 1), Strides: slices.Insert(slices.Clone(l.Strides), dim, stride), Offset: l.Offset}
	return out, nil
}

// Squeeze removes dim, which must have size 1.
func (l Layout) Squeeze(dim int) (Layout, error) {
	if dim < 0 || dim >= l.Rank() {
		return Layout{}, fmt.Errorf("dim %d out of range for rank %d", dim, l.Rank())
	}
	if l.Dims[dim] != 1 {
		return Layout{}, fmt.Errorf("cannot squeeze dim %d of size %d", dim, l.Dims[dim])
	}
	return Layout{Dims: slices.Delete(slices.Clone(l.Dims), dim, dim+1), Strides: slices.Delete(slices.Clone(l.Strides), dim, dim+1), Offset: l.Offset}, nil
}

// BroadcastShapes returns the numpy broadcast of two shapes.
func BroadcastShapes(a, b []int) ([]int, error) {
	n := max(len(a), len(b))
	out := make([]int, n)
	for i := range n {
		da, db := 1, 1
		if j := i - (n - len(a)); j >= 0 {
			da = a[j]
		}
		if j := i - (n - len(b)); j >= 0 {
			db = b[j]
		}
		switch {
		case da == db || db == 1:
			out[i] = da
		case da == 1:
			out[i] = db
		default:
			return nil, fmt.Errorf("shapes %v and %v do not broadcast (dim %d: %d vs %d)", a, b, i, da, db)
		}
	}
	return out, nil
}

// CheckShape reports whether shape is a valid shape of dtype dt: no
// negative dim, and few enough elements that every byte count fits an int
// (and so an int64): the product of the non-zero dims times dt's size is at
// most math.MaxInt. Zero dims do not excuse the others, since contiguous
// strides multiply them. The error names the shape and the dtype; callers
// prefix the op.
func CheckShape(dt dtype.DType, shape []int) error {
	for _, d := range shape {
		if d < 0 {
			return fmt.Errorf("negative dim in shape %v", shape)
		}
	}
	limit := math.MaxInt / max(dt.Size(), 1)
	n := 1
	for _, d := range shape {
		if d == 0 {
			continue
		}
		if n > limit/d {
			return fmt.Errorf("shape %v of %v is too large: its elements take more than %d bytes", shape, dt, math.MaxInt)
		}
		n *= d
	}
	return nil
}

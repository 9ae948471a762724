package conformance

// Indexing, sorting and data movement: index_select, gather, scatter,
// scatter_add, index_add, cat, slice_assign, argsort/sort and the sources
// full/zeros/ones/arange.
//
// The reference here is self-contained (every package-level name in this
// file starts with idx): plain Go loops over coordinates, written from the
// semantics in ir/ops.go (the comment above indexOp and the op table),
// graph/index.go and shared/candle-kernels.md §6, §8, §11. It never calls
// exec/cpu.

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/tensor"
)

// Indexing runs the indexing/sorting group. Every case is compiled with
// fusion on and off (the verifier on after every pass) and run on two
// executors whose fresh memory is poisoned with 0xFF and 0x00.
func Indexing(t *testing.T, newExec func(poison byte) exec.Executor) {
	s := &idxSuite{seed: idxSeed()}
	for _, p := range idxPoisons {
		s.execs = append(s.execs, newExec(p))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random inputs from seed %d: rerun with LOOM_SEED=%d go test -run '%s'", s.seed, s.seed, t.Name())
		}
		s.mu.Lock()
		t.Logf("indexing: %d cases, %d compiled programs, %d runs (%d expected errors)", s.cases, s.programs, s.runs, s.badRuns)
		s.mu.Unlock()
	})
	t.Run("IDOps", func(t *testing.T) { idxTestIDOps(t, s) })
	t.Run("AddOrder", func(t *testing.T) { idxTestAddOrder(t, s) })
	t.Run("Duplicates", func(t *testing.T) { idxTestDuplicates(t, s) })
	t.Run("Sentinels", func(t *testing.T) { idxTestSentinels(t, s) })
	t.Run("BadIDs", func(t *testing.T) { idxTestBadIDs(t, s) })
	t.Run("Cat", func(t *testing.T) { idxTestCat(t, s) })
	t.Run("SliceAssign", func(t *testing.T) { idxTestSliceAssign(t, s) })
	t.Run("Fill", func(t *testing.T) { idxTestFill(t, s) })
	t.Run("Argsort", func(t *testing.T) { idxTestArgsort(t, s) })
	t.Run("SortTies", func(t *testing.T) { idxTestSortTies(t, s) })
	t.Run("Chain", func(t *testing.T) { idxTestChain(t, s) })
	t.Run("Large", func(t *testing.T) { idxTestLarge(t, s) })
	t.Run("Empty", func(t *testing.T) { idxTestEmpty(t, s) })
	t.Run("Broadcast", func(t *testing.T) { idxTestBroadcast(t, s) })
	t.Run("SameOperand", func(t *testing.T) { idxTestSameOperand(t, s) })
	t.Run("ArangeExcludesStop", func(t *testing.T) { idxTestArangeStop(t, s) })
	t.Run("RoundedProducer", func(t *testing.T) { idxTestRoundedProducer(t, s) })
}

// idxPoisons are the bytes fresh executor memory is filled with.
var idxPoisons = []byte{0xFF, 0x00}

// idxOptions are the compile options every case runs under.
var idxOptions = []struct {
	name string
	opts graph.Options
}{
	{"fused", graph.Options{Check: true}},
	{"unfused", graph.Options{NoFusion: true, Check: true}},
}

var idxIDTypes = []dtype.DType{dtype.U8, dtype.U32, dtype.I64}

var idxIDOps = []ir.Op{ir.OpIndexSelect, ir.OpGather, ir.OpScatter, ir.OpScatterAdd, ir.OpIndexAdd}

var idxSeed = sync.OnceValue(func() uint64 {
	if v, err := strconv.ParseUint(os.Getenv("LOOM_SEED"), 10, 64); err == nil {
		return v
	}
	return rand.Uint64()
})

// ---------------------------------------------------------------------------
// Values.

// idxArr is a logical (row-major) tensor value: floats as float64 (exactly
// the dtype's values), integers as int64 (u8 and u32 as their unsigned
// values).
type idxArr struct {
	dt    dtype.DType
	shape []int
	f     []float64
	i     []int64
}

func idxZeros(dt dtype.DType, shape []int) idxArr {
	a := idxArr{dt: dt, shape: slices.Clone(shape)}
	n := idxNumel(shape)
	if dt.IsFloat() {
		a.f = make([]float64, n)
	} else {
		a.i = make([]int64, n)
	}
	return a
}

func idxNumel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func (a idxArr) numel() int { return idxNumel(a.shape) }

func (a idxArr) clone() idxArr {
	b := a
	b.shape = slices.Clone(a.shape)
	b.f = slices.Clone(a.f)
	b.i = slices.Clone(a.i)
	return b
}

// put copies element si of b to element di of a (same dtype).
func (a idxArr) put(di int, b idxArr, si int) {
	if a.dt.IsFloat() {
		a.f[di] = b.f[si]
	} else {
		a.i[di] = b.i[si]
	}
}

func (a idxArr) elem(k int) string {
	if a.dt.IsFloat() {
		return strconv.FormatFloat(a.f[k], 'g', -1, 64)
	}
	return strconv.FormatInt(a.i[k], 10)
}

func idxUnravel(k int, shape, c []int) {
	for d := len(shape) - 1; d >= 0; d-- {
		c[d] = k % shape[d]
		k /= shape[d]
	}
}

func idxRavel(c, shape []int) int {
	k := 0
	for d := range shape {
		k = k*shape[d] + c[d]
	}
	return k
}

// idxRoundTo rounds v to a binary format with p significant bits, smallest
// normal exponent emin and overflow threshold 2^emax (both in math.Frexp's
// convention, mantissa in [0.5, 1)), to nearest even.
func idxRoundTo(v float64, p, emin, emax int) float64 {
	if v != v || math.IsInf(v, 0) || v == 0 {
		return v
	}
	_, e := math.Frexp(v)
	e = max(e, emin)
	q := math.Ldexp(1, e-p)
	r := math.RoundToEven(v/q) * q
	if math.Abs(r) >= math.Ldexp(1, emax) {
		return math.Copysign(math.Inf(1), v)
	}
	return r
}

// idxRound rounds a float64 to the nearest value of a float dtype.
func idxRound(dt dtype.DType, v float64) float64 {
	switch dt {
	case dtype.F32:
		return idxRoundTo(v, 24, -125, 128)
	case dtype.F16:
		return idxRoundTo(v, 11, -13, 16)
	case dtype.BF16:
		return idxRoundTo(v, 8, -125, 128)
	case dtype.F8E4M3:
		// E4M3FN has no infinities: beyond 448, ±Inf included, it
		// saturates (Candle's float8 crate).
		if math.IsInf(v, 0) {
			return math.Copysign(448, v)
		}
		r := idxRoundTo(v, 4, -5, 1024)
		if math.Abs(r) > 448 {
			r = math.Copysign(448, r)
		}
		return r
	}
	return v
}

// idxIntRange is the value range of an integer dtype.
func idxIntRange(dt dtype.DType) (lo, hi int64) {
	switch dt {
	case dtype.U8:
		return 0, 255
	case dtype.U32:
		return 0, 1<<32 - 1
	}
	return math.MinInt64, math.MaxInt64
}

// idxSat converts a float64 to an integer dtype with Rust `as` rules:
// truncation toward zero, saturation, NaN → 0.
func idxSat(dt dtype.DType, v float64) int64 {
	lo, hi := idxIntRange(dt)
	switch {
	case v != v:
		return 0
	case v <= float64(lo):
		return lo
	case v >= float64(hi): // for i64, float64(hi) is 2^63
		return hi
	}
	return int64(math.Trunc(v))
}

// idxWrap keeps the low bits of v for u8 and u32 (two's complement wrap).
func idxWrap(dt dtype.DType, v int64) int64 {
	switch dt {
	case dtype.U8:
		return int64(uint8(v))
	case dtype.U32:
		return int64(uint32(v))
	}
	return v
}

// idxConvert is a float64 constant converted to dt like a cast.
func idxConvert(dt dtype.DType, v float64) (f float64, i int64) {
	if dt.IsFloat() {
		return idxRound(dt, v), 0
	}
	return 0, idxSat(dt, v)
}

// idxTensor builds a host tensor holding a.
func idxTensor(a idxArr) (*tensor.Tensor, error) {
	t, err := tensor.Zeros(a.dt, a.shape...)
	if err != nil {
		return nil, err
	}
	switch d := t.Data().(type) {
	case []float32:
		for k := range d {
			d[k] = float32(a.f[k])
		}
	case []float64:
		copy(d, a.f)
	case []dtype.Float16:
		for k := range d {
			d[k] = dtype.ToF16From64(a.f[k])
		}
	case []dtype.BFloat16:
		for k := range d {
			d[k] = dtype.ToBF16From64(a.f[k])
		}
	case []dtype.Float8E4M3:
		for k := range d {
			d[k] = dtype.ToF8E4M3From64(a.f[k])
		}
	case []uint8:
		for k := range d {
			d[k] = uint8(a.i[k])
		}
	case []uint32:
		for k := range d {
			d[k] = uint32(a.i[k])
		}
	case []int64:
		copy(d, a.i)
	}
	// The values must be the dtype's own: a test bug otherwise.
	back := idxFromTensor(t)
	for k := range back.numel() {
		if !idxSameElem(back, k, a, k) {
			return nil, fmt.Errorf("indexing test bug: %v value %s is not representable (stored as %s)", a.dt, a.elem(k), back.elem(k))
		}
	}
	return t, nil
}

// idxFromTensor reads a host tensor exactly.
func idxFromTensor(t *tensor.Tensor) idxArr {
	a := idxZeros(t.DType(), t.Shape())
	switch d := t.Data().(type) {
	case []uint8:
		for k, v := range d {
			a.i[k] = int64(v)
		}
	case []uint32:
		for k, v := range d {
			a.i[k] = int64(v)
		}
	case []int64:
		copy(a.i, d)
	default:
		for k := range a.f {
			a.f[k] = t.Float64(k)
		}
	}
	return a
}

// idxSameElem compares element ka of a with kb of b: NaN matches NaN, zeros
// must match in sign, integers exactly.
func idxSameElem(a idxArr, ka int, b idxArr, kb int) bool {
	if a.dt.IsFloat() {
		x, y := a.f[ka], b.f[kb]
		if x != x || y != y {
			return x != x && y != y
		}
		return x == y && math.Signbit(x) == math.Signbit(y)
	}
	return a.i[ka] == b.i[kb]
}

// ---------------------------------------------------------------------------
// Random values and ids.

// idxGen says which values an input holds.
type idxGen int

const (
	// idxGenAny: data movement — floats over a wide exponent range with
	// ±Inf and −0 mixed in; integers over the dtype's whole range.
	idxGenAny idxGen = iota
	// idxGenSmall: floats are multiples of 1/4 in [-16, 16] (x·2+1 is
	// exact in every float dtype); integers over the whole range (integer
	// arithmetic wraps, which the reference models).
	idxGenSmall
	// idxGenInt: floats are integers in [-4, 4], so sums are exact in every
	// order and dtype; integers over the whole range.
	idxGenInt
)

func idxDraw(r *rand.Rand, dt dtype.DType, shape []int, g idxGen) idxArr {
	a := idxZeros(dt, shape)
	for k := range a.numel() {
		if !dt.IsFloat() {
			a.i[k] = idxDrawInt(r, dt)
			continue
		}
		var v float64
		switch g {
		case idxGenAny:
			switch p := r.IntN(40); {
			case p == 0:
				v = math.Inf(1)
			case p == 1:
				v = math.Inf(-1)
			case p == 2:
				v = math.Copysign(0, -1)
			default:
				v = r.NormFloat64() * math.Ldexp(1, r.IntN(24)-12)
			}
		case idxGenSmall:
			v = float64(r.IntN(129)-64) / 4
		case idxGenInt:
			v = float64(r.IntN(9) - 4)
		}
		a.f[k] = idxRound(dt, v)
	}
	return a
}

func idxDrawInt(r *rand.Rand, dt dtype.DType) int64 {
	switch dt {
	case dtype.U8:
		return int64(r.IntN(256))
	case dtype.U32:
		if r.IntN(4) == 0 {
			return int64(r.IntN(1000))
		}
		return int64(r.Uint32())
	}
	switch r.IntN(4) {
	case 0:
		return int64(r.IntN(2001) - 1000)
	case 1:
		return []int64{math.MinInt64, math.MaxInt64, 1 << 53, 1<<53 + 1}[r.IntN(4)]
	}
	return int64(r.Uint64())
}

// idxSentinel is the sentinel id of an ids dtype (its maximum value).
func idxSentinel(idt dtype.DType) int64 {
	switch idt {
	case dtype.U8:
		return 255
	case dtype.U32:
		return 4294967295
	}
	return math.MaxInt64
}

// idxIsSentinel reports whether id is the sentinel of idt.
func idxIsSentinel(idt dtype.DType, id int64) bool { return id == idxSentinel(idt) }

// idxDrawIDs draws ids in [0, size) with about one sentinel in seven.
// Duplicates come from the draw (and are certain when there are more ids
// than size).
func idxDrawIDs(r *rand.Rand, idt dtype.DType, shape []int, size int) idxArr {
	a := idxZeros(idt, shape)
	for k := range a.i {
		if r.IntN(7) == 0 {
			a.i[k] = idxSentinel(idt)
		} else {
			a.i[k] = int64(r.IntN(size))
		}
	}
	return a
}

// idxIDArr builds an ids value from a list.
func idxIDArr(idt dtype.DType, shape []int, ids ...int64) idxArr {
	a := idxZeros(idt, shape)
	copy(a.i, ids)
	return a
}

// ---------------------------------------------------------------------------
// Layouts: how an operand reaches the op.

// idxLayout turns a graph input into a strided view with the operand's
// logical shape: the input's last dim (col > 0) is narrowed to one column
// and squeezed (every stride grows), dims 0 and rank−1 are transposed
// (swap), and dim nDim is narrowed to start at nOff (an offset, and a
// larger physical dim).
type idxLayout struct {
	col, colOff   int
	swap          bool
	nDim, nOff, n int // nDim < 0: no narrow; n extra elements along nDim
}

func (l idxLayout) String() string {
	var parts []string
	if l.col > 0 {
		parts = append(parts, fmt.Sprintf("column %d of %d", l.colOff, l.col))
	}
	if l.swap {
		parts = append(parts, "transposed")
	}
	if l.nDim >= 0 {
		parts = append(parts, fmt.Sprintf("narrow(dim %d, offset %d, +%d)", l.nDim, l.nOff, l.n))
	}
	if len(parts) == 0 {
		return "contiguous"
	}
	return strings.Join(parts, "+")
}

var idxContiguous = idxLayout{nDim: -1}

// idxRandLayout picks a layout for an operand of the given rank.
func idxRandLayout(r *rand.Rand, rank int) idxLayout {
	l := idxContiguous
	if rank == 0 {
		return l
	}
	narrow := func() {
		l.nDim = r.IntN(rank)
		l.nOff = 1 + r.IntN(2)
		l.n = l.nOff + r.IntN(2)
	}
	switch r.IntN(5) {
	case 1:
		if rank >= 2 {
			l.swap = true
		} else {
			narrow()
		}
	case 2:
		narrow()
	case 3:
		l.col, l.colOff = 3, 1+r.IntN(2)
		l.swap = rank >= 2
	case 4:
		l.col, l.colOff = 2, r.IntN(2)
		l.swap = rank >= 2
		narrow()
	}
	return l
}

func (l idxLayout) phys(shape []int) []int {
	s := slices.Clone(shape)
	if l.nDim >= 0 {
		s[l.nDim] += l.n
	}
	if l.swap {
		s[0], s[len(s)-1] = s[len(s)-1], s[0]
	}
	if l.col > 0 {
		s = append(s, l.col)
	}
	return s
}

func (l idxLayout) view(x *graph.Tensor, shape []int) *graph.Tensor {
	r := len(shape)
	if l.col > 0 {
		x = x.Narrow(r, l.colOff, 1).Squeeze(r)
	}
	if l.swap {
		x = x.Transpose(0, r-1)
	}
	if l.nDim >= 0 {
		x = x.Narrow(l.nDim, l.nOff, shape[l.nDim])
	}
	return x
}

// embed writes logical into a copy of the physical array fill.
func (l idxLayout) embed(logical, fill idxArr) idxArr {
	p := fill.clone()
	r := len(logical.shape)
	c := make([]int, r)
	pc := make([]int, len(p.shape))
	for k := range logical.numel() {
		idxUnravel(k, logical.shape, c)
		copy(pc, c)
		if l.nDim >= 0 {
			pc[l.nDim] += l.nOff
		}
		if l.swap {
			pc[0], pc[r-1] = pc[r-1], pc[0]
		}
		if l.col > 0 {
			pc[r] = l.colOff
		}
		p.put(idxRavel(pc, p.shape), logical, k)
	}
	return p
}

// ---------------------------------------------------------------------------
// The reference.

// idxAffine is x·mul + add in x's dtype: floats exactly then rounded once,
// integers with mul and add converted like a cast and wrapping arithmetic.
func idxAffine(x idxArr, mul, add float64) idxArr {
	y := x.clone()
	if x.dt.IsFloat() {
		for k, v := range x.f {
			y.f[k] = idxRound(x.dt, v*mul+add)
		}
		return y
	}
	m, a := idxSat(x.dt, mul), idxSat(x.dt, add)
	for k, v := range x.i {
		y.i[k] = idxWrap(x.dt, v*m+a)
	}
	return y
}

// idxCheckID returns whether id addresses an element of a dim of size n;
// false for the sentinel. Any other id out of range is a test bug here
// (bad ids are tested against the executor's error, not the reference).
func idxCheckID(idt dtype.DType, id int64, n int) bool {
	if idxIsSentinel(idt, id) {
		return false
	}
	if id < 0 || id >= int64(n) {
		panic(fmt.Sprintf("indexing test bug: reference got id %d for a dim of %d", id, n))
	}
	return true
}

// idxRefSelect: out[…, j, …] = src[…, ids[j], …]; sentinel → 0.
func idxRefSelect(src, ids idxArr, dim int) idxArr {
	shape := slices.Clone(src.shape)
	shape[dim] = ids.numel()
	out := idxZeros(src.dt, shape)
	c := make([]int, len(shape))
	for k := range out.numel() {
		idxUnravel(k, shape, c)
		id := ids.i[c[dim]]
		if !idxCheckID(ids.dt, id, src.shape[dim]) {
			continue
		}
		c[dim] = int(id)
		out.put(k, src, idxRavel(c, src.shape))
	}
	return out
}

// idxRefGather: out has ids' shape, out[c] = src[c with dim = ids[c]].
func idxRefGather(src, ids idxArr, dim int) idxArr {
	out := idxZeros(src.dt, ids.shape)
	c := make([]int, len(ids.shape))
	for k := range out.numel() {
		idxUnravel(k, ids.shape, c)
		id := ids.i[k]
		if !idxCheckID(ids.dt, id, src.shape[dim]) {
			continue
		}
		c[dim] = int(id)
		out.put(k, src, idxRavel(c, src.shape))
	}
	return out
}

// idxRefScatter writes (or adds, with add) src into a copy of dst at
// dst[c with dim = id(c)], where id(c) is ids[c] (scatter, scatter_add) or
// ids[c[dim]] (index_add, 1-D ids). Contributions are visited in row-major
// order of src, which is increasing position along dim for each target:
// the last write wins. Sums are exact in float64 (inputs are integers) and
// rounded once; integer sums wrap.
func idxRefScatter(dst, ids, src idxArr, dim int, add, oneD bool) idxArr {
	out := dst.clone()
	c := make([]int, len(src.shape))
	for k := range src.numel() {
		idxUnravel(k, src.shape, c)
		var id int64
		if oneD {
			id = ids.i[c[dim]]
		} else {
			id = ids.i[k]
		}
		if !idxCheckID(ids.dt, id, dst.shape[dim]) {
			continue
		}
		c[dim] = int(id)
		t := idxRavel(c, dst.shape)
		switch {
		case !add:
			out.put(t, src, k)
		case src.dt.IsFloat():
			out.f[t] += src.f[k]
		default:
			out.i[t] += src.i[k]
		}
	}
	for k := range out.numel() {
		if out.dt.IsFloat() {
			out.f[k] = idxRound(out.dt, out.f[k])
		} else {
			out.i[k] = idxWrap(out.dt, out.i[k])
		}
	}
	return out
}

// idxRefCat concatenates along dim.
func idxRefCat(dim int, xs ...idxArr) idxArr {
	shape := slices.Clone(xs[0].shape)
	shape[dim] = 0
	for _, x := range xs {
		shape[dim] += x.shape[dim]
	}
	out := idxZeros(xs[0].dt, shape)
	off := 0
	for _, x := range xs {
		c := make([]int, len(shape))
		for k := range x.numel() {
			idxUnravel(k, x.shape, c)
			c[dim] += off
			out.put(idxRavel(c, shape), x, k)
		}
		off += x.shape[dim]
	}
	return out
}

// idxRefSliceAssign writes src over dst[…, start:start+len, …].
func idxRefSliceAssign(dst, src idxArr, dim, start int) idxArr {
	out := dst.clone()
	c := make([]int, len(src.shape))
	for k := range src.numel() {
		idxUnravel(k, src.shape, c)
		c[dim] += start
		out.put(idxRavel(c, dst.shape), src, k)
	}
	return out
}

// idxKeyCmp orders two elements of x: NaN above every number, NaNs equal.
func idxKeyCmp(x idxArr, a, b int) int {
	if !x.dt.IsFloat() {
		switch u, v := x.i[a], x.i[b]; {
		case u < v:
			return -1
		case u > v:
			return 1
		}
		return 0
	}
	u, v := x.f[a], x.f[b]
	switch un, vn := u != u, v != v; {
	case un && vn:
		return 0
	case un:
		return 1
	case vn:
		return -1
	case u < v:
		return -1
	case u > v:
		return 1
	}
	return 0
}

// idxRefArgsort sorts each last-dim row with a total order: the key
// (ascending, or descending), then the index ascending — a stable sort in
// both directions, NaN last ascending and first descending.
func idxRefArgsort(x idxArr, desc bool) idxArr {
	out := idxZeros(dtype.U32, x.shape)
	if len(x.shape) == 0 || x.numel() == 0 {
		return out
	}
	n := x.shape[len(x.shape)-1]
	perm := make([]int, n)
	for base := 0; base < x.numel(); base += n {
		for j := range perm {
			perm[j] = j
		}
		sort.Slice(perm, func(p, q int) bool {
			a, b := perm[p], perm[q]
			c := idxKeyCmp(x, base+a, base+b)
			if desc {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
			return a < b
		})
		for j, v := range perm {
			out.i[base+j] = int64(v)
		}
	}
	return out
}

// idxRefTakeRows reads x along the last dim at the indices idx (same shape).
func idxRefTakeRows(x, idx idxArr) idxArr {
	out := idxZeros(x.dt, x.shape)
	n := x.shape[len(x.shape)-1]
	for k := range out.numel() {
		out.put(k, x, k-k%n+int(idx.i[k]))
	}
	return out
}

// ---------------------------------------------------------------------------
// Cases.

type idxSuite struct {
	execs []exec.Executor
	seed  uint64

	mu                             sync.Mutex
	cases, programs, runs, badRuns int
}

func (s *idxSuite) count(cases, programs, runs, bad int) {
	s.mu.Lock()
	s.cases += cases
	s.programs += programs
	s.runs += runs
	s.badRuns += bad
	s.mu.Unlock()
}

type idxWant struct {
	name string
	v    idxArr
}

// idxCase is one graph under test.
type idxCase struct {
	t      *testing.T
	s      *idxSuite
	r      *rand.Rand
	g      *graph.Graph
	inputs map[string]*tensor.Tensor
	wants  []idxWant
	notes  []string
	progs  []*graph.Program
}

func (s *idxSuite) newCase(t *testing.T) *idxCase {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	s.count(1, 0, 0, 0)
	return &idxCase{t: t, s: s, r: rand.New(rand.NewPCG(s.seed, h.Sum64())), g: graph.New(), inputs: map[string]*tensor.Tensor{}}
}

func (c *idxCase) note(format string, a ...any) { c.notes = append(c.notes, fmt.Sprintf(format, a...)) }

// fatalf fails the case with its notes.
func (c *idxCase) fatalf(format string, a ...any) {
	c.t.Helper()
	c.t.Fatal(c.describe(format, a...))
}

func (c *idxCase) errorf(format string, a ...any) {
	c.t.Helper()
	c.t.Error(c.describe(format, a...))
}

func (c *idxCase) describe(format string, a ...any) string {
	msg := fmt.Sprintf(format, a...)
	if len(c.notes) > 0 {
		msg += "\ncase: " + strings.Join(c.notes, "; ")
	}
	return msg
}

// in declares a contiguous input holding a.
func (c *idxCase) in(name string, a idxArr) *graph.Tensor {
	c.t.Helper()
	ht, err := idxTensor(a)
	if err != nil {
		c.fatalf("input %s: %v", name, err)
	}
	c.inputs[name] = ht
	return c.g.Input(name, a.dt, a.shape...)
}

// laid declares an input whose view under l holds the logical value v;
// the elements the view does not cover hold fill's values.
func (c *idxCase) laid(name string, v idxArr, l idxLayout, fill func(shape []int) idxArr) *graph.Tensor {
	c.t.Helper()
	c.note("%s %v%v %v", name, v.dt, v.shape, l)
	if l == idxContiguous {
		return c.in(name, v)
	}
	p := l.embed(v, fill(l.phys(v.shape)))
	return l.view(c.in(name, p), v.shape)
}

// value declares a value input of dt and shape drawn from g, under a random
// layout; it returns the tensor and its logical value.
func (c *idxCase) value(name string, dt dtype.DType, shape []int, g idxGen) (*graph.Tensor, idxArr) {
	v := idxDraw(c.r, dt, shape, g)
	l := idxRandLayout(c.r, len(shape))
	return c.laid(name, v, l, func(ps []int) idxArr { return idxDraw(c.r, dt, ps, g) }), v
}

// ids declares an ids input holding v under a random layout; the elements
// outside the view hold an out-of-range id, so reading one is an error.
func (c *idxCase) ids(name string, v idxArr) *graph.Tensor {
	l := idxRandLayout(c.r, len(v.shape))
	return c.laid(name, v, l, func(ps []int) idxArr {
		a := idxZeros(v.dt, ps)
		for k := range a.i {
			a.i[k] = 254 // out of range for every dim here, never a sentinel
		}
		return a
	})
}

func (c *idxCase) expect(name string, y *graph.Tensor, v idxArr) {
	c.g.Output(name, y)
	c.wants = append(c.wants, idxWant{name, v})
}

// compile compiles the graph once per option set (cached).
func (c *idxCase) compile() []*graph.Program {
	c.t.Helper()
	if c.progs != nil {
		return c.progs
	}
	if err := c.g.Err(); err != nil {
		c.fatalf("build: %v", err)
	}
	if err := ir.Verify(c.g.IR()); err != nil {
		c.fatalf("builder graph fails ir.Verify: %v", err)
	}
	for _, o := range idxOptions {
		p, err := c.g.Compile(o.opts)
		if err != nil {
			c.fatalf("compile (%s): %v", o.name, err)
		}
		if err := ir.Verify(p.Plan().Graph); err != nil {
			c.fatalf("compiled graph (%s) fails ir.Verify: %v", o.name, err)
		}
		c.progs = append(c.progs, p)
	}
	c.s.count(0, len(c.progs), 0, 0)
	return c.progs
}

// run runs every program on every executor and checks every output.
func (c *idxCase) run() {
	c.t.Helper()
	defer func() {
		if r := recover(); r != nil {
			c.fatalf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	for pi, p := range c.compile() {
		for ei, e := range c.s.execs {
			c.runOne(p, e, fmt.Sprintf("%s, %s, poison 0x%02X", idxOptions[pi].name, e.Name(), idxPoisons[ei]), c.inputs)
		}
	}
}

// runOne runs p on e and checks the outputs against the wants.
func (c *idxCase) runOne(p *graph.Program, e exec.Executor, label string, inputs map[string]*tensor.Tensor) {
	c.t.Helper()
	before := map[string][]byte{}
	for name, in := range inputs {
		before[name] = bytes.Clone(in.Bytes())
	}
	out, err := p.Run(context.Background(), e, inputs)
	c.s.count(0, 0, 1, 0)
	if err != nil {
		c.fatalf("run (%s): %v", label, err)
	}
	for name, in := range inputs {
		if !bytes.Equal(before[name], in.Bytes()) {
			c.errorf("run (%s) modified input %q", label, name)
		}
	}
	idxCheckAliasing(c, label, inputs, out)
	if len(out) != len(c.wants) {
		c.errorf("run (%s) returned %d outputs, want %d", label, len(out), len(c.wants))
	}
	for _, w := range c.wants {
		got, ok := out[w.name]
		if !ok || got == nil {
			c.errorf("run (%s): output %q missing", label, w.name)
			continue
		}
		if msg := idxDiff(idxFromTensor(got), w.v); msg != "" {
			c.errorf("%s (%s): %s", w.name, label, msg)
		}
	}
}

// runBad runs p with inputs holding a bad id and expects an error naming
// the op and the id.
func (c *idxCase) runBad(p *graph.Program, e exec.Executor, label string, inputs map[string]*tensor.Tensor, op string, id int64) {
	c.t.Helper()
	defer func() {
		if r := recover(); r != nil {
			c.fatalf("run (%s) with bad id %d panicked: %v\n%s", label, id, r, debug.Stack())
		}
	}()
	out, err := p.Run(context.Background(), e, inputs)
	c.s.count(0, 0, 1, 1)
	if err == nil {
		var got []string
		for _, w := range c.wants {
			if o := out[w.name]; o != nil {
				got = append(got, fmt.Sprintf("%s=%v", w.name, o.Float64s()))
			}
		}
		c.errorf("run (%s) with id %d on a dim of the %s: no error (outputs %v)", label, id, op, got)
		return
	}
	msg := err.Error()
	if !regexp.MustCompile(`\b` + regexp.QuoteMeta(op) + `\b`).MatchString(msg) {
		c.errorf("run (%s) with bad id %d: error does not name the op %q: %v", label, id, op, err)
	}
	if !regexp.MustCompile(`(?i)\b(id|index)[ =:]*` + regexp.QuoteMeta(strconv.FormatInt(id, 10)) + `([^0-9]|$)`).MatchString(msg) {
		c.errorf("run (%s) with bad id %d: error does not name the id: %v", label, id, err)
	}
}

// idxCheckAliasing fails if an output shares memory with an input or
// another output.
func idxCheckAliasing(c *idxCase, label string, inputs, outputs map[string]*tensor.Tensor) {
	type span struct {
		name   string
		lo, hi uintptr
	}
	var spans []span
	add := func(kind, name string, t *tensor.Tensor) {
		if t == nil {
			return
		}
		if b := t.Bytes(); len(b) > 0 {
			lo := uintptr(unsafe.Pointer(&b[0]))
			spans = append(spans, span{kind + " " + name, lo, lo + uintptr(len(b))})
		}
	}
	for n, t := range inputs {
		add("input", n, t)
	}
	for n, t := range outputs {
		add("output", n, t)
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.lo < b.hi && b.lo < a.hi && (strings.HasPrefix(a.name, "output") || strings.HasPrefix(b.name, "output")) {
				c.errorf("run (%s): %s and %s share memory", label, a.name, b.name)
			}
		}
	}
}

// idxDiff describes how got differs from want ("" if it does not).
func idxDiff(got, want idxArr) string {
	if got.dt != want.dt || !slices.Equal(got.shape, want.shape) {
		return fmt.Sprintf("got %v%v, want %v%v", got.dt, got.shape, want.dt, want.shape)
	}
	var bad []string
	n := 0
	c := make([]int, len(want.shape))
	for k := range want.numel() {
		if idxSameElem(got, k, want, k) {
			continue
		}
		n++
		if len(bad) < 8 {
			idxUnravel(k, want.shape, c)
			bad = append(bad, fmt.Sprintf("at %v got %s want %s", c, got.elem(k), want.elem(k)))
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d elements differ (%v%v): %s", n, want.numel(), want.dt, want.shape, strings.Join(bad, "; "))
}

// idxRandShape draws a shape of the given rank with dims in [1, 3].
func idxRandShape(r *rand.Rand, rank int) []int {
	s := make([]int, rank)
	for d := range s {
		s[d] = 1 + r.IntN(3)
	}
	return s
}

// idxDimArg returns dim or its negative spelling.
func idxDimArg(r *rand.Rand, dim, rank int) int {
	if r.IntN(2) == 0 {
		return dim - rank
	}
	return dim
}

// ---------------------------------------------------------------------------
// index_select, gather, scatter, scatter_add, index_add.

func idxTestIDOps(t *testing.T, s *idxSuite) {
	for _, op := range idxIDOps {
		t.Run(op.String(), func(t *testing.T) {
			t.Parallel()
			for _, vdt := range dtype.All {
				for _, idt := range idxIDTypes {
					for rank := 1; rank <= 3; rank++ {
						for dim := range rank {
							t.Run(fmt.Sprintf("%v/ids_%v/rank%d/dim%d", vdt, idt, rank, dim), func(t *testing.T) {
								t.Parallel()
								idxIDOpCase(t, s, op, vdt, idt, rank, dim)
							})
						}
					}
				}
			}
		})
	}
}

// Variants of an id-op case.
const (
	idxPlain    = iota
	idxProducer // an elementwise producer (x·2+1) feeds the op's values
	idxConsumer // an elementwise consumer (y·2+1) reads the op's output
	idxBoth     // both; scatter-like ops write into a broadcast Zeros dst
)

func idxIDOpCase(t *testing.T, s *idxSuite, op ir.Op, vdt, idt dtype.DType, rank, dim int) {
	c := s.newCase(t)
	r := c.r
	variant := r.IntN(4)
	add := op == ir.OpScatterAdd || op == ir.OpIndexAdd
	gen := idxGenAny
	switch {
	case add:
		gen = idxGenInt
	case variant != idxPlain:
		gen = idxGenSmall
	}
	base := idxRandShape(r, rank)
	size := 2 + r.IntN(4) // the indexed dim of src (select, gather) or dst
	base[dim] = size
	m := 1 + r.IntN(6) // how many ids along dim
	darg := idxDimArg(r, dim, rank)
	c.note("%v values %v, ids %v, variant %d, dim arg %d", op, vdt, idt, variant, darg)
	produce := variant == idxProducer || variant == idxBoth
	// operand declares a value operand; with a producer it is x·2+1 of an
	// input, computed in the operand's shape or in the transposed shape and
	// then transposed (a view between the producer and the op), and
	// sometimes also an output (its buffer must outlive the op).
	operand := func(name string, shape []int) (*graph.Tensor, idxArr) {
		if !produce {
			return c.value(name, vdt, shape, gen)
		}
		var x *graph.Tensor
		var v idxArr
		if len(shape) >= 2 && r.IntN(2) == 0 {
			sw := slices.Clone(shape)
			sw[0], sw[len(sw)-1] = sw[len(sw)-1], sw[0]
			x, v = c.value(name, vdt, sw, gen)
			x, v = x.Affine(2, 1).Transpose(0, len(shape)-1), idxSwapArr(idxAffine(v, 2, 1))
			c.note("%s: x·2+1 then transposed", name)
		} else {
			x, v = c.value(name, vdt, shape, gen)
			x, v = x.Affine(2, 1), idxAffine(v, 2, 1)
			c.note("%s: x·2+1", name)
		}
		if r.IntN(2) == 0 {
			c.expect(name+"_produced", x, v)
		}
		return x, v
	}
	// idsOperand declares the ids; with a producer they are sometimes an
	// i64 input cast to the ids dtype (ids from an elementwise kernel).
	idsOperand := func(v idxArr) *graph.Tensor {
		if produce && v.dt != dtype.I64 && r.IntN(2) == 0 {
			w := v.clone()
			w.dt = dtype.I64
			c.note("ids: i64 cast to %v", v.dt)
			return c.ids("ids", w).Cast(v.dt)
		}
		return c.ids("ids", v)
	}
	var y *graph.Tensor
	var want idxArr
	switch op {
	case ir.OpIndexSelect, ir.OpGather:
		x, xv := operand("src", base)
		var idv idxArr
		if op == ir.OpIndexSelect {
			idv = idxDrawIDs(r, idt, []int{m}, size)
			y, want = x.IndexSelect(idsOperand(idv), darg), idxRefSelect(xv, idv, dim)
		} else {
			ishape := slices.Clone(base)
			ishape[dim] = m
			idv = idxDrawIDs(r, idt, ishape, size)
			y, want = x.Gather(idsOperand(idv), darg), idxRefGather(xv, idv, dim)
		}
		c.note("ids %v", idv.i)
	default:
		var dst *graph.Tensor
		var dv idxArr
		if variant == idxBoth {
			dst, dv = c.g.Zeros(vdt, base...), idxZeros(vdt, base)
			c.note("dst Zeros%v", base)
		} else {
			dst, dv = operand("dst", base)
		}
		sshape := slices.Clone(base)
		sshape[dim] = m
		src, sv := operand("src", sshape)
		var idv idxArr
		if op == ir.OpIndexAdd {
			idv = idxDrawIDs(r, idt, []int{m}, size)
		} else {
			idv = idxDrawIDs(r, idt, sshape, size)
		}
		c.note("ids %v", idv.i)
		ids := idsOperand(idv)
		switch op {
		case ir.OpScatter:
			y = dst.Scatter(ids, src, darg)
		case ir.OpScatterAdd:
			y = dst.ScatterAdd(ids, src, darg)
		case ir.OpIndexAdd:
			y = dst.IndexAdd(ids, src, darg)
		}
		want = idxRefScatter(dv, idv, sv, dim, add, op == ir.OpIndexAdd)
	}
	if variant == idxConsumer || variant == idxBoth {
		if r.IntN(2) == 0 {
			c.expect("y_raw", y, want)
		}
		y, want = y.Affine(2, 1), idxAffine(want, 2, 1)
	}
	c.expect("y", y, want)
	c.run()
}

// idxSwapArr transposes the first and last dims of a.
func idxSwapArr(a idxArr) idxArr {
	r := len(a.shape)
	shape := slices.Clone(a.shape)
	shape[0], shape[r-1] = shape[r-1], shape[0]
	out := idxZeros(a.dt, shape)
	c := make([]int, r)
	for k := range out.numel() {
		idxUnravel(k, shape, c)
		c[0], c[r-1] = c[r-1], c[0]
		out.put(k, a, idxRavel(c, a.shape))
	}
	return out
}

// idxTestAddOrder checks f32 scatter_add and index_add against in-order
// float32 accumulation: many contributions of mixed magnitudes to a few
// targets, where the order changes the rounded sum.
func idxTestAddOrder(t *testing.T, s *idxSuite) {
	for _, op := range []ir.Op{ir.OpScatterAdd, ir.OpIndexAdd} {
		for dim := range 2 {
			for _, idt := range idxIDTypes {
				t.Run(fmt.Sprintf("%v/dim%d/ids_%v", op, dim, idt), func(t *testing.T) {
					t.Parallel()
					c := s.newCase(t)
					r := c.r
					const n = 300
					dshape := []int{3, 4}
					sshape := []int{n, 4}
					if dim == 1 {
						dshape, sshape = []int{4, 3}, []int{4, n}
					}
					draw := func(shape []int) idxArr {
						a := idxZeros(dtype.F32, shape)
						for k := range a.f {
							a.f[k] = idxRound(dtype.F32, r.NormFloat64()*math.Ldexp(1, r.IntN(50)-20))
						}
						return a
					}
					dv, sv := draw(dshape), draw(sshape)
					var idv idxArr
					if op == ir.OpIndexAdd {
						idv = idxZeros(idt, []int{n})
					} else {
						idv = idxZeros(idt, sshape)
					}
					for k := range idv.i {
						switch p := r.IntN(10); {
						case p < 7:
							idv.i[k] = 1
						case p < 9:
							idv.i[k] = int64(r.IntN(3))
						default:
							idv.i[k] = idxSentinel(idt)
						}
					}
					// In-order float32 accumulation.
					want := dv.clone()
					acc := make([]float32, len(dv.f))
					for k, v := range dv.f {
						acc[k] = float32(v)
					}
					cc := make([]int, 2)
					for k := range sv.numel() {
						idxUnravel(k, sshape, cc)
						var id int64
						if op == ir.OpIndexAdd {
							id = idv.i[cc[dim]]
						} else {
							id = idv.i[k]
						}
						if idxIsSentinel(idt, id) {
							continue
						}
						cc[dim] = int(id)
						ti := idxRavel(cc, dshape)
						acc[ti] = float32(acc[ti] + float32(sv.f[k]))
					}
					for k := range acc {
						want.f[k] = float64(acc[k])
					}
					dst := c.laid("dst", dv, idxRandLayout(r, 2), func(ps []int) idxArr { return draw(ps) })
					srcT := c.laid("src", sv, idxRandLayout(r, 2), func(ps []int) idxArr { return draw(ps) })
					ids := c.ids("ids", idv)
					var y *graph.Tensor
					if op == ir.OpIndexAdd {
						y = dst.IndexAdd(ids, srcT, dim)
					} else {
						y = dst.ScatterAdd(ids, srcT, dim)
					}
					c.expect("y", y, want)
					c.run()
				})
			}
		}
	}
}

// idxTestDuplicates pins the duplicate rules with every id equal: scatter
// keeps the last write along dim, scatter_add and index_add add every
// contribution.
func idxTestDuplicates(t *testing.T, s *idxSuite) {
	for _, vdt := range dtype.All {
		for _, idt := range idxIDTypes {
			t.Run(fmt.Sprintf("%v/ids_%v", vdt, idt), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				// dst [3, 2], src [5, 2] along dim 0, every id 1 but a sentinel
				// in the last row of column 1: scatter's result in column 1 is
				// row 3 of src, in column 0 row 4.
				dv := idxDraw(c.r, vdt, []int{3, 2}, idxGenInt)
				sv := idxDraw(c.r, vdt, []int{5, 2}, idxGenInt)
				idv := idxIDArr(idt, []int{5, 2}, 1, 1, 1, 1, 1, 1, 1, 1, 1, idxSentinel(idt))
				dst, src, ids := c.in("dst", dv), c.in("src", sv), c.in("ids", idv)
				sel := idxIDArr(idt, []int{5}, 2, 2, 2, idxSentinel(idt), 2)
				selT := c.in("ids1", sel)
				c.expect("scatter", dst.Scatter(ids, src, 0), idxRefScatter(dv, idv, sv, 0, false, false))
				c.expect("scatter_add", dst.ScatterAdd(ids, src, 0), idxRefScatter(dv, idv, sv, 0, true, false))
				c.expect("index_add", dst.IndexAdd(selT, src, 0), idxRefScatter(dv, sel, sv, 0, true, true))
				// An explicit check of the rule itself, independent of the
				// reference's loop order.
				last := dv.clone()
				last.put(2, sv, 8) // [1][0] = src[4][0]
				last.put(3, sv, 7) // [1][1] = src[3][1]
				if d := idxDiff(idxRefScatter(dv, idv, sv, 0, false, false), last); d != "" {
					c.fatalf("indexing test bug: scatter reference: %s", d)
				}
				c.run()
			})
		}
	}
}

// idxTestSentinels: a u8 id of 255 is the sentinel even where the dim has
// more than 255 elements, while u32 and i64 ids of 255 address row 255.
func idxTestSentinels(t *testing.T, s *idxSuite) {
	for _, vdt := range []dtype.DType{dtype.F32, dtype.BF16, dtype.U32, dtype.I64} {
		t.Run(vdt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			x, xv := c.value("x", vdt, []int{300, 2}, idxGenAny)
			dv := idxDraw(c.r, vdt, []int{300, 2}, idxGenInt)
			dst := c.in("dst", dv)
			for _, idt := range idxIDTypes {
				list := []int64{255, 254, 0, idxSentinel(idt), 299}
				if idt == dtype.U8 {
					list = []int64{255, 254, 0, 255, 7}
				}
				idv := idxIDArr(idt, []int{5}, list...)
				ids := c.in("ids_"+idt.String(), idv)
				c.expect("select_"+idt.String(), x.IndexSelect(ids, 0), idxRefSelect(xv, idv, 0))
				gv := idxIDArr(idt, []int{5, 2}, list[0], list[1], list[2], list[3], list[4], list[0], list[1], list[2], list[3], list[4])
				gids := c.in("gids_"+idt.String(), gv)
				c.expect("gather_"+idt.String(), x.Gather(gids, 0), idxRefGather(xv, gv, 0))
				sv := idxDraw(c.r, vdt, []int{5, 2}, idxGenInt)
				src := c.in("src_"+idt.String(), sv)
				c.expect("scatter_"+idt.String(), dst.Scatter(gids, src, 0), idxRefScatter(dv, gv, sv, 0, false, false))
				c.expect("index_add_"+idt.String(), dst.IndexAdd(ids, src, 0), idxRefScatter(dv, idv, sv, 0, true, true))
			}
			// The reference itself: row 255 for u32/i64, zeros for u8.
			u8 := idxRefSelect(xv, idxIDArr(dtype.U8, []int{1}, 255), 0)
			u32 := idxRefSelect(xv, idxIDArr(dtype.U32, []int{1}, 255), 0)
			if idxDiff(u8, idxZeros(vdt, []int{1, 2})) != "" || !idxSameElem(u32, 0, xv, 510) {
				c.fatalf("indexing test bug: sentinel reference")
			}
			c.run()
		})
	}
}

// idxTestBadIDs: out-of-range ids (including negative i64 ids, ids equal to
// the dim's size, and the other id dtypes' sentinels) make the run fail
// with an error naming the op and the id; the same executor then runs good
// ids correctly.
func idxTestBadIDs(t *testing.T, s *idxSuite) {
	const size = 6
	bad := map[dtype.DType][]int64{
		dtype.U8:  {size, 200, 254},
		dtype.U32: {size, 1000, 255, 4294967294},
		dtype.I64: {size, -1, -7, math.MinInt64, 255, 4294967295, 1<<40 + 3, math.MaxInt64 - 1},
	}
	for _, op := range idxIDOps {
		for _, idt := range idxIDTypes {
			t.Run(fmt.Sprintf("%v/ids_%v", op, idt), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				r := c.r
				vdt := dtype.All[r.IntN(len(dtype.All))]
				dim := r.IntN(2)
				base := []int{3, 3}
				base[dim] = size
				sshape := slices.Clone(base)
				sshape[dim] = 4
				c.note("%v values %v, ids %v, dim %d", op, vdt, idt, dim)
				// A producer and a consumer around the op: the error must
				// come out of a fused kernel neighbourhood too.
				x, xv := c.value("x", vdt, base, idxGenInt)
				x, xv = x.Affine(2, 1), idxAffine(xv, 2, 1)
				var ishape []int
				switch op {
				case ir.OpIndexSelect, ir.OpIndexAdd:
					ishape = []int{4}
				default:
					ishape = sshape
				}
				good := idxDrawIDs(r, idt, ishape, size)
				ids := c.in("ids", good)
				var y *graph.Tensor
				var want idxArr
				switch op {
				case ir.OpIndexSelect:
					y, want = x.IndexSelect(ids, dim), idxRefSelect(xv, good, dim)
				case ir.OpGather:
					y, want = x.Gather(ids, dim), idxRefGather(xv, good, dim)
				default:
					src, sv := c.value("src", vdt, sshape, idxGenInt)
					switch op {
					case ir.OpScatter:
						y = x.Scatter(ids, src, dim)
					case ir.OpScatterAdd:
						y = x.ScatterAdd(ids, src, dim)
					case ir.OpIndexAdd:
						y = x.IndexAdd(ids, src, dim)
					}
					want = idxRefScatter(xv, good, sv, dim, op != ir.OpScatter, op == ir.OpIndexAdd)
				}
				c.expect("y", y.Affine(1, 1), idxAffine(want, 1, 1))
				progs := c.compile()
				for _, id := range bad[idt] {
					badIDs := good.clone()
					pos := 1 + r.IntN(badIDs.numel()-1)
					badIDs.i[pos] = id
					badIDs.i[0] = idxSentinel(idt) // a sentinel before it is fine
					bt, err := idxTensor(badIDs)
					if err != nil {
						c.fatalf("%v", err)
					}
					inputs := idxCopyInputs(c.inputs)
					inputs["ids"] = bt
					for pi, p := range progs {
						for ei, e := range s.execs {
							label := fmt.Sprintf("%s, %s, poison 0x%02X", idxOptions[pi].name, e.Name(), idxPoisons[ei])
							c.runBad(p, e, label, inputs, op.String(), id)
							// The executor stays usable.
							c.runOne(p, e, label+", good ids after the bad run", c.inputs)
						}
					}
				}
			})
		}
	}
}

// idxCopyInputs is a shallow copy of an input map.
func idxCopyInputs(m map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	out := make(map[string]*tensor.Tensor, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ---------------------------------------------------------------------------
// cat and slice_assign.

func idxTestCat(t *testing.T, s *idxSuite) {
	for _, dt := range dtype.All {
		for rank := 1; rank <= 3; rank++ {
			for dim := range rank {
				for _, k := range []int{2, 3} {
					for _, empty := range []int{-1, 0, k - 1} {
						t.Run(fmt.Sprintf("%v/rank%d/dim%d/%d_inputs/empty%d", dt, rank, dim, k, empty), func(t *testing.T) {
							t.Parallel()
							c := s.newCase(t)
							r := c.r
							variant := r.IntN(4)
							gen := idxGenAny
							if variant != idxPlain {
								gen = idxGenSmall
							}
							base := idxRandShape(r, rank)
							sizes := r.Perm(4)[:k] // distinct sizes 1..4
							var xs []*graph.Tensor
							var vs []idxArr
							for j := range k {
								shape := slices.Clone(base)
								shape[dim] = sizes[j] + 1
								if j == empty {
									shape[dim] = 0
								}
								name := fmt.Sprintf("x%d", j)
								var x *graph.Tensor
								var v idxArr
								switch {
								case variant == idxProducer && j == 1:
									x, v = c.value(name, dt, shape, gen)
									x, v = x.Affine(2, 1), idxAffine(v, 2, 1)
								case variant == idxBoth && j == k-1:
									// A broadcast constant (stride 0).
									x = c.g.Full(dt, 3, shape...)
									v = idxZeros(dt, shape)
									for q := range v.numel() {
										idxFill(v, q, 3)
									}
									c.note("%s Full(3)%v", name, shape)
								default:
									x, v = c.value(name, dt, shape, gen)
								}
								xs, vs = append(xs, x), append(vs, v)
							}
							y, want := graph.Cat(idxDimArg(r, dim, rank), xs...), idxRefCat(dim, vs...)
							if variant == idxConsumer || variant == idxBoth {
								y, want = y.Affine(2, 1), idxAffine(want, 2, 1)
							}
							c.note("variant %d", variant)
							c.expect("y", y, want)
							c.run()
						})
					}
				}
			}
		}
	}
	t.Run("AllEmpty", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		a, av := c.value("a", dtype.F32, []int{0, 2}, idxGenAny)
		b, bv := c.value("b", dtype.F32, []int{0, 2}, idxGenAny)
		c.expect("y", graph.Cat(0, a, b), idxRefCat(0, av, bv))
		c.run()
	})
	t.Run("SameInputTwice", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		a, av := c.value("a", dtype.I64, []int{2, 3}, idxGenAny)
		c.expect("y", graph.Cat(1, a, a.Affine(1, 0), a), idxRefCat(1, av, av, av))
		c.run()
	})
}

// idxFill sets element q of v to the constant x (converted like a cast).
func idxFill(v idxArr, q int, x float64) {
	f, i := idxConvert(v.dt, x)
	if v.dt.IsFloat() {
		v.f[q] = f
	} else {
		v.i[q] = i
	}
}

func idxTestSliceAssign(t *testing.T, s *idxSuite) {
	const size = 5
	for _, dt := range dtype.All {
		for rank := 1; rank <= 3; rank++ {
			for dim := range rank {
				for _, pos := range []string{"start", "middle", "end"} {
					t.Run(fmt.Sprintf("%v/rank%d/dim%d/%s", dt, rank, dim, pos), func(t *testing.T) {
						t.Parallel()
						c := s.newCase(t)
						r := c.r
						variant := r.IntN(4)
						gen := idxGenAny
						if variant != idxPlain {
							gen = idxGenSmall
						}
						base := idxRandShape(r, rank)
						base[dim] = size
						n := 1 + r.IntN(3)
						start := map[string]int{"start": 0, "middle": (size - n) / 2, "end": size - n}[pos]
						sshape := slices.Clone(base)
						sshape[dim] = n
						dst, dv := c.value("dst", dt, base, gen)
						src, sv := c.value("src", dt, sshape, gen)
						if variant == idxProducer || variant == idxBoth {
							src, sv = src.Affine(2, 1), idxAffine(sv, 2, 1)
						}
						c.note("variant %d, start %d, len %d", variant, start, n)
						y, want := dst.SliceAssign(src, idxDimArg(r, dim, rank), start), idxRefSliceAssign(dv, sv, dim, start)
						if variant == idxConsumer || variant == idxBoth {
							y, want = y.Affine(2, 1), idxAffine(want, 2, 1)
						}
						c.expect("y", y, want)
						c.run()
					})
				}
			}
		}
	}
	t.Run("EmptySource", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		dst, dv := c.value("dst", dtype.U32, []int{3, 4}, idxGenAny)
		src, sv := c.value("src", dtype.U32, []int{3, 0}, idxGenAny)
		c.expect("y", dst.SliceAssign(src, 1, 4), idxRefSliceAssign(dv, sv, 1, 4))
		c.run()
	})
	t.Run("WholeDim", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		dst, dv := c.value("dst", dtype.F16, []int{3, 4}, idxGenAny)
		src, sv := c.value("src", dtype.F16, []int{3, 4}, idxGenAny)
		c.expect("y", dst.SliceAssign(src, 1, 0), idxRefSliceAssign(dv, sv, 1, 0))
		c.run()
	})
}

// ---------------------------------------------------------------------------
// full, zeros, ones, arange.

var idxFullValues = []float64{0, 1, -1, 2.75, -2.75, 1.0 / 3, 1e-8, 255.9, 256, 300, -300,
	65504, 65519, 65520, 16777217, 1e10, -1e10, 1 << 53, 9.3e18, -9.3e18,
	math.Inf(1), math.Inf(-1), math.NaN(), math.Copysign(0, -1)}

var idxAranges = [][3]float64{
	{0, 10, 1}, {5, -3, -0.75}, {0, 1, 0.1}, {-2.5, 2.5, 0.5}, {10, 0, -3}, {0.5, 3, 0.7},
	{250, 260, 1}, {-3, 3, 1}, {2046, 2052, 1}, {16777214, 16777220, 1}, {3, 3, 1}, {1, 0, 1},
	{0, -1, -0.125}, {4294967290, 4294967300, 2},
}

func idxTestFill(t *testing.T, s *idxSuite) {
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			for j, v := range idxFullValues {
				want := idxZeros(dt, []int{2, 3})
				for q := range want.numel() {
					idxFill(want, q, v)
				}
				c.expect(fmt.Sprintf("full%d(%g)", j, v), c.g.Full(dt, v, 2, 3), want)
			}
			zs, ones := idxZeros(dt, []int{4, 1, 2}), idxZeros(dt, []int{3})
			for q := range ones.numel() {
				idxFill(ones, q, 1)
			}
			c.expect("zeros", c.g.Zeros(dt, 4, 1, 2), zs)
			c.expect("ones", c.g.Ones(dt, 3), ones)
			sc := idxZeros(dt, nil)
			idxFill(sc, 0, 7)
			c.expect("full_scalar", c.g.Full(dt, 7), sc)
			for j, a := range idxAranges {
				start, stop, step := a[0], a[1], a[2]
				// Elements start + i·step (in float64) while before stop.
				var vals []float64
				for i := 0; ; i++ {
					x := start + float64(i)*step
					if (step > 0 && x >= stop) || (step < 0 && x <= stop) {
						break
					}
					vals = append(vals, x)
				}
				want := idxZeros(dt, []int{len(vals)})
				for q, x := range vals {
					idxFill(want, q, x)
				}
				c.expect(fmt.Sprintf("arange%d(%g,%g,%g)", j, start, stop, step), c.g.Arange(dt, start, stop, step), want)
			}
			// Constants as operands: a sum with a broadcast Full and arange.
			av := idxZeros(dt, []int{5})
			for q := range 5 {
				idxFill(av, q, float64(q)*2+1)
			}
			c.expect("arange_affine", c.g.Arange(dt, 0, 5, 1).Affine(2, 1), av)
			c.run()
		})
	}
}

// ---------------------------------------------------------------------------
// argsort and sort.

// idxDrawKeys draws sort keys: many ties, and for floats NaNs and ±Inf.
func idxDrawKeys(r *rand.Rand, dt dtype.DType, shape []int) idxArr {
	a := idxZeros(dt, shape)
	for k := range a.numel() {
		p := r.IntN(100)
		switch dt {
		case dtype.U8:
			a.i[k] = int64(r.IntN(256))
		case dtype.U32:
			if p < 30 {
				a.i[k] = []int64{0, 7, 1<<31 + 5, 4294967295}[r.IntN(4)]
			} else {
				a.i[k] = int64(r.Uint32())
			}
		case dtype.I64:
			if p < 30 {
				a.i[k] = []int64{-5, 0, math.MinInt64, math.MaxInt64}[r.IntN(4)]
			} else {
				a.i[k] = int64(r.Uint64())
			}
		default:
			var v float64
			switch {
			case p < 30:
				v = []float64{-1, 0, 0.5, 2}[r.IntN(4)]
			case p < 36:
				v = math.NaN()
			case p < 38:
				v = math.Inf(1)
			case p < 40:
				v = math.Inf(-1)
			default:
				v = r.NormFloat64() * 100
			}
			a.f[k] = idxRound(dt, v)
		}
	}
	return a
}

func idxTestArgsort(t *testing.T, s *idxSuite) {
	type shapeCase struct {
		name  string
		shape []int
		swap  bool // a transposed input
	}
	shapes := []shapeCase{
		{"len1", []int{3, 1}, false},
		{"len2_transposed", []int{5, 2}, true},
		{"len1023", []int{2, 1023}, false},
		{"len1024_rank3", []int{2, 2, 1024}, false},
		{"len1025_transposed", []int{3, 1025}, true},
		{"len100000", []int{100000}, false},
		{"len0", []int{2, 0}, false},
	}
	for _, dt := range dtype.All {
		for _, sc := range shapes {
			for _, desc := range []bool{false, true} {
				dir := "asc"
				if desc {
					dir = "desc"
				}
				t.Run(fmt.Sprintf("%v/%s/%s", dt, sc.name, dir), func(t *testing.T) {
					t.Parallel()
					c := s.newCase(t)
					xv := idxDrawKeys(c.r, dt, sc.shape)
					l := idxContiguous
					if sc.swap {
						l.swap = true
					}
					x := c.laid("x", xv, l, func(ps []int) idxArr { return idxDrawKeys(c.r, dt, ps) })
					vals, idx := x.Sort(desc)
					perm := idxRefArgsort(xv, desc)
					c.expect("indices", idx, perm)
					c.expect("values", vals, idxRefTakeRows(xv, perm))
					idxCheckSorted(c, xv, perm, desc)
					c.run()
				})
			}
		}
	}
	// An elementwise producer feeding argsort, a consumer of sort's values.
	for _, dt := range dtype.All {
		t.Run(fmt.Sprintf("%v/fused_neighbours", dt), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			x, xv := c.value("x", dt, []int{3, 37}, idxGenSmall)
			x, xv = x.Affine(2, 1), idxAffine(xv, 2, 1)
			vals, idx := x.Sort(true)
			perm := idxRefArgsort(xv, true)
			c.expect("indices", idx, perm)
			c.expect("values", vals.Affine(2, 1), idxAffine(idxRefTakeRows(xv, perm), 2, 1))
			c.expect("argsort_asc", x.Argsort(false), idxRefArgsort(xv, false))
			c.run()
		})
	}
}

// idxCheckSorted checks the reference permutation against the contract
// directly: keys in order, ties (NaNs included) in index order.
func idxCheckSorted(c *idxCase, x, perm idxArr, desc bool) {
	c.t.Helper()
	if len(x.shape) == 0 || x.numel() == 0 {
		return
	}
	n := x.shape[len(x.shape)-1]
	for base := 0; base < x.numel(); base += n {
		for j := 1; j < n; j++ {
			a, b := int(perm.i[base+j-1]), int(perm.i[base+j])
			cmp := idxKeyCmp(x, base+a, base+b)
			if desc {
				cmp = -cmp
			}
			if cmp > 0 || (cmp == 0 && a > b) {
				c.fatalf("indexing test bug: reference argsort not sorted at row %d position %d", base/n, j)
			}
		}
	}
}

// idxTestSortTies: rows of equal keys, NaN runs, ±Inf.
func idxTestSortTies(t *testing.T, s *idxSuite) {
	nan, inf := math.NaN(), math.Inf(1)
	negZero, negNaN := math.Copysign(0, -1), math.Copysign(math.NaN(), -1)
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			var rows [][]float64
			if dt.IsFloat() {
				rows = [][]float64{
					{2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
					{nan, nan, nan, nan, nan, nan, nan, nan, nan, nan},
					{1, nan, 1, nan, 0, nan, 1, -inf, inf, nan},
					{inf, -inf, nan, inf, -inf, nan, 0, inf, -inf, 0},
					{3, 1, 3, 1, 3, 1, 3, 1, 2, 2},
					// −0 and +0 are equal keys (IEEE comparison); a NaN with its
					// sign bit set is a NaN like any other.
					{0, negZero, 1, 0, negZero, negNaN, nan, -1, negZero, 0},
				}
			} else {
				rows = [][]float64{
					{2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
					{0, 0, 255, 255, 0, 0, 255, 255, 1, 1},
					{3, 1, 3, 1, 3, 1, 3, 1, 2, 2},
					// Small negatives only (u8 and u32 saturate them to 0), and
					// values around 2^31 and 2^32.
					{-3, 5, -3, 0, 7, -1, 2, -1, 0, 4},
					{4294967295, 2147483648, 0, 4294967295, 1, 2147483647, 4294967296, 0, -1, 2147483648},
				}
			}
			xv := idxZeros(dt, []int{len(rows), 10})
			for ri, row := range rows {
				for j, v := range row {
					idxFill(xv, ri*10+j, v)
				}
			}
			x := c.in("x", xv)
			for _, desc := range []bool{false, true} {
				vals, idx := x.Sort(desc)
				perm := idxRefArgsort(xv, desc)
				idxCheckSorted(c, xv, perm, desc)
				c.expect(fmt.Sprintf("indices_desc%v", desc), idx, perm)
				c.expect(fmt.Sprintf("values_desc%v", desc), vals, idxRefTakeRows(xv, perm))
			}
			// The contract spelled out for the third float row: NaNs (1, 3,
			// 5, 9) last ascending and first descending, each run in index
			// order.
			if dt.IsFloat() {
				asc, desc := idxRefArgsort(xv, false), idxRefArgsort(xv, true)
				if got := asc.i[20:30]; !slices.Equal(got, []int64{7, 4, 0, 2, 6, 8, 1, 3, 5, 9}) {
					c.fatalf("indexing test bug: ascending reference %v", got)
				}
				if got := desc.i[20:30]; !slices.Equal(got, []int64{1, 3, 5, 9, 8, 0, 2, 6, 4, 7}) {
					c.fatalf("indexing test bug: descending reference %v", got)
				}
			}
			c.run()
		})
	}
}

// idxTestChain strings several indexing ops with elementwise ops between
// them in one graph.
func idxTestChain(t *testing.T, s *idxSuite) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.I64, dtype.U8} {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			x, xv := c.value("x", dt, []int{4, 5}, idxGenSmall)
			iv := idxDrawIDs(c.r, dtype.U32, []int{3}, 4)
			ids := c.ids("ids", iv)
			a, av := x.IndexSelect(ids, 0), idxRefSelect(xv, iv, 0)
			b, bv := graph.Cat(0, a, x.Affine(2, 1)), idxRefCat(0, av, idxAffine(xv, 2, 1))
			w, wv := c.value("w", dt, []int{7, 2}, idxGenSmall)
			z, zv := b.SliceAssign(w, 1, 2), idxRefSliceAssign(bv, wv, 1, 2)
			vals, idx := z.Sort(false)
			perm := idxRefArgsort(zv, false)
			// Reverse each row with a gather by an arange-built index.
			rev := c.g.Arange(dtype.I64, 4, -1, -1).Unsqueeze(0).BroadcastTo(7, 5)
			rv := idxZeros(dtype.I64, []int{7, 5})
			for k := range rv.i {
				rv.i[k] = int64(4 - k%5)
			}
			sorted := idxRefTakeRows(zv, perm)
			c.expect("b", b, bv)
			c.expect("z", z, zv)
			c.expect("indices", idx, perm)
			c.expect("values", vals, sorted)
			c.expect("reversed", vals.Gather(rev, 1), idxRefGather(sorted, rv, 1))
			c.run()
		})
	}
}

// idxTestLarge runs each op on ~100k-element strided operands.
func idxTestLarge(t *testing.T, s *idxSuite) {
	tr := func(c *idxCase, name string, v idxArr) *graph.Tensor {
		l := idxContiguous
		l.swap = true
		return c.laid(name, v, l, func(ps []int) idxArr { return idxDraw(c.r, v.dt, ps, idxGenAny) })
	}
	t.Run("index_select", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		xv := idxDraw(c.r, dtype.F32, []int{600, 200}, idxGenAny)
		x := tr(c, "x", xv)
		i0, i1 := idxDrawIDs(c.r, dtype.U32, []int{700}, 600), idxDrawIDs(c.r, dtype.I64, []int{300}, 200)
		c.expect("dim0", x.IndexSelect(c.in("i0", i0), 0), idxRefSelect(xv, i0, 0))
		c.expect("dim1", x.IndexSelect(c.in("i1", i1), 1), idxRefSelect(xv, i1, 1))
		c.run()
	})
	t.Run("gather", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		xv := idxDraw(c.r, dtype.BF16, []int{400, 300}, idxGenAny)
		iv := idxDrawIDs(c.r, dtype.U8, []int{400, 250}, 255)
		c.expect("y", tr(c, "x", xv).Gather(tr(c, "ids", iv), 1), idxRefGather(xv, iv, 1))
		c.run()
	})
	t.Run("scatter_add", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		dv := idxDraw(c.r, dtype.I64, []int{500, 200}, idxGenInt)
		sv := idxDraw(c.r, dtype.I64, []int{800, 200}, idxGenInt)
		iv := idxDrawIDs(c.r, dtype.I64, []int{800, 200}, 500)
		c.expect("y", tr(c, "dst", dv).ScatterAdd(c.in("ids", iv), tr(c, "src", sv), 0), idxRefScatter(dv, iv, sv, 0, true, false))
		c.run()
	})
	t.Run("scatter", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		dv := idxDraw(c.r, dtype.F64, []int{200, 500}, idxGenAny)
		sv := idxDraw(c.r, dtype.F64, []int{200, 800}, idxGenAny)
		iv := idxDrawIDs(c.r, dtype.U32, []int{200, 800}, 500)
		c.expect("y", tr(c, "dst", dv).Scatter(tr(c, "ids", iv), c.in("src", sv), 1), idxRefScatter(dv, iv, sv, 1, false, false))
		c.run()
	})
	t.Run("index_add", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		dv := idxDraw(c.r, dtype.F16, []int{300, 300}, idxGenInt)
		sv := idxDraw(c.r, dtype.F16, []int{300, 400}, idxGenInt)
		iv := idxDrawIDs(c.r, dtype.U32, []int{400}, 300)
		c.expect("y", tr(c, "dst", dv).IndexAdd(c.in("ids", iv), tr(c, "src", sv), 1), idxRefScatter(dv, iv, sv, 1, true, true))
		c.run()
	})
	t.Run("cat_slice_assign", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		av := idxDraw(c.r, dtype.U32, []int{200, 300}, idxGenAny)
		bv := idxDraw(c.r, dtype.U32, []int{0, 300}, idxGenAny)
		cv := idxDraw(c.r, dtype.U32, []int{150, 300}, idxGenAny)
		y, yv := graph.Cat(0, tr(c, "a", av), c.in("b", bv), tr(c, "c", cv)), idxRefCat(0, av, bv, cv)
		sv := idxDraw(c.r, dtype.U32, []int{350, 100}, idxGenAny)
		c.expect("cat", y, yv)
		c.expect("slice_assign", y.SliceAssign(tr(c, "s", sv), 1, 150), idxRefSliceAssign(yv, sv, 1, 150))
		c.run()
	})
}

// idxTestEmpty: zero ids, and sources with a zero-size dim.
func idxTestEmpty(t *testing.T, s *idxSuite) {
	for _, vdt := range []dtype.DType{dtype.F32, dtype.BF16, dtype.I64, dtype.U8} {
		for _, idt := range idxIDTypes {
			t.Run(fmt.Sprintf("%v/ids_%v", vdt, idt), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xv := c.value("x", vdt, []int{3, 4}, idxGenInt)
				i0 := idxZeros(idt, []int{0})
				g0 := idxZeros(idt, []int{3, 0})
				s0, sv := c.value("s0", vdt, []int{3, 0}, idxGenInt)
				ids0, gids0 := c.in("ids0", i0), c.in("gids0", g0)
				c.expect("select", x.IndexSelect(ids0, 1), idxRefSelect(xv, i0, 1))
				c.expect("gather", x.Gather(gids0, 1), idxRefGather(xv, g0, 1))
				c.expect("scatter", x.Scatter(gids0, s0, 1), idxRefScatter(xv, g0, sv, 1, false, false))
				c.expect("scatter_add", x.ScatterAdd(gids0, s0, 1), idxRefScatter(xv, g0, sv, 1, true, false))
				c.expect("index_add", x.IndexAdd(ids0, s0, 1), idxRefScatter(xv, i0, sv, 1, true, true))
				// A source with a zero-size dim other than the indexed one.
				z, zv := c.value("z", vdt, []int{0, 4}, idxGenInt)
				iv := idxIDArr(idt, []int{3}, 3, 0, idxSentinel(idt))
				ids := c.in("ids", iv)
				c.expect("select_from_empty", z.IndexSelect(ids, 1), idxRefSelect(zv, iv, 1))
				c.expect("argsort_empty_rows", z.Argsort(false), idxRefArgsort(zv, false))
				c.run()
			})
		}
	}
}

// idxTestBroadcast: stride-0 operands (a broadcast input) as source, ids,
// destination and sort input.
func idxTestBroadcast(t *testing.T, s *idxSuite) {
	for _, vdt := range []dtype.DType{dtype.F32, dtype.F16, dtype.U32, dtype.I64} {
		t.Run(vdt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			rowv := idxDraw(c.r, vdt, []int{1, 6}, idxGenInt)
			row := c.in("row", rowv)
			bx := row.BroadcastTo(4, 6)
			bv := idxZeros(vdt, []int{4, 6})
			for k := range bv.numel() {
				bv.put(k, rowv, k%6)
			}
			iv := idxDrawIDs(c.r, dtype.U32, []int{1, 6}, 4)
			bidsv := idxZeros(dtype.U32, []int{4, 6})
			for k := range bidsv.numel() {
				bidsv.i[k] = iv.i[k%6]
			}
			bids := c.in("ids", iv).BroadcastTo(4, 6)
			sel := idxDrawIDs(c.r, dtype.I64, []int{5}, 4)
			sv := idxDraw(c.r, vdt, []int{4, 6}, idxGenInt)
			src := c.in("src", sv)
			c.expect("select", bx.IndexSelect(c.in("sel", sel), 0), idxRefSelect(bv, sel, 0))
			c.expect("gather", src.Gather(bids, 0), idxRefGather(sv, bidsv, 0))
			// Every row of ids is the same: along dim 0 each column gets four
			// writes to one row; the last (row 3) wins.
			c.expect("scatter", bx.Scatter(bids, src, 0), idxRefScatter(bv, bidsv, sv, 0, false, false))
			c.expect("scatter_add", bx.ScatterAdd(bids, src, 0), idxRefScatter(bv, bidsv, sv, 0, true, false))
			c.expect("argsort", bx.Argsort(true), idxRefArgsort(bv, true))
			full := idxZeros(vdt, []int{3, 5})
			for k := range full.numel() {
				idxFill(full, k, 4)
			}
			c.expect("argsort_full", c.g.Full(vdt, 4, 3, 5).Argsort(false), idxRefArgsort(full, false))
			c.run()
		})
	}
}

// idxTestSameOperand: one tensor as values, ids and destination at once.
func idxTestSameOperand(t *testing.T, s *idxSuite) {
	for _, dt := range idxIDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			xv := idxZeros(dt, []int{5, 5})
			for k := range xv.i {
				xv.i[k] = int64(c.r.IntN(5))
			}
			x := c.in("x", xv)
			v1 := idxZeros(dt, []int{5})
			for k := range v1.i {
				v1.i[k] = int64(c.r.IntN(5))
			}
			x1 := c.in("x1", v1)
			c.expect("select", x1.IndexSelect(x1, 0), idxRefSelect(v1, v1, 0))
			c.expect("gather", x.Gather(x, 1), idxRefGather(xv, xv, 1))
			c.expect("scatter", x.Scatter(x, x, 0), idxRefScatter(xv, xv, xv, 0, false, false))
			c.expect("scatter_add", x.ScatterAdd(x, x, 1), idxRefScatter(xv, xv, xv, 1, true, false))
			c.expect("index_add", x.IndexAdd(x1, x, 0), idxRefScatter(xv, v1, xv, 0, true, true))
			c.run()
		})
	}
}

// idxTestArangeStop: arange excludes stop even where the float64 quotient
// (stop−start)/step lands just above an integer: in arange(1, 1.3, 0.1),
// (1.3−1)/0.1 = 3.0000000000000004, but element 3 = 1 + 3·0.1 is exactly
// 1.3 = stop, so there are three elements, 1, 1.1, 1.2 (Candle's loop, and
// graph.Arange's doc "up to but excluding stop", agree). Likewise
// arange(1.3, 1, −0.1): element 3 = 1.3 − 0.30000000000000004 = 1 = stop.
func idxTestArangeStop(t *testing.T, s *idxSuite) {
	for _, a := range [][3]float64{{1, 1.3, 0.1}, {1.3, 1, -0.1}} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F64} {
			t.Run(fmt.Sprintf("%v/%g_%g_%g", dt, a[0], a[1], a[2]), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				start, stop, step := a[0], a[1], a[2]
				var vals []float64
				for i := 0; ; i++ {
					x := start + float64(i)*step
					if (step > 0 && x >= stop) || (step < 0 && x <= stop) {
						break
					}
					vals = append(vals, x)
				}
				want := idxZeros(dt, []int{len(vals)})
				for q, x := range vals {
					idxFill(want, q, x)
				}
				y := c.g.Arange(dt, start, stop, step)
				if got := y.Shape(); !slices.Equal(got, want.shape) {
					c.fatalf("Arange(%v, %g, %g, %g) has shape %v, want %v: elements %v (start + i·step in float64 while before stop)", dt, start, stop, step, got, want.shape, vals)
				}
				c.expect("y", y, want)
				c.run()
			})
		}
	}
}

// idxTestRoundedProducer: argsort reads its producer's values in the
// producer's dtype. x + c rounds (f16, bf16) or wraps (u8, u32) to values
// that tie or reorder; sorting the unrounded values would differ.
func idxTestRoundedProducer(t *testing.T, s *idxSuite) {
	consts := map[dtype.DType]float64{dtype.F16: 2048, dtype.BF16: 256, dtype.U8: 200, dtype.U32: 4294967000}
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16, dtype.U8, dtype.U32} {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			xv := idxZeros(dt, []int{3, 40})
			for k := range xv.numel() {
				if dt.IsFloat() {
					xv.f[k] = float64(c.r.IntN(64)) / 64 // x + c rounds to c
				} else {
					xv.i[k] = int64(c.r.IntN(600)) % (1 << (8 * dt.Size()))
				}
			}
			x := c.in("x", xv)
			y, yv := x.Affine(1, consts[dt]), idxAffine(xv, 1, consts[dt])
			for _, desc := range []bool{false, true} {
				vals, idx := y.Sort(desc)
				perm := idxRefArgsort(yv, desc)
				c.expect(fmt.Sprintf("indices_desc%v", desc), idx, perm)
				c.expect(fmt.Sprintf("values_desc%v", desc), vals, idxRefTakeRows(yv, perm))
			}
			c.run()
		})
	}
}

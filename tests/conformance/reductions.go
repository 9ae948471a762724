package conformance

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/tensor"
)

// Reductions is the conformance group of reductions and row operations:
// sum, max, min, argmax, argmin (every dtype), mean and var, softmax and
// log_softmax over any dim, layer_norm and rms_norm, and the rope family
// (float dtypes), plus the structure fusion must give the row kernels.
//
// Every case runs with fusion on and off (both with the IR verifier after
// every pass) and on two executors from newExec whose fresh memory is
// poisoned with different bytes (0xFF, then 0x00), so an output element a
// kernel never writes cannot match the reference in both runs. Inputs are
// drawn from a seed taken from the clock (or LOOM_SEED), logged when the
// group fails; every case derives its generator from the seed and its test
// name. The reference is written here in float64 from the semantics in
// ir/ops.go (reductions), graph/reduce.go (the composites) and
// shared/candle-kernels.md §9.5 (rope index formulas); it does not call
// exec/cpu.
//
// Tolerances (redTolSum, redTolRow, redTolRope, each commented with its
// origin):
//   - f64: 1e-12 relative to the magnitude of the terms;
//   - f32 sums (sum, mean, and x² sums): relative to Σ|x| with
//     1e-6 + 1e-7·√n, the error growth of an n-term float32 sum;
//   - f32 softmax, log_softmax, var and the norms: 1e-5 relative + 1e-6
//     absolute; f32 rope 1e-6 relative to |x0·c| + |x1·s|;
//   - f16/bf16: 2 ulps of the reference that rounds to the dtype wherever
//     the graph's ops do (every op's result is stored in the dtype; sums
//     accumulate in float32 first, which adds the f32 sum bound);
//   - integers: exact, u8/u32/i64 sums wrapping mod 2^8, 2^32, 2^64;
//     max, min, argmax and argmin: exact for every dtype.
//
// Two subgroups hold f16/bf16 composites to the stricter standard of the
// exact result rounded once (what Candle's fused kernels, which accumulate
// in float, deliver): half_overflow (intermediate sums beyond 65504 with a
// representable result) and half_accuracy (2 ulps of the exact result on
// ordinary rows).
func Reductions(t *testing.T, newExec func(poison byte) exec.Executor) {
	seed := redSeed()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("reductions: random inputs from seed %d: rerun with LOOM_SEED=%d go test -run '%s'", seed, seed, t.Name())
		}
	})
	var execs []exec.Executor
	for _, p := range redPoisons {
		execs = append(execs, newExec(p))
	}
	for _, m := range []struct {
		name string
		opts graph.Options
	}{
		{"fused", graph.Options{Check: true}},
		{"unfused", graph.Options{NoFusion: true, Check: true}},
	} {
		t.Run(m.name, func(t *testing.T) {
			s := &redSuite{seed: seed, execs: execs, opts: m.opts}
			t.Run("dims", s.dims)
			t.Run("multidim", s.multiDims)
			t.Run("views", s.views)
			t.Run("rowlen", s.rowLens)
			t.Run("layout", s.layouts)
			t.Run("fused_long", s.fusedLong)
			t.Run("multidim_long", s.multiDimLong)
			t.Run("concurrent", s.concurrent)
			t.Run("sources", s.sources)
			t.Run("shared", s.shared)
			t.Run("special", s.special)
			t.Run("special_long", s.specialLong)
			t.Run("ties", s.ties)
			t.Run("empty", s.empty)
			t.Run("softmax", s.softmax)
			t.Run("norms", s.norms)
			t.Run("w5", s.w5)
			t.Run("rope", s.rope)
			t.Run("half_overflow", s.halfOverflow)
			t.Run("half_accuracy", s.halfAccuracy)
		})
	}
	t.Run("structure", redStructure)
}

// redPoisons are the bytes the two executors fill fresh memory with.
var redPoisons = []byte{0xFF, 0x00}

var redSeed = sync.OnceValue(func() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("LOOM_SEED"), 10, 64); err == nil {
		return s
	}
	return uint64(time.Now().UnixNano())
})

// redFloats are the float dtypes; the reductions take every dtype.
var redFloats = []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16}

type redSuite struct {
	seed  uint64
	execs []exec.Executor
	opts  graph.Options
}

// ---------------------------------------------------------------------------
// Host arrays and the reference's view of them.

// redArr is a row-major host array as the reference sees it.
type redArr struct {
	dt    dtype.DType
	shape []int
	f     []float64 // every element (floats: exact; ints: as float64)
	i     []int64   // ints: the exact values (u32 as non-negative)
}

func redStrides(shape []int) []int {
	s := make([]int, len(shape))
	n := 1
	for d := len(shape) - 1; d >= 0; d-- {
		s[d] = n
		n *= shape[d]
	}
	return s
}

// view builds the array of the given shape whose element at index idx is
// a's element at flat index src(idx).
func (a redArr) view(shape []int, src func(idx []int) int) redArr {
	out := redArr{dt: a.dt, shape: slices.Clone(shape)}
	n := tensor.Numel(shape)
	idx := make([]int, len(shape))
	st := redStrides(shape)
	for k := 0; k < n; k++ {
		rem := k
		for d := range shape {
			idx[d] = rem / st[d]
			rem %= st[d]
		}
		j := src(idx)
		out.f = append(out.f, a.f[j])
		if a.i != nil {
			out.i = append(out.i, a.i[j])
		}
	}
	return out
}

func (a redArr) permute(perm ...int) redArr {
	st := redStrides(a.shape)
	shape := make([]int, len(perm))
	for k, p := range perm {
		shape[k] = a.shape[p]
	}
	return a.view(shape, func(idx []int) int {
		j := 0
		for k, p := range perm {
			j += idx[k] * st[p]
		}
		return j
	})
}

func (a redArr) transpose(d0, d1 int) redArr {
	perm := make([]int, len(a.shape))
	for i := range perm {
		perm[i] = i
	}
	perm[d0], perm[d1] = perm[d1], perm[d0]
	return a.permute(perm...)
}

func (a redArr) narrow(dim, start, n int) redArr {
	st := redStrides(a.shape)
	shape := slices.Clone(a.shape)
	shape[dim] = n
	return a.view(shape, func(idx []int) int {
		j := 0
		for d, i := range idx {
			if d == dim {
				i += start
			}
			j += i * st[d]
		}
		return j
	})
}

// bcast2 broadcasts a 1-D array of n to (rows, n).
func (a redArr) bcast2(rows, n int) redArr {
	b := a
	b.shape = []int{1, n}
	return b.bcast(rows, n)
}

// bcast broadcasts a (same rank) to shape.
func (a redArr) bcast(shape ...int) redArr {
	st := redStrides(a.shape)
	return a.view(shape, func(idx []int) int {
		j := 0
		for d, i := range idx {
			if a.shape[d] != 1 {
				j += i * st[d]
			}
		}
		return j
	})
}

// redRows describes a reduction of shape over dims: the output shape with
// the reduced dims kept at size 1 and without them, and for every output
// element (row-major over the kept dims) its row: the flat indices of the
// reduced elements, row-major over the reduced dims in increasing order
// (the order in which argmax counts).
func redRows(shape, dims []int) (keep, drop []int, rows [][]int) {
	rank := len(shape)
	red := make([]bool, rank)
	for _, d := range dims {
		if d < 0 {
			d += rank
		}
		red[d] = true
	}
	st := redStrides(shape)
	var outer, inner []int
	keep, drop = []int{}, []int{}
	for d := range rank {
		if red[d] {
			inner = append(inner, d)
			keep = append(keep, 1)
		} else {
			outer = append(outer, d)
			keep = append(keep, shape[d])
			drop = append(drop, shape[d])
		}
	}
	offsets := func(ds []int) []int {
		offs := []int{0}
		for _, d := range ds {
			next := make([]int, 0, len(offs)*shape[d])
			for _, o := range offs {
				for k := range shape[d] {
					next = append(next, o+k*st[d])
				}
			}
			offs = next
		}
		return offs
	}
	in := offsets(inner)
	for _, o := range offsets(outer) {
		row := make([]int, len(in))
		for k, q := range in {
			row[k] = o + q
		}
		rows = append(rows, row)
	}
	return keep, drop, rows
}

func redGather(v []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for k, j := range idx {
		out[k] = v[j]
	}
	return out
}

func redGatherI(v []int64, idx []int) []int64 {
	out := make([]int64, len(idx))
	for k, j := range idx {
		out[k] = v[j]
	}
	return out
}

// ---------------------------------------------------------------------------
// The reference, written from ir/ops.go and graph/reduce.go.

// redRound rounds to dt where the graph stores a result in dt. f16, bf16 and
// f8e4m3 round at every op (each op computes in float32 and stores in the
// dtype; f8e4m3 through this package's own saturating roundFloat);
// for f32 and f64 the reference stays exact float64 and the tolerance covers
// the executor's rounding.
func redRound(dt dtype.DType) func(float64) float64 {
	switch dt {
	case dtype.F16:
		return func(v float64) float64 { return dtype.ToF16From64(v).Float64() }
	case dtype.BF16:
		return func(v float64) float64 { return dtype.ToBF16From64(v).Float64() }
	case dtype.F8E4M3:
		return func(v float64) float64 { return roundFloat(dtype.F8E4M3, v) }
	}
	return func(v float64) float64 { return v }
}

func redSum(x []float64) (s, abs float64) {
	for _, v := range x {
		s += v
		abs += math.Abs(v)
	}
	return s, abs
}

// redExtreme is max (min) propagating NaN.
func redExtreme(x []float64, isMax bool) float64 {
	m := x[0]
	for _, v := range x {
		if math.IsNaN(v) {
			return v
		}
		if isMax && v > m || !isMax && v < m {
			m = v
		}
	}
	return m
}

// redArg is the first index of the max (min); NaN counts as the extreme, so
// the first NaN wins.
func redArg(x []float64, isMax bool) int {
	best := 0
	for i, v := range x {
		if math.IsNaN(v) {
			return i
		}
		if isMax && v > x[best] || !isMax && v < x[best] {
			best = i
		}
	}
	return best
}

// redSumI is an integer sum wrapping in the dtype (u8 mod 2^8, u32 mod 2^32,
// i64 mod 2^64).
func redSumI(dt dtype.DType, x []int64) int64 {
	var s uint64
	for _, v := range x {
		s += uint64(v)
	}
	switch dt {
	case dtype.U8:
		return int64(uint8(s))
	case dtype.U32:
		return int64(uint32(s))
	}
	return int64(s)
}

func redExtremeI(x []int64, isMax bool) int64 {
	m := x[0]
	for _, v := range x {
		if isMax && v > m || !isMax && v < m {
			m = v
		}
	}
	return m
}

func redArgI(x []int64, isMax bool) int {
	best := 0
	for i, v := range x {
		if isMax && v > x[best] || !isMax && v < x[best] {
			best = i
		}
	}
	return best
}

// redMeanRef is Mean's value: Sum then Affine(1/n), each stored in dt.
func redMeanRef(x []float64, rnd func(float64) float64) (m, abs float64) {
	s, a := redSum(x)
	n := float64(len(x))
	return rnd(rnd(s) * (1 / n)), a / n
}

// redVarRef is Var's value, the two-pass unbiased composite
// Σ(x − mean)² · (1/(n − 1)) (Candle's var; NaN for n ≤ 1: 0·∞), with the
// magnitude Σ(|x| + |mean|)²/(n − 1) of its terms (x − mean cancels).
func redVarRef(x []float64, rnd func(float64) float64) (v, mag float64) {
	m, _ := redMeanRef(x, rnd)
	sq := make([]float64, len(x))
	for i, xv := range x {
		c := rnd(xv - m)
		sq[i] = rnd(c * c)
		mag += (math.Abs(xv) + math.Abs(m)) * (math.Abs(xv) + math.Abs(m))
	}
	s, _ := redSum(sq)
	inv := math.Inf(1)
	if len(x) > 1 {
		inv = 1 / float64(len(x)-1)
	}
	return rnd(rnd(s) * inv), mag / float64(max(len(x)-1, 1))
}

// redSoftmaxRow is Softmax's composite exp(x − max)/Σexp(x − max), or with
// log, LogSoftmax's (x − max) − log Σexp(x − max); every op stored in dt.
// mag is the size of the terms whose errors reach each output.
func redSoftmaxRow(x []float64, rnd func(float64) float64, log bool) (out, mag []float64) {
	m := redExtreme(x, true)
	c := make([]float64, len(x))
	e := make([]float64, len(x))
	s := 0.0
	for i, v := range x {
		c[i] = rnd(v - m)
		e[i] = rnd(math.Exp(c[i]))
		s += e[i]
	}
	s = rnd(s)
	out, mag = make([]float64, len(x)), make([]float64, len(x))
	l := rnd(math.Log(s))
	for i := range x {
		if log {
			out[i] = rnd(c[i] - l)
			mag[i] = math.Abs(c[i]) + math.Abs(l)
		} else {
			out[i] = rnd(e[i] / s)
			mag[i] = math.Abs(out[i])
		}
	}
	return out, mag
}

// redLayerNormRow is LayerNorm's composite over one row:
// (x − mean)·(1/√(var + eps))·w + b, two-pass, every op stored in dt.
func redLayerNormRow(x, w, b []float64, eps float64, rnd func(float64) float64) (out, mag []float64) {
	m, _ := redMeanRef(x, rnd)
	c := make([]float64, len(x))
	sq := make([]float64, len(x))
	for i, v := range x {
		c[i] = rnd(v - m)
		sq[i] = rnd(c[i] * c[i])
	}
	v, _ := redMeanRef(sq, rnd)
	inv := rnd(1 / rnd(math.Sqrt(rnd(v+rnd(eps)))))
	out, mag = make([]float64, len(x)), make([]float64, len(x))
	for i := range x {
		out[i] = rnd(rnd(rnd(c[i]*inv)*w[i]) + b[i])
		mag[i] = (math.Abs(x[i])+math.Abs(m))*inv*math.Abs(w[i]) + math.Abs(b[i])
	}
	return out, mag
}

// redRmsNormRow is RmsNorm's composite over one row: x·(1/√(mean(x²) + eps))·w.
func redRmsNormRow(x, w []float64, eps float64, rnd func(float64) float64) (out, mag []float64) {
	sq := make([]float64, len(x))
	for i, v := range x {
		sq[i] = rnd(v * v)
	}
	ms, _ := redMeanRef(sq, rnd)
	inv := rnd(1 / rnd(math.Sqrt(rnd(ms+rnd(eps)))))
	out, mag = make([]float64, len(x)), make([]float64, len(x))
	for i := range x {
		out[i] = rnd(rnd(x[i]*inv) * w[i])
		mag[i] = math.Abs(x[i] * inv * w[i])
	}
	return out, mag
}

// redRopeRef is the rope family with Candle's index formulas
// (candle-kernels §9.5), one rotated pair per idx. x is contiguous
// (b, h, t, d) for rope_i and rope, (b, t, h, d) for rope_thd; cos and sin
// are (rows ≥ t, d/2) or, batched, (b, t, d/2).
func redRopeRef(kind string, x, c, s []float64, b, h, t, d int, batched bool, rnd func(float64) float64) (out, mag []float64) {
	out, mag = make([]float64, len(x)), make([]float64, len(x))
	td := t * d
	for idx := 0; idx < b*h*t*d/2; idx++ {
		var i1, i2, cs int
		bIdx := 2 * idx / (h * td)
		switch kind {
		case "rope_i":
			i1, i2, cs = 2*idx, 2*idx+1, idx%(td/2)
		case "rope":
			iBH, iTD := idx/(td/2), idx%(td/2)
			iT, iD := iTD/(d/2), iTD%(d/2)
			i1 = iBH*td + iT*d + iD
			i2, cs = i1+d/2, iT*(d/2)+iD
		case "rope_thd":
			iBTH, iD := idx/(d/2), idx%(d/2)
			iT := (iBTH / h) % t
			i1 = iBTH*d + iD
			i2, cs = i1+d/2, iT*(d/2)+iD
		}
		if batched {
			cs += bIdx * (td / 2)
		}
		x0, x1 := x[i1], x[i2]
		out[i1] = rnd(rnd(x0*c[cs]) - rnd(x1*s[cs]))
		out[i2] = rnd(rnd(x0*s[cs]) + rnd(x1*c[cs]))
		mag[i1] = math.Abs(x0*c[cs]) + math.Abs(x1*s[cs])
		mag[i2] = math.Abs(x0*s[cs]) + math.Abs(x1*c[cs])
	}
	return out, mag
}

// ---------------------------------------------------------------------------
// Tolerances.

// redTol bounds a float result: |got − want| ≤ rel·mag + abs + ulps·ulp(want)
// + magULPs·ulp(mag), ulp in the output dtype. want is the reference
// (rounded at every op for f16/bf16, exact for f32/f64) and mag the size of
// the terms whose rounding errors reach the element (|want| unless the
// reference says otherwise: Σ|x| for sums, (|x| + |mean|)·… where x − mean
// cancels). NaN must be NaN and ±Inf exact.
type redTol struct {
	name                    string
	rel, abs, ulps, magULPs float64
}

// redSumRel is the f32 sum bound relative to Σ|x|: 1e-6 covers the final
// rounding and a few ulps of slack, 1e-7·√n the random-walk growth of n
// float32 additions (2^-24 ≈ 6e-8 each).
func redSumRel(n int) float64 { return 1e-6 + 1e-7*math.Sqrt(float64(n)) }

// redTolSum: sum and mean (mag = Σ|x|, or Σ|x|/n for mean).
func redTolSum(dt dtype.DType, n int) redTol {
	switch dt {
	case dtype.F64:
		return redTol{name: "f64 sum: 1e-12·Σ|x|", rel: 1e-12}
	case dtype.F32:
		return redTol{name: "f32 sum: Σ|x|·(1e-6 + 1e-7·√n)", rel: redSumRel(n)}
	}
	// f16/bf16 sums accumulate in float32 (the f32 bound) and round once:
	// 2 ulps of the rounded reference (mean rounds twice: sum, then ·1/n).
	return redTol{name: "half sum: 2 ulps + f32 accumulation", rel: redSumRel(n), ulps: 2}
}

// redTolRow: softmax, log_softmax, var, layer_norm, rms_norm.
func redTolRow(dt dtype.DType) redTol {
	switch dt {
	case dtype.F64:
		return redTol{name: "f64 row op: 1e-12 relative", rel: 1e-12}
	case dtype.F32:
		// 1e-5 relative + 1e-6 absolute (the bound): a dozen f32
		// roundings and exp/log (a vectorised exp is a few f32 ulps), the
		// budget of the elementwise transcendental ops. The row's f32 sum
		// stays inside it even for rows of 1e5 (its random-walk error is
		// about 1e-7·√n relative, and the outputs of such rows are small
		// enough for the absolute term to dominate).
		return redTol{name: "f32 row op: 1e-5 rel + 1e-6 abs", rel: 1e-5, abs: 1e-6}
	}
	// f16/bf16: the reference rounds after every op as the graph does; an
	// executor may differ by one rounding at an intermediate (its f32 sum
	// lands on the other side of a rounding boundary, its f32 exp differs
	// by an f32 ulp), which moves the result by ≤ 2 ulps of the result, or
	// where an op cancels (x − mean, c − log s), of the terms' magnitude.
	return redTol{name: "half row op: 2 ulps of result and of the terms", ulps: 2, magULPs: 2}
}

// redTolRope: two products and a sum/difference per element.
func redTolRope(dt dtype.DType) redTol {
	switch dt {
	case dtype.F64:
		return redTol{name: "f64 rope: 1e-12·(|x0·c| + |x1·s|)", rel: 1e-12}
	case dtype.F32:
		// Three f32 roundings of terms of size mag: ≤ 3·2^-24·mag; 1e-6
		// leaves room for a fused multiply-add.
		return redTol{name: "f32 rope: 1e-6·(|x0·c| + |x1·s|)", rel: 1e-6}
	}
	// Products of two halves are exact in float32, so the f32 computation
	// rounds like the reference: 1 ulp of slack for double rounding.
	return redTol{name: "half rope: 1 ulp", ulps: 1, magULPs: 1}
}

// redULP is the spacing of dt at |v| (the subnormal spacing below the
// smallest normal).
func redULP(dt dtype.DType, v float64) float64 {
	mant, minExp := 52, -1022
	switch dt {
	case dtype.F32:
		mant, minExp = 23, -126
	case dtype.F16:
		mant, minExp = 10, -14
	case dtype.BF16:
		mant, minExp = 7, -126
	case dtype.F8E4M3:
		mant, minExp = 3, -6
	}
	v = math.Abs(v)
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return math.Ldexp(1, minExp-mant)
	}
	return math.Ldexp(1, max(math.Ilogb(v), minExp)-mant)
}

func (tl redTol) bound(dt dtype.DType, want, mag float64) float64 {
	return tl.rel*mag + tl.abs + tl.ulps*redULP(dt, want) + tl.magULPs*redULP(dt, mag)
}

// ---------------------------------------------------------------------------
// Cases.

// redWant is one expected output.
type redWant struct {
	name  string
	expr  string // the expression, for messages
	dt    dtype.DType
	shape []int
	f     []float64 // float outputs
	mag   []float64 // nil: |f|
	i     []int64   // integer outputs (exact)
	tol   redTol
	same  string // another output that must hold the same bits
}

// redCase is one graph under test.
type redCase struct {
	t      *testing.T
	s      *redSuite
	g      *graph.Graph
	rng    *rand.Rand
	desc   []string // inputs and named intermediates
	inputs map[string]*tensor.Tensor
	wants  []redWant
	// parallel > 1: every executor runs the program from that many
	// goroutines at once.
	parallel int
}

func (s *redSuite) newCase(t *testing.T) *redCase {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return &redCase{t: t, s: s, g: graph.New(), rng: rand.New(rand.NewPCG(s.seed, h.Sum64())), inputs: map[string]*tensor.Tensor{}}
}

// redGen draws one element: floats in [-3, 3), ints over their whole range.
type redGen func(r *rand.Rand, dt dtype.DType) float64

func redUniform(r *rand.Rand, dt dtype.DType) float64 {
	switch dt {
	case dtype.U8:
		return float64(r.IntN(256))
	case dtype.U32:
		return float64(r.Uint32())
	case dtype.I64:
		return 0 // drawn as int64 by randInts
	}
	return r.Float64()*6 - 3
}

// randVals draws n values of dt; ints come back in iv (exact), floats in f.
func (c *redCase) randVals(dt dtype.DType, n int, gen redGen) (f []float64, iv []int64) {
	if dt.IsInt() {
		iv = make([]int64, n)
		for k := range iv {
			if dt == dtype.I64 && gen == nil {
				iv[k] = int64(c.rng.Uint64())
			} else {
				g := gen
				if g == nil {
					g = redUniform
				}
				iv[k] = int64(g(c.rng, dt))
			}
		}
		return nil, iv
	}
	f = make([]float64, n)
	for k := range f {
		if gen == nil {
			f[k] = redUniform(c.rng, dt)
		} else {
			f[k] = gen(c.rng, dt)
		}
	}
	return f, nil
}

// input declares a graph input holding f (floats, rounded to dt) or iv
// (ints) and returns it with the reference's view of the stored values.
func (c *redCase) input(name string, dt dtype.DType, shape []int, f []float64, iv []int64) (*graph.Tensor, redArr) {
	c.t.Helper()
	var ht *tensor.Tensor
	var err error
	switch dt {
	case dtype.U8:
		d := make([]uint8, len(iv))
		for k, v := range iv {
			d[k] = uint8(v)
		}
		ht, err = tensor.New(d, shape...)
	case dtype.U32:
		d := make([]uint32, len(iv))
		for k, v := range iv {
			d[k] = uint32(v)
		}
		ht, err = tensor.New(d, shape...)
	case dtype.I64:
		ht, err = tensor.New(slices.Clone(iv), shape...)
	default:
		ht, err = tensor.FromFloat64s(dt, f, shape...)
	}
	if err != nil {
		c.t.Fatalf("input %s: %v", name, err)
	}
	a := redArr{dt: dt, shape: slices.Clone(shape), f: ht.Float64s()}
	if dt.IsInt() {
		a.i = slices.Clone(iv)
	}
	c.inputs[name] = ht
	c.desc = append(c.desc, fmt.Sprintf("%s := g.Input(%q, %v, %v)", name, name, dt, shape))
	return c.g.Input(name, dt, shape...), a
}

// randInput is input with random values.
func (c *redCase) randInput(name string, dt dtype.DType, shape []int, gen redGen) (*graph.Tensor, redArr) {
	c.t.Helper()
	f, iv := c.randVals(dt, tensor.Numel(shape), gen)
	return c.input(name, dt, shape, f, iv)
}

// note records a named intermediate for messages.
func (c *redCase) note(format string, a ...any) { c.desc = append(c.desc, fmt.Sprintf(format, a...)) }

func (c *redCase) output(y *graph.Tensor, w redWant) {
	c.g.Output(w.name, y)
	c.wants = append(c.wants, w)
}

// reduce adds the output of one reduction op of x (whose reference is xa)
// over dims.
func (c *redCase) reduce(x *graph.Tensor, xname string, xa redArr, op string, dims []int, keep bool) {
	var y *graph.Tensor
	var call string
	switch op {
	case "sum":
		if keep {
			y, call = x.SumKeepDim(dims...), fmt.Sprintf("SumKeepDim(%s)", redInts(dims))
		} else {
			y, call = x.Sum(dims...), fmt.Sprintf("Sum(%s)", redInts(dims))
		}
	case "max":
		y, call = x.Max(keep, dims...), fmt.Sprintf("Max(%v, %s)", keep, redInts(dims))
	case "min":
		y, call = x.Min(keep, dims...), fmt.Sprintf("Min(%v, %s)", keep, redInts(dims))
	case "argmax":
		y, call = x.Argmax(dims[0], keep), fmt.Sprintf("Argmax(%d, %v)", dims[0], keep)
	case "argmin":
		y, call = x.Argmin(dims[0], keep), fmt.Sprintf("Argmin(%d, %v)", dims[0], keep)
	case "mean":
		y, call = x.Mean(keep, dims...), fmt.Sprintf("Mean(%v, %s)", keep, redInts(dims))
	case "var":
		y, call = x.Var(keep, dims...), fmt.Sprintf("Var(%v, %s)", keep, redInts(dims))
	}
	keepShape, dropShape, rows := redRows(xa.shape, dims)
	w := redWant{name: fmt.Sprintf("%s.%s", xname, call), expr: fmt.Sprintf("%s.%s", xname, call), dt: xa.dt, shape: dropShape}
	if keep {
		w.shape = keepShape
	}
	n := 1
	if len(rows) > 0 {
		n = len(rows[0])
	}
	rnd := redRound(xa.dt)
	if op == "mean" || op == "var" {
		rnd = redCompositeRound(xa.dt)
	}
	isMax := op == "max" || op == "argmax"
	switch {
	case op == "argmax" || op == "argmin":
		w.dt = dtype.U32
		for _, r := range rows {
			if xa.i != nil {
				w.i = append(w.i, int64(redArgI(redGatherI(xa.i, r), isMax)))
			} else {
				w.i = append(w.i, int64(redArg(redGather(xa.f, r), isMax)))
			}
		}
	case xa.i != nil: // integer sum, max, min
		for _, r := range rows {
			row := redGatherI(xa.i, r)
			if op == "sum" {
				w.i = append(w.i, redSumI(xa.dt, row))
			} else {
				w.i = append(w.i, redExtremeI(row, isMax))
			}
		}
	default:
		w.tol = redTolSum(xa.dt, n)
		if op == "var" {
			w.tol = redTolRow(xa.dt)
		}
		for _, r := range rows {
			row := redGather(xa.f, r)
			var v, mag float64
			switch op {
			case "sum":
				s, a := redSum(row)
				v, mag = rnd(s), a
			case "max", "min":
				v = redExtreme(row, isMax)
				mag = math.Abs(v)
			case "mean":
				v, mag = redMeanRef(row, rnd)
			case "var":
				v, mag = redVarRef(row, rnd)
			}
			w.f = append(w.f, v)
			w.mag = append(w.mag, mag)
		}
	}
	c.output(y, w)
}

// rowOp adds softmax or log_softmax of x over dim.
func (c *redCase) rowOp(x *graph.Tensor, xname string, xa redArr, op string, dim int) {
	var y *graph.Tensor
	log := op == "log_softmax"
	if log {
		y = x.LogSoftmax(dim)
	} else {
		y = x.Softmax(dim)
	}
	call := map[bool]string{false: "Softmax", true: "LogSoftmax"}[log]
	expr := fmt.Sprintf("%s.%s(%d)", xname, call, dim)
	w := redWant{name: expr, expr: expr, dt: xa.dt, shape: xa.shape, f: make([]float64, len(xa.f)), mag: make([]float64, len(xa.f))}
	_, _, rows := redRows(xa.shape, []int{dim})
	for _, r := range rows {
		out, mag := redSoftmaxRow(redGather(xa.f, r), redCompositeRound(xa.dt), log)
		for k, j := range r {
			w.f[j], w.mag[j] = out[k], mag[k]
		}
	}
	w.tol = redTolRow(xa.dt)
	c.output(y, w)
}

func redInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// run compiles the graph, runs it on every poisoned executor and checks
// every output.
func (c *redCase) run() {
	t := c.t
	t.Helper()
	if err := c.g.Err(); err != nil {
		t.Fatalf("building the graph: %v\n%s", err, c.describe())
	}
	p, err := c.g.Compile(c.s.opts)
	if err != nil {
		t.Fatalf("compile (NoFusion=%v): %v\n%s", c.s.opts.NoFusion, err, c.describe())
	}
	orig := map[string][]byte{}
	for name, in := range c.inputs {
		orig[name] = slices.Clone(in.Bytes())
	}
	for k, e := range c.s.execs {
		one := func() {
			out, err := p.Run(context.Background(), e, c.inputs)
			if err != nil {
				t.Errorf("run (poison %#02x): %v\n%s", redPoisons[k], err, c.describe())
				return
			}
			for _, w := range c.wants {
				c.check(w, out, redPoisons[k])
			}
		}
		if c.parallel > 1 {
			var wg sync.WaitGroup
			for range c.parallel {
				wg.Go(one)
			}
			wg.Wait()
		} else {
			one()
		}
		for name, in := range c.inputs {
			if !bytes.Equal(orig[name], in.Bytes()) {
				t.Errorf("poison %#02x: the run wrote into input %q\n%s", redPoisons[k], name, c.describe())
			}
		}
	}
}

func (c *redCase) describe() string {
	return "graph (NoFusion=" + strconv.FormatBool(c.s.opts.NoFusion) + "):\n\t" + strings.Join(c.desc, "\n\t")
}

// redIntsOf reads an integer tensor exactly.
func redIntsOf(o *tensor.Tensor) []int64 {
	out := make([]int64, o.Numel())
	switch o.DType() {
	case dtype.U8:
		v, _ := tensor.Values[uint8](o)
		for i := range out {
			out[i] = int64(v[i])
		}
	case dtype.U32:
		v, _ := tensor.Values[uint32](o)
		for i := range out {
			out[i] = int64(v[i])
		}
	case dtype.I64:
		v, _ := tensor.Values[int64](o)
		copy(out, v)
	}
	return out
}

// redIndex formats flat index k of shape as a multi-index.
func redIndex(shape []int, k int) string {
	if len(shape) == 0 {
		return "[]"
	}
	st := redStrides(shape)
	idx := make([]int, len(shape))
	for d := range shape {
		idx[d] = k / st[d]
		k %= st[d]
	}
	return fmt.Sprint(idx)
}

const redMaxReports = 4

func (c *redCase) check(w redWant, out map[string]*tensor.Tensor, poison byte) {
	t := c.t
	t.Helper()
	o := out[w.name]
	where := fmt.Sprintf("poison %#02x: %s", poison, w.expr)
	switch {
	case o == nil:
		t.Errorf("%s: no output %q", where, w.name)
		return
	case o.DType() != w.dt || !slices.Equal(o.Shape(), w.shape):
		t.Errorf("%s: output is %v%v, want %v%v\n%s", where, o.DType(), o.Shape(), w.dt, w.shape, c.describe())
		return
	}
	bad := 0
	var lines []string
	report := func(k int, format string, a ...any) {
		bad++
		if bad <= redMaxReports {
			lines = append(lines, fmt.Sprintf("element %s (flat %d) %s", redIndex(w.shape, k), k, fmt.Sprintf(format, a...)))
		}
	}
	if w.i != nil {
		got := redIntsOf(o)
		for k, want := range w.i {
			if got[k] != want {
				report(k, "= %d, want %d (exact)", got[k], want)
			}
		}
	} else {
		got := o.Float64s()
		for k, want := range w.f {
			g := got[k]
			mag := math.Abs(want)
			if w.mag != nil {
				mag = max(w.mag[k], mag)
			}
			switch {
			case math.IsNaN(want) || math.IsNaN(g):
				if !(math.IsNaN(want) && math.IsNaN(g)) {
					report(k, "= %v, want %v", g, want)
				}
			case math.IsInf(want, 0) || math.IsInf(g, 0):
				if g != want {
					report(k, "= %v, want %v", g, want)
				}
			default:
				if b := w.tol.bound(w.dt, want, mag); math.Abs(g-want) > b {
					report(k, "= %.9g, want %.9g (|diff| %.3g > %.3g, tolerance %s, magnitude %.3g)", g, want, math.Abs(g-want), b, w.tol.name, mag)
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d wrong elements (of %d):\n\t%s\n%s", where, bad, o.Numel(), strings.Join(lines, "\n\t"), c.describe())
	}
	if w.same != "" {
		if o2 := out[w.same]; o2 == nil || !bytes.Equal(o.Bytes(), o2.Bytes()) {
			t.Errorf("%s: output %q differs from %q, which must hold the same bits\n%s", where, w.name, w.same, c.describe())
		}
	}
}

// ---------------------------------------------------------------------------
// The groups.

// redOpsFor lists the single-input reductions a dtype claims.
func redOpsFor(dt dtype.DType, oneDim bool) []string {
	ops := []string{"sum", "max", "min"}
	if oneDim {
		ops = append(ops, "argmax", "argmin")
	}
	if dt.IsFloat() {
		ops = append(ops, "mean", "var")
	}
	return ops
}

// dims: every op over each dim of rank-1..4 inputs (plus negative dims),
// keepdim on and off, for every dtype.
func (s *redSuite) dims(t *testing.T) {
	shapes := [][]int{{37}, {5, 33}, {3, 4, 17}, {2, 3, 4, 9}}
	for _, dt := range dtype.All {
		for _, sh := range shapes {
			t.Run(fmt.Sprintf("%v/rank%d", dt, len(sh)), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xa := c.randInput("x", dt, sh, nil)
				for d := -1; d < len(sh); d++ {
					for _, keep := range []bool{false, true} {
						for _, op := range redOpsFor(dt, true) {
							c.reduce(x, "x", xa, op, []int{d}, keep)
						}
					}
				}
				c.run()
			})
		}
	}
}

// multiDims: reductions over several dims at once (given in any order).
func (s *redSuite) multiDims(t *testing.T) {
	cases := []struct {
		shape []int
		dims  [][]int
	}{
		{[]int{3, 4, 5}, [][]int{{0, 2}, {1, 2}, {2, 0}, {-1, 0}, {0, 1, 2}}},
		{[]int{2, 3, 4, 5}, [][]int{{1, 3}, {0, 3}, {0, 1, 2, 3}, {-1, -2}, {2, 1, 0}}},
		{[]int{1, 5, 1, 3}, [][]int{{0, 2}, {0, 1, 2, 3}, {2}, {0}, {1, 2}}},
	}
	for _, dt := range dtype.All {
		for _, cs := range cases {
			t.Run(fmt.Sprintf("%v/rank%d", dt, len(cs.shape)), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xa := c.randInput("x", dt, cs.shape, nil)
				for _, dims := range cs.dims {
					for _, keep := range []bool{false, true} {
						for _, op := range redOpsFor(dt, false) {
							c.reduce(x, "x", xa, op, dims, keep)
						}
					}
				}
				c.run()
			})
		}
	}
}

// views: reductions of strided, transposed, narrowed and broadcast views.
func (s *redSuite) views(t *testing.T) {
	views := []struct {
		name  string
		shape []int
		desc  string
		g     func(x *graph.Tensor) *graph.Tensor
		ref   func(a redArr) redArr
	}{
		{"transpose", []int{4, 3, 6}, "x.Transpose(0, 2)",
			func(x *graph.Tensor) *graph.Tensor { return x.Transpose(0, 2) },
			func(a redArr) redArr { return a.transpose(0, 2) }},
		{"T", []int{6, 40}, "x.Narrow(1, 3, 33).T()",
			func(x *graph.Tensor) *graph.Tensor { return x.Narrow(1, 3, 33).T() },
			func(a redArr) redArr { return a.narrow(1, 3, 33).transpose(0, 1) }},
		{"permute", []int{2, 3, 4, 5}, "x.Permute(2, 0, 3, 1)",
			func(x *graph.Tensor) *graph.Tensor { return x.Permute(2, 0, 3, 1) },
			func(a redArr) redArr { return a.permute(2, 0, 3, 1) }},
		{"narrow", []int{5, 7, 9}, "x.Narrow(1, 2, 4).Narrow(2, 1, 6)",
			func(x *graph.Tensor) *graph.Tensor { return x.Narrow(1, 2, 4).Narrow(2, 1, 6) },
			func(a redArr) redArr { return a.narrow(1, 2, 4).narrow(2, 1, 6) }},
		{"narrow_permute", []int{4, 6, 8}, "x.Narrow(2, 2, 5).Permute(2, 0, 1)",
			func(x *graph.Tensor) *graph.Tensor { return x.Narrow(2, 2, 5).Permute(2, 0, 1) },
			func(a redArr) redArr { return a.narrow(2, 2, 5).permute(2, 0, 1) }},
		{"broadcast", []int{3, 1, 5}, "x.BroadcastTo(3, 4, 5)",
			func(x *graph.Tensor) *graph.Tensor { return x.BroadcastTo(3, 4, 5) },
			func(a redArr) redArr { return a.bcast(3, 4, 5) }},
	}
	for _, dt := range dtype.All {
		for _, v := range views {
			t.Run(fmt.Sprintf("%v/%s", dt, v.name), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xa := c.randInput("x", dt, v.shape, nil)
				y, ya := v.g(x), v.ref(xa)
				c.note("y := %s  // %v", v.desc, ya.shape)
				for d := range ya.shape {
					for _, keep := range []bool{false, true} {
						for _, op := range redOpsFor(dt, true) {
							c.reduce(y, "y", ya, op, []int{d}, keep)
						}
					}
				}
				if len(ya.shape) >= 3 {
					for _, op := range redOpsFor(dt, false) {
						c.reduce(y, "y", ya, op, []int{0, 2}, false)
					}
				}
				// An elementwise op of the view fused before the reduction.
				sq := y.Mul(y)
				c.note("sq := y.Mul(y)")
				sqa := redMap(ya, func(v float64) float64 { return v * v }, func(v int64) int64 { return v * v })
				for d := range ya.shape {
					c.reduce(sq, "sq", sqa, "sum", []int{d}, false)
					c.reduce(sq, "sq", sqa, "argmax", []int{d}, true)
				}
				if dt.IsFloat() {
					for d := range ya.shape {
						c.rowOp(y, "y", ya, "softmax", d)
					}
					if ya.shape[len(ya.shape)-1] > 1 {
						c.rowOp(y, "y", ya, "log_softmax", -1)
					}
				}
				c.run()
			})
		}
	}
}

// redRowLens: the list, plus 4097 (a last chunk of one element)
// and 8192 (exactly two chunks).
var redRowLens = []int{1, 31, 32, 33, 63, 64, 65, 1000, 4096, 4097, 8192, 100000}

// rowLens: rows of the lengths around the vector widths and the tile size
// (4096, beyond which the CPU takes its chunked two-stage path).
func (s *redSuite) rowLens(t *testing.T) {
	for _, L := range redRowLens {
		rows := 3
		if L >= 4096 {
			rows = 2
		}
		for _, dt := range dtype.All {
			t.Run(fmt.Sprintf("L%d/%v", L, dt), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xa := c.randInput("x", dt, []int{rows, L}, nil)
				ops := []string{"sum", "max", "min", "argmax", "argmin"}
				if dt.IsFloat() {
					ops = append(ops, "mean")
				}
				for _, op := range ops {
					c.reduce(x, "x", xa, op, []int{-1}, false)
				}
				if dt.IsFloat() {
					c.rowOp(x, "x", xa, "softmax", -1)
					c.rowOp(x, "x", xa, "log_softmax", -1)
					// A fused row: the square is an instruction of the
					// reduction's kernel (one kernel ending in a reduction:
					// the CPU's chunked path for long rows).
					sq := x.Sqr()
					c.note("sq := x.Sqr()")
					sqa := xa
					sqa.f = make([]float64, len(xa.f))
					rnd := redRound(dt)
					for k, v := range xa.f {
						sqa.f[k] = rnd(v * v)
					}
					c.reduce(sq, "sq", sqa, "sum", []int{-1}, false)
				}
				c.run()
			})
		}
	}
}

// layouts: long columns (reductions over dim 0, strided rows), many short
// rows (many tiles, all workers), and rows of one element.
func (s *redSuite) layouts(t *testing.T) {
	cases := []struct {
		name  string
		shape []int
		dim   int
	}{
		{"column100000", []int{100000, 3}, 0},
		{"column4097", []int{4097, 2}, 0},
		{"column33", []int{33, 5}, 0},
		{"rows3000x33", []int{3000, 33}, 1},
		{"rows40000x1", []int{40000, 1}, 1},
		{"rows5x4097", []int{5, 4097}, 1},
	}
	for _, cs := range cases {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.U32, dtype.I64} {
			t.Run(fmt.Sprintf("%s/%v", cs.name, dt), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xa := c.randInput("x", dt, cs.shape, nil)
				for _, op := range []string{"sum", "max", "min", "argmax", "argmin"} {
					c.reduce(x, "x", xa, op, []int{cs.dim}, op == "sum")
				}
				if dt.IsFloat() {
					c.rowOp(x, "x", xa, "softmax", cs.dim)
					c.reduce(x, "x", xa, "var", []int{cs.dim}, false)
				}
				c.run()
			})
		}
	}
}

// redMap applies f elementwise to the reference of an op's input, storing
// each result in the dtype (ints through wrap, floats through redRound).
func redMap(a redArr, f func(float64) float64, fi func(int64) int64) redArr {
	out := redArr{dt: a.dt, shape: a.shape}
	if a.i != nil {
		out.i = make([]int64, len(a.i))
		out.f = make([]float64, len(a.i))
		for k, v := range a.i {
			out.i[k] = redWrap(a.dt, fi(v))
			out.f[k] = float64(out.i[k])
		}
		return out
	}
	rnd := redRound(a.dt)
	out.f = make([]float64, len(a.f))
	for k, v := range a.f {
		out.f[k] = rnd(f(v))
	}
	return out
}

// redWrap narrows an integer result to its dtype (u8, u32 wrap; i64 as is).
func redWrap(dt dtype.DType, v int64) int64 {
	switch dt {
	case dtype.U8:
		return int64(uint8(v))
	case dtype.U32:
		return int64(uint32(v))
	}
	return v
}

// fusedLong: long rows whose reduction has a fused prologue (the CPU's
// chunked path then computes the prologue chunk by chunk): a broadcast
// operand, an elementwise op before argmax/argmin, a square whose u8/u32
// result wraps before max, and a row that is a stride-0 broadcast.
func (s *redSuite) fusedLong(t *testing.T) {
	const R, L = 2, 3*4096 + 1000
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F64, dtype.U8, dtype.U32, dtype.I64} {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			x, xa := c.randInput("x", dt, []int{R, L}, nil)
			w, wa := c.randInput("w", dt, []int{L}, nil)
			// x·w (w broadcast over rows), summed and maxed.
			xw := x.Mul(w)
			c.note("xw := x.Mul(w)")
			xwa := redArr{dt: dt, shape: xa.shape}
			{
				wb := wa.bcast2(R, L)
				if dt.IsInt() {
					xwa.i = make([]int64, len(xa.i))
					xwa.f = make([]float64, len(xa.i))
					for k := range xa.i {
						xwa.i[k] = redWrap(dt, xa.i[k]*wb.i[k])
						xwa.f[k] = float64(xwa.i[k])
					}
				} else {
					rnd := redRound(dt)
					xwa.f = make([]float64, len(xa.f))
					for k := range xa.f {
						xwa.f[k] = rnd(xa.f[k] * wb.f[k])
					}
				}
			}
			for _, op := range []string{"sum", "max", "argmax"} {
				c.reduce(xw, "xw", xwa, op, []int{-1}, false)
			}
			// x·x: wraps for u8 and u32 before the max.
			sq := x.Mul(x)
			c.note("sq := x.Mul(x)")
			sqa := redMap(xa, func(v float64) float64 { return v * v }, func(v int64) int64 { return v * v })
			for _, op := range []string{"max", "min", "argmax", "argmin", "sum"} {
				c.reduce(sq, "sq", sqa, op, []int{-1}, false)
			}
			if dt.IsFloat() {
				neg := x.Neg()
				c.note("neg := x.Neg()")
				nega := redMap(xa, func(v float64) float64 { return -v }, nil)
				c.reduce(neg, "neg", nega, "argmax", []int{-1}, false)
				c.reduce(neg, "neg", nega, "argmin", []int{-1}, false)
				abs := x.Abs()
				c.note("abs := x.Abs()")
				absa := redMap(xa, math.Abs, nil)
				c.reduce(abs, "abs", absa, "argmin", []int{-1}, true)
			}
			// A stride-0 row: one value repeated L times.
			// Its values are multiples of 1/8, so that the sums are exact
			// in f32: summing one value L times makes correlated rounding
			// errors, which the √n random-walk bound does not cover.
			col, cola := c.randInput("col", dt, []int{R, 1}, func(r *rand.Rand, dt dtype.DType) float64 {
				if dt.IsInt() {
					return float64(r.IntN(200))
				}
				return float64(r.IntN(49)-24) / 8
			})
			b, ba := col.BroadcastTo(R, L), cola.bcast(R, L)
			c.note("b := col.BroadcastTo(%d, %d)", R, L)
			for _, op := range []string{"sum", "max", "argmax"} {
				c.reduce(b, "b", ba, op, []int{-1}, false)
			}
			if dt.IsFloat() {
				c.rowOp(b, "b", ba, "softmax", -1)
			}
			c.run()
		})
	}
	// f16 sums past 65504 overflow to +Inf when stored (they accumulate in
	// float32, so the chunk partials themselves are finite); bf16 holds them.
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		t.Run(dt.String()+"/overflow", func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			const n = 40000
			f, _ := c.randVals(dt, 2*n, func(r *rand.Rand, dt dtype.DType) float64 { return 1.5 + r.Float64() })
			for k := n; k < 2*n; k++ {
				f[k] = -f[k]
			}
			c.note("row 0 in [1.5, 2.5), row 1 in (-2.5, -1.5]")
			x, xa := c.input("x", dt, []int{2, n}, f, nil)
			c.reduce(x, "x", xa, "sum", []int{-1}, false)
			c.run()
		})
	}
}

// concurrent: one program run from several goroutines at once on each
// executor (executors must be safe for concurrent runs): short rows, long
// chunked rows and fused row kernels share nothing between runs.
func (s *redSuite) concurrent(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.U32} {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			c.parallel = 4
			x, xa := c.randInput("x", dt, []int{3, 9000}, nil)
			for _, op := range []string{"sum", "max", "argmax", "argmin"} {
				c.reduce(x, "x", xa, op, []int{1}, false)
				c.reduce(x, "x", xa, op, []int{0}, true)
			}
			if dt.IsFloat() {
				c.rowOp(x, "x", xa, "softmax", -1)
				c.rowOp(x, "x", xa, "log_softmax", 0)
			}
			c.run()
		})
	}
}

// redConst is the reference of g.Full or g.Arange: values computed in f64
// and converted to dt like a cast.
func redConst(dt dtype.DType, shape []int, vals []float64) redArr {
	ht, err := tensor.FromFloat64s(dt, vals, shape...)
	if err != nil {
		panic(err)
	}
	a := redArr{dt: dt, shape: slices.Clone(shape), f: ht.Float64s()}
	if dt.IsInt() {
		a.i = redIntsOf(ht)
	}
	return a
}

// sources: reductions of constants (Full, Arange) that fusion computes
// inside the reduction's kernel, over rows and columns, short and long.
func (s *redSuite) sources(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.U8, dtype.I64} {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			ar := func(R, L int, start, step float64) (*graph.Tensor, redArr) {
				n := R * L
				v := make([]float64, n)
				for i := range v {
					v[i] = start + float64(i)*step
				}
				c.note("a%dx%d := g.Arange(%v, %g, %g, %g).Reshape(%d, %d)", R, L, dt, start, start+float64(n)*step, step, R, L)
				return c.g.Arange(dt, start, start+float64(n)*step, step).Reshape(R, L), redConst(dt, []int{R, L}, v)
			}
			a, aa := ar(6, 7, 0, 1)
			for _, d := range []int{0, 1} {
				for _, op := range []string{"sum", "max", "min", "argmax", "argmin"} {
					c.reduce(a, "a6x7", aa, op, []int{d}, d == 0)
				}
			}
			// Descending: argmax is the first element, argmin the last.
			dsc, dsca := ar(3, 40, 100, -0.5)
			if dt == dtype.U8 {
				dsc, dsca = ar(3, 40, 250, -2)
			}
			for _, op := range []string{"argmax", "argmin", "max", "sum"} {
				c.reduce(dsc, "desc", dsca, op, []int{1}, false)
			}
			if dt != dtype.U8 {
				long, la := ar(2, 9000, 0, 1)
				if dt == dtype.F16 {
					long, la = ar(2, 9000, -2, 0.0004)
				}
				for _, op := range []string{"sum", "max", "argmax", "argmin"} {
					c.reduce(long, "long", la, op, []int{1}, false)
				}
			}
			full := c.g.Full(dt, 1.5, 4, 5000)
			if dt.IsInt() {
				full = c.g.Full(dt, 3, 4, 5000)
			}
			v := 1.5
			if dt.IsInt() {
				v = 3
			}
			fa := redConst(dt, []int{4, 5000}, slices.Repeat([]float64{v}, 4*5000))
			c.note("full := g.Full(%v, %g, 4, 5000)", dt, v)
			for _, op := range []string{"sum", "max", "argmax", "argmin"} {
				c.reduce(full, "full", fa, op, []int{1}, false)
				c.reduce(full, "full", fa, op, []int{0}, false)
			}
			if dt.IsFloat() {
				c.rowOp(full, "full", fa, "softmax", -1)
				c.rowOp(a, "a6x7", aa, "softmax", 0)
			}
			c.run()
		})
	}
}

// shared: intermediates of the row composites are outputs too, and one
// reduction feeds several consumers.
func (s *redSuite) shared(t *testing.T) {
	for _, dt := range redFloats {
		for _, L := range []int{33, 5000} {
			t.Run(fmt.Sprintf("%v/L%d", dt, L), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xa := c.randInput("x", dt, []int{3, L}, nil)
				rnd := redRound(dt)
				m := x.Max(true, -1)
				c.reduce(x, "x", xa, "max", []int{-1}, true)
				e := x.Sub(m).Exp()
				c.note("e := x.Sub(x.Max(true, -1)).Exp()")
				ea := redArr{dt: dt, shape: xa.shape, f: make([]float64, len(xa.f))}
				_, _, rows := redRows(xa.shape, []int{-1})
				for _, r := range rows {
					mx := redExtreme(redGather(xa.f, r), true)
					for _, j := range r {
						ea.f[j] = rnd(math.Exp(rnd(xa.f[j] - mx)))
					}
				}
				c.output(e, redWant{name: "e", expr: "e", dt: dt, shape: xa.shape, f: ea.f, tol: redTolRow(dt)})
				c.reduce(e, "e", ea, "sum", []int{-1}, true)
				c.rowOp(x, "x", xa, "softmax", -1)
				c.rowOp(x, "x", xa, "log_softmax", -1)
				c.reduce(x, "x", xa, "mean", []int{-1}, true)
				c.reduce(x, "x", xa, "var", []int{-1}, true)
				c.reduce(x, "x", xa, "argmax", []int{-1}, false)
				// (x − m)² summed, with m stored (an output): for long rows a
				// chunked reduction reading m broadcast across each row.
				d2 := x.Sub(m).Sqr()
				c.note("d2 := x.Sub(x.Max(true, -1)).Sqr()")
				d2a := redArr{dt: dt, shape: xa.shape, f: make([]float64, len(xa.f))}
				for _, r := range rows {
					mx := redExtreme(redGather(xa.f, r), true)
					for _, j := range r {
						d := rnd(xa.f[j] - mx)
						d2a.f[j] = rnd(d * d)
					}
				}
				c.reduce(d2, "d2", d2a, "sum", []int{-1}, false)
				c.reduce(d2, "d2", d2a, "argmin", []int{-1}, false)
				c.run()
			})
		}
	}
}

// multiDimLong: several reduced dims forming rows longer than 4096
// elements that are not contiguous in memory.
func (s *redSuite) multiDimLong(t *testing.T) {
	cases := []struct {
		shape []int
		dims  []int
	}{
		{[]int{70, 3, 100}, []int{0, 2}},
		{[]int{5000, 2, 3}, []int{0}},
		{[]int{3, 50, 2, 90}, []int{1, 3}},
	}
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.U8, dtype.I64} {
		for _, cs := range cases {
			t.Run(fmt.Sprintf("%v/%v/%v", dt, cs.shape, cs.dims), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xa := c.randInput("x", dt, cs.shape, nil)
				for _, op := range redOpsFor(dt, len(cs.dims) == 1) {
					c.reduce(x, "x", xa, op, cs.dims, false)
				}
				c.run()
			})
		}
	}
}

// redSpecialRows are rows of 9 with NaN, ±Inf and ties: every element
// set to all (fill), or random with the positions in set overwritten.
var redSpecialRows = []struct {
	name string
	set  map[int]float64 // position → value
	all  float64
	fill bool
}{
	{name: "all NaN", all: math.NaN(), fill: true},
	{name: "one NaN", set: map[int]float64{4: math.NaN()}},
	{name: "+Inf", set: map[int]float64{3: math.Inf(1)}},
	{name: "-Inf", set: map[int]float64{2: math.Inf(-1)}},
	{name: "+Inf and -Inf", set: map[int]float64{1: math.Inf(1), 6: math.Inf(-1)}},
	{name: "all -Inf", all: math.Inf(-1), fill: true},
	{name: "all +Inf", all: math.Inf(1), fill: true},
	{name: "NaN after +Inf", set: map[int]float64{2: math.Inf(1), 7: math.NaN()}},
	{name: "two NaNs", set: map[int]float64{3: math.NaN(), 5: math.NaN()}},
	{name: "-Inf entries", set: map[int]float64{0: math.Inf(-1), 4: math.Inf(-1), 8: math.Inf(-1)}},
	{name: "NaN then -Inf", set: map[int]float64{1: math.NaN(), 3: math.Inf(-1)}},
	{name: "all equal", all: 1.5, fill: true},
	{name: "equal max twice", set: map[int]float64{2: 7, 6: 7, 4: -7, 8: -7}},
}

// special: NaN, ±Inf and ties in rows of 9, every float dtype.
func (s *redSuite) special(t *testing.T) {
	const L = 9
	for _, dt := range redFloats {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			f, _ := c.randVals(dt, len(redSpecialRows)*L, nil)
			for r, row := range redSpecialRows {
				for k := range L {
					if row.fill {
						f[r*L+k] = row.all
					} else if v, ok := row.set[k]; ok {
						f[r*L+k] = v
					}
				}
			}
			x, xa := c.input("x", dt, []int{len(redSpecialRows), L}, f, nil)
			for r, row := range redSpecialRows {
				c.note("row %d: %s", r, row.name)
			}
			for _, op := range []string{"sum", "max", "min", "argmax", "argmin", "mean"} {
				c.reduce(x, "x", xa, op, []int{-1}, false)
			}
			c.rowOp(x, "x", xa, "softmax", -1)
			c.rowOp(x, "x", xa, "log_softmax", -1)
			// The same rows as columns: a strided reduction.
			xt, xta := x.T(), xa.transpose(0, 1)
			c.note("xt := x.T()")
			for _, op := range []string{"max", "argmax", "argmin", "sum"} {
				c.reduce(xt, "xt", xta, op, []int{0}, false)
			}
			c.run()
		})
	}
}

// specialLong: NaN, ±Inf and ties placed in different 4096-element chunks
// of long rows (the CPU's chunked path combines partials across chunks).
func (s *redSuite) specialLong(t *testing.T) {
	const L = 3*4096 + 100
	type row struct {
		name string
		set  func(f []float64)
	}
	rows := []row{
		{"NaN at 9000 and 11000", func(f []float64) { f[9000], f[11000] = math.NaN(), math.NaN() }},
		{"+Inf at 5000 and 12000", func(f []float64) { f[5000], f[12000] = math.Inf(1), math.Inf(1) }},
		{"max 10 at 4096, 8191, 12000; min -10 at 200, 8000", func(f []float64) {
			f[4096], f[8191], f[12000] = 10, 10, 10
			f[200], f[8000] = -10, -10
		}},
		{"max 10 at 4095 and 4096 (chunk boundary)", func(f []float64) { f[4095], f[4096] = 10, 10 }},
		{"all NaN", func(f []float64) {
			for i := range f {
				f[i] = math.NaN()
			}
		}},
		{"all equal", func(f []float64) {
			for i := range f {
				f[i] = 0.5
			}
		}},
		{"max at the last position", func(f []float64) { f[len(f)-1] = 10 }},
		{"all -Inf but 7000", func(f []float64) {
			for i := range f {
				f[i] = math.Inf(-1)
			}
			f[7000] = 1
		}},
		{"-Inf and +Inf in different chunks", func(f []float64) { f[100], f[10000] = math.Inf(-1), math.Inf(1) }},
	}
	for _, dt := range redFloats {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			f, _ := c.randVals(dt, len(rows)*L, nil)
			for r, rw := range rows {
				rw.set(f[r*L : (r+1)*L])
				c.note("row %d: %s", r, rw.name)
			}
			x, xa := c.input("x", dt, []int{len(rows), L}, f, nil)
			for _, op := range []string{"sum", "max", "min", "argmax", "argmin"} {
				c.reduce(x, "x", xa, op, []int{-1}, false)
			}
			c.rowOp(x, "x", xa, "softmax", -1)
			c.run()
		})
	}
}

// ties: values from a small set, so that many elements equal the extreme;
// argmax and argmin return the first. The long rows hold their extreme only
// beyond the first 4096 elements, several times.
func (s *redSuite) ties(t *testing.T) {
	small := func(r *rand.Rand, dt dtype.DType) float64 {
		if dt.IsInt() {
			return float64(r.IntN(4))
		}
		return float64(r.IntN(4) - 1)
	}
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			x, xa := c.randInput("x", dt, []int{7, 9}, small)
			for _, d := range []int{0, 1} {
				for _, op := range []string{"argmax", "argmin", "max", "min"} {
					c.reduce(x, "x", xa, op, []int{d}, false)
				}
			}
			// Long rows of 1s and 2s; the extremes (3 and 0) appear only
			// beyond the first 4096-element chunk, several times, or
			// straddle the chunk boundary.
			const L = 3*4096 + 7
			f, iv := c.randVals(dt, 2*L, func(r *rand.Rand, dt dtype.DType) float64 { return float64(1 + r.IntN(2)) })
			set := func(i int, v float64) {
				if iv != nil {
					iv[i] = int64(v)
				} else {
					f[i] = v
				}
			}
			for _, p := range []int{5000, 6000, 9000, 12000} {
				set(p, 3)
				set(L+p+1, 0)
			}
			set(L+4095, 3)
			set(L+4096, 3)
			c.note("long row 0: 1 and 2, with 3 at 5000, 6000, 9000, 12000")
			c.note("long row 1: 1 and 2, with 0 at 5001, 6001, 9001, 12001 and 3 at 4095 and 4096")
			y, ya := c.input("long", dt, []int{2, L}, f, iv)
			for _, op := range []string{"argmax", "argmin", "max", "min"} {
				c.reduce(y, "long", ya, op, []int{1}, false)
			}
			c.run()
		})
	}
}

// empty: sums over an empty dim are 0; max, min, argmax and argmin of an
// empty dim are build errors; empty outputs are fine.
func (s *redSuite) empty(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.U8, dtype.I64} {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			x, xa := c.randInput("x", dt, []int{3, 0}, nil)
			e, ea := c.randInput("e", dt, []int{0, 4}, nil)
			c.reduce(x, "x", xa, "sum", []int{1}, false)
			c.reduce(x, "x", xa, "sum", []int{1}, true)
			c.reduce(x, "x", xa, "sum", []int{0, 1}, false)
			c.reduce(e, "e", ea, "sum", []int{0}, false)
			c.reduce(e, "e", ea, "sum", []int{1}, false) // shape [0]
			c.reduce(e, "e", ea, "max", []int{1}, true)  // shape [0, 1]
			c.run()
		})
		t.Run(dt.String()+"/errors", func(t *testing.T) {
			t.Parallel()
			for _, op := range []string{"max", "min", "argmax", "argmin"} {
				g := graph.New()
				x := g.Input("x", dt, 3, 0)
				var y *graph.Tensor
				switch op {
				case "max":
					y = x.Max(false, 1)
				case "min":
					y = x.Min(true, 1)
				case "argmax":
					y = x.Argmax(1, false)
				case "argmin":
					y = x.Argmin(-1, true)
				}
				g.Output("y", y)
				if y.Err() == nil || !strings.Contains(y.Err().Error(), "empty") {
					t.Errorf("%v[3 0].%s over the empty dim: error %v, want one saying the dim is empty", dt, op, y.Err())
				}
				if _, err := g.Compile(s.opts); err == nil {
					t.Errorf("%v[3 0].%s over the empty dim compiled", dt, op)
				}
			}
			g := graph.New()
			x := g.Input("x", dt, 3, 4)
			for _, e := range []struct {
				expr, want string
				y          *graph.Tensor
			}{
				{"x.Sum()", "no dims", x.Sum()},
				{"x.Sum(1, 1)", "twice", x.Sum(1, 1)},
				{"x.Sum(1, -1)", "twice", x.Sum(1, -1)},
				{"x.Max(false, 2)", "out of range", x.Max(false, 2)},
				{"x.Argmax(-3, false)", "out of range", x.Argmax(-3, false)},
			} {
				if e.y.Err() == nil || !strings.Contains(e.y.Err().Error(), e.want) {
					t.Errorf("%v[3 4].%s: error %v, want one containing %q", dt, e.expr, e.y.Err(), e.want)
				}
			}
			if !dt.IsFloat() {
				for _, e := range []struct {
					expr string
					y    *graph.Tensor
				}{{"Mean", x.Mean(false, 1)}, {"Var", x.Var(false, 1)}, {"Softmax", x.Softmax(1)}, {"LogSoftmax", x.LogSoftmax(1)}} {
					if e.y.Err() == nil || !strings.Contains(e.y.Err().Error(), "float") {
						t.Errorf("%v[3 4].%s: error %v, want one asking for a float dtype", dt, e.expr, e.y.Err())
					}
				}
			}
		})
	}
}

// softmax: softmax and log_softmax over every dim (not only the last),
// negative dims, and of a transposed input.
func (s *redSuite) softmax(t *testing.T) {
	shapes := [][]int{{33}, {3, 5, 7}, {2, 3, 4, 5}}
	for _, dt := range redFloats {
		for _, sh := range shapes {
			t.Run(fmt.Sprintf("%v/rank%d", dt, len(sh)), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xa := c.randInput("x", dt, sh, nil)
				for d := -1; d < len(sh); d++ {
					c.rowOp(x, "x", xa, "softmax", d)
					c.rowOp(x, "x", xa, "log_softmax", d)
				}
				if len(sh) == 3 {
					xt, xta := x.Transpose(0, 2), xa.transpose(0, 2)
					c.note("xt := x.Transpose(0, 2)")
					for d := range 3 {
						c.rowOp(xt, "xt", xta, "softmax", d)
						c.rowOp(xt, "xt", xta, "log_softmax", d)
					}
					// The smoke test's shape: a scaled softmax.
					xs := x.Affine(0.125, 0)
					xsa := xa
					xsa.f = make([]float64, len(xa.f))
					rnd := redRound(dt)
					for k, v := range xa.f {
						xsa.f[k] = rnd(v * 0.125)
					}
					c.note("xs := x.Affine(0.125, 0)")
					c.rowOp(xs, "xs", xsa, "softmax", -1)
				}
				c.run()
			})
		}
	}
}

// norms: layer_norm and rms_norm with w (and b) over rows of several
// lengths, a transposed input, and rows far from zero mean.
func (s *redSuite) norms(t *testing.T) {
	cases := []struct {
		name   string
		shape  []int // of y, the normalised tensor
		trans  bool  // y = x.T() of an input of the transposed shape
		offset float64
	}{
		{"4x33", []int{4, 33}, false, 0},
		{"2x3x64", []int{2, 3, 64}, false, 0},
		{"3x1", []int{3, 1}, false, 0},
		{"5x33_transposed", []int{5, 33}, true, 0},
		{"2x5000", []int{2, 5000}, false, 0},
		{"4x100_offset", []int{4, 100}, false, 10},
		{"rank1_33", []int{33}, false, 0},
	}
	for _, dt := range redFloats {
		for _, cs := range cases {
			t.Run(fmt.Sprintf("%v/%s", dt, cs.name), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				L := cs.shape[len(cs.shape)-1]
				shape := cs.shape
				if cs.trans {
					shape = []int{cs.shape[1], cs.shape[0]}
				}
				off := cs.offset
				x, xa := c.randInput("x", dt, shape, func(r *rand.Rand, dt dtype.DType) float64 { return off + r.Float64()*6 - 3 })
				w, wa := c.randInput("w", dt, []int{L}, func(r *rand.Rand, dt dtype.DType) float64 { return 0.5 + r.Float64()*1.5 })
				b, ba := c.randInput("b", dt, []int{L}, nil)
				y, ya := x, xa
				if cs.trans {
					y, ya = x.T(), xa.transpose(0, 1)
					c.note("y := x.T()")
				}
				const eps = 1e-5
				rnd := redCompositeRound(dt)
				_, _, rows := redRows(ya.shape, []int{-1})
				ln := redWant{name: "layer_norm", expr: "y.LayerNorm(w, b, 1e-5)", dt: dt, shape: ya.shape, f: make([]float64, len(ya.f)), mag: make([]float64, len(ya.f)), tol: redTolRow(dt)}
				rms := redWant{name: "rms_norm", expr: "y.RmsNorm(w, 1e-5)", dt: dt, shape: ya.shape, f: make([]float64, len(ya.f)), mag: make([]float64, len(ya.f)), tol: redTolRow(dt)}
				for _, r := range rows {
					row := redGather(ya.f, r)
					lo, lm := redLayerNormRow(row, wa.f, ba.f, eps, rnd)
					ro, rm := redRmsNormRow(row, wa.f, eps, rnd)
					for k, j := range r {
						ln.f[j], ln.mag[j] = lo[k], lm[k]
						rms.f[j], rms.mag[j] = ro[k], rm[k]
					}
				}
				c.output(y.LayerNorm(w, b, eps), ln)
				c.output(y.RmsNorm(w, eps), rms)
				c.run()
			})
		}
	}
}

// halfOverflow: f16 rows whose intermediate sums (Σx, Σx², Σexp(x − max))
// exceed the f16 range (65504) while the result itself is representable:
// rms_norm over a hidden size of 4096 with |x| ≈ 4.5, layer_norm, mean and
// var of rows with mean 20, softmax and log_softmax over 70000 nearly
// equal logits. The semantics (ir/ops.go: f16 sums accumulate in float32;
// graph/reduce.go: the norms are x/√(mean(x²) + eps)·w and
// (x − mean)/√(var + eps)·w + b) and Candle's kernels (candle-kernels §9.3,
// §9.4: softmax, layernorm and rmsnorm accumulate in float; the slow
// reference composites compute f16 in f32) give finite results; the
// reference here is exact float64 math rounded once to f16.
func (s *redSuite) halfOverflow(t *testing.T) {
	const dt = dtype.F16
	exact := func(v float64) float64 { return v }
	rnd := redRound(dt)
	tol := redTol{name: "f16: 2 ulps of the exact result and of the terms", ulps: 2, magULPs: 2}
	finish := func(w *redWant) {
		for k := range w.f {
			w.f[k] = rnd(w.f[k])
		}
	}
	t.Run("norms_4096", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		const R, L = 2, 4096
		x, xa := c.randInput("x", dt, []int{R, L}, func(r *rand.Rand, _ dtype.DType) float64 {
			return float64(1-2*r.IntN(2)) * (4 + r.Float64())
		})
		xo, xoa := c.randInput("xo", dt, []int{R, L}, func(r *rand.Rand, _ dtype.DType) float64 { return 20 + r.Float64()*6 - 3 })
		w, wa := c.randInput("w", dt, []int{L}, func(r *rand.Rand, _ dtype.DType) float64 { return 0.5 + r.Float64() })
		b, ba := c.randInput("b", dt, []int{L}, nil)
		c.note("x: ±[4, 5) (Σx² ≈ 83000); xo: 20 ± 3 (Σxo ≈ 82000)")
		rms := redWant{name: "x.RmsNorm(w, 1e-6)", expr: "x.RmsNorm(w, 1e-6)", dt: dt, shape: []int{R, L}, f: make([]float64, R*L), mag: make([]float64, R*L), tol: tol}
		ln := redWant{name: "xo.LayerNorm(w, b, 1e-5)", expr: "xo.LayerNorm(w, b, 1e-5)", dt: dt, shape: []int{R, L}, f: make([]float64, R*L), mag: make([]float64, R*L), tol: tol}
		mean := redWant{name: "xo.Mean(false, -1)", expr: "xo.Mean(false, -1)", dt: dt, shape: []int{R}, tol: tol}
		vr := redWant{name: "xo.Var(false, -1)", expr: "xo.Var(false, -1)", dt: dt, shape: []int{R}, tol: tol}
		_, _, rows := redRows([]int{R, L}, []int{-1})
		for _, r := range rows {
			o, m := redRmsNormRow(redGather(xa.f, r), wa.f, 1e-6, exact)
			lo, lm := redLayerNormRow(redGather(xoa.f, r), wa.f, ba.f, 1e-5, exact)
			for k, j := range r {
				rms.f[j], rms.mag[j] = o[k], m[k]
				ln.f[j], ln.mag[j] = lo[k], lm[k]
			}
			mv, _ := redMeanRef(redGather(xoa.f, r), exact)
			vv, vm := redVarRef(redGather(xoa.f, r), exact)
			mean.f, mean.mag = append(mean.f, mv), append(mean.mag, mv)
			vr.f, vr.mag = append(vr.f, vv), append(vr.mag, vm)
		}
		for _, w := range []*redWant{&rms, &ln, &mean, &vr} {
			finish(w)
		}
		c.output(x.RmsNorm(w, 1e-6), rms)
		c.output(xo.LayerNorm(w, b, 1e-5), ln)
		c.output(xo.Mean(false, -1), mean)
		c.output(xo.Var(false, -1), vr)
		c.run()
	})
	t.Run("softmax_70000", func(t *testing.T) {
		t.Parallel()
		c := s.newCase(t)
		const R, L = 2, 70000
		x, xa := c.randInput("x", dt, []int{R, L}, func(r *rand.Rand, _ dtype.DType) float64 { return r.Float64()*0.02 - 0.01 })
		c.note("x: 70000 logits in [-0.01, 0.01) per row (Σexp(x − max) ≈ 70000)")
		for _, log := range []bool{false, true} {
			name := map[bool]string{false: "x.Softmax(-1)", true: "x.LogSoftmax(-1)"}[log]
			w := redWant{name: name, expr: name, dt: dt, shape: []int{R, L}, f: make([]float64, R*L), mag: make([]float64, R*L), tol: tol}
			_, _, rows := redRows([]int{R, L}, []int{-1})
			for _, r := range rows {
				o, m := redSoftmaxRow(redGather(xa.f, r), exact, log)
				for k, j := range r {
					w.f[j], w.mag[j] = o[k], m[k]
				}
			}
			finish(&w)
			if log {
				c.output(x.LogSoftmax(-1), w)
			} else {
				c.output(x.Softmax(-1), w)
			}
		}
		c.run()
	})
}

// halfAccuracy: f16/bf16 mean, var, softmax, log_softmax, layer_norm and
// rms_norm of ordinary rows against the exact result rounded once to the
// dtype (the "within 1–2 ulps of the rounded reference"; Candle's
// fused kernels accumulate in float and round once on store).
func (s *redSuite) halfAccuracy(t *testing.T) {
	exact := func(v float64) float64 { return v }
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, off := range []float64{0, 5} { // 5: Σx² stays below 65504
			t.Run(fmt.Sprintf("%v/offset%g", dt, off), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				const R, L = 4, 1000
				rnd := redRound(dt)
				// 2 ulps of the exactly rounded result, plus 1e-6 of the
				// terms for an implementation computing in float32.
				tol := redTol{name: "2 ulps of the exact result rounded once (+1e-6·terms)", ulps: 2, rel: 1e-6}
				x, xa := c.randInput("x", dt, []int{R, L}, func(r *rand.Rand, _ dtype.DType) float64 { return off + r.Float64()*6 - 3 })
				w, wa := c.randInput("w", dt, []int{L}, func(r *rand.Rand, _ dtype.DType) float64 { return 0.5 + r.Float64() })
				b, ba := c.randInput("b", dt, []int{L}, nil)
				mk := func(name string, shape []int) *redWant {
					return &redWant{name: name, expr: name, dt: dt, shape: shape, tol: tol}
				}
				mean, vr := mk("x.Mean(false, -1)", []int{R}), mk("x.Var(false, -1)", []int{R})
				sm, lsm := mk("x.Softmax(-1)", []int{R, L}), mk("x.LogSoftmax(-1)", []int{R, L})
				ln, rms := mk("x.LayerNorm(w, b, 1e-5)", []int{R, L}), mk("x.RmsNorm(w, 1e-6)", []int{R, L})
				_, _, rows := redRows([]int{R, L}, []int{-1})
				for _, r := range rows {
					row := redGather(xa.f, r)
					m, ma := redMeanRef(row, exact)
					v, vm := redVarRef(row, exact)
					mean.f, mean.mag = append(mean.f, m), append(mean.mag, ma)
					vr.f, vr.mag = append(vr.f, v), append(vr.mag, vm)
					add := func(w *redWant) func(out, mag []float64) {
						return func(out, mag []float64) { w.f, w.mag = append(w.f, out...), append(w.mag, mag...) }
					}
					add(sm)(redSoftmaxRow(row, exact, false))
					add(lsm)(redSoftmaxRow(row, exact, true))
					add(ln)(redLayerNormRow(row, wa.f, ba.f, 1e-5, exact))
					add(rms)(redRmsNormRow(row, wa.f, 1e-6, exact))
				}
				for _, w := range []*redWant{mean, vr, sm, lsm, ln, rms} {
					for k := range w.f {
						w.f[k] = rnd(w.f[k])
					}
				}
				c.output(x.Mean(false, -1), *mean)
				c.output(x.Var(false, -1), *vr)
				c.output(x.Softmax(-1), *sm)
				c.output(x.LogSoftmax(-1), *lsm)
				c.output(x.LayerNorm(w, b, 1e-5), *ln)
				c.output(x.RmsNorm(w, 1e-6), *rms)
				c.run()
			})
		}
	}
}

// redW5 is the composite RmsNorm written from primitives.
func redW5(x, w *graph.Tensor, eps float64) *graph.Tensor {
	return x.Mul(x.Sqr().Mean(true, -1).Add(graph.Scalar(eps)).Sqrt().Recip()).Mul(w)
}

// w5: the composite written from primitives equals RmsNorm, bit for bit for
// f32/f64, and both match the reference. (For f16/bf16 RmsNorm computes in
// float32 while the primitives round every op to the half dtype, so only
// the tolerance applies.)
func (s *redSuite) w5(t *testing.T) {
	for _, dt := range redFloats {
		for _, L := range []int{40, 4097} {
			t.Run(fmt.Sprintf("%v/L%d", dt, L), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xa := c.randInput("x", dt, []int{3, L}, nil)
				w, wa := c.randInput("w", dt, []int{L}, nil)
				const eps = 1e-6
				same := "rms_norm"
				if dt == dtype.F16 || dt == dtype.BF16 {
					same = ""
				}
				want := redWant{name: "w5", expr: "x.Mul(x.Sqr().Mean(true, -1).Add(graph.Scalar(1e-6)).Sqrt().Recip()).Mul(w)", dt: dt, shape: xa.shape, f: make([]float64, len(xa.f)), mag: make([]float64, len(xa.f)), tol: redTolRow(dt), same: same}
				rms := want
				_, _, rows := redRows(xa.shape, []int{-1})
				for _, r := range rows {
					o, m := redRmsNormRow(redGather(xa.f, r), wa.f, eps, redRound(dt))
					ro, rm := redRmsNormRow(redGather(xa.f, r), wa.f, eps, redCompositeRound(dt))
					for k, j := range r {
						want.f[j], want.mag[j] = o[k], m[k]
						rms.f[j], rms.mag[j] = ro[k], rm[k]
					}
				}
				rms.name, rms.expr, rms.same = "rms_norm", "x.RmsNorm(w, 1e-6)", ""
				c.output(redW5(x, w, eps), want)
				c.output(x.RmsNorm(w, eps), rms)
				c.run()
			})
		}
	}
}

// rope: rope_i, rope and rope_thd with 2-D tables of more rows than t and
// per-batch 3-D tables, and of a transposed x.
func (s *redSuite) rope(t *testing.T) {
	type dims struct{ b, h, t, d int }
	for _, dt := range redFloats {
		for _, kind := range []string{"rope_i", "rope", "rope_thd"} {
			for _, dm := range []dims{{2, 3, 5, 8}, {1, 2, 7, 64}, {2, 1, 3, 2}} {
				for _, batched := range []bool{false, true} {
					for _, trans := range []bool{false, true} {
						name := fmt.Sprintf("%v/%s/b%dh%dt%dd%d/batched=%v/transposed=%v", dt, kind, dm.b, dm.h, dm.t, dm.d, batched, trans)
						t.Run(name, func(t *testing.T) {
							t.Parallel()
							s.ropeCase(t, dt, kind, dm.b, dm.h, dm.t, dm.d, batched, trans)
						})
					}
				}
			}
		}
	}
}

func (s *redSuite) ropeCase(t *testing.T, dt dtype.DType, kind string, B, H, T, D int, batched, trans bool) {
	c := s.newCase(t)
	shape := []int{B, H, T, D}
	if kind == "rope_thd" {
		shape = []int{B, T, H, D}
	}
	// trans: x is the (1, 2)-transpose of an input of the other layout.
	inShape := slices.Clone(shape)
	if trans {
		inShape[1], inShape[2] = inShape[2], inShape[1]
	}
	x, xa := c.randInput("x", dt, inShape, nil)
	if trans {
		x, xa = x.Transpose(1, 2), xa.transpose(1, 2)
		c.note("x = x.Transpose(1, 2)  // %v", xa.shape)
	}
	tshape := []int{T + 3, D / 2} // more rows than t: the first t are used
	if batched {
		tshape = []int{B, T, D / 2}
	}
	n := tensor.Numel(tshape)
	theta := make([]float64, n)
	cv, sv := make([]float64, n), make([]float64, n)
	for i := range theta {
		theta[i] = c.rng.Float64() * 2 * math.Pi
		cv[i], sv[i] = math.Cos(theta[i]), math.Sin(theta[i])
	}
	cosT, ca := c.input("cos", dt, tshape, cv, nil)
	sinT, sa := c.input("sin", dt, tshape, sv, nil)
	var y *graph.Tensor
	switch kind {
	case "rope_i":
		y = x.RopeI(cosT, sinT)
	case "rope":
		y = x.Rope(cosT, sinT)
	default:
		y = x.RopeThd(cosT, sinT)
	}
	out, mag := redRopeRef(kind, xa.f, ca.f, sa.f, B, H, T, D, batched, redRound(dt))
	call := map[string]string{"rope_i": "RopeI", "rope": "Rope", "rope_thd": "RopeThd"}[kind]
	c.output(y, redWant{name: kind, expr: "x." + call + "(cos, sin)", dt: dt, shape: shape, f: out, mag: mag, tol: redTolRope(dt)})
	c.run()
}

// ---------------------------------------------------------------------------
// Structure.

// redStructure: with fusion the row ops compile to one row kernel; without,
// to one step per op.
func redStructure(t *testing.T) {
	const R, L = 8, 64
	cases := []struct {
		name  string
		build func(x, w, b *graph.Tensor) *graph.Tensor
	}{
		{"x.Softmax(-1)", func(x, w, b *graph.Tensor) *graph.Tensor { return x.Softmax(-1) }},
		{"x.RmsNorm(w, 1e-6)", func(x, w, b *graph.Tensor) *graph.Tensor { return x.RmsNorm(w, 1e-6) }},
		{"x.LayerNorm(w, b, 1e-5)", func(x, w, b *graph.Tensor) *graph.Tensor { return x.LayerNorm(w, b, 1e-5) }},
		{"x.Sqr().Sum(-1)", func(x, w, b *graph.Tensor) *graph.Tensor { return x.Sqr().Sum(-1) }},
		{"W5 composite", func(x, w, b *graph.Tensor) *graph.Tensor { return redW5(x, w, 1e-6) }},
		{"x.Affine(0.125, 0).Softmax(-1)", func(x, w, b *graph.Tensor) *graph.Tensor { return x.Affine(0.125, 0).Softmax(-1) }},
	}
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16} {
		for _, cs := range cases {
			t.Run(fmt.Sprintf("%v/%s", dt, cs.name), func(t *testing.T) {
				t.Parallel()
				for _, fused := range []bool{true, false} {
					g := graph.New()
					x := g.Input("x", dt, R, L)
					w := g.Input("w", dt, L)
					b := g.Input("b", dt, L)
					g.Output("y", cs.build(x, w, b))
					p, err := g.Compile(graph.Options{NoFusion: !fused, Check: true})
					if err != nil {
						t.Fatalf("fused=%v: compile: %v", fused, err)
					}
					var plan strings.Builder
					p.Dump(&plan, graph.DumpPlan)
					steps := p.Plan().Steps
					if fused {
						if len(steps) != 1 {
							t.Errorf("fused: %d steps, want 1\n%s", len(steps), plan.String())
						}
						for i, st := range steps {
							if st.Kernel.RowAxes <= 0 {
								t.Errorf("fused: step %d (%s) has RowAxes %d, want > 0\n%s", i, st.Kernel.Name, st.Kernel.RowAxes, plan.String())
							}
						}
						continue
					}
					ops := 0
					for _, n := range g.IR().Nodes {
						if n.Op != ir.OpInput && n.Op != ir.OpView {
							ops++
						}
					}
					t.Logf("%v/%s: %d ops, %d unfused steps", dt, cs.name, ops, len(steps))
					if len(steps) != ops {
						t.Errorf("unfused: %d steps for %d ops\n%s", len(steps), ops, plan.String())
					}
					for i, st := range steps {
						if len(st.Kernel.Instrs) != 1 {
							t.Errorf("unfused: step %d (%s) computes %d ops, want 1\n%s", i, st.Kernel.Name, len(st.Kernel.Instrs), plan.String())
						}
					}
				}
			})
		}
	}
}

// redCompositeRound is the rounding of a composite's intermediate values:
// graph computes the composites (mean, var, softmax, log_softmax,
// layer_norm, rms_norm) of f16/bf16/f8e4m3 tensors in float32 and rounds
// only the result to the narrow dtype, so their intermediates round to
// float32.
func redCompositeRound(dt dtype.DType) func(float64) float64 {
	if dt.IsReduced() {
		return redRound(dtype.F32)
	}
	return redRound(dt)
}

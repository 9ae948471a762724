package conformance

// TensorAPI: the shape ops, creation helpers, math composites and losses
// that match Candle's tensor API beyond the primitives (issue 15): flip,
// pads, roll, repeat, stack, chunk/split, broadcast helpers, *_like,
// const_set, tril/triu/eye, log_sum_exp, norms, pow, round_to, topk, var
// (unbiased) and var_population, nll and cross_entropy, integer dot.
//
// Each op is checked two ways: against a float64 (or exact integer)
// reference written here from the op's documented semantics (every
// package-level name in this file starts with api), on every dtype it
// claims, with contiguous, offset, strided and transposed operands and
// empty shapes; and against the literal values of Candle's own tests
// (candle-core/tests/tensor_tests.rs, candle-nn/tests/loss.rs and the doc
// examples in candle-core/src/tensor.rs), transcribed as data.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TensorAPI runs the group with the given compile options (call it with
// fusion on and off).
func TensorAPI(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	s := newSuite(t, newExec, opts)
	t.Run("Candle", s.apiCandle)
	t.Run("Flip", s.apiFlip)
	t.Run("Pad", s.apiPad)
	t.Run("Roll", s.apiRoll)
	t.Run("Repeat", s.apiRepeat)
	t.Run("Stack", s.apiStack)
	t.Run("ChunkSplit", s.apiChunkSplit)
	t.Run("BroadcastLike", s.apiBroadcastLike)
	t.Run("ConstSet", s.apiConstSet)
	t.Run("TrilTriuEye", s.apiTri)
	t.Run("LogSumExp", s.apiLogSumExp)
	t.Run("Norm", s.apiNorm)
	t.Run("Pow", s.apiPow)
	t.Run("RoundTo", s.apiRoundTo)
	t.Run("Topk", s.apiTopk)
	t.Run("Var", s.apiVar)
	t.Run("Losses", s.apiLosses)
	t.Run("LossBadTargets", s.apiLossBadTargets)
	t.Run("Dot", s.apiDot)
}

// ---------------------------------------------------------------------------
// Operands and references.

// apiDTypes and apiFloats are the dtypes the group covers, listed rather
// than taken from dtype.All and dtype.Floats so that a new dtype joins the
// group only once its reference (vals, roundFloat) knows it.
var (
	apiDTypes = []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16, dtype.U8, dtype.U32, dtype.I64}
	apiFloats = []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16}
)

// apiLayouts are the ways an operand is presented to the op under test: the
// input itself, a narrowed view at an offset, a view with stride 2 (and
// offset 1) in its last dim, and a transposed view (rank ≥ 2; the input
// itself below that).
var apiLayouts = []string{"contiguous", "offset", "strided", "transposed"}

// apiView declares input name with random values from g and returns a view
// of it of the given logical shape and layout, with the view's value.
func (c *tcase) apiView(name string, dt dtype.DType, shape []int, layout string, g gen) (*graph.Tensor, vals) {
	r := len(shape)
	switch {
	case layout == "offset" && r >= 1:
		big := slices.Clone(shape)
		big[0] += 2
		x, v := c.input(name, dt, big, g)
		return x.Narrow(0, 1, shape[0]), v.narrow(0, 1, shape[0])
	case layout == "strided" && r >= 1:
		big := append(slices.Clone(shape), 2)
		x, v := c.input(name, dt, big, g)
		return x.Narrow(r, 1, 1).Squeeze(r), v.narrow(r, 1, 1).reshape(shape)
	case layout == "transposed" && r >= 2:
		sw := slices.Clone(shape)
		sw[r-2], sw[r-1] = sw[r-1], sw[r-2]
		x, v := c.input(name, dt, sw, g)
		return x.T(), v.transpose(r-2, r-1)
	}
	return c.input(name, dt, shape, g)
}

// apiMap builds a value of v's dtype and the given shape whose element at
// coordinates c is v's element at flat index src(c), or zero where src
// returns −1: the reference of every data-movement op.
func apiMap(v vals, shape []int, src func(c []int) int) vals {
	out := newVals(v.dt, shape)
	c := make([]int, len(shape))
	for k := range out.n() {
		coords(shape, k, c)
		if j := src(c); j >= 0 {
			out.set(k, v, j)
		}
	}
	return out
}

// apiConst is a value of dt and shape with every element x converted to dt
// like a cast from f64.
func apiConst(dt dtype.DType, shape []int, x float64) vals {
	v := newVals(dt, shape)
	f, i := scalarTo(dt, x)
	for k := range v.n() {
		if dt.IsFloat() {
			v.f[k] = f
		} else {
			v.i[k] = i
		}
	}
	return v
}

// apiMoves fills data-movement inputs: distinct-looking values and, for
// floats, NaN, ±0 and ±Inf (which a copy must keep bit for bit; exact
// checks the sign of zeros).
var apiMoves = gen{f: uniform(-1000, 1000), specials: infSpec}

// apiTol bounds the float composites (log_sum_exp, norms, pow, var, losses):
// f32 within 1e-5 of max(|exact|, scale) plus 1e-6 (a few roundings on
// terms of the given scale, and libm-quality exp/log/pow), f64 within
// 1e-12, f16/bf16 (computed in float32, rounded once) within one ulp of
// the rounded reference plus 1e-5·scale.
var apiTol = tolerance{name: "composite", ulps: 1, rel16: 1e-5, rel32: 1e-5, abs32: 1e-6, rel64: 1e-12, abs64: 1e-14}

// apiRows splits shape along the reduced dims: for each kept coordinate (in
// row-major order over the kept dims) the flat indices of its elements.
func apiRows(shape, dims []int) (kept []int, rows [][]int) {
	red := make([]bool, len(shape))
	for _, d := range dims {
		red[d] = true
	}
	var redShape []int
	for d, n := range shape {
		if red[d] {
			redShape = append(redShape, n)
		} else {
			kept = append(kept, n)
		}
	}
	c := make([]int, len(shape))
	kc, rc := make([]int, len(kept)), make([]int, len(redShape))
	for k := range numel(kept) {
		coords(kept, k, kc)
		var row []int
		for j := range numel(redShape) {
			coords(redShape, j, rc)
			ki, ri := 0, 0
			for d := range shape {
				if red[d] {
					c[d] = rc[ri]
					ri++
				} else {
					c[d] = kc[ki]
					ki++
				}
			}
			row = append(row, flat(shape, c))
		}
		rows = append(rows, row)
	}
	return kept, rows
}

// apiNorm normalises dims against rank (negative count from the end).
func apiNorm(dims []int, rank int) []int {
	out := make([]int, len(dims))
	for i, d := range dims {
		if d < 0 {
			d += rank
		}
		out[i] = d
	}
	return out
}

// apiCandleRound is Candle's test_utils::to_vecN_round: f32::round(x·b)/b
// with b = 10f32.powi(digits), all in float32.
func apiCandleRound(x float64, digits int) float32 {
	b := float32(math.Pow10(digits))
	p := float32(x) * b
	return float32(math.Round(float64(p))) / b
}

// apiRun compiles g with the suite's options (the verifier on) and runs it
// on every executor, returning the outputs of each run.
func (s *suite) apiRun(t *testing.T, g *graph.Graph, inputs map[string]*tensor.Tensor) []map[string]*tensor.Tensor {
	t.Helper()
	opts := s.opts
	opts.Check = true
	prog, err := g.Compile(opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	var outs []map[string]*tensor.Tensor
	for i, e := range s.execs {
		out, err := prog.Run(context.Background(), e, inputs)
		if err != nil {
			t.Fatalf("run on %s (poison 0x%02X): %v", e.Name(), Poisons[i], err)
		}
		outs = append(outs, out)
	}
	return outs
}

// ---------------------------------------------------------------------------
// Candle's own test values.

// apiLit is one literal expectation: an output, its shape and its values;
// round > 0 compares after Candle's to_vecN_round(round) in float32, tol > 0
// within an absolute tolerance (Candle's assert_close), else exactly.
type apiLit struct {
	name  string
	y     *graph.Tensor
	shape []int
	want  []float64
	round int
	tol   float64
}

func (s *suite) apiCandle(t *testing.T) {
	g := graph.New()
	var lits []apiLit
	add := func(name string, y *graph.Tensor, shape []int, want []float64) {
		lits = append(lits, apiLit{name: name, y: y, shape: shape, want: want})
	}
	addR := func(name string, y *graph.Tensor, shape []int, round int, want []float64) {
		lits = append(lits, apiLit{name: name, y: y, shape: shape, want: want, round: round})
	}
	inputs := map[string]*tensor.Tensor{}
	in := func(name string, dt dtype.DType, shape []int, data []float64) *graph.Tensor {
		v := newVals(dt, shape)
		for k, x := range data {
			if dt.IsFloat() {
				v.f[k] = roundFloat(dt, x)
			} else {
				v.i[k] = int64(x)
			}
		}
		ht, err := toTensor(v)
		if err != nil {
			t.Fatal(err)
		}
		inputs[name] = ht
		return g.Input(name, dt, shape...)
	}

	// tensor_tests.rs `full`: const_set on the whole tensor, a column
	// (.i((.., 2))) and a row (.i((2, ..))), one after the other.
	z := g.Zeros(dtype.U32, 3, 4)
	a := z.ConstSet(42)
	b := a.ConstSet(1337, graph.Range{}, graph.Range{Start: 2, End: 3})
	c := b.ConstSet(1, graph.Range{Start: 2, End: 3})
	add("full/const_set", a, []int{3, 4}, slices.Repeat([]float64{42}, 12))
	add("full/column", b, []int{3, 4}, []float64{42, 42, 1337, 42, 42, 42, 1337, 42, 42, 42, 1337, 42})
	add("full/row", c, []int{3, 4}, []float64{42, 42, 1337, 42, 42, 42, 1337, 42, 1, 1, 1, 1})
	// `const_set`: Tensor::full(42u32, (2, 3)).
	add("full", g.Full(dtype.U32, 42, 2, 3), []int{2, 3}, slices.Repeat([]float64{42}, 6))

	// `var`: var_keepdim(1) of PyTorch's torch.var example, rounded to 4.
	v := in("var_x", dtype.F32, []int{4, 4}, []float64{
		0.2035, 1.2959, 1.8101, -0.4644,
		1.5027, -0.3270, 0.5905, 0.6538,
		-1.5745, 1.3330, -0.5596, -0.6548,
		0.1264, -0.5080, 1.6420, 0.1992,
	})
	addR("var", v.Var(true, 1), []int{4, 1}, 4, []float64{1.0631, 0.559, 1.4893, 0.8258})

	// `unary_op`: round_to(2) and round_to(-2), rounded to 4.
	r := in("round_x", dtype.F32, []int{2}, []float64{2997.9246, 314.15926})
	addR("round_to/2", r.RoundTo(2), []int{2}, 4, []float64{2997.92, 314.16})
	addR("round_to/-2", r.RoundTo(-2), []int{2}, 4, []float64{3000, 300})

	// `pad_with_same`.
	p := g.Arange(dtype.F32, 1, 5, 1).Reshape(2, 2)
	add("pad_with_same/0", p.PadWithSame(0, 1, 2), []int{5, 2}, []float64{1, 2, 1, 2, 3, 4, 3, 4, 3, 4})
	add("pad_with_same/1", p.PadWithSame(1, 1, 2), []int{2, 5}, []float64{1, 1, 2, 2, 2, 3, 3, 4, 4, 4})

	// `tril_triu_eye`.
	add("tril2", g.Tril2(4, dtype.F32), []int{4, 4}, []float64{1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1})
	add("triu2", g.Triu2(4, dtype.F32), []int{4, 4}, []float64{1, 1, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1})
	add("eye", g.Eye(4, dtype.F32), []int{4, 4}, []float64{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1})

	// `log_sum_exp` (f64; the first expectation from PyTorch, compared
	// with Candle's assert_close(…, 0.00001)).
	l := in("lse_x", dtype.F64, []int{2, 2, 3}, []float64{1, 2, 3, 4, 5, 6, -1000, -999, -1001, 1000, 999, 1001})
	lits = append(lits, apiLit{name: "log_sum_exp/-1", y: l.LogSumExp(-1), shape: []int{2, 2}, want: []float64{3.4076, 6.4076, -998.5924, 1001.4076}, tol: 1e-5})
	add("log_sum_exp/0,1", l.LogSumExp(0, 1), []int{3}, []float64{1000, 999, 1001})
	add("log_sum_exp/()", l.LogSumExp(), []int{2, 2, 3}, []float64{1, 2, 3, 4, 5, 6, -1000, -999, -1001, 1000, 999, 1001})

	// `pow`: lhs.pow(lhs − 2), rounded to 3.
	pw := in("pow_x", dtype.F32, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	addR("pow", pw.Pow(pw.Affine(1, -2)), []int{2, 3}, 3, []float64{1, 1, 3, 16, 125, 1296})

	// `test_flip_1d`, `test_flip_2d`, `test_flip_3d_channels` and flip's
	// doc example.
	add("flip/1d", g.Arange(dtype.F64, 0, 5, 1).Flip(0), []int{5}, []float64{4, 3, 2, 1, 0})
	add("flip/2d", g.Arange(dtype.F64, 0, 6, 1).Reshape(2, 3).Flip(0, 1), []int{2, 3}, []float64{5, 4, 3, 2, 1, 0})
	add("flip/3d", g.Arange(dtype.F64, 0, 12, 1).Reshape(2, 2, 3).Flip(2), []int{2, 2, 3}, []float64{2, 1, 0, 5, 4, 3, 8, 7, 6, 11, 10, 9})
	add("flip/doc", g.Arange(dtype.F64, 0, 6, 1).Reshape(2, 3).Flip(0), []int{2, 3}, []float64{3, 4, 5, 0, 1, 2})

	// `tensor_norm`.
	add("norm", in("norm_x", dtype.F64, []int{2, 2}, []float64{3, 4, 0, 0}).Norm(), []int{}, []float64{5})

	// roll's doc examples.
	ro := in("roll_x", dtype.F32, []int{3, 2}, []float64{0, 1, 2, 3, 4, 5})
	add("roll/1", ro.Roll(1, 0), []int{3, 2}, []float64{4, 5, 0, 1, 2, 3})
	add("roll/-1", ro.Roll(-1, 0), []int{3, 2}, []float64{2, 3, 4, 5, 0, 1})

	// `repeat_with_zero_factor`.
	rp := in("repeat_x", dtype.U32, []int{2, 2}, []float64{1, 2, 3, 4})
	add("repeat/0,2", rp.Repeat(0, 2), []int{0, 4}, nil)
	add("repeat/2,0", rp.Repeat(2, 0), []int{4, 0}, nil)

	// stack's doc example.
	zs := g.Zeros(dtype.F32, 2, 3)
	add("stack/0", graph.Stack(0, zs, zs), []int{2, 2, 3}, make([]float64, 12))
	add("stack/2", graph.Stack(2, zs, zs), []int{2, 3, 2}, make([]float64, 12))

	// `broadcast`: broadcast_left((3, 1)).
	bl := in("bl_x", dtype.F32, []int{3}, []float64{3, 1, 4})
	add("broadcast_left", bl.BroadcastLeft(3, 1), []int{3, 1, 3}, []float64{3, 1, 4, 3, 1, 4, 3, 1, 4})

	// candle-nn loss.rs `nll_and_cross_entropy`, rounded to 4.
	ce := in("ce_x", dtype.F32, []int{3, 5}, []float64{
		1.1050, 0.3013, -1.5394, -2.1528, -0.8634,
		1.0730, -0.9419, -0.1670, -0.6582, 0.5061,
		0.8318, 1.1154, -0.3610, 0.5351, 1.0830,
	})
	tg := in("ce_t", dtype.U32, []int{3}, []float64{1, 0, 4})
	addR("nll", graph.Nll(ce.LogSoftmax(1), tg), []int{}, 4, []float64{1.1312})
	addR("cross_entropy", graph.CrossEntropy(ce, tg), []int{}, 4, []float64{1.1312})

	// dot's and mv's doc examples (f64).
	d1 := in("dot_a", dtype.F64, []int{3}, []float64{1, 2, 3})
	d2 := in("dot_b", dtype.F64, []int{3}, []float64{4, 5, 6})
	add("dot", graph.Dot(d1, d2), []int{}, []float64{32})
	mm := in("mv_m", dtype.F64, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	add("mv", mm.Mv(g.Ones(dtype.F64, 3)), []int{2}, []float64{6, 15})

	for _, lit := range lits {
		g.Output(lit.name, lit.y)
	}
	for i, out := range s.apiRun(t, g, inputs) {
		for _, lit := range lits {
			got := out[lit.name]
			if got == nil || !slices.Equal(got.Shape(), lit.shape) {
				t.Errorf("%s (poison 0x%02X): got %v, want shape %v", lit.name, Poisons[i], got, lit.shape)
				continue
			}
			for k, w := range lit.want {
				x := got.Float64(k)
				ok := x == w
				switch {
				case lit.round > 0:
					ok = apiCandleRound(x, lit.round) == float32(w)
				case lit.tol > 0:
					ok = math.Abs(x-w) < lit.tol
				}
				if !ok {
					t.Errorf("%s (poison 0x%02X): element %d = %v, Candle's test wants %v", lit.name, Poisons[i], k, x, w)
				}
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Data movement.

func (s *suite) apiFlip(t *testing.T) {
	cases := []struct {
		shape []int
		dims  [][]int
	}{
		{[]int{5}, [][]int{{0}, {-1}, {}}},
		{[]int{3, 4}, [][]int{{0}, {1}, {0, 1}, {-1, 0}}},
		{[]int{2, 3, 4}, [][]int{{2}, {0, 2}, {1, -1, 0}}},
		{[]int{0, 3}, [][]int{{0, 1}}},
		{[]int{3, 1}, [][]int{{1}, {0, 1}}},
	}
	for _, dt := range apiDTypes {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				for i, tc := range cases {
					x, xv := c.apiView(fmt.Sprintf("x%d", i), dt, tc.shape, layout, apiMoves)
					for _, dims := range tc.dims {
						nd := apiNorm(dims, len(tc.shape))
						src := make([]int, len(tc.shape))
						ref := apiMap(xv, tc.shape, func(co []int) int {
							copy(src, co)
							for _, d := range nd {
								src[d] = tc.shape[d] - 1 - co[d]
							}
							return flat(tc.shape, src)
						})
						c.expect(fmt.Sprintf("x%d.Flip%v", i, dims), x.Flip(dims...), want{v: ref, tol: exact})
					}
				}
				c.run()
			})
		}
	}
}

func (s *suite) apiPad(t *testing.T) {
	pads := []struct{ dim, left, right int }{{0, 1, 2}, {1, 0, 3}, {-1, 2, 0}, {0, 0, 0}, {1, 4, 1}}
	for _, dt := range apiDTypes {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				shape := []int{3, 4}
				x, xv := c.apiView("x", dt, shape, layout, apiMoves)
				for _, p := range pads {
					d := apiNorm([]int{p.dim}, 2)[0]
					out := slices.Clone(shape)
					out[d] += p.left + p.right
					src := make([]int, 2)
					zeros := apiMap(xv, out, func(co []int) int {
						copy(src, co)
						src[d] -= p.left
						if src[d] < 0 || src[d] >= shape[d] {
							return -1
						}
						return flat(shape, src)
					})
					same := apiMap(xv, out, func(co []int) int {
						copy(src, co)
						src[d] = min(max(co[d]-p.left, 0), shape[d]-1)
						return flat(shape, src)
					})
					c.expect(fmt.Sprintf("PadWithZeros(%d,%d,%d)", p.dim, p.left, p.right), x.PadWithZeros(p.dim, p.left, p.right), want{v: zeros, tol: exact})
					c.expect(fmt.Sprintf("PadWithSame(%d,%d,%d)", p.dim, p.left, p.right), x.PadWithSame(p.dim, p.left, p.right), want{v: same, tol: exact})
				}
				// Empty: zero padding of an empty dim, and replicating
				// along a non-empty dim of an empty tensor.
				e, ev := c.input("e", dt, []int{0, 3}, apiMoves)
				c.expect("e.PadWithZeros(0,1,1)", e.PadWithZeros(0, 1, 1), want{v: newVals(dt, []int{2, 3}), tol: exact})
				c.expect("e.PadWithSame(1,1,1)", e.PadWithSame(1, 1, 1), want{v: newVals(ev.dt, []int{0, 5}), tol: exact})
				c.run()
			})
		}
	}
}

func (s *suite) apiRoll(t *testing.T) {
	for _, dt := range apiDTypes {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				shape := []int{3, 5}
				x, xv := c.apiView("x", dt, shape, layout, apiMoves)
				for _, dim := range []int{0, 1, -1} {
					for _, shift := range []int{1, -1, 0, 2, 7, -8, 15} {
						d := apiNorm([]int{dim}, 2)[0]
						src := make([]int, 2)
						ref := apiMap(xv, shape, func(co []int) int {
							copy(src, co)
							src[d] = ((co[d]-shift)%shape[d] + shape[d]) % shape[d]
							return flat(shape, src)
						})
						c.expect(fmt.Sprintf("Roll(%d,%d)", shift, dim), x.Roll(shift, dim), want{v: ref, tol: exact})
					}
				}
				e, ev := c.input("e", dt, []int{0, 3}, apiMoves)
				c.expect("e.Roll(2,0)", e.Roll(2, 0), want{v: ev, tol: exact})
				c.run()
			})
		}
	}
}

func (s *suite) apiRepeat(t *testing.T) {
	cases := []struct {
		shape  []int
		counts [][]int
	}{
		{[]int{2, 3}, [][]int{{2, 1}, {1, 3}, {2, 2}, {3, 1, 2}, {0, 2}, {2, 0}, {1, 1}, {2, 1, 1}}},
		{[]int{1, 3}, [][]int{{4, 1}, {4, 2}}}, // a repeated size-1 dim is a broadcast view
		{[]int{4}, [][]int{{3}, {2, 2}}},
		{[]int{0, 2}, [][]int{{3, 2}}},
	}
	for _, dt := range apiDTypes {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				for i, tc := range cases {
					x, xv := c.apiView(fmt.Sprintf("x%d", i), dt, tc.shape, layout, apiMoves)
					for _, counts := range tc.counts {
						lead := len(counts) - len(tc.shape)
						in := slices.Concat(slices.Repeat([]int{1}, lead), tc.shape)
						out := make([]int, len(counts))
						for k := range counts {
							out[k] = counts[k] * in[k]
						}
						src := make([]int, len(in))
						ref := apiMap(xv.reshape(in), out, func(co []int) int {
							for k := range co {
								src[k] = co[k] % in[k]
							}
							return flat(in, src)
						})
						c.expect(fmt.Sprintf("x%d.Repeat%v", i, counts), x.Repeat(counts...), want{v: ref, tol: exact})
					}
				}
				c.run()
			})
		}
	}
}

func (s *suite) apiStack(t *testing.T) {
	for _, dt := range apiDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			shape := []int{2, 3}
			var xs []*graph.Tensor
			var vs []vals
			for i, layout := range apiLayouts {
				x, v := c.apiView(fmt.Sprintf("x%d", i), dt, shape, layout, apiMoves)
				xs, vs = append(xs, x), append(vs, v)
			}
			for _, dim := range []int{0, 1, 2, -1, -3} {
				d := dim
				if d < 0 {
					d += 3
				}
				out := slices.Insert(slices.Clone(shape), d, len(xs))
				ref := newVals(dt, out)
				co, src := make([]int, 3), make([]int, 0, 2)
				for k := range ref.n() {
					coords(out, k, co)
					src = append(append(src[:0], co[:d]...), co[d+1:]...)
					ref.set(k, vs[co[d]], flat(shape, src))
				}
				c.expect(fmt.Sprintf("Stack(%d)", dim), graph.Stack(dim, xs...), want{v: ref, tol: exact})
			}
			c.expect("Stack(0, one)", graph.Stack(0, xs[2]), want{v: vs[2].reshape([]int{1, 2, 3}), tol: exact})
			e, ev := c.input("e", dt, []int{0, 2}, apiMoves)
			c.expect("Stack(1, empty)", graph.Stack(1, e, e), want{v: ev.reshape([]int{0, 2, 2}), tol: exact})
			c.run()
		})
	}
}

func (s *suite) apiChunkSplit(t *testing.T) {
	for _, dt := range apiDTypes {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				shape := []int{7, 2}
				x, xv := c.apiView("x", dt, shape, layout, apiMoves)
				check := func(what string, parts []*graph.Tensor, dim int, sizes []int) {
					if len(parts) != len(sizes) {
						t.Fatalf("%s: %d parts, want %d (sizes %v)", what, len(parts), len(sizes), sizes)
					}
					start := 0
					for i, p := range parts {
						c.expect(fmt.Sprintf("%s[%d]", what, i), p, want{v: xv.narrow(dim, start, sizes[i]), tol: exact})
						start += sizes[i]
					}
				}
				// Candle's chunk: size%n chunks get one more; fewer
				// elements than chunks gives one chunk per element.
				check("Chunk(3,0)", x.Chunk(3, 0), 0, []int{3, 2, 2})
				check("Chunk(7,0)", x.Chunk(7, 0), 0, []int{1, 1, 1, 1, 1, 1, 1})
				check("Chunk(1,-2)", x.Chunk(1, -2), 0, []int{7})
				check("Chunk(4,1)", x.Chunk(4, 1), 1, []int{1, 1})
				check("Chunk(2,1)", x.Chunk(2, 1), 1, []int{1, 1})
				check("Split([2 0 5],0)", x.Split([]int{2, 0, 5}, 0), 0, []int{2, 0, 5})
				check("Split([2],-1)", x.Split([]int{2}, -1), 1, []int{2})
				e, _ := c.input("e", dt, []int{0, 3}, apiMoves)
				if parts := e.Chunk(2, 0); len(parts) != 0 {
					t.Errorf("Chunk of an empty dim: %d parts, want none (Candle's rule)", len(parts))
				}
				c.run()
			})
		}
	}
}

func (s *suite) apiBroadcastLike(t *testing.T) {
	for _, dt := range apiDTypes {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xv := c.apiView("x", dt, []int{3, 1}, layout, apiMoves)
				c.expect("BroadcastAs(2,3,4)", x.BroadcastAs(2, 3, 4), want{v: xv.broadcast([]int{2, 3, 4}), tol: exact})
				c.expect("Expand(3,5)", x.Expand(3, 5), want{v: xv.broadcast([]int{3, 5}), tol: exact})
				c.expect("BroadcastLeft(2)", x.BroadcastLeft(2), want{v: xv.broadcast([]int{2, 3, 1}), tol: exact})
				c.expect("ZerosLike", x.ZerosLike(), want{v: apiConst(dt, []int{3, 1}, 0), tol: exact})
				c.expect("OnesLike", x.OnesLike(), want{v: apiConst(dt, []int{3, 1}, 1), tol: exact})
				// Conversions like a cast: saturation for integers, overflow
				// for halves, truncation toward zero.
				for _, v := range []float64{-2.5, 300, 1e5, 7} {
					c.expect(fmt.Sprintf("FullLike(%g)", v), x.FullLike(v), want{v: apiConst(dt, []int{3, 1}, v), tol: exact})
				}
				e, _ := c.input("e", dt, []int{0, 2}, apiMoves)
				c.expect("e.OnesLike", e.OnesLike(), want{v: newVals(dt, []int{0, 2}), tol: exact})
				c.run()
			})
		}
	}
}

func (s *suite) apiConstSet(t *testing.T) {
	type rg = graph.Range
	cases := []struct {
		name   string
		region []rg
		v      float64
	}{
		{"all", nil, 3},
		{"column", []rg{{}, {Start: 2, End: 3}}, -7},
		{"row", []rg{{Start: 1, End: 2}}, 1337},
		{"block", []rg{{Start: 1, End: 3}, {Start: 1, End: 4, Step: 1}}, 0.5},
		{"strided", []rg{{Start: 0, End: 4, Step: 2}, {Start: 1, End: 5, Step: 3}}, 2},
		{"whole-explicit", []rg{{Start: 0, End: 4}, {Start: 0, End: 5}}, 9},
		{"empty", []rg{{Start: 2, End: 2}}, 4},
		{"saturating", []rg{{Start: 3, End: 4}}, 1e12},
	}
	for _, dt := range apiDTypes {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				shape := []int{4, 5}
				x, xv := c.apiView("x", dt, shape, layout, apiMoves)
				for _, tc := range cases {
					ref := newVals(dt, shape)
					fill := apiConst(dt, []int{1}, tc.v)
					co := make([]int, 2)
					for k := range ref.n() {
						coords(shape, k, co)
						in := true
						for d, r := range tc.region {
							if r == (rg{}) {
								continue
							}
							st := max(r.Step, 1)
							in = in && co[d] >= r.Start && co[d] < r.End && (co[d]-r.Start)%st == 0
						}
						if in {
							ref.set(k, fill, 0)
						} else {
							ref.set(k, xv, k)
						}
					}
					c.expect("ConstSet/"+tc.name, x.ConstSet(tc.v, tc.region...), want{v: ref, tol: exact})
				}
				e, _ := c.input("e", dt, []int{0, 5}, apiMoves)
				c.expect("e.ConstSet", e.ConstSet(1, graph.Range{}, graph.Range{Start: 1, End: 3}), want{v: newVals(dt, []int{0, 5}), tol: exact})
				c.run()
			})
		}
	}
}

func (s *suite) apiTri(t *testing.T) {
	shapes := [][]int{{4, 4}, {3, 5}, {5, 2}, {2, 3, 4}, {0, 3}, {1, 1}}
	ks := []int{0, 1, -1, 2, -3, 10, -10, math.MaxInt, math.MinInt}
	for _, dt := range apiDTypes {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				for i, shape := range shapes {
					x, xv := c.apiView(fmt.Sprintf("x%d", i), dt, shape, layout, apiMoves)
					r := len(shape)
					for _, k := range ks {
						for _, lower := range []bool{true, false} {
							ref := apiMap(xv, shape, func(co []int) int {
								d := co[r-1] - co[r-2]
								if lower && d <= k || !lower && d >= k {
									return flat(shape, co)
								}
								return -1
							})
							name, y := fmt.Sprintf("x%d.Tril(%d)", i, k), x.Tril(k)
							if !lower {
								name, y = fmt.Sprintf("x%d.Triu(%d)", i, k), x.Triu(k)
							}
							c.expect(name, y, want{v: ref, tol: exact})
						}
					}
				}
				if layout == "contiguous" {
					for _, n := range []int{0, 1, 4} {
						eye, lo, up := newVals(dt, []int{n, n}), newVals(dt, []int{n, n}), newVals(dt, []int{n, n})
						one := apiConst(dt, []int{1}, 1)
						for i := range n {
							for j := range n {
								if i == j {
									eye.set(i*n+j, one, 0)
								}
								if j <= i {
									lo.set(i*n+j, one, 0)
								}
								if j >= i {
									up.set(i*n+j, one, 0)
								}
							}
						}
						c.expect(fmt.Sprintf("Eye(%d)", n), c.g.Eye(n, dt), want{v: eye, tol: exact})
						c.expect(fmt.Sprintf("Tril2(%d)", n), c.g.Tril2(n, dt), want{v: lo, tol: exact})
						c.expect(fmt.Sprintf("Triu2(%d)", n), c.g.Triu2(n, dt), want{v: up, tol: exact})
					}
				}
				c.run()
			})
		}
	}
}

// ---------------------------------------------------------------------------
// Math composites.

// apiCompose draws float inputs in [-20, 20) with NaN, ±0 and ±Inf.
var apiCompose = gen{f: uniform(-20, 20), specials: infSpec}

// apiLSE is log Σ exp over one row: NaN if any element is NaN, +Inf if one
// is +Inf, −Inf if all are −Inf, else m + log Σ exp(x − m). mag is the size
// of the terms whose roundings reach the result.
func apiLSE(row []float64) (v, mag float64) {
	m := math.Inf(-1)
	for _, x := range row {
		if math.IsNaN(x) {
			return x, 0
		}
		m = math.Max(m, x)
	}
	if math.IsInf(m, 0) {
		return m, 0
	}
	s := 0.0
	for _, x := range row {
		s += math.Exp(x - m)
	}
	return m + math.Log(s), math.Abs(m) + math.Abs(math.Log(s)) + 1
}

func (s *suite) apiLogSumExp(t *testing.T) {
	cases := []struct {
		shape []int
		dims  [][]int
	}{
		{[]int{3, 5}, [][]int{{1}, {0}, {0, 1}, {-1}}},
		{[]int{2, 3, 4}, [][]int{{0, 2}, {1}, {2, 1, 0}}},
		{[]int{1}, [][]int{{0}}},
	}
	for _, dt := range apiFloats {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				for i, tc := range cases {
					x, xv := c.apiView(fmt.Sprintf("x%d", i), dt, tc.shape, layout, apiCompose)
					for _, dims := range tc.dims {
						kept, rows := apiRows(tc.shape, apiNorm(dims, len(tc.shape)))
						ref := newVals(dt, kept)
						scale := make([]float64, ref.n())
						for k, row := range rows {
							ref.f[k], scale[k] = apiLSE(redGather(xv.f, row))
						}
						c.expect(fmt.Sprintf("x%d.LogSumExp%v", i, dims), x.LogSumExp(dims...), want{v: ref, tol: apiTol, scale: scale})
					}
				}
				// Rows of −Inf, a +Inf beside a −Inf, a NaN: Candle's
				// shift by the maximum alone makes the first two NaN.
				sp := newVals(dt, []int{4, 3})
				for k, v := range []float64{math.Inf(-1), math.Inf(-1), math.Inf(-1), math.Inf(1), math.Inf(-1), 1, 2, math.NaN(), 3, -1e4, 0, 1e4} {
					sp.f[k] = roundFloat(dt, v)
				}
				spx := c.inputVals("special", sp)
				spRef := newVals(dt, []int{4})
				for r := range 4 {
					spRef.f[r], _ = apiLSE(sp.f[3*r : 3*r+3])
				}
				c.expect("special.LogSumExp(1)", spx.LogSumExp(1), want{v: spRef, tol: apiTol, scale: []float64{0, 0, 0, 1e4}})
				// An empty kept dim: an empty result.
				e, _ := c.input("e", dt, []int{0, 5}, apiCompose)
				c.expect("e.LogSumExp(1)", e.LogSumExp(1), want{v: newVals(dt, []int{0}), tol: exact})
				c.run()
			})
		}
	}
}

// apiPNorm is the p-norm of a row (NormP's semantics) and the magnitude of
// its terms.
func apiPNorm(row []float64, p float64) (v, mag float64) {
	switch {
	case math.IsInf(p, 0):
		v = math.Abs(row[0])
		for _, x := range row {
			if math.IsNaN(x) {
				return x, 0
			}
			if a := math.Abs(x); p > 0 && a > v || p < 0 && a < v {
				v = a
			}
		}
		return v, v
	case p == 0:
		for _, x := range row {
			if x != 0 {
				v++
			}
		}
		return v, v
	}
	s := 0.0
	for _, x := range row {
		s += math.Pow(math.Abs(x), p)
	}
	v = math.Pow(s, 1/p)
	return v, v * (1 + math.Abs(math.Log(math.Max(s, 1e-300))/p))
}

func (s *suite) apiNorm(t *testing.T) {
	ps := []float64{2, 1, 3, 0.5, -1, math.Inf(1), math.Inf(-1), 0}
	for _, dt := range apiFloats {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				shape := []int{3, 4}
				x, xv := c.apiView("x", dt, shape, layout, gen{f: uniform(-3, 3), specials: zeroSpec})
				for _, dims := range [][]int{nil, {1}, {0}, {0, 1}, {-1}} {
					all := dims
					if all == nil {
						all = []int{0, 1}
					}
					kept, rows := apiRows(shape, apiNorm(all, 2))
					for _, p := range ps {
						ref := newVals(dt, kept)
						scale := make([]float64, ref.n())
						for k, row := range rows {
							ref.f[k], scale[k] = apiPNorm(redGather(xv.f, row), p)
						}
						name, y := fmt.Sprintf("NormP(%g,%v)", p, dims), x.NormP(p, dims...)
						if p == 2 {
							name, y = fmt.Sprintf("Norm(%v)", dims), x.Norm(dims...)
						}
						c.expect(name, y, want{v: ref, tol: apiTol, scale: scale})
					}
				}
				// A 0-d input, and sums over an empty dim (0 for p > 0).
				z := c.inputVals("z", apiConst(dt, nil, -3))
				c.expect("z.Norm()", z.Norm(), want{v: apiConst(dt, nil, 3), tol: apiTol})
				e, _ := c.input("e", dt, []int{2, 0}, apiCompose)
				c.expect("e.Norm(1)", e.Norm(1), want{v: newVals(dt, []int{2}), tol: exact})
				c.expect("e.NormP(1,1)", e.NormP(1, 1), want{v: newVals(dt, []int{2}), tol: exact})
				c.run()
			})
		}
	}
}

func (s *suite) apiPow(t *testing.T) {
	for _, dt := range apiFloats {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				x, xv := c.apiView("x", dt, []int{3, 5}, layout, gen{f: positive, specials: zeroSpec})
				y, yv := c.input("y", dt, []int{5}, gen{f: uniform(-3, 3), specials: []float64{0}})
				ref := func(b, e vals) want {
					shape, _ := broadcastShapes(b.shape, e.shape)
					bb, eb := b.broadcast(shape), e.broadcast(shape)
					w := want{v: newVals(dt, shape), tol: apiTol, scale: make([]float64, numel(shape))}
					for k := range w.v.f {
						l := eb.f[k] * math.Log(bb.f[k])
						w.v.f[k] = math.Exp(l)
						w.scale[k] = math.Abs(w.v.f[k]) * (1 + math.Abs(l))
					}
					return w
				}
				c.expect("x.Pow(y)", x.Pow(y), ref(xv, yv))
				c.expect("x.Pow(2.5)", x.Pow(graph.Scalar(2.5)), ref(xv, apiConst(dt, nil, 2.5)))
				// 0^0 and negative bases are NaN (exp(y·log x)); 0^y is
				// 0 for y > 0 and +Inf for y < 0.
				b := newVals(dt, []int{6})
				e := newVals(dt, []int{6})
				copy(b.f, []float64{0, 0, 0, -2, -2, 4})
				copy(e.f, []float64{0, 1, -1, 2, 0.5, 0.5})
				bx, ex := c.inputVals("b", b), c.inputVals("e", e)
				w := ref(b, e)
				if !math.IsNaN(w.v.f[0]) || w.v.f[1] != 0 || !math.IsInf(w.v.f[2], 1) || !math.IsNaN(w.v.f[3]) {
					t.Fatalf("reference of pow's special points is wrong: %v", w.v.f)
				}
				c.expect("b.Pow(e)", bx.Pow(ex), w)
				z, _ := c.input("z", dt, []int{0, 5}, apiCompose)
				c.expect("z.Pow(y)", z.Pow(y), want{v: newVals(dt, []int{0, 5}), tol: exact})
				c.run()
			})
		}
	}
}

// apiRoundToRef is RoundTo's value, step by step in the compute dtype
// (float32 for f32, f16 and bf16; float64 for f64): x·m + 0 rounded, round
// half away from zero, ·(1/m) + 0 rounded, with m = 10^d and 1/m converted
// to the compute dtype as Affine converts its parameters.
func apiRoundToRef(dt dtype.DType, x float64, d int) float64 {
	cdt := dtype.F32
	if dt == dtype.F64 {
		cdt = dtype.F64
	}
	m := math.Pow10(d)
	rm, rinv := roundFloat(cdt, m), roundFloat(cdt, 1/m)
	p := roundFloat(cdt, x*rm) + 0
	q := math.Round(p)
	return roundFloat(cdt, q*rinv) + 0
}

func (s *suite) apiRoundTo(t *testing.T) {
	for _, dt := range apiFloats {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				g := gen{f: func(r *rand.Rand) float64 {
					if r.IntN(2) == 0 {
						return quarters(r) / 100 // ties at two decimals
					}
					return uniform(-1000, 1000)(r)
				}, specials: infSpec}
				x, xv := c.apiView("x", dt, []int{4, 6}, layout, g)
				lim := 37
				if dt == dtype.F64 {
					lim = 307
				}
				for _, d := range []int{0, 1, 2, 3, -1, -2, lim, -lim} {
					ref := newVals(dt, xv.shape)
					for k, v := range xv.f {
						ref.f[k] = apiRoundToRef(dt, v, d)
					}
					c.expect(fmt.Sprintf("RoundTo(%d)", d), x.RoundTo(d), want{v: ref, tol: exact})
				}
				e, _ := c.input("e", dt, []int{3, 0}, g)
				c.expect("e.RoundTo(2)", e.RoundTo(2), want{v: newVals(dt, []int{3, 0}), tol: exact})
				c.run()
			})
		}
	}
}

// apiTopkRow returns the indices of the k largest elements of a row,
// largest first: a stable descending order (ties by index) with NaN the
// largest; −0 equals +0.
func apiTopkRow(v vals, row []int, k int) []int {
	idx := make([]int, len(row))
	for i := range idx {
		idx[i] = i
	}
	before := func(a, b int) bool { // a sorts strictly before b
		if v.dt.IsFloat() {
			x, y := v.f[row[a]], v.f[row[b]]
			switch {
			case math.IsNaN(x) || math.IsNaN(y):
				return math.IsNaN(x) && !math.IsNaN(y)
			}
			return x > y
		}
		return v.i[row[a]] > v.i[row[b]]
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case before(a, b):
			return -1
		case before(b, a):
			return 1
		}
		return 0
	})
	return idx[:k]
}

func (s *suite) apiTopk(t *testing.T) {
	cases := []struct {
		shape []int
		dim   int
		ks    []int
	}{
		{[]int{3, 8}, 1, []int{0, 1, 3, 8}},
		{[]int{3, 8}, 0, []int{2, 3}},
		{[]int{2, 3, 5}, 1, []int{2}},
		{[]int{2, 3, 5}, -1, []int{4}},
		{[]int{0, 4}, 1, []int{2}},
	}
	for _, dt := range apiDTypes {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				for i, tc := range cases {
					x, xv := c.apiView(fmt.Sprintf("x%d", i), dt, tc.shape, layout, discrete) // many ties
					d := apiNorm([]int{tc.dim}, len(tc.shape))[0]
					for _, k := range tc.ks {
						out := slices.Clone(tc.shape)
						out[d] = k
						vref, iref := newVals(dt, out), newVals(dtype.U32, out)
						// Each row along d: the kept coordinate fixes every
						// other dim.
						_, rows := apiRows(tc.shape, []int{d})
						oc := make([]int, len(out))
						for _, row := range rows {
							top := apiTopkRow(xv, row, k)
							for j, pos := range top {
								coords(tc.shape, row[pos], oc)
								oc[d] = j
								o := flat(out, oc)
								vref.set(o, xv, row[pos])
								iref.i[o] = int64(pos)
							}
						}
						vals, idx := x.Topk(k, tc.dim)
						c.expect(fmt.Sprintf("x%d.Topk(%d,%d).values", i, k, tc.dim), vals, want{v: vref, tol: exact})
						c.expect(fmt.Sprintf("x%d.Topk(%d,%d).indices", i, k, tc.dim), idx, want{v: iref, tol: exact})
					}
				}
				c.run()
			})
		}
	}
}

// apiVarRow is the variance of a row dividing by n − ddof, and the
// magnitude of its terms.
func apiVarRow(row []float64, ddof int) (v, mag float64) {
	n := float64(len(row))
	mean := 0.0
	for _, x := range row {
		mean += x
	}
	mean /= n
	for _, x := range row {
		v += (x - mean) * (x - mean)
		mag += (math.Abs(x) + math.Abs(mean)) * (math.Abs(x) + math.Abs(mean))
	}
	div := n - float64(ddof)
	if len(row) == 0 || div == 0 {
		return math.NaN(), 0
	}
	return v / div, mag / div
}

func (s *suite) apiVar(t *testing.T) {
	for _, dt := range apiFloats {
		for _, layout := range apiLayouts {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				shape := []int{4, 6}
				x, xv := c.apiView("x", dt, shape, layout, gen{f: uniform(-5, 5)})
				for _, dims := range [][]int{{1}, {0}, {0, 1}, {-1}} {
					for _, keep := range []bool{false, true} {
						kept, rows := apiRows(shape, apiNorm(dims, 2))
						if keep {
							kept = slices.Clone(shape)
							for _, d := range apiNorm(dims, 2) {
								kept[d] = 1
							}
						}
						for _, ddof := range []int{1, 0} {
							ref := newVals(dt, kept)
							scale := make([]float64, ref.n())
							for k, row := range rows {
								ref.f[k], scale[k] = apiVarRow(redGather(xv.f, row), ddof)
							}
							name, y := fmt.Sprintf("Var(%v,%v)", keep, dims), x.Var(keep, dims...)
							if ddof == 0 {
								name, y = fmt.Sprintf("VarPopulation(%v,%v)", keep, dims), x.VarPopulation(keep, dims...)
							}
							c.expect(name, y, want{v: ref, tol: apiTol, scale: scale})
						}
					}
				}
				// One element per row: NaN unbiased, 0 population; an
				// empty row: NaN for both.
				o, _ := c.input("o", dt, []int{3, 1}, gen{f: uniform(-5, 5)})
				nan := apiConst(dt, []int{3}, math.NaN())
				c.expect("o.Var(1)", o.Var(false, 1), want{v: nan, tol: exact})
				c.expect("o.VarPopulation(1)", o.VarPopulation(false, 1), want{v: apiConst(dt, []int{3}, 0), tol: exact, signFree: true})
				e, _ := c.input("e", dt, []int{3, 0}, gen{f: uniform(-5, 5)})
				c.expect("e.Var(1)", e.Var(false, 1), want{v: nan, tol: exact})
				c.expect("e.VarPopulation(1)", e.VarPopulation(false, 1), want{v: nan, tol: exact})
				c.run()
			})
		}
	}
}

// ---------------------------------------------------------------------------
// Losses.

// apiLogSoftmaxRows is log_softmax over the last dim of an [N, C] value, in
// float64, with the magnitude of each element's terms.
func apiLogSoftmaxRows(v vals) (out, mag []float64) {
	n, cl := v.shape[0], v.shape[1]
	out, mag = make([]float64, n*cl), make([]float64, n*cl)
	for i := range n {
		row := v.f[i*cl : (i+1)*cl]
		m := math.Inf(-1)
		for _, x := range row {
			m = math.Max(m, x)
		}
		s := 0.0
		for _, x := range row {
			s += math.Exp(x - m)
		}
		for j, x := range row {
			out[i*cl+j] = x - m - math.Log(s)
			mag[i*cl+j] = math.Abs(x) + math.Abs(m) + math.Abs(math.Log(s))
		}
	}
	return out, mag
}

// apiNllRef is −(1/N) Σ lp[i, t_i], a sentinel id adding 0.
func apiNllRef(lp, mag []float64, cl int, tg vals) (v, scale float64) {
	n := tg.n()
	_, sentinel := intRange(tg.dt)
	for i, id := range tg.i {
		if id == sentinel {
			continue
		}
		v -= lp[i*cl+int(id)]
		scale += mag[i*cl+int(id)]
	}
	return v / float64(n), scale / float64(n)
}

func (s *suite) apiLosses(t *testing.T) {
	for _, dt := range apiFloats {
		for _, idt := range apiIDTypes {
			for _, layout := range apiLayouts {
				t.Run(fmt.Sprintf("%v/%v/%s", dt, idt, layout), func(t *testing.T) {
					t.Parallel()
					c := s.newCase(t)
					const n, cl = 6, 5
					x, xv := c.apiView("logits", dt, []int{n, cl}, layout, gen{f: uniform(-3, 3)})
					tv := newVals(idt, []int{n})
					for i := range tv.i {
						tv.i[i] = c.r.Int64N(cl)
					}
					_, hi := intRange(idt)
					tv.i[2] = hi // the sentinel: reads 0, still counts in N
					tg := c.inputVals("targets", tv)
					lp, mag := apiLogSoftmaxRows(xv)
					ce, ceScale := apiNllRef(lp, mag, cl, tv)
					c.expect("CrossEntropy", graph.CrossEntropy(x, tg), want{v: apiScalar(dt, ce), tol: apiTol, scale: []float64{ceScale}})
					// Nll of log-probabilities given as input values.
					lpv := newVals(dt, []int{n, cl})
					for k := range lp {
						lpv.f[k] = roundFloat(dt, lp[k])
					}
					lpx := c.inputVals("logp", lpv)
					nl, nlScale := apiNllRef(lpv.f, apiAbs(lpv.f), cl, tv)
					c.expect("Nll", graph.Nll(lpx, tg), want{v: apiScalar(dt, nl), tol: apiTol, scale: []float64{nlScale}})
					// An empty batch: 0/0.
					ex, _ := c.input("empty", dt, []int{0, cl}, gen{f: uniform(-3, 3)})
					et := c.inputVals("empty_targets", newVals(idt, []int{0}))
					c.expect("Nll(empty)", graph.Nll(ex, et), want{v: apiScalar(dt, math.NaN()), tol: exact})
					c.expect("CrossEntropy(empty)", graph.CrossEntropy(ex, et), want{v: apiScalar(dt, math.NaN()), tol: exact})
					c.run()
				})
			}
		}
	}
}

// apiIDTypes are the dtypes of class ids the losses take.
var apiIDTypes = []dtype.DType{dtype.U8, dtype.U32, dtype.I64}

func apiScalar(dt dtype.DType, x float64) vals {
	v := newVals(dt, []int{})
	v.f[0] = x
	return v
}

func apiAbs(f []float64) []float64 {
	out := make([]float64, len(f))
	for i, x := range f {
		out[i] = math.Abs(x)
	}
	return out
}

// apiLossBadTargets: a class id outside [0, C) makes the run fail with the
// gather's error naming the id, on every executor; it is not caught when
// the graph is built (ids are data).
func (s *suite) apiLossBadTargets(t *testing.T) {
	for _, idt := range apiIDTypes {
		for _, loss := range []string{"nll", "cross_entropy"} {
			t.Run(fmt.Sprintf("%v/%s", idt, loss), func(t *testing.T) {
				t.Parallel()
				g := graph.New()
				x := g.Input("x", dtype.F32, 3, 5)
				tg := g.Input("t", idt, 3)
				if loss == "nll" {
					g.Output("loss", graph.Nll(x, tg))
				} else {
					g.Output("loss", graph.CrossEntropy(x, tg))
				}
				xt, _ := tensor.Zeros(dtype.F32, 3, 5)
				tv := newVals(idt, []int{3})
				copy(tv.i, []int64{1, 7, 0})
				tt, err := toTensor(tv)
				if err != nil {
					t.Fatal(err)
				}
				opts := s.opts
				opts.Check = true
				prog, err := g.Compile(opts)
				if err != nil {
					t.Fatalf("compile: %v", err)
				}
				for _, e := range s.execs {
					_, err := prog.Run(context.Background(), e, map[string]*tensor.Tensor{"x": xt, "t": tt})
					if err == nil || !strings.Contains(err.Error(), "gather") || !strings.Contains(err.Error(), "7") {
						t.Errorf("%s with target id 7 of 5 classes on %s: error %v, want the gather's error naming id 7", loss, e.Name(), err)
					}
				}
			})
		}
	}
}

// apiDot: integer Dot (Candle's dot is mul + sum_all, so it takes every
// dtype), wrapping like Mul and Sum; with offset and strided vectors.
func (s *suite) apiDot(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.U8, dtype.U32, dtype.I64} {
		for _, layout := range []string{"contiguous", "offset", "strided"} {
			t.Run(fmt.Sprintf("%v/%s", dt, layout), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				for _, n := range []int{0, 1, 9} {
					a, av := c.apiView(fmt.Sprintf("a%d", n), dt, []int{n}, layout, gen{})
					b, bv := c.apiView(fmt.Sprintf("b%d", n), dt, []int{n}, "contiguous", gen{})
					ref := newVals(dt, []int{})
					var sum int64
					for k := range n {
						sum += av.i[k] * bv.i[k] // int64 wraps; the low bits are dt's
					}
					ref.i[0] = wrapInt(dt, sum)
					c.expect(fmt.Sprintf("Dot%d", n), graph.Dot(a, b), want{v: ref, tol: exact})
				}
				c.run()
			})
		}
	}
}

package codegen

// Row kernel tests: the cases (every reduction × dtype × awkward row
// lengths, the normalisations, layouts, empty rows, two-stage reductions),
// their comparison with the CPU twin on a runner (the host emulation here,
// the GPU in gpu_test.go), and structural checks of the rendered source.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	lexec "github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// rowTol is how a row case's outputs must match the CPU twin's.
type rowTol uint8

const (
	// rowExact: bit for bit (any NaN matches any NaN): max, min, argmax,
	// argmin, integer sums, and kernels without float sums.
	rowExact rowTol = iota
	// rowSum: a float sum over the last dim of input x: within
	// 1e-5·Σ|x| of the row (f64: 1e-13·Σ|x|), or 1 ulp for f16/bf16.
	rowSum
	// rowApprox: normalisations (sums of exp or squares, then elementwise
	// work): f32 within 2e-6 relative + 1e-6 absolute, f64 1e-12 + 1e-13,
	// f16/bf16 within 1 ulp.
	rowApprox
)

// rowCase is one graph whose plan has row kernels.
type rowCase struct {
	name  string
	build func(g *graph.Graph)
	tol   rowTol
	// big: compile only (too large to emulate); the GPU runs it.
	big bool
}

// rowLengths are the row lengths every f32 reduction runs at: around the
// wave sizes, a thousand, a block's worth and a long row (two stages).
var rowLengths = []int{1, 31, 32, 33, 63, 64, 65, 1000, 4096, 100000}

// rowsFor gives a row count for row length L: enough rows for every row
// kind of rowInput, fewer for long rows.
func rowsFor(L int) int {
	switch {
	case L >= 100000:
		return 3
	case L >= 4096:
		return 9
	}
	return 23
}

var redOps = []ir.Op{ir.OpSum, ir.OpMax, ir.OpMin, ir.OpArgmax, ir.OpArgmin}

func reduceFn(op ir.Op, x *graph.Tensor, dims ...int) *graph.Tensor {
	switch op {
	case ir.OpSum:
		return x.Sum(dims...)
	case ir.OpMax:
		return x.Max(false, dims...)
	case ir.OpMin:
		return x.Min(false, dims...)
	case ir.OpArgmax:
		return x.Argmax(dims[0], false)
	}
	return x.Argmin(dims[0], false)
}

func redTol(op ir.Op, dt dtype.DType) rowTol {
	if op == ir.OpSum && dt.IsFloat() {
		return rowSum
	}
	return rowExact
}

// rowCases lists the row kernel cases.
func rowCases() []rowCase {
	var cs []rowCase
	add := func(name string, tol rowTol, build func(g *graph.Graph)) {
		cs = append(cs, rowCase{name: name, tol: tol, build: build})
	}
	// Every reduction over every dtype: f32 at every row length, the
	// others at a few (f8e4m3, whose row code differs from f16's only in
	// its loads and stores, at a short and a multi-pass length).
	for _, op := range redOps {
		for _, dt := range dtype.All {
			lengths := []int{1, 33, 1000, 4096}
			switch dt {
			case dtype.F32:
				lengths = rowLengths
			case dtype.F8E4M3:
				lengths = []int{33, 4096}
			}
			for _, L := range lengths {
				add(fmt.Sprintf("%s/%v/%dx%d", op, dt, rowsFor(L), L), redTol(op, dt), func(g *graph.Graph) {
					g.Output("out", reduceFn(op, g.Input("x", dt, rowsFor(L), L), -1))
				})
			}
		}
		// A long row of f16 (two stages, partials in float).
		add(fmt.Sprintf("%s/f16/2x100000", op), redTol(op, dtype.F16), func(g *graph.Graph) {
			g.Output("out", reduceFn(op, g.Input("x", dtype.F16, 2, 100000), -1))
		})
	}
	// The normalisations, over the float dtypes and a few lengths.
	for _, dt := range dtype.Floats {
		lengths := []int{1, 33, 1000, 4096}
		if dt == dtype.F8E4M3 {
			lengths = []int{33, 4096}
		}
		for _, L := range lengths {
			R := rowsFor(L)
			tag := fmt.Sprintf("%v/%dx%d", dt, R, L)
			add("softmax/"+tag, rowApprox, func(g *graph.Graph) {
				g.Output("out", g.Input("x", dt, R, L).Softmax(-1))
			})
			add("log_softmax/"+tag, rowApprox, func(g *graph.Graph) {
				g.Output("out", g.Input("x", dt, R, L).LogSoftmax(-1))
			})
			add("layer_norm/"+tag, rowApprox, func(g *graph.Graph) {
				g.Output("out", g.Input("x", dt, R, L).LayerNorm(g.Input("w", dt, L), g.Input("b", dt, L), 1e-5))
			})
			add("rms_norm/"+tag, rowApprox, func(g *graph.Graph) {
				g.Output("out", g.Input("x", dt, R, L).RmsNorm(g.Input("w", dt, L), 1e-6))
			})
		}
	}
	for _, c := range randomRowCases() {
		add(c.name, c.tol, c.build)
	}
	// The workloads, small.
	for _, sz := range [][2]int{{37, 1000}, {64, 96}} {
		R, C := sz[0], sz[1]
		tag := fmt.Sprintf("/%dx%d", R, C)
		add("W3"+tag, rowApprox, func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, R, C).Affine(0.125, 0).Softmax(-1))
		})
		add("W4"+tag, rowApprox, func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, R, C).LayerNorm(g.Input("w", dtype.F32, C), g.Input("b", dtype.F32, C), 1e-5))
		})
		add("W5"+tag, rowApprox, func(g *graph.Graph) {
			x, w := g.Input("x", dtype.F32, R, C), g.Input("w", dtype.F32, C)
			inv := x.Mul(x).Mean(true, -1).Add(graph.Scalar(1e-6)).Sqrt().Recip()
			g.Output("out", x.Mul(inv).Mul(w))
		})
		add("W7"+tag, rowSum, func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, R, C).Sum(-1))
		})
	}
	// Long rows: softmax recomputes its values in every pass.
	add("softmax/f32/2x100000", rowApprox, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 2, 100000).Softmax(-1))
	})
	add("layer_norm/f32/3x20000", rowApprox, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 3, 20000).LayerNorm(g.Input("w", dtype.F32, 20000), g.Input("b", dtype.F32, 20000), 1e-5))
	})
	// Layouts and shapes.
	add("layout/sum-two-axes", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.I64, 4, 6, 7).Sum(1, 2))
	})
	add("layout/max-two-axes-f32", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 5, 6, 7).Max(false, 2, 1))
	})
	add("layout/argmax-dim0", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 37, 41).Argmax(0, false))
	})
	add("layout/min-dim0-u8", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.U8, 300, 70).Min(false, 0))
	})
	add("layout/softmax-middle-dim", rowApprox, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 3, 50, 4).Softmax(1))
	})
	add("layout/sum-narrow-unaligned", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.I64, 9, 64).Narrow(1, 1, 62).Sum(-1))
	})
	add("layout/max-narrow-aligned", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 9, 64).Narrow(1, 4, 32).Max(false, -1))
	})
	add("layout/sum-broadcast-rows", rowExact, func(g *graph.Graph) {
		// The row operand is broadcast over the rows (outer stride 0).
		x := g.Input("x", dtype.I64, 40)
		g.Output("out", x.BroadcastTo(6, 40).Mul(g.Input("y", dtype.I64, 6, 40)).Sum(-1))
	})
	add("layout/keepdim-epilogue", rowApprox, func(g *graph.Graph) {
		x := g.Input("x", dtype.F32, 13, 77)
		g.Output("out", x.Sub(x.Max(true, -1)).Exp())
	})
	add("layout/row-value-epilogue", rowApprox, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 3, 1).Exp().Add(g.Input("y", dtype.F32, 3, 5)))
	})
	add("layout/reduce-broadcast-row-value", rowApprox, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 2, 1).Exp().BroadcastTo(2, 7).Sum(1))
	})
	add("layout/reduce-broadcast-reduction", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 2, 7).Max(true, 1).BroadcastTo(2, 7).Min(false, 1))
	})
	add("layout/var", rowApprox, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F64, 11, 300).Var(false, -1))
	})
	add("layout/mean-u8-sum-wraps", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.U8, 5, 300).Sum(-1).Cast(dtype.U32))
	})
	add("layout/argmax-of-f16-chain", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F16, 17, 130).Mul(g.Input("y", dtype.F16, 130)).Argmax(1, false))
	})
	add("layout/sum-with-arange", rowExact, func(g *graph.Graph) {
		x := g.Input("x", dtype.I64, 6, 50)
		g.Output("out", x.Add(g.Arange(dtype.I64, 0, 300, 1).Reshape(6, 50)).Sum(-1))
	})
	add("empty/sum-empty-rows", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 3, 0).Sum(-1))
	})
	add("empty/no-rows", rowExact, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 0, 5).Max(false, -1))
	})
	add("empty/softmax-no-rows", rowApprox, func(g *graph.Graph) {
		g.Output("out", g.Input("x", dtype.F32, 0, 5).Softmax(-1))
	})
	// Rotary embeddings: elementwise kernels or row kernels, whatever the
	// plan makes of them.
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16} {
		add(fmt.Sprintf("rope_i/%v", dt), rowExact, func(g *graph.Graph) {
			g.Output("out", g.Input("x", dt, 2, 3, 5, 8).RopeI(g.Input("cos", dt, 5, 4), g.Input("sin", dt, 5, 4)))
		})
		add(fmt.Sprintf("rope/%v", dt), rowExact, func(g *graph.Graph) {
			g.Output("out", g.Input("x", dt, 2, 3, 5, 8).Rope(g.Input("cos", dt, 5, 4), g.Input("sin", dt, 5, 4)))
		})
		add(fmt.Sprintf("rope_thd/%v", dt), rowExact, func(g *graph.Graph) {
			g.Output("out", g.Input("x", dt, 2, 5, 3, 8).RopeThd(g.Input("cos", dt, 5, 4), g.Input("sin", dt, 5, 4)))
		})
	}
	return cs
}

// bigRowCases are compiled everywhere and run on the GPU only: the
// workloads at full size and a whole-tensor reduction.
func bigRowCases() []rowCase {
	cs := []rowCase{
		{name: "sum/f32/1x16777216", tol: rowSum, big: true, build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, 1, 1<<24).Sum(-1))
		}},
		{name: "argmax/f32/1x16777216", tol: rowExact, big: true, build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, 1, 1<<24).Argmax(-1, false))
		}},
	}
	for _, c := range workloadRowCases(8192, 8192) {
		c.big = true
		cs = append(cs, c)
	}
	return cs
}

// workloadRowCases are W3, W4, W5 and W7 at rows × cols.
func workloadRowCases(rows, cols int) []rowCase {
	tag := fmt.Sprintf("/%dx%d", rows, cols)
	return []rowCase{
		{name: "W3" + tag, tol: rowApprox, build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, rows, cols).Affine(0.125, 0).Softmax(-1))
		}},
		{name: "W4" + tag, tol: rowApprox, build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, rows, cols).LayerNorm(g.Input("w", dtype.F32, cols), g.Input("b", dtype.F32, cols), 1e-5))
		}},
		{name: "W5" + tag, tol: rowApprox, build: func(g *graph.Graph) {
			x, w := g.Input("x", dtype.F32, rows, cols), g.Input("w", dtype.F32, cols)
			inv := x.Mul(x).Mean(true, -1).Add(graph.Scalar(1e-6)).Sqrt().Recip()
			g.Output("out", x.Mul(inv).Mul(w))
		}},
		{name: "W7" + tag, tol: rowSum, build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, rows, cols).Sum(-1))
		}},
	}
}

func (c rowCase) plan(t testing.TB, fused bool) *plan.Plan {
	t.Helper()
	g := graph.New()
	c.build(g)
	p, err := g.Compile(graph.Options{NoFusion: !fused})
	if err != nil {
		t.Fatalf("%s: compile graph: %v", c.name, err)
	}
	return p.Plan()
}

// rowSources renders every kernel of the cases, fused and unfused, for tg.
func rowSources(t testing.TB, cases []rowCase, tg Target, opts ...rowOptions) []*Source {
	t.Helper()
	var out []*Source
	seen := map[string]bool{}
	for _, c := range cases {
		for _, fused := range []bool{true, false} {
			for i, s := range c.plan(t, fused).Steps {
				src, err := render(s.Kernel, tg, defaultOptions, opts...)
				if err != nil {
					t.Errorf("%s: step %d (%s): %v", c.name, i, s.Kernel.Name, err)
					continue
				}
				if !seen[src.Name] {
					seen[src.Name] = true
					out = append(out, src)
				}
			}
		}
	}
	return out
}

func launchNames(s *Source) []string {
	var names []string
	for _, l := range s.Launches {
		names = append(names, l.Name)
	}
	return names
}

// rowInput fills a tensor whose last dim is the row with rows of several
// kinds, by row index mod 8: ordinary values; few distinct values (ties
// everywhere); one NaN; two NaNs; infinities; all equal; signed zeros
// among negative values (max is ±0: the first one counts); a wide
// exponent range with the extreme last. Integers get ordinary, tied, equal
// and extreme rows.
func rowInput(rng *rand.Rand, dt dtype.DType, shape []int) *tensor.Tensor {
	n := ir.Numel(shape)
	L := 1
	if len(shape) > 0 {
		L = shape[len(shape)-1]
	}
	v := make([]float64, n)
	for r := 0; r*max(L, 1) < n; r++ {
		row := v[r*L : (r+1)*L]
		kind := r % 8
		for i := range row {
			switch kind {
			case 1, 5:
				row[i] = float64(rng.IntN(7) - 3)
			default:
				row[i] = rng.Float64()*16 - 8
			}
			if kind == 5 {
				row[i] = 2
			}
			if kind == 6 {
				row[i] = -1 - rng.Float64()
				if rng.IntN(3) == 0 {
					row[i] = []float64{0, math.Copysign(0, -1)}[rng.IntN(2)]
				}
			}
			if kind == 7 {
				row[i] = (rng.Float64() + 0.5) * math.Ldexp(1, rng.IntN(40)-20)
				if rng.IntN(2) == 0 {
					row[i] = -row[i]
				}
			}
		}
		if len(row) == 0 || !dt.IsFloat() {
			if kind == 7 && len(row) > 0 && !dt.IsFloat() {
				row[len(row)-1] = 200
			}
			continue
		}
		switch kind {
		case 2:
			row[rng.IntN(len(row))] = math.NaN()
		case 3:
			row[rng.IntN(len(row))] = math.NaN()
			row[rng.IntN(len(row))] = math.NaN()
		case 4:
			for range max(1, len(row)/50) {
				row[rng.IntN(len(row))] = math.Inf(1 - 2*rng.IntN(2))
			}
		case 7:
			row[len(row)-1] = 1e4
		}
	}
	switch dt {
	case dtype.I64:
		iv := make([]int64, n)
		for i, x := range v {
			iv[i] = int64(x)
			if rng.IntN(50) == 0 {
				iv[i] = []int64{math.MaxInt64, math.MinInt64, -1}[rng.IntN(3)]
			}
		}
		t, _ := tensor.New(iv, shape...)
		return t
	case dtype.U32, dtype.U8:
		for i := range v {
			v[i] = math.Abs(v[i]) * 30
			if rng.IntN(50) == 0 {
				v[i] = 1e12 // saturates
			}
		}
	}
	t, err := tensor.FromFloat64s(dt, v, shape...)
	if err != nil {
		panic(err)
	}
	return t
}

// rowAbsSums is Σ|x| over each row (the last dim) of x.
func rowAbsSums(x *tensor.Tensor) []float64 {
	s := x.Shape()
	L := 1
	if len(s) > 0 {
		L = s[len(s)-1]
	}
	v := x.Float64s()
	if L == 0 {
		return make([]float64, ir.Numel(s[:len(s)-1]))
	}
	out := make([]float64, len(v)/L)
	for i, f := range v {
		out[i/L] += math.Abs(f)
	}
	return out
}

// rowScales is, for each element of an output of shape shape, the largest
// magnitude of the finite values in its last-dim row: the scale at which
// rowApprox allows one rounding's worth of absolute error (a layer norm's
// w·(x − mean)·inv + b cancels to small values whose error is that of its
// terms).
func rowScales(dt dtype.DType, b []byte, shape []int) []float64 {
	v := elems(dt, b)
	L := 1
	if len(shape) > 0 {
		L = max(1, shape[len(shape)-1])
	}
	out := make([]float64, len(v))
	for r := 0; r*L < len(v); r++ {
		m := 0.0
		for i := r * L; i < (r+1)*L; i++ {
			if f := math.Abs(value(dt, v[i])); f > m && !math.IsInf(f, 0) {
				m = f
			}
		}
		for i := r * L; i < (r+1)*L; i++ {
			out[i] = m
		}
	}
	return out
}

// compareRow checks got against want under tol; sums bounds the absolute
// error of each element for rowSum, scales (rowScales) for rowApprox, where
// growth (≥ 1) widens the f32 absolute term for long rows: the CPU twin
// sums a row in 8 running float32 sums of L/8 terms, whose rounding error
// grows like √L on random data and like L on rows of few distinct values
// (repeated addends round the same way every time), so beyond about a
// thousand terms the twin, not the GPU's tree of short sums, dominates the
// difference (a layer norm over 8192 small integers: 1e-5 relative).
func compareRow(t *testing.T, name string, dt dtype.DType, want, got []byte, tol rowTol, sums, scales []float64, growth float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("%s: %d bytes, want %d", name, len(got), len(want))
		return
	}
	w, g := elems(dt, want), elems(dt, got)
	bad := 0
	for i := range w {
		if w[i] == g[i] {
			continue
		}
		wv, gv := value(dt, w[i]), value(dt, g[i])
		ok := false
		switch {
		case dt.IsFloat() && wv != wv && gv != gv:
			ok = true // NaN payloads may differ
		case !dt.IsFloat() || tol == rowExact:
		case dt.IsReduced():
			d := ordered(w[i], dt.Size()) - ordered(g[i], dt.Size())
			ok = d >= -1 && d <= 1
			if tol == rowSum && sums != nil {
				ok = ok || math.Abs(wv-gv) <= 1e-5*sums[i]
			}
			if tol == rowApprox && scales != nil {
				eps := math.Ldexp(1, -11)
				switch dt {
				case dtype.BF16:
					eps = math.Ldexp(1, -8)
				case dtype.F8E4M3:
					eps = math.Ldexp(1, -4)
				}
				ok = ok || math.Abs(wv-gv) <= eps*scales[i]
			}
		case tol == rowSum:
			bound := 1e-5
			if dt == dtype.F64 {
				bound = 1e-13
			}
			ok = sums != nil && math.Abs(wv-gv) <= bound*sums[i]
		case dt == dtype.F64:
			ok = math.Abs(wv-gv) <= 1e-12*math.Max(math.Abs(wv), math.Abs(gv))+1e-13+1e-15*scales[i]
		default:
			ok = math.Abs(wv-gv) <= 2e-6*math.Max(math.Abs(wv), math.Abs(gv))+1e-7+2e-7*growth*scales[i]
		}
		if !ok {
			if bad < 6 {
				t.Errorf("%s[%d]: got %#x (%g), want %#x (%g)", name, i, g[i], gv, w[i], wv)
			}
			bad++
		}
	}
	if bad > 6 {
		t.Errorf("%s: %d of %d elements differ", name, bad, len(w))
	}
}

// checkRowCases runs every case's plans, fused and unfused, on r (kernels
// rendered for tg with row options opt) and compares both with the CPU
// twin under the case's tolerance.
func checkRowCases(t *testing.T, r runner, tg Target, cases []rowCase, opt rowOptions) {
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(ci), 11))
			p := c.plan(t, true)
			inputs := map[string]*tensor.Tensor{}
			for _, b := range p.Inputs {
				inputs[b.Name] = rowInput(rng, b.DType, b.Shape)
			}
			want, err := lexec.Run(context.Background(), cpu.New(), p, inputs)
			if err != nil {
				t.Fatalf("CPU twin: %v", err)
			}
			var sums []float64
			if c.tol == rowSum {
				sums = rowAbsSums(inputs["x"])
			}
			growth := 1.0
			for _, s := range p.Steps {
				if s.Kernel.RowAxes > 0 {
					growth = max(growth, float64(s.Kernel.RowLen())/1024)
				}
			}
			for _, fused := range []bool{true, false} {
				pl := p
				if !fused {
					pl = c.plan(t, false)
				}
				got := runRowPlan(t, r, tg, opt, pl, inputs)
				for _, b := range pl.Outputs {
					wb := want[b.Name].Bytes()
					compareRow(t, fmt.Sprintf("%s (fused=%v)", b.Name, fused), b.DType, wb, got[b.Name], c.tol, sums, rowScales(b.DType, wb, b.Shape), growth)
				}
			}
		})
	}
}

// runRowPlan is runPlan with row options.
func runRowPlan(t *testing.T, r runner, tg Target, opt rowOptions, p *plan.Plan, inputs map[string]*tensor.Tensor) map[string][]byte {
	t.Helper()
	bufs := make([][]byte, len(p.Buffers))
	for _, b := range p.Inputs {
		bufs[b.ID] = inputs[b.Name].Bytes()
	}
	for i, s := range p.Steps {
		k := s.Kernel
		src, err := render(k, tg, defaultOptions, opt)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		var ins [][]byte
		for _, o := range k.Ins {
			ins = append(ins, bufs[o.Buf.ID])
		}
		if k.Out.Numel() == 0 {
			bufs[k.Out.ID] = nil
			continue
		}
		out, err := r.run(src, ins, k.Out.Bytes())
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, src.Name, err)
		}
		bufs[k.Out.ID] = out
	}
	outs := map[string][]byte{}
	for _, b := range p.Outputs {
		outs[b.Name] = bufs[b.ID]
	}
	return outs
}

// altRowOptions exercise the other shapes of the generator: small groups
// (many chunks per lane, the recompute path), no register cache, two
// stages for every eligible reduction.
var altRowOptions = []rowOptions{
	{vecsPerThread: 16, maxGroup: 64, cacheWords: 64, splitRows: 512, splitBlock: 256, splitVecs: 8},
	{vecsPerThread: 2, maxGroup: 1024, cacheWords: 0, splitRows: 1 << 30, splitBlock: 64, splitVecs: 1},
}

var rowEmu struct {
	once sync.Once
	e    *emulator
	err  error
	took time.Duration
}

// rowEmulator builds the emulator of every row case (all row options).
func rowEmulator(t *testing.T) *emulator {
	t.Helper()
	rowEmu.once.Do(func() {
		start := time.Now()
		var small []rowCase
		for _, c := range rowCases() {
			if !c.big {
				small = append(small, c)
			}
		}
		srcs := rowSources(t, small, emuTarget)
		for _, o := range altRowOptions {
			srcs = append(srcs, rowSources(t, small, emuTarget, o)...)
		}
		seen := map[string]bool{}
		var uniq []*Source
		for _, s := range srcs {
			if !seen[s.Name] {
				seen[s.Name] = true
				uniq = append(uniq, s)
			}
		}
		rowEmu.e, rowEmu.err = buildEmulator(uniq)
		rowEmu.took = time.Since(start)
	})
	if rowEmu.err != nil {
		if strings.HasPrefix(rowEmu.err.Error(), "no host C++ compiler") && os.Getenv("CI") != "true" {
			t.Skipf("host emulation skipped: %v", rowEmu.err)
		}
		t.Fatalf("building the host emulator: %v", rowEmu.err)
	}
	return rowEmu.e
}

// TestEmulateRows runs every row case on the host emulation (with the
// default row options and the alternatives) and compares with the CPU twin.
func TestEmulateRows(t *testing.T) {
	e := rowEmulator(t)
	t.Logf("row emulator built in %v", rowEmu.took.Round(time.Millisecond))
	var small []rowCase
	for _, c := range rowCases() {
		if !c.big {
			small = append(small, c)
		}
	}
	t.Run("default", func(t *testing.T) { checkRowCases(t, e, emuTarget, small, defaultRowOptions) })
	for i, o := range altRowOptions {
		t.Run(fmt.Sprintf("alt%d", i), func(t *testing.T) { checkRowCases(t, e, emuTarget, small, o) })
	}
}

// TestRowPlans checks what the planner hands the generator for the
// workloads and the shapes of the rendered kernels: one launch, a register
// cache for W3–W5, two stages for a whole-tensor sum.
func TestRowPlans(t *testing.T) {
	tg := Target{Platform: NVIDIA, Arch: "sm_90"}
	for _, c := range workloadRowCases(8192, 8192) {
		p := c.plan(t, true)
		if len(p.Steps) != 1 || p.Steps[0].Kernel.RowAxes != 1 {
			var b strings.Builder
			p.WriteText(&b)
			t.Fatalf("%s: want one row kernel:\n%s", c.name, b.String())
		}
		k := p.Steps[0].Kernel
		g, err := newRowGen(k, tg, defaultRowOptions)
		if err != nil {
			t.Fatal(err)
		}
		src, err := Rows(k, tg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d passes, group %d, block %d, %d chunks of %d per lane, cache %v, %d launches", c.name, g.passes, g.main.group, g.main.block, g.main.iters, g.vec, g.cache, len(src.Launches))
		if len(src.Launches) != 1 || src.ScratchBytes != 0 {
			t.Errorf("%s: %d launches, %d scratch bytes", c.name, len(src.Launches), src.ScratchBytes)
		}
		if g.passes > 1 && !g.cache {
			t.Errorf("%s: %d passes without the register cache", c.name, g.passes)
		}
		if !strings.Contains(src.Body, "loom_ld16_f32") || (c.name[:2] != "W7" && !strings.Contains(src.Body, "loom_st16_f32")) {
			t.Errorf("%s: no 16-byte loads and stores", c.name)
		}
	}
	for _, c := range bigRowCases()[:2] {
		k := c.plan(t, true).Steps[0].Kernel
		src, err := Rows(k, tg)
		if err != nil {
			t.Fatal(err)
		}
		if len(src.Launches) != 2 || src.ScratchBytes == 0 || src.Launches[1].Name != src.Name+"_combine" {
			t.Errorf("%s: want two stages, got %+v scratch %d", c.name, src.Launches, src.ScratchBytes)
		}
		t.Logf("%s: %+v, %d scratch bytes", c.name, src.Launches, src.ScratchBytes)
	}
	// Wave sizes: the same kernel for wave 32 and 64 differs in its
	// shuffles and is checked against the prelude's LOOM_WAVE.
	k := workloadRowCases(64, 1000)[0].plan(t, true).Steps[0].Kernel
	for _, wave := range []int{32, 64} {
		src, err := Rows(k, Target{Platform: AMD, Arch: "gfx90a", WaveSize: wave})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(src.Code, fmt.Sprintf("static_assert(LOOM_WAVE == %d", wave)) || !strings.Contains(src.Code, fmt.Sprintf("#define LOOM_WAVE %d\n", wave)) {
			t.Errorf("wave %d: the kernel does not check its wave size", wave)
		}
	}
	// Refusals.
	p := workloadRowCases(4, 8)[3].plan(t, true)
	k = p.Steps[0].Kernel
	bad := &plan.Kernel{Name: k.Name, Shape: k.Shape, Ins: k.Ins, Instrs: k.Instrs, Out: k.Out}
	if _, err := Rows(bad, tg); err == nil {
		t.Error("Rows accepted a kernel without row axes")
	}
	if _, err := Elementwise(k, tg); err == nil {
		t.Error("Elementwise accepted a row kernel")
	}
	if src, err := Kernel(k, tg); err != nil || !src.Row {
		t.Errorf("Kernel did not route a row kernel to Rows: %v", err)
	}
}

// TestCompileRowsAMD compiles every row kernel (all cases, the big ones
// too) with hiprtc for gfx90a (wave 64) and gfx1030 (wave 32).
func TestCompileRowsAMD(t *testing.T) {
	c := amdCompiler(t)
	cases := append(rowCases(), bigRowCases()...)
	for _, arch := range []string{"gfx90a", "gfx1030"} {
		t.Run(arch, func(t *testing.T) {
			t.Parallel()
			tg := Target{Platform: AMD, Arch: arch}
			start := time.Now()
			srcs := rowSources(t, cases, tg)
			units := compileAll(t, c, tg, arch, srcs)
			t.Logf("%d row kernels in %d translation units: %v", len(srcs), units, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestRowSourcesDeterministic: rendering twice gives the same bytes, and
// the names differ between distinct kernels.
func TestRowSourcesDeterministic(t *testing.T) {
	a := rowSources(t, rowCases()[:40], amd90a)
	b := rowSources(t, rowCases()[:40], amd90a)
	if len(a) != len(b) {
		t.Fatalf("%d vs %d sources", len(a), len(b))
	}
	names := map[string]bool{}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal([]byte(a[i].Code), []byte(b[i].Code)) {
			t.Errorf("%s rendered differently", a[i].Name)
		}
		if names[a[i].Name] {
			t.Errorf("duplicate name %s", a[i].Name)
		}
		names[a[i].Name] = true
	}
}

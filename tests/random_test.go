package tests

import (
	"context"
	"github.com/loomgraph/loom/ir"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// runGraph compiles g (fused or not) and runs it on the CPU.
func runGraph(t *testing.T, g *graph.Graph, fused bool, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, *graph.Program) {
	t.Helper()
	p, err := g.Compile(graph.Options{NoFusion: !fused, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), cpu.New(), inputs)
	if err != nil {
		t.Fatal(err)
	}
	return out, p
}

// TestRandMoments draws 2²⁰ values per float dtype through the graph API
// on the CPU and checks the distributions the builders promise: rand in
// [lo, hi) with the uniform's mean and variance, randn with the mean and
// standard deviation asked for, no skew and a normal's kurtosis. Bounds
// are five standard errors (f16/bf16 rounding adds its own small variance,
// (spacing)²/12, allowed for) and the seeds are fixed, so the test is
// deterministic.
func TestRandMoments(t *testing.T) {
	const n = 1 << 20
	const lo, hi, mean, std = -2.0, 5.0, 3.0, 0.5
	for _, dt := range ir.RandDTypes.List() {
		g := graph.New()
		g.Output("u", g.Rand(dt, 1234, lo, hi, 1024, n/1024))
		g.Output("z", g.Randn(dt, 99, mean, std, n))
		out, _ := runGraph(t, g, true, nil)
		u, z := out["u"].Float64s(), out["z"].Float64s()
		spacing := map[dtype.DType]float64{dtype.F32: 0x1p-21, dtype.F64: 0x1p-50, dtype.F16: 0x1p-8, dtype.BF16: 0x1p-5}[dt]
		q := spacing * spacing / 12 // rounding's variance, at the largest spacing met
		se := func(v float64) float64 { return 5 * math.Sqrt(v/n) }

		um, uv, _, _ := moments(u)
		w := hi - lo
		if slices.Min(u) < lo || slices.Max(u) >= hi {
			t.Errorf("%v rand: values in [%v, %v], want [%v, %v)", dt, slices.Min(u), slices.Max(u), lo, hi)
		}
		if math.Abs(um-(lo+hi)/2) > se(w*w/12)+spacing || math.Abs(uv-w*w/12) > se(w*w*w*w/180)+q+w*spacing {
			t.Errorf("%v rand: mean %.5f variance %.5f, want %.5f and %.5f", dt, um, uv, (lo+hi)/2, w*w/12)
		}
		zm, zv, skew, kurt := moments(z)
		if math.Abs(zm-mean) > se(std*std)+spacing || math.Abs(zv-std*std) > se(2*std*std*std*std)+q ||
			math.Abs(skew) > se(6) || math.Abs(kurt) > se(24) {
			t.Errorf("%v randn: mean %.5f variance %.5f skewness %.4f excess kurtosis %.4f, want %v, %v, 0, 0", dt, zm, zv, skew, kurt, mean, std*std)
		}
		t.Logf("%v: rand mean %.5f var %.5f; randn mean %.5f var %.6f skew %.4f kurt %.4f", dt, um, uv, zm, zv, skew, kurt)
	}
}

func moments(x []float64) (mean, variance, skew, kurt float64) {
	n := float64(len(x))
	for _, v := range x {
		mean += v
	}
	mean /= n
	var m2, m3, m4 float64
	for _, v := range x {
		d := v - mean
		m2 += d * d
		m3 += d * d * d
		m4 += d * d * d * d
	}
	m2, m3, m4 = m2/n, m3/n, m4/n
	return mean, m2, m3 / math.Pow(m2, 1.5), m4/(m2*m2) - 3
}

// TestRandFusion checks that random values fuse into their consumers — a
// dropout mask x·(rand ≥ p)/(1 − p) is one kernel, with no random tensor
// in memory, also after a softmax (one row kernel) — and that fused and
// unfused plans give the same bits, which also equal the mask computed
// from the random tensor drawn on its own.
func TestRandFusion(t *testing.T) {
	for _, dt := range ir.RandDTypes.List() {
		const rows, cols = 37, 301
		xs := make([]float64, rows*cols)
		for i := range xs {
			xs[i] = math.Sin(float64(i)) * 3
		}
		x, err := tensor.FromFloat64s(dt, xs, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		build := func(withSoftmax bool) *graph.Graph {
			g := graph.New()
			in := g.Input("x", dt, rows, cols)
			if withSoftmax {
				in = in.Softmax(-1)
			}
			keep := g.RandAt(dt, 77, 5, 0, 1, rows, cols).Ge(graph.Scalar(0.2)).Cast(dt)
			g.Output("y", in.Mul(keep).Affine(1/0.8, 0))
			return g
		}
		// The random values alone.
		g := graph.New()
		g.Output("r", g.RandAt(dt, 77, 5, 0, 1, rows, cols))
		alone, _ := runGraph(t, g, true, nil)
		for _, sm := range []bool{false, true} {
			fused, fp := runGraph(t, build(sm), true, map[string]*tensor.Tensor{"x": x})
			unfused, _ := runGraph(t, build(sm), false, map[string]*tensor.Tensor{"x": x})
			if !slices.Equal(fused["y"].Bytes(), unfused["y"].Bytes()) {
				t.Errorf("%v softmax=%v: fused and unfused differ", dt, sm)
			}
			// One kernel, reading only x: the random values are computed
			// inside it, never stored.
			if st := fp.Plan().Steps; len(st) != 1 || len(st[0].Kernel.Ins) != 1 {
				var b strings.Builder
				fp.Dump(&b, "plan")
				t.Errorf("%v softmax=%v: want one kernel reading only x:\n%s", dt, sm, b.String())
			}
			if sm {
				continue
			}
			// y = x·(r ≥ 0.2)·1.25, each step rounded to dt.
			r, y := alone["r"].Float64s(), fused["y"].Float64s()
			xr := x.Float64s()
			for i := range y {
				m := 0.0
				if r[i] >= roundTo(dt, 0.2) {
					m = 1
				}
				if want := roundTo(dt, roundTo(dt, xr[i]*m)*roundTo(dt, 1/0.8)); y[i] != want && !(dt == dtype.F64 && math.Abs(y[i]-want) <= 1e-15*math.Abs(want)) {
					t.Fatalf("%v: y[%d] = %v, want %v (x %v, r %v)", dt, i, y[i], want, xr[i], r[i])
				}
			}
		}
	}
}

// roundTo rounds v to dt through a one-element tensor.
func roundTo(dt dtype.DType, v float64) float64 {
	tt, _ := tensor.Zeros(dt, 1)
	tt.SetFloat64(0, v)
	return tt.Float64(0)
}

// TestRandStream checks the offset: a tensor at offset o holds positions
// o, o+1, …, so RandAt(o) equals the tail of a longer tensor from 0, for
// offsets that do and do not line up with Philox blocks, for every dtype;
// the same call gives the same values (and the same node), and another
// seed other values.
func TestRandStream(t *testing.T) {
	for _, dt := range ir.RandDTypes.List() {
		for _, o := range []int{0, 1, 2, 3, 4, 5, 4097} {
			g := graph.New()
			g.Output("all", g.Randn(dt, 5, 0, 1, 9000))
			g.Output("tail", g.RandnAt(dt, 5, uint64(o), 0, 1, 3, 1000))
			g.Output("uall", g.Rand(dt, 5, 0, 1, 9000))
			g.Output("utail", g.RandAt(dt, 5, uint64(o), 0, 1, 3000))
			out, _ := runGraph(t, g, true, nil)
			all, tail := out["all"].Float64s(), out["tail"].Float64s()
			uall, utail := out["uall"].Float64s(), out["utail"].Float64s()
			for i := range tail {
				if math.Float64bits(tail[i]) != math.Float64bits(all[o+i]) || math.Float64bits(utail[i]) != math.Float64bits(uall[o+i]) {
					t.Fatalf("%v offset %d: element %d is %v / %v, want position %d's %v / %v", dt, o, i, tail[i], utail[i], o+i, all[o+i], uall[o+i])
				}
			}
		}
	}
	g := graph.New()
	a, b := g.Rand(dtype.F32, 1, 0, 1, 100), g.Rand(dtype.F32, 1, 0, 1, 100)
	if a.Node() != b.Node() {
		t.Errorf("the same Rand twice gives two nodes")
	}
	g.Output("a", a)
	g.Output("c", g.Rand(dtype.F32, 2, 0, 1, 100))
	g.Output("d", g.Rand(dtype.F32, 1<<32, 0, 1, 100)) // the seed's high word counts
	out, _ := runGraph(t, g, true, nil)
	again, _ := runGraph(t, g, true, nil)
	if !slices.Equal(out["a"].Bytes(), again["a"].Bytes()) {
		t.Errorf("two runs of one program differ")
	}
	same := 0
	av, cv, dv := out["a"].Data().([]float32), out["c"].Data().([]float32), out["d"].Data().([]float32)
	for i := range av {
		if av[i] == cv[i] || av[i] == dv[i] {
			same++
		}
	}
	if same > 2 {
		t.Errorf("seeds 1, 2 and 2³² share %d of 100 values", same)
	}
}

// TestRandEdges: rank-0 and empty tensors, the [lo, hi) rule where
// rounding reaches hi (bf16 [1, 2): u ≥ 1 − 2⁻⁸ rounds to 2, which becomes
// 2 − 2⁻⁷), f32 [1, 2) (1 + u rounds to 2 only for u = 1 − 2⁻²⁴), views of random tensors (transposed: computed
// in memory, then read), and RandLike/RandnLike.
func TestRandEdges(t *testing.T) {
	g := graph.New()
	g.Output("rank0", g.Randn(dtype.F32, 3, 0, 1))
	g.Output("empty", g.Rand(dtype.F16, 3, 0, 1, 4, 0, 2))
	g.Output("bf16", g.Rand(dtype.BF16, 3, 1, 2, 1<<16))
	g.Output("f32", g.Rand(dtype.F32, 3, 1, 2, 1<<16))
	r := g.Rand(dtype.F32, 4, 0, 1, 30, 40)
	g.Output("rt", r.T().Contiguous())
	g.Output("r", r)
	x := g.Input("x", dtype.F64, 3, 4)
	g.Output("like", x.RandLike(8, -1, 1))
	g.Output("nlike", x.RandnLike(8, 10, 1))
	xs, _ := tensor.Zeros(dtype.F64, 3, 4)
	for _, fused := range []bool{true, false} {
		out, _ := runGraph(t, g, fused, map[string]*tensor.Tensor{"x": xs})
		if v := out["rank0"]; len(v.Shape()) != 0 || len(v.Data().([]float32)) != 1 || math.Abs(float64(v.Data().([]float32)[0])) > 6 {
			t.Errorf("rank-0 randn: %v %v", v.Shape(), v.Data().([]float32))
		}
		if v := out["empty"]; !slices.Equal(v.Shape(), []int{4, 0, 2}) || len(v.Bytes()) != 0 {
			t.Errorf("empty rand: %v, %d bytes", v.Shape(), len(v.Bytes()))
		}
		for _, name := range []string{"bf16", "f32"} {
			v := out[name].Float64s()
			ones := 0
			for _, e := range v {
				if e < 1 || e >= 2 {
					t.Fatalf("%s rand [1, 2): %v", name, e)
				}
				if e == 1 {
					ones++
				}
			}
			// bf16 has 128 values in [1, 2), 2⁻⁷ apart; rounding gives
			// each the sums within 2⁻⁸ of it, so 1 has only its upper half
			// share, 1/256, and the top value 2 − 2⁻⁷ its own 1/128 plus
			// the 1/256 that rounds to 2.
			if name == "bf16" {
				top := 0
				for _, e := range v {
					if e == 2-0x1p-7 {
						top++
					}
				}
				n := float64(len(v))
				for _, c := range []struct {
					what      string
					got       int
					wantShare float64
				}{{"ones", ones, 1.0 / 256}, {"tops", top, 1.5 / 128}} {
					if want := c.wantShare * n; math.Abs(float64(c.got)-want) > 5*math.Sqrt(want) {
						t.Errorf("bf16 rand [1, 2): %d %s, want about %.0f", c.got, c.what, want)
					}
				}
			}
		}
		rv, rtv := out["r"].Data().([]float32), out["rt"].Data().([]float32)
		for i := range 30 {
			for j := range 40 {
				if rv[i*40+j] != rtv[j*30+i] {
					t.Fatalf("transposed rand differs at %d,%d", i, j)
				}
			}
		}
		if l := out["like"]; l.DType() != dtype.F64 || !slices.Equal(l.Shape(), []int{3, 4}) || slices.Max(l.Float64s()) >= 1 || slices.Min(l.Float64s()) < -1 {
			t.Errorf("RandLike: %v%v %v", l.DType(), l.Shape(), l.Float64s())
		}
		if l := out["nlike"]; l.DType() != dtype.F64 || slices.Min(l.Float64s()) < 10-9 {
			t.Errorf("RandnLike: %v%v %v", l.DType(), l.Shape(), l.Float64s())
		}
	}
}

// TestRandErrors: bad arguments are errors naming the op, the dtype and
// shape and the parameter at fault; nothing panics.
func TestRandErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(g *graph.Graph) *graph.Tensor
		frags []string
	}{
		{"int dtype", func(g *graph.Graph) *graph.Tensor { return g.Rand(dtype.U8, 1, 0, 1, 3) }, []string{"rand", "u8", "floats"}},
		{"i64 randn", func(g *graph.Graph) *graph.Tensor { return g.Randn(dtype.I64, 1, 0, 1, 3) }, []string{"randn", "i64"}},
		{"lo = hi", func(g *graph.Graph) *graph.Tensor { return g.Rand(dtype.F32, 1, 1, 1, 3) }, []string{"rand", "f32[3]", "lo=1", "hi=1", "lo < hi"}},
		{"lo > hi", func(g *graph.Graph) *graph.Tensor { return g.RandAt(dtype.F64, 1, 9, 2, 1, 3) }, []string{"rand", "lo=2", "hi=1"}},
		{"NaN lo", func(g *graph.Graph) *graph.Tensor { return g.Rand(dtype.F32, 1, math.NaN(), 1, 3) }, []string{"rand", "lo=NaN", "not finite"}},
		{"inf hi", func(g *graph.Graph) *graph.Tensor { return g.Rand(dtype.F32, 1, 0, math.Inf(1), 3) }, []string{"rand", "hi=+Inf"}},
		{"f16 overflow", func(g *graph.Graph) *graph.Tensor { return g.Rand(dtype.F16, 1, 0, 1e5, 2, 3) }, []string{"rand", "f16[2 3]", "hi=100000", "overflows f16"}},
		{"f32 width", func(g *graph.Graph) *graph.Tensor { return g.Rand(dtype.F32, 1, -3e38, 3e38, 3) }, []string{"rand", "hi − lo", "overflows float32"}},
		{"negative std", func(g *graph.Graph) *graph.Tensor { return g.Randn(dtype.BF16, 1, 0, -1, 3) }, []string{"randn", "bf16[3]", "std=-1", "negative"}},
		{"NaN mean", func(g *graph.Graph) *graph.Tensor { return g.RandnAt(dtype.F32, 1, 2, math.NaN(), 1, 3) }, []string{"randn", "mean=NaN"}},
		{"std overflows f16", func(g *graph.Graph) *graph.Tensor { return g.Randn(dtype.F16, 1, 0, 1e6, 3) }, []string{"randn", "std=1e+06", "overflows f16"}},
		{"negative dim", func(g *graph.Graph) *graph.Tensor { return g.Rand(dtype.F32, 1, 0, 1, 3, -1) }, []string{"rand", "-1"}},
		{"invalid dtype", func(g *graph.Graph) *graph.Tensor { return g.Randn(dtype.DType(99), 1, 0, 1, 3) }, []string{"randn", "invalid dtype"}},
		{"like int", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.U32, 2).RandLike(1, 0, 1) }, []string{"rand_like", "u32"}},
		{"like scalar", func(g *graph.Graph) *graph.Tensor { return graph.Scalar(1).RandnLike(1, 0, 1) }, []string{"randn_like", "scalar"}},
		{"like bad range", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 2).RandLike(1, 3, 2) }, []string{"rand_like", "f32[2]", "lo=3"}},
		{"nil graph", func(*graph.Graph) *graph.Tensor { var g *graph.Graph; return g.Rand(dtype.F32, 1, 0, 1, 3) }, []string{"rand", "nil graph"}},
		{"nil tensor", func(*graph.Graph) *graph.Tensor { var x *graph.Tensor; return x.RandLike(1, 0, 1) }, []string{"rand_like", "nil tensor"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("panic: %v", r)
				}
			}()
			g := graph.New()
			y := c.build(g)
			err := y.Err()
			if err == nil {
				t.Fatalf("no error")
			}
			for _, f := range c.frags {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("error %q does not mention %q", err, f)
				}
			}
			if y.Graph() == g {
				g.Output("y", y)
				if _, cerr := g.Compile(graph.Options{}); cerr == nil {
					t.Errorf("Compile accepted a graph with the error")
				}
			}
		})
	}
}

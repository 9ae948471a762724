package cpu_test

import (
	"context"
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// f8Sources are cast inputs that hit every f8e4m3 rounding rule: the
// values of all codes, their midpoints (ties to even), the points just
// beyond a midpoint that a rounding through float32 would make a tie
// (round-to-odd from f64 and i64), the saturation region (448, 464, 480,
// far beyond, ±Inf), underflow (2^-10 and below), ±0 and NaN; for integer
// dtypes, every integer in [-500, 500] and the range bounds.
func f8Sources(from dtype.DType) []float64 {
	var v []float64
	if from.IsInt() {
		for i := -500; i <= 500; i++ {
			v = append(v, float64(i))
		}
		return append(v, math.MaxInt32, -1<<40, 1<<62)
	}
	for c := 0; c < 0x7f; c++ {
		a := dtype.Float8E4M3(c).Float64()
		b := 480.0
		if c < 0x7e {
			b = dtype.Float8E4M3(c + 1).Float64()
		}
		m := (a + b) / 2
		v = append(v, a, -a, m, -m, m*(1+0x1p-40), -m*(1-0x1p-40))
	}
	return append(v, 449, 463.9, 464.1, 1000, 65504, 1e30, 0x1p-10, 0x1p-12, 1e-40,
		math.Inf(1), math.Inf(-1), math.NaN(), math.Copysign(math.NaN(), -1), math.Copysign(0, -1))
}

// wantF8 is the f8e4m3 code a cast of v (a value of from) gives: the dtype
// package's one-step conversion (Candle's float8 crate), with every NaN
// stored as 0x7f.
func wantF8(v float64) dtype.Float8E4M3 {
	if v != v {
		return 0x7f
	}
	return dtype.ToF8E4M3From64(v)
}

// wantFromF8 is what a cast of f8e4m3 code c to dt holds, as float64 (Rust
// `as` for integers: truncation, saturation, NaN → 0).
func wantFromF8(c dtype.Float8E4M3, dt dtype.DType) float64 {
	v := c.Float64()
	switch dt {
	case dtype.U8:
		return float64(tensor.SatInt(v, 0, 255))
	case dtype.U32:
		return float64(tensor.SatInt(v, 0, math.MaxUint32))
	case dtype.I64:
		return float64(tensor.SatInt(v, math.MinInt64, math.MaxInt64))
	}
	return v // every f8e4m3 value is exact in every float dtype
}

func runGraph(t *testing.T, g *graph.Graph, fused bool, in map[string]*tensor.Tensor) map[string]*tensor.Tensor {
	t.Helper()
	p, err := g.Compile(graph.Options{NoFusion: !fused, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), cpu.New().Poison(0xA5), in)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCastsToF8: every dtype → f8e4m3, stored (unfused) and through the
// instruction's rounder inside a fused kernel (cast to f8e4m3, then to f64),
// bit for bit against the dtype package, on strided reads too (every second
// element of a twice-as-long input).
func TestCastsToF8(t *testing.T) {
	for _, from := range dtype.All {
		vals := f8Sources(from)
		n := len(vals)
		// Interleave the values with filler: x[2k] = vals[k].
		wide := make([]float64, 2*n)
		for k, v := range vals {
			wide[2*k], wide[2*k+1] = v, 7
		}
		x, err := tensor.FromFloat64s(from, wide, n, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, fused := range []bool{false, true} {
			g := graph.New()
			xs := g.Input("x", from, n, 2).Narrow(1, 0, 1).Squeeze(1)
			g.Output("y", xs.Cast(dtype.F8E4M3))
			out := runGraph(t, g, fused, map[string]*tensor.Tensor{"x": x})
			got, err := tensor.Values[dtype.Float8E4M3](out["y"])
			if err != nil {
				t.Fatal(err)
			}
			// The f8e4m3 value as an intermediate: fused, it never reaches
			// memory and is the instruction's rounder's work.
			g = graph.New()
			xs = g.Input("x", from, n, 2).Narrow(1, 0, 1).Squeeze(1)
			g.Output("w", xs.Cast(dtype.F8E4M3).Cast(dtype.F64).Mul(graph.Scalar(2)))
			w := runGraph(t, g, fused, map[string]*tensor.Tensor{"x": x})["w"].Data().([]float64)
			for k := range n {
				src := x.Float64(2 * k) // the source value as stored in from
				want := wantF8(src)
				if got[k] != want {
					t.Errorf("fused=%v: %v %v → f8e4m3 = %#02x (%v), want %#02x (%v)", fused, from, src, uint8(got[k]), got[k].Float64(), uint8(want), want.Float64())
				}
				if ww := 2 * want.Float64(); w[k] != ww && !(w[k] != w[k] && ww != ww) {
					t.Errorf("fused=%v: %v %v → f8e4m3 → f64 ·2 = %v, want %v", fused, from, src, w[k], ww)
				}
			}
		}
	}
}

// TestCastsFromF8: all 256 codes → every dtype, unfused and fused (after an
// f8e4m3 multiplication, rounded by the instruction's rounder when fused),
// against the dtype package's widening and Rust `as` rules.
func TestCastsFromF8(t *testing.T) {
	codes := make([]dtype.Float8E4M3, 256)
	for i := range codes {
		codes[i] = dtype.Float8E4M3(i)
	}
	x, _ := tensor.New(codes, 256)
	for _, to := range dtype.All {
		for _, fused := range []bool{false, true} {
			g := graph.New()
			xi := g.Input("x", dtype.F8E4M3, 256)
			g.Output("y", xi.Cast(to))
			g.Output("z", xi.Mul(graph.Scalar(1.125)).Cast(to)) // rounded to f8e4m3 by the rounder when fused
			out := runGraph(t, g, fused, map[string]*tensor.Tensor{"x": x})
			for _, name := range []string{"y", "z"} {
				for i, c := range codes {
					e, what := c, "x"
					if name == "z" {
						e, what = wantF8(c.Float64()*1.125), "x·1.125" // exact in f64, rounded once
					}
					got, want := out[name].Float64(i), wantFromF8(e, to)
					if got != want && !(got != got && want != want) || got == 0 && math.Signbit(got) != math.Signbit(want) {
						t.Errorf("fused=%v: x = f8e4m3 %#02x: (%s) → %v = %v, want %v", fused, uint8(c), what, to, got, want)
					}
				}
			}
			if to == dtype.F8E4M3 {
				// A copy keeps every code but 0xff, which becomes the
				// canonical NaN 0x7f.
				got := out["y"].Data().([]dtype.Float8E4M3)
				for i, c := range codes {
					if want := map[bool]dtype.Float8E4M3{true: 0x7f, false: c}[c == 0xff]; got[i] != want {
						t.Errorf("fused=%v: copy of %#02x = %#02x", fused, uint8(c), uint8(got[i]))
					}
				}
			}
		}
	}
}

package codegen

import (
	"math"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// The f8e4m3 conversion cases: the prelude's portable loom_f32_to_f8e4m3
// and loom_f8e4m3_to_f32 must be bit-exact with the CPU twin (exec/cpu
// toF8 and the dtype table) on every input where a rounding rule decides:
// every code's value and its float32 neighbours, every midpoint between
// neighbouring codes and its neighbours (ties to even, both directions),
// the saturation region around 448, 464 and 480, ±0, ±Inf, both NaN signs,
// float32 subnormals and huge values; from f64, the points just beyond a
// midpoint that a rounding through f32 would make a tie (the round-to-odd
// path); and the widening of all 256 codes. They run wherever the
// runnable cases run: the host emulation and the GPU suite.

// f8Points are the conversion inputs above, both signs.
func f8Points() []float64 {
	var pts []float64
	add := func(v float64) { pts = append(pts, v, -v) }
	value := func(c int) float64 { // the format's definition: bias 7, 3 mantissa bits
		if e := c >> 3; e > 0 {
			return (1 + float64(c&7)/8) * math.Ldexp(1, e-7)
		}
		return float64(c) * 0x1p-9
	}
	for c := 0; c <= 0x7e; c++ {
		v, next := value(c), 480.0 // 480: where the NaN code 0x7f would be
		if c < 0x7e {
			next = value(c + 1)
		}
		mid := (v + next) / 2
		add(v)
		add(float64(math.Nextafter32(float32(v), 0)))
		add(float64(math.Nextafter32(float32(v), 1e30)))
		add(mid)
		add(float64(math.Nextafter32(float32(mid), 0)))
		add(float64(math.Nextafter32(float32(mid), 1e30)))
		add(mid * (1 + 0x1p-40)) // f64 only: rounds to the tie in f32
		add(mid * (1 - 0x1p-40))
	}
	for _, v := range []float64{math.Inf(1), math.NaN(), 0x1p-10, 0x1p-11, 1e-40, 1e-45, 500, 1000, 65504, 1e30, math.MaxFloat32} {
		add(v)
	}
	return pts
}

func f8Cases() []graphCase {
	pts := f8Points()
	n := len(pts)
	fixed := func(dt dtype.DType, vals []float64) func(string) *tensor.Tensor {
		return func(string) *tensor.Tensor {
			t, err := tensor.FromFloat64s(dt, vals, len(vals)) // exact: float32(v) of f32 points, -NaN kept
			if err != nil {
				panic(err)
			}
			return t
		}
	}
	all := func(string) *tensor.Tensor {
		v := make([]dtype.Float8E4M3, 256)
		for i := range v {
			v[i] = dtype.Float8E4M3(i)
		}
		t, _ := tensor.New(v, 256)
		return t
	}
	return []graphCase{
		{name: "f8/f32-to-f8", inputs: fixed(dtype.F32, pts), build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F32, n).Cast(dtype.F8E4M3))
		}},
		{name: "f8/f64-to-f8", inputs: fixed(dtype.F64, pts), build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F64, n).Cast(dtype.F8E4M3))
		}},
		{name: "f8/codes-to-f32", inputs: all, build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", dtype.F8E4M3, 256).Cast(dtype.F32))
		}},
		{name: "f8/codes-neg", inputs: all, build: func(g *graph.Graph) {
			// Through the rounder (fused: widen, negate, narrow).
			g.Output("out", g.Input("x", dtype.F8E4M3, 256).Neg().Mul(graph.Scalar(1.5)))
		}},
		{name: "f8/chain", fused: true, inputs: all, build: func(g *graph.Graph) {
			x := g.Input("x", dtype.F8E4M3, 256)
			a := x.Mul(graph.Scalar(3)).Cast(dtype.F16).Add(graph.Scalar(0.3)).Cast(dtype.F8E4M3).Sub(x)
			g.Output("out", a.Cast(dtype.F32))
		}},
	}
}

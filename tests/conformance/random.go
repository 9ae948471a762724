package conformance

import (
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/philox"
)

// randRef is the reference of a random source of dt and n elements: the
// standard variates of package philox (the generator's specification,
// checked against the Random123 known answers in its own tests), then the
// transform that ir/random.go documents, written out here. Every executor
// must give these bits, so the GPU's random numbers are the CPU's.
func randRef(op ir.Op, dt dtype.DType, p ir.RandParams, n int) []float64 {
	out := make([]float64, n)
	if dt == dtype.F64 {
		v := make([]float64, n)
		if op == ir.OpRandNormal {
			philox.Normal64s(v, p.Seed, p.Offset)
			for i, z := range v {
				out[i] = float64(z*p.B) + p.A
			}
			return out
		}
		philox.Uniform64s(v, p.Seed, p.Offset)
		for i, u := range v {
			out[i] = p.A + float64((p.B-p.A)*u)
			if out[i] >= p.B {
				out[i] = p.Top(dt)
			}
		}
		return out
	}
	v := make([]float32, n)
	if op == ir.OpRandNormal {
		philox.Normal32s(v, p.Seed, p.Offset)
		std, mean := float32(p.B), float32(p.A)
		for i, z := range v {
			out[i] = roundFloat(dt, float64(float32(z*std)+mean))
		}
		return out
	}
	philox.Uniform32s(v, p.Seed, p.Offset)
	lo, d := float32(p.A), float32(p.B-p.A)
	for i, u := range v {
		out[i] = roundFloat(dt, float64(lo+float32(d*u)))
		if out[i] >= p.B {
			out[i] = p.Top(dt)
		}
	}
	return out
}

// random checks rand and randn on every dtype they claim against randRef,
// bit for bit: whole tensors (offsets that line up with Philox blocks and
// ones that do not, one far along the stream, the edge shapes), random
// values read through a transposed view and broadcast as row values, and
// dropout masks fused into the kernel that applies them.
func (s *suite) random(t *testing.T) {
	for _, dt := range ir.OpRandUniform.Info().In.List() {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			ref := func(op ir.Op, p ir.RandParams, shape []int) vals {
				v := newVals(dt, shape)
				copy(v.f, randRef(op, dt, p, v.n()))
				return v
			}
			type src struct {
				name  string
				op    ir.Op
				p     ir.RandParams
				shape []int
			}
			srcs := []src{
				{"rand", ir.OpRandUniform, ir.RandParams{Seed: 1, A: -1.5, B: 2.5}, stdShape},
				{"rand_offset_unaligned", ir.OpRandUniform, ir.RandParams{Seed: 2, Offset: 3, A: 0, B: 1}, []int{5, 77}},
				{"rand_far", ir.OpRandUniform, ir.RandParams{Seed: 1 << 40, Offset: 1<<63 + 5, A: 10, B: 11}, []int{1000}},
				{"rand_top_edge", ir.OpRandUniform, ir.RandParams{Seed: 3, A: 1, B: 2}, []int{4096}},
				{"randn", ir.OpRandNormal, ir.RandParams{Seed: 1, A: 0.5, B: 3}, stdShape},
				{"randn_offset_unaligned", ir.OpRandNormal, ir.RandParams{Seed: 4, Offset: 7, A: 0, B: 1}, []int{3, 333}},
				{"randn_wraps", ir.OpRandNormal, ir.RandParams{Seed: 5, Offset: math.MaxUint64 - 6, A: -2, B: 0.25}, []int{64}},
				{"rand_wraps_aligned", ir.OpRandUniform, ir.RandParams{Seed: 5, Offset: math.MaxUint64 - 7, A: -2, B: 0.25}, []int{64}},
				{"randn_std0", ir.OpRandNormal, ir.RandParams{Seed: 6, A: 1.25, B: 0}, []int{9}},
				{"rand_rank0", ir.OpRandUniform, ir.RandParams{Seed: 7, A: 0, B: 1}, nil},
				{"randn_empty", ir.OpRandNormal, ir.RandParams{Seed: 8, A: 0, B: 1}, []int{3, 0, 5}},
			}
			for _, r := range srcs {
				build := c.g.RandAt
				if r.op == ir.OpRandNormal {
					build = c.g.RandnAt
				}
				y := build(dt, r.p.Seed, r.p.Offset, r.p.A, r.p.B, r.shape...)
				c.expect(r.name, y, want{v: ref(r.op, r.p, r.shape), tol: exact})
			}
			// Read through views: transposed (the values are computed in
			// memory first), and a row value broadcast over the rows.
			x, xv := c.input("x", dt, []int{41, 37}, wideGen)
			rp := ir.RandParams{Seed: 9, A: -1, B: 1}
			rt := ref(ir.OpRandUniform, rp, []int{37, 41}).transpose(0, 1)
			c.expect("rand_transposed_plus_x", c.g.Rand(dt, 9, -1, 1, 37, 41).T().Add(x), sumOf(dt, rt, xv))
			np := ir.RandParams{Seed: 10, A: 0, B: 1}
			rc := ref(ir.OpRandNormal, np, []int{41, 1}).broadcast([]int{41, 37})
			c.expect("randn_column_plus_x", c.g.Randn(dt, 10, 0, 1, 41, 1).Add(x), sumOf(dt, rc, xv))
			// Dropout: x·(rand ≥ 0.25), exact (a product by 0 or 1).
			mp := ir.RandParams{Seed: 11, Offset: 2, A: 0, B: 1}
			mv := ref(ir.OpRandUniform, mp, []int{41, 37})
			masked := newVals(dt, []int{41, 37})
			for k := range masked.f {
				m := 0.0
				if mv.f[k] >= 0.25 {
					m = 1
				}
				masked.f[k] = xv.f[k] * m
			}
			keep := c.g.RandAt(dt, 11, 2, 0, 1, 41, 37).Ge(c.g.Full(dt, 0.25)).Cast(dt)
			c.expect("dropout", x.Mul(keep), want{v: masked, tol: exact, args: []vals{xv, mv}})
			// Like Candle's rand_like and randn_like.
			c.expect("rand_like", x.RandLike(12, 2, 3), want{v: ref(ir.OpRandUniform, ir.RandParams{Seed: 12, A: 2, B: 3}, []int{41, 37}), tol: exact})
			c.expect("randn_like", x.RandnLike(12, 0, 1), want{v: ref(ir.OpRandNormal, ir.RandParams{Seed: 12, A: 0, B: 1}, []int{41, 37}), tol: exact})
			c.run()
		})
	}
}

// sumOf is the exact reference of a + b in dt (one rounding).
func sumOf(dt dtype.DType, a, b vals) want {
	out := newVals(dt, a.shape)
	for k := range out.f {
		out.f[k] = a.f[k] + b.f[k]
	}
	return want{v: out, tol: exact, args: []vals{a, b}}
}

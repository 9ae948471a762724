package graph

import (
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// Random tensors (Candle's Tensor::rand and Tensor::randn, with the seed
// explicit: Loom has no generator state). Element i of a random tensor
// (row-major) is the value at position offset + i of the seed's stream,
// a pure function of (seed, offset + i) defined by package philox
// (Philox4x32-10, then a uniform or a Box–Muller normal computed in the
// dtype's compute type: float32 for f32, f16 and bf16, float64 for f64).
// Every executor computes the same bits, and kernels compute the values
// where they are used: a dropout mask x·(rand < p) is one fused kernel,
// with no random tensor in memory.
//
// Building the same random tensor twice (same dtype, shape, seed, offset
// and range) gives the same node, and the same values on every run of the
// program. To draw fresh values, build with another seed or advance the
// offset: a tensor of n elements at offset o uses positions o … o+n−1, so
// the next one starts at o + n (RandAt, RandnAt). Offsets and seeds are
// part of the compiled program (and of a GPU kernel's source): a new
// offset means a new graph, compiled again.
//
// Two tensors whose positions overlap under the same seed share the
// generator's words (a rand and a randn of one seed are correlated): use
// different seeds or disjoint offsets for values that must be independent.

// Rand returns a tensor of float dtype dt and the given shape whose
// elements are uniform in [lo, hi), drawn from seed's stream from position
// 0. lo < hi, both finite in dt. Results are lo + (hi − lo)·u rounded to
// dt; one that rounds to hi or above becomes the largest dt value below hi
// (see ir/random.go), so every result is below hi (and at least lo when lo
// is a value of dt).
func (g *Graph) Rand(dt dtype.DType, seed uint64, lo, hi float64, shape ...int) *Tensor {
	return g.random("rand", ir.OpRandUniform, dt, ir.RandParams{Seed: seed, A: lo, B: hi}, shape)
}

// RandAt is Rand drawing from stream position offset onwards.
func (g *Graph) RandAt(dt dtype.DType, seed, offset uint64, lo, hi float64, shape ...int) *Tensor {
	return g.random("rand", ir.OpRandUniform, dt, ir.RandParams{Seed: seed, Offset: offset, A: lo, B: hi}, shape)
}

// Randn returns a tensor of float dtype dt and the given shape whose
// elements are normal with the given mean and standard deviation (std ≥ 0;
// both finite in dt), drawn from seed's stream from position 0: z·std +
// mean for standard normals z, rounded to dt. The standard normals come
// from 24 random bits per uniform for float32-computed dtypes (|z| ≤ 5.77)
// and 53 for f64 (|z| ≤ 8.57).
func (g *Graph) Randn(dt dtype.DType, seed uint64, mean, std float64, shape ...int) *Tensor {
	return g.random("randn", ir.OpRandNormal, dt, ir.RandParams{Seed: seed, A: mean, B: std}, shape)
}

// RandnAt is Randn drawing from stream position offset onwards.
func (g *Graph) RandnAt(dt dtype.DType, seed, offset uint64, mean, std float64, shape ...int) *Tensor {
	return g.random("randn", ir.OpRandNormal, dt, ir.RandParams{Seed: seed, Offset: offset, A: mean, B: std}, shape)
}

// RandLike is Rand with t's dtype (a float dtype) and shape (Candle's
// rand_like).
func (t *Tensor) RandLike(seed uint64, lo, hi float64) *Tensor {
	if r, ok := t.ready("rand_like"); !ok {
		return r
	}
	return t.g.random("rand_like", ir.OpRandUniform, t.n.DType, ir.RandParams{Seed: seed, A: lo, B: hi}, t.n.Shape)
}

// RandnLike is Randn with t's dtype (a float dtype) and shape (Candle's
// randn_like).
func (t *Tensor) RandnLike(seed uint64, mean, std float64) *Tensor {
	if r, ok := t.ready("randn_like"); !ok {
		return r
	}
	return t.g.random("randn_like", ir.OpRandNormal, t.n.DType, ir.RandParams{Seed: seed, A: mean, B: std}, t.n.Shape)
}

// random builds a random source, naming op (the builder the user called)
// in errors.
func (g *Graph) random(op string, irOp ir.Op, dt dtype.DType, p ir.RandParams, shape []int) *Tensor {
	if err := g.usable(op); err != nil {
		return g.fail(err)
	}
	if !dt.Valid() {
		return g.fail(opErr(op, "invalid dtype %v", dt))
	}
	if err := checkShape(op, dt, shape); err != nil {
		return g.fail(err)
	}
	if err := p.Check(irOp, dt); err != nil {
		return g.fail(opErr(op, "%v%v: %v", dt, shape, err))
	}
	return g.intern(irOp, dt, shape, nil, p.Encode(), nil, "")
}

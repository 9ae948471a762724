package conformance

import (
	"fmt"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/tensor"
)

// vals is a reference tensor: the logical elements of a value in row-major
// order. Float dtypes keep their values in f (exact; for expected outputs,
// the unrounded result), integer dtypes in i (exact).
type vals struct {
	dt    dtype.DType
	shape []int
	f     []float64
	i     []int64
}

func newVals(dt dtype.DType, shape []int) vals {
	v := vals{dt: dt, shape: slices.Clone(shape)}
	if v.shape == nil {
		v.shape = []int{}
	}
	n := numel(shape)
	if dt.IsFloat() {
		v.f = make([]float64, n)
	} else {
		v.i = make([]int64, n)
	}
	return v
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func (v vals) n() int { return numel(v.shape) }

// elem formats element k.
func (v vals) elem(k int) string {
	if v.dt.IsFloat() {
		return fmt.Sprint(v.f[k])
	}
	return fmt.Sprint(v.i[k])
}

// set copies element j of src (same dtype kind) to element k.
func (v vals) set(k int, src vals, j int) {
	if v.dt.IsFloat() {
		v.f[k] = src.f[j]
	} else {
		v.i[k] = src.i[j]
	}
}

// coords writes the row-major coordinates of flat index k.
func coords(shape []int, k int, c []int) {
	for d := len(shape) - 1; d >= 0; d-- {
		c[d] = k % shape[d]
		k /= shape[d]
	}
}

// flat is the row-major flat index of coordinates c.
func flat(shape, c []int) int {
	k := 0
	for d, n := range shape {
		k = k*n + c[d]
	}
	return k
}

// gather builds a value of the given shape whose element at coordinates c is
// v's element at flat index src(c): the reference of every view.
func (v vals) gather(shape []int, src func(c []int) int) vals {
	out := newVals(v.dt, shape)
	c := make([]int, len(shape))
	for k := range out.n() {
		coords(shape, k, c)
		out.set(k, v, src(c))
	}
	return out
}

// permute: result dim k is v's dim perm[k].
func (v vals) permute(perm []int) vals {
	shape := make([]int, len(perm))
	for k, p := range perm {
		shape[k] = v.shape[p]
	}
	sc := make([]int, len(perm))
	return v.gather(shape, func(c []int) int {
		for k, p := range perm {
			sc[p] = c[k]
		}
		return flat(v.shape, sc)
	})
}

func (v vals) transpose(a, b int) vals {
	perm := make([]int, len(v.shape))
	for i := range perm {
		perm[i] = i
	}
	perm[a], perm[b] = perm[b], perm[a]
	return v.permute(perm)
}

// narrow keeps n elements of dim from start.
func (v vals) narrow(dim, start, n int) vals {
	shape := slices.Clone(v.shape)
	shape[dim] = n
	sc := make([]int, len(shape))
	return v.gather(shape, func(c []int) int {
		copy(sc, c)
		sc[dim] += start
		return flat(v.shape, sc)
	})
}

// broadcast expands v to shape with numpy rules (aligned right, size-1 dims
// repeat). The caller makes sure the shapes broadcast.
func (v vals) broadcast(shape []int) vals {
	lead := len(shape) - len(v.shape)
	sc := make([]int, len(v.shape))
	return v.gather(shape, func(c []int) int {
		for d := range v.shape {
			if v.shape[d] == 1 {
				sc[d] = 0
			} else {
				sc[d] = c[lead+d]
			}
		}
		return flat(v.shape, sc)
	})
}

// reshape reinterprets the row-major elements with new dims.
func (v vals) reshape(shape []int) vals {
	out := newVals(v.dt, shape)
	copy(out.f, v.f)
	copy(out.i, v.i)
	return out
}

// broadcastShapes is numpy's rule, written independently of ir.
func broadcastShapes(shapes ...[]int) ([]int, bool) {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		for j, d := range s {
			o := &out[r-len(s)+j]
			switch {
			case d == *o || d == 1:
			case *o == 1:
				*o = d
			default:
				return nil, false
			}
		}
	}
	return out, true
}

// toTensor builds a host tensor holding v exactly (floats must already be
// values of v.dt). f16, bf16 and f8e4m3 bits are encoded here, not by dtype.
func toTensor(v vals) (*tensor.Tensor, error) {
	n := v.n()
	switch v.dt {
	case dtype.F32:
		d := make([]float32, n)
		for k, x := range v.f {
			d[k] = float32(x)
		}
		return tensor.New(d, v.shape...)
	case dtype.F64:
		return tensor.New(slices.Clone(v.f), v.shape...)
	case dtype.F16:
		d := make([]dtype.Float16, n)
		for k, x := range v.f {
			d[k] = dtype.Float16(encodeF16(x))
		}
		return tensor.New(d, v.shape...)
	case dtype.BF16:
		d := make([]dtype.BFloat16, n)
		for k, x := range v.f {
			d[k] = dtype.BFloat16(encodeBF16(x))
		}
		return tensor.New(d, v.shape...)
	case dtype.F8E4M3:
		d := make([]dtype.Float8E4M3, n)
		for k, x := range v.f {
			d[k] = dtype.Float8E4M3(encodeF8(x))
		}
		return tensor.New(d, v.shape...)
	case dtype.U8:
		d := make([]uint8, n)
		for k, x := range v.i {
			d[k] = uint8(x)
		}
		return tensor.New(d, v.shape...)
	case dtype.U32:
		d := make([]uint32, n)
		for k, x := range v.i {
			d[k] = uint32(x)
		}
		return tensor.New(d, v.shape...)
	case dtype.I64:
		return tensor.New(slices.Clone(v.i), v.shape...)
	}
	return nil, fmt.Errorf("conformance: no host tensor for dtype %v", v.dt)
}

// fromTensor reads a host tensor exactly (f16/bf16/f8e4m3 widened bit by bit here).
func fromTensor(t *tensor.Tensor) (vals, error) {
	v := newVals(t.DType(), t.Shape())
	switch d := t.Data().(type) {
	case []float32:
		for k, x := range d[:v.n()] {
			v.f[k] = float64(x)
		}
	case []float64:
		copy(v.f, d)
	case []dtype.Float16:
		for k, x := range d[:v.n()] {
			v.f[k] = decodeF16(uint16(x))
		}
	case []dtype.BFloat16:
		for k, x := range d[:v.n()] {
			v.f[k] = decodeBF16(uint16(x))
		}
	case []dtype.Float8E4M3:
		for k, x := range d[:v.n()] {
			v.f[k] = decodeF8(uint8(x))
		}
	case []uint8:
		for k, x := range d[:v.n()] {
			v.i[k] = int64(x)
		}
	case []uint32:
		for k, x := range d[:v.n()] {
			v.i[k] = int64(x)
		}
	case []int64:
		copy(v.i, d)
	default:
		return vals{}, fmt.Errorf("conformance: tensor %v holds %T", t, t.Data())
	}
	return v, nil
}

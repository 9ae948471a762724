package ir

import (
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
)

func TestRandParamsEncode(t *testing.T) {
	for _, p := range []RandParams{
		{},
		{Seed: math.MaxUint64, Offset: math.MaxUint64, A: -1.5, B: 2},
		{Seed: 0x0123456789abcdef, Offset: 1 << 32, A: 3, B: 0},
	} {
		g := NewGraph()
		n := g.Intern(OpRandNormal, dtype.F32, []int{2}, nil, p.Encode(), nil, "")
		if got := n.Rand(); got != p {
			t.Errorf("Rand(Encode(%+v)) = %+v", p, got)
		}
	}
}

// TestRandTop checks Top against a scan of the dtype's values: the largest
// value below hi, for hi a dtype value (positive, negative, zero, the
// smallest normal) and between two values.
func TestRandTop(t *testing.T) {
	// below is the largest value of dt strictly below hi, by brute force
	// over every f16/bf16 pattern.
	below := func(dt dtype.DType, hi float64) float64 {
		best := math.Inf(-1)
		for b := range 1 << 16 {
			var v float64
			if dt == dtype.F16 {
				v = dtype.Float16(b).Float64()
			} else {
				v = dtype.BFloat16(b).Float64()
			}
			if v < hi && v > best {
				best = v
			}
		}
		return best
	}
	for _, hi := range []float64{1, 2, 0.3, -0.3, -1, 0, 6.1e-5, 1000.5, 65504, -65504 + 1} {
		for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
			if got, want := (RandParams{B: hi}).Top(dt), below(dt, hi); got != want {
				t.Errorf("Top(%v, hi=%v) = %v, want %v", dt, hi, got, want)
			}
		}
		if got, want := (RandParams{B: hi}).Top(dtype.F32), float64(math.Nextafter32(float32(hi), float32(math.Inf(-1)))); float32(hi) == float32(hi) && float64(float32(hi)) == hi && got != want {
			t.Errorf("Top(f32, %v) = %v, want %v", hi, got, want)
		}
		if got := (RandParams{B: hi}).Top(dtype.F64); got >= hi || math.Nextafter(got, math.Inf(1)) != hi {
			t.Errorf("Top(f64, %v) = %v", hi, got)
		}
	}
	// 0.3 is not a float32: the float32 below it is float32(0.3) or its
	// predecessor, whichever is below.
	if got := (RandParams{B: 0.3}).Top(dtype.F32); got >= 0.3 || float64(math.Nextafter32(float32(got), 1)) < 0.3 {
		t.Errorf("Top(f32, 0.3) = %v", got)
	}
}

func TestRandCheck(t *testing.T) {
	ok := []struct {
		op Op
		dt dtype.DType
		p  RandParams
	}{
		{OpRandUniform, dtype.F16, RandParams{A: -65504, B: 65504}},
		{OpRandNormal, dtype.BF16, RandParams{A: 0, B: 0}},
		{OpRandUniform, dtype.F64, RandParams{A: -8e307, B: 8e307}},
	}
	for _, c := range ok {
		if err := c.p.Check(c.op, c.dt); err != nil {
			t.Errorf("%s %v %+v: %v", c.op, c.dt, c.p, err)
		}
	}
	bad := []struct {
		op Op
		dt dtype.DType
		p  RandParams
	}{
		{OpRandUniform, dtype.F16, RandParams{A: 0, B: 70000}},
		{OpRandUniform, dtype.F64, RandParams{A: -1.7e308, B: 1.7e308}},
		{OpRandUniform, dtype.U8, RandParams{A: 0, B: 1}},
		{OpRandNormal, dtype.F32, RandParams{A: 0, B: math.Inf(1)}},
		{OpAdd, dtype.F32, RandParams{}},
	}
	for _, c := range bad {
		if err := c.p.Check(c.op, c.dt); err == nil {
			t.Errorf("%s %v %+v: no error", c.op, c.dt, c.p)
		}
	}
	// The verifier rejects a random node whose seed halves are not words.
	g := NewGraph()
	p := RandParams{A: 0, B: 1}.Encode()
	p[1] = 0.5
	g.Intern(OpRandUniform, dtype.F32, []int{3}, nil, p, nil, "")
	if err := Verify(g); err == nil {
		t.Errorf("Verify accepted seed_hi = 0.5")
	}
}

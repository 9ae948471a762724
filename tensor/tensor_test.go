package tensor_test

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/tensor"
)

// TestShapeOverflowRefused: constructors refuse shapes whose element count
// or byte count overflows, and shapes Go cannot allocate, with an error
// naming the shape, instead of wrapping (a rank-64 shape of 2s has 0
// elements in int arithmetic) or panicking.
func TestShapeOverflowRefused(t *testing.T) {
	r64 := make([]int, 64)
	for i := range r64 {
		r64[i] = 2
	}
	check := func(what string, err error, frags ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: no error", what)
			return
		}
		for _, f := range frags {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("%s: error %q does not mention %q", what, err, f)
			}
		}
	}
	_, err := tensor.New([]float32{}, r64...)
	check("New rank 64", err, "tensor:", "too large")
	_, err = tensor.New([]float32{1, 2, 3, 4}, 1<<62+1, 4)
	check("New", err, "tensor:", "[4611686018427387905 4]", "f32", "too large")
	_, err = tensor.Zeros(dtype.F32, 1, 1<<62)
	check("Zeros", err, "tensor:", "[1 4611686018427387904]", "too large")
	_, err = tensor.Zeros(dtype.U8, 1<<62)
	check("Zeros unallocatable", err, "tensor: cannot allocate u8[4611686018427387904]")
	_, err = tensor.FromFloat64s(dtype.F64, []float64{1}, r64...)
	check("FromFloat64s", err, "tensor:", "too large")
	_, err = tensor.FromFloat64s(dtype.U8, []float64{1}, 1<<62)
	check("FromFloat64s unfilled", err, "tensor: 1 elements do not fill shape [4611686018427387904]")
	_, err = tensor.FromFloat32s(dtype.BF16, []float32{1}, 1<<62, 4)
	check("FromFloat32s", err, "tensor:", "bf16", "too large")
	_, err = tensor.Zeros(dtype.F32, 2, -1)
	check("Zeros negative", err, "tensor: negative dim in shape [2 -1]")
	if z, err := tensor.Zeros(dtype.F32, 0, 1<<40); err != nil || z.Numel() != 0 {
		t.Errorf("Zeros(0, 1<<40): %v, %v", z, err)
	}
}

// TestF8E4M3Tensor: an f8e4m3 tensor holds []dtype.Float8E4M3, one byte per
// element, and converts through the dtype package's rounding (saturating
// at ±448, NaN kept) in both constructors.
func TestF8E4M3Tensor(t *testing.T) {
	in := []float64{1, -2.5, 0.3, 1000, -1e9, 1.0 / 1024}
	want := []float64{1, -2.5, 0.3125, 448, -448, 0}
	t64, err := tensor.FromFloat64s(dtype.F8E4M3, in, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	f32 := make([]float32, len(in))
	for i, v := range in {
		f32[i] = float32(v)
	}
	t32, err := tensor.FromFloat32s(dtype.F8E4M3, f32, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*tensor.Tensor{t64, t32} {
		if x.DType() != dtype.F8E4M3 || len(x.Bytes()) != 6 {
			t.Fatalf("%v: %d bytes", x, len(x.Bytes()))
		}
		if _, err := tensor.Values[dtype.Float8E4M3](x); err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if got := x.Float64(i); got != w {
				t.Errorf("%v element %d = %v, want %v", x, i, got, w)
			}
		}
	}
	if tensor.DTypeOf[dtype.Float8E4M3]() != dtype.F8E4M3 {
		t.Error("DTypeOf[Float8E4M3] is not f8e4m3")
	}
	if c := t64.Clone(); c.Float64(1) != -2.5 {
		t.Error("Clone lost the values")
	}
}

package tensor

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// Elem is the set of Go element types a Tensor can hold.
type Elem interface {
	float32 | float64 | dtype.Float16 | dtype.BFloat16 | dtype.Float8E4M3 | uint8 | uint32 | int64
}

// Tensor is a contiguous host tensor.
type Tensor struct {
	dt    dtype.DType
	shape []int
	data  any
}

// DTypeOf returns the dtype of a Go element type.
func DTypeOf[T Elem]() dtype.DType {
	var z T
	switch any(z).(type) {
	case float32:
		return dtype.F32
	case float64:
		return dtype.F64
	case dtype.Float16:
		return dtype.F16
	case dtype.BFloat16:
		return dtype.BF16
	case dtype.Float8E4M3:
		return dtype.F8E4M3
	case uint8:
		return dtype.U8
	case uint32:
		return dtype.U32
	default:
		return dtype.I64
	}
}

// Numel is the product of dims (1 for a scalar).
func Numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func checkShape(dt dtype.DType, shape []int, n int) error {
	if err := ir.CheckShape(dt, shape); err != nil {
		return fmt.Errorf("tensor: %v", err)
	}
	if Numel(shape) != n {
		return fmt.Errorf("tensor: %d elements do not fill shape %v (%d elements)", n, shape, Numel(shape))
	}
	return nil
}

// New wraps data (not copied) as a tensor of the given shape.
func New[T Elem](data []T, shape ...int) (*Tensor, error) {
	if err := checkShape(DTypeOf[T](), shape, len(data)); err != nil {
		return nil, err
	}
	return &Tensor{dt: DTypeOf[T](), shape: append([]int{}, shape...), data: data}, nil
}

// Zeros allocates a tensor of zeros.
func Zeros(dt dtype.DType, shape ...int) (t *Tensor, err error) {
	if !dt.Valid() {
		return nil, fmt.Errorf("tensor: invalid dtype %v", dt)
	}
	if err := ir.CheckShape(dt, shape); err != nil {
		return nil, fmt.Errorf("tensor: %v", err)
	}
	n := Numel(shape)
	// A shape within CheckShape's byte bound may still be more than Go can
	// allocate (make panics with "len out of range"): report it.
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("tensor: cannot allocate %v%v: %v", dt, shape, r)
		}
	}()
	t = &Tensor{dt: dt, shape: append([]int{}, shape...)}
	switch dt {
	case dtype.F32:
		t.data = make([]float32, n)
	case dtype.F64:
		t.data = make([]float64, n)
	case dtype.F16:
		t.data = make([]dtype.Float16, n)
	case dtype.BF16:
		t.data = make([]dtype.BFloat16, n)
	case dtype.F8E4M3:
		t.data = make([]dtype.Float8E4M3, n)
	case dtype.U8:
		t.data = make([]uint8, n)
	case dtype.U32:
		t.data = make([]uint32, n)
	case dtype.I64:
		t.data = make([]int64, n)
	}
	return t, nil
}

// FromFloat64s converts values to dt (rounding to nearest even for floats,
// Rust `as` semantics for ints: truncation toward zero, saturation, NaN → 0).
func FromFloat64s(dt dtype.DType, vals []float64, shape ...int) (*Tensor, error) {
	// Check before allocating: a shape that vals do not fill may be huge.
	if err := checkShape(dt, shape, len(vals)); err != nil {
		return nil, err
	}
	t, err := Zeros(dt, shape...)
	if err != nil {
		return nil, err
	}
	for i, v := range vals {
		t.SetFloat64(i, v)
	}
	return t, nil
}

// FromFloat32s converts float32 values to dt (the usual way to build f16,
// bf16 and f8e4m3 tensors).
func FromFloat32s(dt dtype.DType, vals []float32, shape ...int) (*Tensor, error) {
	if err := checkShape(dt, shape, len(vals)); err != nil {
		return nil, err
	}
	f := make([]float64, len(vals))
	for i, v := range vals {
		f[i] = float64(v)
	}
	if dt.IsReduced() || dt == dtype.F32 {
		t, err := Zeros(dt, shape...)
		if err != nil {
			return nil, err
		}
		for i, v := range vals {
			switch d := t.data.(type) {
			case []float32:
				d[i] = v
			case []dtype.Float16:
				d[i] = dtype.ToF16(v)
			case []dtype.BFloat16:
				d[i] = dtype.ToBF16(v)
			case []dtype.Float8E4M3:
				d[i] = dtype.ToF8E4M3(v)
			}
		}
		return t, nil
	}
	return FromFloat64s(dt, f, shape...)
}

// The accessors below treat a nil *Tensor (a missing output, say) as having
// no dtype (Invalid), no shape and no elements.

// DType returns the element type.
func (t *Tensor) DType() dtype.DType {
	if t == nil {
		return dtype.Invalid
	}
	return t.dt
}

// Shape returns a copy of the dims.
func (t *Tensor) Shape() []int {
	if t == nil {
		return nil
	}
	return append([]int{}, t.shape...)
}

// Rank is the number of dims.
func (t *Tensor) Rank() int { return len(t.Shape()) }

// Numel is the number of elements.
func (t *Tensor) Numel() int {
	if t == nil || t.data == nil {
		return 0
	}
	return Numel(t.shape)
}

// Data returns the backing slice (shared, not copied).
func (t *Tensor) Data() any {
	if t == nil {
		return nil
	}
	return t.data
}

// Bytes returns the backing memory as bytes (shared, not copied).
func (t *Tensor) Bytes() []byte {
	n := t.Numel() * t.DType().Size()
	if n == 0 {
		return nil
	}
	var p unsafe.Pointer
	switch d := t.data.(type) {
	case []float32:
		p = unsafe.Pointer(&d[0])
	case []float64:
		p = unsafe.Pointer(&d[0])
	case []dtype.Float16:
		p = unsafe.Pointer(&d[0])
	case []dtype.BFloat16:
		p = unsafe.Pointer(&d[0])
	case []dtype.Float8E4M3:
		p = unsafe.Pointer(&d[0])
	case []uint8:
		p = unsafe.Pointer(&d[0])
	case []uint32:
		p = unsafe.Pointer(&d[0])
	case []int64:
		p = unsafe.Pointer(&d[0])
	}
	return unsafe.Slice((*byte)(p), n)
}

// Values returns the backing slice as []T, or an error naming both dtypes.
func Values[T Elem](t *Tensor) ([]T, error) {
	if t == nil {
		return nil, fmt.Errorf("tensor: values: nil tensor (want %v elements)", DTypeOf[T]())
	}
	d, ok := t.data.([]T)
	if !ok {
		return nil, fmt.Errorf("tensor: want %v elements, tensor holds %v", DTypeOf[T](), t.dt)
	}
	return d, nil
}

// Float64 reads element i (flat, row-major) widened to float64. i64 values
// beyond 2^53 lose precision; use Values for exact integers.
func (t *Tensor) Float64(i int) float64 {
	switch d := t.Data().(type) {
	case []float32:
		return float64(d[i])
	case []float64:
		return d[i]
	case []dtype.Float16:
		return d[i].Float64()
	case []dtype.BFloat16:
		return d[i].Float64()
	case []dtype.Float8E4M3:
		return d[i].Float64()
	case []uint8:
		return float64(d[i])
	case []uint32:
		return float64(d[i])
	case []int64:
		return float64(d[i])
	}
	return math.NaN()
}

// Float64s returns every element widened to float64.
func (t *Tensor) Float64s() []float64 {
	out := make([]float64, t.Numel())
	for i := range out {
		out[i] = t.Float64(i)
	}
	return out
}

// SetFloat64 stores v at flat index i, converted to the tensor's dtype.
func (t *Tensor) SetFloat64(i int, v float64) {
	switch d := t.Data().(type) {
	case []float32:
		d[i] = float32(v)
	case []float64:
		d[i] = v
	case []dtype.Float16:
		d[i] = dtype.ToF16From64(v)
	case []dtype.BFloat16:
		d[i] = dtype.ToBF16From64(v)
	case []dtype.Float8E4M3:
		d[i] = dtype.ToF8E4M3From64(v)
	case []uint8:
		d[i] = uint8(SatInt(v, 0, math.MaxUint8))
	case []uint32:
		d[i] = uint32(SatInt(v, 0, math.MaxUint32))
	case []int64:
		d[i] = SatInt(v, math.MinInt64, math.MaxInt64)
	}
}

// SatInt converts v to an integer in [lo, hi] the way Rust's `as` does:
// truncation toward zero, saturation at the bounds, NaN → 0.
func SatInt(v float64, lo, hi int64) int64 {
	switch {
	case v != v:
		return 0
	case v <= float64(lo):
		return lo
	case v >= float64(hi):
		return hi
	}
	return int64(v)
}

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	if t == nil || t.data == nil {
		return nil
	}
	c, _ := Zeros(t.dt, t.shape...)
	copy(c.Bytes(), t.Bytes())
	return c
}

func (t *Tensor) String() string {
	if t == nil {
		return "Tensor(nil)"
	}
	return fmt.Sprintf("Tensor(%v, %v)", t.dt, t.shape)
}

package gguf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is a metadata value's type, numbered as in the GGUF spec's enum
// gguf_metadata_value_type.
type ValueType uint32

// The 13 metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7 // one byte, 0 or 1
	TypeString  ValueType = 8 // uint64 length, then the bytes (no NUL)
	TypeArray   ValueType = 9 // uint32 element type, uint64 count, elements
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if t.valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value_type(%d)", uint32(t))
}

func (t ValueType) valid() bool { return t <= TypeFloat64 }

// fixedSize returns the encoded size of one value of a fixed-size type, or
// 0 for strings and arrays.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes one encoded value of t can take: what a
// claimed element count is checked against before anything is allocated.
func (t ValueType) minSize() int64 {
	switch t {
	case TypeString:
		return 8 // the length
	case TypeArray:
		return 12 // element type and count
	}
	return int64(t.fixedSize())
}

// Value is one metadata value: a scalar, a string or an array. Make values
// with the constructors (Uint8 … Float64, Bool, String, ArrayValue) or read
// them from a file; the zero Value is Uint8(0).
type Value struct {
	typ  ValueType
	bits uint64 // the value's little-endian bytes, zero-extended: integers, float bits, bool
	str  string
	arr  Array
}

// Array is an array value: Len elements of type Elem. Elements are kept as
// one Go slice of the matching type ([]uint8 for TypeUint8, []string for
// TypeString, []Array for TypeArray, …), so a vocabulary of 150k strings
// costs one slice, not 150k Values.
type Array struct {
	Elem ValueType
	data any
}

// Elem is the set of Go element types an Array holds.
type Elem interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | float32 | bool | string | Array | uint64 | int64 | float64
}

// Scalar constructors.
func Uint8(v uint8) Value     { return Value{typ: TypeUint8, bits: uint64(v)} }
func Int8(v int8) Value       { return Value{typ: TypeInt8, bits: uint64(uint8(v))} }
func Uint16(v uint16) Value   { return Value{typ: TypeUint16, bits: uint64(v)} }
func Int16(v int16) Value     { return Value{typ: TypeInt16, bits: uint64(uint16(v))} }
func Uint32(v uint32) Value   { return Value{typ: TypeUint32, bits: uint64(v)} }
func Int32(v int32) Value     { return Value{typ: TypeInt32, bits: uint64(uint32(v))} }
func Uint64(v uint64) Value   { return Value{typ: TypeUint64, bits: v} }
func Int64(v int64) Value     { return Value{typ: TypeInt64, bits: uint64(v)} }
func Float32(v float32) Value { return Value{typ: TypeFloat32, bits: uint64(math.Float32bits(v))} }
func Float64(v float64) Value { return Value{typ: TypeFloat64, bits: math.Float64bits(v)} }
func String(v string) Value   { return Value{typ: TypeString, str: v} }
func Bool(v bool) Value {
	if v {
		return Value{typ: TypeBool, bits: 1}
	}
	return Value{typ: TypeBool}
}

// ArrayValue wraps an array as a value.
func ArrayValue(a Array) Value { return Value{typ: TypeArray, arr: a} }

// NewArray makes an array of xs; its element type follows from T ([]Array
// makes an array of arrays, which may differ in element type and length).
// The slice is kept, not copied.
func NewArray[T Elem](xs []T) Array {
	if xs == nil {
		xs = []T{}
	}
	return Array{Elem: elemType(any(xs)), data: xs}
}

// Elems returns the array's elements as a []T, or an error if T is not the
// array's element type. The slice is the array's own: do not modify it.
func Elems[T Elem](a Array) ([]T, error) {
	want := elemType(any([]T(nil)))
	if a.data == nil && a.Elem == want { // Array{Elem: …}: empty
		return []T{}, nil
	}
	xs, ok := a.data.([]T)
	if !ok {
		return nil, fmt.Errorf("gguf: array of %v, not of %v", a.Elem, want)
	}
	return xs, nil
}

func elemType(xs any) ValueType {
	switch xs.(type) {
	case []uint8:
		return TypeUint8
	case []int8:
		return TypeInt8
	case []uint16:
		return TypeUint16
	case []int16:
		return TypeInt16
	case []uint32:
		return TypeUint32
	case []int32:
		return TypeInt32
	case []float32:
		return TypeFloat32
	case []bool:
		return TypeBool
	case []string:
		return TypeString
	case []Array:
		return TypeArray
	case []uint64:
		return TypeUint64
	case []int64:
		return TypeInt64
	case []float64:
		return TypeFloat64
	}
	panic(fmt.Sprintf("gguf: no array element type for %T", xs)) // unreachable: Elem constrains T
}

// Len is the number of elements.
func (a Array) Len() int {
	switch xs := a.data.(type) {
	case []uint8:
		return len(xs)
	case []int8:
		return len(xs)
	case []uint16:
		return len(xs)
	case []int16:
		return len(xs)
	case []uint32:
		return len(xs)
	case []int32:
		return len(xs)
	case []float32:
		return len(xs)
	case []bool:
		return len(xs)
	case []string:
		return len(xs)
	case []Array:
		return len(xs)
	case []uint64:
		return len(xs)
	case []int64:
		return len(xs)
	case []float64:
		return len(xs)
	}
	return 0
}

// Index returns element i as a Value; i must be in [0, Len()).
func (a Array) Index(i int) Value {
	switch xs := a.data.(type) {
	case []uint8:
		return Uint8(xs[i])
	case []int8:
		return Int8(xs[i])
	case []uint16:
		return Uint16(xs[i])
	case []int16:
		return Int16(xs[i])
	case []uint32:
		return Uint32(xs[i])
	case []int32:
		return Int32(xs[i])
	case []float32:
		return Float32(xs[i])
	case []bool:
		return Bool(xs[i])
	case []string:
		return String(xs[i])
	case []Array:
		return ArrayValue(xs[i])
	case []uint64:
		return Uint64(xs[i])
	case []int64:
		return Int64(xs[i])
	case []float64:
		return Float64(xs[i])
	}
	panic(fmt.Sprintf("gguf: index %d of an empty array", i))
}

// Ints returns the elements of an integer array as int64s; an error for
// other element types or a uint64 element above MaxInt64.
func (a Array) Ints() ([]int64, error) {
	n := a.Len()
	out := make([]int64, n)
	for i := range n {
		v, err := a.Index(i).AsInt()
		if err != nil {
			return nil, fmt.Errorf("gguf: element %d of array of %v: %w", i, a.Elem, err)
		}
		out[i] = v
	}
	return out, nil
}

// Type is the value's type (TypeArray for arrays; see AsArray for the
// element type).
func (v Value) Type() ValueType { return v.typ }

// TypeName is the type as inspect prints it: "uint32", "array[string]",
// "array[array]".
func (v Value) TypeName() string {
	if v.typ == TypeArray {
		return "array[" + v.arr.Elem.String() + "]"
	}
	return v.typ.String()
}

func (v Value) isInt() bool { return v.typ <= TypeInt32 || v.typ == TypeUint64 || v.typ == TypeInt64 }

func (v Value) isSigned() bool {
	return v.typ == TypeInt8 || v.typ == TypeInt16 || v.typ == TypeInt32 || v.typ == TypeInt64
}

// signed returns the value of a signed integer type, sign-extended.
func (v Value) signed() int64 {
	switch v.typ {
	case TypeInt8:
		return int64(int8(v.bits))
	case TypeInt16:
		return int64(int16(v.bits))
	case TypeInt32:
		return int64(int32(v.bits))
	}
	return int64(v.bits)
}

// AsUint returns an integer value as a uint64. Every integer type is
// accepted (counts are "by convention uint64", but the spec tells readers
// to take uint32 too, and some writers use signed types); a negative value
// is an error, as is any non-integer type.
func (v Value) AsUint() (uint64, error) {
	if !v.isInt() {
		return 0, fmt.Errorf("gguf: value is %s, not an integer", v.TypeName())
	}
	if v.isSigned() {
		s := v.signed()
		if s < 0 {
			return 0, fmt.Errorf("gguf: %s value %d is negative", v.typ, s)
		}
		return uint64(s), nil
	}
	return v.bits, nil
}

// AsInt returns an integer value of any integer type as an int64; a uint64
// above MaxInt64 is an error.
func (v Value) AsInt() (int64, error) {
	if !v.isInt() {
		return 0, fmt.Errorf("gguf: value is %s, not an integer", v.TypeName())
	}
	if v.isSigned() {
		return v.signed(), nil
	}
	if v.bits > math.MaxInt64 {
		return 0, fmt.Errorf("gguf: %s value %d does not fit an int64", v.typ, v.bits)
	}
	return int64(v.bits), nil
}

// AsFloat returns a float32 or float64 value as a float64.
func (v Value) AsFloat() (float64, error) {
	switch v.typ {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), nil
	case TypeFloat64:
		return math.Float64frombits(v.bits), nil
	}
	return 0, fmt.Errorf("gguf: value is %s, not a float", v.TypeName())
}

// AsBool returns a bool value.
func (v Value) AsBool() (bool, error) {
	if v.typ != TypeBool {
		return false, fmt.Errorf("gguf: value is %s, not bool", v.TypeName())
	}
	return v.bits != 0, nil
}

// AsString returns a string value.
func (v Value) AsString() (string, error) {
	if v.typ != TypeString {
		return "", fmt.Errorf("gguf: value is %s, not string", v.TypeName())
	}
	return v.str, nil
}

// AsArray returns an array value.
func (v Value) AsArray() (Array, error) {
	if v.typ != TypeArray {
		return Array{}, fmt.Errorf("gguf: value is %s, not an array", v.TypeName())
	}
	return v.arr, nil
}

// Equal reports whether v and w have the same type and the same contents
// (floats compared bit for bit, so NaNs of one pattern are equal).
func (v Value) Equal(w Value) bool {
	if v.typ != w.typ || v.bits != w.bits || v.str != w.str {
		return false
	}
	if v.typ != TypeArray {
		return true
	}
	return v.arr.Equal(w.arr)
}

// Equal reports whether a and b have the same element type and elements.
func (a Array) Equal(b Array) bool {
	if a.Elem != b.Elem || a.Len() != b.Len() {
		return false
	}
	for i := range a.Len() {
		if !a.Index(i).Equal(b.Index(i)) {
			return false
		}
	}
	return true
}

// ArrayPreview is how many elements String shows of an array before
// eliding the rest.
const ArrayPreview = 8

// String formats the value for people: numbers as Go prints them (floats
// in the shortest form that reads back exactly), strings quoted with Go
// escapes, arrays as [a, b, …] with at most ArrayPreview elements shown at
// each level and the count of the rest ("... 31992 more").
func (v Value) String() string {
	var b strings.Builder
	v.format(&b)
	return b.String()
}

func (v Value) format(b *strings.Builder) {
	switch v.typ {
	case TypeFloat32:
		b.WriteString(strconv.FormatFloat(float64(math.Float32frombits(uint32(v.bits))), 'g', -1, 32))
	case TypeFloat64:
		b.WriteString(strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64))
	case TypeBool:
		b.WriteString(strconv.FormatBool(v.bits != 0))
	case TypeString:
		b.WriteString(strconv.Quote(v.str))
	case TypeArray:
		n := v.arr.Len()
		b.WriteByte('[')
		for i := range min(n, ArrayPreview) {
			if i > 0 {
				b.WriteString(", ")
			}
			v.arr.Index(i).format(b)
		}
		if n > ArrayPreview {
			fmt.Fprintf(b, ", ... %d more", n-ArrayPreview)
		}
		b.WriteByte(']')
	default:
		if !v.isInt() {
			fmt.Fprintf(b, "<invalid %v>", v.typ)
			return
		}
		if v.isSigned() {
			b.WriteString(strconv.FormatInt(v.signed(), 10))
		} else {
			b.WriteString(strconv.FormatUint(v.bits, 10))
		}
	}
}

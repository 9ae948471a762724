package dtype

import (
	"fmt"
	"strings"
)

// DType is an element type.
type DType uint8

// The dtypes. Invalid is the zero value so that an unset dtype is caught.
const (
	Invalid DType = iota
	F32
	F64
	F16
	BF16
	U8
	U32
	I64
	// F8E4M3 is OCP FP8 E4M3FN (Float8E4M3), a float storage type: it
	// computes in float32 like f16 and bf16. It comes after the integers so
	// that the earlier dtypes keep their numbers.
	F8E4M3
)

// All lists every valid dtype, floats first.
var All = []DType{F32, F64, F16, BF16, F8E4M3, U8, U32, I64}

// Floats and Ints partition All.
var (
	Floats = []DType{F32, F64, F16, BF16, F8E4M3}
	Ints   = []DType{U8, U32, I64}
)

var names = [...]string{Invalid: "invalid", F32: "f32", F64: "f64", F16: "f16", BF16: "bf16", U8: "u8", U32: "u32", I64: "i64", F8E4M3: "f8e4m3"}
var sizes = [...]int{Invalid: 0, F32: 4, F64: 8, F16: 2, BF16: 2, U8: 1, U32: 4, I64: 8, F8E4M3: 1}

// String returns Candle's short name: "f32", "bf16", "u8", …
func (d DType) String() string {
	if int(d) < len(names) {
		return names[d]
	}
	return fmt.Sprintf("dtype(%d)", d)
}

// Size is the element size in bytes.
func (d DType) Size() int {
	if int(d) < len(sizes) {
		return sizes[d]
	}
	return 0
}

// Valid reports whether d is one of All.
func (d DType) Valid() bool { return d >= F32 && d <= F8E4M3 }

// IsFloat reports whether d is f32, f64, f16, bf16 or f8e4m3.
func (d DType) IsFloat() bool { return d >= F32 && d <= BF16 || d == F8E4M3 }

// IsReduced reports whether d is a float stored narrower than it computes:
// f16, bf16 and f8e4m3 compute in float32 and round once on store.
func (d DType) IsReduced() bool { return d == F16 || d == BF16 || d == F8E4M3 }

// IsInt reports whether d is u8, u32 or i64.
func (d DType) IsInt() bool { return d >= U8 && d <= I64 }

// Parse reads a dtype name as printed by String.
func Parse(s string) (DType, error) {
	for d, n := range names {
		if d != int(Invalid) && n == strings.ToLower(s) {
			return DType(d), nil
		}
	}
	return Invalid, fmt.Errorf("dtype: unknown dtype %q (want one of f32, f64, f16, bf16, f8e4m3, u8, u32, i64)", s)
}

// Kind is the type the CPU computes a dtype in.
type Kind uint8

// Compute kinds.
const (
	KF32 Kind = iota // f32, f16, bf16, f8e4m3
	KF64             // f64
	KI64             // u8, u32, i64
)

func (k Kind) String() string { return [...]string{"f32", "f64", "i64"}[k] }

// Kind returns the compute kind of d.
func (d DType) Kind() Kind {
	switch d {
	case F64:
		return KF64
	case U8, U32, I64:
		return KI64
	}
	return KF32
}

// MaxID is the largest value of an id dtype: Candle's sentinel for indexing
// ops (reads give 0, writes are skipped).
func (d DType) MaxID() uint64 {
	switch d {
	case U8:
		return 0xFF
	case U32:
		return 0xFFFFFFFF
	case I64:
		return 0x7FFFFFFFFFFFFFFF
	}
	return 0
}

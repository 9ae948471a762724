package quant

import (
	"fmt"
	"math"
)

// Type is a GGML tensor type, numbered as in ggml.h's enum ggml_type (the
// number GGUF stores in each tensor info).
type Type uint32

// The GGML types Loom reads and writes. Numbers 4, 5, 31–33 and 36–38 were
// removed from GGML; the IQ*, TQ*, MXFP4, NVFP4, Q1_0 and Q2_0 formats and
// the integer types are named (so errors and `loom gguf inspect` can say
// what a file holds) but have no codec.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
	NVFP4   Type = 40 // 64 values: 4 E4M3 sub-block scales, 32 bytes of E2M1 pairs
	Q1_0    Type = 41
	Q2_0    Type = 42
)

// QK_K is the number of elements in a k-quant super-block.
const QK_K = 256

// Traits describe a type's storage: Block elements take Size bytes.
type Traits struct {
	Name  string
	Block int // elements per block (1 for plain types)
	Size  int // bytes per block
	// Supported marks the types Loom quantizes and dequantizes (Candle's
	// set: the plain floats and the GGML block formats of Q4_0…Q8_K).
	Supported bool
}

var traits = map[Type]Traits{
	F32:     {"f32", 1, 4, true},
	F16:     {"f16", 1, 2, true},
	BF16:    {"bf16", 1, 2, true},
	Q4_0:    {"q4_0", 32, 18, true},
	Q4_1:    {"q4_1", 32, 20, true},
	Q5_0:    {"q5_0", 32, 22, true},
	Q5_1:    {"q5_1", 32, 24, true},
	Q8_0:    {"q8_0", 32, 34, true},
	Q8_1:    {"q8_1", 32, 36, true},
	Q2_K:    {"q2_k", QK_K, 84, true},
	Q3_K:    {"q3_k", QK_K, 110, true},
	Q4_K:    {"q4_k", QK_K, 144, true},
	Q5_K:    {"q5_k", QK_K, 176, true},
	Q6_K:    {"q6_k", QK_K, 210, true},
	Q8_K:    {"q8_k", QK_K, 292, true},
	IQ2_XXS: {"iq2_xxs", QK_K, 66, false},
	IQ2_XS:  {"iq2_xs", QK_K, 74, false},
	IQ3_XXS: {"iq3_xxs", QK_K, 98, false},
	IQ1_S:   {"iq1_s", QK_K, 50, false},
	IQ4_NL:  {"iq4_nl", 32, 18, false},
	IQ3_S:   {"iq3_s", QK_K, 110, false},
	IQ2_S:   {"iq2_s", QK_K, 82, false},
	IQ4_XS:  {"iq4_xs", QK_K, 136, false},
	I8:      {"i8", 1, 1, false},
	I16:     {"i16", 1, 2, false},
	I32:     {"i32", 1, 4, false},
	I64:     {"i64", 1, 8, false},
	F64:     {"f64", 1, 8, false},
	IQ1_M:   {"iq1_m", QK_K, 56, false},
	TQ1_0:   {"tq1_0", QK_K, 54, false},
	TQ2_0:   {"tq2_0", QK_K, 66, false},
	MXFP4:   {"mxfp4", 32, 17, false},
	NVFP4:   {"nvfp4", 64, 36, false},
	Q1_0:    {"q1_0", 128, 18, false},
	Q2_0:    {"q2_0", 64, 18, false},
}

// Known reports whether t is a GGML type Loom knows the layout of.
func (t Type) Known() bool { _, ok := traits[t]; return ok }

// Traits returns t's storage traits; ok is false for an unknown number.
func (t Type) Traits() (Traits, bool) { tr, ok := traits[t]; return tr, ok }

func (t Type) String() string {
	if tr, ok := traits[t]; ok {
		return tr.Name
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// ParseType finds a type by its name (case-insensitive: "q4_k", "Q4_K").
func ParseType(name string) (Type, error) {
	for t, tr := range traits {
		if equalFold(tr.Name, name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("quant: unknown type %q", name)
}

// RowBytes returns the bytes of n elements of t, or an error when n is
// negative or not a whole number of blocks, when the byte count does not
// fit an int64 (F64.RowBytes(1<<61) would wrap to 0), or when t is unknown.
func (t Type) RowBytes(n int64) (int64, error) {
	tr, ok := traits[t]
	if !ok {
		return 0, fmt.Errorf("quant: unknown type %v", t)
	}
	if n < 0 || n%int64(tr.Block) != 0 {
		return 0, fmt.Errorf("quant: %d elements of %v are not a whole number of %d-element blocks", n, t, tr.Block)
	}
	blocks, size := n/int64(tr.Block), int64(tr.Size)
	if blocks > math.MaxInt64/size {
		return 0, fmt.Errorf("quant: %d elements of %v take %d blocks of %d bytes, more than an int64 counts", n, t, blocks, size)
	}
	return blocks * size, nil
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

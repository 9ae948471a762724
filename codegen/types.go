package codegen

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/loomgraph/loom/dtype"
)

// ctype is how a dtype lives in a kernel: its storage type in memory and
// the type it computes in (the CPU twin's compute kind, except that u8 and
// u32 compute in 32-bit unsigned arithmetic: their results are wrapped to
// the dtype after every instruction, and 32-bit wrapping keeps the same low
// bits as the twin's int64 arithmetic).
type ctype struct {
	storage string
	compute string
}

var ctypes = map[dtype.DType]ctype{
	dtype.F32:  {"float", "float"},
	dtype.F64:  {"double", "double"},
	dtype.F16:  {"unsigned short", "float"},
	dtype.BF16: {"unsigned short", "float"},
	dtype.U8:   {"unsigned char", "unsigned int"},
	dtype.U32:  {"unsigned int", "unsigned int"},
	dtype.I64:  {"long long", "long long"},

	// f8e4m3 always takes the portable path (loom_f8e4m3_to_f32 and back,
	// integer code in preludeCommon): hardware fp8 conversions exist on
	// some targets only (sm_89+, gfx940+) and would have to match the twin's
	// saturation and NaN rules bit for bit; a storage dtype is converted
	// once per load and store, so the software cost is small.
	dtype.F8E4M3: {"unsigned char", "float"},
}

func storageType(d dtype.DType) string { return ctypes[d].storage }
func computeType(d dtype.DType) string { return ctypes[d].compute }

// widen converts a storage value (C expression e) to its compute type.
func widen(d dtype.DType, e string) string {
	switch d {
	case dtype.F16:
		return "loom_f16_to_f32(" + e + ")"
	case dtype.BF16:
		return "loom_bf16_to_f32(" + e + ")"
	case dtype.F8E4M3:
		return "loom_f8e4m3_to_f32(" + e + ")"
	case dtype.U8:
		return "(unsigned int)" + e
	}
	return e
}

// narrow converts a compute value to storage, rounding like the CPU twin's
// store (nearest even for f16/bf16/f8e4m3, wrapping for u8).
func narrow(d dtype.DType, e string) string {
	switch d {
	case dtype.F16:
		return "loom_f32_to_f16(" + e + ")"
	case dtype.BF16:
		return "loom_f32_to_bf16(" + e + ")"
	case dtype.F8E4M3:
		return "loom_f32_to_f8e4m3(" + e + ")"
	case dtype.U8:
		return "(unsigned char)(" + e + ")"
	}
	return e
}

// rounder wraps an instruction's result so that it holds a value of the
// node's dtype (the CPU twin's rounder), or returns e when the compute type
// already holds exactly the dtype's values.
func rounder(d dtype.DType, e string) string {
	switch d {
	case dtype.F16:
		return "loom_round_f16(" + e + ")"
	case dtype.BF16:
		return "loom_round_bf16(" + e + ")"
	case dtype.F8E4M3:
		return "loom_round_f8e4m3(" + e + ")"
	case dtype.U8:
		return "loom_wrap_u8(" + e + ")"
	}
	return e
}

// floatLit is a float constant as a C expression of type float. Finite
// values use the shortest decimal that reads back as the same float
// (compilers round literals correctly); infinities and NaNs use their bits.
func floatLit(v float32) string {
	if math.IsInf(float64(v), 0) || v != v {
		return fmt.Sprintf("__uint_as_float(0x%08xu)", math.Float32bits(v))
	}
	return decimal(strconv.FormatFloat(float64(v), 'g', -1, 32)) + "f"
}

// doubleLit is a double constant as a C expression of type double.
func doubleLit(v float64) string {
	if math.IsInf(v, 0) || v != v {
		return fmt.Sprintf("__longlong_as_double(0x%016xLL)", math.Float64bits(v))
	}
	return decimal(strconv.FormatFloat(v, 'g', -1, 64))
}

// decimal makes Go's float formatting a C floating literal.
func decimal(s string) string {
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	} else if i := strings.IndexByte(s, 'e'); i >= 0 && !strings.Contains(s[:i], ".") {
		s = s[:i] + ".0" + s[i:]
	}
	return s
}

// intLit is an integer constant of compute type c.
func intLit(c string, v int64) string {
	if c == "unsigned int" {
		return fmt.Sprintf("%du", uint32(v))
	}
	if v == math.MinInt64 {
		return "(-9223372036854775807LL - 1LL)"
	}
	return fmt.Sprintf("%dLL", v)
}

package safetensors

import "fmt"

// DType is the element type of a stored tensor.
type DType uint8

// The dtypes this package reads and writes. The names (String) are the ones
// the header uses.
const (
	F64 DType = iota + 1
	F32
	F16
	BF16
	I64
	I32
	I16
	I8
	U8
	U16
	U32
	U64
	BOOL
	F8_E4M3
	F8_E5M2
)

var dtypeInfo = [...]struct {
	name string
	size int // bytes per element
}{
	F64:     {"F64", 8},
	F32:     {"F32", 4},
	F16:     {"F16", 2},
	BF16:    {"BF16", 2},
	I64:     {"I64", 8},
	I32:     {"I32", 4},
	I16:     {"I16", 2},
	I8:      {"I8", 1},
	U8:      {"U8", 1},
	U16:     {"U16", 2},
	U32:     {"U32", 4},
	U64:     {"U64", 8},
	BOOL:    {"BOOL", 1},
	F8_E4M3: {"F8_E4M3", 1},
	F8_E5M2: {"F8_E5M2", 1},
}

// knownUnsupported are dtype names the reference crate defines that Loom
// does not read: sub-byte floats, the FNUZ and E8M0 fp8 variants, complex.
var knownUnsupported = map[string]bool{
	"F4": true, "F6_E2M3": true, "F6_E3M2": true, "F8_E8M0": true,
	"F8_E4M3FNUZ": true, "F8_E5M2FNUZ": true, "C64": true,
}

// String is the header name of d ("F32", "BF16", ...).
func (d DType) String() string {
	if d.Valid() {
		return dtypeInfo[d].name
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the number of bytes one element of d occupies (0 for an invalid d).
func (d DType) Size() int {
	if d.Valid() {
		return dtypeInfo[d].size
	}
	return 0
}

// Valid reports whether d is one of the constants above.
func (d DType) Valid() bool { return d >= F64 && int(d) < len(dtypeInfo) }

// ParseDType returns the dtype named s, or an error that says whether the
// name is a safetensors dtype Loom does not support or no dtype at all.
func ParseDType(s string) (DType, error) {
	for d := F64; int(d) < len(dtypeInfo); d++ {
		if dtypeInfo[d].name == s {
			return d, nil
		}
	}
	if knownUnsupported[s] {
		return 0, fmt.Errorf("dtype %s is not supported (supported: F64, F32, F16, BF16, I64, I32, I16, I8, U8, U16, U32, U64, BOOL, F8_E4M3, F8_E5M2)", s)
	}
	return 0, fmt.Errorf("unknown dtype %q", s)
}

//go:build !amd64

package cpu

func vmath8(dst, x *float32, n int, mode int) {
	panic("unreachable: no vector math on this architecture")
}

const hasVMath = false

func f16to32(dst *float32, src *uint16, n int) { panic("unreachable: no F16C on this architecture") }

func f32to16(dst *uint16, src *float32, n int) { panic("unreachable: no F16C on this architecture") }

const hasF16C = false

func bf16to32(dst *float32, src *uint16, n int) { panic("unreachable: no AVX2 on this architecture") }

func binF32(dst, x, y *float32, n int, op int)              { panic("unreachable") }
func affineF32(dst, x *float32, n int, mul, add float32)    { panic("unreachable") }
func negF32(dst, x *float32, n int)                         { panic("unreachable") }
func cmpF32(dst *int64, x, y *float32, n int, pred int)     { panic("unreachable") }
func whereF32(dst *float32, c *int64, t, f *float32, n int) { panic("unreachable") }

const hasAVX2 = false

func binScalarF32(dst, x *float32, n int, s float32, op int) { panic("unreachable") }
func sumF32(x *float32, n int) float32                       { panic("unreachable") }

//go:build !amd64

package cpu

func vmath8(dst, x *float32, n int, mode int) {
	panic("unreachable: no vector math on this architecture")
}

const hasVMath = false

func f16to32(dst *float32, src *uint16, n int) { panic("unreachable: no F16C on this architecture") }

func f32to16(dst *uint16, src *float32, n int) { panic("unreachable: no F16C on this architecture") }

const hasF16C = false

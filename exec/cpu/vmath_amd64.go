package cpu

import "golang.org/x/sys/cpu"

//go:noescape
func vmath8(dst, x *float32, n int, mode int)

// hasVMath reports whether vmath8 can run: it needs AVX2 and FMA (x/sys/cpu
// is the maintained way to ask; it also checks the OS saves YMM state).
var hasVMath = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func f16to32(dst *float32, src *uint16, n int)

//go:noescape
func f32to16(dst *uint16, src *float32, n int)

//go:noescape
func bf16to32(dst *float32, src *uint16, n int)

// hasF16C reports whether the hardware f16 conversions can run.
var hasF16C = cpu.X86.HasAVX && cpu.X86.HasF16C

//go:noescape
func binF32(dst, x, y *float32, n int, op int)

//go:noescape
func affineF32(dst, x *float32, n int, mul, add float32)

//go:noescape
func negF32(dst, x *float32, n int)

//go:noescape
func cmpF32(dst *int64, x, y *float32, n int, pred int)

//go:noescape
func whereF32(dst *float32, c *int64, t, f *float32, n int)

// hasAVX2 reports whether the AVX2 elementwise loops can run.
var hasAVX2 = cpu.X86.HasAVX2

//go:noescape
func binScalarF32(dst, x *float32, n int, s float32, op int)

//go:noescape
func sumF32(x *float32, n int) float32

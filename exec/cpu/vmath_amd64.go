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

// hasF16C reports whether the hardware f16 conversions can run.
var hasF16C = cpu.X86.HasAVX && cpu.X86.HasF16C

package cpu

import "golang.org/x/sys/cpu"

//go:noescape
func dot4F64(q0, q1, q2, q3, k *float32, n int, out *[4]float64)

//go:noescape
func axpy4F64(a0, a1, a2, a3 *float64, p *[4]float64, v *float32, n int)

// hasAttn4 reports whether dot4F64 and axpy4F64 can run (AVX2 and FMA).
var hasAttn4 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

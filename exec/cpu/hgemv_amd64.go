package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func hdotRowsBF16(w unsafe.Pointer, ldw, n int, x *float32, k int, out *float32)

//go:noescape
func hdotRowsF16(w unsafe.Pointer, ldw, n int, x *float32, k int, out *float32)

//go:noescape
func hdotRowsF32(w unsafe.Pointer, ldw, n int, x *float32, k int, out *float32)

// hasHGemv reports whether the few-row product rows can run (AVX2, FMA and
// F16C).
var hasHGemv = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

//go:build !amd64

package cpu

import "unsafe"

func hdotRowsBF16(w unsafe.Pointer, ldw, n int, x *float32, k int, out *float32) {
	panic("unreachable")
}

func hdotRowsF16(w unsafe.Pointer, ldw, n int, x *float32, k int, out *float32) {
	panic("unreachable")
}

func hdotRowsF32(w unsafe.Pointer, ldw, n int, x *float32, k int, out *float32) {
	panic("unreachable")
}

const hasHGemv = false

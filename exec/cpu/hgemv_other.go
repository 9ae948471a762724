//go:build !amd64

package cpu

func hdotRowsBF16(w *uint16, ldw, n int, x *float32, k int, out *float32) { panic("unreachable") }

func hdotRowsF16(w *uint16, ldw, n int, x *float32, k int, out *float32) { panic("unreachable") }

const hasHGemv = false

//go:build !amd64

package quant

// No assembly dot products off amd64: VecDot runs the Go twins.
const hasDotAVX2 = false

var asmDots = map[Type]func(w, a []byte, nb int) float32{}

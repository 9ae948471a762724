//go:build !amd64

package quant

// No assembly dot products off amd64: VecDot runs the Go twins.
const hasDotAVX2 = false

var asmDots = map[Type]func(w, a []byte, nb int) float32{}

var asmDots2 = map[Type]func(w0, w1, a []byte, nb int) (float32, float32){}

// dotRowsPrepared: no prepared-activation kernel off amd64.
func dotRowsPrepared(w Type, rows, arow []byte, rb, nb, i int, out []float32) (int, bool) {
	return i, false
}

// dotRows2Prepared: no two-activation kernel off amd64.
func dotRows2Prepared(w Type, rows, arowA, arowB []byte, rb, nb int, outA, outB []float32) bool {
	return false
}

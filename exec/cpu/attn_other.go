//go:build !amd64

package cpu

func dot4F64(q0, q1, q2, q3, k *float32, n int, out *[4]float64) { panic("unreachable") }

func axpy4F64(a0, a1, a2, a3 *float64, p *[4]float64, v *float32, n int) { panic("unreachable") }

const hasAttn4 = false

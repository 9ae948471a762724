package blas

// What every host backend shares: validation, the degenerate cases and the
// batch addressing. Decisions:
//   - Backends see only non-empty items with K > 0. M, N or Batch 0 returns
//     before any library call; K = 0 scales C by beta here (BLAS libraries
//     differ on K = 0: some return early, some read nothing), with beta = 0
//     storing zeros so that NaN/Inf already in C do not survive (the BLAS
//     rule for beta = 0).
//   - One item is a gemm on sub-slices cut to exactly the elements it
//     touches, so gonum's own length checks hold and a pointer to element 0
//     is the matrix start for OpenBLAS.

// item is one batch item of a call: the operand slices cut to what it
// touches.
type item[T float32 | float64] struct {
	a, b, c []T
}

// prepare checks c and handles the calls that need no library: it returns
// done = true when the call is complete (empty, or K = 0 and C scaled).
func prepare[T float32 | float64](c Call, a, b, cc []T) (done bool, err error) {
	if err := c.Check(len(a), len(b), len(cc)); err != nil {
		return true, err
	}
	if c.empty() {
		return true, nil
	}
	if c.K == 0 {
		scaleC(c, cc)
		return true, nil
	}
	return false, nil
}

// scaleC sets C = beta·C on every batch item.
func scaleC[T float32 | float64](c Call, cc []T) {
	if c.Beta == 1 {
		return
	}
	beta := T(c.Beta)
	for bi := range c.Batch {
		for m := range c.M {
			row := cc[bi*c.StrideC+m*c.LDC:][:c.N]
			if beta == 0 {
				clear(row)
				continue
			}
			for n := range row {
				row[n] *= beta
			}
		}
	}
}

// itemAt returns batch item bi of a prepared (non-empty, K > 0) call.
func itemAt[T float32 | float64](c Call, bi int, a, b, cc []T) item[T] {
	ops := c.operands()
	cut := func(o operand, s []T) []T {
		off := bi * o.stride
		return s[off : off+(o.rows-1)*o.ld+o.cols]
	}
	return item[T]{a: cut(ops[0], a), b: cut(ops[1], b), c: cut(ops[2], cc)}
}

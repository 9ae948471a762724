package blas

// Call validation. Decisions:
//   - Check is the only bounds check: backends call it first and then pass
//     raw pointers (OpenBLAS) or exact sub-slices (gonum), so everything a
//     backend touches is proven in range here.
//   - Spans are computed in int64 with explicit overflow checks; a call whose
//     largest index does not fit in an int is rejected, never wrapped.
//   - An operand the call does not touch (A and B when K = 0; every operand
//     when M, N or Batch is 0) is neither bounds-checked nor held to a
//     minimum leading dimension (only ld ≥ 0): an empty tensor's strides
//     say nothing. A touched operand needs ld ≥ max(1, stored row length),
//     as BLAS requires.
//   - Strides must be ≥ 0 (the contract addresses item b at Stride·b); C's
//     must be > 0 when Batch > 1 (broadcasting C would race items against
//     each other). Overlap between C items is not detected: callers must not
//     ask for it.

import (
	"fmt"
	"math"
)

// CallError is a Call that Check rejected; its message names the call.
type CallError struct {
	Call   Call
	Reason string
}

func (e *CallError) Error() string {
	return "blas: " + e.Call.String() + ": " + e.Reason
}

// operand is one matrix of a Call as stored: rows × cols with leading
// dimension ld, batch item b at stride·b.
type operand struct {
	name       string
	rows, cols int
	ld, stride int
}

// operands returns A, B and C as stored (after the transposes).
func (c Call) operands() [3]operand {
	a := operand{"A", c.M, c.K, c.LDA, c.StrideA}
	if c.TransA {
		a.rows, a.cols = c.K, c.M
	}
	b := operand{"B", c.K, c.N, c.LDB, c.StrideB}
	if c.TransB {
		b.rows, b.cols = c.N, c.K
	}
	return [3]operand{a, b, {"C", c.M, c.N, c.LDC, c.StrideC}}
}

// empty reports whether the call touches nothing (M, N or Batch is 0).
func (c Call) empty() bool { return c.M == 0 || c.N == 0 || c.Batch == 0 }

// Check validates c for operand slices of lengths lenA, lenB and lenC: dims
// and strides non-negative, leading dimensions of touched operands at least
// max(1, stored row length), StrideC non-zero when Batch > 1, and every element the call
// touches inside its slice. The error is a *CallError naming c.
func (c Call) Check(lenA, lenB, lenC int) error {
	bad := func(format string, args ...any) error {
		return &CallError{Call: c, Reason: fmt.Sprintf(format, args...)}
	}
	if c.M < 0 || c.N < 0 || c.K < 0 || c.Batch < 0 {
		return bad("negative dimension")
	}
	if c.StrideA < 0 || c.StrideB < 0 || c.StrideC < 0 {
		return bad("negative batch stride")
	}
	if c.Batch > 1 && c.StrideC == 0 {
		return bad("StrideC is 0 with batch %d: C cannot be broadcast", c.Batch)
	}
	lens := [3]int{lenA, lenB, lenC}
	for i, o := range c.operands() {
		touched := !c.empty() && (o.name == "C" || c.K > 0)
		if o.ld < 0 {
			return bad("ld%s=%d < 0", lower(o.name), o.ld)
		}
		if !touched {
			continue
		}
		if min := max(1, o.cols); o.ld < min {
			return bad("ld%s=%d < %d (%s stored %d×%d)", lower(o.name), o.ld, min, o.name, o.rows, o.cols)
		}
		last, ok := o.lastIndex(c.Batch)
		if !ok {
			return bad("%s's largest index overflows int", o.name)
		}
		if last >= int64(lens[i]) {
			return bad("%s needs %d elements, slice has %d", o.name, last+1, lens[i])
		}
	}
	return nil
}

// Extents returns how many elements of A, B and C the call touches, each
// counted from the operand's first element ((batch−1)·stride + (rows−1)·ld +
// cols as stored): 0 for an operand it does not touch (A and B when K = 0,
// every operand when M, N or Batch is 0). Executors size and bounds-check
// their buffers with it; Check has already rejected calls whose extents
// overflow.
func (c Call) Extents() (a, b, cc int) {
	var n [3]int
	for i, o := range c.operands() {
		if c.empty() || (o.name != "C" && c.K == 0) {
			continue
		}
		last, _ := o.lastIndex(c.Batch)
		n[i] = int(last + 1)
	}
	return n[0], n[1], n[2]
}

// lastIndex returns (batch−1)·stride + (rows−1)·ld + cols−1, the largest
// element index o touches (rows, cols, batch ≥ 1), and false if it
// overflows an int.
func (o operand) lastIndex(batch int) (int64, bool) {
	s, ok1 := mul64(int64(batch-1), int64(o.stride))
	r, ok2 := mul64(int64(o.rows-1), int64(o.ld))
	t, ok3 := add64(s, r)
	last, ok4 := add64(t, int64(o.cols-1))
	return last, ok1 && ok2 && ok3 && ok4 && last <= math.MaxInt
}

// mul64 and add64 are a·b and a+b for a, b ≥ 0, with false on overflow.
func mul64(a, b int64) (int64, bool) {
	if a != 0 && b > math.MaxInt64/a {
		return 0, false
	}
	return a * b, true
}

func add64(a, b int64) (int64, bool) {
	if a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

func lower(s string) string {
	return string(rune(s[0]) + 'a' - 'A')
}

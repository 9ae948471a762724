package blas

// Check tests: each rejected call's error is a *CallError whose message
// names the call (Call.String) and the reason; the valid edge cases (exact
// lengths, untouched operands) pass.

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	nn := Call{M: 2, N: 3, K: 4, LDA: 4, LDB: 3, LDC: 3, Batch: 1, Alpha: 1} // A 8, B 12, C 6 elements
	tt := Call{M: 2, N: 3, K: 4, TransA: true, TransB: true, LDA: 2, LDB: 4, LDC: 3, Batch: 1}
	with := func(c Call, f func(*Call)) Call { f(&c); return c }
	huge := 1 << 40
	for _, tc := range []struct {
		name             string
		c                Call
		lenA, lenB, lenC int
		want             string // substring of the error; "" = valid
	}{
		{"exact NN", nn, 8, 12, 6, ""},
		{"exact TT", tt, 8, 12, 6, ""},
		{"negative M", with(nn, func(c *Call) { c.M = -1 }), 8, 12, 6, "negative dimension"},
		{"negative K", with(nn, func(c *Call) { c.K = -2 }), 8, 12, 6, "negative dimension"},
		{"negative batch", with(nn, func(c *Call) { c.Batch = -1 }), 8, 12, 6, "negative dimension"},
		{"negative stride", with(nn, func(c *Call) { c.StrideB = -3 }), 8, 12, 6, "negative batch stride"},
		{"lda < K", with(nn, func(c *Call) { c.LDA = 3 }), 8, 12, 6, "lda=3 < 4"},
		{"lda < M transposed", with(tt, func(c *Call) { c.LDA = 1 }), 8, 12, 6, "lda=1 < 2"},
		{"ldb < N", with(nn, func(c *Call) { c.LDB = 2 }), 8, 12, 6, "ldb=2 < 3"},
		{"ldb < K transposed", with(tt, func(c *Call) { c.LDB = 3 }), 8, 12, 6, "ldb=3 < 4"},
		{"ldc < N", with(nn, func(c *Call) { c.LDC = 2 }), 8, 12, 6, "ldc=2 < 3"},
		{"ldc 0", with(nn, func(c *Call) { c.LDC = 0 }), 8, 12, 6, "ldc=0 < 3"},
		{"negative ld untouched", with(nn, func(c *Call) { c.K, c.LDA = 0, -1 }), 0, 0, 6, "lda=-1 < 0"},
		{"short A", nn, 7, 12, 6, "A needs 8 elements, slice has 7"},
		{"short B", nn, 8, 11, 6, "B needs 12 elements, slice has 11"},
		{"short C", nn, 8, 12, 5, "C needs 6 elements, slice has 5"},
		{"short C padded", with(nn, func(c *Call) { c.LDC = 10 }), 8, 12, 12, "C needs 13 elements"},
		{"short batch", with(nn, func(c *Call) { c.Batch, c.StrideA, c.StrideB, c.StrideC = 2, 8, 12, 6 }), 16, 24, 11, "C needs 12 elements"},
		{"broadcast A", with(nn, func(c *Call) { c.Batch, c.StrideA, c.StrideB, c.StrideC = 2, 0, 12, 6 }), 8, 24, 12, ""},
		{"broadcast C", with(nn, func(c *Call) { c.Batch, c.StrideA, c.StrideB, c.StrideC = 2, 8, 12, 0 }), 16, 24, 6, "StrideC is 0"},
		{"batch 1 ignores StrideC 0", with(nn, func(c *Call) { c.StrideA, c.StrideB = 99, 99 }), 8, 12, 6, ""},
		{"overflow ld", with(nn, func(c *Call) { c.M, c.LDA = huge, huge }), 8, 12, 6, "A's largest index overflows"},
		{"overflow stride", with(nn, func(c *Call) { c.Batch, c.StrideA, c.StrideB, c.StrideC = huge, huge, 1, huge }), 8, 12, 6, "A's largest index overflows"},
		{"overflow to max", with(nn, func(c *Call) { c.Batch, c.StrideC = 2, math.MaxInt }), 16, 24, 6, "C's largest index overflows"},
		{"K 0: A, B untouched", with(nn, func(c *Call) { c.K, c.LDA, c.LDB = 0, 0, 0 }), 0, 0, 6, ""},
		{"M 0: nothing touched", with(nn, func(c *Call) { c.M, c.LDC = 0, 0 }), 0, 0, 0, ""},
		{"batch 0: nothing touched", with(nn, func(c *Call) { c.Batch = 0 }), 0, 0, 0, ""},
	} {
		err := tc.c.Check(tc.lenA, tc.lenB, tc.lenC)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var ce *CallError
		if !errors.As(err, &ce) {
			t.Errorf("%s: want a *CallError containing %q, got %v", tc.name, tc.want, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, tc.c.String()) {
			t.Errorf("%s: error %q should contain %q and name the call %q", tc.name, msg, tc.want, tc.c.String())
		}
	}
}

// TestBackendsCheck: both backends refuse a bad call before touching
// memory, with Check's error.
func TestBackendsCheck(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h Host) {
		c := Call{M: 2, N: 2, K: 2, LDA: 2, LDB: 2, LDC: 2, Batch: 1, Alpha: 1}
		err := h.Sgemm(c, make([]float32, 4), make([]float32, 3), make([]float32, 4))
		if err == nil || !strings.Contains(err.Error(), "B needs 4 elements") {
			t.Fatalf("short B: %v", err)
		}
		err = h.Dgemm(with32(c), make([]float64, 4), make([]float64, 4), make([]float64, 4))
		if err == nil || !strings.Contains(err.Error(), "ldc=1 < 2") {
			t.Fatalf("bad ldc: %v", err)
		}
	})
}

func with32(c Call) Call { c.LDC = 1; return c }

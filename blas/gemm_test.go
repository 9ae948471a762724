package blas

// GEMM tests run on every host backend (OpenBLAS skips when the library is
// absent) against a float64 triple-loop reference on fresh random inputs.
// Decisions:
//   - Error measure: ‖got − ref‖_F / ‖ref‖_F over the elements C's items
//     cover; when ref is all zeros (K = 0, beta = 0) got must be exactly 0.
//     Tolerances: f64 1e-12, f32 1e-5·√K (f32 rounding grows like √K for
//     random-signed sums); the K = 16384 case also asserts < 1e-4.
//   - Operand slices are exactly as long as Check requires plus a tail, and
//     every element of C outside the items (padding, gaps, tail) must come
//     back bit-identical, so a backend that writes out of place fails.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
)

type backend struct {
	name string
	open func(threads int) (Host, error)
}

var backends = []backend{
	{"gonum", func(t int) (Host, error) { return OpenGonum(t), nil }},
	{"openblas", OpenOpenBLAS},
}

// forEachBackend runs f as a subtest per backend, skipping OpenBLAS (with
// the loader's reason) where it is not installed.
func forEachBackend(t *testing.T, f func(t *testing.T, h Host)) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			h, err := be.open(runtime.GOMAXPROCS(0))
			if err != nil {
				t.Skipf("OpenBLAS not available (install libopenblas0-pthread): %v", err)
			}
			f(t, h)
		})
	}
}

// layout fills in tight leading dimensions and strides, plus pad extra
// elements per row and per batch item, for the zero fields of c.
func layout(c Call, pad int) Call {
	rowLen := func(trans bool, notT, t int) int {
		if trans {
			return t
		}
		return notT
	}
	if c.LDA == 0 {
		c.LDA = max(1, rowLen(c.TransA, c.K, c.M)+pad)
	}
	if c.LDB == 0 {
		c.LDB = max(1, rowLen(c.TransB, c.N, c.K)+pad)
	}
	if c.LDC == 0 {
		c.LDC = max(1, c.N+pad)
	}
	return c
}

// need is the slice length Check asks of each operand of c (0 if untouched).
func need(c Call) [3]int {
	var n [3]int
	for i, o := range c.operands() {
		if c.empty() || (o.name != "C" && c.K == 0) {
			continue
		}
		last, _ := o.lastIndex(c.Batch)
		n[i] = int(last) + 1
	}
	return n
}

// at returns the index of op(X)[r, col] of batch item bi for operand o.
func at(o operand, trans bool, bi, r, col int) int {
	if trans {
		r, col = col, r
	}
	return bi*o.stride + r*o.ld + col
}

// reference computes C = alpha·op(A)·op(B) + beta·C in float64 into a new
// slice (beta = 0 ignores C, as BLAS does).
func reference[T float32 | float64](c Call, a, b, cc []T) []float64 {
	ops := c.operands()
	out := make([]float64, len(cc))
	for i, v := range cc {
		out[i] = float64(v)
	}
	if c.empty() {
		return out
	}
	for bi := range c.Batch {
		for m := range c.M {
			for n := range c.N {
				var s float64
				for k := range c.K {
					s += float64(a[at(ops[0], c.TransA, bi, m, k)]) * float64(b[at(ops[1], c.TransB, bi, k, n)])
				}
				i := at(ops[2], false, bi, m, n)
				if c.Beta == 0 {
					out[i] = c.Alpha * s
				} else {
					out[i] = c.Alpha*s + c.Beta*out[i]
				}
			}
		}
	}
	return out
}

func gemm[T float32 | float64](h Host, c Call, a, b, cc []T) error {
	switch a := any(a).(type) {
	case []float32:
		return h.Sgemm(c, a, any(b).([]float32), any(cc).([]float32))
	case []float64:
		return h.Dgemm(c, a, any(b).([]float64), any(cc).([]float64))
	}
	panic("unreachable")
}

func randSlice[T float32 | float64](rng *rand.Rand, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = T(2*rng.Float64() - 1)
	}
	return s
}

// checkGemm runs c (with the given fill for C's initial values) on h and
// compares with the reference; it returns the normwise relative error.
func checkGemm[T float32 | float64](t *testing.T, h Host, c Call, rng *rand.Rand, cFill func(i int) T) float64 {
	t.Helper()
	const tail = 3
	n := need(c)
	a, b, cc := randSlice[T](rng, n[0]+tail), randSlice[T](rng, n[1]+tail), randSlice[T](rng, n[2]+tail)
	if cFill != nil {
		for i := range cc {
			cc[i] = cFill(i)
		}
	}
	before := append([]T(nil), cc...)
	want := reference(c, a, b, cc)
	if err := gemm(h, c, a, b, cc); err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	covered := make([]bool, len(cc))
	if !c.empty() {
		for bi := range c.Batch {
			for m := range c.M {
				for n := range c.N {
					covered[bi*c.StrideC+m*c.LDC+n] = true
				}
			}
		}
	}
	var diff, norm float64
	for i := range cc {
		if !covered[i] {
			if math.Float64bits(float64(cc[i])) != math.Float64bits(float64(before[i])) {
				t.Fatalf("%v: C[%d] outside the items changed: %v → %v", c, i, before[i], cc[i])
			}
			continue
		}
		d := float64(cc[i]) - want[i]
		diff += d * d
		norm += want[i] * want[i]
	}
	if norm == 0 {
		if diff != 0 || math.IsNaN(diff) {
			t.Fatalf("%v: want all-zero C, error² %g", c, diff)
		}
		return 0
	}
	rel := math.Sqrt(diff / norm)
	tol := 1e-12
	var zero T
	if _, ok := any(zero).(float32); ok {
		tol = 1e-5 * math.Sqrt(float64(max(c.K, 1)))
	}
	if !(rel <= tol) {
		t.Fatalf("%v alpha=%g beta=%g: normwise relative error %.3g > %.3g", c, c.Alpha, c.Beta, rel, tol)
	}
	return rel
}

// cases is the table both precisions and all backends run.
func cases() []Call {
	var cs []Call
	for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
		base := Call{M: 17, N: 19, K: 23, TransA: tr[0], TransB: tr[1], Batch: 1, Alpha: 1}
		cs = append(cs, layout(base, 0), layout(base, 5))
		// Batch with padded strides, and broadcast A or B.
		bc := layout(Call{M: 9, N: 7, K: 11, TransA: tr[0], TransB: tr[1], Batch: 3, Alpha: 1}, 2)
		bc.StrideA, bc.StrideB, bc.StrideC = 11*13+4, 11*13+1, 9*bc.LDC+6
		cs = append(cs, bc)
		ba := bc
		ba.StrideA = 0
		bb := bc
		bb.StrideB = 0
		cs = append(cs, ba, bb)
		// Larger than gonum's parallel threshold (4 blocks of 64×64).
		cs = append(cs, layout(Call{M: 130, N: 140, K: 70, TransA: tr[0], TransB: tr[1], Batch: 1, Alpha: 1}, 1))
	}
	cs = append(cs,
		layout(Call{M: 1, N: 33, K: 40, Batch: 1, Alpha: 1}, 0),
		layout(Call{M: 33, N: 1, K: 40, Batch: 1, Alpha: 1}, 0),
		layout(Call{M: 12, N: 13, K: 1, Batch: 1, Alpha: 1}, 0),
		layout(Call{M: 1, N: 1, K: 1, Batch: 1, Alpha: 1}, 0),
		layout(Call{M: 1, N: 1, K: 300, TransA: true, TransB: true, Batch: 1, Alpha: 1}, 0),
		layout(Call{M: 8, N: 9, K: 10, Batch: 1, Alpha: -1.5, Beta: 0.25}, 1),
		layout(Call{M: 8, N: 9, K: 10, Batch: 1, Alpha: 0, Beta: 0.5}, 1),
		layout(Call{M: 8, N: 9, K: 10, Batch: 1, Alpha: 2, Beta: 1}, 1),
		// Many small items: gonum spreads these over goroutines.
		func() Call {
			c := layout(Call{M: 8, N: 8, K: 8, TransB: true, Batch: 64, Alpha: 1, Beta: 0.5}, 0)
			c.StrideA, c.StrideB, c.StrideC = 64, 64, 64
			return c
		}(),
	)
	return cs
}

func TestGemm(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h Host) {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, c := range cases() {
			c := c
			if c.Batch > 1 && c.StrideC == 0 {
				t.Fatalf("bad test case %v", c)
			}
			t.Run("f32/"+c.String(), func(t *testing.T) { checkGemm[float32](t, h, c, rng, nil) })
			t.Run("f64/"+c.String(), func(t *testing.T) { checkGemm[float64](t, h, c, rng, nil) })
		}
	})
}

// TestBetaZeroIgnoresC: beta = 0 must overwrite C, NaN included, for K > 0
// (the library) and K = 0 (our scaling).
func TestBetaZeroIgnoresC(t *testing.T) {
	nan := func(int) float64 { return math.NaN() }
	nan32 := func(int) float32 { return float32(math.NaN()) }
	forEachBackend(t, func(t *testing.T, h Host) {
		rng := rand.New(rand.NewPCG(3, 4))
		for _, k := range []int{0, 5} {
			c := layout(Call{M: 4, N: 6, K: k, Batch: 2, Alpha: 1, Beta: 0}, 1)
			c.StrideC = 4 * c.LDC
			c.StrideA, c.StrideB = max(4*c.LDA, 1), max(k*c.LDB, 1)
			checkGemm(t, h, c, rng, nan)
			checkGemm(t, h, c, rng, nan32)
		}
	})
}

func TestKZero(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h Host) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, beta := range []float64{0, 0.5, 1} {
			for _, tr := range []bool{false, true} {
				// lda and ldb 0: the operands are untouched and empty.
				c := Call{M: 5, N: 7, K: 0, TransA: tr, TransB: tr, LDC: 9, Batch: 3, StrideC: 50, Alpha: 1, Beta: beta}
				if tr {
					c.LDA = 5 // A stored K×M = 0×5
				} else {
					c.LDB = 7 // B stored K×N = 0×7
				}
				checkGemm[float32](t, h, c, rng, nil)
				checkGemm[float64](t, h, c, rng, nil)
				// nil A and B are fine when K = 0.
				cc := []float64{1, 2}
				if err := h.Dgemm(Call{M: 1, N: 2, LDC: 2, Batch: 1, Alpha: 1, Beta: beta}, nil, nil, cc); err != nil {
					t.Fatal(err)
				}
				if cc[0] != beta*1 || cc[1] != beta*2 {
					t.Fatalf("beta=%g: C = %v", beta, cc)
				}
			}
		}
	})
}

// TestEmpty: M, N or Batch 0 touch nothing and accept nil slices.
func TestEmpty(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h Host) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, c := range []Call{
			{M: 0, N: 5, K: 3, LDA: 3, LDB: 5, LDC: 5, Batch: 1, Alpha: 1},
			{M: 4, N: 0, K: 3, LDA: 3, LDB: 0, LDC: 0, Batch: 1, Alpha: 1},
			{M: 4, N: 5, K: 3, LDA: 3, LDB: 5, LDC: 5, Batch: 0, Alpha: 1},
			{M: 0, N: 0, K: 0, Batch: 4, StrideC: 1, Alpha: 1},
		} {
			checkGemm[float32](t, h, c, rng, nil)
			checkGemm[float64](t, h, c, rng, nil)
			if err := h.Sgemm(c, nil, nil, nil); err != nil {
				t.Fatalf("%v with nil slices: %v", c, err)
			}
		}
	})
}

// TestLargeK: f32 accumulation over K = 16384 stays within 1e-4 normwise of
// the f64 reference.
func TestLargeK(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h Host) {
		rng := rand.New(rand.NewPCG(9, 10))
		for _, tr := range [][2]bool{{false, false}, {true, true}} {
			c := layout(Call{M: 16, N: 24, K: 16384, TransA: tr[0], TransB: tr[1], Batch: 1, Alpha: 1}, 0)
			rel := checkGemm[float32](t, h, c, rng, nil)
			if rel >= 1e-4 {
				t.Fatalf("%v: f32 normwise relative error %.3g ≥ 1e-4", c, rel)
			}
			t.Logf("%v: f32 normwise relative error %.3g", c, rel)
		}
	})
}

// TestConcurrent runs many calls at once on one host (run with -race).
func TestConcurrent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, h Host) {
		var wg sync.WaitGroup
		errs := make(chan string, 64)
		for g := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 11))
				for i := range 6 {
					c := layout(Call{M: 5 + g, N: 6 + i, K: 7 + g*i, TransA: g%2 == 0, TransB: i%2 == 0, Batch: 2, Alpha: 1, Beta: 0.5}, 1)
					c.StrideA, c.StrideB, c.StrideC = 400, 400, 400
					if msg := runOne(h, c, rng); msg != "" {
						errs <- msg
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for msg := range errs {
			t.Error(msg)
		}
	})
}

// runOne is checkGemm for goroutines (no t.Fatal off the test goroutine).
func runOne(h Host, c Call, rng *rand.Rand) string {
	n := need(c)
	a, b, cc := randSlice[float32](rng, n[0]), randSlice[float32](rng, n[1]), randSlice[float32](rng, n[2])
	want := reference(c, a, b, cc)
	if err := h.Sgemm(c, a, b, cc); err != nil {
		return err.Error()
	}
	for bi := range c.Batch {
		for m := range c.M {
			for n := range c.N {
				i := bi*c.StrideC + m*c.LDC + n
				if d := math.Abs(float64(cc[i]) - want[i]); d > 1e-4 {
					return fmt.Sprintf("%v: C[%d] = %g, want %g", c, i, cc[i], want[i])
				}
			}
		}
	}
	return ""
}

func TestOpen(t *testing.T) {
	t.Setenv(EnvBackend, "gonum")
	h, why := Open(2)
	if !strings.HasPrefix(h.Name(), "gonum") || !strings.Contains(why, "LOOM_BLAS=gonum") {
		t.Fatalf("LOOM_BLAS=gonum: got %q, %q", h.Name(), why)
	}
	t.Setenv(EnvBackend, "mkl")
	if _, why := Open(2); !strings.Contains(why, `LOOM_BLAS="mkl" ignored`) {
		t.Fatalf("LOOM_BLAS=mkl: %q should say it is ignored", why)
	}
	t.Setenv(EnvBackend, "")
	h, why = Open(2)
	t.Logf("Open: %s", why)
	if _, err := OpenOpenBLAS(2); err == nil {
		if !strings.HasPrefix(h.Name(), "openblas") {
			t.Fatalf("OpenBLAS loads but Open chose %q", h.Name())
		}
	} else if !strings.Contains(why, "using gonum") {
		t.Fatalf("no OpenBLAS but Open says %q", why)
	}
}

// TestDlopenError: a library that is not there gives an error naming it.
func TestDlopenError(t *testing.T) {
	_, _, err := dlopen([]string{"libloom-no-such-blas.so.0"})
	if err == nil || !strings.Contains(err.Error(), "libloom-no-such-blas.so.0") {
		t.Fatalf("dlopen of a missing library: %v", err)
	}
}

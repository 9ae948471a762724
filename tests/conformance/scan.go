package conformance

// Cumsum (Tensor.Cumsum): the inclusive scan along one dim.
//
// The reference here (names starting with scan) is written from the order
// ir/scan.go documents, level by level: chunk prefixes, chunk totals,
// group prefixes, group totals, tile prefixes, tile totals, the tile
// carries, then out = O + (e + l0), in the compute type (float32 for f32,
// f16 and bf16, rounded once to f16/bf16; float64; exact integers wrapped).
// Every executor must match it bit for bit (NaN payloads aside), fused and
// unfused, whatever kernel it picks; the order itself is checked against
// float64 sums within the bound ir/scan.go states, and against Candle's
// own test values. It reuses the indexing group's harness (idxCase: inputs
// under random strided and offset layouts, both fusion modes, two poison
// bytes, exact comparison).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
)

// Scan runs the cumsum group on every dtype. Every case is compiled with
// fusion on and off and run on two executors poisoned with 0xFF and 0x00.
func Scan(t *testing.T, newExec func(poison byte) exec.Executor) {
	s := &idxSuite{seed: idxSeed()}
	for _, p := range idxPoisons {
		s.execs = append(s.execs, newExec(p))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random inputs from seed %d: rerun with LOOM_SEED=%d go test -run '%s'", s.seed, s.seed, t.Name())
		}
		s.mu.Lock()
		t.Logf("scan: %d cases, %d compiled programs, %d runs", s.cases, s.programs, s.runs)
		s.mu.Unlock()
	})
	t.Run("Candle", func(t *testing.T) { scanTestCandle(t, s) })
	t.Run("Order", scanTestOrder)
	t.Run("Lengths", func(t *testing.T) { scanTestLengths(t, s) })
	t.Run("Dims", func(t *testing.T) { scanTestDims(t, s) })
	t.Run("Specials", func(t *testing.T) { scanTestSpecials(t, s) })
	t.Run("Empty", func(t *testing.T) { scanTestEmpty(t, s) })
	t.Run("Neighbours", func(t *testing.T) { scanTestNeighbours(t, s) })
	t.Run("Errors", scanTestErrors)
}

// ---------------------------------------------------------------------------
// The reference.

// The order's constants, restated from ir/scan.go's text (the test checks
// that the package agrees).
const (
	scanChunk  = 16
	scanGroup  = 16
	scanGroups = 16
	scanTile   = scanChunk * scanGroup * scanGroups
)

// scanNum is the compute type of the reference.
type scanNum interface{ float32 | float64 | int64 }

// scanSeq scans one sequence in ir/scan.go's order.
func scanSeq[T scanNum](x []T) []T {
	n := len(x)
	out := make([]T, n)
	tiles := (n + scanTile - 1) / scanTile
	// Steps 1–3 for every tile, and the tile totals.
	type tileSums struct {
		l0     []T // chunk prefixes, per element of the tile
		l1     []T // group prefixes of the chunk totals, per chunk
		l2     []T // tile prefix of the group totals, per group
		total  T
		m      int
		chunks int
	}
	ts := make([]tileSums, tiles)
	for k := range tiles {
		tile := x[k*scanTile : min(n, (k+1)*scanTile)]
		m := len(tile)
		s := tileSums{l0: make([]T, m), m: m, chunks: (m + scanChunk - 1) / scanChunk}
		c := make([]T, s.chunks) // chunk totals
		for i, v := range tile {
			if i%scanChunk == 0 {
				s.l0[i] = v
			} else {
				s.l0[i] = s.l0[i-1] + v
			}
			c[i/scanChunk] = s.l0[i]
		}
		s.l1 = make([]T, s.chunks)
		groups := (s.chunks + scanGroup - 1) / scanGroup
		d := make([]T, groups) // group totals
		for q, v := range c {
			if q%scanGroup == 0 {
				s.l1[q] = v
			} else {
				s.l1[q] = s.l1[q-1] + v
			}
			d[q/scanGroup] = s.l1[q]
		}
		s.l2 = make([]T, groups)
		for g, v := range d {
			if g == 0 {
				s.l2[g] = v
			} else {
				s.l2[g] = s.l2[g-1] + v
			}
		}
		s.total = s.l2[groups-1]
		ts[k] = s
	}
	// Step 5: the tile carries.
	carry := make([]T, tiles)
	for k := 1; k < tiles; k++ {
		if k == 1 {
			carry[k] = ts[0].total
		} else {
			carry[k] = carry[k-1] + ts[k-1].total
		}
	}
	// Steps 4 and 6.
	for k, s := range ts {
		for i := range s.m {
			q := i / scanChunk
			g, qg := q/scanGroup, q%scanGroup
			r := s.l0[i]
			switch {
			case q == 0:
			case g == 0:
				r = s.l1[q-1] + r
			case qg == 0:
				r = s.l2[g-1] + r
			default:
				r = (s.l2[g-1] + s.l1[q-1]) + r
			}
			if k > 0 {
				r = carry[k] + r
			}
			out[k*scanTile+i] = r
		}
	}
	return out
}

// scanRef is the cumsum of x along dim.
func scanRef(x idxArr, dim int) idxArr {
	out := idxZeros(x.dt, x.shape)
	if x.numel() == 0 {
		return out
	}
	n := x.shape[dim]
	right := idxNumel(x.shape[dim+1:])
	left := idxNumel(x.shape[:dim])
	for l := range left {
		for r := range right {
			at := func(i int) int { return (l*n+i)*right + r }
			switch x.dt {
			case dtype.F64:
				seq := make([]float64, n)
				for i := range seq {
					seq[i] = x.f[at(i)]
				}
				for i, v := range scanSeq(seq) {
					out.f[at(i)] = v
				}
			case dtype.F32, dtype.F16, dtype.BF16:
				seq := make([]float32, n)
				for i := range seq {
					seq[i] = float32(x.f[at(i)]) // exact: the values are the dtype's
				}
				for i, v := range scanSeq(seq) {
					out.f[at(i)] = idxRound(x.dt, float64(v))
				}
			default:
				seq := make([]int64, n)
				for i := range seq {
					seq[i] = x.i[at(i)]
				}
				for i, v := range scanSeq(seq) {
					out.i[at(i)] = idxWrap(x.dt, v)
				}
			}
		}
	}
	return out
}

// scanDraw draws cumsum inputs: floats normal-ish over a range of
// exponents, with integers, ±0 and (specials) ±Inf and NaN mixed in;
// integers over the dtype's whole range, so that sums wrap.
func scanDraw(r *rand.Rand, dt dtype.DType, shape []int, specials bool) idxArr {
	a := idxZeros(dt, shape)
	for k := range a.numel() {
		if !dt.IsFloat() {
			a.i[k] = idxDrawInt(r, dt)
			continue
		}
		var v float64
		switch p := r.IntN(64); {
		case p == 0:
			v = math.Copysign(0, -1)
		case p < 8:
			v = float64(r.IntN(17) - 8)
		case specials && p == 8 && r.IntN(64) == 0:
			v = []float64{math.Inf(1), math.Inf(-1), math.NaN()}[r.IntN(3)]
		default:
			v = r.NormFloat64() * math.Ldexp(1, r.IntN(16)-8)
		}
		a.f[k] = idxRound(dt, v)
	}
	return a
}

// ---------------------------------------------------------------------------
// Cases.

// scanTestCandle: candle-core's tests/tensor_tests.rs `cumsum`, values
// copied from its asserts (f32; integers, so every order is exact).
func scanTestCandle(t *testing.T, s *idxSuite) {
	c := s.newCase(t)
	arr := func(shape []int, v ...float64) idxArr {
		a := idxZeros(dtype.F32, shape)
		copy(a.f, v)
		return a
	}
	v1 := arr([]int{5}, 3, 1, 4, 1, 5)
	x1 := c.in("x1", v1)
	c.expect("1d", x1.Cumsum(0), arr([]int{5}, 3, 4, 8, 9, 14))
	col := x1.Unsqueeze(1)
	c.expect("col_dim0", col.Cumsum(0), arr([]int{5, 1}, 3, 4, 8, 9, 14))
	c.expect("col_dim1", col.Cumsum(1), arr([]int{5, 1}, 3, 1, 4, 1, 5))
	x2 := c.in("x2", arr([]int{2, 5}, 3, 1, 4, 1, 5, 2, 1, 7, 8, 2))
	c.expect("2d_dim1", x2.Cumsum(1), arr([]int{2, 5}, 3, 4, 8, 9, 14, 2, 3, 10, 18, 20))
	c.expect("2d_dim0", x2.Cumsum(0), arr([]int{2, 5}, 3, 1, 4, 1, 5, 5, 2, 11, 9, 7))
	c.expect("2d_dim-1", x2.Cumsum(-1), arr([]int{2, 5}, 3, 4, 8, 9, 14, 2, 3, 10, 18, 20))
	c.run()
}

// scanTestOrder checks the reference itself: the constants are ir's, the
// order is a cumsum (within ir/scan.go's bound of the float64 sums, exact
// for integers), and it is not a plain left-to-right sum (a case where
// the two differ in float32, so the order is observable).
func scanTestOrder(t *testing.T) {
	if scanTile != ir.ScanTile || scanChunk != ir.ScanChunk || scanGroup != ir.ScanGroup || scanGroups != ir.ScanGroups {
		t.Fatalf("ir's scan constants changed: update this reference")
	}
	r := rand.New(rand.NewPCG(idxSeed(), 77))
	for _, dt := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
		for _, n := range []int{1, 33, 4097, 100000} {
			x := scanDraw(r, dt, []int{n}, false)
			got := scanRef(x, 0)
			u := math.Ldexp(1, -24)
			if dt == dtype.F64 {
				u = math.Ldexp(1, -53)
			}
			var sum, abs float64
			for i := range n {
				sum += x.f[i]
				abs += math.Abs(x.f[i])
				h := float64(48 + i/scanTile)
				tol := h * u / (1 - h*u) * abs
				switch dt {
				case dtype.F16:
					tol += math.Abs(sum)*math.Ldexp(1, -11) + math.Ldexp(1, -25)
				case dtype.BF16:
					tol += math.Abs(sum)*math.Ldexp(1, -8) + math.Ldexp(1, -134)
				}
				if d := math.Abs(got.f[i] - sum); !(d <= tol) {
					t.Fatalf("%v n=%d: out[%d] = %v, float64 sum %v: |diff| %g above the bound %g", dt, n, i, got.f[i], sum, d, tol)
				}
			}
		}
	}
	// Integers: exact wrapped sums.
	for _, dt := range []dtype.DType{dtype.U8, dtype.U32, dtype.I64} {
		x := scanDraw(r, dt, []int{5000}, false)
		got := scanRef(x, 0)
		var s int64
		for i, v := range x.i {
			s += v
			if got.i[i] != idxWrap(dt, s) {
				t.Fatalf("%v: out[%d] = %d, want %d", dt, i, got.i[i], idxWrap(dt, s))
			}
		}
	}
	// [1, 2^-24 × 31]: left to right, 1 absorbs every 2^-24 (a tie, to
	// even); in the order, chunk 1's 2^-24 add up first, and its outputs
	// are 1 + k·2^-24 for k = 1 … 16 (exact from k = 2).
	x := make([]float32, 32)
	x[0] = 1
	for i := 1; i < 32; i++ {
		x[i] = float32(math.Ldexp(1, -24))
	}
	seq := float32(0)
	for _, v := range x {
		seq += v
	}
	if got, want := scanSeq(x)[31], float32(1+math.Ldexp(1, -20)); seq != 1 || got != want {
		t.Errorf("out[31] = %v, want %v (the sequential sum is %v)", got, want, seq)
	}
}

// scanTestLengths: every dtype, sequences of the lengths around chunk,
// group and tile boundaries, along the last dim, under random layouts.
func scanTestLengths(t *testing.T, s *idxSuite) {
	for _, dt := range scanDTypes {
		for _, n := range []int{1, 31, 32, 33, 1000, 4097, 100000} {
			t.Run(fmt.Sprintf("%v/%d", dt, n), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				rows := max(1, min(5, 20000/n))
				shape := []int{rows, n}
				v := scanDraw(c.r, dt, shape, false)
				x := c.laid("x", v, idxRandLayout(c.r, 2), func(ps []int) idxArr { return scanDraw(c.r, dt, ps, false) })
				c.expect("cumsum", x.Cumsum(idxDimArg(c.r, 1, 2)), scanRef(v, 1))
				c.run()
			})
		}
	}
}

// scanTestDims: dims other than the last (strided sequences), ranks 1–4,
// short and long sequences, many and few of them.
func scanTestDims(t *testing.T, s *idxSuite) {
	shapes := []struct {
		shape []int
		dim   int
	}{
		{[]int{7}, 0},
		{[]int{33, 5}, 0},
		{[]int{4097, 3}, 0},
		{[]int{3, 1000, 7}, 1},
		{[]int{2, 3, 40, 2}, 0},
		{[]int{2, 3, 40, 2}, 2},
		{[]int{100000, 2}, 0},
		{[]int{600, 70}, 0},
		{[]int{5, 1, 9}, 1},
	}
	for _, dt := range scanDTypes {
		for _, sc := range shapes {
			t.Run(fmt.Sprintf("%v/%v/dim%d", dt, sc.shape, sc.dim), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				v := scanDraw(c.r, dt, sc.shape, false)
				x := c.laid("x", v, idxRandLayout(c.r, len(sc.shape)), func(ps []int) idxArr { return scanDraw(c.r, dt, ps, false) })
				c.expect("cumsum", x.Cumsum(idxDimArg(c.r, sc.dim, len(sc.shape))), scanRef(v, sc.dim))
				c.run()
			})
		}
	}
}

// scanTestSpecials: ±Inf and NaN reach the elements after them only; a
// leading −0 stays −0; f16/bf16 overflow to ±Inf from a float32 sum.
func scanTestSpecials(t *testing.T, s *idxSuite) {
	for _, dt := range wideFloats {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			v := scanDraw(c.r, dt, []int{6, 5000}, false)
			more := scanDraw(c.r, dt, []int{3, 5000}, true) // random specials in rows 3–5
			copy(v.f[3*5000:], more.f)
			v.f[0] = math.Copysign(0, -1)
			v.f[5000+10] = math.Inf(1)
			v.f[5000+20] = math.Inf(-1) // +Inf − Inf: NaN from here on
			v.f[2*5000+4096] = math.NaN()
			x := c.laid("x", v, idxRandLayout(c.r, 2), func(ps []int) idxArr { return scanDraw(c.r, dt, ps, true) })
			want := scanRef(v, 1)
			if !math.Signbit(want.f[0]) || !math.IsNaN(want.f[5000+25]) || math.IsNaN(want.f[5000+15]) || !math.IsInf(want.f[5000+15], 1) {
				t.Fatalf("reference: -0 or Inf/NaN propagation wrong: %v %v %v", want.f[0], want.f[5000+15], want.f[5000+25])
			}
			for i := range 4096 {
				if math.IsNaN(want.f[2*5000+i]) && !math.IsNaN(v.f[2*5000+i]) {
					t.Fatalf("reference: NaN reached element %d of row 2 before the NaN", i)
				}
			}
			c.expect("cumsum", x.Cumsum(1), want)
			// Overflow: f16 and bf16 outputs of large float32 sums.
			big := idxZeros(dt, []int{3})
			big.f[0], big.f[1], big.f[2] = idxRound(dt, 6e4), idxRound(dt, 6e4), idxRound(dt, -6e4)
			if dt != dtype.F16 {
				big.f[0], big.f[1], big.f[2] = idxRound(dt, 3e38), idxRound(dt, 3e38), idxRound(dt, -3e38)
			}
			c.expect("overflow", c.in("big", big).Cumsum(0), scanRef(big, 0))
			c.run()
		})
	}
}

// scanTestEmpty: a zero-size scanned dim, and zero sequences.
func scanTestEmpty(t *testing.T, s *idxSuite) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16, dtype.U8, dtype.I64} {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			for i, shape := range [][]int{{3, 0}, {0, 5}, {2, 0, 3}} {
				v := idxZeros(dt, shape)
				x := c.in(fmt.Sprintf("x%d", i), v)
				for d := range shape {
					c.expect(fmt.Sprintf("x%d_dim%d", i, d), x.Cumsum(d), scanRef(v, d))
				}
			}
			c.run()
		})
	}
}

// scanTestNeighbours: elementwise producers and consumers around a cumsum
// (fused into their own kernels; fused ≡ unfused), a cumsum of a cumsum,
// a broadcast (stride-0) input, and a cumsum feeding a reduction.
func scanTestNeighbours(t *testing.T, s *idxSuite) {
	for _, dt := range scanDTypes {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			v := scanDraw(c.r, dt, []int{4, 300}, false)
			if dt.IsFloat() {
				for k := range v.f {
					v.f[k] = idxRound(dt, float64(c.r.IntN(129)-64)/4) // affine stays exact
				}
			}
			x := c.laid("x", v, idxRandLayout(c.r, 2), func(ps []int) idxArr { return scanDraw(c.r, dt, ps, false) })
			av := idxAffine(v, 2, 1)
			cs := x.Affine(2, 1).Cumsum(1)
			want := scanRef(av, 1)
			c.expect("affine_cumsum", cs, want)
			c.expect("cumsum_affine", cs.Affine(2, 1), idxAffine(want, 2, 1))
			c.expect("cumsum_cumsum", cs.Cumsum(0), scanRef(want, 0))
			// A row broadcast down 3 rows: every row the same scan.
			row := scanDraw(c.r, dt, []int{1, 50}, false)
			b := c.in("row", row).BroadcastTo(3, 50)
			tiled := idxZeros(dt, []int{3, 50})
			for k := range 150 {
				tiled.put(k, row, k%50)
			}
			c.expect("broadcast", b.Cumsum(1), scanRef(tiled, 1))
			c.expect("broadcast_dim0", b.Cumsum(0), scanRef(tiled, 0))
			c.run()
		})
	}
}

// scanTestErrors: bad dims and scalars are builder errors naming cumsum,
// the dim and the shape; nothing panics.
func scanTestErrors(t *testing.T) {
	cases := []struct {
		name  string
		build func(g *graph.Graph) *graph.Tensor
		frags []string
	}{
		{"dim_too_large", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 2, 3).Cumsum(2) }, []string{"cumsum", "dim 2", "f32[2 3]"}},
		{"dim_too_negative", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.U8, 2, 3).Cumsum(-3) }, []string{"cumsum", "dim -3", "u8[2 3]"}},
		{"scalar", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.I64).Cumsum(0) }, []string{"cumsum", "i64[]"}},
		{"untyped_scalar", func(*graph.Graph) *graph.Tensor { return graph.Scalar(1).Cumsum(0) }, []string{"cumsum"}},
		{"nil", func(*graph.Graph) *graph.Tensor { var x *graph.Tensor; return x.Cumsum(0) }, []string{"cumsum"}},
	}
	for _, bc := range cases {
		t.Run(bc.name, func(t *testing.T) {
			noPanic(t, bc.name, func() {
				g := graph.New()
				y := bc.build(g)
				wantErr(t, bc.name, y.Err(), bc.frags...)
				g.Output("good", g.Input("ok", dtype.F32, 2).Cumsum(0))
				g.Output("bad", y)
				_, err := g.Compile(graph.Options{})
				wantErr(t, bc.name+" (compile)", err, "cumsum")
			})
		})
	}
	// A verifier-level check: a cumsum node whose shape is not its
	// argument's is refused.
	g := ir.NewGraph()
	x := g.Intern(ir.OpInput, dtype.F32, []int{2, 3}, nil, nil, nil, "x")
	y := g.Intern(ir.OpCumsum, dtype.F32, []int{3, 2}, []*ir.Node{x}, []float64{1}, nil, "")
	g.Outputs = append(g.Outputs, ir.Output{Name: "y", Node: y})
	wantErr(t, "ir.Verify of a cumsum [3 2] of a [2 3] argument", ir.Verify(g), "cumsum", "[3 2]")
}

package cpu

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/tensor"
)

func scanVals(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(20)-10))
	}
	return x
}

// TestScanTileForms: the lane-parallel tile (columns) equals the one-lane
// tile on each lane, and the totals-only passes equal the tiles' totals,
// bit for bit, for whole and short tiles, with and without a carry.
func TestScanTileForms(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, m := range []int{1, 15, 16, 17, 255, 256, 257, 4095, 4096} {
		for _, wl := range []int{1, 3, 32} {
			x := scanVals(r, m*wl)
			o := scanVals(r, wl)
			for _, hasO := range []bool{false, true} {
				s := newColScratch[float32](wl)
				got := slices.Clone(x)
				scanTileW(got, wl, s, o, hasO)
				for lane := range wl {
					col := make([]float32, m)
					for i := range m {
						col[i] = x[i*wl+lane]
					}
					a := scanTile1(col, o[lane], hasO)
					for i := range m {
						if math.Float32bits(got[i*wl+lane]) != math.Float32bits(col[i]) {
							t.Fatalf("m=%d lanes=%d hasO=%v: lane %d out[%d] = %v, one-lane %v", m, wl, hasO, lane, i, got[i*wl+lane], col[i])
						}
					}
					if s.a[lane] != a {
						t.Fatalf("m=%d lanes=%d: lane %d total %v, one-lane %v", m, wl, lane, s.a[lane], a)
					}
					if m == ir.ScanTile {
						xc := make([]float32, m)
						for i := range m {
							xc[i] = x[i*wl+lane]
						}
						if tt := tileTotal1(xc); tt != a {
							t.Fatalf("tileTotal1 %v, scanTile1's total %v", tt, a)
						}
					}
				}
				if m == ir.ScanTile {
					tw := make([]float32, wl)
					tileTotalW(x, wl, newColScratch[float32](wl), tw)
					if !slices.Equal(tw, s.a[:wl]) {
						t.Fatalf("tileTotalW %v, scanTileW's totals %v", tw, s.a[:wl])
					}
				}
			}
		}
	}
}

// TestCumsumPasses: one pass (one worker) and two passes (more workers
// than sequences) give the same bits, rows and columns, every compute kind.
func TestCumsumPasses(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []dtype.DType{dtype.F32, dtype.F64, dtype.BF16, dtype.I64} {
		for _, tc := range []struct {
			shape []int
			dim   int
		}{{[]int{2, 20000}, 1}, {[]int{9000, 5}, 0}, {[]int{3, 9000, 40}, 1}} {
			vals := make([]float64, ir.Numel(tc.shape))
			for i := range vals {
				vals[i] = r.NormFloat64() * 100
			}
			x, err := tensor.FromFloat64s(dt, vals, tc.shape...)
			if err != nil {
				t.Fatal(err)
			}
			g := graph.New()
			g.Output("o", g.Input("x", dt, tc.shape...).Cumsum(tc.dim))
			p, err := g.Compile(graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var outs [][]byte
			for _, w := range []int{1, 8} {
				res, err := p.Run(context.Background(), NewWithWorkers(w), map[string]*tensor.Tensor{"x": x})
				if err != nil {
					t.Fatal(err)
				}
				outs = append(outs, res["o"].Bytes())
			}
			if !slices.Equal(outs[0], outs[1]) {
				t.Errorf("%v %v dim %d: one pass and two passes differ", dt, tc.shape, tc.dim)
			}
		}
	}
}

// TestCumsumCancel: a run cancelled while a long cumsum runs returns
// context.Canceled promptly (the context is checked between units of work,
// rows or tiles, each well under a millisecond).
func TestCumsumCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("large inputs")
	}
	for _, tc := range []struct {
		shape []int
		dim   int
	}{{[]int{32, 1 << 18}, 1}, {[]int{1 << 18, 32}, 0}} {
		g := graph.New()
		g.Output("o", g.Input("x", dtype.F64, tc.shape...).Cumsum(tc.dim))
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		x, _ := tensor.Zeros(dtype.F64, tc.shape...)
		ctx, cancel := context.WithCancel(context.Background())
		cancelledAt := make(chan time.Time, 1)
		time.AfterFunc(10*time.Millisecond, func() { cancelledAt <- time.Now(); cancel() })
		_, err = p.Run(ctx, NewWithWorkers(1), map[string]*tensor.Tensor{"x": x})
		end := time.Now()
		cancelled := <-cancelledAt
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%v dim %d: cancelled run returned %v", tc.shape, tc.dim, err)
		} else if late := end.Sub(cancelled); late > 200*time.Millisecond {
			t.Errorf("%v dim %d: returned %v after the cancel", tc.shape, tc.dim, late)
		}
	}
}

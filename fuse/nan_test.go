package fuse_test

import (
	"fmt"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestF16NaNResultsSameFusedUnfused: f16 ops producing NaN (sqrt and log
// of negatives, 0/0, NaN inputs carried through) give the same NaN bits
// in every position — the vector body and the scalar tail of a tile — and
// so fused and unfused results are bit-equal; every f16 NaN result is the
// canonical quiet NaN 0x7e00.
func TestF16NaNResultsSameFusedUnfused(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 4095, 4097, 5000} {
			t.Run(fmt.Sprintf("%v/%d", dt, n), func(t *testing.T) {
				vals := make([]float64, n)
				for i := range vals {
					vals[i] = -float64(i%5) - 0.5 // negatives: sqrt, log are NaN
				}
				xs, _ := tensor.FromFloat64s(dt, vals, n)
				zs, _ := tensor.FromFloat64s(dt, make([]float64, n), n)
				g := graph.New()
				x := g.Input("x", dt, n)
				z := g.Input("z", dt, n)
				g.Output("sqrt", x.Sqrt())
				g.Output("sqrt_exp", x.Sqrt().Exp().Neg())
				g.Output("log_add", x.Log().Add(x))
				g.Output("zero_div", z.Div(z).Mul(x))
				g.Output("neg_sqrt", x.Sqrt().Neg().Abs().Neg())
				in := map[string]*tensor.Tensor{"x": xs, "z": zs}
				out := mustRun(t, mustCompile(t, g, fused), in, poisonFused)
				ref := mustRun(t, mustCompile(t, g, unfused), in, poisonUnfused)
				if err := sameBits(out, ref); err != nil {
					t.Errorf("fused and unfused differ: %v", err)
				}
				want := uint16(0x7e00)
				if dt == dtype.BF16 {
					want = 0x7fc0
				}
				for name, o := range out {
					b := o.Bytes()
					for i := 0; i < n; i++ {
						if h := uint16(b[2*i]) | uint16(b[2*i+1])<<8; h != want {
							t.Errorf("%s[%d] = %#04x, want the canonical NaN %#04x", name, i, h, want)
							break
						}
					}
				}
			})
		}
	}
}

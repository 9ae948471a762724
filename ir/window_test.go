package ir

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
)

// pytorchPoolOut is PyTorch's pooling_output_shape_pad_lr (dilation 1),
// with its div_rtn (division rounding toward −∞), written out.
func pytorchPoolOut(in, k, pad, s int, ceil bool) int {
	num := in + 2*pad - (k - 1) - 1
	if ceil {
		num += s - 1
	}
	q := num / s
	if (num%s != 0) && ((num < 0) != (s < 0)) {
		q--
	}
	o := q + 1
	if ceil && (o-1)*s >= in+pad {
		o--
	}
	return o
}

// TestPoolOutShape sweeps small pools: OutShape agrees with PyTorch's
// formula, and every window of every output holds at least one input
// element (the kernels start a max from the window's first input element).
func TestPoolOutShape(t *testing.T) {
	for in := 1; in <= 9; in++ {
		for k := 1; k <= 6; k++ {
			for s := 1; s <= 4; s++ {
				for pad := 0; 2*pad <= k; pad++ {
					for _, ceil := range []bool{false, true} {
						p := PoolParams{Rank: 2, Kernel: [2]int{k, 1}, Stride: [2]int{s, 1}, Padding: [2]int{pad, 0}, CeilMode: ceil}
						shape, err := p.OutShape([]int{1, 1, in, 3})
						if k > in+2*pad {
							if err == nil || !strings.Contains(err.Error(), "larger than the padded input") {
								t.Errorf("in %d k %d pad %d: error %v", in, k, pad, err)
							}
							continue
						}
						if err != nil {
							t.Fatalf("in %d k %d s %d pad %d ceil %v: %v", in, k, s, pad, ceil, err)
						}
						o := shape[2]
						if want := pytorchPoolOut(in, k, pad, s, ceil); o != want || o < 1 {
							t.Errorf("in %d k %d s %d pad %d ceil %v: out %d, PyTorch %d", in, k, s, pad, ceil, o, want)
						}
						for i := range o {
							lo, hi := i*s-pad, i*s-pad+k
							if max(lo, 0) >= min(hi, in) {
								t.Errorf("in %d k %d s %d pad %d ceil %v: window %d [%d, %d) holds no input", in, k, s, pad, ceil, i, lo, hi)
							}
						}
					}
				}
			}
		}
	}
}

func TestWindowParamErrors(t *testing.T) {
	pool := PoolParams{Rank: 2, Kernel: [2]int{3, 3}, Stride: [2]int{1, 1}}
	for _, c := range []struct {
		p    PoolParams
		x    []int
		frag string
	}{
		{pool, []int{1, 2, 0, 5}, "empty on H"},
		{PoolParams{Rank: 2, Kernel: [2]int{3, 3}, Stride: [2]int{1, 0}}, []int{1, 1, 5, 5}, "stride 0 on W"},
		{PoolParams{Rank: 2, Kernel: [2]int{3, 3}, Stride: [2]int{1, 1}, Padding: [2]int{0, 2}}, []int{1, 1, 5, 5}, "padding 2 on W"},
		{PoolParams{Rank: 1, Kernel: [2]int{3, 3}, Stride: [2]int{1, 1}}, []int{1, 1, 5}, "pools take 2"},
		{pool, []int{1, 5, 5}, "rank 3"},
	} {
		if _, err := c.p.OutShape(c.x); err == nil || !strings.Contains(err.Error(), c.frag) {
			t.Errorf("%+v on %v: %v, want %q", c.p, c.x, err, c.frag)
		}
	}
	for _, c := range []struct {
		op   Op
		p    UpsampleParams
		x    []int
		size [2]int
		frag string
	}{
		{OpUpsampleNearest, UpsampleParams{Rank: 2}, []int{1, 1, 4, 4}, [2]int{0, 3}, "output size 0 on H"},
		{OpUpsampleNearest, UpsampleParams{Rank: 2, Scale: [2]float64{2, 2}}, []int{1, 1, 4, 4}, [2]int{8, 9}, "does not follow from scale factor 2"},
		{OpUpsampleNearest, UpsampleParams{Rank: 1, AlignCorners: true}, []int{1, 1, 4}, [2]int{8}, "align_corners"},
		{OpUpsampleBilinear, UpsampleParams{Rank: 1}, []int{1, 1, 4}, [2]int{8}, "bilinear upsampling takes 2"},
		{OpUpsampleNearest, UpsampleParams{Rank: 1, Scale: [2]float64{2, 3}}, []int{1, 1, 4}, [2]int{8}, "second spatial axis"},
		{OpUpsampleNearest, UpsampleParams{Rank: 2, Scale: [2]float64{-1, 2}}, []int{1, 1, 4, 4}, [2]int{1, 8}, "scale factor -1"},
		{OpUpsampleNearest, UpsampleParams{Rank: 1}, []int{1, 1, 0}, [2]int{3}, "empty on L"},
	} {
		if _, err := c.p.OutShape(c.op, c.x, c.size); err == nil || !strings.Contains(err.Error(), c.frag) {
			t.Errorf("%v %+v on %v to %v: %v, want %q", c.op, c.p, c.x, c.size, err, c.frag)
		}
	}
	if got := SizeFromScale(5, 1.5); got != 7 {
		t.Errorf("SizeFromScale(5, 1.5) = %d", got)
	}
}

// TestVerifyWindow: the verifier checks an upsampling's shape against its
// scale factors, and a pool's against its params.
func TestVerifyWindow(t *testing.T) {
	g := NewGraph()
	x := g.Intern(OpInput, dtype.F32, []int{1, 2, 4, 4}, nil, nil, nil, "x")
	up := UpsampleParams{Rank: 2, Scale: [2]float64{2, 2}}
	y := g.Intern(OpUpsampleNearest, dtype.F32, []int{1, 2, 8, 9}, []*Node{x}, up.Encode(), nil, "")
	g.Outputs = append(g.Outputs, Output{Name: "y", Node: y})
	if err := Verify(g); err == nil || !strings.Contains(err.Error(), "does not follow from scale factor") {
		t.Errorf("verify: %v", err)
	}
	g = NewGraph()
	x = g.Intern(OpInput, dtype.U8, []int{1, 2, 5, 5}, nil, nil, nil, "x")
	pp := PoolParams{Rank: 2, Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}, CeilMode: true}
	y = g.Intern(OpAvgPool, dtype.U8, []int{1, 2, 3, 3}, []*Node{x}, pp.Encode(), nil, "")
	g.Outputs = append(g.Outputs, Output{Name: "y", Node: y})
	if err := Verify(g); err != nil {
		t.Errorf("verify a good pool: %v", err)
	}
}

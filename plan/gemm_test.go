package plan

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/ir"
)

// TestGemmOperandOf: which layouts a GEMM reads in place, with which
// transpose flag, leading dimension and batch stride.
func TestGemmOperandOf(t *testing.T) {
	lay := func(dims, strides []int, off int) ir.Layout {
		return ir.Layout{Dims: dims, Strides: strides, Offset: off}
	}
	for _, tc := range []struct {
		name  string
		l     ir.Layout
		batch []int
		want  GemmOperand
		err   string
	}{
		{"contiguous", lay([]int{3, 4}, []int{4, 1}, 0), nil, GemmOperand{LD: 4}, ""},
		{"transposed", lay([]int{3, 4}, []int{1, 3}, 0), nil, GemmOperand{Trans: true, LD: 3}, ""},
		{"narrowed cols", lay([]int{3, 4}, []int{9, 1}, 2), nil, GemmOperand{LD: 9, Offset: 2}, ""},
		{"narrowed transposed", lay([]int{3, 4}, []int{1, 7}, 5), nil, GemmOperand{Trans: true, LD: 7, Offset: 5}, ""},
		{"one row, strided", lay([]int{1, 4}, []int{4, 3}, 0), nil, GemmOperand{Trans: true, LD: 3}, ""},
		{"one col", lay([]int{3, 1}, []int{5, 5}, 1), nil, GemmOperand{LD: 5, Offset: 1}, ""},
		{"1x1", lay([]int{1, 1}, []int{0, 0}, 3), nil, GemmOperand{LD: 1, Offset: 3}, ""},
		{"batch", lay([]int{2, 3, 4}, []int{12, 4, 1}, 0), []int{2}, GemmOperand{LD: 4, Stride: 12}, ""},
		{"batch collapses", lay([]int{2, 3, 3, 4}, []int{36, 12, 4, 1}, 0), []int{2, 3}, GemmOperand{LD: 4, Stride: 12}, ""},
		{"batch broadcast", lay([]int{3, 4}, []int{4, 1}, 0), []int{2, 5}, GemmOperand{LD: 4}, ""},
		{"batch of unit dims", lay([]int{1, 2, 1, 3, 4}, []int{99, 20, 7, 4, 1}, 0), []int{1, 2, 1}, GemmOperand{LD: 4, Stride: 20}, ""},
		{"empty", lay([]int{3, 0}, []int{0, 1}, 0), nil, GemmOperand{LD: 1}, ""},
		{"empty batch", lay([]int{0, 3, 4}, []int{12, 4, 1}, 0), []int{0}, GemmOperand{LD: 4}, ""},
		{"no unit stride", lay([]int{3, 4}, []int{8, 2}, 0), nil, GemmOperand{}, "strides [8 2]"},
		{"broadcast rows", lay([]int{3, 4}, []int{0, 1}, 0), nil, GemmOperand{}, "strides [0 1]"},
		{"overlapping rows", lay([]int{3, 4}, []int{2, 1}, 0), nil, GemmOperand{}, "strides [2 1]"},
		{"mixed batch", lay([]int{2, 1, 3, 4}, []int{12, 12, 4, 1}, 0), []int{2, 5}, GemmOperand{}, "do not collapse"},
		{"permuted batch", lay([]int{2, 3, 3, 4}, []int{12, 24, 4, 1}, 0), []int{2, 3}, GemmOperand{}, "do not collapse"},
	} {
		got, err := GemmOperandOf(tc.l, tc.batch)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

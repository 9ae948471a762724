package ir

import (
	"slices"
	"testing"
)

// TestLayoutMerged: unit dims go, adjacent dims that address memory as one
// merge, others stay, the offset stays, and the merged layout addresses
// the same elements in the same order.
func TestLayoutMerged(t *testing.T) {
	for _, c := range []struct{ in, want Layout }{
		{Layout{Dims: []int{2, 3, 4}, Strides: []int{12, 4, 1}, Offset: 5}, Layout{Dims: []int{24}, Strides: []int{1}, Offset: 5}},
		{Layout{Dims: []int{2, 1, 3}, Strides: []int{3, 99, 1}}, Layout{Dims: []int{6}, Strides: []int{1}}},
		{Layout{Dims: []int{4, 3}, Strides: []int{1, 4}}, Layout{Dims: []int{4, 3}, Strides: []int{1, 4}}},          // transposed: no merge
		{Layout{Dims: []int{2, 3, 4}, Strides: []int{24, 4, 1}}, Layout{Dims: []int{2, 12}, Strides: []int{24, 1}}}, // a gap between rows
		{Layout{Dims: []int{5, 4}, Strides: []int{0, 1}}, Layout{Dims: []int{5, 4}, Strides: []int{0, 1}}},          // broadcast rows
		{Layout{Dims: []int{1, 1}, Strides: []int{7, 7}, Offset: 3}, Layout{Offset: 3}},                             // one element
	} {
		got := c.in.Merged()
		if got.Offset != c.want.Offset || !slices.Equal(got.Dims, c.want.Dims) || !slices.Equal(got.Strides, c.want.Strides) {
			t.Errorf("%v.Merged() = %v, want %v", c.in, got, c.want)
		}
		for i := range c.in.Numel() {
			if a, b := c.in.Index(i), got.Index(i); a != b {
				t.Fatalf("%v: element %d at %d, merged %d", c.in, i, a, b)
			}
		}
	}
}

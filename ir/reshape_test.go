package ir

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLayoutReshape: a reshaped layout addresses, element for element in
// row-major order, what the layout it came from addresses; strided
// layouts re-view where their contiguous runs allow it (a narrowed last
// dim split into heads, a transposed pair kept apart, broadcast dims) and
// refuse where a new dim would mix two runs; random strided layouts (cut
// from a larger array, dims permuted or broadcast) and random
// factorizations of their element count either re-view exactly or
// refuse, and a refusal is right: no strides give the same addresses.
func TestLayoutReshape(t *testing.T) {
	same := func(a, b Layout) bool {
		for i := range a.Numel() {
			if a.Index(i) != b.Index(i) {
				return false
			}
		}
		return true
	}
	for _, c := range []struct {
		l    Layout
		dims []int
		ok   bool
	}{
		{Layout{Dims: []int{8, 1, 320}, Strides: []int{384, 384, 1}}, []int{8, 1, 10, 32}, true},
		{Layout{Dims: []int{8, 1, 64}, Strides: []int{384, 384, 1}, Offset: 320}, []int{8, 1, 2, 32}, true},
		{Layout{Dims: []int{4, 6}, Strides: []int{1, 4}}, []int{24}, false},                // a transpose flattened
		{Layout{Dims: []int{4, 6}, Strides: []int{1, 4}}, []int{4, 2, 3}, true},            // its rows split
		{Layout{Dims: []int{3, 5, 7}, Strides: []int{0, 7, 1}}, []int{3, 35}, true},        // broadcast, then a run
		{Layout{Dims: []int{3, 5, 7}, Strides: []int{0, 7, 1}}, []int{15, 7}, false},       // mixing them
		{Layout{Dims: []int{2, 3, 4}, Strides: []int{24, 4, 1}}, []int{2, 12}, true},       // rows of a narrowed array
		{Layout{Dims: []int{2, 3, 4}, Strides: []int{24, 4, 1}}, []int{6, 4}, false},       // rows across the cut
		{Layout{Dims: []int{2, 1, 4}, Strides: []int{9, 100, 2}}, []int{1, 2, 4, 1}, true}, // unit dims anywhere
		{Layout{Dims: []int{2, 0, 4}, Strides: []int{9, 100, 2}}, []int{8, 0}, true},       // empty
	} {
		out, ok := c.l.Reshape(c.dims)
		if ok != c.ok {
			t.Errorf("%v → %v: ok %v, want %v (%v)", c.l, c.dims, ok, c.ok, out)
			continue
		}
		if ok && (!slices.Equal(out.Dims, c.dims) || !same(c.l, out)) {
			t.Errorf("%v → %v: %v addresses other elements", c.l, c.dims, out)
		}
	}
	r := rand.New(rand.NewPCG(3, 5))
	strided, refused := 0, 0
	for range 20000 {
		// A random strided layout: dims cut from a larger row-major array,
		// permuted, with some dims broadcast.
		rank := 1 + r.IntN(4)
		dims := make([]int, rank)
		for i := range dims {
			dims[i] = 1 + r.IntN(4)
		}
		whole := make([]int, rank)
		for i := range whole {
			whole[i] = dims[i] + r.IntN(2)*r.IntN(3)
		}
		l := Contiguous(whole)
		l.Dims = dims
		l.Offset = r.IntN(5)
		if r.IntN(3) == 0 {
			perm := r.Perm(rank)
			l, _ = l.Permute(perm)
		}
		for i := range l.Dims {
			if l.Dims[i] == 1 && r.IntN(2) == 0 {
				l.Strides[i] = 100 // a unit dim's stride is free
			}
			if r.IntN(6) == 0 {
				l.Strides[i] = 0
			}
		}
		// A random factorization of the element count.
		n := l.Numel()
		var nd []int
		for rest := n; rest > 1; {
			f := 2 + r.IntN(3)
			for rest%f != 0 {
				f--
			}
			if f <= 1 {
				f = rest
			}
			nd = append(nd, f)
			rest /= f
			if r.IntN(4) == 0 {
				nd = append(nd, 1)
			}
		}
		if len(nd) == 0 {
			nd = []int{1}
		}
		out, ok := l.Reshape(nd)
		if ok && !l.IsContiguous() {
			strided++
		}
		if ok {
			if !slices.Equal(out.Dims, nd) || !same(l, out) {
				t.Fatalf("%v → %v: %v addresses other elements", l, nd, out)
			}
			continue
		}
		// A refusal: the addresses are not those of any strided layout of
		// nd (each new dim's steps would have to be one constant stride).
		if s, fits := stridesOf(l, nd); fits {
			t.Fatalf("%v → %v refused, but strides %v address the same elements", l, nd, s)
		}
		refused++
	}
	// Both outcomes must be common for the check to mean anything.
	if strided < 2000 || refused < 2000 {
		t.Errorf("%d strided layouts re-viewed, %d refused: the random layouts miss a case", strided, refused)
	}
	t.Logf("%d strided layouts re-viewed, %d refused", strided, refused)
}

// stridesOf derives, by brute force, strides for dims that address l's
// elements in row-major order, if there are any.
func stridesOf(l Layout, dims []int) ([]int, bool) {
	s := make([]int, len(dims))
	cand := Layout{Dims: dims, Strides: s, Offset: l.Offset}
	step := 1
	for d := len(dims) - 1; d >= 0; d-- {
		if dims[d] > 1 {
			s[d] = l.Index(step) - l.Index(0)
		}
		step *= dims[d]
	}
	for i := range l.Numel() {
		if cand.Index(i) != l.Index(i) {
			return nil, false
		}
	}
	return s, true
}

package conformance

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
)

// Views checks the view builders (reshape, permute, transpose, narrow,
// slice, broadcast, squeeze, unsqueeze, contiguous) and their composition:
// values against index arithmetic on the input, and the IR they produce (no
// copy for a reshape of a contiguous value, one copy for a reshape of a
// strided view, never a view of a view).
func Views(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	s := newSuite(t, newExec, opts)
	t.Run("reshape_contiguous", s.reshapeContiguous)
	t.Run("reshape_strided", s.reshapeStrided)
	t.Run("identities", s.viewIdentities)
	t.Run("each", s.eachView)
	t.Run("composed", s.composedViews)
	for k := range 60 {
		dt := dtype.All[k%len(dtype.All)]
		t.Run(fmt.Sprintf("random/%v/%d", dt, k), func(t *testing.T) { t.Parallel(); s.randomViews(t, dt) })
	}
}

// viewGen fills view inputs with distinct-looking values.
var viewGen = gen{f: uniform(-1000, 1000)}

// consume applies an exactly rounded op to a view, so that a kernel reads
// the view as an operand (an output of a view is a copy of it): 2x + 1 is
// exact for every dtype (2x is exact, one rounding for the add; integers
// wrap).
func consume(x *graph.Tensor, v vals) (*graph.Tensor, want) {
	p := []float64{2, 1}
	return x.Affine(2, 1), want{v: roundTo(unarySpecs[ir.OpAffine].want(v, p).v), tol: exact}
}

// copies counts the copy nodes of a compiled program, and checks that its
// text dump agrees.
func copies(t *testing.T, c *tcase) int {
	t.Helper()
	prog := c.compile()
	n := 0
	for _, nd := range prog.Plan().Graph.Nodes {
		if nd.Op == ir.OpCopy {
			n++
		}
	}
	var b bytes.Buffer
	if err := prog.Dump(&b, graph.DumpText); err != nil {
		t.Fatal(err)
	}
	if d := strings.Count(b.String(), " = copy"); d != n {
		t.Errorf("text dump shows %d copies, the IR has %d:\n%s", d, n, b.String())
	}
	return n
}

func (s *suite) reshapeContiguous(t *testing.T) {
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{4, 6, 5}, viewGen)
			y, w := consume(x.Reshape(2, 60), xv.reshape([]int{2, 60}))
			c.expect("reshape", y, w)
			y, w = consume(x.Reshape(-1, 10), xv.reshape([]int{12, 10}))
			c.expect("infer_first", y, w)
			y, w = consume(x.Reshape(3, -1, 4), xv.reshape([]int{3, 10, 4}))
			c.expect("infer_middle", y, w)
			// A window of the first dim is contiguous at an offset: still no copy.
			y, w = consume(x.Narrow(0, 1, 2).Reshape(-1), xv.narrow(0, 1, 2).reshape([]int{60}))
			c.expect("offset", y, w)
			y, w = consume(x.Reshape(120).Reshape(1, 120, 1).Squeeze(0), xv.reshape([]int{120, 1}))
			c.expect("chain", y, w)
			if n := copies(t, c); n != 0 {
				t.Errorf("reshapes of contiguous values made %d copies, want 0", n)
			}
			c.run()
		})
	}
}

func (s *suite) reshapeStrided(t *testing.T) {
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			x, xv := c.input("x", dt, []int{4, 6, 5}, viewGen)
			y, w := consume(x.Transpose(0, 2).Reshape(-1), xv.transpose(0, 2).reshape([]int{120}))
			c.expect("transposed", y, w)
			if n := copies(t, c); n != 1 {
				t.Errorf("a reshape of a transposed view made %d copies, want 1", n)
			}
			// Reshapes that split or merge only dims that are contiguous
			// among themselves stay views of the narrowed or broadcast
			// value (ir.Layout.Reshape); a new dim that spans a cut or a
			// broadcast dim and a stored one needs a copy.
			c2 := s.newCase(t)
			x, xv = c2.input("x", dt, []int{4, 6, 5}, viewGen)
			y, w = consume(x.Narrow(1, 1, 3).Reshape(4, 15), xv.narrow(1, 1, 3).reshape([]int{4, 15}))
			c2.expect("narrowed", y, w)
			y, w = consume(x.Narrow(2, 1, 3).Reshape(4, 6, 3, 1).Reshape(24, 3), xv.narrow(2, 1, 3).reshape([]int{24, 3}))
			c2.expect("narrowed_rows", y, w)
			y, w = consume(x.BroadcastTo(2, 4, 6, 5).Reshape(2, 4, 30), xv.broadcast([]int{2, 4, 6, 5}).reshape([]int{2, 4, 30}))
			c2.expect("broadcast", y, w)
			if n := copies(t, c2); n != 0 {
				t.Errorf("reshapes within contiguous runs of a narrowed and a broadcast view made %d copies, want 0", n)
			}
			c3 := s.newCase(t)
			x, xv = c3.input("x", dt, []int{4, 6, 5}, viewGen)
			y, w = consume(x.Narrow(2, 1, 3).Reshape(8, 9), xv.narrow(2, 1, 3).reshape([]int{8, 9}))
			c3.expect("across_cut", y, w)
			y, w = consume(x.BroadcastTo(2, 4, 6, 5).Reshape(8, 30), xv.broadcast([]int{2, 4, 6, 5}).reshape([]int{8, 30}))
			c3.expect("across_broadcast", y, w)
			if n := copies(t, c3); n != 2 {
				t.Errorf("reshapes across a narrowed dim's cut and a broadcast dim made %d copies, want 2", n)
			}
			c.run()
			c2.run()
			c3.run()
		})
	}
}

// viewIdentities: views that change nothing return the tensor itself (no
// node), and the same view built twice is the same node.
func (s *suite) viewIdentities(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 3, 4, 5)
	same := func(name string, a, b *graph.Tensor) {
		t.Helper()
		if a.Err() != nil || b.Err() != nil {
			t.Errorf("%s: unexpected errors %v, %v", name, a.Err(), b.Err())
		} else if a.Node() != b.Node() {
			t.Errorf("%s: node %v, want the same node %v", name, a.Node(), b.Node())
		}
	}
	same("transpose twice", x.Transpose(0, 2).Transpose(0, 2), x)
	same("T twice", x.T().T(), x)
	same("permute and inverse", x.Permute(2, 0, 1).Permute(1, 2, 0), x)
	same("reshape to own shape", x.Reshape(3, 4, 5), x)
	same("reshape round trip", x.Reshape(60).Reshape(3, 4, 5), x)
	same("narrow whole dim", x.Narrow(1, 0, 4), x)
	same("unsqueeze squeeze", x.Unsqueeze(1).Squeeze(1), x)
	same("broadcast to own shape", x.BroadcastTo(3, 4, 5), x)
	same("contiguous of contiguous", x.Contiguous(), x)
	same("cast to own dtype", x.Cast(dtype.F32), x)
	same("transpose built twice", x.Transpose(0, 1), x.Transpose(0, 1))
	same("negative dims", x.Transpose(-1, -3), x.Transpose(2, 0))
	same("slice is narrow", x.Slice(2, 1, 4), x.Narrow(2, 1, 3))
	same("composed chain built twice", x.T().Narrow(0, 1, 2).Unsqueeze(0), x.T().Narrow(0, 1, 2).Unsqueeze(0))
	if v := x.T().Narrow(0, 1, 2).BroadcastTo(2, 2, 5, 4).Node(); v == nil || v.Op != ir.OpView || v.Args[0] != x.Node() {
		t.Errorf("a chain of views is %v, want one view of the input", v)
	}
	if err := ir.Verify(g.IR()); err != nil {
		t.Error(err)
	}
}

// viewCase is one view on both sides: the graph builder and the reference.
type viewCase struct {
	name  string
	shape []int
	x     func(*graph.Tensor) *graph.Tensor
	v     func(vals) vals
}

var eachViews = []viewCase{
	{"permute", []int{2, 3, 4}, func(x *graph.Tensor) *graph.Tensor { return x.Permute(1, 2, 0) }, func(v vals) vals { return v.permute([]int{1, 2, 0}) }},
	{"permute_negative", []int{2, 3, 4}, func(x *graph.Tensor) *graph.Tensor { return x.Permute(-1, 0, -2) }, func(v vals) vals { return v.permute([]int{2, 0, 1}) }},
	{"transpose", []int{2, 3, 4}, func(x *graph.Tensor) *graph.Tensor { return x.Transpose(0, 2) }, func(v vals) vals { return v.transpose(0, 2) }},
	{"T", []int{5, 7}, (*graph.Tensor).T, func(v vals) vals { return v.transpose(0, 1) }},
	{"narrow", []int{6, 7}, func(x *graph.Tensor) *graph.Tensor { return x.Narrow(1, 2, 4) }, func(v vals) vals { return v.narrow(1, 2, 4) }},
	{"narrow_negative_dim", []int{6, 7}, func(x *graph.Tensor) *graph.Tensor { return x.Narrow(-2, 5, 1) }, func(v vals) vals { return v.narrow(0, 5, 1) }},
	{"narrow_empty", []int{6, 7}, func(x *graph.Tensor) *graph.Tensor { return x.Narrow(1, 7, 0) }, func(v vals) vals { return v.narrow(1, 7, 0) }},
	{"slice", []int{6, 7}, func(x *graph.Tensor) *graph.Tensor { return x.Slice(0, 1, 4) }, func(v vals) vals { return v.narrow(0, 1, 3) }},
	{"broadcast_lead", []int{3}, func(x *graph.Tensor) *graph.Tensor { return x.BroadcastTo(2, 4, 3) }, func(v vals) vals { return v.broadcast([]int{2, 4, 3}) }},
	{"broadcast_unit", []int{3, 1, 2}, func(x *graph.Tensor) *graph.Tensor { return x.BroadcastTo(3, 5, 2) }, func(v vals) vals { return v.broadcast([]int{3, 5, 2}) }},
	{"broadcast_to_empty", []int{1, 2}, func(x *graph.Tensor) *graph.Tensor { return x.BroadcastTo(0, 2) }, func(v vals) vals { return v.broadcast([]int{0, 2}) }},
	{"broadcast_rank0", []int{}, func(x *graph.Tensor) *graph.Tensor { return x.BroadcastTo(2, 3) }, func(v vals) vals { return v.broadcast([]int{2, 3}) }},
	{"unsqueeze", []int{3, 4}, func(x *graph.Tensor) *graph.Tensor { return x.Unsqueeze(1) }, func(v vals) vals { return v.reshape([]int{3, 1, 4}) }},
	{"unsqueeze_end", []int{3, 4}, func(x *graph.Tensor) *graph.Tensor { return x.Unsqueeze(-1) }, func(v vals) vals { return v.reshape([]int{3, 4, 1}) }},
	{"squeeze", []int{3, 1, 4}, func(x *graph.Tensor) *graph.Tensor { return x.Squeeze(1) }, func(v vals) vals { return v.reshape([]int{3, 4}) }},
	{"squeeze_negative", []int{3, 4, 1}, func(x *graph.Tensor) *graph.Tensor { return x.Squeeze(-1) }, func(v vals) vals { return v.reshape([]int{3, 4}) }},
	{"squeeze_to_rank0", []int{1}, func(x *graph.Tensor) *graph.Tensor { return x.Squeeze(0) }, func(v vals) vals { return v.reshape(nil) }},
	{"reshape", []int{4, 6}, func(x *graph.Tensor) *graph.Tensor { return x.Reshape(2, 3, 4) }, func(v vals) vals { return v.reshape([]int{2, 3, 4}) }},
	{"reshape_to_rank0", []int{1, 1}, func(x *graph.Tensor) *graph.Tensor { return x.Reshape() }, func(v vals) vals { return v.reshape(nil) }},
	{"contiguous", []int{4, 6}, func(x *graph.Tensor) *graph.Tensor { return x.T().Contiguous() }, func(v vals) vals { return v.transpose(0, 1) }},
}

// composedViews are chains of views: each must compose into one view of the
// input (or a copy and a view when a reshape needs it).
var composedViews = []viewCase{
	{"transpose_narrow_broadcast", []int{5, 8}, func(x *graph.Tensor) *graph.Tensor {
		return x.T().Narrow(0, 2, 3).BroadcastTo(4, 3, 5)
	}, func(v vals) vals { return v.transpose(0, 1).narrow(0, 2, 3).broadcast([]int{4, 3, 5}) }},
	{"narrow_transpose_narrow", []int{6, 7, 4}, func(x *graph.Tensor) *graph.Tensor {
		return x.Narrow(1, 1, 5).Transpose(0, 2).Narrow(2, 2, 2)
	}, func(v vals) vals { return v.narrow(1, 1, 5).transpose(0, 2).narrow(2, 2, 2) }},
	{"broadcast_permute_narrow", []int{3, 1, 4}, func(x *graph.Tensor) *graph.Tensor {
		return x.BroadcastTo(3, 5, 4).Permute(2, 0, 1).Narrow(2, 1, 3)
	}, func(v vals) vals { return v.broadcast([]int{3, 5, 4}).permute([]int{2, 0, 1}).narrow(2, 1, 3) }},
	{"unsqueeze_transpose_squeeze", []int{4, 5}, func(x *graph.Tensor) *graph.Tensor {
		return x.T().Unsqueeze(1).Narrow(0, 1, 3).Squeeze(1).T()
	}, func(v vals) vals { return v.transpose(0, 1).narrow(0, 1, 3).transpose(0, 1) }},
	{"narrow_of_unit_dims", []int{1, 6, 1, 5}, func(x *graph.Tensor) *graph.Tensor {
		return x.Permute(3, 2, 1, 0).Narrow(2, 3, 2).Narrow(0, 1, 3)
	}, func(v vals) vals { return v.permute([]int{3, 2, 1, 0}).narrow(2, 3, 2).narrow(0, 1, 3) }},
	{"transpose_reshape_transpose", []int{3, 4, 2}, func(x *graph.Tensor) *graph.Tensor {
		return x.Transpose(0, 1).Reshape(4, 6).T().Narrow(0, 1, 4)
	}, func(v vals) vals {
		return v.transpose(0, 1).reshape([]int{4, 6}).transpose(0, 1).narrow(0, 1, 4)
	}},
	{"broadcast_then_reshape", []int{2, 1}, func(x *graph.Tensor) *graph.Tensor {
		return x.BroadcastTo(3, 2, 4).Reshape(6, 4).Narrow(0, 1, 4)
	}, func(v vals) vals { return v.broadcast([]int{3, 2, 4}).reshape([]int{6, 4}).narrow(0, 1, 4) }},
	{"offset_window_transposed", []int{6, 6}, func(x *graph.Tensor) *graph.Tensor {
		return x.Narrow(0, 2, 3).Narrow(1, 1, 4).T().Narrow(0, 3, 1).BroadcastTo(2, 4, 3)
	}, func(v vals) vals {
		return v.narrow(0, 2, 3).narrow(1, 1, 4).transpose(0, 1).narrow(0, 3, 1).broadcast([]int{2, 4, 3})
	}},
}

func (s *suite) runViews(t *testing.T, cases []viewCase) {
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			for _, vc := range cases {
				x, xv := c.input("x_"+vc.name, dt, vc.shape, viewGen)
				y, yv := vc.x(x), vc.v(xv)
				c.expect(vc.name, y, want{v: yv, tol: exact})
				z, w := consume(y, yv)
				c.expect(vc.name+"_read", z, w)
			}
			c.run()
		})
	}
}

func (s *suite) eachView(t *testing.T)      { s.runViews(t, eachViews) }
func (s *suite) composedViews(t *testing.T) { s.runViews(t, composedViews) }

// randomViews applies a random sequence of views to an input of a random
// shape, mirrored on the reference, and checks the result both as an output
// and as an operand.
func (s *suite) randomViews(t *testing.T, dt dtype.DType) {
	c := s.newCase(t)
	r := c.r
	shape := make([]int, 1+r.IntN(4))
	for d := range shape {
		shape[d] = 1 + r.IntN(5)
	}
	x, xv := c.input("x", dt, shape, viewGen)
	var steps []string
	for range 2 + r.IntN(6) {
		var name string
		x, xv, name = randomView(r, x, xv)
		steps = append(steps, name)
		if x.Err() != nil {
			t.Fatalf("%v after %s: %v", shape, strings.Join(steps, ", "), x.Err())
		}
		if !slices.Equal(x.Shape(), xv.shape) {
			t.Fatalf("%v after %s: shape %v, reference %v", shape, strings.Join(steps, ", "), x.Shape(), xv.shape)
		}
	}
	t.Logf("input %v%v: %s", dt, shape, strings.Join(steps, ", "))
	c.expect("view", x, want{v: xv, tol: exact})
	z, w := consume(x, xv)
	c.expect("read", z, w)
	c.run()
}

// randomView applies one random view (valid for x's shape) to x and v.
func randomView(r *rand.Rand, x *graph.Tensor, v vals) (*graph.Tensor, vals, string) {
	shape, rank := v.shape, len(v.shape)
	switch k := r.IntN(9); {
	case k == 0 && rank >= 2:
		perm := r.Perm(rank)
		return x.Permute(perm...), v.permute(perm), fmt.Sprintf("permute%v", perm)
	case k == 1 && rank >= 2:
		a, b := r.IntN(rank), r.IntN(rank)
		return x.Transpose(a-rank*r.IntN(2), b), v.transpose(a, b), fmt.Sprintf("transpose(%d,%d)", a, b)
	case k == 2 && rank >= 1:
		d := r.IntN(rank)
		if shape[d] == 0 {
			break
		}
		start := r.IntN(shape[d])
		n := 1 + r.IntN(shape[d]-start)
		return x.Narrow(d, start, n), v.narrow(d, start, n), fmt.Sprintf("narrow(%d,%d,%d)", d, start, n)
	case k == 3 && rank < 5 && v.n() < 500:
		d := r.IntN(rank + 1)
		nv := v.reshape(slices.Insert(slices.Clone(shape), d, 1))
		return x.Unsqueeze(d - (rank+1)*r.IntN(2)), nv, fmt.Sprintf("unsqueeze(%d)", d)
	case k == 4:
		for _, d := range r.Perm(rank) {
			if shape[d] == 1 {
				nv := v.reshape(slices.Delete(slices.Clone(shape), d, d+1))
				return x.Squeeze(d), nv, fmt.Sprintf("squeeze(%d)", d)
			}
		}
	case k == 5 && v.n() < 500:
		// Broadcast a unit dim, or add a leading dim.
		to := slices.Clone(shape)
		grown := false
		for _, d := range r.Perm(rank) {
			if shape[d] == 1 {
				to[d], grown = 2+r.IntN(2), true
				break
			}
		}
		if !grown && rank < 5 {
			to = append([]int{2}, to...)
		}
		return x.BroadcastTo(to...), v.broadcast(to), fmt.Sprintf("broadcast%v", to)
	case k == 6:
		// Reshape to a random factorisation, sometimes with -1.
		n := v.n()
		var to []int
		for m := n; m > 1 && len(to) < 4; {
			f := 2
			for m%f != 0 {
				f++
			}
			if r.IntN(2) == 0 && len(to) > 0 {
				to[len(to)-1] *= f
			} else {
				to = append(to, f)
			}
			m /= f
			if len(to) == 4 {
				to[3] *= m
				break
			}
		}
		if n == 0 {
			to = []int{0}
		}
		arg := slices.Clone(to)
		if len(arg) > 0 && r.IntN(2) == 0 && n > 0 {
			arg[r.IntN(len(arg))] = -1
		}
		return x.Reshape(arg...), v.reshape(to), fmt.Sprintf("reshape%v", arg)
	case k == 7:
		return x.Contiguous(), v, "contiguous"
	case k == 8 && rank >= 2:
		return x.T(), v.transpose(rank-2, rank-1), "T"
	}
	return x, v, "none"
}

package graph_test

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// noPanic runs f, turning a panic into a test failure.
func noPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v\n%s", what, r, debug.Stack())
		}
	}()
	f()
}

// wantErr checks that err is an error whose message has every fragment.
func wantErr(t *testing.T, what string, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one mentioning %q", what, fragments)
		return
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: error %q does not mention %q", what, err, f)
		}
	}
}

// buildErr builds one tensor in a fresh graph and checks that the tensor,
// the graph and Compile all report an error with every fragment.
func buildErr(t *testing.T, what string, f func(g *graph.Graph) *graph.Tensor, fragments ...string) {
	t.Helper()
	noPanic(t, what, func() {
		g := graph.New()
		y := f(g)
		wantErr(t, what+" (tensor)", y.Err(), fragments...)
		wantErr(t, what+" (graph)", g.Err(), fragments...)
		g.Output("y", y)
		_, err := g.Compile(graph.Options{})
		wantErr(t, what+" (compile)", err, fragments...)
	})
}

func rank64() []int {
	s := make([]int, 64)
	for i := range s {
		s[i] = 2
	}
	return s
}

// TestShapeElementCountOverflow: shapes whose element count (times the
// dtype's size) overflows an int are refused by the op the user called,
// naming the shape, instead of wrapping and panicking at run time.
func TestShapeElementCountOverflow(t *testing.T) {
	const big = 1<<62 + 1
	cases := []struct {
		name      string
		f         func(g *graph.Graph) *graph.Tensor
		fragments []string
	}{
		{"input", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, big, 4).Sum(1) },
			[]string{"loom: input:", `"x"`, "[4611686018427387905 4]", "f32", "too large"}},
		{"input_exp", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, big, 4).Exp() },
			[]string{"loom: input:", "[4611686018427387905 4]"}},
		{"input_rank64", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.U8, rank64()...) },
			[]string{"loom: input:", "u8", "too large"}},
		{"input_bytes", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F64, 1<<61) },
			[]string{"loom: input:", "f64", "[2305843009213693952]", "too large"}},
		{"full", func(g *graph.Graph) *graph.Tensor { return g.Full(dtype.F32, 1, 1, 1<<62).Exp() },
			[]string{"loom: full:", "[1 4611686018427387904]", "too large"}},
		{"full_rank64", func(g *graph.Graph) *graph.Tensor { return g.Zeros(dtype.U8, rank64()...) },
			[]string{"loom: full:", "too large"}},
		{"reshape", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 0).Reshape(1<<32, 1<<32, 0)
		}, []string{"loom: reshape:", "[4294967296 4294967296 0]", "too large"}},
		{"reshape_infer", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 4).Reshape(-1, 1<<40, 1<<40)
		}, []string{"loom: reshape:", "too large"}},
		{"broadcast", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 1, 1).BroadcastTo(1<<40, 1<<40)
		}, []string{"loom: broadcast:", "f32[1 1] to [1099511627776 1099511627776]", "too large"}},
		{"add_broadcast", func(g *graph.Graph) *graph.Tensor {
			a := g.Input("a", dtype.F32, 1<<30, 1)
			b := g.Input("b", dtype.F32, 1, 1<<33)
			return a.Add(b)
		}, []string{"loom: add:", "too large"}},
		{"matmul", func(g *graph.Graph) *graph.Tensor {
			a := g.Input("a", dtype.F32, 1<<31, 1)
			b := g.Input("b", dtype.F32, 1, 1<<31)
			return a.Matmul(b)
		}, []string{"loom: matmul:", "[2147483648 2147483648]", "too large"}},
		{"cat", func(g *graph.Graph) *graph.Tensor {
			a := g.Input("a", dtype.U8, math.MaxInt/2+1)
			return graph.Cat(0, a, a)
		}, []string{"loom: cat:", "overflows"}},
	}
	for _, c := range cases {
		buildErr(t, c.name, c.f, c.fragments...)
	}
	// Arange counts its elements in f64 and refuses a huge range.
	buildErr(t, "arange", func(g *graph.Graph) *graph.Tensor { return g.Arange(dtype.F32, 0, 1e300, 1) },
		"loom: arange:", "too many")
}

// TestBoundsChecksDoNotOverflow: Narrow, Slice and SliceAssign compare
// bounds without computing start+n, which wraps for huge values.
func TestBoundsChecksDoNotOverflow(t *testing.T) {
	x := func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 2, 3) }
	buildErr(t, "narrow_maxint", func(g *graph.Graph) *graph.Tensor { return x(g).Narrow(0, math.MaxInt64, 1) },
		"loom: narrow: f32[2 3]", "start 9223372036854775807, length 1 out of bounds for dim 0 of size 2")
	buildErr(t, "narrow_len_maxint", func(g *graph.Graph) *graph.Tensor { return x(g).Narrow(1, 1, math.MaxInt64) },
		"loom: narrow:", "length 9223372036854775807 out of bounds for dim 1 of size 3")
	buildErr(t, "narrow_negative", func(g *graph.Graph) *graph.Tensor { return x(g).Narrow(1, -1, 2) },
		"loom: narrow:", "start -1")
	buildErr(t, "slice_maxint", func(g *graph.Graph) *graph.Tensor { return x(g).Slice(0, 1, math.MaxInt64) },
		"loom: slice: f32[2 3]", "out of bounds for dim 0 of size 2")
	buildErr(t, "slice_wrap", func(g *graph.Graph) *graph.Tensor { return x(g).Slice(0, math.MinInt64, 1) },
		"loom: slice:", "not 0 ≤ start ≤ end", "f32[2 3]")
	buildErr(t, "slice_reversed", func(g *graph.Graph) *graph.Tensor { return x(g).Slice(1, 2, 1) },
		"loom: slice:", "[2, 1)")
	buildErr(t, "slice_assign_maxint", func(g *graph.Graph) *graph.Tensor {
		return x(g).SliceAssign(g.Input("s", dtype.F32, 2, 1), 1, math.MaxInt64)
	}, "loom: slice_assign:", "start 9223372036854775807 of dim 1 of f32[2 3]")
	buildErr(t, "slice_assign_negative", func(g *graph.Graph) *graph.Tensor {
		return x(g).SliceAssign(g.Input("s", dtype.F32, 2, 1), 1, -1)
	}, "loom: slice_assign:", "start -1")
	// In range still works.
	xs := x(graph.New())
	if y := xs.Narrow(1, 3, 0); y.Err() != nil || y.Shape()[1] != 0 {
		t.Errorf("narrow to the end: %v %v", y.Shape(), y.Err())
	}
	if y := xs.Slice(1, 1, 3); y.Err() != nil || y.Shape()[1] != 2 {
		t.Errorf("slice [1, 3): %v %v", y.Shape(), y.Err())
	}
}

// TestSliceAssignRankMismatchError: a source of lower rank than the
// destination used to panic while the builder formatted its own error
// (indexing the source's shape at the destination's dim).
func TestSliceAssignRankMismatchError(t *testing.T) {
	buildErr(t, "slice_assign_rank", func(g *graph.Graph) *graph.Tensor {
		return g.Input("x", dtype.F32, 2, 3).SliceAssign(g.Input("s", dtype.F32, 3), 1, 0)
	}, "loom: slice_assign: cannot write f32[3] at start 0 of dim 1 of f32[2 3]")
}

// TestCompileRejectsCycle: a cycle made by rewiring a node's args through
// g.IR() used to overflow the stack while Compile snapshot the graph; it is
// an error naming the node.
func TestCompileRejectsCycle(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 4)
	a := x.Exp()
	b := a.Sin()
	g.Output("y", b)
	a.Node().Args[0] = b.Node()
	noPanic(t, "compile", func() {
		_, err := g.Compile(graph.Options{})
		wantErr(t, "compile", err, "loom: compile:", "%1 exp f32[4]", "is on a cycle")
	})
}

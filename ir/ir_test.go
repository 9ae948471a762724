package ir

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
)

func TestLayouts(t *testing.T) {
	l := Contiguous([]int{2, 3, 4})
	if !l.IsContiguous() || l.Strides[0] != 12 || l.Numel() != 24 {
		t.Fatalf("contiguous %v", l)
	}
	p, err := l.Permute([]int{2, 0, 1})
	if err != nil || p.IsContiguous() || p.Dims[0] != 4 || p.Strides[0] != 1 {
		t.Fatalf("permute %v %v", p, err)
	}
	n, err := l.Narrow(1, 1, 2)
	if err != nil || n.Offset != 4 || n.Dims[1] != 2 {
		t.Fatalf("narrow %v %v", n, err)
	}
	if lo, hi := n.Span(); lo != 4 || hi != 24 {
		t.Fatalf("span %d %d", lo, hi)
	}
	b, err := Contiguous([]int{3, 1}).BroadcastTo([]int{2, 3, 5})
	if err != nil || b.Strides[0] != 0 || b.Strides[2] != 0 || b.Index(7) != 1 {
		t.Fatalf("broadcast %v %v (index 7 → %d)", b, err, b.Index(7))
	}
	if _, err := l.Narrow(1, 2, 2); err == nil {
		t.Fatal("narrow past the end accepted")
	}
	if _, err := Contiguous([]int{3}).BroadcastTo([]int{4}); err == nil {
		t.Fatal("bad broadcast accepted")
	}
	if _, ok := p.Reshape([]int{24}); ok {
		t.Fatal("reshape of a permuted layout accepted without a copy")
	}
	if s, err := BroadcastShapes([]int{3, 1, 5}, []int{4, 5}); err != nil || len(s) != 3 || s[1] != 4 {
		t.Fatalf("broadcast shapes %v %v", s, err)
	}
}

// TestVerifyCatches builds graphs that break each invariant by hand and
// checks the verifier names the problem.
func TestVerifyCatches(t *testing.T) {
	cases := []struct {
		want  string
		build func(g *Graph)
	}{
		{"views a view", func(g *Graph) {
			x := g.Intern(OpInput, dtype.F32, []int{2, 3}, nil, nil, nil, "x")
			l := Contiguous([]int{3, 2})
			v := g.Intern(OpView, dtype.F32, []int{3, 2}, []*Node{x}, nil, &l, "")
			g.Intern(OpView, dtype.F32, []int{3, 2}, []*Node{v}, nil, &l, "")
		}},
		{"outside its argument", func(g *Graph) {
			x := g.Intern(OpInput, dtype.F32, []int{4}, nil, nil, nil, "x")
			l := Layout{Dims: []int{4}, Strides: []int{2}}
			g.Intern(OpView, dtype.F32, []int{4}, []*Node{x}, nil, &l, "")
		}},
		{"broadcasts must be views", func(g *Graph) {
			x := g.Intern(OpInput, dtype.F32, []int{4}, nil, nil, nil, "x")
			y := g.Intern(OpInput, dtype.F32, []int{1}, nil, nil, nil, "y")
			g.Intern(OpAdd, dtype.F32, []int{4}, []*Node{x, y}, nil, nil, "")
		}},
		{"not supported by exp", func(g *Graph) {
			x := g.Intern(OpInput, dtype.U8, []int{4}, nil, nil, nil, "x")
			g.Intern(OpExp, dtype.U8, []int{4}, []*Node{x}, nil, nil, "")
		}},
		{"mix dtypes", func(g *Graph) {
			x := g.Intern(OpInput, dtype.F32, []int{4}, nil, nil, nil, "x")
			y := g.Intern(OpInput, dtype.F64, []int{4}, nil, nil, nil, "y")
			g.Intern(OpMul, dtype.F32, []int{4}, []*Node{x, y}, nil, nil, "")
		}},
		{"condition dtype", func(g *Graph) {
			c := g.Intern(OpInput, dtype.F32, []int{4}, nil, nil, nil, "c")
			g.Intern(OpWhere, dtype.F32, []int{4}, []*Node{c, c, c}, nil, nil, "")
		}},
		{"used twice", func(g *Graph) {
			g.Intern(OpInput, dtype.F32, []int{4}, nil, nil, nil, "x")
			g.Intern(OpInput, dtype.F64, []int{4}, nil, nil, nil, "x")
		}},
		{"reducing", func(g *Graph) {
			x := g.Intern(OpInput, dtype.F32, []int{4, 5}, nil, nil, nil, "x")
			g.Intern(OpSum, dtype.F32, []int{4, 5}, []*Node{x}, []float64{1}, nil, "")
		}},
		{"has 1 params", func(g *Graph) {
			x := g.Intern(OpInput, dtype.F32, []int{4}, nil, nil, nil, "x")
			g.Intern(OpAffine, dtype.F32, []int{4}, []*Node{x}, []float64{1}, nil, "")
		}},
	}
	for _, c := range cases {
		g := NewGraph()
		c.build(g)
		err := Verify(g)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want an error containing %q, got %v", c.want, err)
		}
	}
	// Interning: the same node twice is one node.
	g := NewGraph()
	x := g.Intern(OpInput, dtype.F32, []int{4}, nil, nil, nil, "x")
	a := g.Intern(OpExp, dtype.F32, []int{4}, []*Node{x}, nil, nil, "")
	if b := g.Intern(OpExp, dtype.F32, []int{4}, []*Node{x}, nil, nil, ""); a != b {
		t.Fatal("interning made two nodes")
	}
	if err := Verify(g); err != nil {
		t.Fatal(err)
	}
}

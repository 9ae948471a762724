package smoke

import (
	"context"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

func TestIndexSmoke(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 3, 4)
	ids := g.Input("ids", dtype.U32, 2)
	g.Output("sel", x.IndexSelect(ids, 1))
	g.Output("cat", graph.Cat(0, x, x.Affine(1, 100)))
	g.Output("sa", x.SliceAssign(g.Full(dtype.F32, -1, 3, 2), 1, 1))
	v, i := x.Neg().Sort(false)
	g.Output("sorted", v)
	g.Output("order", i)
	g.Output("ia", x.IndexAdd(ids, g.Ones(dtype.F32, 3, 2), 1))
	p, err := g.Compile(graph.Options{Check: true})
	if err != nil {
		t.Fatal(err)
	}
	xt, _ := tensor.New([]float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 3, 4)
	it, _ := tensor.New([]uint32{3, 0xFFFFFFFF}, 2)
	out, err := p.Run(context.Background(), cpu.New().Poison(0xee), map[string]*tensor.Tensor{"x": xt, "ids": it})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float64{
		"sel":    {4, 0, 8, 0, 12, 0},
		"cat":    {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112},
		"sa":     {1, -1, -1, 4, 5, -1, -1, 8, 9, -1, -1, 12},
		"sorted": {-4, -3, -2, -1, -8, -7, -6, -5, -12, -11, -10, -9},
		"order":  {3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0},
		"ia":     {1, 2, 3, 5, 5, 6, 7, 9, 9, 10, 11, 13},
	}
	for name, w := range want {
		got := out[name].Float64s()
		for j := range w {
			if got[j] != w[j] {
				t.Errorf("%s = %v, want %v", name, got, w)
				break
			}
		}
	}
	bad, _ := tensor.New([]uint32{3, 4}, 2)
	_, err = p.Run(context.Background(), cpu.New(), map[string]*tensor.Tensor{"x": xt, "ids": bad})
	if err == nil || !strings.Contains(err.Error(), "id 4") {
		t.Fatalf("bad id: %v", err)
	}
	t.Log(err)
}

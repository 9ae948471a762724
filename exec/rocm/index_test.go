package rocm

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUIndexing runs the indexing ops through the executor (kernels
// package) and compares with the CPU; a bad id fails the run with the op and
// the id, and the executor keeps working.
func TestGPUIndexing(t *testing.T) {
	e := openGPU(t)
	g := graph.New()
	x := g.Input("x", dtype.F32, 37, 65)
	ids := g.Input("ids", dtype.U32, 37, 65)
	sel := g.Input("sel", dtype.I64, 9)
	g.Output("gather", x.T().Contiguous().T().Gather(ids, 1))
	g.Output("scatter_add", x.ScatterAdd(ids, x.Affine(2, 1), 1))
	g.Output("index_select", x.IndexSelect(sel, 0))
	g.Output("cat", graph.Cat(1, x, x.Narrow(1, 3, 7)))
	g.Output("slice_assign", x.SliceAssign(x.Narrow(0, 0, 5), 0, 30))
	v, i := x.Sort(true)
	g.Output("sorted", v)
	g.Output("order", i)
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pl := p.Placement(e); strings.Contains(pl, "fallback") {
		t.Errorf("indexing steps fall back:\n%s", pl)
	}
	in, err := genInputs(g, 5, false)
	if err != nil {
		t.Fatal(err)
	}
	idv := make([]uint32, 37*65)
	for k := range idv {
		idv[k] = uint32((k * 7919) % 65)
		if k%97 == 0 {
			idv[k] = 0xFFFFFFFF // sentinel
		}
	}
	in["ids"], _ = tensor.New(idv, 37, 65)
	in["sel"], _ = tensor.New([]int64{0, 36, 5, 5, 0x7FFFFFFFFFFFFFFF, 12, 1, 2, 3}, 9)
	want, err := p.Run(ctx, cpu.New(), in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(ctx, e.Poison(0xff), in)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		compareTensors(t, name, got[name], w, exact)
	}
	in["sel"], _ = tensor.New([]int64{0, 1, 2, 3, 4, 5, 6, 37, 8}, 9)
	if _, err := p.Run(ctx, e, in); err == nil || !strings.Contains(err.Error(), "index_select") || !strings.Contains(err.Error(), "id 37") {
		t.Fatalf("bad id: %v", err)
	} else {
		t.Logf("bad id: %v", err)
	}
	in["sel"], _ = tensor.New([]int64{1, 1, 2, 3, 4, 5, 6, 7, 8}, 9)
	if _, err := p.Run(ctx, e, in); err != nil {
		t.Fatalf("run after a bad id: %v", err)
	}
}

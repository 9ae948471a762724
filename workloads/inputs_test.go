package workloads

import (
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// TestStartInputs: an attention's offsets input named "start" holds 2^31
// (every key seen), one named "start_<n>" holds n, and other u32 inputs
// get random values.
func TestStartInputs(t *testing.T) {
	g := graph.New()
	a := g.Input("start", dtype.U32, 2)
	b := g.Input("start_640", dtype.U32, 1)
	c := g.Input("start_x", dtype.U32, 3)
	g.Output("a", a)
	g.Output("b", b)
	g.Output("c", c)
	in, err := Inputs(g, 7)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{"start": 1 << 31, "start_640": 640} {
		for i, v := range in[name].Float64s() {
			if v != want {
				t.Errorf("%s[%d] = %v, want %v", name, i, v, want)
			}
		}
	}
	for i, v := range in["start_x"].Float64s() {
		if v == 640 || v == 1<<31 {
			t.Errorf("start_x[%d] = %v: an offsets value for an input that is not one", i, v)
		}
	}
	if _, err := wAttn768(Size{}); err != nil {
		t.Fatal(err)
	}
}

package kernels

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
)

// TestTransposeFusedRuns checks how a fused conv's output transposes
// address their epilogue's operands over runs of eight (codegen.ScalarFunc8):
// the bias, constant along a run, once a run; a residual read through a
// transposed view once a run (stride 5) where its rows are 8 long, and
// element by element where they are 5 long. (The values are checked on
// the GPU: exec/rocm's TestGPUConvEpilogue.)
func TestTransposeFusedRuns(t *testing.T) {
	for _, c := range []struct {
		h, w int
		res  string // how the residual is addressed
	}{
		{5, 8, "p2[a2 + (unsigned int)e * 5u]"},             // rows of 8: a run is a row, stride 5 (the transpose)
		{8, 5, "p2[loom_post8_::at2(i + (unsigned int)e)]"}, // rows of 5: element by element
	} {
		g := graph.New()
		dt := dtype.BF16
		x, w, b := g.Input("x", dt, 2, 8, c.h, c.w), g.Input("w", dt, 16, 8, 3, 3), g.Input("b", dt, 16, 1, 1)
		y := graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}})
		res := g.Input("r", dt, 2, 16, c.w, c.h).Transpose(2, 3)
		g.Output("y", y.Add(b).Relu().Add(res))
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		k := p.Plan().Steps[0].Kernel
		if !k.IsFusedConv() {
			t.Fatalf("step 0 is not a fused conv: %s", k.Name)
		}
		parts, err := plan.SplitFused(k, len(p.Plan().Buffers))
		if err != nil {
			t.Fatal(err)
		}
		_, code, err := TransposeFused(codegen.Target{Platform: codegen.NVIDIA, Arch: "sm_90"}, k, parts)
		if err != nil {
			t.Fatal(err)
		}
		i := strings.Index(code, "LOOM_DEV void loom_post8(")
		if i < 0 || !strings.Contains(code, "#define LOOM_TR_POST8(") {
			t.Fatal("no run-of-eight epilogue")
		}
		fn := code[i : i+strings.Index(code[i:], "\n}\n")]
		if !strings.Contains(fn, "p1[a1 + (unsigned int)e * 0u]") || !strings.Contains(fn, c.res) {
			t.Errorf("%d×%d: want the bias at a1 + e·0 and the residual at %s:\n%s", c.h, c.w, c.res, fn)
		}
	}
}

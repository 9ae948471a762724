package rocm

import (
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
)

// TestBiasEpilogue checks which fused conv epilogues the library may apply
// inside the conv: a bias of one value a channel in the conv's type, a
// ReLU, or both in that order, and nothing else.
func TestBiasEpilogue(t *testing.T) {
	for _, c := range []struct {
		name       string
		build      func(g *graph.Graph, y *graph.Tensor) *graph.Tensor
		bias, relu bool
		ok         bool
	}{
		{"bias+relu", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor {
			return y.Add(g.Input("b", dtype.BF16, 16, 1, 1)).Relu()
		}, true, true, true},
		{"bias first", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor {
			return g.Input("b", dtype.BF16, 16, 1, 1).Add(y).Relu()
		}, true, true, true},
		{"bias 4-D", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor {
			return y.Add(g.Input("b", dtype.BF16, 1, 16, 1, 1))
		}, true, false, true},
		{"relu", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor { return y.Relu() }, false, true, true},
		{"relu then bias", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor {
			return y.Relu().Add(g.Input("b", dtype.BF16, 16, 1, 1))
		}, false, false, false},
		{"f32 bias", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor {
			return y.Cast(dtype.F32).Add(g.Input("b", dtype.F32, 16, 1, 1))
		}, false, false, false},
		{"residual", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor {
			return y.Add(g.Input("r", dtype.BF16, 2, 16, 8, 8))
		}, false, false, false},
		{"row bias", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor { return y.Add(g.Input("b", dtype.BF16, 8, 1)) }, false, false, false},
		{"strided bias", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor {
			return y.Add(g.Input("b", dtype.BF16, 16, 2).Narrow(1, 0, 1).Reshape(16, 1, 1))
		}, false, false, false},
		{"bias+relu+cast", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor {
			return y.Add(g.Input("b", dtype.BF16, 16, 1, 1)).Relu().Cast(dtype.F32)
		}, false, false, false},
		{"sqr", func(g *graph.Graph, y *graph.Tensor) *graph.Tensor { return y.Sqr() }, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := graph.New()
			x, w := g.Input("x", dtype.BF16, 2, 8, 8, 8), g.Input("w", dtype.BF16, 16, 8, 3, 3)
			g.Output("y", c.build(g, graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}})))
			p, err := g.Compile(graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			k := p.Plan().Steps[0].Kernel
			if !k.IsFusedConv() {
				t.Fatalf("step 0 is %s, not a fused conv", k.Name)
			}
			parts, err := plan.SplitFused(k, len(p.Plan().Buffers))
			if err != nil {
				t.Fatal(err)
			}
			bias, relu, ok := biasEpilogue(parts, dtype.BF16)
			if ok != c.ok || (ok && (relu != c.relu || (bias >= 0) != c.bias)) {
				t.Fatalf("biasEpilogue = bias %d, relu %v, ok %v; want bias %v, relu %v, ok %v", bias, relu, ok, c.bias, c.relu, c.ok)
			}
			if ok && bias >= 0 && k.Ins[bias].Buf.DType != dtype.BF16 {
				t.Errorf("bias operand %d is %v", bias, k.Ins[bias].Buf.DType)
			}
		})
	}
}

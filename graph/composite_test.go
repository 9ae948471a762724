package graph_test

import (
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// TestCompositeErrorsNameTheComposite: a composite given a bad dim, dtype
// or shape reports the op the user called (softmax, mean, linear…), not
// one of its parts (max, sum, mul, matmul).
func TestCompositeErrorsNameTheComposite(t *testing.T) {
	x := func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 3, 4) }
	xi := func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.I64, 3, 4) }
	x4 := func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 1, 2, 3, 4) }
	cs := func(g *graph.Graph, name string, shape ...int) *graph.Tensor {
		return g.Input(name, dtype.F32, shape...)
	}
	cases := []struct {
		name string
		f    func(g *graph.Graph) *graph.Tensor
		frag []string
	}{
		{"softmax dim", func(g *graph.Graph) *graph.Tensor { return x(g).Softmax(2) }, []string{"loom: softmax: dim 2 out of range for f32[3 4]"}},
		{"softmax dtype", func(g *graph.Graph) *graph.Tensor { return xi(g).Softmax(1) }, []string{"loom: softmax: needs a float dtype, got i64[3 4]"}},
		{"softmax empty", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 3, 0).Softmax(1) }, []string{"loom: softmax: dim 1 of f32[3 0] is empty"}},
		{"log_softmax dim", func(g *graph.Graph) *graph.Tensor { return x(g).LogSoftmax(-3) }, []string{"loom: log_softmax: dim -1 out of range for f32[3 4]"}},
		{"log_softmax dtype", func(g *graph.Graph) *graph.Tensor { return xi(g).LogSoftmax(0) }, []string{"loom: log_softmax: needs a float dtype"}},
		{"mean dim", func(g *graph.Graph) *graph.Tensor { return x(g).Mean(false, 5) }, []string{"loom: mean: dim 5 out of range for f32[3 4]"}},
		{"mean no dims", func(g *graph.Graph) *graph.Tensor { return x(g).Mean(false) }, []string{"loom: mean: no dims given for f32[3 4]"}},
		{"mean twice", func(g *graph.Graph) *graph.Tensor { return x(g).Mean(true, 1, -1) }, []string{"loom: mean: dim -1 given twice for f32[3 4]"}},
		{"mean dtype", func(g *graph.Graph) *graph.Tensor { return xi(g).Mean(false, 0) }, []string{"loom: mean: needs a float dtype"}},
		{"var dim", func(g *graph.Graph) *graph.Tensor { return x(g).Var(false, 2) }, []string{"loom: var: dim 2 out of range for f32[3 4]"}},
		{"var dtype", func(g *graph.Graph) *graph.Tensor { return xi(g).Var(false, 0) }, []string{"loom: var: needs a float dtype"}},
		{"layer_norm scalar", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32).LayerNorm(cs(g, "w", 4), cs(g, "b", 4), 1e-5)
		}, []string{"loom: layer_norm: dim -1 out of range for f32[]"}},
		{"layer_norm weight shape", func(g *graph.Graph) *graph.Tensor {
			return x(g).LayerNorm(cs(g, "w", 5), cs(g, "b", 4), 1e-5)
		}, []string{"loom: layer_norm: weight 0 is f32[5]", "x f32[3 4]"}},
		{"layer_norm bias dtype", func(g *graph.Graph) *graph.Tensor {
			return x(g).LayerNorm(cs(g, "w", 4), g.Input("b", dtype.F64, 4), 1e-5)
		}, []string{"loom: layer_norm: weight 1 is f64[4]"}},
		{"layer_norm dtype", func(g *graph.Graph) *graph.Tensor {
			return xi(g).LayerNorm(cs(g, "w", 4), cs(g, "b", 4), 1e-5)
		}, []string{"loom: layer_norm: needs a float dtype"}},
		{"rms_norm weight", func(g *graph.Graph) *graph.Tensor { return x(g).RmsNorm(cs(g, "w", 3), 1e-5) }, []string{"loom: rms_norm: weight 0 is f32[3]"}},
		{"rms_norm dtype", func(g *graph.Graph) *graph.Tensor { return xi(g).RmsNorm(cs(g, "w", 4), 1e-5) }, []string{"loom: rms_norm: needs a float dtype"}},
		{"rope rank", func(g *graph.Graph) *graph.Tensor { return x(g).Rope(cs(g, "c", 3, 2), cs(g, "s", 3, 2)) }, []string{"loom: rope: x must be rank 4", "f32[3 4]"}},
		{"rope table", func(g *graph.Graph) *graph.Tensor { return x4(g).Rope(cs(g, "c", 3, 3), cs(g, "s", 3, 2)) }, []string{"loom: rope: cos/sin", "f32[3 3]"}},
		{"rope_i dtype", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.I64, 1, 2, 3, 4).RopeI(cs(g, "c", 3, 2), cs(g, "s", 3, 2))
		}, []string{"loom: rope_i: x must be a rank-4 float tensor", "i64[1 2 3 4]"}},
		{"rope_thd table", func(g *graph.Graph) *graph.Tensor { return x4(g).RopeThd(cs(g, "c", 1, 2), cs(g, "s", 2, 2)) }, []string{"loom: rope_thd: cos/sin"}},
		{"linear features", func(g *graph.Graph) *graph.Tensor { return graph.Linear(x(g), cs(g, "w", 5, 3), nil) }, []string{"loom: linear:", "x has 4 input features, w has 3"}},
		{"linear bias", func(g *graph.Graph) *graph.Tensor { return graph.Linear(x(g), cs(g, "w", 5, 4), cs(g, "b", 4)) }, []string{"loom: linear:", "bias must be [5]"}},
		{"linear dtype", func(g *graph.Graph) *graph.Tensor { return graph.Linear(xi(g), g.Input("w", dtype.I64, 5, 4), nil) }, []string{"loom: linear:", "dtype i64 not supported"}},
		{"mv shape", func(g *graph.Graph) *graph.Tensor { return x(g).Mv(cs(g, "v", 3)) }, []string{"loom: mv:", "inner dims differ (4 vs 3)"}},
		{"mv dtype", func(g *graph.Graph) *graph.Tensor { return x(g).Mv(g.Input("v", dtype.F64, 4)) }, []string{"loom: mv: dtype mismatch"}},
		{"dot shape", func(g *graph.Graph) *graph.Tensor { return graph.Dot(cs(g, "a", 3), cs(g, "b", 4)) }, []string{"loom: dot:", "want two vectors (rank 1) of one length"}},
		{"dot dtype", func(g *graph.Graph) *graph.Tensor {
			return graph.Dot(g.Input("a", dtype.U8, 3), g.Input("b", dtype.U32, 3))
		}, []string{"loom: dot: dtype mismatch", "u8[3] and u32[3]"}},
	}
	for _, c := range cases {
		buildErr(t, c.name, c.f, c.frag...)
	}
}

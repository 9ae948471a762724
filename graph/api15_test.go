package graph_test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestTensorAPIErrors: each shape op, creation helper, composite and loss of
// the Candle-parity API (issue 15) reports bad input at build time under
// the name of the op the user called, with the shapes, dtypes and the
// parameter at fault; the graph records it and Compile refuses the graph.
func TestTensorAPIErrors(t *testing.T) {
	f32 := func(g *graph.Graph, shape ...int) *graph.Tensor { return g.Input("x", dtype.F32, shape...) }
	x := func(g *graph.Graph) *graph.Tensor { return f32(g, 3, 4) }
	xi := func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.I64, 3, 4) }
	first := func(ts []*graph.Tensor) *graph.Tensor { return ts[0] }
	vals := func(v, _ *graph.Tensor) *graph.Tensor { return v }
	idx := func(_, i *graph.Tensor) *graph.Tensor { return i }
	cases := []struct {
		name string
		f    func(g *graph.Graph) *graph.Tensor
		frag []string
	}{
		{"flip dim", func(g *graph.Graph) *graph.Tensor { return x(g).Flip(2) }, []string{"loom: flip: dim 2 out of range for f32[3 4]"}},
		{"flip twice", func(g *graph.Graph) *graph.Tensor { return x(g).Flip(1, -1) }, []string{"loom: flip: dim -1 given twice for f32[3 4]"}},
		{"pad_with_zeros negative", func(g *graph.Graph) *graph.Tensor { return x(g).PadWithZeros(0, -1, 0) }, []string{"loom: pad_with_zeros: negative padding (left -1, right 0) for dim 0 of f32[3 4]"}},
		{"pad_with_zeros dim", func(g *graph.Graph) *graph.Tensor { return x(g).PadWithZeros(-3, 1, 1) }, []string{"loom: pad_with_zeros: dim -1 out of range for f32[3 4]"}},
		{"pad_with_zeros overflow", func(g *graph.Graph) *graph.Tensor { return x(g).PadWithZeros(0, math.MaxInt, 1) }, []string{"loom: pad_with_zeros:", "overflows"}},
		{"pad_with_same negative", func(g *graph.Graph) *graph.Tensor { return x(g).PadWithSame(1, 2, -5) }, []string{"loom: pad_with_same: negative padding (left 2, right -5) for dim 1 of f32[3 4]"}},
		{"pad_with_same empty dim", func(g *graph.Graph) *graph.Tensor { return f32(g, 3, 0).PadWithSame(1, 1, 0) }, []string{"loom: pad_with_same: dim 1 of f32[3 0] is empty", "left 1, right 0"}},
		{"roll dim", func(g *graph.Graph) *graph.Tensor { return x(g).Roll(1, 5) }, []string{"loom: roll: dim 5 out of range for f32[3 4]"}},
		{"repeat few counts", func(g *graph.Graph) *graph.Tensor { return x(g).Repeat(2) }, []string{"loom: repeat: 1 counts [2] for f32[3 4]: give one per dim (at least 2)"}},
		{"repeat negative", func(g *graph.Graph) *graph.Tensor { return x(g).Repeat(2, -1) }, []string{"loom: repeat: negative count -1 for dim 1 in [2 -1], for f32[3 4]"}},
		{"repeat overflow", func(g *graph.Graph) *graph.Tensor { return x(g).Repeat(math.MaxInt/2, 1) }, []string{"loom: repeat:", "overflows"}},
		{"stack shapes", func(g *graph.Graph) *graph.Tensor {
			return graph.Stack(0, x(g), g.Input("y", dtype.F32, 3, 5))
		}, []string{"loom: stack: tensor 1 is f32[3 5], tensor 0 is f32[3 4]: dtypes and shapes must match"}},
		{"stack dtypes", func(g *graph.Graph) *graph.Tensor {
			return graph.Stack(1, x(g), g.Input("y", dtype.F64, 3, 4))
		}, []string{"loom: stack: tensor 1 is f64[3 4], tensor 0 is f32[3 4]"}},
		{"stack dim", func(g *graph.Graph) *graph.Tensor { y := x(g); return graph.Stack(3, y, y) }, []string{"loom: stack: dim 3 out of range for stacking f32[3 4] (new dim from -3 to 2)"}},
		{"stack nil", func(g *graph.Graph) *graph.Tensor { return graph.Stack(0, x(g), nil) }, []string{"loom: stack: nil tensor"}},
		{"chunk n", func(g *graph.Graph) *graph.Tensor { return first(x(g).Chunk(0, 1)) }, []string{"loom: chunk: 0 chunks of dim 1 of f32[3 4]: want at least 1"}},
		{"chunk dim", func(g *graph.Graph) *graph.Tensor { return first(x(g).Chunk(2, 2)) }, []string{"loom: chunk: dim 2 out of range for f32[3 4]"}},
		{"split sum", func(g *graph.Graph) *graph.Tensor { return first(x(g).Split([]int{1, 2}, 1)) }, []string{"loom: split: sizes [1 2] of dim 1 of f32[3 4]: want sizes ≥ 0 adding up to 4"}},
		{"split negative", func(g *graph.Graph) *graph.Tensor { return first(x(g).Split([]int{5, -1}, 1)) }, []string{"loom: split: sizes [5 -1]"}},
		{"split overflow", func(g *graph.Graph) *graph.Tensor { return first(x(g).Split([]int{math.MaxInt, 2}, 1)) }, []string{"loom: split: sizes"}},
		{"broadcast_as", func(g *graph.Graph) *graph.Tensor { return x(g).BroadcastAs(3, 5) }, []string{"loom: broadcast_as: f32[3 4]"}},
		{"expand", func(g *graph.Graph) *graph.Tensor { return x(g).Expand(4) }, []string{"loom: expand: f32[3 4]"}},
		{"broadcast_left negative", func(g *graph.Graph) *graph.Tensor { return x(g).BroadcastLeft(-2) }, []string{"loom: broadcast_left: f32[3 4]", "negative"}},
		{"const_set range", func(g *graph.Graph) *graph.Tensor {
			return x(g).ConstSet(1, graph.Range{}, graph.Range{Start: 2, End: 5})
		}, []string{"loom: const_set: range 1 (start 2, end 5, step 0) is not 0 ≤ start ≤ end ≤ 4", "for dim 1 of f32[3 4]"}},
		{"const_set step", func(g *graph.Graph) *graph.Tensor { return x(g).ConstSet(1, graph.Range{Start: 0, End: 2, Step: -1}) }, []string{"loom: const_set: range 0", "step -1"}},
		{"const_set ranks", func(g *graph.Graph) *graph.Tensor {
			return x(g).ConstSet(1, graph.Range{}, graph.Range{}, graph.Range{})
		}, []string{"loom: const_set: 3 ranges for f32[3 4]: at most one per dim"}},
		{"tril rank", func(g *graph.Graph) *graph.Tensor { return f32(g, 4).Tril(0) }, []string{"loom: tril: needs a matrix or a batch of matrices (rank ≥ 2), got f32[4]"}},
		{"triu rank", func(g *graph.Graph) *graph.Tensor { return f32(g).Triu(1) }, []string{"loom: triu: needs a matrix", "got f32[]"}},
		{"eye negative", func(g *graph.Graph) *graph.Tensor { return g.Eye(-1, dtype.F32) }, []string{"loom: eye: negative size -1"}},
		{"eye dtype", func(g *graph.Graph) *graph.Tensor { return g.Eye(2, dtype.Invalid) }, []string{"loom: eye: invalid dtype"}},
		{"eye huge", func(g *graph.Graph) *graph.Tensor { return g.Eye(1<<40, dtype.F32) }, []string{"loom: eye:", "too large"}},
		{"tril2 negative", func(g *graph.Graph) *graph.Tensor { return g.Tril2(-3, dtype.U8) }, []string{"loom: tril2: negative size -3"}},
		{"triu2 negative", func(g *graph.Graph) *graph.Tensor { return g.Triu2(-3, dtype.U8) }, []string{"loom: triu2: negative size -3"}},
		{"log_sum_exp dtype", func(g *graph.Graph) *graph.Tensor { return xi(g).LogSumExp(1) }, []string{"loom: log_sum_exp: needs a float dtype, got i64[3 4]"}},
		{"log_sum_exp dtype no dims", func(g *graph.Graph) *graph.Tensor { return xi(g).LogSumExp() }, []string{"loom: log_sum_exp: needs a float dtype"}},
		{"log_sum_exp dim", func(g *graph.Graph) *graph.Tensor { return x(g).LogSumExp(0, 2) }, []string{"loom: log_sum_exp: dim 2 out of range for f32[3 4]"}},
		{"log_sum_exp empty", func(g *graph.Graph) *graph.Tensor { return f32(g, 3, 0).LogSumExp(1) }, []string{"loom: log_sum_exp: dim 1 of f32[3 0] is empty"}},
		{"norm dtype", func(g *graph.Graph) *graph.Tensor { return xi(g).Norm() }, []string{"loom: norm: needs a float dtype, got i64[3 4]"}},
		{"norm dim", func(g *graph.Graph) *graph.Tensor { return x(g).Norm(1, 1) }, []string{"loom: norm: dim 1 given twice for f32[3 4]"}},
		{"norm_p NaN", func(g *graph.Graph) *graph.Tensor { return x(g).NormP(math.NaN(), 1) }, []string{"loom: norm_p: p is NaN, for f32[3 4]"}},
		{"norm_p inf empty", func(g *graph.Graph) *graph.Tensor { return f32(g, 3, 0).NormP(math.Inf(1), 1) }, []string{"loom: norm_p: dim 1 of f32[3 0] is empty"}},
		{"pow dtype", func(g *graph.Graph) *graph.Tensor { y := xi(g); return y.Pow(y) }, []string{"loom: pow: needs a float dtype, got i64[3 4] and i64[3 4]"}},
		{"pow shapes", func(g *graph.Graph) *graph.Tensor { return x(g).Pow(g.Input("y", dtype.F32, 5)) }, []string{"loom: pow: f32[3 4] and f32[5]", "broadcast"}},
		{"pow dtypes", func(g *graph.Graph) *graph.Tensor { return x(g).Pow(g.Input("y", dtype.F64, 4)) }, []string{"loom: pow: dtype mismatch: f32[3 4] and f64[4]"}},
		{"pow nil", func(g *graph.Graph) *graph.Tensor { return x(g).Pow(nil) }, []string{"loom: pow: nil tensor"}},
		{"round_to f32", func(g *graph.Graph) *graph.Tensor { return x(g).RoundTo(38) }, []string{"loom: round_to: decimals 38 out of range [-37, 37] for f32[3 4]"}},
		{"round_to f16", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F16, 2).RoundTo(-40) }, []string{"loom: round_to: decimals -40 out of range [-37, 37] for f16[2]"}},
		{"round_to f64", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F64, 2).RoundTo(308) }, []string{"loom: round_to: decimals 308 out of range [-307, 307] for f64[2]"}},
		{"round_to dtype", func(g *graph.Graph) *graph.Tensor { return xi(g).RoundTo(1) }, []string{"loom: round_to: needs a float dtype, got i64[3 4]"}},
		{"topk k", func(g *graph.Graph) *graph.Tensor { return vals(x(g).Topk(5, 1)) }, []string{"loom: topk: k = 5 out of range for dim 1 of size 4 of f32[3 4] (want 0 ≤ k ≤ 4)"}},
		{"topk negative k", func(g *graph.Graph) *graph.Tensor { return idx(x(g).Topk(-1, 0)) }, []string{"loom: topk: k = -1 out of range for dim 0 of size 3"}},
		{"topk dim", func(g *graph.Graph) *graph.Tensor { return vals(x(g).Topk(1, 2)) }, []string{"loom: topk: dim 2 out of range for f32[3 4]"}},
		{"topk rank 0", func(g *graph.Graph) *graph.Tensor { return vals(f32(g).Topk(0, 0)) }, []string{"loom: topk: needs at least one dim, got f32[]"}},
		{"var_population dim", func(g *graph.Graph) *graph.Tensor { return x(g).VarPopulation(false, 2) }, []string{"loom: var_population: dim 2 out of range for f32[3 4]"}},
		{"var_population dtype", func(g *graph.Graph) *graph.Tensor { return xi(g).VarPopulation(true, 0) }, []string{"loom: var_population: needs a float dtype"}},
		{"nll targets dtype", func(g *graph.Graph) *graph.Tensor {
			return graph.Nll(f32(g, 3, 5), g.Input("t", dtype.F32, 3))
		}, []string{"loom: nll: targets dtype f32 must be one of u8,u32,i64 (log probabilities f32[3 5], targets f32[3])"}},
		{"nll shapes", func(g *graph.Graph) *graph.Tensor {
			return graph.Nll(f32(g, 3, 5), g.Input("t", dtype.U32, 4))
		}, []string{"loom: nll: want log probabilities [N, C] and targets [N], got f32[3 5] and u32[4]"}},
		{"nll rank", func(g *graph.Graph) *graph.Tensor {
			return graph.Nll(f32(g, 15), g.Input("t", dtype.U32, 3))
		}, []string{"loom: nll: want log probabilities [N, C] and targets [N], got f32[15] and u32[3]"}},
		{"nll dtype", func(g *graph.Graph) *graph.Tensor {
			return graph.Nll(g.Input("x", dtype.I64, 3, 5), g.Input("t", dtype.I64, 3))
		}, []string{"loom: nll: log probabilities must be a float tensor, got i64[3 5]"}},
		{"nll nil", func(g *graph.Graph) *graph.Tensor { return graph.Nll(g.Input("t", dtype.F32, 3, 2), nil) }, []string{"loom: nll: nil tensor"}},
		{"cross_entropy rank", func(g *graph.Graph) *graph.Tensor {
			return graph.CrossEntropy(f32(g, 2, 3, 5), g.Input("t", dtype.U32, 2))
		}, []string{"loom: cross_entropy: want logits [N, C] and targets [N], got f32[2 3 5] and u32[2]"}},
		{"cross_entropy classes", func(g *graph.Graph) *graph.Tensor {
			return graph.CrossEntropy(f32(g, 2, 0), g.Input("t", dtype.U32, 2))
		}, []string{"loom: cross_entropy: no classes: logits f32[2 0]"}},
		{"cross_entropy targets", func(g *graph.Graph) *graph.Tensor {
			return graph.CrossEntropy(f32(g, 2, 3), g.Input("t", dtype.F16, 2))
		}, []string{"loom: cross_entropy: targets dtype f16 must be one of u8,u32,i64"}},
		{"dot int mismatch", func(g *graph.Graph) *graph.Tensor {
			return graph.Dot(g.Input("a", dtype.I64, 3), g.Input("b", dtype.I64, 4))
		}, []string{"loom: dot: i64[3] and i64[4]: want two vectors (rank 1) of one length"}},
	}
	for _, c := range cases {
		buildErr(t, c.name, c.f, c.frag...)
	}
}

// TestTensorAPIMisuse: nil receivers and arguments give errors naming the
// op called, never a panic; multi-result ops return the error in every
// result.
func TestTensorAPIMisuse(t *testing.T) {
	var nilT *graph.Tensor
	var nilG *graph.Graph
	good := func() *graph.Tensor { return graph.New().Input("x", dtype.F32, 2, 3) }
	cases := []struct {
		name string
		f    func() *graph.Tensor
		frag string
	}{
		{"nil.Flip", func() *graph.Tensor { return nilT.Flip(0) }, "loom: flip: nil tensor"},
		{"nil.PadWithZeros", func() *graph.Tensor { return nilT.PadWithZeros(0, 1, 1) }, "loom: pad_with_zeros: nil tensor"},
		{"nil.PadWithSame", func() *graph.Tensor { return nilT.PadWithSame(0, 1, 1) }, "loom: pad_with_same: nil tensor"},
		{"nil.Roll", func() *graph.Tensor { return nilT.Roll(1, 0) }, "loom: roll: nil tensor"},
		{"nil.Repeat", func() *graph.Tensor { return nilT.Repeat(2) }, "loom: repeat: nil tensor"},
		{"Stack(nil)", func() *graph.Tensor { return graph.Stack(0, nil) }, "loom: stack: nil tensor"},
		{"Stack()", func() *graph.Tensor { return graph.Stack(0) }, "loom: stack: no tensors"},
		{"Nll(nil, t)", func() *graph.Tensor { return graph.Nll(nil, graph.New().Input("t", dtype.I64, 3)) }, "loom: nll: nil tensor"},
		{"nil.Chunk", func() *graph.Tensor { return nilT.Chunk(2, 0)[0] }, "loom: chunk: nil tensor"},
		{"nil.Split", func() *graph.Tensor { return nilT.Split([]int{1}, 0)[0] }, "loom: split: nil tensor"},
		{"nil.BroadcastAs", func() *graph.Tensor { return nilT.BroadcastAs(2) }, "loom: broadcast_as: nil tensor"},
		{"nil.Expand", func() *graph.Tensor { return nilT.Expand(2) }, "loom: expand: nil tensor"},
		{"nil.BroadcastLeft", func() *graph.Tensor { return nilT.BroadcastLeft(2) }, "loom: broadcast_left: nil tensor"},
		{"nil.ZerosLike", func() *graph.Tensor { return nilT.ZerosLike() }, "loom: zeros_like: nil tensor"},
		{"nil.OnesLike", func() *graph.Tensor { return nilT.OnesLike() }, "loom: ones_like: nil tensor"},
		{"nil.FullLike", func() *graph.Tensor { return nilT.FullLike(2) }, "loom: full_like: nil tensor"},
		{"scalar.ZerosLike", func() *graph.Tensor { return graph.Scalar(1).ZerosLike() }, "loom: zeros_like: needs a typed tensor"},
		{"nil.ConstSet", func() *graph.Tensor { return nilT.ConstSet(1) }, "loom: const_set: nil tensor"},
		{"nil.Tril", func() *graph.Tensor { return nilT.Tril(0) }, "loom: tril: nil tensor"},
		{"nil.Triu", func() *graph.Tensor { return nilT.Triu(0) }, "loom: triu: nil tensor"},
		{"nilGraph.Eye", func() *graph.Tensor { return nilG.Eye(2, dtype.F32) }, "loom: eye: nil graph"},
		{"zeroGraph.Tril2", func() *graph.Tensor { var g graph.Graph; return g.Tril2(2, dtype.F32) }, "loom: tril2: zero Graph"},
		{"nil.LogSumExp", func() *graph.Tensor { return nilT.LogSumExp(0) }, "loom: log_sum_exp: nil tensor"},
		{"nil.Norm", func() *graph.Tensor { return nilT.Norm() }, "loom: norm: nil tensor"},
		{"nil.NormP", func() *graph.Tensor { return nilT.NormP(1) }, "loom: norm_p: nil tensor"},
		{"nil.Pow", func() *graph.Tensor { return nilT.Pow(good()) }, "loom: pow: nil tensor"},
		{"scalar.Pow(scalar)", func() *graph.Tensor { return graph.Scalar(2).Pow(graph.Scalar(3)) }, "loom: pow: needs at least one typed tensor"},
		{"nil.RoundTo", func() *graph.Tensor { return nilT.RoundTo(2) }, "loom: round_to: nil tensor"},
		{"nil.Topk", func() *graph.Tensor { v, _ := nilT.Topk(1, 0); return v }, "loom: topk: nil tensor"},
		{"nil.Topk indices", func() *graph.Tensor { _, i := nilT.Topk(1, 0); return i }, "loom: topk: nil tensor"},
		{"nil.VarPopulation", func() *graph.Tensor { return nilT.VarPopulation(false, 0) }, "loom: var_population: nil tensor"},
		{"Nll(x, nil)", func() *graph.Tensor { return graph.Nll(good(), nil) }, "loom: nll: nil tensor"},
		{"CrossEntropy(nil, nil)", func() *graph.Tensor { return graph.CrossEntropy(nil, nil) }, "loom: cross_entropy: nil tensor"},
		{"Nll(two graphs)", func() *graph.Tensor {
			return graph.Nll(good(), graph.New().Input("t", dtype.U32, 2))
		}, "loom: nll: operands belong to different graphs"},
	}
	for _, c := range cases {
		noPanic(t, c.name, func() {
			y := c.f()
			wantErr(t, c.name, y.Err(), c.frag)
			_, _ = y.String(), y.Shape()
		})
	}
}

// TestTensorAPIStructure: the ops documented as views, fused masks or
// single steps compile to what their doc comments promise: the number of
// steps over data of the output's size, besides small steps (aranges and
// masks of fewer elements: index vectors of one dim, a matrix mask shared
// by a batch).
func TestTensorAPIStructure(t *testing.T) {
	passes := func(t *testing.T, build func(g *graph.Graph) *graph.Tensor) (full, small int) {
		t.Helper()
		g := graph.New()
		g.Output("y", build(g))
		p, err := g.Compile(graph.Options{Check: true})
		if err != nil {
			t.Fatal(err)
		}
		out := p.Plan().Outputs[0].Numel()
		for _, s := range p.Plan().Steps {
			if s.Kernel.Numel() < out {
				small++
			} else {
				full++
			}
		}
		return full, small
	}
	for _, c := range []struct {
		name        string
		build       func(g *graph.Graph) *graph.Tensor
		full, small int
	}{
		// Masks from aranges: the comparisons fuse with the where.
		{"tril", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 4, 6).Tril(1) }, 1, 2},
		{"triu of a product", func(g *graph.Graph) *graph.Tensor {
			x := g.Input("x", dtype.F32, 2, 4, 6)
			return x.Exp().Triu(0).Mul(x)
		}, 1, 3}, // two aranges and the [4 6] mask
		{"eye", func(g *graph.Graph) *graph.Tensor { return g.Eye(5, dtype.BF16) }, 1, 1},
		{"const_set strided", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 4, 6).ConstSet(0, graph.Range{Start: 1, End: 4, Step: 2}, graph.Range{Start: 2, End: 6})
		}, 1, 2},
		{"const_set whole", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 4, 6).ConstSet(2).Exp() }, 1, 0},
		// One cat step (the output is the cat itself).
		{"pad_with_same", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 4, 6).PadWithSame(1, 2, 3) }, 1, 0},
		{"roll", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 4, 6).Roll(2, 0) }, 1, 0},
		{"stack", func(g *graph.Graph) *graph.Tensor {
			x := g.Input("x", dtype.F32, 4, 6)
			return graph.Stack(1, x, x.T().Contiguous().T(), x.Narrow(0, 1, 3).PadWithZeros(0, 1, 0))
		}, 1, 3}, // the stack; a transposed copy, the pad's fill and cat
		// A repeat of a longer dim is one copy; of size-1 dims a broadcast
		// view that its consumer reads in place.
		{"repeat", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 4, 6).Repeat(2, 1, 3) }, 1, 0},
		{"repeat size-1 + exp", func(g *graph.Graph) *graph.Tensor {
			return g.Input("x", dtype.F32, 1, 6).Repeat(5, 1).Exp()
		}, 1, 0},
		// One index_select per flipped dim of size > 1, each with its ids.
		{"flip", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 4, 1, 6).Flip(0, 1, 2) }, 2, 2},
		// Elementwise composites are one kernel.
		{"pow", func(g *graph.Graph) *graph.Tensor { x := g.Input("x", dtype.F32, 4, 6); return x.Pow(x.Sin()) }, 1, 0},
		{"round_to f16", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F16, 4, 6).RoundTo(2) }, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if full, small := passes(t, c.build); full != c.full || small != c.small {
				t.Errorf("%d full-size steps and %d small steps, want %d and %d", full, small, c.full, c.small)
			}
		})
	}
	// Chunk and Split are views: no node other than views of the input.
	g := graph.New()
	in := g.Input("x", dtype.F32, 7, 3)
	for _, p := range append(in.Chunk(3, 0), in.Split([]int{1, 2}, 1)...) {
		if n := p.Node(); n.Op.String() != "view" || n.Args[0] != in.Node() {
			t.Errorf("chunk/split part %v is %v, want a view of the input", p, n.Op)
		}
	}
	if e := in.Expand(2, 7, 3); e.Node().Op.String() != "view" {
		t.Errorf("Expand is %v, want a view", e.Node().Op)
	}
}

// TestTensorAPIFusedEqualsUnfused: the composites give bit-for-bit the same
// results fused and unfused on the CPU executor (the README's promise),
// on rows long enough for the blocked row sums.
func TestTensorAPIFusedEqualsUnfused(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 15))
	for _, dt := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
		g := graph.New()
		x := g.Input("x", dt, 3, 5000)
		y := g.Input("y", dt, 5000)
		tg := g.Input("t", dtype.I64, 3)
		g.Output("var", x.Var(false, -1))
		g.Output("var_pop", x.VarPopulation(true, 0, 1))
		g.Output("lse", x.LogSumExp(-1))
		g.Output("norm", x.Norm())
		g.Output("norm_p", x.NormP(3, 1))
		g.Output("pow", x.Abs().Pow(y))
		g.Output("round_to", x.RoundTo(1))
		g.Output("ce", graph.CrossEntropy(x, tg))
		g.Output("tril", x.Tril(4000))
		xs := make([]float64, 3*5000)
		for i := range xs {
			xs[i] = r.NormFloat64() * 3
		}
		ys := make([]float64, 5000)
		for i := range ys {
			ys[i] = r.Float64()*4 - 2
		}
		xt, err := tensor.FromFloat64s(dt, xs, 3, 5000)
		if err != nil {
			t.Fatal(err)
		}
		yt, err := tensor.FromFloat64s(dt, ys, 5000)
		if err != nil {
			t.Fatal(err)
		}
		tt, err := tensor.New([]int64{4, 4999, 0}, 3)
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]*tensor.Tensor{"x": xt, "y": yt, "t": tt}
		var outs []map[string]*tensor.Tensor
		for _, nf := range []bool{false, true} {
			p, err := g.Compile(graph.Options{NoFusion: nf, Check: true})
			if err != nil {
				t.Fatal(err)
			}
			o, err := p.Run(context.Background(), cpu.New(), in)
			if err != nil {
				t.Fatal(err)
			}
			outs = append(outs, o)
		}
		for name, a := range outs[0] {
			if b := outs[1][name]; !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Errorf("%v %s: fused and unfused results differ", dt, name)
			}
		}
	}
}

// TestVarMatchesCandle: Loom's Var is Candle's unbiased var (the value of
// Candle's own test, var_keepdim(1) of PyTorch's torch.var example); the
// population form stays available.
func TestVarMatchesCandle(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 4, 4)
	g.Output("var", x.Var(true, 1))
	g.Output("pop", x.VarPopulation(true, 1))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := tensor.New([]float32{
		0.2035, 1.2959, 1.8101, -0.4644,
		1.5027, -0.3270, 0.5905, 0.6538,
		-1.5745, 1.3330, -0.5596, -0.6548,
		0.1264, -0.5080, 1.6420, 0.1992,
	}, 4, 4)
	out, err := p.Run(context.Background(), cpu.New(), map[string]*tensor.Tensor{"x": in})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{1.0631, 0.559, 1.4893, 0.8258} {
		if got := out["var"].Float64(i); math.Abs(got-want) > 5e-5 {
			t.Errorf("var row %d = %v, Candle's test wants %v (to 4 decimals)", i, got, want)
		}
		// The population variance is the unbiased one times (n−1)/n.
		if got, pop := out["var"].Float64(i), out["pop"].Float64(i); math.Abs(pop-got*3/4) > 1e-6 {
			t.Errorf("var_population row %d = %v, want var·3/4 = %v", i, pop, got*3/4)
		}
	}
}

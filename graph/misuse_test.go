package graph_test

import (
	"context"
	"io"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestNilAndZeroValueMisuse calls the public API of graph and tensor with
// nil or zero receivers and arguments: each call returns an error (on the
// tensor or from the call) naming the op, and none panics.
func TestNilAndZeroValueMisuse(t *testing.T) {
	var nilT *graph.Tensor
	zeroT := &graph.Tensor{}
	var zeroG graph.Graph
	var nilG *graph.Graph
	good := func() (*graph.Graph, *graph.Tensor) {
		g := graph.New()
		return g, g.Input("x", dtype.F32, 2, 3)
	}
	tensors := []struct {
		name string
		f    func() *graph.Tensor
		frag string
	}{
		{"nil.Exp", func() *graph.Tensor { return nilT.Exp() }, "loom: exp: nil tensor"},
		{"zero.Exp", func() *graph.Tensor { return zeroT.Exp() }, "loom: exp: zero Tensor"},
		{"nil.Sum", func() *graph.Tensor { return nilT.Sum(0) }, "loom: sum: nil tensor"},
		{"nil.Reshape", func() *graph.Tensor { return nilT.Reshape(1) }, "loom: reshape: nil tensor"},
		{"nil.Narrow", func() *graph.Tensor { return nilT.Narrow(0, 0, 1) }, "loom: narrow: nil tensor"},
		{"nil.Slice", func() *graph.Tensor { return nilT.Slice(0, 0, 1) }, "loom: slice: nil tensor"},
		{"nil.Cast", func() *graph.Tensor { return nilT.Cast(dtype.F64) }, "loom: cast: nil tensor"},
		{"nil.Softmax", func() *graph.Tensor { return nilT.Softmax(0) }, "loom: softmax: nil tensor"},
		{"nil.Mean", func() *graph.Tensor { return nilT.Mean(false, 0) }, "loom: mean: nil tensor"},
		{"nil.Argsort", func() *graph.Tensor { return nilT.Argsort(false) }, "loom: argsort: nil tensor"},
		{"nil.BroadcastTo", func() *graph.Tensor { return nilT.BroadcastTo(2) }, "loom: broadcast: nil tensor"},
		{"nil.Contiguous", func() *graph.Tensor { return nilT.Contiguous() }, "loom: contiguous: nil tensor"},
		{"nil.T", func() *graph.Tensor { return nilT.T() }, "loom: transpose: nil tensor"},
		{"nil.Add(x)", func() *graph.Tensor { _, x := good(); return nilT.Add(x) }, "loom: add: nil tensor"},
		{"x.Add(nil)", func() *graph.Tensor { _, x := good(); return x.Add(nil) }, "loom: add: nil tensor"},
		{"x.Mul(zero)", func() *graph.Tensor { _, x := good(); return x.Mul(zeroT) }, "loom: mul: zero Tensor"},
		{"x.Clamp(nil, nil)", func() *graph.Tensor { _, x := good(); return x.Clamp(nil, nil) }, "loom: maximum: nil tensor"},
		{"Where(nil, x, x)", func() *graph.Tensor { _, x := good(); return graph.Where(nil, x, x) }, "loom: where: nil tensor"},
		{"Where(c, nil, x)", func() *graph.Tensor {
			g, x := good()
			return graph.Where(g.Input("c", dtype.U8, 2, 3), nil, x)
		}, "loom: where: nil tensor"},
		{"Cat(x, nil)", func() *graph.Tensor { _, x := good(); return graph.Cat(0, x, nil) }, "loom: cat: nil tensor"},
		{"Cat(nil)", func() *graph.Tensor { return graph.Cat(0, nil) }, "loom: cat: nil tensor"},
		{"x.Matmul(nil)", func() *graph.Tensor { _, x := good(); return x.Matmul(nil) }, "loom: matmul: nil tensor"},
		{"nil.Matmul(x)", func() *graph.Tensor { _, x := good(); return nilT.Matmul(x) }, "loom: matmul: nil tensor"},
		{"x.Mv(nil)", func() *graph.Tensor { _, x := good(); return x.Mv(nil) }, "loom: mv: nil tensor"},
		{"Dot(nil, nil)", func() *graph.Tensor { return graph.Dot(nil, nil) }, "loom: dot: nil tensor"},
		{"Linear(x, nil, nil)", func() *graph.Tensor { _, x := good(); return graph.Linear(x, nil, nil) }, "loom: linear: nil tensor"},
		{"Linear(nil, nil, nil)", func() *graph.Tensor { return graph.Linear(nil, nil, nil) }, "loom: linear: nil tensor"},
		{"x.IndexSelect(nil)", func() *graph.Tensor { _, x := good(); return x.IndexSelect(nil, 0) }, "loom: index_select: nil tensor"},
		{"x.Gather(nil)", func() *graph.Tensor { _, x := good(); return x.Gather(nil, 0) }, "loom: gather: nil tensor"},
		{"x.Scatter(nil, nil)", func() *graph.Tensor { _, x := good(); return x.Scatter(nil, nil, 0) }, "loom: scatter: nil tensor"},
		{"x.ScatterAdd(nil, nil)", func() *graph.Tensor { _, x := good(); return x.ScatterAdd(nil, nil, 0) }, "loom: scatter_add: nil tensor"},
		{"x.IndexAdd(nil, nil)", func() *graph.Tensor { _, x := good(); return x.IndexAdd(nil, nil, 0) }, "loom: index_add: nil tensor"},
		{"x.SliceAssign(nil)", func() *graph.Tensor { _, x := good(); return x.SliceAssign(nil, 0, 0) }, "loom: slice_assign: nil tensor"},
		{"x.LayerNorm(nil, nil)", func() *graph.Tensor { _, x := good(); return x.LayerNorm(nil, nil, 1e-5) }, "loom: layer_norm: nil tensor"},
		{"x.RmsNorm(nil)", func() *graph.Tensor { _, x := good(); return x.RmsNorm(nil, 1e-5) }, "loom: rms_norm: nil tensor"},
		{"x.Rope(nil, nil)", func() *graph.Tensor {
			g := graph.New()
			return g.Input("x", dtype.F32, 1, 1, 2, 4).Rope(nil, nil)
		}, "loom: rope: nil tensor"},
		{"x.RopeI(nil, nil)", func() *graph.Tensor {
			g := graph.New()
			return g.Input("x", dtype.F32, 1, 1, 2, 4).RopeI(nil, nil)
		}, "loom: rope_i: nil tensor"},
		{"x.RopeThd(nil, nil)", func() *graph.Tensor {
			g := graph.New()
			return g.Input("x", dtype.F32, 1, 2, 1, 4).RopeThd(nil, nil)
		}, "loom: rope_thd: nil tensor"},
		{"zeroGraph.Input", func() *graph.Tensor { return zeroG.Input("x", dtype.F32, 2) }, "loom: input: zero Graph"},
		{"zeroGraph.Full", func() *graph.Tensor { return zeroG.Full(dtype.F32, 1, 2) }, "loom: full: zero Graph"},
		{"zeroGraph.Arange", func() *graph.Tensor { return zeroG.Arange(dtype.F32, 0, 2, 1) }, "loom: arange: zero Graph"},
		{"nilGraph.Input", func() *graph.Tensor { return nilG.Input("x", dtype.F32, 2) }, "loom: input: nil graph"},
		{"nilGraph.Zeros", func() *graph.Tensor { return nilG.Zeros(dtype.F32, 2) }, "loom: full: nil graph"},
		{"nilGraph.Ones", func() *graph.Tensor { return nilG.Ones(dtype.F32, 2) }, "loom: full: nil graph"},
	}
	for _, c := range tensors {
		noPanic(t, c.name, func() {
			y := c.f()
			wantErr(t, c.name, y.Err(), c.frag)
			_ = y.String()
			_ = y.Shape()
		})
	}
	// Accessors of nil and zero tensors.
	noPanic(t, "tensor accessors", func() {
		wantErr(t, "nil.Err", nilT.Err(), "loom: tensor: nil tensor")
		wantErr(t, "zero.Err", zeroT.Err(), "loom: tensor: zero Tensor")
		if nilT.DType() != dtype.Invalid || nilT.Shape() != nil || nilT.Rank() != 0 || nilT.Node() != nil || nilT.Graph() != nil {
			t.Errorf("nil tensor accessors: %v %v", nilT.DType(), nilT.Shape())
		}
		_, _ = nilT.String(), zeroT.String()
	})
	// Graph methods with no tensor result.
	errOf := func(name string, f func() error, frag string) {
		noPanic(t, name, func() { wantErr(t, name, f(), frag) })
	}
	errOf("zeroGraph.Compile", func() error { _, err := zeroG.Compile(graph.Options{}); return err }, "loom: compile: zero Graph")
	errOf("nilGraph.Compile", func() error { _, err := nilG.Compile(graph.Options{}); return err }, "loom: compile: nil graph")
	errOf("nilGraph.Err", nilG.Err, "loom: graph: nil graph")
	errOf("zeroGraph.Err", func() error { var g graph.Graph; return g.Err() }, "loom: graph: zero Graph")
	errOf("zeroGraph.Output", func() error { var g graph.Graph; g.Output("y", nilT); return g.Err() }, "loom: output: zero Graph")
	noPanic(t, "nilGraph.Output", func() { nilG.Output("y", nilT) })
	noPanic(t, "nilGraph.IR", func() { _ = nilG.IR() })
	errOf("Output(nil)", func() error { g := graph.New(); g.Output("y", nilT); return g.Err() }, "loom: output: nil tensor")
	errOf("Output(zero)", func() error { g := graph.New(); g.Output("y", zeroT); return g.Err() }, "loom: output: zero Tensor")

	// Program misuse.
	g, x := good()
	g.Output("y", x.Exp())
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	e := cpu.New()
	in, _ := tensor.Zeros(dtype.F32, 2, 3)
	inputs := map[string]*tensor.Tensor{"x": in}
	var nilP *graph.Program
	zeroP := &graph.Program{}
	for _, q := range []struct {
		name string
		p    *graph.Program
		frag string
	}{{"nil", nilP, "nil program"}, {"zero", zeroP, "zero Program"}} {
		errOf(q.name+".Run", func() error { _, err := q.p.Run(ctx, e, inputs); return err }, "loom: run: "+q.frag)
		errOf(q.name+".RunInto", func() error { return q.p.RunInto(ctx, e, inputs, nil) }, "loom: run_into: "+q.frag)
		errOf(q.name+".RunValues", func() error { _, err := q.p.RunValues(ctx, e, nil, false); return err }, "loom: run_values: "+q.frag)
		errOf(q.name+".Prepare", func() error { return q.p.Prepare(ctx, e) }, "loom: prepare: "+q.frag)
		errOf(q.name+".Dump", func() error { return q.p.Dump(io.Discard, graph.DumpText) }, "loom: dump: "+q.frag)
		errOf(q.name+".WriteDumps", func() error { return q.p.WriteDumps(t.TempDir()) }, "loom: dump: "+q.frag)
		noPanic(t, q.name+".Plan", func() {
			if q.p.Plan() != nil {
				t.Errorf("%s.Plan() is not nil", q.name)
			}
		})
		noPanic(t, q.name+".Placement", func() { _ = q.p.Placement(e) })
	}
	errOf("Run(nil executor)", func() error { _, err := p.Run(ctx, nil, inputs); return err }, "loom: run: nil executor")
	errOf("Run(nil context)", func() error { _, err := p.Run(nil, e, inputs); return err }, "loom: run: nil context") //nolint:staticcheck // the misuse under test
	errOf("RunInto(nil executor)", func() error { return p.RunInto(ctx, nil, inputs, nil) }, "loom: run_into: nil executor")
	errOf("RunValues(nil executor)", func() error { _, err := p.RunValues(ctx, nil, nil, false); return err }, "loom: run_values: nil executor")
	errOf("Prepare(nil executor)", func() error { return p.Prepare(ctx, nil) }, "loom: prepare: nil executor")
	errOf("Run(nil input)", func() error { _, err := p.Run(ctx, e, map[string]*tensor.Tensor{"x": nil}); return err }, `missing input "x"`)
	errOf("Dump(nil writer)", func() error { return p.Dump(nil, graph.DumpText) }, "loom: dump: nil writer")
	noPanic(t, "Placement(nil)", func() { _ = p.Placement(nil) })

	// A missing output is a nil *tensor.Tensor.
	out, err := p.Run(ctx, e, inputs)
	if err != nil {
		t.Fatal(err)
	}
	missing := out["nope"]
	errOf("tensor.Values(nil)", func() error { _, err := tensor.Values[float32](missing); return err }, "tensor: values: nil tensor")
	noPanic(t, "nil host tensor accessors", func() {
		if missing.DType() != dtype.Invalid || missing.Shape() != nil || missing.Numel() != 0 || missing.Rank() != 0 ||
			missing.Data() != nil || missing.Bytes() != nil || len(missing.Float64s()) != 0 || missing.Clone() != nil {
			t.Errorf("nil host tensor accessors")
		}
		_ = missing.String()
		_ = missing.Float64(0)
		missing.SetFloat64(0, 1)
		var zero tensor.Tensor
		_, _, _ = zero.Bytes(), zero.Float64s(), zero.Clone()
		_, err := tensor.Values[float32](&zero)
		wantErr(t, "Values(zero)", err, "tensor: want f32 elements")
	})
}

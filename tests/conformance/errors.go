package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/tensor"
)

// Errors checks that every misuse is an error that names the op and the
// shapes or dtypes involved, that a graph holding an error cannot be
// compiled, that runs with bad inputs fail, and that nothing panics.
func Errors(t *testing.T, newExec func(poison byte) exec.Executor) {
	e := newExec(Poisons[0])
	t.Run("builder", builderErrors)
	t.Run("unsupported_dtypes", unsupportedDTypes)
	t.Run("outputs", outputErrors)
	t.Run("compile", compileErrors)
	t.Run("run", func(t *testing.T) { runErrors(t, e) })
}

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

// builderErrors: each case makes one bad builder call in a graph that also
// has a good output; the returned tensor, the graph and Compile must all
// report the error.
var builderCases = []struct {
	name  string
	build func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor // x: f32[3 4], y: f32[5]
	frags []string
}{
	{"broadcast_shapes", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Add(y) }, []string{"add", "[3 4]", "[5]"}},
	{"dtype_mismatch", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor {
		return x.Mul(g.Input("h", dtype.F16, 3, 4))
	}, []string{"mul", "f32", "f16"}},
	{"exp_on_u8", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Input("u", dtype.U8, 2).Exp() }, []string{"exp", "u8"}},
	{"transpose_dim", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Transpose(0, 5) }, []string{"transpose", "5", "[3 4]"}},
	{"permute_repeat", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Permute(0, 0) }, []string{"permute", "[0 0]"}},
	{"permute_rank", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Permute(1, 0, 2) }, []string{"permute", "[3 4]"}},
	{"narrow_range", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Narrow(1, 3, 2) }, []string{"narrow", "[3 4]", "5"}},
	{"narrow_negative_start", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Narrow(0, -1, 2) }, []string{"narrow", "[3 4]"}},
	{"narrow_dim", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Narrow(2, 0, 1) }, []string{"narrow", "2", "[3 4]"}},
	{"reshape_count", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Reshape(7) }, []string{"reshape", "[3 4]", "7"}},
	{"reshape_two_infer", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Reshape(-1, -1) }, []string{"reshape", "[3 4]"}},
	{"reshape_infer", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Reshape(-1, 5) }, []string{"reshape", "[3 4]", "5"}},
	{"reshape_negative", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Reshape(-2, -6) }, []string{"reshape", "[3 4]"}},
	{"squeeze_non_unit", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Squeeze(0) }, []string{"squeeze", "[3 4]"}},
	{"squeeze_dim", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Squeeze(-3) }, []string{"squeeze", "[3 4]"}},
	{"unsqueeze_dim", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Unsqueeze(4) }, []string{"unsqueeze", "4", "[3 4]"}},
	{"broadcast_to", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.BroadcastTo(3, 5) }, []string{"broadcast", "[3 4]", "[3 5]"}},
	{"broadcast_fewer_dims", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.BroadcastTo(4) }, []string{"broadcast", "[3 4]", "[4]"}},
	{"elu_nan", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Elu(math.NaN()) }, []string{"elu", "NaN", "[3 4]"}},
	{"powf_nan", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Powf(math.NaN()) }, []string{"powf", "NaN"}},
	{"affine_nan", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Affine(1, math.NaN()) }, []string{"affine", "NaN"}},
	{"where_f32_condition", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return graph.Where(x, x, x) }, []string{"where", "f32", "[3 4]"}},
	{"where_shapes", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor {
		return graph.Where(g.Input("c", dtype.U8, 3, 4), y, y)
	}, []string{"where", "[3 4]", "[5]"}},
	{"where_value_dtypes", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor {
		return graph.Where(g.Input("c", dtype.U8, 3, 4), x, g.Input("h", dtype.F16, 3, 4))
	}, []string{"where", "f32", "f16"}},
	{"where_scalar_condition", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return graph.Where(graph.Scalar(1), x, x) }, []string{"where", "scalar"}},
	{"cast_invalid", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return x.Cast(dtype.Invalid) }, []string{"cast", "[3 4]"}},
	{"input_empty_name", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Input("", dtype.F32, 2) }, []string{"input", "name"}},
	{"input_invalid_dtype", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Input("z", dtype.Invalid, 2) }, []string{"input", "z"}},
	{"input_negative_dim", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Input("z", dtype.F32, 2, -1) }, []string{"input", "-1"}},
	{"input_twice", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Input("x", dtype.F64, 3) }, []string{"input", `"x"`, "f32[3 4]", "f64[3]"}},
	{"full_negative_dim", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Full(dtype.F32, 1, 2, -3) }, []string{"full", "-3"}},
	{"full_invalid_dtype", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Full(dtype.Invalid, 1, 2) }, []string{"full", "dtype"}},
	{"arange_zero_step", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Arange(dtype.F32, 0, 5, 0) }, []string{"arange", "step=0"}},
	{"arange_nan", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Arange(dtype.F32, 0, math.NaN(), 1) }, []string{"arange", "NaN"}},
	// An infinite (or astronomically long) range must be refused like any
	// other too-long range, not produce a tensor with a negative dim.
	{"arange_infinite", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Arange(dtype.F32, 0, math.Inf(1), 1) }, []string{"arange"}},
	{"arange_huge", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return g.Arange(dtype.F32, 0, 1e300, 1) }, []string{"arange"}},
	{"different_graphs", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor {
		return x.Add(graph.New().Input("x", dtype.F32, 3, 4))
	}, []string{"add", "different graphs"}},
	{"error_carried_on", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor {
		return x.Squeeze(0).Exp().Add(x).T().Reshape(-1)
	}, []string{"squeeze", "[3 4]"}},
	// Ops on untyped scalars alone have no graph to record their error in;
	// the error must still reach Compile through Output.
	{"exp_of_scalar", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return graph.Scalar(2).Exp() }, []string{"exp", "scalar"}},
	{"add_of_scalars", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor { return graph.Scalar(2).Add(graph.Scalar(3)) }, []string{"add", "scalar"}},
	{"where_of_scalars", func(g *graph.Graph, x, y *graph.Tensor) *graph.Tensor {
		return graph.Where(g.Input("c", dtype.U8, 3, 4), graph.Scalar(1), graph.Scalar(0))
	}, []string{"where", "scalar"}},
}

func builderErrors(t *testing.T) {
	for _, bc := range builderCases {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			noPanic(t, bc.name, func() {
				g := graph.New()
				x := g.Input("x", dtype.F32, 3, 4)
				y := g.Input("y", dtype.F32, 5)
				bad := bc.build(g, x, y)
				wantErr(t, "the tensor", bad.Err(), bc.frags...)
				if bad.Err() == nil {
					t.Logf("got %v", bad)
				}
				g.Output("good", x.Exp())
				g.Output("bad", bad)
				prog, err := g.Compile(graph.Options{Check: true})
				wantErr(t, "Compile", err, bc.frags...)
				if prog != nil {
					t.Errorf("Compile returned a program with its error")
				}
			})
		})
	}
}

// unsupportedDTypes: every one-argument op refuses the dtypes its row does
// not claim, naming the op and the dtype.
func unsupportedDTypes(t *testing.T) {
	for _, op := range ir.Ops() {
		spec, ok := unarySpecs[op]
		if !ok {
			continue
		}
		for _, dt := range dtype.All {
			if op.Info().In.Has(dt) {
				continue
			}
			noPanic(t, op.String(), func() {
				g := graph.New()
				x := g.Input("x", dt, 2, 3)
				p := spec.paramSets(dtype.F32)[0]
				wantErr(t, fmt.Sprintf("%s on %v", op, dt), spec.call(x, p).Err(), op.String(), dt.String())
			})
		}
	}
}

func outputErrors(t *testing.T) {
	cases := []struct {
		name  string
		do    func(g *graph.Graph, x *graph.Tensor)
		frags []string
	}{
		{"duplicate_name", func(g *graph.Graph, x *graph.Tensor) { g.Output("o", x.Exp()); g.Output("o", x.Log()) }, []string{"output", `"o"`}},
		{"empty_name", func(g *graph.Graph, x *graph.Tensor) { g.Output("", x.Exp()) }, []string{"output", "name"}},
		{"untyped_scalar", func(g *graph.Graph, x *graph.Tensor) { g.Output("s", graph.Scalar(1)) }, []string{"output", `"s"`, "scalar"}},
		{"other_graph", func(g *graph.Graph, x *graph.Tensor) {
			g.Output("o", graph.New().Input("z", dtype.F32, 1).Exp())
		}, []string{"output", `"o"`, "graph"}},
	}
	for _, oc := range cases {
		t.Run(oc.name, func(t *testing.T) {
			t.Parallel()
			noPanic(t, oc.name, func() {
				g := graph.New()
				x := g.Input("x", dtype.F32, 3)
				oc.do(g, x)
				g.Output("good", x.Neg())
				wantErr(t, "graph", g.Err(), oc.frags...)
				prog, err := g.Compile(graph.Options{})
				wantErr(t, "Compile", err, oc.frags...)
				if prog != nil {
					t.Errorf("Compile returned a program with its error")
				}
			})
		})
	}
}

func compileErrors(t *testing.T) {
	noPanic(t, "compile", func() {
		g := graph.New()
		g.Input("x", dtype.F32, 3)
		_, err := g.Compile(graph.Options{})
		wantErr(t, "a graph without outputs", err, "no outputs")

		// Every recorded error is reported, not just the first.
		g = graph.New()
		x := g.Input("x", dtype.F32, 3, 4)
		g.Output("a", x.Transpose(0, 7))
		g.Output("b", x.Reshape(5))
		_, err = g.Compile(graph.Options{})
		wantErr(t, "a graph with two errors", err, "transpose", "reshape")
	})
}

func runErrors(t *testing.T, e exec.Executor) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 2, 3)
	g.Input("unused", dtype.U8, 4)
	g.Output("y", x.Exp())
	prog, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := func() map[string]*tensor.Tensor {
		xt, _ := tensor.Zeros(dtype.F32, 2, 3)
		ut, _ := tensor.Zeros(dtype.U8, 4)
		return map[string]*tensor.Tensor{"x": xt, "unused": ut}
	}
	f64, _ := tensor.Zeros(dtype.F64, 2, 3)
	wrongShape, _ := tensor.Zeros(dtype.F32, 3, 2)
	cases := []struct {
		name   string
		edit   func(map[string]*tensor.Tensor)
		frags  []string
		noExec bool
	}{
		{name: "missing", edit: func(m map[string]*tensor.Tensor) { delete(m, "x") }, frags: []string{"missing", `"x"`, "f32[2 3]"}},
		{name: "missing_unused", edit: func(m map[string]*tensor.Tensor) { delete(m, "unused") }, frags: []string{"missing", `"unused"`}},
		{name: "nil_tensor", edit: func(m map[string]*tensor.Tensor) { m["x"] = nil }, frags: []string{`"x"`}},
		{name: "unknown", edit: func(m map[string]*tensor.Tensor) { m["zz"] = m["x"] }, frags: []string{"unknown", `"zz"`}},
		{name: "wrong_dtype", edit: func(m map[string]*tensor.Tensor) { m["x"] = f64 }, frags: []string{`"x"`, "f64[2 3]", "f32[2 3]"}},
		{name: "wrong_shape", edit: func(m map[string]*tensor.Tensor) { m["x"] = wrongShape }, frags: []string{`"x"`, "f32[3 2]", "f32[2 3]"}},
		{name: "nil_executor", noExec: true},
	}
	for _, rc := range cases {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			noPanic(t, rc.name, func() {
				in := good()
				if rc.edit != nil {
					rc.edit(in)
				}
				ex := e
				if rc.noExec {
					ex = nil
				}
				out, err := prog.Run(context.Background(), ex, in)
				wantErr(t, "Run", err, rc.frags...)
				if out != nil {
					t.Errorf("Run returned outputs with its error")
				}
			})
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		noPanic(t, "cancelled", func() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := prog.Run(ctx, e, good())
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run with a cancelled context: %v, want context.Canceled", err)
			}
		})
	})
	t.Run("no_inputs", func(t *testing.T) {
		t.Parallel()
		noPanic(t, "no inputs", func() {
			g := graph.New()
			g.Output("f", g.Full(dtype.I64, 7, 2))
			prog, err := g.Compile(graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			out, err := prog.Run(context.Background(), e, nil)
			if err != nil {
				t.Fatalf("Run of a graph without inputs, nil map: %v", err)
			}
			if v, _ := tensor.Values[int64](out["f"]); len(v) != 2 || v[0] != 7 || v[1] != 7 {
				t.Errorf("full(7) = %v", v)
			}
		})
	})
}

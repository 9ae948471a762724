package codegen

import (
	"fmt"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// A graphCase is a small graph whose plan's kernels the tests render,
// compile and (emulate_test.go) run.
type graphCase struct {
	name  string
	fused bool // compile with fusion (else NoFusion)
	build func(g *graph.Graph)
	// op and in, when set, name an op the plan must contain with value
	// arguments of dtype in (cast: the source dtype); to is cast's target
	// and where's condition dtype.
	op     ir.Op
	in, to dtype.DType
	// big: compile only (too large to emulate).
	big bool
	// inputs, when set, gives the input of that name (else random values).
	inputs func(name string) *tensor.Tensor
}

// opShape is the shape of the op×dtype cases: 259 elements, so every vector
// width leaves a tail, and rows (37) that no vector width divides.
var opShape = []int{7, 37}

// unaryFn applies a one-argument op (with the test's parameters).
func unaryFn(op ir.Op, x *graph.Tensor, dt dtype.DType) *graph.Tensor {
	switch op {
	case ir.OpExp:
		return x.Exp()
	case ir.OpLog:
		return x.Log()
	case ir.OpSin:
		return x.Sin()
	case ir.OpCos:
		return x.Cos()
	case ir.OpTanh:
		return x.Tanh()
	case ir.OpRecip:
		return x.Recip()
	case ir.OpSqrt:
		return x.Sqrt()
	case ir.OpCeil:
		return x.Ceil()
	case ir.OpFloor:
		return x.Floor()
	case ir.OpRound:
		return x.Round()
	case ir.OpErf:
		return x.Erf()
	case ir.OpGelu:
		return x.Gelu()
	case ir.OpGeluErf:
		return x.GeluErf()
	case ir.OpSilu:
		return x.Silu()
	case ir.OpSigmoid:
		return x.Sigmoid()
	case ir.OpNormcdf:
		return x.Normcdf()
	case ir.OpElu:
		return x.Elu(1.5)
	case ir.OpPowf:
		return x.Powf(2.5)
	case ir.OpNeg:
		return x.Neg()
	case ir.OpSqr:
		return x.Sqr()
	case ir.OpAbs:
		return x.Abs()
	case ir.OpSign:
		return x.Sign()
	case ir.OpRelu:
		return x.Relu()
	case ir.OpCopy:
		return x.T().Contiguous().T()
	case ir.OpAffine:
		if dt.IsInt() {
			return x.Affine(3, 7)
		}
		return x.Affine(0.5, -0.25)
	}
	panic(fmt.Sprintf("no unary builder for %s", op))
}

func binaryFn(op ir.Op, x, y *graph.Tensor) *graph.Tensor {
	switch op {
	case ir.OpAdd:
		return x.Add(y)
	case ir.OpSub:
		return x.Sub(y)
	case ir.OpMul:
		return x.Mul(y)
	case ir.OpDiv:
		return x.Div(y)
	case ir.OpMaximum:
		return x.Maximum(y)
	case ir.OpMinimum:
		return x.Minimum(y)
	case ir.OpEq:
		return x.Eq(y)
	case ir.OpNe:
		return x.Ne(y)
	case ir.OpLt:
		return x.Lt(y)
	case ir.OpLe:
		return x.Le(y)
	case ir.OpGt:
		return x.Gt(y)
	case ir.OpGe:
		return x.Ge(y)
	}
	panic(fmt.Sprintf("no binary builder for %s", op))
}

// opCases is one single-op graph for every op of the table and every dtype
// it accepts (every cast pair, every where condition dtype), compiled
// without fusion.
func opCases() []graphCase {
	var cs []graphCase
	add := func(c graphCase) { cs = append(cs, c) }
	for _, op := range ir.Ops() {
		info := op.Info()
		if op == ir.OpInput || (info.Class != ir.ClassSource && info.Class != ir.ClassElementwise) {
			continue
		}
		for _, dt := range info.In.List() {
			name := fmt.Sprintf("%s/%v", op, dt)
			switch {
			case op == ir.OpFull:
				add(graphCase{name: name, op: op, in: dt, build: func(g *graph.Graph) {
					g.Output("out", g.Full(dt, 300.7, opShape...))
				}})
			case op == ir.OpArange:
				add(graphCase{name: name, op: op, in: dt, build: func(g *graph.Graph) {
					g.Output("out", g.Arange(dt, -3, 200, 0.75))
				}})
			case op == ir.OpRandUniform:
				add(graphCase{name: name, op: op, in: dt, build: func(g *graph.Graph) {
					g.Output("out", g.Rand(dt, 5, -1, 3, opShape...))
				}})
			case op == ir.OpRandNormal:
				add(graphCase{name: name, op: op, in: dt, build: func(g *graph.Graph) {
					g.Output("out", g.Randn(dt, 5, 0.5, 2, opShape...))
				}})
			case op == ir.OpCast:
				for _, to := range dtype.All {
					if to == dt {
						continue
					}
					add(graphCase{name: fmt.Sprintf("cast/%v->%v", dt, to), op: op, in: dt, to: to, build: func(g *graph.Graph) {
						g.Output("out", g.Input("x", dt, opShape...).Cast(to))
					}})
				}
			case op == ir.OpWhere:
				for _, c := range ir.IDDTypes.List() {
					add(graphCase{name: fmt.Sprintf("where/%v/%v", c, dt), op: op, in: dt, to: c, build: func(g *graph.Graph) {
						cond := g.Input("c", c, opShape...)
						g.Output("out", graph.Where(cond, g.Input("x", dt, opShape...), g.Input("y", dt, opShape...)))
					}})
				}
			case info.Arity == 2:
				add(graphCase{name: name, op: op, in: dt, build: func(g *graph.Graph) {
					g.Output("out", binaryFn(op, g.Input("x", dt, opShape...), g.Input("y", dt, opShape...)))
				}})
			default:
				add(graphCase{name: name, op: op, in: dt, build: func(g *graph.Graph) {
					g.Output("out", unaryFn(op, g.Input("x", dt, opShape...), dt))
				}})
				if op == ir.OpPowf && dt != dtype.F64 {
					// An exponent that is not a float: the double path.
					add(graphCase{name: name + "/e=0.1", op: op, in: dt, build: func(g *graph.Graph) {
						g.Output("out", g.Input("x", dt, opShape...).Powf(0.1))
					}})
				}
			}
		}
	}
	return cs
}

// variantCases exercise the layouts: contiguous, transposed, broadcast,
// offset (narrow), mixed widths, huge (64-bit indices, grid-stride loop).
func variantCases() []graphCase {
	f32, f16, f64, u8 := dtype.F32, dtype.F16, dtype.F64, dtype.U8
	return []graphCase{
		{name: "contiguous/f32", build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 33, 65).Exp())
		}},
		{name: "contiguous/f16-to-f32", build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f16, 33, 64).Cast(f32))
		}},
		{name: "transposed/rows-not-multiple", build: func(g *graph.Graph) {
			// x.T() is [41 37] with strides [1 41]: address per element.
			g.Output("out", g.Input("x", f32, 37, 41).T().Add(g.Input("y", f32, 41, 37)))
		}},
		{name: "transposed/rows-multiple", build: func(g *graph.Graph) {
			// x.T() is [48 64] with strides [1 48]: a stride-48 run per thread.
			g.Output("out", g.Input("x", f16, 64, 48).T().Mul(g.Input("y", f16, 48, 64)))
		}},
		{name: "transposed/3d", build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 5, 6, 8).Permute(2, 0, 1).Sub(g.Input("y", f32, 8, 5, 6)))
		}},
		{name: "broadcast/bias-row-col-scalar", build: func(g *graph.Graph) {
			x := g.Input("x", f32, 33, 64)
			row := g.Input("row", f32, 64)    // stride 1 along rows: vector loads
			col := g.Input("col", f32, 33, 1) // stride 0 along rows: one load per thread
			g.Output("out", x.Add(row).Mul(col).Add(graph.Scalar(0.5)))
		}},
		{name: "broadcast/odd-bias", build: func(g *graph.Graph) {
			// rows of 7: not a multiple of the vector width.
			g.Output("out", g.Input("x", f16, 30, 7).Add(g.Input("b", f16, 7)))
		}},
		{name: "offset/rows-aligned", build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 40, 64).Narrow(0, 3, 30).Sqrt())
		}},
		{name: "offset/cols-aligned", build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 40, 64).Narrow(1, 4, 32).Abs())
		}},
		{name: "offset/cols-unaligned", build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 40, 64).Narrow(1, 1, 62).Neg())
		}},
		{name: "offset/contiguous-unaligned", build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 1000).Narrow(0, 1, 999).Floor())
		}},
		{name: "mixed/f64-compare-u8", build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f64, 1001).Lt(g.Input("y", f64, 1001)))
		}},
		{name: "mixed/u8-where-i64", build: func(g *graph.Graph) {
			c := g.Input("c", u8, 3, 333)
			g.Output("out", graph.Where(c, g.Input("x", dtype.I64, 3, 333), g.Input("y", dtype.I64, 333)))
		}},
		{name: "scalar/shape-[]", build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32).Exp())
		}},
		{name: "empty/0-elements", build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 0, 5).Exp())
		}},
		{name: "big/2^31+2^16-f32", big: true, build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 1<<16, 1<<15+1).Exp().Add(g.Input("b", f32, 1<<15+1)))
		}},
		{name: "big/transposed-2^31", big: true, build: func(g *graph.Graph) {
			g.Output("out", g.Input("x", f16, 1<<16, 1<<15).T().Cast(f32))
		}},
		{name: "big/2^33-f64-loop", big: true, build: func(g *graph.Graph) {
			// Not a transcendental: heavyElems would give it 8 values a
			// thread, and then no loop.
			g.Output("out", g.Input("x", f64, 1<<17, 1<<16).Sqr())
		}},
	}
}

// workloadCases are W1, W2 and W6 of workloads.md, fused, at n elements
// (W6: n = rows·cols).
func workloadCases(rows, cols int, big bool) []graphCase {
	n := rows * cols
	tag := fmt.Sprintf("/%d", n)
	return []graphCase{
		{name: "W1" + tag, fused: true, big: big, build: func(g *graph.Graph) {
			x := g.Input("x", dtype.F16, n)
			y := g.Input("y", dtype.F32, n)
			v := x.Cast(dtype.F32).Silu().Affine(2, 1)
			g.Output("out", graph.Where(y.Gt(graph.Scalar(0)), v, v.Neg()))
		}},
		{name: "W2" + tag, fused: true, big: big, build: func(g *graph.Graph) {
			x := g.Input("x", dtype.F16, n)
			y := g.Input("y", dtype.F32, n)
			z := g.Input("z", dtype.F32, n)
			a := x.Cast(dtype.F32).Mul(graph.Scalar(0.5)).Add(graph.Scalar(0.25))
			gl := a.Gelu()
			s := y.Sigmoid()
			g.Output("out", graph.Where(z.Gt(graph.Scalar(0)), gl.Mul(s).Add(z), gl.Abs().Neg().Exp()))
		}},
		{name: "W6" + tag, fused: true, big: big, build: func(g *graph.Graph) {
			x := g.Input("x", dtype.F32, rows, cols)
			b := g.Input("bias", dtype.F32, cols)
			g.Output("out", x.Add(b).Gelu())
		}},
	}
}

// plan compiles a case's graph.
func (c graphCase) plan(t testing.TB) *plan.Plan {
	t.Helper()
	g := graph.New()
	c.build(g)
	p, err := g.Compile(graph.Options{NoFusion: !c.fused})
	if err != nil {
		t.Fatalf("%s: compile graph: %v", c.name, err)
	}
	pl := p.Plan()
	if c.op != ir.OpInvalid && !planHas(pl, c) {
		t.Fatalf("%s: no kernel computes %s on %v", c.name, c.op, c.in)
	}
	return pl
}

// planHas reports whether some kernel has an instruction of c.op whose
// value arguments (or, for sources, result) have dtype c.in.
func planHas(p *plan.Plan, c graphCase) bool {
	for _, s := range p.Steps {
		k := s.Kernel
		for _, in := range k.Instrs {
			if in.Node.Op != c.op {
				continue
			}
			if len(in.Args) == 0 {
				if in.Node.DType == c.in {
					return true
				}
				continue
			}
			a := in.Args[in.Node.Op.Info().ValueArgs()]
			var dt dtype.DType
			if a.Operand {
				dt = k.Ins[a.Index].Buf.DType
			} else {
				dt = k.Instrs[a.Index].Node.DType
			}
			if dt == c.in && (c.op != ir.OpCast || in.Node.DType == c.to) {
				return true
			}
		}
	}
	return false
}

// renderAll renders every kernel of every case for tg, dropping duplicate
// sources.
func renderAll(t testing.TB, cases []graphCase, tg Target, opts ...options) []*Source {
	opt := defaultOptions
	if len(opts) > 0 {
		opt = opts[0]
	}
	t.Helper()
	var out []*Source
	seen := map[string]bool{}
	for _, c := range cases {
		for i, s := range c.plan(t).Steps {
			src, err := render(s.Kernel, tg, opt)
			if err != nil {
				t.Errorf("%s: step %d (%s): %v", c.name, i, s.Kernel.Name, err)
				continue
			}
			if !seen[src.Name] {
				seen[src.Name] = true
				out = append(out, src)
			}
		}
	}
	return out
}

func allCases(big bool) []graphCase {
	cs := slices.Concat(opCases(), variantCases(), workloadCases(1000, 37, false), workloadCases(64, 96, false), randomCases())
	if big {
		cs = append(cs, workloadCases(1<<14, 1<<14, true)...) // 2^28 elements, W6 8192² ≈ 2^26 below
		cs = append(cs, workloadCases(8192, 8192, true)[2])
	}
	return cs
}

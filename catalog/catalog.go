package catalog

import (
	"errors"
	"fmt"
	"math"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/workloads"
)

// Entry is one kernel of the catalog.
type Entry struct {
	// Label says where the kernel comes from: "add f32", "cast f16→u8",
	// "W1 fused".
	Label  string
	Kernel *plan.Kernel
	// Bytewise, for a fused dequantization of a format with a word-load
	// body, asks for its byte-wise body instead (the one the GPU runs
	// where the buffers are not 16-byte aligned).
	Bytewise bool
}

// unfusedSize is the element count of the per-op kernels: odd, so the
// vector paths' tails are compiled too.
const unfusedSize = 1003

// Kernels returns the catalog: per-op kernels first (in op-table order),
// then the indexing kernels, then the workload kernels (W1, W2, W6 fused
// elementwise; W8 argsort), then the portable GEMM (matmul).
func Kernels() ([]Entry, error) {
	var out []Entry
	// addFused adds every kernel of a graph compiled with fusion on.
	addFused := func(label string, build func(g *graph.Graph) *graph.Tensor) error {
		g := graph.New()
		g.Output("o", build(g))
		p, err := g.Compile(graph.Options{})
		if err != nil {
			return fmt.Errorf("catalog: %s: %w", label, err)
		}
		for i, s := range p.Plan().Steps {
			out = append(out, Entry{Label: fmt.Sprintf("%s (step %d)", label, i), Kernel: s.Kernel})
		}
		return nil
	}
	add := func(label string, build func(g *graph.Graph) *graph.Tensor, op ir.Op) error {
		g := graph.New()
		g.Output("o", build(g))
		p, err := g.Compile(graph.Options{NoFusion: true})
		if err != nil {
			return fmt.Errorf("catalog: %s: %w", label, err)
		}
		for _, s := range p.Plan().Steps {
			if s.Kernel.Instrs[len(s.Kernel.Instrs)-1].Node.Op == op {
				out = append(out, Entry{Label: label, Kernel: s.Kernel})
				return nil
			}
		}
		return fmt.Errorf("catalog: %s: no %s kernel in the plan", label, op)
	}
	for _, op := range ir.Ops() {
		info := op.Info()
		for _, dt := range info.In.List() {
			var err error
			in := func(g *graph.Graph, name string, d dtype.DType) *graph.Tensor {
				return g.Input(name, d, unfusedSize)
			}
			switch {
			case op == ir.OpCast:
				for _, to := range dtype.All {
					if to == dt {
						continue
					}
					if err = add(fmt.Sprintf("cast %v→%v", dt, to), func(g *graph.Graph) *graph.Tensor { return in(g, "x", dt).Cast(to) }, op); err != nil {
						return nil, err
					}
				}
			case op == ir.OpWhere:
				for _, c := range ir.IDDTypes.List() {
					err = add(fmt.Sprintf("where %v ? %v", c, dt), func(g *graph.Graph) *graph.Tensor {
						return graph.Where(in(g, "c", c), in(g, "t", dt), in(g, "f", dt))
					}, op)
					if err != nil {
						return nil, err
					}
				}
			case op == ir.OpFull:
				err = add("full "+dt.String(), func(g *graph.Graph) *graph.Tensor {
					return g.Full(dt, 1.5, unfusedSize).Contiguous().Add(in(g, "x", dt))
				}, ir.OpAdd)
			case op == ir.OpArange:
				err = add("arange "+dt.String(), func(g *graph.Graph) *graph.Tensor { return g.Arange(dt, 0, unfusedSize, 1) }, op)
			case op == ir.OpRandUniform:
				err = add("rand "+dt.String(), func(g *graph.Graph) *graph.Tensor { return g.Rand(dt, 1, 0, 1, unfusedSize) }, op)
			case op == ir.OpRandNormal:
				err = add("randn "+dt.String(), func(g *graph.Graph) *graph.Tensor { return g.Randn(dt, 1, 0, 1, unfusedSize) }, op)
			case op == ir.OpCopy:
				err = add("copy "+dt.String(), func(g *graph.Graph) *graph.Tensor {
					return g.Input("x", dt, 17, 59).T().Contiguous()
				}, op)
			case info.Class == ir.ClassElementwise && info.Arity == 1:
				params := make([]float64, len(info.Params))
				for i := range params {
					params[i] = 0.5 + float64(i)
				}
				err = add(fmt.Sprintf("%s %v", op, dt), func(g *graph.Graph) *graph.Tensor { return unary(in(g, "x", dt), op, params) }, op)
			case info.Class == ir.ClassElementwise && info.Arity == 2:
				err = add(fmt.Sprintf("%s %v", op, dt), func(g *graph.Graph) *graph.Tensor { return binary(in(g, "a", dt), in(g, "b", dt), op) }, op)
			case info.Class == ir.ClassReduce:
				err = add(fmt.Sprintf("%s %v", op, dt), func(g *graph.Graph) *graph.Tensor { return reduceOp(g.Input("x", dt, 7, 37), op) }, op)
			default:
				continue // indexing ops are added by indexEntries
			}
			if err != nil {
				return nil, err
			}
		}
	}
	if err := indexEntries(add); err != nil {
		return nil, err
	}
	if err := windowEntries(add); err != nil {
		return nil, err
	}
	// Pools and upsamplings fused with the elementwise chains around them
	// (fuse's core-fusion): a prologue with an operand of its own, an
	// epilogue with a residual and a cast.
	for _, dt := range ir.PoolDTypes.List() {
		fused := []struct {
			label string
			build func(g *graph.Graph) *graph.Tensor
		}{
			{"max_pool2d fused", func(g *graph.Graph) *graph.Tensor {
				x := g.Input("x", dt, 2, 3, 17, 19).Add(g.Input("b", dt, 1, 3, 1, 1))
				if dt.IsFloat() {
					x = x.Relu()
				}
				y := x.MaxPool2d(3, 3, graph.PoolStride(2), graph.PoolPadding(1))
				return y.Add(g.Input("r", dt, 2, 3, 9, 10)).Cast(dtype.F32)
			}},
			{"avg_pool2d fused", func(g *graph.Graph) *graph.Tensor {
				x := g.Input("x", dt, 2, 3, 17, 19).Mul(g.Input("s", dt, 2, 3, 17, 19))
				return x.AvgPool2d(2, 2).Sub(g.Input("r", dt, 2, 3, 8, 9))
			}},
			{"upsample_nearest2d fused", func(g *graph.Graph) *graph.Tensor {
				return g.Input("x", dt, 2, 3, 17, 19).Maximum(g.Input("m", dt, 2, 3, 17, 19)).UpsampleNearest2dScale(2, 2).Cast(dtype.F32)
			}},
		}
		if dt.IsFloat() {
			fused = append(fused, struct {
				label string
				build func(g *graph.Graph) *graph.Tensor
			}{"upsample_bilinear2d fused", func(g *graph.Graph) *graph.Tensor {
				x := g.Input("x", dt, 2, 3, 17, 19).Affine(0.5, 1).Exp()
				return x.UpsampleBilinear2d(34, 38, false).Sigmoid()
			}})
		}
		for _, f := range fused {
			if err := addFused(fmt.Sprintf("%s %v", f.label, dt), f.build); err != nil {
				return nil, err
			}
		}
	}
	// Skinny products fused with the chains around them (core-fusion): a
	// decode step's down projection (silu(gate)·up computed as it is read,
	// the residual added as it is stored) and one with a cast after it, for
	// one and three rows.
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, m := range []int{1, 3} {
			if err := addFused(fmt.Sprintf("fused skinny product %v M=%d", dt, m), func(g *graph.Graph) *graph.Tensor {
				gate, up := g.Input("gate", dt, m, 96), g.Input("up", dt, m, 96)
				w := g.Input("w", dt, 40, 96)
				y := gate.Silu().Mul(up).Matmul(w.T())
				return y.Add(g.Input("r", dt, m, 40)).Cast(dtype.F32)
			}); err != nil {
				return nil, err
			}
		}
	}
	// A skinny product whose weight interleaves gate and up rows, with
	// SwiGLU as its pair epilogue (plan.Kernel.PairEpilogue), for one and
	// three rows.
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, m := range []int{1, 3} {
			if err := addFused(fmt.Sprintf("skinny product with a pair epilogue %v M=%d", dt, m), func(g *graph.Graph) *graph.Tensor {
				y := g.Input("x", dt, m, 256).Matmul(g.Input("w", dt, 80, 256).T()).Reshape(m, 40, 2)
				return y.Narrow(2, 0, 1).Reshape(m, 40).Silu().Mul(y.Narrow(2, 1, 1).Reshape(m, 40)).Cast(dtype.F32)
			}); err != nil {
				return nil, err
			}
		}
	}
	// A one-row quantized mat-vec after a step of its own input (so that
	// its weight is an operand the step before does not write: its first
	// weight stage is issued before the wait).
	for _, f := range []quant.Type{quant.Q4_K, quant.Q8_0} {
		var qerr error
		if err := addFused(fmt.Sprintf("quantized mat-vec after a step %v", f), func(g *graph.Graph) *graph.Tensor {
			w, err := g.QInput("w", f, 96, 256)
			if err != nil {
				qerr = err
				return g.Input("x", dtype.BF16, 1, 96)
			}
			x := g.Input("x", dtype.BF16, 1, 256).Neg()
			return x.QMatmul(w).Add(g.Input("r", dtype.BF16, 1, 96))
		}); err != nil || qerr != nil {
			return nil, errors.Join(err, qerr)
		}
	}
	// A one-row skinny product after a step of its own input (its weight
	// is an operand the step before does not write: its first loads of
	// the weight are issued before the wait, gemv.hip's LOOM_GEMV_DEFER).
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		if err := addFused(fmt.Sprintf("skinny product after a step %v", dt), func(g *graph.Graph) *graph.Tensor {
			x := g.Input("x", dt, 1, 256).Neg()
			return x.Matmul(g.Input("w", dt, 96, 256).T()).Add(g.Input("r", dt, 1, 96))
		}); err != nil {
			return nil, err
		}
	}
	// A skinny product whose query and key rows interleave each head's
	// halves, with the rotary embedding as its pair epilogue keeping every
	// element (plan.Kernel.PairKeep), for one and three rows.
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, m := range []int{1, 3} {
			if err := addFused(fmt.Sprintf("skinny product with a rope pair epilogue %v M=%d", dt, m), func(g *graph.Graph) *graph.Tensor {
				y := g.Input("x", dt, m, 256).Matmul(g.Input("w", dt, 96, 256).T()).Reshape(m, 1, 6, 16)
				return y.RopeIThdHeads(g.Input("cos", dt, m, 1, 8), g.Input("sin", dt, m, 1, 8), 4).Cast(dtype.F32)
			}); err != nil {
				return nil, err
			}
		}
	}
	// One-row quantized products with SwiGLU as their pair epilogue, for
	// every format with the one-launch mat-vec.
	for _, f := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
			var qerr error
			if err := addFused(fmt.Sprintf("quantized mat-vec with a pair epilogue %v %v", f, dt), func(g *graph.Graph) *graph.Tensor {
				w, err := g.QInput("w", f, 80, 256)
				if err != nil {
					qerr = err
					return g.Input("x", dt, 1, 40)
				}
				y := g.Input("x", dt, 1, 256).QMatmul(w).Reshape(1, 40, 2)
				return y.Narrow(2, 0, 1).Reshape(1, 40).Silu().Mul(y.Narrow(2, 1, 1).Reshape(1, 40)).Cast(dtype.F32)
			}); err != nil || qerr != nil {
				return nil, errors.Join(err, qerr)
			}
			if err := addFused(fmt.Sprintf("quantized mat-vec with a rope pair epilogue %v %v", f, dt), func(g *graph.Graph) *graph.Tensor {
				w, err := g.QInput("w", f, 96, 256)
				if err != nil {
					qerr = err
					return g.Input("x", dt, 1, 96)
				}
				y := g.Input("x", dt, 1, 256).QMatmul(w).Reshape(1, 1, 6, 16)
				return y.RopeIThdHeads(g.Input("cos", dt, 1, 1, 8), g.Input("sin", dt, 1, 1, 8), 4).Cast(dtype.F32)
			}); err != nil || qerr != nil {
				return nil, errors.Join(err, qerr)
			}
		}
	}
	// One-row quantized products fused with the chain after them (a
	// quantized decode step's residual add, its LM head's cast), for every
	// format with the one-launch mat-vec (kernels.QMVFEntry).
	for _, f := range []quant.Type{quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0,
		quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			if _, ok := kernels.QMVFEntry(f, dt); !ok {
				return nil, fmt.Errorf("catalog: %v has no one-launch mat-vec for %v", f, dt)
			}
			var qerr error
			if err := addFused(fmt.Sprintf("fused quantized mat-vec %v %v", f, dt), func(g *graph.Graph) *graph.Tensor {
				w, err := g.QInput("w", f, 40, 256)
				if err != nil {
					qerr = err
					return g.Input("x", dt, 1, 40)
				}
				y := g.Input("x", dt, 1, 256).QMatmul(w)
				return y.Add(g.Input("r", dt, 1, 40)).Cast(dtype.F32)
			}); err != nil || qerr != nil {
				return nil, errors.Join(err, qerr)
			}
		}
	}
	// Dequantizations fused with the chain that reads their values (a
	// scale and a cast), for every block format and output dtype.
	for _, f := range []quant.Type{quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.Q8_1,
		quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q8_K} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			var qerr error
			if err := addFused(fmt.Sprintf("fused dequantization %v %v", f, dt), func(g *graph.Graph) *graph.Tensor {
				w, err := g.QInput("w", f, 4, 256)
				if err != nil {
					qerr = err
					return g.Input("x", dt, 4, 256)
				}
				return w.Dequantize(dt).Mul(g.Input("s", dt, 256)).Cast(dtype.F32)
			}); err != nil || qerr != nil {
				return nil, errors.Join(err, qerr)
			}
			// The byte-wise body too where the format has a word-load one.
			if e := out[len(out)-1]; kernels.DequantFusedWord(f, dt) {
				out = append(out, Entry{Label: e.Label + " byte-wise", Kernel: e.Kernel, Bytewise: true})
			}
		}
	}
	// A two-stage reduction (one long row) and the float composites.
	if err := add("sum f32 1×2^20 (two-stage)", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dtype.F32, 1, 1<<20).Sum(1) }, ir.OpSum); err != nil {
		return nil, err
	}
	for _, dt := range dtype.Floats {
		comps := []struct {
			label string
			build func(g *graph.Graph) *graph.Tensor
		}{
			{"softmax", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dt, 7, 37).Softmax(-1) }},
			{"log_softmax", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dt, 7, 37).LogSoftmax(-1) }},
			{"layer_norm", func(g *graph.Graph) *graph.Tensor {
				return g.Input("x", dt, 7, 37).LayerNorm(g.Input("w", dt, 37), g.Input("b", dt, 37), 1e-5)
			}},
			{"rms_norm", func(g *graph.Graph) *graph.Tensor { return g.Input("x", dt, 7, 37).RmsNorm(g.Input("w", dt, 37), 1e-6) }},
		}
		for _, c := range comps {
			if err := addFused(fmt.Sprintf("%s %v", c.label, dt), c.build); err != nil {
				return nil, err
			}
		}
	}
	// Dropout: the random mask computed inside the kernel that applies it
	// (whole Philox blocks per thread), and in a softmax's epilogue.
	if err := addFused("dropout f32", func(g *graph.Graph) *graph.Tensor {
		x := g.Input("x", dtype.F32, 1<<20)
		return x.Mul(g.Rand(dtype.F32, 1, 0, 1, 1<<20).Ge(graph.Scalar(0.1)).Cast(dtype.F32)).Affine(1/0.9, 0)
	}); err != nil {
		return nil, err
	}
	if err := addFused("softmax+dropout f16", func(g *graph.Graph) *graph.Tensor {
		s := g.Input("x", dtype.F16, 7, 37).Softmax(-1)
		return s.Mul(g.Rand(dtype.F16, 1, 0, 1, 7, 37).Ge(graph.Scalar(0.1)).Cast(dtype.F16))
	}); err != nil {
		return nil, err
	}
	for _, id := range []string{"W1", "W2", "W3", "W4", "W5", "W6", "W7", "W8"} {
		w, err := workloads.ByID(id)
		if err != nil {
			return nil, err
		}
		g, err := w.Build(workloads.Size{Elems: 1 << 28, Rows: 8192, Cols: 8192})
		if err != nil {
			return nil, err
		}
		p, err := g.Compile(graph.Options{})
		if err != nil {
			return nil, fmt.Errorf("catalog: %s: %w", id, err)
		}
		for i, s := range p.Plan().Steps {
			out = append(out, Entry{Label: fmt.Sprintf("%s fused (step %d)", id, i), Kernel: s.Kernel})
		}
	}
	// A conv with its epilogue: on the GPU's channels-last path (f16/bf16
	// on the vendor library) the epilogue runs in the output's transposes.
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16} {
		if err := addFused(fmt.Sprintf("conv + bias + relu %v (fused output transposes)", dt), func(g *graph.Graph) *graph.Tensor {
			x, w, b := g.Input("x", dt, 2, 8, 6, 6), g.Input("w", dt, 8, 8, 3, 3), g.Input("b", dt, 8, 1, 1)
			return graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}}).Add(b).Relu()
		}); err != nil {
			return nil, err
		}
	}
	// Matmul steps run the vendor BLAS where one loads, else the portable
	// GEMM: one source with every dtype and transpose pair, so one entry.
	if err := addFused("matmul (portable GEMM, every dtype)", func(g *graph.Graph) *graph.Tensor {
		return g.Input("a", dtype.F32, 5, 7).Matmul(g.Input("b", dtype.F32, 7, 3))
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// reduceOp applies a reduction over the last dim through the graph API.
func reduceOp(x *graph.Tensor, op ir.Op) *graph.Tensor {
	switch op {
	case ir.OpMax:
		return x.Max(false, -1)
	case ir.OpMin:
		return x.Min(false, -1)
	case ir.OpArgmax:
		return x.Argmax(-1, false)
	case ir.OpArgmin:
		return x.Argmin(-1, false)
	}
	return x.Sum(-1)
}

// unary applies a one-argument op through the graph API.
func unary(x *graph.Tensor, op ir.Op, p []float64) *graph.Tensor {
	switch op {
	case ir.OpAffine:
		return x.Affine(p[0], p[1])
	case ir.OpElu:
		return x.Elu(p[0])
	case ir.OpPowf:
		return x.Powf(p[0])
	}
	fns := map[ir.Op]func() *graph.Tensor{
		ir.OpExp: x.Exp, ir.OpLog: x.Log, ir.OpSin: x.Sin, ir.OpCos: x.Cos, ir.OpTanh: x.Tanh,
		ir.OpRecip: x.Recip, ir.OpSqrt: x.Sqrt, ir.OpCeil: x.Ceil, ir.OpFloor: x.Floor, ir.OpRound: x.Round,
		ir.OpErf: x.Erf, ir.OpGelu: x.Gelu, ir.OpGeluErf: x.GeluErf, ir.OpSilu: x.Silu, ir.OpSigmoid: x.Sigmoid,
		ir.OpNormcdf: x.Normcdf, ir.OpNeg: x.Neg, ir.OpSqr: x.Sqr, ir.OpAbs: x.Abs, ir.OpSign: x.Sign, ir.OpRelu: x.Relu,
	}
	return fns[op]()
}

// binary applies a two-argument op through the graph API.
func binary(a, b *graph.Tensor, op ir.Op) *graph.Tensor {
	fns := map[ir.Op]func(*graph.Tensor) *graph.Tensor{
		ir.OpAdd: a.Add, ir.OpSub: a.Sub, ir.OpMul: a.Mul, ir.OpDiv: a.Div, ir.OpMaximum: a.Maximum, ir.OpMinimum: a.Minimum,
		ir.OpEq: a.Eq, ir.OpNe: a.Ne, ir.OpLt: a.Lt, ir.OpLe: a.Le, ir.OpGt: a.Gt, ir.OpGe: a.Ge,
	}
	return fns[op](b)
}

// indexEntries adds one kernel per indexing op × value dtype × ids dtype,
// cat, slice_assign and argsort per dtype (both argsort paths), and cumsum
// per dtype (each of its kernels).
func indexEntries(add func(string, func(*graph.Graph) *graph.Tensor, ir.Op) error) error {
	for _, dt := range dtype.All {
		for _, idt := range ir.IDDTypes.List() {
			ops := []struct {
				op    ir.Op
				build func(g *graph.Graph) *graph.Tensor
			}{
				{ir.OpIndexSelect, func(g *graph.Graph) *graph.Tensor {
					return g.Input("x", dt, 13, 29).IndexSelect(g.Input("ids", idt, 7), 1)
				}},
				{ir.OpGather, func(g *graph.Graph) *graph.Tensor {
					return g.Input("x", dt, 13, 29).Gather(g.Input("ids", idt, 13, 5), 1)
				}},
				{ir.OpScatter, func(g *graph.Graph) *graph.Tensor {
					return g.Input("x", dt, 13, 29).Scatter(g.Input("ids", idt, 13, 5), g.Input("s", dt, 13, 5), 1)
				}},
				{ir.OpScatterAdd, func(g *graph.Graph) *graph.Tensor {
					return g.Input("x", dt, 13, 29).ScatterAdd(g.Input("ids", idt, 13, 5), g.Input("s", dt, 13, 5), 1)
				}},
				{ir.OpIndexAdd, func(g *graph.Graph) *graph.Tensor {
					return g.Input("x", dt, 13, 29).IndexAdd(g.Input("ids", idt, 5), g.Input("s", dt, 13, 5), 1)
				}},
			}
			for _, o := range ops {
				if err := add(fmt.Sprintf("%s %v ids %v", o.op, dt, idt), o.build, o.op); err != nil {
					return err
				}
			}
		}
		more := []struct {
			label string
			op    ir.Op
			build func(g *graph.Graph) *graph.Tensor
		}{
			{"cat", ir.OpCat, func(g *graph.Graph) *graph.Tensor {
				return graph.Cat(0, g.Input("a", dt, 3, 29), g.Input("b", dt, 5, 29))
			}},
			{"slice_assign", ir.OpSliceAssign, func(g *graph.Graph) *graph.Tensor {
				return g.Input("a", dt, 13, 29).SliceAssign(g.Input("b", dt, 13, 4), 1, 7)
			}},
			{"argsort short", ir.OpArgsort, func(g *graph.Graph) *graph.Tensor { return g.Input("x", dt, 9, 1000).Argsort(false) }},
			{"argsort long desc", ir.OpArgsort, func(g *graph.Graph) *graph.Tensor { return g.Input("x", dt, 2, 100000).Argsort(true) }},
			// cumsum: each of scan.hip's kernels (kernels.CumsumKernel).
			{"cumsum seq", ir.OpCumsum, func(g *graph.Graph) *graph.Tensor { return g.Input("x", dt, 37, 5).Cumsum(1) }},
			{"cumsum tile", ir.OpCumsum, func(g *graph.Graph) *graph.Tensor { return g.Input("x", dt, 9, 1000).Cumsum(1) }},
			{"cumsum rows", ir.OpCumsum, func(g *graph.Graph) *graph.Tensor { return g.Input("x", dt, 1024, 8192).Cumsum(1) }},
			{"cumsum lookback strided", ir.OpCumsum, func(g *graph.Graph) *graph.Tensor { return g.Input("x", dt, 100000, 3).Cumsum(0) }},
			// attention: a decode step over a cache (GQA, a window of the
			// cache's keys), and a prompt's causal attention on
			// transposed views.
			{"attention decode", ir.OpAttention, func(g *graph.Graph) *graph.Tensor {
				k := g.Input("k", dt, 2, 2, 512, 64).Narrow(2, 0, 300)
				v := g.Input("v", dt, 2, 2, 512, 64).Narrow(2, 0, 300)
				return graph.CausalAttention(g.Input("q", dt, 2, 8, 1, 64), k, v, g.Input("start", dtype.U32, 2), 0.125)
			}},
			// A decode step's attention right behind the scatter of its
			// query's position into the cache (plan.Kernel.NewKV: NVIDIA's
			// warp form then loads before it waits).
			{"attention decode after its scatter", ir.OpAttention, func(g *graph.Graph) *graph.Tensor {
				return DecodeAttention(g, dt, 2, 8, 2, 512, 64, 300)
			}},
			{"attention many splits", ir.OpAttention, func(g *graph.Graph) *graph.Tensor {
				k, v := g.Input("k", dt, 1, 1, 5000, 8), g.Input("v", dt, 1, 1, 5000, 8)
				return graph.CausalAttention(g.Input("q", dt, 1, 16, 1, 8), k, v, g.Input("start", dtype.U32, 1), 0.3)
			}},
			{"attention prompt", ir.OpAttention, func(g *graph.Graph) *graph.Tensor {
				q := g.Input("q", dt, 1, 37, 4, 24).Transpose(1, 2)
				k := g.Input("k", dt, 1, 37, 2, 24).Transpose(1, 2)
				v := g.Input("v", dt, 1, 37, 2, 40).Transpose(1, 2)
				return graph.CausalAttention(q, k, v, g.Input("start", dtype.U32, 1), 0.2)
			}},
		}
		for _, m := range more {
			if !m.op.Info().In.Has(dt) {
				continue // e.g. cumsum of f8e4m3: the builder refuses it
			}
			if err := add(fmt.Sprintf("%s %v", m.label, dt), m.build, m.op); err != nil {
				return err
			}
		}
	}
	return nil
}

// Render returns the source of an entry for a target: generated for
// elementwise kernels, the kernels package's source for indexing ops and
// window ops (pools, upsampling; one
// translation unit holding every launch of the step; name is its first
// entry point).
func Render(e Entry, t codegen.Target) (name, code string, err error) {
	if e.Kernel.IsMatmul() {
		return kernels.GemmEntries()[0], kernels.GemmSource(t), nil
	}
	if k := e.Kernel; k.IsFusedMatmul() {
		// The skinny product with the prologue and epilogue inside, in
		// its aligned variant (exec/rocm/fusedmm.go).
		parts, err := plan.SplitFused(k, 1<<30)
		if err != nil {
			return "", "", err
		}
		g, err := plan.Gemm(parts.Core)
		if err != nil {
			return "", "", err
		}
		l, ok := kernels.PlanGemv(g.DType, g.Call, true)
		if !ok {
			return "", "", fmt.Errorf("catalog: %s: not a skinny product", k.Name)
		}
		return kernels.GemvFused(t, l.Name, k, parts)
	}
	if k := e.Kernel; k.IsFusedQMatmul() {
		// The one-row mat-vec with the epilogue inside
		// (exec/rocm/fusedqmm.go).
		parts, err := plan.SplitFused(k, 1<<30)
		if err != nil {
			return "", "", err
		}
		n := parts.Core.Instrs[0].Node
		f, _ := n.QuantFormat()
		entry, ok := kernels.QMVFEntry(f, n.DType)
		if !ok {
			return "", "", fmt.Errorf("catalog: %s: no one-row mat-vec for %v", k.Name, f)
		}
		return kernels.QMVFFused(t, entry, k, parts)
	}
	if k := e.Kernel; k.IsFusedDequant() {
		// The dequantization with the epilogue inside
		// (exec/rocm/fusedqmm.go).
		parts, err := plan.SplitFused(k, 1<<30)
		if err != nil {
			return "", "", err
		}
		// The body the GPU runs: the word-load one where the format has
		// it (aligned buffers), else the byte-wise one.
		n := parts.Core.Instrs[0].Node
		f, _ := n.QuantFormat()
		return kernels.DequantFused(t, k, parts, kernels.DequantFusedWord(f, n.DType) && n.Numel()%256 == 0 && !e.Bytewise)
	}
	if k := e.Kernel; k.IsFusedConv() {
		// The output transposes with the epilogue inside
		// (exec/rocm/conv.go's channels-last path); name is the first
		// entry.
		parts, err := plan.SplitFused(k, 1<<30)
		if err != nil {
			return "", "", err
		}
		names, code, err := kernels.TransposeFused(t, k, parts)
		if err != nil {
			return "", "", err
		}
		return names[0], code, nil
	}
	if k := e.Kernel; kernels.Handles(k) {
		ls, _, err := kernels.Plan(k, t)
		if err != nil {
			return "", "", err
		}
		if len(ls) == 0 {
			return "", "", fmt.Errorf("catalog: %s: no launches", k.Name)
		}
		return ls[0].Name, ls[0].Code, nil
	}
	src, err := codegen.Kernel(e.Kernel, t)
	if err != nil {
		return "", "", err
	}
	return src.Name, src.Code, nil
}

// windowEntries adds the pool and upsampling kernels: max and avg pools
// (3×3 stride 2 pad 1; a ceil-mode window without the padding counted) and
// nearest upsampling of every pool dtype, bilinear upsampling of every
// float dtype (align_corners off and on).
func windowEntries(add func(string, func(*graph.Graph) *graph.Tensor, ir.Op) error) error {
	for _, dt := range ir.PoolDTypes.List() {
		ops := []struct {
			label string
			op    ir.Op
			build func(g *graph.Graph) *graph.Tensor
		}{
			{"max_pool2d 3x3/2 pad 1", ir.OpMaxPool, func(g *graph.Graph) *graph.Tensor {
				return g.Input("x", dt, 2, 3, 17, 19).MaxPool2d(3, 3, graph.PoolStride(2), graph.PoolPadding(1))
			}},
			{"avg_pool2d 3x2/2 ceil, pad excluded", ir.OpAvgPool, func(g *graph.Graph) *graph.Tensor {
				return g.Input("x", dt, 2, 3, 17, 19).AvgPool2d(3, 2, graph.PoolStride(2), graph.PoolPadding(1), graph.CeilMode(true), graph.CountIncludePad(false))
			}},
			{"upsample_nearest2d ×2", ir.OpUpsampleNearest, func(g *graph.Graph) *graph.Tensor {
				return g.Input("x", dt, 2, 3, 17, 19).UpsampleNearest2dScale(2, 2)
			}},
		}
		if dt.IsFloat() {
			for _, ac := range []bool{false, true} {
				ops = append(ops, struct {
					label string
					op    ir.Op
					build func(g *graph.Graph) *graph.Tensor
				}{fmt.Sprintf("upsample_bilinear2d ×2 align_corners=%v", ac), ir.OpUpsampleBilinear, func(g *graph.Graph) *graph.Tensor {
					return g.Input("x", dt, 2, 3, 17, 19).UpsampleBilinear2d(34, 38, ac)
				}})
			}
		}
		for _, o := range ops {
			if err := add(fmt.Sprintf("%s %v", o.label, dt), o.build, o.op); err != nil {
				return err
			}
		}
	}
	return nil
}

// DecodeAttention builds a decode step's attention as model's decode graph
// does: the new queries, keys and values as views of one [B, 1, H + 2·KV,
// D] input "y" (the q/k/v product's output), the keys and values
// scattered at each sequence's position ("pos", u32 [B]) into the cache
// ("cache", [2, B, KV, S, D], the output "cache.out"), and the attention
// of the queries over the cache's first window keys. It returns the
// attention's output [B, H, 1, D].
func DecodeAttention(g *graph.Graph, dt dtype.DType, b, h, kv, s, d, window int) *graph.Tensor {
	y := g.Input("y", dt, b, 1, h+2*kv, d)
	pos := g.Input("pos", dtype.U32, b)
	q := y.Narrow(2, 0, h).Transpose(1, 2)
	nkv := y.Narrow(2, h, 2*kv).Reshape(b, 1, 2, kv, d).Permute(2, 0, 3, 1, 4)
	at := pos.Reshape(1, b, 1, 1, 1).BroadcastTo(2, b, kv, 1, d)
	c := g.Input("cache", dt, 2, b, kv, s, d).Scatter(at, nkv, 3)
	g.Output("cache.out", c)
	k := c.Narrow(0, 0, 1).Squeeze(0).Narrow(2, 0, window)
	v := c.Narrow(0, 1, 1).Squeeze(0).Narrow(2, 0, window)
	return graph.CausalAttention(q, k, v, pos, 1/math.Sqrt(float64(d)))
}

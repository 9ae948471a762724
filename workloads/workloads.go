package workloads

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/quant"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// Size gives the problem size: Elems for the flat workloads (W1, W2), Rows ×
// Cols for the row workloads (W3–W8).
type Size struct {
	Elems      int
	Rows, Cols int
	// GemmN is the size of the W9 GEMMs (n × n × n).
	GemmN int
	// Conv is the size of the W12 convolutions.
	Conv ConvSize
}

// Workload is one benchmark graph.
type Workload struct {
	ID    string
	Desc  string
	Build func(sz Size) (*graph.Graph, error)
	// Skip, if set, says why the workload cannot run yet.
	Skip string
	// Flops, if set, is the floating-point work of one run: the dense
	// workloads report FLOP/s rather than bytes moved.
	Flops func(sz Size) float64
}

// All lists W1–W8 in order, then W-cumsum.
var All = []Workload{
	{ID: "W1", Desc: "x:f16 → cast f32 → silu → affine(×2, +1) → where(y > 0, v, −v)", Build: w1},
	{ID: "W2", Desc: "a = cast(x:f16)·0.5 + 0.25; g = gelu(a); s = sigmoid(y); where(z > 0, g·s + z, exp(−|g|))", Build: w2},
	{ID: "W3", Desc: "softmax(x · 0.125) over the last dim", Build: w3},
	{ID: "W4", Desc: "layer_norm(x; w, b; eps 1e-5) over the last dim", Build: w4},
	{ID: "W5", Desc: "rms_norm(x; w; eps 1e-6) over the last dim, written from primitives: x·rsqrt(mean(x²)+eps)·w", Build: w5},
	{ID: "W6", Desc: "gelu(x + bias[C]), bias broadcast over rows", Build: w6},
	{ID: "W7", Desc: "sum over the last dim", Build: w7},
	{ID: "W8", Desc: "argsort ascending over the last dim, 8192 × 1024 (a fixed shape: -rows/-cols do not apply)", Build: w8},
	{ID: "W-cumsum", Desc: "cumsum (inclusive scan) of f32 over the last dim, Rows × Cols (8192 × 8192 on a GPU)", Build: wCumsum},
}

// ByID finds a workload.
func ByID(id string) (Workload, error) {
	for _, w := range append(append(append(All[:len(All):len(All)], Dense...), Pools...), Conv...) {
		if w.ID == id {
			return w, nil
		}
	}
	return Workload{}, fmt.Errorf("workloads: unknown workload %q", id)
}

func w1(sz Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F16, sz.Elems)
	y := g.Input("y", dtype.F32, sz.Elems)
	a := x.Cast(dtype.F32).Silu().Affine(2, 1)
	g.Output("out", graph.Where(y.Gt(graph.Scalar(0)), a, a.Neg()))
	return g, g.Err()
}

func w2(sz Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F16, sz.Elems)
	y := g.Input("y", dtype.F32, sz.Elems)
	z := g.Input("z", dtype.F32, sz.Elems)
	a := x.Cast(dtype.F32).Affine(0.5, 0.25)
	gl := a.Gelu()
	s := y.Sigmoid()
	g.Output("out", graph.Where(z.Gt(graph.Scalar(0)), gl.Mul(s).Add(z), gl.Abs().Neg().Exp()))
	return g, g.Err()
}

func w6(sz Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, sz.Rows, sz.Cols)
	b := g.Input("bias", dtype.F32, sz.Cols)
	g.Output("out", x.Add(b).Gelu())
	return g, g.Err()
}

func w3(sz Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, sz.Rows, sz.Cols)
	g.Output("out", x.Affine(0.125, 0).Softmax(-1))
	return g, g.Err()
}

func w4(sz Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, sz.Rows, sz.Cols)
	w := g.Input("w", dtype.F32, sz.Cols)
	b := g.Input("b", dtype.F32, sz.Cols)
	g.Output("out", x.LayerNorm(w, b, 1e-5))
	return g, g.Err()
}

// w5 is rms_norm written from primitives (the composite the issue asks to
// compile to one kernel), not the RmsNorm method.
func w5(sz Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, sz.Rows, sz.Cols)
	w := g.Input("w", dtype.F32, sz.Cols)
	inv := x.Mul(x).Mean(true, -1).Add(graph.Scalar(1e-6)).Sqrt().Recip()
	g.Output("out", x.Mul(inv).Mul(w))
	return g, g.Err()
}

func w7(sz Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, sz.Rows, sz.Cols)
	g.Output("out", x.Sum(-1))
	return g, g.Err()
}

// W8 sorts rows of 1024: its shape is part of the workload's definition.
const w8Rows, w8Cols = 8192, 1024

func w8(Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, w8Rows, w8Cols)
	g.Output("out", x.Argsort(false))
	return g, g.Err()
}

// wCumsum is a scan along the last dim: one read and one write per
// element, so its figure of merit is the copy bandwidth it reaches.
func wCumsum(sz Size) (*graph.Graph, error) {
	g := graph.New()
	g.Output("out", g.Input("x", dtype.F32, sz.Rows, sz.Cols).Cumsum(-1))
	return g, g.Err()
}

// Inputs draws fresh random inputs for every input of g: normal-ish values
// in (−4, 4), never zero; except that a u8 input named "wq_<format>" holds
// such values quantized to that GGML format (rows of its raw shape), and an input named "mask" of square
// trailing dims is a causal attention mask (0 on and below the diagonal,
// −∞ above), and a u32 input named "start" (an attention's offsets)
// holds 2^31: past every key, so that every key is seen; one named
// "start_<n>" holds n (keys 0…n visible to the first query).
func Inputs(g *graph.Graph, seed uint64) (map[string]*tensor.Tensor, error) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	in := map[string]*tensor.Tensor{}
	for _, n := range g.IR().Inputs() {
		if f, ok := quantInput(n); ok {
			t, err := quantizedInput(r, f, n.Shape)
			if err != nil {
				return nil, fmt.Errorf("workloads: input %q: %w", n.Name, err)
			}
			in[n.Name] = t
			continue
		}
		vals := make([]float32, n.Numel())
		if v, ok := startValue(n.Name); ok && n.DType == dtype.U32 {
			for i := range vals {
				vals[i] = v
			}
		} else if n.Name == "mask" && len(n.Shape) >= 2 && n.Shape[len(n.Shape)-1] == n.Shape[len(n.Shape)-2] {
			causalMask(vals, n.Shape[len(n.Shape)-1])
		} else {
			for i := range vals {
				v := float32(r.NormFloat64())
				if v == 0 {
					v = 0.5
				}
				vals[i] = v
			}
		}
		t, err := tensor.FromFloat32s(n.DType, vals, n.Shape...)
		if err != nil {
			return nil, err
		}
		in[n.Name] = t
	}
	return in, nil
}

// startValue is the value of an attention's offsets input named name
// ("start": 2^31, "start_<n>": n; see Inputs).
func startValue(name string) (float32, bool) {
	if name == "start" {
		return 1 << 31, true
	}
	if n, err := strconv.Atoi(strings.TrimPrefix(name, "start_")); err == nil && strings.HasPrefix(name, "start_") && n >= 0 {
		return float32(n), true
	}
	return 0, false
}

// Bytes is the minimum traffic of one run: every input read once and every
// output written once.
func Bytes(g *graph.Graph) int {
	b := 0
	for _, n := range g.IR().Inputs() {
		b += n.Numel() * n.DType.Size()
	}
	for _, o := range g.IR().Outputs {
		b += o.Node.Numel() * o.Node.DType.Size()
	}
	return b
}

// causalMask fills square s×s matrices (repeated) with 0 on and below the
// diagonal and −∞ above it.
func causalMask(vals []float32, s int) {
	for i := range vals {
		r, c := i/s%s, i%s
		if c > r {
			vals[i] = float32(math.Inf(-1))
		} else {
			vals[i] = 0
		}
	}
}

// quantInput reports whether n is a quantized weight input ("wq_<format>").
func quantInput(n *ir.Node) (quant.Type, bool) {
	name, ok := strings.CutPrefix(n.Name, "wq_")
	if !ok || n.DType != dtype.U8 || len(n.Shape) < 1 {
		return 0, false
	}
	f, err := quant.ParseType(name)
	return f, err == nil
}

// quantizedInput quantizes normal values into rows of raw shape shape,
// rows in parallel.
func quantizedInput(r *rand.Rand, f quant.Type, shape []int) (*tensor.Tensor, error) {
	tr, _ := f.Traits()
	rb := shape[len(shape)-1]
	if tr.Size == 0 || rb%tr.Size != 0 {
		return nil, fmt.Errorf("%d bytes a row is not whole %v blocks", rb, f)
	}
	k := rb / tr.Size * tr.Block
	rows := ir.Numel(shape) / rb
	raw := make([]byte, rows*rb)
	seeds := make([]uint64, rows)
	for i := range seeds {
		seeds[i] = r.Uint64()
	}
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for r0 := 0; r0 < rows; r0 += 256 {
		r1 := min(rows, r0+256)
		g.Go(func() error {
			vals := make([]float32, k)
			for row := r0; row < r1; row++ {
				rr := rand.New(rand.NewPCG(seeds[row], 1))
				for i := range vals {
					vals[i] = float32(rr.NormFloat64())
				}
				if err := quant.Quantize(f, vals, raw[row*rb:(row+1)*rb]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return tensor.New(raw, shape...)
}

package fuzz

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

var (
	nGraphs  = flag.Int("loom.graphs", 0, "graphs of TestDifferential (default 10,000, or LOOM_RANDOM_GRAPHS)")
	diffSeed = flag.Uint64("loom.seed", 1, "base seed of TestDifferential (graph i uses seed+i)")
)

// dnode is one value of a differential graph: how it was made (for the
// reference and the reproducer) and its tensor.
type dnode struct {
	t    *graph.Tensor
	op   string
	args []int
	desc string
}

type dgraph struct {
	r     *rand.Rand
	g     *graph.Graph
	S     []int
	nodes []dnode
	in    map[string]*tensor.Tensor
}

func (d *dgraph) add(t *graph.Tensor, op string, args []int, desc string) {
	if t.Err() != nil {
		panic(fmt.Sprintf("generator built an invalid op %s: %v", desc, t.Err()))
	}
	d.nodes = append(d.nodes, dnode{t, op, args, fmt.Sprintf("v%d = %s -> %v%v", len(d.nodes), desc, t.DType(), t.Shape())})
}

// input declares an input read as S through one view kind: plain,
// transposed (strided), narrowed (offset) or broadcast (stride 0). Its
// node's reference value is the input's values read through that view.
func (d *dgraph) input() {
	r, name := d.r, fmt.Sprintf("in%d", len(d.in))
	dt := dtype.All[r.IntN(len(dtype.All))]
	rank := len(d.S)
	decl := slices.Clone(d.S)
	var view func(*graph.Tensor) *graph.Tensor
	kind := "plain"
	switch k := r.IntN(4); {
	case k == 1 && rank >= 2:
		kind = "transposed"
		decl[0], decl[rank-1] = decl[rank-1], decl[0]
		view = func(x *graph.Tensor) *graph.Tensor { return x.Transpose(0, rank-1) }
	case k == 2 && rank >= 1 && !slices.Contains(d.S, 0):
		kind = "narrowed"
		decl[rank-1] += 2
		view = func(x *graph.Tensor) *graph.Tensor { return x.Narrow(rank-1, 1, d.S[rank-1]) }
	case k == 3 && rank >= 1:
		kind = "broadcast"
		decl[0] = 1
		view = func(x *graph.Tensor) *graph.Tensor { return x.BroadcastTo(d.S...) }
	}
	vals := make([]float64, tensor.Numel(decl))
	for i := range vals {
		switch {
		case dt == dtype.U8 || dt == dtype.U32:
			vals[i] = float64(r.IntN(9))
		case dt == dtype.I64:
			vals[i] = float64(r.IntN(13) - 6)
		case r.IntN(4) == 0:
			vals[i] = float64(r.IntN(7) - 3)
		default:
			vals[i] = r.NormFloat64() * 2
		}
	}
	ht, err := tensor.FromFloat64s(dt, vals, decl...)
	if err != nil {
		panic(err)
	}
	d.in[name] = ht
	x := d.g.Input(name, dt, decl...)
	if view != nil {
		x = view(x)
	}
	d.add(x, "input", nil, fmt.Sprintf("input %s %v%v %s", name, dt, decl, kind))
}

var (
	diffUnary  = []string{"neg", "abs", "sqr", "sqrt", "exp", "tanh", "relu"}
	diffBinary = []string{"add", "sub", "mul", "div", "maximum", "minimum", "gt"}
)

func (d *dgraph) step() {
	r := d.r
	i := r.IntN(len(d.nodes))
	x := d.nodes[i].t
	switch k := r.IntN(10); {
	case k < 3:
		op := diffUnary[r.IntN(len(diffUnary))]
		if !x.DType().IsFloat() && (op == "sqrt" || op == "exp" || op == "tanh" || x.DType() != dtype.I64) {
			return
		}
		f := map[string]func() *graph.Tensor{"neg": x.Neg, "abs": x.Abs, "sqr": x.Sqr, "sqrt": x.Sqrt, "exp": x.Exp, "tanh": x.Tanh, "relu": x.Relu}[op]
		d.add(f(), op, []int{i}, fmt.Sprintf("%s(v%d)", op, i))
	case k < 6:
		j := r.IntN(len(d.nodes))
		if d.nodes[j].t.DType() != x.DType() {
			return
		}
		op := diffBinary[r.IntN(len(diffBinary))]
		y := d.nodes[j].t
		f := map[string]func(*graph.Tensor) *graph.Tensor{"add": x.Add, "sub": x.Sub, "mul": x.Mul, "div": x.Div, "maximum": x.Maximum, "minimum": x.Minimum, "gt": x.Gt}[op]
		d.add(f(y), op, []int{i, j}, fmt.Sprintf("%s(v%d, v%d)", op, i, j))
	case k < 8:
		dt := dtype.All[r.IntN(len(dtype.All))]
		d.add(x.Cast(dt), "cast", []int{i}, fmt.Sprintf("cast(v%d, %v)", i, dt))
	default:
		s := x.Shape()
		if len(s) == 0 || !x.DType().IsFloat() || s[len(s)-1] > 8 {
			return
		}
		d.add(x.SumKeepDim(len(s)-1), "sum", []int{i}, fmt.Sprintf("sum_keepdim(v%d, %d)", i, len(s)-1))
	}
}

func newDGraph(seed uint64) *dgraph {
	r := rand.New(rand.NewPCG(seed, 0xd1ff))
	S := make([]int, r.IntN(4))
	for i := range S {
		S[i] = []int{0, 1, 2, 3, 4}[r.IntN(5)]
		if S[i] == 0 && r.IntN(3) != 0 {
			S[i] = 2
		}
	}
	d := &dgraph{r: r, g: graph.New(), S: S, in: map[string]*tensor.Tensor{}}
	for range 1 + r.IntN(3) {
		d.input()
	}
	for range 3 + r.IntN(8) {
		d.step()
	}
	return d
}

func (d *dgraph) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "base shape %v\n", d.S)
	for _, n := range d.nodes {
		b.WriteString("  " + n.desc + "\n")
	}
	for name, t := range d.in {
		fmt.Fprintf(&b, "  %s = %v\n", name, t.Float64s())
	}
	return b.String()
}

// at reads v (shape vs) at the coordinates c of a larger shape it
// broadcasts to.
func at(v *tensor.Tensor, c []int) float64 {
	s, k := v.Shape(), 0
	off := len(c) - len(s)
	for i, n := range s {
		x := c[off+i]
		if n == 1 {
			x = 0
		}
		k = k*n + x
	}
	return v.Float64(k)
}

// store rounds an exact result to dt as Loom stores it: floats to nearest,
// integers wrapped.
func store(dt dtype.DType, v float64) float64 {
	switch dt {
	case dtype.U8:
		return float64(uint8(int64(v)))
	case dtype.U32:
		return float64(uint32(int64(v)))
	case dtype.I64:
		return v
	}
	t, _ := tensor.FromFloat64s(dt, []float64{v}, 1)
	return t.Float64(0)
}

// wrapInt is an exact integer result (int64 arithmetic wraps like Loom's)
// wrapped to dt. Integer adds, subs and muls take it: a float64 product of
// two large u32 values loses the low bits that the wrap keeps.
func wrapInt(dt dtype.DType, v int64) float64 {
	switch dt {
	case dtype.U8:
		return float64(uint8(v))
	case dtype.U32:
		return float64(uint32(v))
	}
	return float64(v)
}

func cast(from, to dtype.DType, v float64) float64 {
	if to.IsFloat() {
		return store(to, v)
	}
	if from.IsFloat() { // truncate toward zero, saturate, NaN → 0
		lo, hi := map[dtype.DType][2]int64{dtype.U8: {0, 255}, dtype.U32: {0, math.MaxUint32}, dtype.I64: {math.MinInt64, math.MaxInt64}}[to][0], map[dtype.DType][2]int64{dtype.U8: {0, 255}, dtype.U32: {0, math.MaxUint32}, dtype.I64: {math.MinInt64, math.MaxInt64}}[to][1]
		if math.IsNaN(v) {
			return 0
		}
		return float64(tensor.SatInt(math.Trunc(v), lo, hi))
	}
	return store(to, v)
}

func eps(dt dtype.DType) float64 {
	return map[dtype.DType]float64{dtype.F32: 0x1p-23, dtype.F64: 0x1p-52, dtype.F16: 0x1p-10, dtype.BF16: 0x1p-7, dtype.F8E4M3: 0x1p-3}[dt]
}

// check compares node k's value got at flat index e with its reference
// computed from the engine's values of its arguments (vals).
func (d *dgraph) check(k int, vals []*tensor.Tensor, e int, c []int) error {
	n, got := d.nodes[k], vals[k].Float64(e)
	dt := n.t.DType()
	var ref, tol float64
	arg := func(i int) float64 { return at(vals[n.args[i]], c) }
	switch n.op {
	case "input":
		return nil // the views are checked by the inputs' values: see below
	case "neg":
		ref = store(dt, -arg(0))
	case "abs":
		ref = store(dt, math.Abs(arg(0)))
	case "relu":
		ref = store(dt, math.Max(arg(0), 0))
		if math.IsNaN(arg(0)) {
			ref = math.NaN()
		}
	case "sqr":
		ref = store(dt, arg(0)*arg(0))
		if !dt.IsFloat() {
			ref = wrapInt(dt, int64(arg(0))*int64(arg(0)))
		}
	case "sqrt":
		ref = store(dt, math.Sqrt(arg(0)))
	case "exp", "tanh":
		ref = store(dt, map[string]func(float64) float64{"exp": math.Exp, "tanh": math.Tanh}[n.op](arg(0)))
		tol = 4 * eps(dt) * math.Abs(ref)
	case "add", "sub", "mul", "div", "maximum", "minimum", "gt":
		a, b := arg(0), arg(1)
		switch n.op {
		case "add":
			ref = a + b
		case "sub":
			ref = a - b
		case "mul":
			ref = a * b
		case "div":
			if !dt.IsFloat() && b == 0 {
				ref = 0
			} else if !dt.IsFloat() {
				ref = math.Trunc(a / b)
			} else {
				ref = a / b
			}
		case "maximum", "minimum":
			ref = map[string]func(float64, float64) float64{"maximum": math.Max, "minimum": math.Min}[n.op](a, b)
		case "gt":
			ref = 0
			if a > b {
				ref = 1
			}
		}
		ref = store(dt, ref)
		if !dt.IsFloat() && (n.op == "add" || n.op == "sub" || n.op == "mul") {
			ia, ib := int64(a), int64(b)
			ref = wrapInt(dt, map[string]int64{"add": ia + ib, "sub": ia - ib, "mul": ia * ib}[n.op])
		}
	case "cast":
		ref = cast(d.nodes[n.args[0]].t.DType(), dt, arg(0))
	case "sum":
		x, s := vals[n.args[0]], d.nodes[n.args[0]].t.Shape()
		cc := slices.Clone(c)
		var sum, abs float64
		for j := range s[len(s)-1] {
			cc[len(cc)-1] = j
			sum += at(x, cc)
			abs += math.Abs(at(x, cc))
		}
		ref = store(dt, sum)
		tol = eps(dt)*math.Abs(ref) + float64(s[len(s)-1])*max(eps(dt), 0x1p-23)*abs
	}
	if got == ref || math.IsNaN(got) && math.IsNaN(ref) || math.Abs(got-ref) <= tol {
		return nil
	}
	return fmt.Errorf("v%d (%s) element %d %v: got %v, float64 reference %v (tolerance %g)", k, n.desc, e, c, got, ref, tol)
}

func runDiff(seed uint64) (err error) {
	d := newDGraph(seed)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
		if err != nil {
			err = fmt.Errorf("seed %d: %w\ngraph:\n%s", seed, err, d)
		}
	}()
	// The probe: every value an output, unfused.
	for k, n := range d.nodes {
		d.g.Output(fmt.Sprintf("v%d", k), n.t)
	}
	pu, err := d.g.Compile(graph.Options{NoFusion: true, Check: true})
	if err != nil {
		return err
	}
	ctx := context.Background()
	outU, err := pu.Run(ctx, cpu.New().Poison(0x5A), d.in)
	if err != nil {
		return fmt.Errorf("unfused run: %w", err)
	}
	vals := make([]*tensor.Tensor, len(d.nodes))
	for k := range d.nodes {
		vals[k] = outU[fmt.Sprintf("v%d", k)]
	}
	c := make([]int, len(d.S))
	for k := range d.nodes {
		for e := range vals[k].Numel() {
			rem := e
			for i := len(c) - 1; i >= 0; i-- {
				n := vals[k].Shape()[i]
				c[i] = rem % max(n, 1)
				rem /= max(n, 1)
			}
			if err := d.check(k, vals, e, c); err != nil {
				return err
			}
		}
	}
	// Fused, with the last value and one other as the only outputs (so
	// everything else fuses), must match the probe bit for bit.
	outs := []int{len(d.nodes) - 1}
	if o := int(seed % uint64(len(d.nodes))); o != outs[0] {
		outs = append(outs, o)
	}
	d2 := newDGraph(seed) // the same graph (a Graph's outputs cannot be removed)
	for _, k := range outs {
		d2.g.Output(fmt.Sprintf("f%d", k), d2.nodes[k].t)
	}
	pf, err := d2.g.Compile(graph.Options{Check: true})
	if err != nil {
		return fmt.Errorf("fused compile: %w", err)
	}
	outF, err := pf.Run(ctx, cpu.New().Poison(0xA5), d.in)
	if err != nil {
		return fmt.Errorf("fused run: %w", err)
	}
	for _, k := range outs {
		a, b := outF[fmt.Sprintf("f%d", k)].Bytes(), vals[k].Bytes()
		if string(a) != string(b) {
			return fmt.Errorf("v%d: fused %v, unfused %v", k, outF[fmt.Sprintf("f%d", k)].Float64s(), vals[k].Float64s())
		}
	}
	return nil
}

func graphCount() int {
	if *nGraphs > 0 {
		return *nGraphs
	}
	if n, err := strconv.Atoi(os.Getenv("LOOM_RANDOM_GRAPHS")); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 1000
	}
	return 10000
}

// TestDifferential builds 10,000 tiny random graphs (-loom.graphs or
// LOOM_RANDOM_GRAPHS for more) over every dtype, with plain, transposed,
// offset, broadcast and empty inputs, and checks every value of the
// unfused run against a float64 reference computed from the engine's values
// of its arguments (exact ops bit for bit after rounding to the dtype; exp
// and tanh within 4 ulps; sums within n·eps·Σ|x|), then the fused program
// against the unfused values bit for bit. A failure prints the seed and the
// graph; -loom.seed=SEED -loom.graphs=1 reruns it.
func TestDifferential(t *testing.T) {
	n, base := graphCount(), *diffSeed
	start, failed := time.Now(), 0
	for i := range n {
		if err := runDiff(base + uint64(i)); err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("%v", err)
			}
		}
	}
	t.Logf("%d graphs from seed %d, %d failed, in %v", n, base, failed, time.Since(start).Round(time.Millisecond))
}

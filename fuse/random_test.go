package fuse_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
)

var (
	long       = flag.Bool("long", false, "run many more random graphs")
	randomSeed = flag.Uint64("fuse.seed", 20261121, "base seed of the random graph tests (graph i uses seed+i)")
	randomOne  = flag.Int64("fuse.one", -1, "run only the random graph of this seed, verbosely")
)

// genOpts says which constructs a random graph may use.
type genOpts struct {
	// reshapes lets the generator reshape, unsqueeze and squeeze computed
	// values (identity views of an intermediate).
	reshapes bool
	// reductions lets it reduce values (sum, max, min, argmax, argmin and
	// the mean, var, softmax and log_softmax composites), which fusion
	// turns into row kernels.
	reductions bool
}

// gen builds one random elementwise graph over a base shape S: every value
// in the pool has a shape that broadcasts to S.
type gen struct {
	r    *rand.Rand
	g    *graph.Graph
	S    []int
	pool []*graph.Tensor
	opts genOpts
	nIn  int
	log  []string // what was built, for failure messages
	// narrowed: some value of the graph is a Narrow view (see reduction).
	narrowed bool
}

var (
	unaryFloatOps  = []string{"exp", "log", "sin", "cos", "tanh", "recip", "sqrt", "ceil", "floor", "round", "erf", "gelu", "gelu_erf", "silu", "sigmoid", "normcdf", "elu", "powf"}
	unarySignedOps = []string{"neg", "sqr", "abs", "sign", "relu"}
	binaryOps      = []string{"add", "sub", "mul", "div", "maximum", "minimum"}
	compareOps     = []string{"eq", "ne", "lt", "le", "gt", "ge"}
	scalars        = []float64{1, 2, 0.5, -1, 3, -0.25, 7, 0}
	affines        = [][2]float64{{1, 0}, {2, 0}, {0.5, 0}, {2, 1}, {-1, 0.5}, {3, -2}, {0.25, 4}}
)

func (g *gen) note(format string, a ...any) { g.log = append(g.log, fmt.Sprintf(format, a...)) }

func (g *gen) dtype() dtype.DType { return dtype.All[g.r.IntN(len(dtype.All))] }

func (g *gen) floatDType() dtype.DType { return dtype.Floats[g.r.IntN(len(dtype.Floats))] }

// compatible reports whether shape broadcasts to S.
func (g *gen) compatible(shape []int) bool {
	if len(shape) > len(g.S) {
		return false
	}
	off := len(g.S) - len(shape)
	for i, d := range shape {
		if d != 1 && d != g.S[off+i] {
			return false
		}
	}
	return true
}

// smallShape is S with some leading dims dropped and some dims set to 1.
func (g *gen) smallShape() []int {
	s := slices.Clone(g.S[g.r.IntN(len(g.S)+1):])
	for i := range s {
		if g.r.IntN(3) == 0 {
			s[i] = 1
		}
	}
	return s
}

func (g *gen) add(t *graph.Tensor, what string) *graph.Tensor {
	if t.Err() != nil {
		panic(fmt.Sprintf("generator built an invalid op (%s): %v", what, t.Err()))
	}
	if t.Node() != nil && !g.compatible(t.Shape()) {
		panic(fmt.Sprintf("generator built %v%v (%s), which does not broadcast to %v", t.DType(), t.Shape(), what, g.S))
	}
	g.pool = append(g.pool, t)
	return t
}

// input declares an input and adds a view of it to the pool: the whole
// input, a broadcastable smaller one, a transposed one or a narrowed one.
func (g *gen) input() {
	name := fmt.Sprintf("in%d", g.nIn)
	g.nIn++
	dt := g.dtype()
	rank := len(g.S)
	switch mode := g.r.IntN(5); {
	case mode == 1:
		s := g.smallShape()
		g.note("%s = input %v%v (broadcast)", name, dt, s)
		g.add(g.g.Input(name, dt, s...), name)
	case mode == 2 && rank >= 2:
		i := g.r.IntN(rank)
		j := (i + 1 + g.r.IntN(rank-1)) % rank
		s := slices.Clone(g.S)
		s[i], s[j] = s[j], s[i]
		g.note("%s = input %v%v, transposed %d↔%d", name, dt, s, i, j)
		g.add(g.g.Input(name, dt, s...).Transpose(i, j), name)
	case mode == 3 && rank >= 1:
		d := g.r.IntN(rank)
		extra := 1 + g.r.IntN(3)
		s := slices.Clone(g.S)
		s[d] += extra
		start := g.r.IntN(extra + 1)
		var x *graph.Tensor
		if rank >= 2 && g.r.IntN(2) == 0 {
			// declared transposed, then transposed back and narrowed
			i := g.r.IntN(rank)
			j := (i + 1 + g.r.IntN(rank-1)) % rank
			decl := slices.Clone(s)
			decl[i], decl[j] = decl[j], decl[i]
			g.note("%s = input %v%v, transposed %d↔%d, narrowed dim %d [%d, +%d)", name, dt, decl, i, j, d, start, g.S[d])
			x = g.g.Input(name, dt, decl...).Transpose(i, j)
		} else {
			g.note("%s = input %v%v, narrowed dim %d [%d, +%d)", name, dt, s, d, start, g.S[d])
			x = g.g.Input(name, dt, s...)
		}
		g.narrowed = true
		g.add(x.Narrow(d, start, g.S[d]), name)
	default:
		g.note("%s = input %v%v", name, dt, g.S)
		g.add(g.g.Input(name, dt, g.S...), name)
	}
}

// pick returns a pool value, favouring recent ones so that chains get deep.
func (g *gen) pick() *graph.Tensor {
	if g.r.IntN(2) == 0 {
		k := min(4, len(g.pool))
		return g.pool[len(g.pool)-1-g.r.IntN(k)]
	}
	return g.pool[g.r.IntN(len(g.pool))]
}

func (g *gen) pickFloat() *graph.Tensor {
	t := g.pick()
	if !t.DType().IsFloat() {
		t = g.add(t.Cast(g.floatDType()), "cast to float")
	}
	return t
}

func (g *gen) pickSigned() *graph.Tensor {
	t := g.pick()
	if !ir.SignedTypes.Has(t.DType()) {
		to := []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16, dtype.I64}[g.r.IntN(5)]
		t = g.add(t.Cast(to), "cast to signed")
	}
	return t
}

// pair returns two pool values of one dtype (the second cast if needed), or
// a value and an untyped scalar.
func (g *gen) pair() (*graph.Tensor, *graph.Tensor) {
	a := g.pick()
	if g.r.IntN(4) == 0 {
		s := graph.Scalar(scalars[g.r.IntN(len(scalars))])
		if g.r.IntN(2) == 0 {
			return s, a
		}
		return a, s
	}
	b := g.pick()
	if b.DType() != a.DType() {
		b = g.add(b.Cast(a.DType()), "cast to match")
	}
	return a, b
}

func unary(t *graph.Tensor, op string, r *rand.Rand) *graph.Tensor {
	switch op {
	case "exp":
		return t.Exp()
	case "log":
		return t.Log()
	case "sin":
		return t.Sin()
	case "cos":
		return t.Cos()
	case "tanh":
		return t.Tanh()
	case "recip":
		return t.Recip()
	case "sqrt":
		return t.Sqrt()
	case "ceil":
		return t.Ceil()
	case "floor":
		return t.Floor()
	case "round":
		return t.Round()
	case "erf":
		return t.Erf()
	case "gelu":
		return t.Gelu()
	case "gelu_erf":
		return t.GeluErf()
	case "silu":
		return t.Silu()
	case "sigmoid":
		return t.Sigmoid()
	case "normcdf":
		return t.Normcdf()
	case "elu":
		return t.Elu([]float64{1, 0.5, 2}[r.IntN(3)])
	case "powf":
		return t.Powf([]float64{2, 0.5, 3, -1, 1.5}[r.IntN(5)])
	case "neg":
		return t.Neg()
	case "sqr":
		return t.Sqr()
	case "abs":
		return t.Abs()
	case "sign":
		return t.Sign()
	case "relu":
		return t.Relu()
	}
	panic("unknown unary op " + op)
}

func binary(a, b *graph.Tensor, op string) *graph.Tensor {
	switch op {
	case "add":
		return a.Add(b)
	case "sub":
		return a.Sub(b)
	case "mul":
		return a.Mul(b)
	case "div":
		return a.Div(b)
	case "maximum":
		return a.Maximum(b)
	case "minimum":
		return a.Minimum(b)
	case "eq":
		return a.Eq(b)
	case "ne":
		return a.Ne(b)
	case "lt":
		return a.Lt(b)
	case "le":
		return a.Le(b)
	case "gt":
		return a.Gt(b)
	case "ge":
		return a.Ge(b)
	}
	panic("unknown binary op " + op)
}

// step adds one random op (and the casts it needs) to the pool.
func (g *gen) step() {
	r := g.r
	switch k := r.IntN(100); {
	case k < 20:
		op := unaryFloatOps[r.IntN(len(unaryFloatOps))]
		g.add(unary(g.pickFloat(), op, r), op)
	case k < 28:
		op := unarySignedOps[r.IntN(len(unarySignedOps))]
		g.add(unary(g.pickSigned(), op, r), op)
	case k < 36:
		p := affines[r.IntN(len(affines))]
		t := g.add(g.pick().Affine(p[0], p[1]), "affine")
		if r.IntN(3) == 0 { // a chain for fold, sometimes back to identity
			q := affines[r.IntN(len(affines))]
			if r.IntN(2) == 0 && p[0] != 0 {
				q = [2]float64{1 / p[0], -p[1] / p[0]}
			}
			g.add(t.Affine(q[0], q[1]), "affine chain")
		}
	case k < 43:
		g.add(g.pick().Cast(g.dtype()), "cast")
	case k < 60:
		a, b := g.pair()
		op := binaryOps[r.IntN(len(binaryOps))]
		g.add(binary(a, b, op), op)
	case k < 68:
		a, b := g.pair()
		op := compareOps[r.IntN(len(compareOps))]
		g.add(binary(a, b, op), op)
	case k < 78:
		c := g.pick()
		if !ir.IDDTypes.Has(c.DType()) {
			c = g.add(c.Gt(graph.Scalar(scalars[r.IntN(len(scalars))])), "condition")
		}
		a, b := g.pair()
		g.add(graph.Where(c, a, b), "where")
	case k < 81:
		lo := scalars[r.IntN(len(scalars))]
		g.add(g.pick().Clamp(graph.Scalar(lo), graph.Scalar(lo+2)), "clamp")
	case k < 84:
		shape := g.smallShape()
		v := scalars[r.IntN(len(scalars))]
		g.add(g.g.Full(g.dtype(), v, shape...), fmt.Sprintf("full %v", shape))
	case k < 86:
		if len(g.S) > 0 {
			n := g.S[len(g.S)-1:]
			start := []float64{0, -2, 1.5}[r.IntN(3)]
			g.add(g.g.Arange(g.dtype(), start, start+float64(n[0]), 1), "arange")
		}
	case k < 93:
		g.view()
	case k < 96:
		t := g.pick()
		if t.Node().Op == ir.OpView {
			g.add(t.Contiguous(), "contiguous")
		}
	default:
		if g.opts.reshapes {
			g.reshape()
		} else {
			g.view()
		}
	}
	if g.opts.reductions && r.IntN(4) == 0 {
		g.reduction()
	}
}

// reduction adds a reduction of a pool value over random dims, keeping the
// reduced dims (or dropping leading ones), so that the result still
// broadcasts to S.
func (g *gen) reduction() {
	r := g.r
	t := g.pick()
	s := t.Shape()
	if len(s) == 0 {
		return
	}
	var dims []int
	empty := false
	for d := range s {
		if r.IntN(2) == 0 {
			dims = append(dims, d)
			empty = empty || s[d] == 0
		}
	}
	if len(dims) == 0 {
		dims = []int{len(s) - 1}
		empty = s[len(s)-1] == 0
	}
	leading := dims[len(dims)-1] == len(dims)-1 // dims are 0..k-1
	d := dims[r.IntN(len(dims))]
	switch op := r.IntN(9); {
	case op == 0 && leading && r.IntN(2) == 0:
		g.add(t.Sum(dims...), fmt.Sprintf("sum %v", dims))
	case op <= 1:
		g.add(t.SumKeepDim(dims...), fmt.Sprintf("sum keepdim %v", dims))
	case op == 2 && !empty:
		g.add(t.Max(true, dims...), fmt.Sprintf("max keepdim %v", dims))
	case op == 3 && !empty:
		g.add(t.Min(true, dims...), fmt.Sprintf("min keepdim %v", dims))
	case op == 4 && s[d] > 0:
		if r.IntN(2) == 0 {
			g.add(t.Argmax(d, true), fmt.Sprintf("argmax keepdim %d", d))
		} else {
			g.add(t.Argmin(d, true), fmt.Sprintf("argmin keepdim %d", d))
		}
	case op == 5:
		g.add(g.floatOf(t).Mean(true, dims...), fmt.Sprintf("mean keepdim %v", dims))
	case op == 6:
		g.add(g.floatOf(t).Var(true, dims...), fmt.Sprintf("var keepdim %v", dims))
	case op == 7 && s[d] > 0:
		g.add(g.floatOf(t).Softmax(d), fmt.Sprintf("softmax %d", d))
	case op == 8 && s[d] > 0:
		g.add(g.floatOf(t).LogSoftmax(d), fmt.Sprintf("log_softmax %d", d))
	}
}

func (g *gen) floatOf(t *graph.Tensor) *graph.Tensor {
	if !t.DType().IsFloat() {
		t = g.add(t.Cast(g.floatDType()), "cast to float")
	}
	return t
}

// view adds a transposed, narrowed or explicitly broadcast view of a pool
// value (often a computed one, which the reader must then load from memory).
func (g *gen) view() {
	t := g.pick()
	s := t.Shape()
	switch g.r.IntN(3) {
	case 0:
		if len(s) >= 2 {
			i := g.r.IntN(len(s))
			j := (i + 1 + g.r.IntN(len(s)-1)) % len(s)
			s[i], s[j] = s[j], s[i]
			if g.compatible(s) {
				g.add(t.Transpose(i, j), "transpose")
			}
		}
	case 1:
		if len(s) >= 1 {
			d := g.r.IntN(len(s))
			if s[d] >= 1 {
				g.narrowed = true
				g.add(t.Narrow(d, g.r.IntN(s[d]), 1), "narrow to 1")
			}
		}
	default:
		g.add(t.BroadcastTo(g.S...), "broadcast")
	}
}

// reshape adds an identity view of a pool value: unsqueeze, squeeze or a
// reshape that keeps the shape's broadcast compatibility.
func (g *gen) reshape() {
	t := g.pick()
	s := t.Shape()
	switch g.r.IntN(2) {
	case 0:
		if len(s) < len(g.S) {
			g.add(t.Unsqueeze(0), "unsqueeze")
		}
	default:
		for d, n := range s {
			if n == 1 && g.compatible(slices.Delete(slices.Clone(s), d, d+1)) {
				g.add(t.Squeeze(d), "squeeze")
				return
			}
		}
	}
}

// randomGraph builds one graph from a seed.
func randomGraph(seed uint64, opts genOpts) *gen {
	return randomGraphFrom(rand.New(rand.NewPCG(seed, 0x10097)), fmt.Sprintf("seed %d", seed), opts)
}

// randomGraphFrom builds one graph from the choices r makes (a seeded PCG,
// or the bytes of a fuzz input in fuzz_test.go); label names it in messages.
func randomGraphFrom(r *rand.Rand, label string, opts genOpts) *gen {
	rank := r.IntN(5)
	S := make([]int, rank)
	for i := range S {
		S[i] = 1 + r.IntN(7)
	}
	if rank > 0 && r.IntN(10) == 0 {
		S[r.IntN(rank)] = 0
	}
	g := &gen{r: r, g: graph.New(), S: S, opts: opts}
	g.note("%s: base shape %v", label, S)
	for range 2 + r.IntN(4) {
		g.input()
	}
	first := len(g.pool)
	for n := 10 + r.IntN(31); len(g.pool)-first < n; {
		g.step()
	}
	// Outputs: the last value, some intermediates, sometimes a value under
	// two names.
	outs := []*graph.Tensor{g.pool[len(g.pool)-1]}
	for range 1 + r.IntN(3) {
		outs = append(outs, g.pool[r.IntN(len(g.pool))])
	}
	if r.IntN(6) == 0 {
		outs = append(outs, outs[r.IntN(len(outs))])
	}
	for i, t := range outs {
		g.g.Output(fmt.Sprintf("out%d", i), t)
	}
	if err := g.g.Err(); err != nil {
		panic(fmt.Sprintf("%s: generator built an invalid graph: %v", label, err))
	}
	return g
}

// coverage counts what the random graphs exercised, to keep the generator
// honest.
type coverage struct {
	graphs, fusedSteps, unfusedSteps, multiOp, rowKernels, zeroSize int
	reasons                                                         map[string]int
}

var reasonRE = regexp.MustCompile(`stored, not fused: ([a-z ]+)`)

func (c *coverage) add(pf, pu *graph.Program) {
	c.graphs++
	c.fusedSteps += len(pf.Plan().Steps)
	c.unfusedSteps += len(pu.Plan().Steps)
	for _, k := range kernels(pf) {
		if len(k.Instrs) > 1 {
			c.multiOp++
		}
		if k.RowAxes > 0 {
			c.rowKernels++
		}
		if k.Numel() == 0 {
			c.zeroSize++
		}
	}
	var b strings.Builder
	pf.Dump(&b, "log")
	for _, m := range reasonRE.FindAllStringSubmatch(b.String(), -1) {
		c.reasons[m[1]]++
	}
}

func (c *coverage) String() string {
	keys := make([]string, 0, len(c.reasons))
	for k := range c.reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var rs []string
	for _, k := range keys {
		rs = append(rs, fmt.Sprintf("%q: %d", k, c.reasons[k]))
	}
	return fmt.Sprintf("%d graphs compiled: %d fused steps (%d multi-op, %d row kernels, %d empty) vs %d unfused; break reasons: %s",
		c.graphs, c.fusedSteps, c.multiOp, c.rowKernels, c.zeroSize, c.unfusedSteps, strings.Join(rs, ", "))
}

// checkRandom compiles one random graph in both modes with the verifier on
// after every pass, checks both plans, runs both on the CPU and compares the
// outputs bit for bit. It returns a one-line failure class and the details.
func checkRandom(seed uint64, opts genOpts, cov *coverage) (class, details string) {
	return checkGen(randomGraph(seed, opts), fmt.Sprintf("seed %d", seed), seed, cov)
}

// checkGen is checkRandom for a graph already generated; inputSeed seeds its
// random inputs.
func checkGen(gn *gen, label string, inputSeed uint64, cov *coverage) (class, details string) {
	g := gn.g
	built := fmt.Sprintf("%s\nbuilt:\n  %s\ngraph as built:\n%s", label, strings.Join(gn.log, "\n  "), irText(g.IR()))
	stage := "compile"
	defer func() {
		if p := recover(); p != nil {
			class, details = fmt.Sprintf("panic in %s: %v", stage, p), fmt.Sprintf("%s\n%s", built, debug.Stack())
		}
	}()
	pf, err := g.Compile(fused)
	if err != nil {
		return "fused compile: " + err.Error(), built
	}
	pu, err := g.Compile(unfused)
	if err != nil {
		return "unfused compile: " + err.Error(), built
	}
	var b strings.Builder
	pf.Dump(&b, "text")
	built += "compiled (fused):\n" + b.String()
	stage = "checks"
	cov.add(pf, pu)
	for _, p := range []*modePlan{{pf, "fused"}, {pu, "unfused"}} {
		if err := checkPlan(p.p.Plan()); err != nil {
			var pb strings.Builder
			p.p.Dump(&pb, "plan")
			return p.mode + " plan: " + firstLine(err.Error()), built + err.Error() + "\n" + pb.String()
		}
	}
	if nf, nu := len(pf.Plan().Steps), len(pu.Plan().Steps); nf > nu {
		return "fused plan has more steps than unfused", built + fmt.Sprintf("%d fused steps, %d unfused", nf, nu)
	}
	in := randomInputs(g, rand.New(rand.NewPCG(inputSeed, 99)))
	stage = "fused run"
	outF, err := run(pf, in, poisonFused)
	if err != nil {
		return "fused run: " + err.Error(), built
	}
	stage = "unfused run"
	outU, err := run(pu, in, poisonUnfused)
	if err != nil {
		return "unfused run: " + err.Error(), built
	}
	if err := sameBits(outF, outU); err != nil {
		var pb strings.Builder
		pf.Dump(&pb, "plan")
		return "fused and unfused outputs differ", built + err.Error() + "\nfused plan:\n" + pb.String()
	}
	return "", ""
}

type modePlan struct {
	p    *graph.Program
	mode string
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// classRE strips node numbers, shapes and names from an error so that
// failures of one cause group together.
var classRE = regexp.MustCompile(`%\d+|\[[0-9 :+\[\]]*\]|"[^"]*"|\b\d+\b|\b(f32|f64|f16|bf16|u8|u32|i64)\b`)

// runRandom checks n graphs from seeds base, base+1, … and reports each
// class of failure once (with its first seed in full) and how often it hit.
func runRandom(t *testing.T, n int, opts genOpts) {
	base := *randomSeed
	if *randomOne >= 0 {
		base, n = uint64(*randomOne), 1
	}
	t.Logf("random graphs: seeds %d..%d (-fuse.seed to change, -fuse.one=SEED to rerun one)", base, base+uint64(n)-1)
	type failure struct {
		seeds   []uint64
		details string
	}
	classes := map[string]*failure{}
	cov := &coverage{reasons: map[string]int{}}
	start := time.Now()
	for i := range n {
		seed := base + uint64(i)
		class, details := func() (class, details string) {
			defer func() {
				if p := recover(); p != nil {
					class, details = fmt.Sprint("panic: ", p), fmt.Sprintf("seed %d\n%s", seed, debug.Stack())
				}
			}()
			return checkRandom(seed, opts, cov)
		}()
		if *randomOne >= 0 {
			t.Logf("%s", details)
		}
		if class == "" {
			continue
		}
		key := classRE.ReplaceAllString(class, "_")
		f := classes[key]
		if f == nil {
			f = &failure{details: class + "\n" + details}
			classes[key] = f
		}
		f.seeds = append(f.seeds, seed)
	}
	keys := make([]string, 0, len(classes))
	for k := range classes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	failed := 0
	for _, k := range keys {
		f := classes[k]
		failed += len(f.seeds)
		shown := f.seeds[:min(10, len(f.seeds))]
		t.Errorf("%d of %d graphs fail with: %s\nseeds: %v\nfirst failing graph:\n%s", len(f.seeds), n, k, shown, f.details)
	}
	t.Logf("%d graphs, %d failed, in %v", n, failed, time.Since(start).Round(time.Millisecond))
	t.Logf("coverage: %v", cov)
}

// TestRandomGraphs: random elementwise DAGs over every dtype, with
// broadcasts, strided inputs, casts, comparisons, where, scalars, constants
// and several outputs compute bit-for-bit the same fused and unfused (the
// CPU executor rounds every intermediate to its dtype, so they must).
func TestRandomGraphs(t *testing.T) {
	n := 1000
	if *long {
		n = 20000
	} else if testing.Short() {
		n = 100
	}
	runRandom(t, n, genOpts{})
}

// TestRandomGraphsReductions: the same with reductions and the composites
// built from them (mean, var, softmax, log_softmax), which fuse into row
// kernels with their prologues and broadcast epilogues.
func TestRandomGraphsReductions(t *testing.T) {
	n := 500
	if *long {
		n = 10000
	} else if testing.Short() {
		n = 50
	}
	runRandom(t, n, genOpts{reductions: true})
}

// TestRandomGraphsReshapes: the same with reshapes of computed values
// (unsqueeze, squeeze), which kernels may read in place.
func TestRandomGraphsReshapes(t *testing.T) {
	n := 300
	if *long {
		n = 5000
	} else if testing.Short() {
		n = 30
	}
	runRandom(t, n, genOpts{reshapes: true})
}

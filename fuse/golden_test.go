package fuse_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/fuse"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
	"github.com/loomgraph/loom/workloads"
)

// differential compiles g fused and unfused, checks both plans, runs both on
// the same random inputs and requires bit-identical outputs. It returns the
// programs, the inputs and the fused outputs.
func differential(t *testing.T, g *graph.Graph, seed uint64) (pf, pu *graph.Program, in, out map[string]*tensor.Tensor) {
	t.Helper()
	pf, pu, in, out = compareRuns(t, g, seed)
	for _, p := range []*graph.Program{pf, pu} {
		if err := checkPlan(p.Plan()); err != nil {
			t.Errorf("plan (fused=%v) breaks an invariant:\n%v\n%s", p.Plan().Fused, err, head(dump(t, p, "plan"), 30))
		}
	}
	return pf, pu, in, out
}

// compareRuns is differential without the plan checks.
func compareRuns(t *testing.T, g *graph.Graph, seed uint64) (pf, pu *graph.Program, in, out map[string]*tensor.Tensor) {
	t.Helper()
	pf = mustCompile(t, g, fused)
	pu = mustCompile(t, g, unfused)
	in = randomInputs(g, rand.New(rand.NewPCG(seed, 7)))
	out = mustRun(t, pf, in, poisonFused)
	ref := mustRun(t, pu, in, poisonUnfused)
	if err := sameBits(out, ref); err != nil {
		t.Errorf("fused and unfused outputs differ: %v\nfused plan:\n%s", err, head(dump(t, pf, "plan"), 60))
	}
	return pf, pu, in, out
}

func workload(t *testing.T, id string) *graph.Graph {
	t.Helper()
	w, err := workloads.ByID(id)
	if err != nil {
		t.Fatal(err)
	}
	if w.Skip != "" || w.Build == nil {
		t.Fatalf("%s cannot be built: %s", id, w.Skip)
	}
	g, err := w.Build(workloads.Size{Elems: 1000, Rows: 7, Cols: 13})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestWorkloadKernels: W1, W2 and W6 fuse into one kernel each; without
// fusion they run one kernel per op.
func TestWorkloadKernels(t *testing.T) {
	for _, tc := range []struct {
		id      string
		unfused int // ops: compute nodes of the graph (scalar constants included)
		numel   int
	}{
		{"W1", 7, 1000},   // full(0), gt, cast, silu, affine, neg, where
		{"W2", 12, 1000},  // full(0), gt, cast, affine, gelu, sigmoid, mul, add, abs, neg, exp, where
		{"W6", 2, 7 * 13}, // add, gelu
	} {
		t.Run(tc.id, func(t *testing.T) {
			g := workload(t, tc.id)
			pf, pu, _, _ := differential(t, g, 1)
			if ks := kernels(pf); len(ks) != 1 {
				t.Errorf("fused: %d kernels, want 1\n%s\nlog:\n%s", len(ks), dump(t, pf, "plan"), dump(t, pf, "log"))
			} else if want := fmt.Sprintf("_%d", tc.numel); !strings.HasSuffix(ks[0].Name, want) {
				t.Errorf("fused kernel name %q does not end in %s", ks[0].Name, want)
			}
			if n := len(pf.Plan().SlotBytes); n != 0 {
				t.Errorf("fused: %d temporary slots, want none", n)
			}
			ops := computeNodes(pu.Plan().Graph)
			if ks := kernels(pu); len(ks) != ops || ops != tc.unfused {
				t.Errorf("unfused: %d kernels for %d ops, want %d\n%s", len(ks), ops, tc.unfused, dump(t, pu, "plan"))
			}
		})
	}
	// The fused W1 kernel reads as the chain it computes.
	pf := mustCompile(t, workload(t, "W1"), fused)
	if name := kernels(pf)[0].Name; !strings.Contains(name, "cast_silu_affine") || !strings.Contains(name, "where") {
		t.Errorf("W1 kernel name %q does not read as cast → silu → affine … where", name)
	}
}

// TestKernelNames: E_<op>_<op>…_<numel>, ops in execution order, repeated
// ops kept, constants left out.
func TestKernelNames(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F16, 4, 6)
	g.Output("chain", x.Cast(dtype.F32).Silu().Affine(2, 1))
	g.Output("repeat", x.Cast(dtype.F32).Exp().Exp().Add(graph.Scalar(1)))
	g.Output("empty", g.Input("e", dtype.F32, 3, 0, 2).Exp())
	pf, _, _, _ := differential(t, g, 2)
	var names []string
	for _, k := range kernels(pf) {
		names = append(names, k.Name)
	}
	want := []string{"E_cast_silu_affine_24", "E_cast_exp_exp_add_24", "E_exp_0"}
	if !slices.Equal(names, want) {
		t.Errorf("kernel names %q, want %q", names, want)
	}
	re := regexp.MustCompile(`^E_[a-z_]+_[0-9]+$`)
	for _, n := range names {
		if !re.MatchString(n) {
			t.Errorf("kernel name %q is not E_<ops>_<numel>", n)
		}
	}
}

// TestIntermediateOutput: a value that is both an output and read by a later
// op is stored once, in its output buffer, and the consumer reads it there.
func TestIntermediateOutput(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 4, 5)
	a := x.Exp()
	g.Output("a", a)
	g.Output("b", a.Affine(2, 1).Sin())
	pf, _, in, out := differential(t, g, 3)
	p := pf.Plan()
	if len(p.Steps) != 2 {
		t.Fatalf("%d kernels, want 2\n%s", len(p.Steps), dump(t, pf, "plan"))
	}
	aBuf := p.Outputs[0]
	if aBuf.Name != "a" || aBuf.Kind != plan.BufOutput || aBuf.Node.Op != ir.OpExp {
		t.Fatalf("output a is %v (node %v), want the exp stored as output", aBuf, aBuf.Node)
	}
	if p.Steps[0].Kernel.Out != aBuf {
		t.Errorf("step 0 writes %v, want output a", p.Steps[0].Kernel.Out)
	}
	k := p.Steps[1].Kernel
	if len(k.Ins) != 1 || k.Ins[0].Buf != aBuf {
		t.Errorf("consumer kernel %s reads %v, want just output a", k.Name, k.Ins)
	}
	for _, b := range p.Buffers {
		if b.Kind == plan.BufTemp {
			t.Errorf("unexpected temporary %v", b)
		}
	}
	if l := logLines(dump(t, pf, "log"), "exp stored", "graph output"); len(l) != 1 {
		t.Errorf("log does not say why exp is stored:\n%s", dump(t, pf, "log"))
	}
	xs := in["x"].Float64s()
	av, bv := out["a"].Float64s(), out["b"].Float64s()
	for i, xv := range xs {
		ea := math.Exp(xv)
		if math.Abs(av[i]-ea) > 1e-6*ea {
			t.Fatalf("a[%d] = %v, want exp(%v) = %v", i, av[i], xv, ea)
		}
		if eb := math.Sin(float64(float32(av[i]*2 + 1))); math.Abs(bv[i]-eb) > 1e-6 {
			t.Fatalf("b[%d] = %v, want %v", i, bv[i], eb)
		}
	}
}

// TestDiamond: a = exp(x); b = a+1; c = a*2; d = b+c is one kernel.
func TestDiamond(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 3, 7)
	a := x.Exp()
	b := a.Add(graph.Scalar(1))
	c := a.Mul(graph.Scalar(2))
	g.Output("d", b.Add(c))
	pf, _, in, out := differential(t, g, 4)
	ks := kernels(pf)
	if len(ks) != 1 {
		t.Fatalf("%d kernels, want 1\n%s\n%s", len(ks), dump(t, pf, "plan"), dump(t, pf, "log"))
	}
	if got := strings.Join(ks[0].OpNames(), " "); strings.Count(got, "exp") != 1 {
		t.Errorf("kernel ops %q: exp computed %d times, want once", got, strings.Count(got, "exp"))
	}
	if len(ks[0].Ins) != 1 {
		t.Errorf("kernel reads %d operands, want only x", len(ks[0].Ins))
	}
	xs, ds := in["x"].Float64s(), out["d"].Float64s()
	for i, xv := range xs {
		e := float32(math.Exp(xv))
		want := float64((e + 1) + e*2)
		if math.Abs(ds[i]-want) > 1e-6*math.Abs(want) {
			t.Errorf("d[%d] = %v, want %v", i, ds[i], want)
		}
	}
}

// TestSharedProducer: a producer read through a transpose, or by two
// kernels, is stored, and the log says why; a cheap one is recomputed.
func TestSharedProducer(t *testing.T) {
	t.Run("transpose", func(t *testing.T) {
		g := graph.New()
		x := g.Input("x", dtype.F32, 5, 5)
		a := x.Exp()
		g.Output("o", a.Add(a.T()))
		pf, _, _, _ := differential(t, g, 5)
		p := pf.Plan()
		if len(p.Steps) != 2 {
			t.Fatalf("%d kernels, want 2\n%s", len(p.Steps), dump(t, pf, "plan"))
		}
		tmp := p.Steps[0].Kernel.Out
		if tmp.Kind != plan.BufTemp || tmp.Node.Op != ir.OpExp {
			t.Errorf("exp stored in %v, want a temporary", tmp)
		}
		if ins := p.Steps[1].Kernel.Ins; len(ins) != 2 || ins[0].Buf != tmp || ins[1].Buf != tmp {
			t.Errorf("add reads %v, want the stored exp twice (direct and transposed)", ins)
		}
		log := dump(t, pf, "log")
		if len(logLines(log, "exp stored, not fused", "read through a view")) != 1 {
			t.Errorf("log does not give the view reason:\n%s", log)
		}
	})
	t.Run("two-kernels", func(t *testing.T) {
		g := graph.New()
		x := g.Input("x", dtype.F32, 5, 5)
		a := x.Exp()
		g.Output("o1", a.Add(graph.Scalar(1)))
		g.Output("o2", a.T().Mul(graph.Scalar(2)).Sin())
		g.Output("o3", a.Sqrt())
		pf, _, _, _ := differential(t, g, 6)
		p := pf.Plan()
		if len(p.Steps) != 4 {
			t.Fatalf("%d kernels, want 4\n%s", len(p.Steps), dump(t, pf, "plan"))
		}
		tmp := p.Steps[0].Kernel.Out
		if tmp.Kind != plan.BufTemp || tmp.Node.Op != ir.OpExp {
			t.Errorf("exp stored in %v, want a temporary", tmp)
		}
		for _, s := range p.Steps[1:] {
			if !slices.ContainsFunc(s.Kernel.Ins, func(o plan.Operand) bool { return o.Buf == tmp }) {
				t.Errorf("kernel %s does not read the stored exp", s.Kernel.Name)
			}
			if slices.Contains(s.Kernel.OpNames(), "exp") {
				t.Errorf("kernel %s recomputes exp", s.Kernel.Name)
			}
		}
		log := dump(t, pf, "log")
		if len(logLines(log, "exp stored, not fused", "read through a view")) != 1 {
			t.Errorf("log does not give the first reason that applies (view):\n%s", log)
		}
	})
	t.Run("two-kernels-no-view", func(t *testing.T) {
		g := graph.New()
		x := g.Input("x", dtype.F32, 5, 5)
		a := x.Exp()
		g.Output("o1", a.Add(graph.Scalar(1)))
		g.Output("o2", a.Mul(graph.Scalar(2)))
		pf, _, _, _ := differential(t, g, 7)
		if n := len(pf.Plan().Steps); n != 3 {
			t.Fatalf("%d kernels, want 3\n%s", n, dump(t, pf, "plan"))
		}
		log := dump(t, pf, "log")
		if len(logLines(log, "exp stored, not fused", "read by 2 kernels and not cheap to recompute")) != 1 {
			t.Errorf("log does not give the sharing reason:\n%s", log)
		}
	})
	t.Run("cheap-recompute", func(t *testing.T) {
		g := graph.New()
		x := g.Input("x", dtype.F16, 5, 5)
		c := x.Cast(dtype.F32) // one cheap op of a loaded value
		g.Output("o1", c.Exp())
		g.Output("o2", c.Sin())
		pf, _, _, _ := differential(t, g, 8)
		p := pf.Plan()
		if len(p.Steps) != 2 {
			t.Fatalf("%d kernels, want 2\n%s", len(p.Steps), dump(t, pf, "plan"))
		}
		for _, s := range p.Steps {
			if ops := s.Kernel.OpNames(); ops[0] != "cast" {
				t.Errorf("kernel %s does not recompute the cast", s.Kernel.Name)
			}
		}
		if len(p.SlotBytes) != 0 {
			t.Errorf("cheap cast stored in a temporary:\n%s", dump(t, pf, "plan"))
		}
		if l := logLines(dump(t, pf, "log"), "cast stored"); len(l) != 0 {
			t.Errorf("log says the cast was stored: %q", l)
		}
	})
}

// TestCSE: identical expressions are one node; affine chains that fold to
// the same affine merge, and the log counts it.
func TestCSE(t *testing.T) {
	t.Run("built-twice", func(t *testing.T) {
		g := graph.New()
		x := g.Input("x", dtype.F32, 6)
		g.Output("o", x.Exp().Add(x.Exp()))
		pf, _, _, _ := differential(t, g, 9)
		n := 0
		var add *ir.Node
		for _, nd := range pf.Plan().Graph.Nodes {
			switch nd.Op {
			case ir.OpExp:
				n++
			case ir.OpAdd:
				add = nd
			}
		}
		if n != 1 || add == nil || add.Args[0] != add.Args[1] {
			t.Errorf("x.Exp() built twice: %d exp nodes, want 1 read twice by add:\n%s", n, dump(t, pf, "text"))
		}
	})
	t.Run("after-fold", func(t *testing.T) {
		g := graph.New()
		x := g.Input("x", dtype.F32, 6)
		a := x.Affine(2, 0).Affine(4, 0) // folds to affine(x, 8, 0)
		b := x.Affine(8, 0)
		g.Output("o", a.Mul(b))
		for _, opts := range []graph.Options{fused, unfused} {
			p := mustCompile(t, g, opts)
			var affines []*ir.Node
			for _, nd := range p.Plan().Graph.Nodes {
				if nd.Op == ir.OpAffine {
					affines = append(affines, nd)
				}
			}
			if len(affines) != 1 || !slices.Equal(affines[0].Params, []float64{8, 0}) {
				t.Errorf("NoFusion=%v: affines after fold+cse %v, want one affine(8, 0):\n%s", opts.NoFusion, affines, dump(t, p, "text"))
			}
			// The folded chain interns to the existing affine(x, 8, 0) inside
			// fold's own rebuild (hash-consing is CSE), so cse finds nothing
			// left to merge; the single affine above is the proof.
			log := dump(t, p, "log")
			if !strings.Contains(log, "fold: folded 1 affine ops") || strings.Contains(log, "cse: merged") {
				t.Errorf("NoFusion=%v: log does not count the fold and the merge:\n%s", opts.NoFusion, log)
			}
		}
		differential(t, g, 10)
	})
	t.Run("fold-dtypes", func(t *testing.T) {
		// Folding is for f32 and f64 only: f16/bf16 would lose the
		// intermediate rounding, integers would truncate the parameters.
		for _, dt := range dtype.All {
			g := graph.New()
			x := g.Input("x", dt, 6)
			g.Output("o", x.Affine(2, 0).Affine(4, 0))
			pf, _, _, _ := differential(t, g, 11)
			n := 0
			for _, nd := range pf.Plan().Graph.Nodes {
				if nd.Op == ir.OpAffine {
					n++
				}
			}
			want := 2
			if dt == dtype.F32 || dt == dtype.F64 {
				want = 1
			}
			if n != want {
				t.Errorf("%v: %d affines after fold, want %d", dt, n, want)
			}
		}
	})
}

// TestCSELogCountsMerges: the cse pass reports how many duplicate nodes it
// merged. A single affine chain has no duplicates, yet the log reports the
// chain's inner affines, which fold left dead in its rebuilt graph, as
// merged duplicates.
func TestCSELogCountsMerges(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 6)
	g.Output("o", x.Affine(2, 0).Affine(4, 0).Affine(-2, 0))
	p := mustCompile(t, g, fused)
	log := dump(t, p, "log")
	if !strings.Contains(log, "fold: folded 2 affine ops") {
		t.Errorf("log does not count the two folds:\n%s", log)
	}
	if l := logLines(log, "cse:"); len(l) != 0 {
		t.Errorf("graph without duplicate nodes, but the log says %q (fold.go's Rebuild keeps the folded chain's inner affines as dead nodes; cse.go counts their removal as merges)", l)
	}
}

// TestDCE: nodes that reach no output are gone from the compiled graph;
// unused inputs stay.
func TestDCE(t *testing.T) {
	build := func() *graph.Graph {
		g := graph.New()
		x := g.Input("x", dtype.F32, 4)
		g.Input("unused", dtype.I64, 2)
		x.Exp()
		x.Sin().Cos().Tanh()
		g.Output("o", x.Neg())
		return g
	}
	for _, opts := range []graph.Options{fused, unfused} {
		g := build()
		p := mustCompile(t, g, opts)
		text := dump(t, p, "text")
		for _, op := range []string{"exp", "sin", "cos", "tanh"} {
			if strings.Contains(text, "= "+op) {
				t.Errorf("NoFusion=%v: dead %s in the compiled graph:\n%s", opts.NoFusion, op, text)
			}
		}
		if !strings.Contains(text, "= neg") || !strings.Contains(text, `input("unused")`) {
			t.Errorf("NoFusion=%v: live nodes missing:\n%s", opts.NoFusion, text)
		}
		if n := len(p.Plan().Steps); n != 1 {
			t.Errorf("NoFusion=%v: %d steps, want 1", opts.NoFusion, n)
		}
		if n := len(p.Plan().Inputs); n != 2 {
			t.Errorf("NoFusion=%v: %d plan inputs, want 2 (unused inputs are kept)", opts.NoFusion, n)
		}
	}
	// graph.Compile snapshots the live graph, so run the pipeline itself on
	// the graph as built to see the dce pass at work.
	g := build()
	st, err := fuse.Compile(g.IR(), fuse.Options{Fusion: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	st.Log.Write(&b)
	if !strings.Contains(b.String(), "dce: removed 4 dead nodes") {
		t.Errorf("log does not count 4 dead nodes:\n%s", b.String())
	}
	if len(st.Graph.Nodes) != 3 {
		t.Errorf("%d nodes after the pipeline, want 3 (x, unused, neg):\n%s", len(st.Graph.Nodes), irText(st.Graph))
	}
	if got := len(g.IR().Nodes); got != 7 {
		t.Errorf("compiling changed the graph as built: %d nodes, want 7", got)
	}
}

// TestMaxKernelInputs: a sum of 40 distinct inputs is split so that no
// kernel reads more than fuse.MaxKernelInputs operands, and the log says
// why.
func TestMaxKernelInputs(t *testing.T) {
	g := graph.New()
	var sum *graph.Tensor
	for i := range 40 {
		x := g.Input(fmt.Sprintf("x%02d", i), dtype.F32, 3, 4)
		if sum == nil {
			sum = x
		} else {
			sum = sum.Add(x)
		}
	}
	g.Output("sum", sum)
	pf, _, in, out := differential(t, g, 12)
	ks := kernels(pf)
	if len(ks) < 3 {
		t.Errorf("%d kernels for 40 operands, want at least 3", len(ks))
	}
	for _, k := range ks {
		if len(k.Ins) > fuse.MaxKernelInputs {
			t.Errorf("kernel %s reads %d operands > %d", k.Name, len(k.Ins), fuse.MaxKernelInputs)
		}
	}
	log := dump(t, pf, "log")
	reason := fmt.Sprintf("the kernel would read more than %d operands", fuse.MaxKernelInputs)
	if len(logLines(log, "add stored, not fused", reason)) != len(ks)-1 {
		t.Errorf("log should give the operand reason for each of the %d breaks:\n%s", len(ks)-1, log)
	}
	// The sum is computed left to right, in float32, like the graph says.
	s := out["sum"].Float64s()
	for i := range s {
		var want float32
		for j := range 40 {
			want += float32(in[fmt.Sprintf("x%02d", j)].Float64(i))
		}
		if float64(want) != s[i] {
			t.Errorf("sum[%d] = %v, want %v", i, s[i], want)
		}
	}
}

// TestMaxKernelInputsLayouts: a kernel operand is a buffer seen through a
// layout, so reading one input both directly and transposed takes two
// operands. The limit must hold for operands, not only distinct buffers.
func TestMaxKernelInputsLayouts(t *testing.T) {
	for _, view := range []string{"transpose", "broadcast"} {
		t.Run(view, func(t *testing.T) {
			g := graph.New()
			var sum *graph.Tensor
			for i := range 12 {
				var v *graph.Tensor
				if view == "transpose" {
					x := g.Input(fmt.Sprintf("x%02d", i), dtype.F32, 3, 3)
					v = x.Add(x.T())
				} else {
					x := g.Input(fmt.Sprintf("x%02d", i), dtype.F32, 3)
					v = x.Unsqueeze(1).Mul(x.Unsqueeze(0)) // [3 1] · [1 3]: outer product
				}
				if sum == nil {
					sum = v
				} else {
					sum = sum.Add(v)
				}
			}
			g.Output("sum", sum)
			pf, _, _, _ := compareRuns(t, g, 13)
			for _, k := range kernels(pf) {
				if len(k.Ins) > fuse.MaxKernelInputs {
					t.Errorf("kernel %s reads %d operands > MaxKernelInputs = %d (12 buffers, each through 2 layouts); fuser.operandsWith (elementwise.go) counts distinct base nodes, plan's kernel() makes one operand per (buffer, layout)", k.Name, len(k.Ins), fuse.MaxKernelInputs)
				}
			}
		})
	}
}

// TestBroadcastConstants: a scalar constant fuses into the kernel that reads
// it, with no one-element buffer.
func TestBroadcastConstants(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 4, 5)
	g.Output("o", x.Add(graph.Scalar(1)))
	g.Output("p", x.Mul(g.Full(dtype.F32, 3, 5)).Maximum(g.Zeros(dtype.F32, 4, 1)))
	pf, pu, in, out := differential(t, g, 14)
	p := pf.Plan()
	if len(p.Steps) != 2 {
		t.Fatalf("%d kernels, want 2\n%s", len(p.Steps), dump(t, pf, "plan"))
	}
	for _, b := range p.Buffers {
		if b.Numel() == 1 || b.Kind == plan.BufTemp {
			t.Errorf("buffer %v: constants should be computed in the kernel", b)
		}
	}
	for _, k := range kernels(pf) {
		if len(k.Ins) != 1 || k.Ins[0].Buf != p.Inputs[0] {
			t.Errorf("kernel %s reads %d operands, want only x", k.Name, len(k.Ins))
		}
	}
	if log := dump(t, pf, "log"); !strings.Contains(log, "broadcast-fills: turned") {
		t.Errorf("log does not mention broadcast-fills:\n%s", log)
	}
	// Without fusion the constant is a one-element buffer read with stride 0.
	one := 0
	for _, b := range pu.Plan().Buffers {
		if b.Numel() == 1 && b.Kind == plan.BufTemp {
			one++
		}
	}
	if one == 0 {
		t.Errorf("unfused plan has no one-element constant buffer:\n%s", dump(t, pu, "plan"))
	}
	xs, o := in["x"].Float64s(), out["o"].Float64s()
	for i := range xs {
		if o[i] != float64(float32(xs[i])+1) {
			t.Fatalf("o[%d] = %v, want %v", i, o[i], xs[i]+1)
		}
	}
}

// TestBufferReuse: without fusion, a chain of 10 ops needs two temporary
// slots, not nine buffers, and no two live temporaries share a slot.
func TestBufferReuse(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 64)
	v := x
	for i := range 10 {
		switch i % 3 {
		case 0:
			v = v.Sin()
		case 1:
			v = v.Affine(0.5, 0.25)
		default:
			v = v.Exp()
		}
	}
	g.Output("o", v)
	_, pu, _, _ := differential(t, g, 15)
	p := pu.Plan()
	if len(p.Steps) != 10 {
		t.Fatalf("%d steps, want 10", len(p.Steps))
	}
	with, without := p.PeakBytes()
	if with >= without {
		t.Errorf("PeakBytes: %d with reuse, %d without; reuse should save memory", with, without)
	}
	if want := 3 * 256; with != want || without != 10*256 {
		t.Errorf("PeakBytes = %d, %d; want %d (2 slots + output), %d (9 temporaries + output)", with, without, want, 10*256)
	}
	if len(p.SlotBytes) != 2 {
		t.Errorf("%d slots, want 2", len(p.SlotBytes))
	}
	if err := checkSlots(p); err != nil {
		t.Error(err)
	}
}

// TestBufferReuseSizes: temporaries of different sizes and lifetimes share
// slots only when their lifetimes do not overlap, and slots are big enough.
func TestBufferReuseSizes(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 8)
	y := g.Input("y", dtype.F64, 6, 8)
	a := x.Exp()                         // [8] f32, read late
	b := a.Unsqueeze(0).Add(x.Sin())     // [1 8]
	c := y.Mul(b.Cast(dtype.F64)).Tanh() // [6 8] f64
	d := c.Cast(dtype.F16).Sqr()         // [6 8] f16
	e := d.Cast(dtype.F32).Add(a)        // reads a again
	g.Output("o", e.Affine(2, 0).Sqrt())
	g.Output("p", b.Neg())
	_, pu, _, _ := differential(t, g, 16)
	if err := checkSlots(pu.Plan()); err != nil {
		t.Errorf("%v\n%s", err, dump(t, pu, "plan"))
	}
	with, without := pu.Plan().PeakBytes()
	if with >= without {
		t.Errorf("PeakBytes: %d with reuse, %d without", with, without)
	}
}

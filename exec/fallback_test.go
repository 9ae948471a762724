package exec_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// picky is an executor that refuses row kernels and indexing ops, like a GPU
// executor before those kernels exist; it must never be asked to run one.
type picky struct {
	*cpu.Executor
	host *cpu.Executor
	t    *testing.T
}

func (p *picky) Supports(k *plan.Kernel) error {
	if k.RowAxes > 0 || k.Instrs[0].Node.Info().Class == ir.ClassIndex {
		return errors.New("no row or indexing kernels here")
	}
	if k.IsMatmul() || k.IsFusedMatmul() {
		return errors.New("no GEMM here")
	}
	if k.IsWindow() || k.CoreAt() >= 0 {
		return errors.New("no window kernels here")
	}
	return nil
}

func (p *picky) Fallback() exec.Executor { return p.host }

func (p *picky) Run(ctx context.Context, s *plan.Step, mem []exec.Memory) error {
	if err := p.Supports(s.Kernel); err != nil {
		p.t.Errorf("picky asked to run %s", s.Kernel.Name)
	}
	return p.Executor.Run(ctx, s, mem)
}

// TestFallback forces the fallback path: reductions and indexing steps run on
// the fallback executor with transfers, elementwise steps on the executor,
// and the results equal a plain CPU run.
func TestFallback(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 4, 33)
	ids := g.Input("ids", dtype.U32, 3)
	sm := x.Affine(0.5, 1).Softmax(-1)
	g.Output("out", sm.IndexSelect(ids, 1).Exp().Add(x.Sum(0).Narrow(0, 0, 3)))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]float32, 4*33)
	for i := range xs {
		xs[i] = float32(i%7) - 2.5
	}
	xt, _ := tensor.New(xs, 4, 33)
	it, _ := tensor.New([]uint32{5, 0, 32}, 3)
	in := map[string]*tensor.Tensor{"x": xt, "ids": it}
	e := &picky{Executor: cpu.New().Poison(0xff), host: cpu.New().Poison(0xee), t: t}
	got, err := p.Run(context.Background(), e, in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Run(context.Background(), cpu.New(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got["out"].Bytes(), want["out"].Bytes()) {
		t.Fatalf("fallback run differs:\n%v\n%v", got["out"].Float64s(), want["out"].Float64s())
	}
	pl := exec.Placement(p.Plan(), e)
	for _, s := range []string{"on cpu (fallback: no row or indexing kernels here)", "transfer b", "→ cpu", "cpu → cpu"} {
		if !strings.Contains(pl, s) {
			t.Errorf("placement lacks %q:\n%s", s, pl)
		}
	}
	t.Log(pl)
}

// TestFallbackMatmul: matmul steps fall back like any other (the GPU's
// path until its GEMM lands), fused ones with their epilogues,
// the result equals a plain CPU run, and the placement names the
// fallback's BLAS once.
func TestFallbackMatmul(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 3, 5, 8)
	w := g.Input("w", dtype.F32, 6, 8)
	b := g.Input("b", dtype.F32, 6)
	y := graph.Linear(x, w, b).Gelu()
	g.Output("out", y.Matmul(w).Add(graph.Scalar(1)))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensor.Tensor{}
	for _, n := range g.IR().Inputs() {
		vs := make([]float32, n.Numel())
		for i := range vs {
			vs[i] = float32((i*7+n.ID)%11)/4 - 1.25
		}
		in[n.Name], _ = tensor.New(vs, n.Shape...)
	}
	e := &picky{Executor: cpu.New().Poison(0xff), host: cpu.New().Poison(0xee), t: t}
	got, err := p.Run(context.Background(), e, in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Run(context.Background(), cpu.New(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got["out"].Bytes(), want["out"].Bytes()) {
		t.Fatalf("fallback run differs:\n%v\n%v", got["out"].Float64s(), want["out"].Float64s())
	}
	pl := exec.Placement(p.Plan(), e)
	for _, s := range []string{"M_matmul_add_gelu_90 on cpu (fallback: no GEMM here)", "M_matmul_add_120 on cpu (fallback: no GEMM here)"} {
		if !strings.Contains(pl, s) {
			t.Errorf("placement lacks %q:\n%s", s, pl)
		}
	}
	if n := strings.Count(pl, "matmul on cpu: "); n != 1 {
		t.Errorf("placement names the BLAS %d times, want once:\n%s", n, pl)
	}
	t.Log(pl)
}

// TestFallbackConv: conv and conv_transpose steps fall back (the GPU's path
// until its window kernels land), reading operands copied to the host at
// their offsets (a narrowed batch), the epilogue runs on the executor, and
// the result equals a plain CPU run.
func TestFallbackConv(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 3, 4, 6, 5).Narrow(0, 1, 2)
	w := g.Input("w", dtype.F32, 4, 4, 3, 3)
	y := graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}}).Relu()
	g.Output("out", graph.ConvTranspose2d(y, w, graph.ConvOptions{Stride: []int{2}}).Add(graph.Scalar(1)))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensor.Tensor{}
	for _, n := range g.IR().Inputs() {
		vs := make([]float32, n.Numel())
		for i := range vs {
			vs[i] = float32((i*7+n.ID)%11)/4 - 1.25
		}
		in[n.Name], _ = tensor.New(vs, n.Shape...)
	}
	e := &picky{Executor: cpu.New().Poison(0xff), host: cpu.New().Poison(0xee), t: t}
	got, err := p.Run(context.Background(), e, in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Run(context.Background(), cpu.New(), in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got["out"].Bytes(), want["out"].Bytes()) {
		t.Fatalf("fallback run differs:\n%v\n%v", got["out"].Float64s(), want["out"].Float64s())
	}
	pl := exec.Placement(p.Plan(), e)
	if n := strings.Count(pl, "(fallback: no window kernels here)"); n != 2 {
		t.Errorf("placement shows %d window steps falling back, want 2:\n%s", n, pl)
	}
	t.Log(pl)
}

// TestNilArgumentsAreErrors: the package-level runners reject a nil context,
// executor (also a typed nil) or plan with an error naming the call.
func TestNilArgumentsAreErrors(t *testing.T) {
	ctx := context.Background()
	var nilCPU *cpu.Executor
	p := &plan.Plan{}
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"Run nil executor", func() error { _, err := exec.Run(ctx, nil, p, nil); return err }, "run: nil executor"},
		{"Run typed nil executor", func() error { _, err := exec.Run(ctx, nilCPU, p, nil); return err }, "run: nil executor"},
		{"Run nil plan", func() error { _, err := exec.Run(ctx, cpu.New(), nil, nil); return err }, "run: nil plan"},
		{"Run nil context", func() error { _, err := exec.Run(nil, cpu.New(), p, nil); return err }, "run: nil context"},
		{"RunValues nil plan", func() error { _, err := exec.RunValues(ctx, cpu.New(), nil, nil, false); return err }, "run: nil plan"},
		{"RunInto nil executor", func() error { return exec.RunInto(ctx, nil, p, nil, nil) }, "run: nil executor"},
		{"Prepare nil plan", func() error { return exec.Prepare(ctx, cpu.New(), nil) }, "prepare: nil plan"},
	}
	for _, c := range cases {
		err := c.call()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

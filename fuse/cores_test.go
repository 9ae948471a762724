package fuse_test

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
)

// TestWindowFusion: a conv's bias and ReLU and a max pool after it are the
// conv and one kernel (the pool computing bias + relu at every element it
// reads), a residual and a cast after the pool join that kernel too, the
// plan dump and the log say so, and the kernel splits into the parts the
// CPU runs. Unfused, every op is its own step.
func TestWindowFusion(t *testing.T) {
	build := func() *graph.Graph {
		g := graph.New()
		x := g.Input("x", dtype.F32, 2, 3, 16, 16)
		w := g.Input("w", dtype.F32, 8, 3, 3, 3)
		b := g.Input("b", dtype.F32, 1, 8, 1, 1)
		r := g.Input("r", dtype.F32, 2, 8, 8, 8)
		y := graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}}).Add(b).Relu()
		g.Output("y", y.MaxPool2d(3, 3, graph.PoolStride(2), graph.PoolPadding(1)).Add(r).Cast(dtype.F16))
		return g
	}
	p := mustCompile(t, build(), fused)
	if got, want := fmtOps(opsOf(p)), "[[conv] [add relu max_pool add cast]]"; got != want {
		t.Fatalf("steps %s, want %s\n%s", got, want, dump(t, p, "plan"))
	}
	if err := checkPlan(p.Plan()); err != nil {
		t.Error(err)
	}
	k := kernels(p)[1]
	if !k.IsFusedWindow() || k.WindowAt() != 2 || !strings.HasPrefix(k.Name, "W_add_relu_max_pool_add_cast_") {
		t.Errorf("kernel %s: fused window %v at %d", k.Name, k.IsFusedWindow(), k.WindowAt())
	}
	if d := dump(t, p, "plan"); !strings.Contains(d, k.Name) {
		t.Errorf("the plan dump does not show %s:\n%s", k.Name, d)
	}
	log := dump(t, p, "log")
	for _, want := range []string{"max_pool computes its input (add → relu)", "max_pool applies add → cast"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	parts, err := plan.SplitFused(k, 100)
	if err != nil {
		t.Fatal(err)
	}
	if parts.Pre == nil || parts.Post == nil || len(parts.Temps) != 2 || parts.PostValue < 0 {
		t.Fatalf("parts: %+v", parts)
	}
	if got := strings.Join(parts.Pre.OpNames(), " "); got != "add relu" || len(parts.Pre.Ins) != 2 {
		t.Errorf("prologue %s with %d operands", got, len(parts.Pre.Ins))
	}
	if got := strings.Join(parts.Post.OpNames(), " "); got != "add cast" || parts.Post.Out != k.Out || parts.Core.Out != parts.Temps[1] {
		t.Errorf("epilogue %s, outputs %v %v", got, parts.Post.Out, parts.Core.Out)
	}
	if up := mustCompile(t, build(), unfused); len(kernels(up)) != 6 {
		t.Errorf("unfused: %d steps, want 6", len(kernels(up)))
	}
}

// TestWindowFusionRefusals: the value a pool reads stays in memory when
// something else reads it too, the pool's output when it is a graph output
// or read by two kernels; the log gives each reason.
func TestWindowFusionRefusals(t *testing.T) {
	cases := []struct {
		name  string
		build func(g *graph.Graph)
		steps string
		log   string
	}{
		{"shared input", func(g *graph.Graph) {
			x := g.Input("x", dtype.F32, 1, 2, 8, 8).Relu()
			g.Output("p", x.MaxPool2d(2, 2))
			g.Output("q", x.AvgPool2d(2, 2))
		}, "[[relu] [max_pool] [avg_pool]]", "reads its input %1 from memory: it has 2 readers"},
		{"output", func(g *graph.Graph) {
			p := g.Input("x", dtype.F32, 1, 2, 8, 8).MaxPool2d(2, 2)
			g.Output("p", p)
			g.Output("q", p.Exp())
		}, "[[max_pool] [exp]]", "max_pool stores its output: it is a graph output"},
		{"two readers", func(g *graph.Graph) {
			p := g.Input("x", dtype.F32, 1, 2, 8, 8).MaxPool2d(2, 2)
			g.Output("q", p.Exp())
			g.Output("r", p.Sqrt().Sum(3))
		}, "[[max_pool] [exp] [sqrt sum]]", "max_pool stores its output: it is read by several kernels"},
	}
	for _, c := range cases {
		g := graph.New()
		c.build(g)
		p := mustCompile(t, g, fused)
		if got := fmtOps(opsOf(p)); got != c.steps {
			t.Errorf("%s: steps %s, want %s", c.name, got, c.steps)
		}
		if log := dump(t, p, "log"); !strings.Contains(log, c.log) {
			t.Errorf("%s: the log lacks %q:\n%s", c.name, c.log, log)
		}
	}
}

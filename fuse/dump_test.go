package fuse_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/fuse"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
)

// dumpGraphs are graphs with single-op and multi-op kernels, fused and not.
func dumpGraphs(t *testing.T) []namedGraph {
	gs := []namedGraph{{"W1", workload(t, "W1")}, {"W2", workload(t, "W2")}, {"W6", workload(t, "W6")}}
	g := graph.New()
	x := g.Input("x", dtype.F32, 4, 4)
	a := x.Exp().Sin()                              // two-op kernel, stored: read transposed
	g.Output("o", a.Add(a.T()))                     // one-op kernel
	g.Output("p", a.T().Mul(graph.Scalar(2)).Neg()) // two ops and a constant
	g.Output("q", x.Sqrt())                         // one op
	return append(gs, namedGraph{"mixed", g})
}

type namedGraph struct {
	name string
	g    *graph.Graph
}

// TestDumpDOT: the DOT dump draws one cluster per kernel with two or more
// ops, and every node of the compiled graph once.
func TestDumpDOT(t *testing.T) {
	clusterRE := regexp.MustCompile(`(?m)^\s*subgraph cluster_`)
	declRE := regexp.MustCompile(`(?m)^\s*n(\d+) \[label=`)
	for _, ng := range dumpGraphs(t) {
		name, g := ng.name, ng.g
		for _, opts := range []graph.Options{fused, unfused} {
			p := mustCompile(t, g, opts)
			dot := dump(t, p, "dot")
			if !strings.HasPrefix(dot, "digraph") || !strings.HasSuffix(dot, "}\n") {
				t.Errorf("%s NoFusion=%v: not a DOT digraph:\n%s", name, opts.NoFusion, dot)
			}
			multi := 0
			for _, k := range kernels(p) {
				if len(k.Instrs) >= 2 {
					multi++
				}
			}
			if got := len(clusterRE.FindAllString(dot, -1)); got != multi {
				t.Errorf("%s NoFusion=%v: %d clusters for %d kernels with ≥ 2 ops (graph.Program.clusters draws every kernel, single-op ones too)", name, opts.NoFusion, got, multi)
			}
			if opts == fused && name != "mixed" && multi != 1 {
				t.Errorf("%s: %d multi-op kernels, want 1", name, multi)
			}
			seen := map[string]int{}
			for _, m := range declRE.FindAllStringSubmatch(dot, -1) {
				seen[m[1]]++
			}
			for _, n := range p.Plan().Graph.Nodes {
				if c := seen[fmt.Sprint(n.ID)]; c != 1 {
					t.Errorf("%s NoFusion=%v: node %v declared %d times", name, opts.NoFusion, n, c)
				}
				for _, a := range n.Args {
					if !strings.Contains(dot, fmt.Sprintf("n%d -> n%d;", a.ID, n.ID)) {
						t.Errorf("%s NoFusion=%v: edge %%%d -> %%%d missing", name, opts.NoFusion, a.ID, n.ID)
					}
				}
			}
		}
	}
}

// TestDumpDOTRecomputed: a cheap node recomputed in two kernels is still one
// DOT node (declaring it in two clusters is ill-formed: Graphviz keeps it in
// one and warns).
func TestDumpDOTRecomputed(t *testing.T) {
	g := graph.New()
	c := g.Input("x", dtype.F16, 3).Cast(dtype.F32)
	g.Output("a", c.Exp())
	g.Output("b", c.Sin())
	p := mustCompile(t, g, fused)
	dot := dump(t, p, "dot")
	var cast *ir.Node
	for _, n := range p.Plan().Graph.Nodes {
		if n.Op == ir.OpCast {
			cast = n
		}
	}
	if n := strings.Count(dot, fmt.Sprintf("n%d [label=", cast.ID)); n != 1 {
		t.Errorf("recomputed %v declared %d times in the DOT dump (once per cluster):\n%s", cast, n, dot)
	}
}

// TestDumpText: one line per node of the compiled graph, in ID order, each
// compute node annotated with its step, then one line per output.
func TestDumpText(t *testing.T) {
	lineRE := regexp.MustCompile(`^%(\d+) = ([a-z_]+)`)
	for _, ng := range dumpGraphs(t) {
		name, g := ng.name, ng.g
		for _, opts := range []graph.Options{fused, unfused} {
			p := mustCompile(t, g, opts)
			text := dump(t, p, "text")
			lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
			nodes := p.Plan().Graph.Nodes
			outs := p.Plan().Graph.Outputs
			if len(lines) != len(nodes)+len(outs) {
				t.Errorf("%s NoFusion=%v: %d lines for %d nodes and %d outputs:\n%s", name, opts.NoFusion, len(lines), len(nodes), len(outs), text)
				continue
			}
			for i, n := range nodes {
				m := lineRE.FindStringSubmatch(lines[i])
				if m == nil || m[1] != fmt.Sprint(n.ID) || m[2] != n.Op.String() {
					t.Errorf("%s NoFusion=%v: line %d %q does not describe %v", name, opts.NoFusion, i, lines[i], n)
				}
				compute := n.Op != ir.OpInput && n.Op != ir.OpView
				if has := strings.Contains(lines[i], "step="); has != compute {
					t.Errorf("%s NoFusion=%v: line %q: step annotation %v, want %v", name, opts.NoFusion, lines[i], has, compute)
				}
			}
			for i, o := range outs {
				if want := fmt.Sprintf("output %q = %%%d", o.Name, o.Node.ID); lines[len(nodes)+i] != want {
					t.Errorf("%s NoFusion=%v: output line %q, want %q", name, opts.NoFusion, lines[len(nodes)+i], want)
				}
			}
		}
	}
}

// TestDumpFormats: every documented format dumps; an unknown one is an
// error naming the valid ones; the plan dump shows peak bytes.
func TestDumpFormats(t *testing.T) {
	p := mustCompile(t, workload(t, "W1"), fused)
	for _, f := range []string{graph.DumpText, graph.DumpDOT, graph.DumpPlan, graph.DumpLog, graph.DumpBefore, graph.DumpBeforeDOT} {
		var b strings.Builder
		if err := p.Dump(&b, f); err != nil {
			t.Errorf("Dump(%q): %v", f, err)
		}
		if f != graph.DumpLog && b.Len() == 0 {
			t.Errorf("Dump(%q) is empty", f)
		}
	}
	var b strings.Builder
	if err := p.Dump(&b, "svg"); err == nil || !strings.Contains(err.Error(), "text") {
		t.Errorf("Dump(svg) = %v, want an error listing the formats", err)
	}
	if plan := dump(t, p, "plan"); !strings.Contains(plan, "peak bytes") || !strings.Contains(plan, "fused=true") {
		t.Errorf("plan dump lacks the memory summary:\n%s", plan)
	}
	if log := dump(t, p, "log"); !strings.Contains(log, "broadcast-fills:") {
		t.Errorf("W1 log does not mention broadcast-fills:\n%s", log)
	}
}

// TestPasses: the pipeline order that passes.go documents, and the
// LOOM_CHECK switch.
func TestPasses(t *testing.T) {
	var names []string
	for _, p := range fuse.Passes {
		names = append(names, p.Name)
		if p.Fusion != (p.Name == "broadcast-fills" || p.Name == "core-fusion") {
			t.Errorf("pass %s: Fusion = %v", p.Name, p.Fusion)
		}
	}
	want := []string{"verify", "dce", "fold", "cse", "broadcast-fills", "matmul-operands", "group", "core-fusion", "plan", "buffers", "ahead"}
	if !slices.Equal(names, want) {
		t.Errorf("passes %v, want %v", names, want)
	}
	g := workload(t, "W1")
	t.Setenv("LOOM_CHECK", "1")
	st, err := fuse.Compile(g.IR(), fuse.Options{Fusion: true})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Opts.Check {
		t.Errorf("LOOM_CHECK=1 did not turn the checks on")
	}
	if len(st.Plan.Steps) != 1 || st.Before != g.IR() {
		t.Errorf("fuse.Compile: %d steps, Before is the input graph: %v", len(st.Plan.Steps), st.Before == g.IR())
	}
}

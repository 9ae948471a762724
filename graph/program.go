package graph

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/fuse"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// Options control compilation.
type Options struct {
	// NoFusion runs every op as its own step (also set by LOOM_FUSION=0).
	NoFusion bool
	// Check verifies the IR after every pass (also set by LOOM_CHECK=1).
	Check bool
	// AllowTF32 lets the GPU run f32 matmuls with TF32 tensor-core
	// arithmetic (about 3 decimal digits per product, f32 accumulation), as
	// Candle's set_gemm_reduced_precision_f32(true). Off by default; the
	// CPU always computes f32 matmuls in f32. Recorded in the plan
	// (plan.Plan.AllowTF32).
	AllowTF32 bool
}

// Program is a compiled graph: immutable, safe to run concurrently.
type Program struct {
	state *fuse.State

	kernelsOnce sync.Once
	kernels     map[int]int // node ID → step, for dumps
}

// Compile verifies the graph and plans it. It fails if any builder call
// recorded an error, naming every one.
func (g *Graph) Compile(opts Options) (*Program, error) {
	if err := g.usable("compile"); err != nil {
		return nil, err
	}
	if err := g.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ir.Outputs) == 0 {
		return nil, fmt.Errorf("loom: compile: the graph has no outputs")
	}
	// Verify before the snapshot: Rebuild recurses through args, which
	// never ends on a cycle made by rewiring nodes through IR().
	if err := ir.Verify(g.ir); err != nil {
		return nil, fmt.Errorf("loom: compile: %w", err)
	}
	fusion := !opts.NoFusion && os.Getenv("LOOM_FUSION") != "0"
	// Compile works on a snapshot: later builder calls must not change a
	// compiled program.
	snap := g.ir.Rebuild(ir.Copy)
	st, err := fuse.Compile(snap, fuse.Options{Fusion: fusion, Check: opts.Check, AllowTF32: opts.AllowTF32})
	if err != nil {
		return nil, err
	}
	prog := &Program{state: st}
	if dir := os.Getenv("LOOM_DUMP"); dir != "" {
		if err := prog.WriteDumps(dir); err != nil {
			return nil, err
		}
	}
	return prog, nil
}

var dumpSeq atomic.Int64

// usable returns an error naming op when p is nil or a zero Program (not
// made by Compile).
func (p *Program) usable(op string) error {
	switch {
	case p == nil:
		return fmt.Errorf("loom: %s: nil program", op)
	case p.state == nil:
		return fmt.Errorf("loom: %s: zero Program: make programs with Graph.Compile", op)
	}
	return nil
}

// runnable checks what every run needs: a usable program, a context and an
// executor.
func (p *Program) runnable(op string, ctx context.Context, e exec.Executor) error {
	if err := p.usable(op); err != nil {
		return err
	}
	switch {
	case ctx == nil:
		return fmt.Errorf("loom: %s: nil context", op)
	case e == nil:
		return fmt.Errorf("loom: %s: nil executor", op)
	}
	return nil
}

// WriteDumps writes every dump of the program into dir (created if needed),
// as files named loom-<seq>-<what>: the graph before and after the passes
// (text and DOT, kernels drawn as clusters), the plan (steps, buffers,
// memory reuse) and the compile log (why each break happened). Compile calls
// it for every program when LOOM_DUMP=<dir> is set; executors that generate
// kernel source write it to the same directory.
func (p *Program) WriteDumps(dir string) error {
	if err := p.usable("dump"); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("loom: dump: %w", err)
	}
	prefix := filepath.Join(dir, fmt.Sprintf("loom-%03d", dumpSeq.Add(1)))
	files := []struct{ suffix, format string }{
		{"before.txt", DumpBefore}, {"before.dot", DumpBeforeDOT},
		{"after.txt", DumpText}, {"after.dot", DumpDOT},
		{"plan.txt", DumpPlan}, {"log.txt", DumpLog},
	}
	for _, f := range files {
		var b strings.Builder
		if err := p.Dump(&b, f.format); err != nil {
			return err
		}
		if err := os.WriteFile(prefix+"-"+f.suffix, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("loom: dump: %w", err)
		}
	}
	return nil
}

// Plan returns the executable plan (read-only; nil for a nil or zero
// Program).
func (p *Program) Plan() *plan.Plan {
	if p.usable("plan") != nil {
		return nil
	}
	return p.state.Plan
}

// Prepare readies the program for e before any run: on the GPU every
// kernel of the plan is generated and compiled (in parallel, or found in the
// kernel caches) and loaded, so that no run compiles. Run prepares on its
// own when this was not called; calling it first moves that cost out of the
// first run and reports a kernel that fails to compile (naming the step, the
// kernel and the compiler's first lines) before any input is uploaded.
// Executors with nothing to prepare (the CPU) return nil at once.
func (p *Program) Prepare(ctx context.Context, e exec.Executor) error {
	if err := p.runnable("prepare", ctx, e); err != nil {
		return err
	}
	return exec.Prepare(ctx, e, p.state.Plan)
}

// Run executes the program on e with the named inputs.
func (p *Program) Run(ctx context.Context, e exec.Executor, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	if err := p.runnable("run", ctx, e); err != nil {
		return nil, err
	}
	return exec.Run(ctx, e, p.state.Plan, inputs)
}

// RunInto executes the program on e writing its outputs into the caller's
// tensors (see exec.RunInto): every output must be given, with exactly its
// dtype and shape. On the CPU the steps write straight into the tensors, and
// the temporaries come from memory the executor keeps, so a loop of RunInto
// calls allocates no tensor memory.
func (p *Program) RunInto(ctx context.Context, e exec.Executor, inputs, outputs map[string]*tensor.Tensor) error {
	if err := p.runnable("run_into", ctx, e); err != nil {
		return err
	}
	return exec.RunInto(ctx, e, p.state.Plan, inputs, outputs)
}

// Dump formats.
const (
	DumpText = "text" // one line per node of the compiled graph
	DumpDOT  = "dot"  // Graphviz, kernels drawn as clusters
	DumpPlan = "plan" // steps, buffers and memory reuse
	DumpLog  = "log"  // what each pass did and why nodes were not fused
	// The graph as built, before any pass.
	DumpBefore    = "before"
	DumpBeforeDOT = "before-dot"
)

// Dump writes the program in one of the Dump* formats. The text and DOT
// formats show the compiled graph (after every pass), annotated with the
// step that computes each node.
func (p *Program) Dump(w io.Writer, format string) error {
	if err := p.usable("dump"); err != nil {
		return err
	}
	if w == nil {
		return fmt.Errorf("loom: dump: nil writer")
	}
	st := p.state
	switch format {
	case DumpText:
		return ir.WriteText(w, st.Graph, p.annotate)
	case DumpDOT:
		return ir.WriteDOT(w, st.Graph, p.clusters())
	case DumpPlan:
		var b strings.Builder
		st.Plan.WriteText(&b)
		_, err := io.WriteString(w, b.String())
		return err
	case DumpLog:
		return st.Log.Write(w)
	case DumpBefore:
		return ir.WriteText(w, st.Before, nil)
	case DumpBeforeDOT:
		return ir.WriteDOT(w, st.Before, nil)
	}
	return fmt.Errorf("loom: dump: unknown format %q (want %s, %s, %s, %s, %s or %s)", format, DumpText, DumpDOT, DumpPlan, DumpLog, DumpBefore, DumpBeforeDOT)
}

// kernelOf maps node IDs of the compiled graph to the step computing them.
func (p *Program) kernelOf() map[int]int {
	m := map[int]int{}
	for i, s := range p.state.Plan.Steps {
		for _, in := range s.Kernel.Instrs {
			if in.Node.ID >= 0 {
				m[in.Node.ID] = i
			}
		}
	}
	return m
}

func (p *Program) annotate(n *ir.Node) string {
	p.kernelsOnce.Do(func() { p.kernels = p.kernelOf() })
	if i, ok := p.kernels[n.ID]; ok {
		return fmt.Sprintf("step=%d(%s)", i, p.state.Plan.Steps[i].Kernel.Name)
	}
	return ""
}

// clusters draws each fused kernel (two or more ops) as a cluster. A cheap
// node recomputed in several kernels is drawn once, in the first.
func (p *Program) clusters() []ir.DOTCluster {
	var cs []ir.DOTCluster
	drawn := map[*ir.Node]bool{}
	for _, s := range p.state.Plan.Steps {
		if len(s.Kernel.Instrs) < 2 {
			continue
		}
		c := ir.DOTCluster{Label: s.Kernel.Name}
		for _, in := range s.Kernel.Instrs {
			if in.Node.ID >= 0 && !drawn[in.Node] {
				drawn[in.Node] = true
				c.Nodes = append(c.Nodes, in.Node)
			}
		}
		if len(c.Nodes) > 0 {
			cs = append(cs, c)
		}
	}
	return cs
}

// Placement says where each step runs on e: on e itself, or — for steps e
// has no kernel for (exec.Fallbacker) — on its fallback executor, with the
// transfers the runner makes around them.
// A nil or zero Program, or a nil executor, gives the error's text.
func (p *Program) Placement(e exec.Executor) string {
	if err := p.runnable("placement", context.Background(), e); err != nil {
		return err.Error()
	}
	return exec.Placement(p.state.Plan, e)
}

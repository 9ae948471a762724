package fuse_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/fuse"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// Poison bytes for the two executors of a differential run: different, so
// that an element one plan never writes cannot compare equal by accident.
const (
	poisonFused   = 0xA5
	poisonUnfused = 0x5A
)

// fused and unfused are the two compile modes; both run the verifier after
// every pass (LOOM_CHECK semantics).
var (
	fused   = graph.Options{Check: true}
	unfused = graph.Options{NoFusion: true, Check: true}
)

// mustCompile compiles g or fails the test, printing the graph as built.
func mustCompile(t testing.TB, g *graph.Graph, opts graph.Options) *graph.Program {
	t.Helper()
	p, err := g.Compile(opts)
	if err != nil {
		t.Fatalf("compile (NoFusion=%v): %v\ngraph as built:\n%s", opts.NoFusion, err, irText(g.IR()))
	}
	return p
}

// dump returns one of the program's dumps as a string.
func dump(t testing.TB, p *graph.Program, format string) string {
	t.Helper()
	var b strings.Builder
	if err := p.Dump(&b, format); err != nil {
		t.Fatalf("dump %s: %v", format, err)
	}
	return b.String()
}

// irText is the text form of an IR graph.
func irText(g *ir.Graph) string {
	var b strings.Builder
	if err := ir.WriteText(&b, g, nil); err != nil {
		return "(cannot print: " + err.Error() + ")"
	}
	return b.String()
}

func kernels(p *graph.Program) []*plan.Kernel {
	var ks []*plan.Kernel
	for _, s := range p.Plan().Steps {
		ks = append(ks, s.Kernel)
	}
	return ks
}

// computeNodes counts the nodes of an IR graph that need a kernel: every
// node but inputs and views.
func computeNodes(g *ir.Graph) int {
	n := 0
	for _, nd := range g.Nodes {
		if nd.Op != ir.OpInput && nd.Op != ir.OpView {
			n++
		}
	}
	return n
}

// run executes p on a fresh poisoned CPU executor.
func run(p *graph.Program, in map[string]*tensor.Tensor, poison byte) (map[string]*tensor.Tensor, error) {
	return p.Run(context.Background(), cpu.New().Poison(poison), in)
}

func mustRun(t testing.TB, p *graph.Program, in map[string]*tensor.Tensor, poison byte) map[string]*tensor.Tensor {
	t.Helper()
	out, err := run(p, in, poison)
	if err != nil {
		t.Fatalf("run: %v\nplan:\n%s", err, dump(t, p, "plan"))
	}
	return out
}

// sameBits compares two sets of outputs bit for bit (NaN payloads included)
// and describes the first difference.
func sameBits(a, b map[string]*tensor.Tensor) error {
	names := make([]string, 0, len(a))
	for n := range a {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(a) != len(b) {
		return fmt.Errorf("%d outputs vs %d", len(a), len(b))
	}
	for _, n := range names {
		x, y := a[n], b[n]
		if y == nil {
			return fmt.Errorf("output %q missing", n)
		}
		if x.DType() != y.DType() || !slices.Equal(x.Shape(), y.Shape()) {
			return fmt.Errorf("output %q: %v%v vs %v%v", n, x.DType(), x.Shape(), y.DType(), y.Shape())
		}
		xb, yb := x.Bytes(), y.Bytes()
		if bytes.Equal(xb, yb) {
			continue
		}
		sz := x.DType().Size()
		for i := 0; i < len(xb); i += sz {
			if !bytes.Equal(xb[i:i+sz], yb[i:i+sz]) {
				e := i / sz
				return fmt.Errorf("output %q %v%v: element %d differs: %v (% x) vs %v (% x)", n, x.DType(), x.Shape(), e, x.Float64(e), xb[i:i+sz], y.Float64(e), yb[i:i+sz])
			}
		}
	}
	return nil
}

// randomInputs draws fresh non-zero values for every input of g: floats
// from a normal distribution (some small integers, so that comparisons can
// be equal), integers in small ranges.
func randomInputs(g *graph.Graph, r *rand.Rand) map[string]*tensor.Tensor {
	in := map[string]*tensor.Tensor{}
	for _, n := range g.IR().Inputs() {
		vals := make([]float64, n.Numel())
		for i := range vals {
			switch {
			case n.DType == dtype.U8 || n.DType == dtype.U32:
				vals[i] = float64(1 + r.IntN(6))
			case n.DType == dtype.I64:
				v := r.IntN(12) - 6
				if v >= 0 {
					v++
				}
				vals[i] = float64(v)
			case r.IntN(8) == 0:
				vals[i] = float64([]int{-3, -2, -1, 1, 2, 3}[r.IntN(6)])
			default:
				v := r.NormFloat64() * 2
				if v == 0 {
					v = 0.5
				}
				vals[i] = v
			}
		}
		t, err := tensor.FromFloat64s(n.DType, vals, n.Shape...)
		if err != nil {
			panic(err)
		}
		in[n.Name] = t
	}
	return in
}

// checkSlots checks the memory plan from the steps alone: every temporary
// has a slot big enough for it, and two temporaries that share a slot are
// never live at the same time. A temporary is live from the step that
// writes it to the last step that reads it (inclusive: a step's output must
// not overwrite its own operands).
func checkSlots(p *plan.Plan) error {
	write := map[*plan.Buffer]int{}
	last := map[*plan.Buffer]int{}
	for i, s := range p.Steps {
		for _, in := range s.Kernel.Ins {
			w, ok := write[in.Buf]
			if in.Buf.Kind != plan.BufInput && (!ok || w >= i) {
				return fmt.Errorf("step %d (%s) reads %v before any step writes it", i, s.Kernel.Name, in.Buf)
			}
			last[in.Buf] = i
		}
		b := s.Kernel.Out
		if _, dup := write[b]; dup {
			return fmt.Errorf("step %d (%s) writes %v a second time", i, s.Kernel.Name, b)
		}
		if b.Kind == plan.BufInput {
			return fmt.Errorf("step %d (%s) writes input %v", i, s.Kernel.Name, b)
		}
		write[b] = i
		last[b] = i
	}
	type life struct {
		b        *plan.Buffer
		from, to int
	}
	bySlot := map[int][]life{}
	for _, b := range p.Buffers {
		if b.Kind != plan.BufTemp {
			if b.Slot != -1 {
				return fmt.Errorf("%v: %v buffer has a slot", b, b.Kind)
			}
			continue
		}
		w, ok := write[b]
		if !ok {
			return fmt.Errorf("temporary %v is never written", b)
		}
		if b.Slot < 0 || b.Slot >= len(p.SlotBytes) {
			return fmt.Errorf("temporary %v has slot %d of %d", b, b.Slot, len(p.SlotBytes))
		}
		if b.Bytes() > p.SlotBytes[b.Slot] {
			return fmt.Errorf("temporary %v needs %d bytes, slot %d has %d", b, b.Bytes(), b.Slot, p.SlotBytes[b.Slot])
		}
		l := life{b, w, last[b]}
		for _, o := range bySlot[b.Slot] {
			if l.from <= o.to && o.from <= l.to {
				return fmt.Errorf("temporaries %v (steps %d..%d) and %v (steps %d..%d) share slot %d while both live", o.b, o.from, o.to, b, l.from, l.to, b.Slot)
			}
		}
		bySlot[b.Slot] = append(bySlot[b.Slot], l)
	}
	return nil
}

// Kernel names: E_<ops>_<numel> for elementwise kernels, R_<ops>_<rows>x<rowlen>
// for row (reduction) kernels, I_<op>_<numel> for indexing steps,
// W_<ops>_<numel> for window steps and fused window kernels.
var kernelNameRE = regexp.MustCompile(`^([ERIMW])_([a-z]+(_[a-z]+)*)_([0-9]+(x[0-9]+)*)$`)

// checkPlan checks structural invariants of any plan: kernel names, operand
// counts (fused plans), operand dims, what each kernel stores, memory slots.
func checkPlan(p *plan.Plan) error {
	var errs []string
	for i, s := range p.Steps {
		k := s.Kernel
		size := fmt.Sprint(k.Numel())
		if k.RowAxes > 0 {
			size = fmt.Sprintf("%dx%d", ir.Numel(k.RowShape()), k.RowLen())
		}
		if k.IsMatmul() {
			// M_matmul_<batch>x<M>x<K>x<N>; operands have their own dims.
			n, r := k.Instrs[0].Node, len(k.Shape)
			size = fmt.Sprintf("%dx%dx%dx%d", ir.Numel(k.Shape[:r-2]), k.Shape[r-2], n.Args[0].Shape[r-1], k.Shape[r-1])
		}
		if m := kernelNameRE.FindStringSubmatch(k.Name); m == nil || m[4] != size {
			errs = append(errs, fmt.Sprintf("step %d: kernel name %q is not X_<ops>_%s", i, k.Name, size))
		}
		if p.Fused && len(k.Ins) > fuse.MaxKernelInputs {
			errs = append(errs, fmt.Sprintf("step %d: kernel %s has %d operands, MaxKernelInputs is %d", i, k.Name, len(k.Ins), fuse.MaxKernelInputs))
		}
		if !p.Fused && len(k.Instrs) != 1 {
			errs = append(errs, fmt.Sprintf("step %d: unfused kernel %s has %d instructions", i, k.Name, len(k.Instrs)))
		}
		for j, in := range k.Ins {
			if k.IsWindow() {
				continue // a conv's, a pool's operands have their own dims
			}
			if w := k.CoreAt(); w >= 0 && slices.ContainsFunc(k.Instrs[w].Node.Args, func(a *ir.Node) bool { return slices.Equal(in.Layout.Dims, a.Shape) }) {
				continue // a fused core's prologue and operands read its arguments' dims
			}
			if !k.IsMatmul() && !slices.Equal(in.Layout.Dims, k.Shape) && (k.RowAxes == 0 || !slices.Equal(in.Layout.Dims, k.RowShape())) {
				errs = append(errs, fmt.Sprintf("step %d: operand %d has dims %v, kernel shape %v", i, j, in.Layout.Dims, k.Shape))
			}
		}
		if root := k.Instrs[len(k.Instrs)-1].Node; root.DType != k.Out.DType || root.Numel() != k.Out.Numel() {
			errs = append(errs, fmt.Sprintf("step %d: kernel %s stores %v%v into %v", i, k.Name, root.DType, root.Shape, k.Out))
		}
	}
	if err := checkSlots(p); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// logLines returns the compile log's lines that contain every one of the
// given substrings.
func logLines(log string, subs ...string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// head returns the first n lines of s, saying how many were left out.
func head(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) <= n+1 {
		return s
	}
	return strings.Join(lines[:n], "") + fmt.Sprintf("… (%d more lines)\n", len(lines)-n)
}

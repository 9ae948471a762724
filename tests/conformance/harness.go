package conformance

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/tensor"
)

// Poisons are the bytes fresh executor memory is filled with, one run each.
var Poisons = []byte{0xFF, 0x00}

var seedOnce = sync.OnceValue(func() uint64 {
	if s, err := strconv.ParseUint(os.Getenv("LOOM_SEED"), 10, 64); err == nil {
		return s
	}
	return uint64(time.Now().UnixNano())
})

// suite is the state of one group run: the executors (one per poison byte),
// the compile options and the seed.
type suite struct {
	execs []exec.Executor
	opts  graph.Options
	seed  uint64
	cov   *coverage
}

func newSuite(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) *suite {
	s := &suite{opts: opts, seed: seedOnce(), cov: newCoverage()}
	for _, p := range Poisons {
		s.execs = append(s.execs, newExec(p))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("random inputs from seed %d: rerun with LOOM_SEED=%d go test -run '%s'", s.seed, s.seed, t.Name())
		}
	})
	return s
}

// rng returns the generator of one test: the seed mixed with its name, so
// that a case draws the same inputs whether it runs alone or in its group.
func (s *suite) rng(t *testing.T) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(t.Name()))
	return rand.New(rand.NewPCG(s.seed, h.Sum64()))
}

// want is an expected output.
type want struct {
	name string
	v    vals // floats: the exact (unrounded) result
	tol  tolerance
	// signFree: the sign of a zero result is unspecified.
	signFree bool
	// scale: optional per-element magnitude for relative tolerances.
	scale []float64
	// args: the operands broadcast to the output shape, for messages.
	args []vals
}

// tcase is one graph under test: inputs, outputs and their expected values.
type tcase struct {
	t      *testing.T
	s      *suite
	r      *rand.Rand
	g      *graph.Graph
	inputs map[string]*tensor.Tensor
	wants  []want
}

func (s *suite) newCase(t *testing.T) *tcase {
	return &tcase{t: t, s: s, r: s.rng(t), g: graph.New(), inputs: map[string]*tensor.Tensor{}}
}

// input declares a graph input of dt and shape with random values from g.
func (c *tcase) input(name string, dt dtype.DType, shape []int, g gen) (*graph.Tensor, vals) {
	v := g.draw(c.r, dt, shape)
	return c.inputVals(name, v), v
}

// inputVals declares a graph input holding v.
func (c *tcase) inputVals(name string, v vals) *graph.Tensor {
	c.t.Helper()
	ht, err := toTensor(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.inputs[name] = ht
	return c.g.Input(name, v.dt, v.shape...)
}

// expect declares output name = y with its expected value.
func (c *tcase) expect(name string, y *graph.Tensor, w want) {
	w.name = name
	c.g.Output(name, y)
	c.wants = append(c.wants, w)
}

// run compiles the graph (verifier on), runs it on every executor and checks
// every output. It reports panics as failures.
func (c *tcase) run() {
	t := c.t
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	prog := c.compile()
	for i, e := range c.s.execs {
		before := map[string][]byte{}
		for name, in := range c.inputs {
			before[name] = bytes.Clone(in.Bytes())
		}
		out, err := prog.Run(context.Background(), e, c.inputs)
		if err != nil {
			t.Fatalf("run on %s (poison 0x%02X): %v", e.Name(), Poisons[i], err)
		}
		for name, in := range c.inputs {
			if !bytes.Equal(before[name], in.Bytes()) {
				t.Errorf("run on %s modified input %q", e.Name(), name)
			}
		}
		if len(out) != len(c.wants) {
			t.Errorf("run returned %d outputs, want %d", len(out), len(c.wants))
		}
		checkNoAliasing(t, c.inputs, out)
		for _, w := range c.wants {
			c.check(w, out[w.name], fmt.Sprintf("%s, poison 0x%02X", e.Name(), Poisons[i]))
		}
	}
}

// compile compiles with the verifier after every pass and verifies the
// builder and compiled graphs once more; it records coverage.
func (c *tcase) compile() *graph.Program {
	t := c.t
	t.Helper()
	if err := ir.Verify(c.g.IR()); err != nil {
		t.Fatalf("builder graph fails ir.Verify: %v", err)
	}
	opts := c.s.opts
	opts.Check = true
	prog, err := c.g.Compile(opts)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if err := ir.Verify(prog.Plan().Graph); err != nil {
		t.Fatalf("compiled graph fails ir.Verify: %v", err)
	}
	c.s.cov.record(prog.Plan().Graph)
	return prog
}

// checkNoAliasing fails if two outputs, or an output and an input, share
// memory: outputs are fresh buffers the caller owns.
func checkNoAliasing(t *testing.T, inputs, outputs map[string]*tensor.Tensor) {
	t.Helper()
	type span struct {
		name   string
		lo, hi uintptr
	}
	var spans []span
	add := func(kind, name string, tt *tensor.Tensor) {
		if tt == nil {
			return
		}
		if b := tt.Bytes(); len(b) > 0 {
			lo := uintptr(unsafe.Pointer(&b[0]))
			spans = append(spans, span{kind + " " + name, lo, lo + uintptr(len(b))})
		}
	}
	for n, tt := range inputs {
		add("input", n, tt)
	}
	for n, tt := range outputs {
		add("output", n, tt)
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.lo < b.hi && b.lo < a.hi && (strings.HasPrefix(a.name, "output") || strings.HasPrefix(b.name, "output")) {
				t.Errorf("%s and %s share memory", a.name, b.name)
			}
		}
	}
}

// maxReported bounds the mismatching elements listed per output.
const maxReported = 4

// check compares one output with its expected value.
func (c *tcase) check(w want, got *tensor.Tensor, where string) {
	t := c.t
	t.Helper()
	if got == nil {
		t.Errorf("%s: output %q missing", where, w.name)
		return
	}
	if got.DType() != w.v.dt || !slices.Equal(got.Shape(), w.v.shape) {
		t.Errorf("%s: output %q is %v%v, want %v%v", where, w.name, got.DType(), got.Shape(), w.v.dt, w.v.shape)
		return
	}
	gv, err := fromTensor(got)
	if err != nil {
		t.Errorf("%s: output %q: %v", where, w.name, err)
		return
	}
	bad, first := 0, []int{}
	for k := range gv.n() {
		var ok bool
		if w.v.dt.IsFloat() {
			scale := 0.0
			if w.scale != nil {
				scale = w.scale[k]
			}
			ok = w.tol.ok(w.v.dt, gv.f[k], w.v.f[k], scale, w.signFree)
		} else {
			ok = gv.i[k] == w.v.i[k]
		}
		if !ok {
			if bad++; len(first) < maxReported {
				first = append(first, k)
			}
		}
	}
	if bad == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: output %q %v%v: %d of %d elements differ (tolerance %s)", where, w.name, w.v.dt, w.v.shape, bad, gv.n(), w.tol.name)
	co := make([]int, len(w.v.shape))
	for _, k := range first {
		coords(w.v.shape, k, co)
		fmt.Fprintf(&b, "\n  at %v: got %s, want %s", co, gv.elem(k), w.v.elem(k))
		if w.v.dt.IsFloat() && w.v.dt != dtype.F64 {
			fmt.Fprintf(&b, " (rounded to %v: %v)", w.v.dt, roundFloat(w.v.dt, w.v.f[k]))
		}
		for a, av := range w.args {
			if av.n() == gv.n() {
				fmt.Fprintf(&b, "; arg%d=%s", a, av.elem(k))
			}
		}
	}
	t.Error(b.String())
}

// coverage records which (op, dtype) pairs the compiled graphs of a group
// exercised, so that a group can prove it covered the op table.
type coverage struct {
	mu    sync.Mutex
	ops   map[ir.Op]map[dtype.DType]bool
	casts map[[2]dtype.DType]bool // from, to
	where map[[2]dtype.DType]bool // condition, value
}

func newCoverage() *coverage {
	return &coverage{ops: map[ir.Op]map[dtype.DType]bool{}, casts: map[[2]dtype.DType]bool{}, where: map[[2]dtype.DType]bool{}}
}

func (cv *coverage) record(g *ir.Graph) {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	for _, n := range g.Nodes {
		dt := n.DType
		if len(n.Args) > 0 {
			dt = n.Args[n.Info().ValueArgs()].DType
		}
		if cv.ops[n.Op] == nil {
			cv.ops[n.Op] = map[dtype.DType]bool{}
		}
		cv.ops[n.Op][dt] = true
		switch n.Op {
		case ir.OpCast:
			cv.casts[[2]dtype.DType{n.Args[0].DType, n.DType}] = true
		case ir.OpWhere:
			cv.where[[2]dtype.DType{n.Args[0].DType, dt}] = true
		}
	}
}

// partialRun reports whether -run selects subtests (so a group may run in
// part and its coverage check must not fail).
func partialRun() bool {
	f := flag.Lookup("test.run")
	return f != nil && strings.Contains(f.Value.String(), "/")
}

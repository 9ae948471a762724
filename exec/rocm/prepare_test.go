package rocm

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// failingCompiler wraps a compiler and fails every source containing
// marker, with a log of several lines.
type failingCompiler struct {
	hip.Compiler
	marker string
}

func (c failingCompiler) Compile(src, name, arch string, opts []string) ([]byte, string, error) {
	if strings.Contains(src, c.marker) {
		log := name + "(12): error: identifier \"boom\" is undefined\n" + name + "(13): error: expected a \";\"\n2 errors detected"
		return nil, log, errors.New("compile failed")
	}
	return c.Compiler.Compile(src, name, arch, opts)
}

// twoKernels is a plan of two GPU steps: a row kernel (softmax) and an
// elementwise gelu after it (a sum in between keeps them apart).
func twoKernels(t *testing.T) *graph.Program {
	t.Helper()
	g := graph.New()
	x := g.Input("x", dtype.F32, 4, 8)
	s := x.Softmax(1)
	g.Output("out", s.Add(s.Sum(0)).Gelu())
	p, err := g.Compile(graph.Options{NoFusion: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Plan().Steps) < 2 {
		t.Fatalf("want several steps, got %d", len(p.Plan().Steps))
	}
	return p
}

// TestPrepareCompileErrorNoDevice: with a compiler that fails everything,
// Prepare fails naming a step, its kernel and the log's first lines (not
// the whole numbered source), and marks nothing prepared. No device is
// needed: nothing gets as far as loading.
func TestPrepareCompileErrorNoDevice(t *testing.T) {
	e := compileOnly(t)
	e.comp = failingCompiler{Compiler: e.comp, marker: ""}
	p := twoKernels(t)
	err := p.Prepare(context.Background(), e)
	if err == nil {
		t.Fatal("Prepare succeeded with a failing compiler")
	}
	msg := err.Error()
	for _, want := range []string{"rocm: prepare step ", "compiling kernel ", `identifier "boom" is undefined`, `expected a ";"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "extern \"C\"") || strings.Count(msg, "\n") > 10 {
		t.Errorf("error quotes the source or is too long (%d lines):\n%s", strings.Count(msg, "\n"), msg)
	}
	var ce *compileError
	if !errors.As(err, &ce) || !strings.Contains(ce.Error(), "--- source") {
		t.Errorf("the full compile error (with source) is not reachable with errors.As: %v", err)
	}
	if _, ok := p.Plan().Cache.Load(plan.KeyOf(e, preparedKey{})); ok {
		t.Error("plan marked prepared after a failed Prepare")
	}
	for i, s := range p.Plan().Steps {
		if e.prepared(s.Kernel) {
			t.Errorf("step %d (%s) is left prepared after a failed Prepare", i, s.Kernel.Name)
		}
	}
}

// TestGPUPrepare: Prepare compiles every kernel before the first run (the
// run then compiles nothing and loads nothing); a kernel that fails to
// compile fails Prepare and Run with an error naming its step, leaves the
// other kernels unprepared, and the executor runs the plan correctly once
// the compiler works again.
func TestGPUPrepare(t *testing.T) {
	e := freshGPU(t)
	ctx := context.Background()
	p := twoKernels(t)
	real := e.comp
	e.comp = failingCompiler{Compiler: real, marker: "loom_gelu"}
	// A new cache directory: nothing of this plan is on disk, so the
	// failing compiler is asked.
	t.Setenv(CacheDirEnv, t.TempDir())
	ForgetCompiled()
	err := p.Prepare(ctx, e)
	if err == nil || !strings.Contains(err.Error(), "prepare step") || !strings.Contains(err.Error(), "gelu") {
		t.Fatalf("Prepare with a failing gelu compile: %v", err)
	}
	for i, s := range p.Plan().Steps {
		if e.prepared(s.Kernel) {
			t.Errorf("step %d (%s) prepared after a failed Prepare", i, s.Kernel.Name)
		}
	}
	xs := make([]float64, 32)
	for i := range xs {
		xs[i] = float64(float32(math.Sin(float64(i))))
	}
	x, err := tensor.FromFloat64s(dtype.F32, xs, 4, 8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(ctx, e, map[string]*tensor.Tensor{"x": x}); err == nil || !strings.Contains(err.Error(), "prepare step") {
		t.Fatalf("Run with a failing compile: %v", err)
	}
	e.comp = real
	before := e.Stats()
	if err := p.Prepare(ctx, e); err != nil {
		t.Fatalf("Prepare after the compiler recovered: %v", err)
	}
	mid := e.Stats()
	out, err := p.Run(ctx, e, map[string]*tensor.Tensor{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	after := e.Stats()
	if mid.Kernels.KernelsReady == before.Kernels.KernelsReady {
		t.Error("Prepare readied no kernel")
	}
	if after.Kernels.Compiles != mid.Kernels.Compiles || after.Kernels.ModuleLoads != mid.Kernels.ModuleLoads || after.Kernels.KernelsReady != mid.Kernels.KernelsReady {
		t.Errorf("the first run after Prepare compiled or loaded: before run %+v, after %+v", mid.Kernels, after.Kernels)
	}
	// Reference: softmax over dim 1, plus its column sums, gelu (tanh form).
	ref := make([]float64, 32)
	s := make([]float64, 32)
	for r := range 4 {
		m, z := math.Inf(-1), 0.0
		for c := range 8 {
			m = math.Max(m, xs[r*8+c])
		}
		for c := range 8 {
			z += math.Exp(xs[r*8+c] - m)
		}
		for c := range 8 {
			s[r*8+c] = math.Exp(xs[r*8+c]-m) / z
		}
	}
	for r := range 4 {
		for c := range 8 {
			col := 0.0
			for rr := range 4 {
				col += s[rr*8+c]
			}
			v := s[r*8+c] + col
			ref[r*8+c] = 0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v)))
		}
	}
	got := out["out"]
	for i := range ref {
		if d := math.Abs(got.Float64(i) - ref[i]); d > 1e-5*math.Max(1, math.Abs(ref[i])) {
			t.Fatalf("out[%d] = %v, want %v", i, got.Float64(i), ref[i])
		}
	}
}

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
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// TestStartWithoutMarker: on an executor that cannot wait for one run
// apart (the CPU), Start runs the plan to its end: the outputs are the
// run's, Wait returns nil (twice), Host hands them over, an unknown name
// is an error naming it, and a failing run fails at Start.
func TestStartWithoutMarker(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 2, 3)
	ids := g.Input("ids", dtype.U32, 2)
	g.Output("y", x.Exp().Sum(1))
	g.Output("z", x.IndexSelect(ids, 0))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := cpu.New()
	xt, _ := tensor.New([]float32{0, 1, 2, 3, 4, 5}, 2, 3)
	it, _ := tensor.New([]uint32{1, 0}, 2)
	in := map[string]exec.Value{"x": xt, "ids": it}
	want, err := p.RunValues(context.Background(), e, in, true)
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Start(context.Background(), e, in)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.Wait(); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
	for _, name := range []string{"y", "z"} {
		h, err := r.Host(name)
		if err != nil {
			t.Fatal(err)
		}
		w := want[name].(*tensor.Tensor)
		if !slices.Equal(h.Float64s(), w.Float64s()) || !slices.Equal(r.Outputs()[name].Shape(), w.Shape()) {
			t.Errorf("%s = %v, want %v", name, h.Float64s(), w.Float64s())
		}
	}
	if _, err := r.Host("w"); err == nil || !strings.Contains(err.Error(), `"w"`) {
		t.Errorf("an unknown output: %v", err)
	}
	bad, _ := tensor.New([]uint32{1, 7}, 2)
	if _, err := p.Start(context.Background(), e, map[string]exec.Value{"x": xt, "ids": bad}); err == nil || !strings.Contains(err.Error(), "7") {
		t.Errorf("a bad id: %v", err)
	}
}

// markedCPU is the CPU executor as a Resident Marker, the shape of the GPU
// executor for Start: each step registers a deferred check and a release
// (as the GPU's indexing kernels do with their error flags), and the log
// records when the mark, its wait, the checks and the releases happen.
type markedCPU struct {
	*cpu.Executor
	log    []string
	fail   error // a deferred check's error
	noMark bool  // Mark declines (a run with collectives on the GPU)
}

// markedTensor is a resident value of markedCPU: its output memory.
type markedTensor struct {
	e *markedCPU
	m exec.Memory
	b *plan.Buffer
}

func (t *markedTensor) DType() dtype.DType              { return t.b.DType }
func (t *markedTensor) Shape() []int                    { return slices.Clone(t.b.Shape) }
func (t *markedTensor) Owner() exec.Executor            { return t.e }
func (t *markedTensor) ToHost() (*tensor.Tensor, error) { return t.e.Download(t.m, t.b) }

func (e *markedCPU) Adopt(v exec.Value) (exec.Memory, bool, error) {
	t, ok := v.(*markedTensor)
	if !ok || t.e != e {
		return nil, false, nil
	}
	return t.m, true, nil
}

func (e *markedCPU) Wrap(m exec.Memory, b *plan.Buffer) (exec.ResidentValue, error) {
	return &markedTensor{e: e, m: m, b: b}, nil
}

func (e *markedCPU) Run(ctx context.Context, s *plan.Step, mem []exec.Memory) error {
	if err := e.Executor.Run(ctx, s, mem); err != nil {
		return err
	}
	exec.DeferCheck(ctx, func() error {
		e.log = append(e.log, "check")
		return e.fail
	}, func() { e.log = append(e.log, "release") })
	return nil
}

func (e *markedCPU) Mark(context.Context) (func() error, bool) {
	if e.noMark {
		return nil, false
	}
	e.log = append(e.log, "mark")
	return func() error { e.log = append(e.log, "wait"); return nil }, true
}

// TestStartOnMarker: on a Marker, Start returns before the run's wait, its
// deferred checks and its releases, which Wait does in that order, once;
// the outputs are resident values that a second run takes as inputs
// before the first is waited for; a check's error comes from Wait (and
// again from Host); a Marker that declines is waited for at Start.
func TestStartOnMarker(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 2, 3)
	g.Output("y", x.Exp().Mul(x))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	xt, _ := tensor.New([]float32{0, 1, 2, 3, 4, 5}, 2, 3)
	ctx := context.Background()
	want, err := p.Run(ctx, cpu.New(), map[string]*tensor.Tensor{"x": xt})
	if err != nil {
		t.Fatal(err)
	}
	e := &markedCPU{Executor: cpu.New()}
	r1, err := p.Start(ctx, e, map[string]exec.Value{"x": xt})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.log, []string{"mark"}) {
		t.Fatalf("after Start: %v, want only the mark", e.log)
	}
	y1, ok := r1.Outputs()["y"].(*markedTensor)
	if !ok {
		t.Fatalf("output y is a %T, want the executor's resident value", r1.Outputs()["y"])
	}
	// The second run reads the first's output before the first is waited
	// for (y2 = f(f(x))).
	r2, err := p.Start(ctx, e, map[string]exec.Value{"x": y1})
	if err != nil {
		t.Fatal(err)
	}
	e.log = nil
	for range 2 {
		if err := r1.Wait(); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
	if !slices.Equal(e.log, []string{"wait", "check", "release"}) {
		t.Errorf("Wait did %v, want the mark's wait, then the check, then the release, once", e.log)
	}
	h1, err := r1.Host("y")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h1.Float64s(), want["y"].Float64s()) {
		t.Errorf("y = %v, want %v", h1.Float64s(), want["y"].Float64s())
	}
	want2, err := p.Run(ctx, cpu.New(), map[string]*tensor.Tensor{"x": want["y"]})
	if err != nil {
		t.Fatal(err)
	}
	h2, err := r2.Host("y")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h2.Float64s(), want2["y"].Float64s()) {
		t.Errorf("the chained run's y = %v, want %v", h2.Float64s(), want2["y"].Float64s())
	}
	// A deferred check's error comes from Wait, after the run's wait, and
	// the release still happens.
	e.fail, e.log = errors.New("bad id 9"), nil
	r3, err := p.Start(ctx, e, map[string]exec.Value{"x": xt})
	if err != nil {
		t.Fatalf("Start with a failing check: %v (the check is Wait's)", err)
	}
	if err := r3.Wait(); err == nil || !strings.Contains(err.Error(), "bad id 9") {
		t.Errorf("Wait: %v, want the check's error", err)
	}
	if _, err := r3.Host("y"); err == nil || !strings.Contains(err.Error(), "bad id 9") {
		t.Errorf("Host after a failed Wait: %v, want the check's error", err)
	}
	if !slices.Equal(e.log, []string{"mark", "wait", "check", "release"}) {
		t.Errorf("a failing run did %v", e.log)
	}
	// A Marker that declines: Start waits, checks and releases at once.
	e.fail, e.noMark, e.log = nil, true, nil
	r4, err := p.Start(ctx, e, map[string]exec.Value{"x": xt})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.log, []string{"check", "release"}) {
		t.Errorf("a declined mark: Start did %v, want the check and the release", e.log)
	}
	if err := r4.Wait(); err != nil {
		t.Errorf("Wait after a declined mark: %v", err)
	}
}

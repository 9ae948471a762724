package rocm

import (
	"context"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUProfileSteps runs a linear layer with an epilogue three times with
// step profiling on: one label a step, counted three times each, positive
// device times, the matmul labelled with its operands' (logical) shapes; Profile
// starts the next profile empty, and is an error once profiling is off.
func TestGPUProfileSteps(t *testing.T) {
	e := freshGPU(t)
	g := graph.New()
	x := g.Input("x", dtype.F32, 64, 256)
	w := g.Input("w", dtype.F32, 512, 256)
	g.Output("y", graph.Linear(x, w, nil).Relu().Affine(2, 0))
	// Unfused, so that the product is a step of its own (fused, its
	// epilogue joins it: one label, "matmul+relu+affine f32 [64 512]").
	p, err := g.Compile(graph.Options{NoFusion: true})
	if err != nil {
		t.Fatal(err)
	}
	xt, _ := tensor.FromFloat64s(dtype.F32, make([]float64, 64*256), 64, 256)
	wt, _ := tensor.FromFloat64s(dtype.F32, make([]float64, 512*256), 512, 256)
	in := map[string]*tensor.Tensor{"x": xt, "w": wt}
	if _, err := e.Profile(); err == nil {
		t.Error("Profile before ProfileSteps(true): no error")
	}
	if err := e.ProfileSteps(true); err != nil {
		t.Fatal(err)
	}
	const runs = 3
	for range runs {
		if _, err := p.Run(context.Background(), e, in); err != nil {
			t.Fatal(err)
		}
	}
	prof, err := e.Profile()
	if err != nil {
		t.Fatal(err)
	}
	steps := len(p.Plan().Steps)
	if len(prof) != steps {
		t.Fatalf("%d labels for %d steps: %+v", len(prof), steps, prof)
	}
	matmul := false
	for _, st := range prof {
		t.Logf("%-60s %d× %.4f ms", st.Label, st.Count, st.Ms)
		if st.Count != runs || !(st.Ms > 0) {
			t.Errorf("%q: %d runs, %v ms; want %d runs and a positive time", st.Label, st.Count, st.Ms, runs)
		}
		if st.Label == "matmul f32 [64 256] · [256 512] → [64 512]" {
			matmul = true
		}
	}
	if !matmul {
		t.Errorf("no matmul step labelled with its shapes in %+v", prof)
	}
	if again, err := e.Profile(); err != nil || len(again) != 0 {
		t.Errorf("second Profile = %+v, %v; want empty", again, err)
	}
	if err := e.ProfileSteps(false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Profile(); err == nil {
		t.Error("Profile after ProfileSteps(false): no error")
	}
}

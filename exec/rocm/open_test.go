package rocm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/exec/rocm"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestOpenWithoutDevice checks the errors on a machine without a GPU: an
// explicit "rocm" fails saying why, "auto" falls back to the CPU and says
// why.
func TestOpenWithoutDevice(t *testing.T) {
	if p, err := hip.Load(); err == nil {
		t.Skipf("a %s GPU is present; the no-device errors cannot be seen here", p.Name())
	}
	_, err := rocm.Open()
	if err == nil {
		t.Fatal("rocm.Open succeeded without a device")
	}
	t.Logf("rocm.Open: %v", err)
	_, _, err = exec.Open("rocm")
	if err == nil {
		t.Fatal(`exec.Open("rocm") succeeded without a device`)
	}
	t.Logf(`exec.Open("rocm"): %v`, err)
	for _, want := range []string{"open rocm", "no usable GPU platform", "amd:", "nvidia:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q", want)
		}
	}
	e, why, err := exec.Open("auto")
	if err != nil {
		t.Fatalf(`exec.Open("auto"): %v`, err)
	}
	t.Logf(`exec.Open("auto"): %s: %s`, e.Name(), why)
	if e.Name() != "cpu" || !strings.Contains(why, "no usable GPU platform") {
		t.Errorf(`auto chose %s because %q`, e.Name(), why)
	}
}

func TestRunValuesCPU(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 2, 3)
	g.Output("y", x.Mul(graph.Scalar(2)))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := tensor.New([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	e := cpu.New()
	for _, keep := range []bool{false, true} {
		out, err := p.RunValues(context.Background(), e, map[string]exec.Value{"x": in}, keep)
		if err != nil {
			t.Fatal(err)
		}
		y, ok := out["y"].(*tensor.Tensor)
		if !ok {
			t.Fatalf("keep=%v: CPU output is %T, want a host tensor", keep, out["y"])
		}
		if v, _ := tensor.Values[float32](y); v[5] != 12 {
			t.Errorf("y = %v", v)
		}
	}
	// Same validation as Run.
	_, err = p.RunValues(context.Background(), e, map[string]exec.Value{"x": nil, "z": in}, false)
	if err == nil || !strings.Contains(err.Error(), `missing input "x"`) || !strings.Contains(err.Error(), `unknown input "z"`) {
		t.Errorf("bad inputs: %v", err)
	}
	var nilT *tensor.Tensor
	if _, err := p.Run(context.Background(), e, map[string]*tensor.Tensor{"x": nilT}); err == nil || !strings.Contains(err.Error(), `missing input "x"`) {
		t.Errorf("nil tensor: %v", err)
	}
	wrong, _ := tensor.New([]float32{1, 2}, 2)
	if _, err := p.RunValues(context.Background(), e, map[string]exec.Value{"x": wrong}, false); err == nil || !strings.Contains(err.Error(), "graph declares f32[2 3]") {
		t.Errorf("wrong shape: %v", err)
	}
	// An unsupported value type.
	if _, err := p.RunValues(context.Background(), e, map[string]exec.Value{"x": fakeValue{}}, false); err == nil || !strings.Contains(err.Error(), "unsupported value type") {
		t.Errorf("fake value: %v", err)
	}
}

type fakeValue struct{}

func (fakeValue) DType() dtype.DType { return dtype.F32 }
func (fakeValue) Shape() []int       { return []int{2, 3} }

package rocm

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
)

// TestMatmulFallsBack needs no GPU: the executor refuses matmul steps, so
// the runner sends them to the CPU with transfers, and the placement says
// why and which BLAS the CPU uses; the epilogue stays on the GPU.
func TestMatmulFallsBack(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F16, 4, 8)
	w := g.Input("w", dtype.F16, 3, 8)
	g.Output("y", graph.Linear(x, w, nil).Silu())
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &Executor{info: hip.DeviceInfo{Platform: hip.NVIDIA, Name: "Fake GPU", Arch: "sm_00"}}
	for _, s := range p.Plan().Steps {
		err := e.Supports(s.Kernel)
		if s.Kernel.IsMatmul() != (err != nil) {
			t.Errorf("%s: Supports = %v", s.Kernel.Name, err)
		}
	}
	pl := exec.Placement(p.Plan(), e)
	for _, want := range []string{"matmul on cpu: ", "M_matmul_1x4x8x3 on cpu (fallback: matmul runs on the CPU until the GPU GEMM lands)", "transfer b0, b1: rocm → cpu", "E_silu_12 on rocm"} {
		if !strings.Contains(pl, want) {
			t.Errorf("placement lacks %q:\n%s", want, pl)
		}
	}
	t.Log(pl)
}

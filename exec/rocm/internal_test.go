package rocm

import (
	"context"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
)

// TestResidentOnOtherExecutor feeds a tensor resident on a (device-less)
// rocm executor to the CPU executor: the error names both.
func TestResidentOnOtherExecutor(t *testing.T) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 4)
	g.Output("y", x.Neg())
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &Executor{info: hip.DeviceInfo{Platform: hip.NVIDIA, Name: "Fake GPU", Arch: "sm_00"}}
	r := &Tensor{e: e, dt: dtype.F32, shape: []int{4}, blk: &block{}}
	_, err = p.RunValues(context.Background(), cpu.New(), map[string]exec.Value{"x": r}, false)
	if err == nil {
		t.Fatal("a rocm tensor was accepted by the CPU executor")
	}
	t.Log(err)
	for _, want := range []string{`input "x"`, "f32[4] is resident on rocm executor", "Fake GPU", "plan runs on cpu executor"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
}

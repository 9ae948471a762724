package exec_test

import (
	"context"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// plain hides the CPU executor's optional interfaces (SlotAllocator,
// OutputBinder), like an executor whose memory is not host memory: RunInto
// must allocate its outputs, download them and copy them into the caller's
// tensors.
type plain struct{ exec.Executor }

func TestRunIntoDownloadsOnOtherExecutors(t *testing.T) {
	ctx := context.Background()
	g := graph.New()
	x := g.Input("x", dtype.F32, 3, 50)
	g.Output("y", x.Softmax(-1).Add(x.Exp()))
	g.Output("idx", x.Argsort(true))
	p, err := g.Compile(graph.Options{NoFusion: true})
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]float32, 150)
	for i := range vals {
		vals[i] = float32((i*37)%29) - 14
	}
	xt, _ := tensor.New(vals, 3, 50)
	in := map[string]*tensor.Tensor{"x": xt}
	want, err := p.Run(ctx, cpu.New(), in)
	if err != nil {
		t.Fatal(err)
	}
	e := plain{cpu.New().Poison(0xFF)}
	if _, ok := exec.Executor(e).(exec.OutputBinder); ok {
		t.Fatal("plain still binds outputs")
	}
	y, _ := tensor.Zeros(dtype.F32, 3, 50)
	idx, _ := tensor.Zeros(dtype.U32, 3, 50)
	if err := p.RunInto(ctx, e, in, map[string]*tensor.Tensor{"y": y, "idx": idx}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(y.Bytes(), want["y"].Bytes()) || !slices.Equal(idx.Bytes(), want["idx"].Bytes()) {
		t.Errorf("RunInto through Download differs from Run")
	}
}

package rocm

import (
	"errors"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// rowsOnCPU is the GPU executor told that it has no row kernels, so that
// the runner's fallback path (exec.Fallbacker) runs on a real device: every
// GPU kernel exists today, and nothing would fall back otherwise.
type rowsOnCPU struct{ *Executor }

func (r rowsOnCPU) Supports(k *plan.Kernel) error {
	if k.RowAxes > 0 {
		return errors.New("row kernels sent to the CPU by the test")
	}
	return r.Executor.Supports(k)
}

// TestGPUFallback forces the CPU fallback: a reduction runs on the CPU with
// transfers, the indexing op and the elementwise kernels on the GPU, and
// the result equals a CPU-only run.
func TestGPUFallback(t *testing.T) {
	e := rowsOnCPU{openGPU(t)}
	g := graph.New()
	x := g.Input("x", dtype.F32, 64, 257)
	ids := g.Input("ids", dtype.I64, 5)
	sm := x.Affine(0.5, 0.25).Softmax(-1)
	g.Output("out", sm.IndexSelect(ids, 0).Gelu().Add(x.Narrow(0, 0, 5)))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pl := p.Placement(e)
	for _, want := range []string{"on cpu (fallback:", "on rocm", "transfer"} {
		if !strings.Contains(pl, want) {
			t.Errorf("placement lacks %q:\n%s", want, pl)
		}
	}
	t.Log(pl)
	in, err := genInputs(g, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	ids64, _ := tensor.New([]int64{3, 0, 63, 0x7FFFFFFFFFFFFFFF, 17}, 5) // incl. a sentinel
	in["ids"] = ids64
	want, err := p.Run(ctx, cpu.New(), in)
	if err != nil {
		t.Fatal(err)
	}
	e.Poison(0xff)
	got, err := p.Run(ctx, e, in)
	if err != nil {
		t.Fatal(err)
	}
	compareTensors(t, "fallback out", got["out"], want["out"], approx)
}

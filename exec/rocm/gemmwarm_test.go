package rocm

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUGemmWarm: Prepare makes each distinct vendor GEMM call of a plan
// once (gemmwarm.go): a prompt-sized product and a batched one are warmed
// once however many steps repeat it, a one-row product through a
// transposed weight (C = A·Bᵀ: a skinny kernel's, as a decode step's
// products are) is not, and the first run after Prepare gives the CPU's
// values. A one-row product with B untransposed goes to the vendor and is
// warmed (session 58 found it so on an H200).
func TestGPUGemmWarm(t *testing.T) {
	e := freshGPU(t)
	if e.gemm().vendor == nil || gemmWarmOff {
		t.Skipf("no vendor GEMM to warm (%s; LOOM_GEMM_WARM=0: %v)", e.GEMMBackend(), gemmWarmOff)
	}
	g := graph.New()
	x := g.Input("x", dtype.F32, 64, 96)
	w := g.Input("w", dtype.F32, 96, 80)
	v := g.Input("v", dtype.F32, 1, 96)
	wt := g.Input("wt", dtype.F32, 80, 96)
	y := x.Matmul(w)
	// The same call again (through a different operand) and a one-row
	// product with a weight stored [N, K], as a model's are.
	g.Output("y", y.Add(x.Exp().Matmul(w)))
	g.Output("z", v.Matmul(wt.T()))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Prepare(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	n := 0
	e.gemmWarm.Range(func(k, _ any) bool {
		c := k.(gemmWarmKey).c
		if c.M != 64 || c.N != 80 || c.K != 96 {
			t.Errorf("warmed %+v, want the 64×96·96×80 product only", c)
		}
		n++
		return true
	})
	if n != 1 {
		t.Errorf("%d calls warmed, want 1", n)
	}
	r := rand.New(rand.NewPCG(3, 4))
	in := map[string]*tensor.Tensor{}
	for name, shape := range map[string][]int{"x": {64, 96}, "w": {96, 80}, "v": {1, 96}, "wt": {80, 96}} {
		vals := make([]float64, shape[0]*shape[1])
		for i := range vals {
			vals[i] = r.Float64() - 0.5
		}
		in[name], _ = tensor.FromFloat64s(dtype.F32, vals, shape...)
	}
	got, err := p.Run(context.Background(), e, in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Run(context.Background(), cpu.New(), in)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"y", "z"} {
		a, b := got[name].Float64s(), want[name].Float64s()
		for i := range a {
			if d := a[i] - b[i]; d > 1e-3 || d < -1e-3 {
				t.Fatalf("%s[%d]: %v on the GPU, %v on the CPU", name, i, a[i], b[i])
			}
		}
	}
}

package rocm

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestMatmulSupported needs no GPU: the executor takes matmul steps itself
// (vendor BLAS or the portable kernel), so nothing falls back.
func TestMatmulSupported(t *testing.T) {
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
		if err := e.Supports(s.Kernel); err != nil {
			t.Errorf("%s: Supports = %v", s.Kernel.Name, err)
		}
	}
}

// TestGPUMatmul runs a linear layer with its epilogue on the GPU and on the
// CPU: same values within the GEMM's tolerance, every step on the GPU, the
// placement naming the GEMM library once; and where the vendor BLAS loads,
// it must be the one used (a present cuBLAS left unused is a failure).
func TestGPUMatmul(t *testing.T) {
	e := freshGPU(t)
	if err := hip.VendorBLASLoadable(e.Info().Platform); err == nil {
		if b := e.GEMMBackend(); !strings.HasPrefix(b, "cublas") && !strings.HasPrefix(b, "rocblas") {
			t.Errorf("the vendor BLAS loads here but matmul uses %q", b)
		}
	} else {
		t.Logf("no vendor BLAS (%v): the portable kernel runs", err)
	}
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		g := graph.New()
		x := g.Input("x", dt, 2, 37, 64)
		w := g.Input("w", dt, 48, 64)
		b := g.Input("b", dt, 48)
		r := g.Input("r", dt, 2, 37, 48)
		g.Output("y", graph.Linear(x, w, b).Gelu().Add(r))
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		pl := exec.Placement(p.Plan(), e)
		if strings.Contains(pl, "fallback") || !strings.Contains(pl, "matmul on rocm: ") {
			t.Errorf("%v placement:\n%s", dt, pl)
		}
		rng := rand.New(rand.NewPCG(3, uint64(dt)))
		in := map[string]*tensor.Tensor{}
		for _, n := range []struct {
			name  string
			shape []int
		}{{"x", []int{2, 37, 64}}, {"w", []int{48, 64}}, {"b", []int{48}}, {"r", []int{2, 37, 48}}} {
			vals := make([]float64, tensor.Numel(n.shape))
			for i := range vals {
				vals[i] = rng.NormFloat64() * 0.3
			}
			in[n.name], _ = tensor.FromFloat64s(dt, vals, n.shape...)
		}
		got, err := p.Run(context.Background(), e, in)
		if err != nil {
			t.Fatal(err)
		}
		want, err := p.Run(context.Background(), cpu.New(), in)
		if err != nil {
			t.Fatal(err)
		}
		tol := 1e-5
		if dt == dtype.BF16 {
			tol = 2e-2
		}
		gv, wv := got["y"].Float64s(), want["y"].Float64s()
		for i := range wv {
			if d := math.Abs(gv[i] - wv[i]); d > tol*math.Max(1, math.Abs(wv[i])) {
				t.Fatalf("%v: y[%d] GPU %v, CPU %v", dt, i, gv[i], wv[i])
			}
		}
	}
}

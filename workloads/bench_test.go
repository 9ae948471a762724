package workloads

import (
	"context"
	"testing"

	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// BenchmarkCPU runs each workload fused and unfused on the CPU at the
// default CPU sizes (2^24 elements, 2048 × 8192).
func BenchmarkCPU(b *testing.B) {
	sz := Size{Elems: 1 << 24, Rows: 2048, Cols: 8192}
	e := cpu.New()
	for _, w := range All {
		if w.Skip != "" {
			continue
		}
		for _, fused := range []bool{true, false} {
			name := w.ID + "/fused"
			if !fused {
				name = w.ID + "/unfused"
			}
			b.Run(name, func(b *testing.B) {
				g, err := w.Build(sz)
				if err != nil {
					b.Fatal(err)
				}
				p, err := g.Compile(graph.Options{NoFusion: !fused})
				if err != nil {
					b.Fatal(err)
				}
				in, err := Inputs(g, 1)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(Bytes(g)))
				b.ReportMetric(float64(len(p.Plan().Steps)), "kernels")
				for b.Loop() {
					if _, err := p.Run(context.Background(), e, in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkConv2dCPU is issue 13's CPU target: a ResNet 3×3 conv, N 8,
// C 64 → 64, 56×56, pad 1, f32 (W12 at CPUConv), run into an output held
// across runs; it reports GFLOP/s.
func BenchmarkConv2dCPU(b *testing.B) {
	w, err := ByID("W12")
	if err != nil {
		b.Fatal(err)
	}
	sz := Size{Conv: CPUConv}
	g, err := w.Build(sz)
	if err != nil {
		b.Fatal(err)
	}
	p, err := g.Compile(graph.Options{})
	if err != nil {
		b.Fatal(err)
	}
	in, err := Inputs(g, 1)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]*tensor.Tensor{}
	for _, o := range p.Plan().Outputs {
		if out[o.Name], err = tensor.Zeros(o.DType, o.Shape...); err != nil {
			b.Fatal(err)
		}
	}
	e := cpu.New()
	ctx := context.Background()
	if err := p.RunInto(ctx, e, in, out); err != nil { // arenas, BLAS threads
		b.Fatal(err)
	}
	for b.Loop() {
		if err := p.RunInto(ctx, e, in, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(w.Flops(sz)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

package workloads

import (
	"context"
	"testing"

	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
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

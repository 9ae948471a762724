package cpu_test

import (
	"context"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
)

// TestHugeOutputIsAnErrorNotAFatalOOM: plans whose peak bytes exceed what
// the host has (64 GiB of exp, 1 TiB of u8 arange) fail before allocating,
// with an error naming the peak and the available bytes; and with a small
// limit set, a plan above it fails while one below it still runs.
func TestHugeOutputIsAnErrorNotAFatalOOM(t *testing.T) {
	huge := []struct {
		name  string
		build func(g *graph.Graph) *graph.Tensor
		peak  string
	}{
		{"full_exp", func(g *graph.Graph) *graph.Tensor { return g.Full(dtype.F32, 1, 1, 1<<34).Exp() }, "687194767"}, // 64 GiB (+ 4 bytes unfused)
		{"arange_u8", func(g *graph.Graph) *graph.Tensor { return g.Arange(dtype.U8, 0, 1<<40, 1) }, "10995116277"},
	}
	for _, c := range huge {
		for _, fusion := range []bool{true, false} {
			g := graph.New()
			g.Output("y", c.build(g))
			p, err := g.Compile(graph.Options{NoFusion: !fusion})
			if err != nil {
				t.Fatalf("%s: compile: %v", c.name, err)
			}
			e := cpu.New()
			_, err = p.Run(context.Background(), e, nil)
			if err == nil || !strings.Contains(err.Error(), c.peak) || !strings.Contains(err.Error(), "available") {
				t.Errorf("%s fused=%v: got error %v, want one naming the peak %s bytes and the available bytes", c.name, fusion, err, c.peak)
			}
			if s := e.MemStats(); s.ArenasMade != 0 {
				t.Errorf("%s fused=%v: %d arenas made before the error", c.name, fusion, s.ArenasMade)
			}
		}
	}

	g := graph.New()
	g.Output("y", g.Full(dtype.F32, 1, 1<<20).Exp()) // 4 MiB
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(context.Background(), cpu.New().SetMemLimit(1<<20), nil); err == nil {
		t.Error("a 4 MiB plan ran under a 1 MiB limit")
	}
	if _, err := p.Run(context.Background(), cpu.New().SetMemLimit(8<<20), nil); err != nil {
		t.Errorf("a 4 MiB plan under an 8 MiB limit: %v", err)
	}
	t.Setenv(cpu.MemLimitEnv, "1048576")
	if _, err := p.Run(context.Background(), cpu.New(), nil); err == nil {
		t.Errorf("a 4 MiB plan ran under %s=1 MiB", cpu.MemLimitEnv)
	}
}

// TestAllocRefusesMoreThanAvailable: a single allocation above the limit,
// output or temporary, is an error, not a fatal out-of-memory.
func TestAllocRefusesMoreThanAvailable(t *testing.T) {
	e := cpu.New()
	for _, kind := range []plan.BufferKind{plan.BufOutput, plan.BufTemp} {
		if _, err := e.Alloc(1<<50, kind); err == nil {
			t.Errorf("Alloc(1 PiB, %v) succeeded", kind)
		}
	}
	if _, _, err := e.AllocSlots([]int{1 << 50}); err == nil {
		t.Error("AllocSlots(1 PiB) succeeded")
	}
	m, err := e.Alloc(2<<20, plan.BufTemp)
	if err != nil {
		t.Fatal(err)
	}
	e.Free(m)
}

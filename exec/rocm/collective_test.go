package rocm

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUCollectivesOneRank: a group of one GPU rank, made both ways
// (NewCommID + JoinGroup; NewGroup), runs every collective in every dtype
// they take, fused and unfused, and matches the CPU executor's group of
// one bit for bit (for one rank every collective is the identity on its
// input, or a reshaped copy of it: all_gather, reduce_scatter). A GPU run
// given a CPU communicator, or none, fails naming the group.
func TestGPUCollectivesOneRank(t *testing.T) {
	e := freshGPU(t)
	if err := e.supportsCollective(); err != nil {
		t.Skipf("no collective library on this GPU machine: %v", err)
	}
	id, err := e.NewCommID()
	if err != nil {
		t.Fatal(err)
	}
	joined, err := e.JoinGroup("tp", id, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer joined.Close()
	made, err := NewGroup("tp", []*Executor{e})
	if err != nil {
		t.Fatal(err)
	}
	defer made[0].Close()
	host, _ := cpu.NewGroup("tp", 1)
	g := graph.Group{Name: "tp", Size: 1}
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16, dtype.U8, dtype.U32, dtype.I64} {
		for _, fusion := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/fusion=%v", dt, fusion), func(t *testing.T) {
				gr := graph.New()
				x := gr.Input("x", dt, 3, 4, 6)
				gr.Output("sum", x.AllReduce(g, graph.ReduceSum))
				gr.Output("max", x.Affine(1, 1).AllReduce(g, graph.ReduceMax))
				gr.Output("min", x.AllReduce(g, graph.ReduceMin))
				gr.Output("gather", x.AllGather(g, 1))
				gr.Output("scatter", x.Transpose(0, 2).ReduceScatter(g, 0, graph.ReduceSum))
				gr.Output("bcast", x.Broadcast(g, 0))
				p, err := gr.Compile(graph.Options{NoFusion: !fusion})
				if err != nil {
					t.Fatal(err)
				}
				v := make([]float64, 3*4*6)
				for i := range v {
					v[i] = float64(r.IntN(100))
				}
				xt, _ := tensor.FromFloat64s(dt, v, 3, 4, 6)
				in := map[string]*tensor.Tensor{"x": xt}
				want, err := p.Run(exec.WithComms(context.Background(), host[0]), cpu.New(), in)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range []*Comm{joined, made[0]} {
					got, err := p.Run(exec.WithComms(context.Background(), c), e, in)
					if err != nil {
						t.Fatal(err)
					}
					for name, w := range want {
						if !slices.Equal(got[name].Float64s(), w.Float64s()) {
							t.Fatalf("%s differs from the CPU's", name)
						}
					}
				}
			})
		}
	}
	gr := graph.New()
	gr.Output("y", gr.Input("x", dtype.F32, 4).AllReduce(g, graph.ReduceSum))
	p, err := gr.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := tensor.New([]float32{1, 2, 3, 4}, 4)
	if _, err := p.Run(exec.WithComms(context.Background(), host[0]), e, map[string]*tensor.Tensor{"x": x}); err == nil || !strings.Contains(err.Error(), "not one of this executor's") {
		t.Errorf("a CPU communicator on the GPU: %v", err)
	}
	if _, err := p.Run(context.Background(), e, map[string]*tensor.Tensor{"x": x}); err == nil || !strings.Contains(err.Error(), "no communicator") {
		t.Errorf("no communicator: %v", err)
	}
}

// TestGPUShardedProgram: a block compiled by graph.CompileSharded (a
// vocabulary-split embedding, a replicated norm, a column-parallel and a
// row-parallel product) runs on a group of one GPU rank, and on groups of
// 2, 4, … GPUs where the machine has them, and gives the single-GPU
// program's outputs within the reduction order's rounding.
func TestGPUShardedProgram(t *testing.T) {
	e := freshGPU(t)
	if err := e.supportsCollective(); err != nil {
		t.Skipf("no collective library on this GPU machine: %v", err)
	}
	ctx := context.Background()
	const T, C, F, V = 12, 64, 256, 128
	gr := graph.New()
	ids := gr.Input("ids", dtype.U32, T)
	x := gr.Input("emb", dtype.F32, V, C).IndexSelect(ids, 0)
	h := x.RmsNorm(gr.Input("norm", dtype.F32, C), 1e-5)
	y := graph.Linear(graph.Linear(h, gr.Input("w1", dtype.F32, F, C), gr.Input("b1", dtype.F32, F)).Silu(), gr.Input("w2", dtype.F32, C, F), nil)
	gr.Output("y", x.Add(y))
	splits := map[string]int{"emb": 0, "w1": 0, "b1": 0, "w2": 1}
	r := rand.New(rand.NewPCG(8, 9))
	inputs := map[string]*tensor.Tensor{}
	for _, n := range gr.IR().Inputs() {
		vals := make([]float64, n.Numel())
		for i := range vals {
			if n.Name == "ids" {
				vals[i] = float64(r.IntN(V))
			} else {
				vals[i] = r.Float64() - 0.5
			}
		}
		inputs[n.Name], _ = tensor.FromFloat64s(n.DType, vals, n.Shape...)
	}
	p, err := gr.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := p.Run(ctx, e, inputs)
	if err != nil {
		t.Fatal(err)
	}
	count, _ := DeviceCount()
	for n := 1; n <= max(1, count); n *= 2 {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			es := gpuRanks(t, e, n)
			g := graph.Group{Name: "tp", Size: n}
			sp, err := gr.CompileSharded(g, splits, graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			comms, err := NewGroup("tp", es)
			if err != nil {
				t.Fatal(err)
			}
			execs, cs := make([]exec.Executor, n), make([]exec.Comm, n)
			for i := range n {
				execs[i], cs[i] = es[i], comms[i]
				defer comms[i].Close()
			}
			got, err := sp.Run(ctx, execs, cs, inputs)
			if err != nil {
				t.Fatal(err)
			}
			w, gt := want["y"], got["y"]
			for i := range w.Numel() {
				if d := math.Abs(gt.Float64(i) - w.Float64(i)); !(d <= 1e-5*(1+math.Abs(w.Float64(i)))) {
					t.Fatalf("%d ranks: y[%d] = %v, want %v", n, i, gt.Float64(i), w.Float64(i))
				}
			}
		})
	}
}

package cpu_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// collectiveProgram: every collective of group g over x [2, 3, 2·size] of
// dtype dt, as named outputs.
func collectiveProgram(t *testing.T, g graph.Group, dt dtype.DType, fusion bool) *graph.Program {
	t.Helper()
	gr := graph.New()
	x := gr.Input("x", dt, 2, 3, 2*g.Size)
	gr.Output("sum", x.AllReduce(g, graph.ReduceSum))
	gr.Output("max", x.AllReduce(g, graph.ReduceMax))
	gr.Output("min", x.AllReduce(g, graph.ReduceMin))
	gr.Output("gather0", x.AllGather(g, 0))
	gr.Output("gather2", x.AllGather(g, -1))
	gr.Output("scatter2", x.ReduceScatter(g, 2, graph.ReduceSum))
	gr.Output("scatter1", x.Transpose(1, 2).Contiguous().AllGather(g, 0).ReduceScatter(g, 0, graph.ReduceMax))
	gr.Output("bcast", x.Broadcast(g, g.Size-1))
	// Fused neighbours: the collective is a barrier between two chains.
	gr.Output("chain", x.Affine(2, 1).AllReduce(g, graph.ReduceSum).Affine(0.5, 0))
	p, err := gr.Compile(graph.Options{NoFusion: !fusion})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runRanks runs p on one CPU executor per rank, concurrently, rank r with
// inputs in[r] and communicator comms[r] (ctxs[r] when given).
func runRanks(p *graph.Program, comms []*cpu.Comm, in []map[string]*tensor.Tensor, ctxs []context.Context) ([]map[string]*tensor.Tensor, []error) {
	out := make([]map[string]*tensor.Tensor, len(comms))
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r := range comms {
		wg.Go(func() {
			ctx := context.Background()
			if ctxs != nil {
				ctx = ctxs[r]
			}
			out[r], errs[r] = p.Run(exec.WithComms(ctx, comms[r]), cpu.New(), in[r])
		})
	}
	wg.Wait()
	return out, errs
}

// The oracle: plain loops over float64 copies of the ranks' values.
// Sums go in rank order in the dtype's arithmetic (f32 for f16, bf16 and
// f32, rounded to the dtype once; f64; integers wrap).
func oracleReduce(dt dtype.DType, op string, vals []float64) float64 {
	acc := vals[0]
	for _, v := range vals[1:] {
		switch op {
		case "sum":
			acc += v
			switch dt {
			case dtype.F32, dtype.F16, dtype.BF16:
				acc = float64(float32(acc))
			case dtype.U8:
				acc = float64(uint8(uint64(acc)))
			case dtype.U32:
				acc = float64(uint32(uint64(acc)))
			case dtype.I64:
				acc = float64(int64(acc))
			}
		case "max":
			if math.IsNaN(v) || v > acc {
				acc = v
			}
		case "min":
			if math.IsNaN(v) || v < acc {
				acc = v
			}
		}
	}
	t, _ := tensor.FromFloat64s(dt, []float64{acc}, 1) // one rounding to the dtype
	return t.Float64s()[0]
}

// TestCPUCollectives: every collective on groups of 1–4 CPU executors in
// one process, every dtype they take, fused and unfused, against the
// oracle, bit for bit.
func TestCPUCollectives(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, size := range []int{1, 2, 3, 4} {
		for _, dt := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16, dtype.U8, dtype.U32, dtype.I64} {
			for _, fusion := range []bool{false, true} {
				t.Run(fmt.Sprintf("size%d/%v/fusion=%v", size, dt, fusion), func(t *testing.T) {
					g := graph.Group{Name: "tp", Size: size}
					p := collectiveProgram(t, g, dt, fusion)
					comms, err := cpu.NewGroup("tp", size)
					if err != nil {
						t.Fatal(err)
					}
					n := 2 * 3 * 2 * size
					xs := make([][]float64, size)
					in := make([]map[string]*tensor.Tensor, size)
					for k := range size {
						v := make([]float64, n)
						for i := range v {
							if dt.IsFloat() {
								v[i] = math.Round(r.NormFloat64()*64) / 16
							} else {
								v[i] = float64(r.IntN(200))
							}
						}
						xt, _ := tensor.FromFloat64s(dt, v, 2, 3, 2*size)
						xs[k] = xt.Float64s() // as stored
						in[k] = map[string]*tensor.Tensor{"x": xt}
					}
					out, errs := runRanks(p, comms, in, nil)
					for k, err := range errs {
						if err != nil {
							t.Fatalf("rank %d: %v", k, err)
						}
					}
					at := func(k, i, j, l int) float64 { return xs[k][(i*3+j)*2*size+l] }
					for k := range size {
						o := out[k]
						for i := range 2 {
							for j := range 3 {
								for l := range 2 * size {
									vals := make([]float64, size)
									for q := range size {
										vals[q] = at(q, i, j, l)
									}
									idx := (i*3+j)*2*size + l
									for _, op := range []string{"sum", "max", "min"} {
										if got, want := o[op].Float64s()[idx], oracleReduce(dt, op, vals); got != want {
											t.Fatalf("rank %d %s[%d %d %d] = %v, want %v", k, op, i, j, l, got, want)
										}
									}
									if got := o["bcast"].Float64s()[idx]; got != at(size-1, i, j, l) {
										t.Fatalf("rank %d bcast = %v, want rank %d's %v", k, got, size-1, at(size-1, i, j, l))
									}
									for q := range size {
										// gather0 [2·size, 3, 2·size]: rank q's x at rows 2q, 2q+1.
										if got := o["gather0"].Float64s()[((q*2+i)*3+j)*2*size+l]; got != at(q, i, j, l) {
											t.Fatalf("rank %d gather0 wrong at rank %d's [%d %d %d]", k, q, i, j, l)
										}
										// gather2 [2, 3, 2·size·size]: rank q's row at columns q·2·size + l.
										if got := o["gather2"].Float64s()[(i*3+j)*2*size*size+q*2*size+l]; got != at(q, i, j, l) {
											t.Fatalf("rank %d gather2 wrong at rank %d's [%d %d %d]", k, q, i, j, l)
										}
									}
								}
								// scatter2 [2, 3, 2]: rank k's block of columns 2k, 2k+1.
								for l := range 2 {
									vals := make([]float64, size)
									for q := range size {
										vals[q] = at(q, i, j, 2*k+l)
									}
									if got, want := o["scatter2"].Float64s()[(i*3+j)*2+l], oracleReduce(dt, "sum", vals); got != want {
										t.Fatalf("rank %d scatter2[%d %d %d] = %v, want %v", k, i, j, l, got, want)
									}
								}
							}
						}
						// scatter1: the gathered transposes, reduced with max and
						// scattered back by rank: rank k gets max over ranks of
						// rank k's transpose = rank k's own transpose.
						tr := o["scatter1"]
						if !slices.Equal(tr.Shape(), []int{2, 2 * size, 3}) {
							t.Fatalf("scatter1 shape %v", tr.Shape())
						}
						for i := range 2 {
							for l := range 2 * size {
								for j := range 3 {
									if got := tr.Float64s()[(i*2*size+l)*3+j]; got != at(k, i, j, l) {
										t.Fatalf("rank %d scatter1[%d %d %d] = %v, want %v", k, i, l, j, got, at(k, i, j, l))
									}
								}
							}
						}
					}
				})
			}
		}
	}
}

// TestCPUCollectiveErrors: what a user gets wrong.
func TestCPUCollectiveErrors(t *testing.T) {
	g := graph.Group{Name: "tp", Size: 2}
	// When the graph is built: the op, the input and the parameter.
	for _, c := range []struct {
		build func(x *graph.Tensor) *graph.Tensor
		want  string
	}{
		{func(x *graph.Tensor) *graph.Tensor {
			return x.AllReduce(graph.Group{Name: "", Size: 2}, graph.ReduceSum)
		}, `all_reduce: f32[4 6]: group name ""`},
		{func(x *graph.Tensor) *graph.Tensor {
			return x.AllReduce(graph.Group{Name: "a/b", Size: 2}, graph.ReduceSum)
		}, `group name "a/b"`},
		{func(x *graph.Tensor) *graph.Tensor {
			return x.AllReduce(graph.Group{Name: "tp", Size: 0}, graph.ReduceSum)
		}, `group "tp": size 0`},
		{func(x *graph.Tensor) *graph.Tensor { return x.AllReduce(g, graph.Reduce(7)) }, "unknown reduction 7"},
		{func(x *graph.Tensor) *graph.Tensor { return x.Broadcast(g, 2) }, "root 2 outside the group's 2 ranks"},
		{func(x *graph.Tensor) *graph.Tensor {
			return x.ReduceScatter(graph.Group{Name: "tp", Size: 4}, 1, graph.ReduceSum)
		}, "dim 1 of size 6 does not split into 4 ranks"},
		{func(x *graph.Tensor) *graph.Tensor { return x.AllGather(g, 2) }, "all_gather: dim 2 out of range"},
		{func(x *graph.Tensor) *graph.Tensor { return x.Cast(dtype.F8E4M3).AllReduce(g, graph.ReduceSum) }, "dtype f8e4m3 not in"},
	} {
		gr := graph.New()
		gr.Output("y", c.build(gr.Input("x", dtype.F32, 4, 6)))
		if _, err := gr.Compile(graph.Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
	// When it runs: no communicator, one of another size, ranks that
	// disagree, a rank that never comes.
	gr := graph.New()
	gr.Output("y", gr.Input("x", dtype.F32, 4).AllReduce(g, graph.ReduceSum))
	p, err := gr.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := tensor.New([]float32{1, 2, 3, 4}, 4)
	in := map[string]*tensor.Tensor{"x": x}
	if _, err := p.Run(context.Background(), cpu.New(), in); err == nil || !strings.Contains(err.Error(), `all_reduce over group "tp": no communicator`) {
		t.Errorf("no communicator: %v", err)
	}
	three, _ := cpu.NewGroup("tp", 3)
	if _, err := p.Run(exec.WithComms(context.Background(), three[0]), cpu.New(), in); err == nil || !strings.Contains(err.Error(), "built for 2 ranks, the communicator has 3") {
		t.Errorf("another size: %v", err)
	}
	gr2 := graph.New()
	gr2.Output("y", gr2.Input("x", dtype.F32, 4).AllReduce(g, graph.ReduceMax))
	p2, err := gr2.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	two, _ := cpu.NewGroup("tp", 2)
	var wg sync.WaitGroup
	var e0, e1 error
	wg.Go(func() { _, e0 = p.Run(exec.WithComms(context.Background(), two[0]), cpu.New(), in) })
	wg.Go(func() { _, e1 = p2.Run(exec.WithComms(context.Background(), two[1]), cpu.New(), in) })
	wg.Wait()
	for _, err := range []error{e0, e1} {
		if err == nil || !strings.Contains(err.Error(), "ranks disagree") {
			t.Errorf("disagreeing ranks: %v", err)
		}
	}
	lone, _ := cpu.NewGroup("tp", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := p.Run(exec.WithComms(ctx, lone[0]), cpu.New(), in); err == nil || !strings.Contains(err.Error(), "gave up waiting") {
		t.Errorf("a rank that never comes: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the lone rank waited %v", d)
	}
	// The group is broken now: the other rank fails at once.
	if _, err := p.Run(exec.WithComms(context.Background(), lone[1]), cpu.New(), in); err == nil || !strings.Contains(err.Error(), "is broken") {
		t.Errorf("after a rank gave up: %v", err)
	}
}

// TestCollectiveDump: the dumps show a collective as its own step with
// its group.
func TestCollectiveDump(t *testing.T) {
	g := graph.Group{Name: "tp", Size: 2}
	p := collectiveProgram(t, g, dtype.F32, true)
	var b bytes.Buffer
	if err := p.Dump(&b, graph.DumpText); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"all_reduce", "all_gather", "reduce_scatter", "broadcast", `"tp"`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("dump lacks %q:\n%s", want, b.String())
		}
	}
	steps := 0
	for _, s := range p.Plan().Steps {
		if s.Kernel.IsCollective() {
			steps++
			if !strings.HasPrefix(s.Kernel.Name, "C_") || !strings.Contains(s.Kernel.Name, "_tp_") {
				t.Errorf("collective step named %q", s.Kernel.Name)
			}
		}
	}
	if steps < 8 {
		t.Errorf("%d collective steps, want at least 8", steps)
	}
	if pl := p.Placement(cpu.New()); !strings.Contains(pl, "C_all_reduce_tp_") || !strings.Contains(pl, "C_reduce_scatter_tp_") {
		t.Errorf("the placement dump lacks the collective steps:\n%s", pl)
	}
}

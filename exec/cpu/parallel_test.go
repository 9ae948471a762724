package cpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestTensorParallelLayers: the tensor-parallel layers on groups of 1–4
// CPU executors (one program for every rank, each fed its shards) against
// the same layers unsharded on one executor: a column-parallel linear
// (gathered), a row-parallel linear with its bias, the Megatron MLP
// (column-parallel, SiLU, row-parallel: one all-reduce) and a
// vocabulary-parallel embedding. Products agree within f32 rounding of
// the reordered sums; the embedding is exact.
func TestTensorParallelLayers(t *testing.T) {
	const M, K, N, V, C = 3, 12, 12, 12, 4
	r := rand.New(rand.NewPCG(21, 22))
	rnd := func(shape ...int) *tensor.Tensor {
		v := make([]float64, tensor.Numel(shape))
		for i := range v {
			v[i] = r.NormFloat64()
		}
		t, _ := tensor.FromFloat64s(dtype.F32, v, shape...)
		return t
	}
	x, w1, b1, w2, b2, table := rnd(M, K), rnd(N, K), rnd(N), rnd(N, K), rnd(N), rnd(V, C)
	ids, _ := tensor.New([]uint32{0, 11, 5, 6, 3, 5}, 6)

	// The reference: one executor, whole weights.
	ref := graph.New()
	rx := ref.Input("x", dtype.F32, M, K)
	rw1, rb1 := ref.Input("w1", dtype.F32, N, K), ref.Input("b1", dtype.F32, N)
	rw2, rb2 := ref.Input("w2", dtype.F32, N, K), ref.Input("b2", dtype.F32, N)
	ref.Output("col", graph.Linear(rx, rw1, rb1))
	ref.Output("row", graph.Linear(rx, rw2, rb2))
	ref.Output("mlp", graph.Linear(graph.Linear(rx, rw1, rb1).Silu(), rw2, rb2))
	ref.Output("emb", ref.Input("table", dtype.F32, V, C).IndexSelect(ref.Input("ids", dtype.U32, 6), 0))
	rp, err := ref.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := rp.Run(context.Background(), cpu.New(), map[string]*tensor.Tensor{"x": x, "w1": w1, "b1": b1, "w2": w2, "b2": b2, "table": table, "ids": ids})
	if err != nil {
		t.Fatal(err)
	}
	rows := func(t *tensor.Tensor, lo, n int) *tensor.Tensor { // rows lo … lo+n−1 of a matrix or vector
		s := t.Shape()
		per := tensor.Numel(s[1:])
		v := t.Float64s()[lo*per : (lo+n)*per]
		out, _ := tensor.FromFloat64s(dtype.F32, v, append([]int{n}, s[1:]...)...)
		return out
	}
	cols := func(t *tensor.Tensor, lo, n int) *tensor.Tensor { // columns lo … lo+n−1 of a matrix
		s := t.Shape()
		v := make([]float64, 0, s[0]*n)
		all := t.Float64s()
		for i := range s[0] {
			v = append(v, all[i*s[1]+lo:i*s[1]+lo+n]...)
		}
		out, _ := tensor.FromFloat64s(dtype.F32, v, s[0], n)
		return out
	}
	for _, size := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			g := graph.Group{Name: "tp", Size: size}
			n, k, v := N/size, K/size, V/size
			gr := graph.New()
			gx := gr.Input("x", dtype.F32, M, K)
			gxs := gr.Input("x_shard", dtype.F32, M, k)
			w1s, b1s := gr.Input("w1_shard", dtype.F32, n, K), gr.Input("b1_shard", dtype.F32, n)
			w2s, gb2 := gr.Input("w2_shard", dtype.F32, N, k), gr.Input("b2", dtype.F32, N)
			w2mlp := gr.Input("w2_mlp", dtype.F32, N, n) // columns of w2 matching this rank's w1 rows
			gr.Output("col", graph.ColumnParallelLinear(gx, w1s, b1s, g, true))
			gr.Output("row", graph.RowParallelLinear(gxs, w2s, gb2, g))
			gr.Output("mlp", graph.RowParallelLinear(graph.ColumnParallelLinear(gx, w1s, b1s, g, false).Silu(), w2mlp, gb2, g))
			gr.Output("emb", graph.ParallelEmbedding(gr.Input("ids", dtype.U32, 6), gr.Input("table_shard", dtype.F32, v, C), gr.Input("start", dtype.U32, 1), g))
			p, err := gr.Compile(graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			comms, _ := cpu.NewGroup("tp", size)
			in := make([]map[string]*tensor.Tensor, size)
			for q := range size {
				start, _ := tensor.New([]uint32{uint32(q * v)}, 1)
				in[q] = map[string]*tensor.Tensor{
					"x": x, "x_shard": cols(x, q*k, k),
					"w1_shard": rows(w1, q*n, n), "b1_shard": rows(b1, q*n, n),
					"w2_shard": cols(w2, q*k, k), "b2": b2, "w2_mlp": cols(w2, q*n, n),
					"ids": ids, "table_shard": rows(table, q*v, v), "start": start,
				}
			}
			out, errs := runRanks(p, comms, in, nil)
			for q := range size {
				if errs[q] != nil {
					t.Fatalf("rank %d: %v", q, errs[q])
				}
				for _, name := range []string{"col", "row", "mlp", "emb"} {
					got, w := out[q][name].Float64s(), want[name].Float64s()
					if len(got) != len(w) {
						t.Fatalf("rank %d %s: %d values, want %d", q, name, len(got), len(w))
					}
					for i := range w {
						tol := 1e-5 * (1 + math.Abs(w[i]))
						if name == "emb" {
							tol = 0
						}
						if math.Abs(got[i]-w[i]) > tol {
							t.Fatalf("rank %d %s[%d] = %v, unsharded %v", q, name, i, got[i], w[i])
						}
					}
				}
			}
		})
	}
}

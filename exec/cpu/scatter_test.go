package cpu_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestScatterDirect checks the KV-cache update's path straight through the
// buffers (scatter.go): a scatter of one new position into a contiguous
// cache, and a slice assignment, in bf16 and f32, take it and give the
// cache with the new rows written; a destination read through a transpose
// takes the generic path and agrees; a bad id fails the run naming the op.
func TestScatterDirect(t *testing.T) {
	const kv, seq, hd, pos = 2, 16, 4, 5
	r := rand.New(rand.NewPCG(3, 4))
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.IntN(200) - 100) // exact in bf16
		}
		return v
	}
	e := cpu.New()
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		for _, c := range []struct {
			name      string
			transpose bool // the cache read through a transpose
			slice     bool // SliceAssign instead of Scatter
			id        uint32
			direct    bool
		}{
			{"scatter", false, false, pos, true},
			{"slice-assign", false, true, pos, true},
			{"transposed cache", true, false, pos, false},
			{"bad id", false, false, seq, true},
		} {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				g := graph.New()
				cache := g.Input("cache", dt, 1, kv, seq, hd)
				src := g.Input("src", dt, 1, kv, 1, hd)
				dst := cache
				if c.transpose {
					dst = g.Input("cacheT", dt, 1, kv, hd, seq).Transpose(2, 3)
				}
				ids := g.Input("ids", dtype.U32, 1, kv, 1, hd)
				var y *graph.Tensor
				if c.slice {
					y = dst.SliceAssign(src, 2, int(c.id))
				} else {
					y = dst.Scatter(ids, src, 2)
				}
				g.Output("y", y)
				p, err := g.Compile(graph.Options{})
				if err != nil {
					t.Fatal(err)
				}
				cv, sv := vals(kv*seq*hd), vals(kv*hd)
				want := slices.Clone(cv)
				for h := range kv {
					copy(want[(h*seq+int(c.id%seq))*hd:][:hd], sv[h*hd:][:hd])
				}
				in := map[string]*tensor.Tensor{}
				ct, _ := tensor.FromFloat32s(dt, cv, 1, kv, seq, hd)
				in["cache"] = ct
				if c.transpose {
					tv := make([]float32, len(cv))
					for h := range kv {
						for s := range seq {
							for d := range hd {
								tv[(h*hd+d)*seq+s] = cv[(h*seq+s)*hd+d]
							}
						}
					}
					in["cacheT"], _ = tensor.FromFloat32s(dt, tv, 1, kv, hd, seq)
				}
				in["src"], _ = tensor.FromFloat32s(dt, sv, 1, kv, 1, hd)
				in["ids"], _ = tensor.New(slices.Repeat([]uint32{c.id}, kv*hd), 1, kv, 1, hd)
				before := cpu.ScatterDirectRuns()
				out, err := p.Run(context.Background(), e, in)
				if c.id >= seq && !c.slice {
					if err == nil {
						t.Fatalf("id %d of %d positions: no error", c.id, seq)
					}
					t.Logf("error: %v", err)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := cpu.ScatterDirectRuns() - before; (got == 1) != c.direct {
					t.Errorf("%d steps straight through the buffers, want direct=%v", got, c.direct)
				}
				got := out["y"].Float64s()
				for i, w := range want {
					if got[i] != float64(w) {
						t.Fatalf("y[%d] = %v, want %v", i, got[i], w)
					}
				}
			})
		}
	}
}

package cpu_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// refArgsort is the spec: a stable sort of indices by value, NaN (any
// payload) after every number ascending and before every number
// descending, −0 equal to +0.
func refArgsort(row []float32, desc bool) []uint32 {
	idx := make([]uint32, len(row))
	for i := range idx {
		idx[i] = uint32(i)
	}
	key := func(i uint32) float64 {
		v := float64(row[i])
		if v != v {
			return math.Inf(1) // compared below as greater than +Inf
		}
		return v
	}
	nan := func(i uint32) bool { return row[i] != row[i] }
	slices.SortStableFunc(idx, func(a, b uint32) int {
		c := cmp.Compare(key(a), key(b))
		if c == 0 && nan(a) != nan(b) {
			c = 1
			if nan(b) {
				c = -1
			}
		}
		if desc {
			c = -c
		}
		return c
	})
	return idx
}

// specials are values that exercise the key mapping: signed zeros, NaNs with
// different payloads and signs, infinities, denormals and ties.
var specials = []float32{
	0, float32(math.Copysign(0, -1)), float32(math.NaN()), math.Float32frombits(0xFFC00001), math.Float32frombits(0x7F800001),
	float32(math.Inf(1)), float32(math.Inf(-1)), 1, -1, 1, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
	math.MaxFloat32, -math.MaxFloat32, 2.5, -2.5,
}

func TestArgsortMatchesReference(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 9))
	for _, cols := range []int{1, 2, 5, 63, 64, 65, 100, 1024, 3000} {
		rows := 7
		vals := make([]float32, rows*cols)
		for i := range vals {
			switch r.IntN(4) {
			case 0:
				vals[i] = specials[r.IntN(len(specials))]
			case 1:
				vals[i] = float32(r.IntN(5)) // many ties
			default:
				vals[i] = float32(r.NormFloat64() * 1e3)
			}
		}
		for _, desc := range []bool{false, true} {
			for _, transposed := range []bool{false, true} {
				g := graph.New()
				var x *graph.Tensor
				var in *tensor.Tensor
				if transposed { // a strided operand: the tile path
					x = g.Input("x", dtype.F32, cols, rows).Transpose(0, 1)
					tv := make([]float32, len(vals))
					for i := range rows {
						for j := range cols {
							tv[j*rows+i] = vals[i*cols+j]
						}
					}
					in, _ = tensor.New(tv, cols, rows)
				} else {
					x = g.Input("x", dtype.F32, rows, cols)
					in, _ = tensor.New(vals, rows, cols)
				}
				g.Output("idx", x.Argsort(desc))
				p, err := g.Compile(graph.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range []*cpu.Executor{cpu.New().Poison(0xFF), cpu.NewWithWorkers(1).Poison(0)} {
					out, err := p.Run(ctx, e, map[string]*tensor.Tensor{"x": in})
					if err != nil {
						t.Fatal(err)
					}
					got, _ := tensor.Values[uint32](out["idx"])
					for i := range rows {
						want := refArgsort(vals[i*cols:(i+1)*cols], desc)
						if g := got[i*cols : (i+1)*cols]; !slices.Equal(g, want) {
							t.Fatalf("cols=%d desc=%v transposed=%v row %d:\ngot  %v\nwant %v", cols, desc, transposed, i, head(g), head(want))
						}
					}
				}
			}
		}
	}
}

func head(s []uint32) string {
	if len(s) > 40 {
		return fmt.Sprint(s[:40], "…")
	}
	return fmt.Sprint(s)
}

// BenchmarkArgsortW8 is workload W8: argsort of 8192 rows of 1024 f32,
// ascending, into caller-held outputs.
func BenchmarkArgsortW8(b *testing.B) {
	const rows, cols = 8192, 1024
	g := graph.New()
	g.Output("idx", g.Input("x", dtype.F32, rows, cols).Argsort(false))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = float32(r.NormFloat64())
	}
	x, _ := tensor.New(vals, rows, cols)
	out, _ := tensor.Zeros(dtype.U32, rows, cols)
	e := cpu.New()
	in, outs := map[string]*tensor.Tensor{"x": x}, map[string]*tensor.Tensor{"idx": out}
	for b.Loop() {
		if err := p.RunInto(context.Background(), e, in, outs); err != nil {
			b.Fatal(err)
		}
	}
}

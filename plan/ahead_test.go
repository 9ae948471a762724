package plan_test

import (
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// TestMarkAhead: an operand is marked readable ahead (plan.Kernel.Ahead)
// only where the step before does not write its memory: the keys and
// values a step's attention reads from an input are, the queries the step
// before computes are not, nothing of step 0 is, and an input the step
// before may overwrite in place (a scatter into it) is not.
func TestMarkAhead(t *testing.T) {
	g := graph.New()
	cache := g.Input("cache", dtype.F32, 2, 1, 2, 16, 8)
	qin := g.Input("q", dtype.F32, 1, 4, 1, 8)
	pos := g.Input("pos", dtype.U32, 1)
	q := qin.Neg()
	k, v := cache.Narrow(0, 0, 1).Squeeze(0), cache.Narrow(0, 1, 1).Squeeze(0)
	y := graph.CausalAttention(q, k, v, pos, 0.3)
	g.Output("y", y)
	src := g.Input("src", dtype.F32, 2, 1, 2, 1, 8)
	ids := pos.Reshape(1, 1, 1, 1, 1).BroadcastTo(2, 1, 2, 1, 8)
	next := cache.Scatter(ids, src.Add(y.Sum(0, 1, 2, 3).Reshape(1, 1, 1, 1, 1)), 3)
	g.Output("next", next)
	// A step after the in-place scatter that reads the cache's memory
	// through the scatter's output.
	g.Output("after", next.Neg())
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pl := p.Plan()
	var attn, after *plan.Kernel
	for i, s := range pl.Steps {
		k := s.Kernel
		if len(k.Ahead) != len(k.Ins) {
			t.Fatalf("step %d: %d marks for %d operands", i, len(k.Ahead), len(k.Ins))
		}
		if i == 0 {
			for j, a := range k.Ahead {
				if a {
					t.Errorf("step 0 operand %d marked", j)
				}
			}
		}
		if k.Instrs[0].Node.Op == ir.OpAttention {
			attn = k
		}
		if i > 0 && pl.Steps[i-1].Kernel.Instrs[0].Node.Op == ir.OpScatter {
			after = k
		}
	}
	if attn == nil || after == nil {
		t.Fatalf("plan without the attention step or a step after the scatter:\n%v", pl.Steps)
	}
	args := attn.Instrs[0].Args
	if attn.Ahead[args[0].Index] || !attn.Ahead[args[1].Index] || !attn.Ahead[args[2].Index] {
		t.Errorf("attention: q marked %v (want false: the step before computes it), k %v, v %v (want true)",
			attn.Ahead[args[0].Index], attn.Ahead[args[1].Index], attn.Ahead[args[2].Index])
	}
	inPlace := false
	for id := range pl.InPlace() {
		inPlace = inPlace || pl.Buffers[id].Name == "next"
	}
	if !inPlace {
		t.Fatal("the scatter is not in place: the case does not test what it means to")
	}
	for j, op := range after.Ins {
		if (op.Buf.Name == "cache" || op.Buf.Name == "next") && after.Ahead[j] {
			t.Errorf("the step after the in-place scatter may read %s ahead", op.Buf.Name)
		}
	}
}

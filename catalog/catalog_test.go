package catalog

import (
	"testing"

	"github.com/loomgraph/loom/ir"
)

// TestKernelsCoverOpTable checks the catalog has a kernel for every
// elementwise op × claimed dtype (casts: every ordered pair).
func TestKernelsCoverOpTable(t *testing.T) {
	es, err := Kernels()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[ir.Op]int{}
	for _, e := range es {
		seen[e.Kernel.Instrs[len(e.Kernel.Instrs)-1].Node.Op]++
	}
	for _, op := range ir.Ops() {
		info := op.Info()
		if info.Class != ir.ClassElementwise || op == ir.OpCopy {
			continue
		}
		want := len(info.In.List())
		switch op {
		case ir.OpCast:
			want = want * (want - 1)
		case ir.OpWhere:
			want *= len(ir.IDDTypes.List())
		}
		if seen[op] < want {
			t.Errorf("%s: %d kernels, want at least %d", op, seen[op], want)
		}
	}
	t.Logf("%d kernels", len(es))
}

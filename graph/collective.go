package graph

import (
	"fmt"
	"slices"

	"github.com/loomgraph/loom/ir"
)

// Collectives: every rank of a group runs the same program on its own
// executor (SPMD), and these ops combine the ranks' values through a
// communicator bound to each run (exec.WithComms: NCCL or RCCL on GPUs,
// an in-process group of CPU executors on the CPU). Each is one step of
// its own (ir.ClassCollective), a barrier to fusion, shown in the dumps
// with its group's name. Semantics, reduction order and dtypes:
// ir/collective.go. Bad parameters are errors naming the op, the input
// and the parameter when the op is recorded; a run whose communicator
// does not match the group (missing, another size) fails naming both.

// Group names a group of ranks for collectives. Size (the number of
// ranks) is fixed when the graph is built, so that shapes are known; Name
// is what a run binds to a communicator.
type Group struct {
	Name string
	Size int
}

// Reduce is a collective's reduction.
type Reduce = ir.Reduce

// Reductions of AllReduce and ReduceScatter.
const (
	ReduceSum = ir.ReduceSum
	ReduceMax = ir.ReduceMax
	ReduceMin = ir.ReduceMin
)

// AllReduce is op over the ranks of t, on every rank (same shape).
func (t *Tensor) AllReduce(g Group, op Reduce) *Tensor {
	return t.collective(ir.OpAllReduce, "all_reduce", g, ir.CollParams{Size: g.Size, Reduce: op})
}

// Broadcast is rank root's t, on every rank.
func (t *Tensor) Broadcast(g Group, root int) *Tensor {
	return t.collective(ir.OpBroadcast, "broadcast", g, ir.CollParams{Size: g.Size, Root: root})
}

// AllGather concatenates the ranks' t along dim in rank order (PyTorch's
// all_gather followed by torch.cat(…, dim)): dim grows Size times.
func (t *Tensor) AllGather(g Group, dim int) *Tensor {
	const name = "all_gather"
	if r, ok := t.ready(name); !ok {
		return r
	}
	d, err := t.normDim(name, dim, len(t.n.Shape))
	if err != nil {
		return t.g.fail(err)
	}
	y := t.collective(ir.OpAllGather, name, g, ir.CollParams{Size: g.Size}) // [Size, ...t]
	if y.err != nil {
		return y
	}
	// Bring the rank axis next to dim (for dim 0 it is there), then merge
	// the two.
	perm := make([]int, 0, len(t.n.Shape)+1)
	for i := range d {
		perm = append(perm, i+1)
	}
	perm = append(perm, 0)
	for i := d; i < len(t.n.Shape); i++ {
		perm = append(perm, i+1)
	}
	shape := slices.Clone(t.n.Shape)
	shape[d] *= g.Size
	return y.Permute(perm...).Reshape(shape...)
}

// ReduceScatter reduces t over the ranks with op and gives rank r block r
// of dim split into Size equal blocks (PyTorch's reduce_scatter_tensor
// for dim 0): dim shrinks Size times and must divide by it.
func (t *Tensor) ReduceScatter(g Group, dim int, op Reduce) *Tensor {
	const name = "reduce_scatter"
	if r, ok := t.ready(name); !ok {
		return r
	}
	d, err := t.normDim(name, dim, len(t.n.Shape))
	if err != nil {
		return t.g.fail(err)
	}
	in := fmt.Sprintf("%v%v", t.n.DType, t.n.Shape)
	if g.Size < 1 {
		return t.g.fail(opErr(name, "%s: group %q: size %d, want at least 1", in, g.Name, g.Size))
	}
	if t.n.Shape[d]%g.Size != 0 {
		return t.g.fail(opErr(name, "%s: group %q: dim %d of size %d does not split into %d ranks", in, g.Name, dim, t.n.Shape[d], g.Size))
	}
	// [..., Size, D/Size, ...] with the rank axis first.
	split := append(append(append([]int(nil), t.n.Shape[:d]...), g.Size, t.n.Shape[d]/g.Size), t.n.Shape[d+1:]...)
	x := t.Reshape(split...)
	if d > 0 {
		perm := []int{d}
		for i := range split {
			if i != d {
				perm = append(perm, i)
			}
		}
		x = x.Permute(perm...)
	}
	return x.collective(ir.OpReduceScatter, name, g, ir.CollParams{Size: g.Size, Reduce: op})
}

func (t *Tensor) collective(op ir.Op, name string, g Group, p ir.CollParams) *Tensor {
	if r, ok := t.ready(name); !ok {
		return r
	}
	shape, err := ir.CollOutShape(op, g.Name, t.n.DType, t.n.Shape, p)
	if err != nil {
		return t.g.fail(opErr(name, "%v%v: %v", t.n.DType, t.n.Shape, err))
	}
	return t.g.intern(op, t.n.DType, shape, []*ir.Node{t.n}, p.Encode(), nil, g.Name)
}

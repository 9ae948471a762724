package ir

import (
	"fmt"
	"slices"

	"github.com/loomgraph/loom/dtype"
)

// Collectives: the ops that combine the values of a group of ranks, each
// rank running the same program on its own executor (SPMD) with a
// communicator for the group bound to its runs (exec.WithComms). A node's
// Name is the group's name; its params are CollParams. The group's size is
// part of the op, so that shapes are known when the graph is built; a
// communicator of another size is a run error.
//
//	all_reduce      x → op over ranks of x (same shape)
//	all_gather      x → [size, ...x]: index r holds rank r's x
//	reduce_scatter  x [size, ...rest] → rest: op over ranks of x[rank]
//	broadcast       x → root's x (same shape)
//
// Reductions combine ranks in rank order on the CPU (exec/cpu: f16, bf16
// and f8e4m3 sum in float32 and round once, integers wrap, max and min
// propagate NaN); a GPU library (NCCL, RCCL) may combine them in another
// order and round per step, so sums agree within a reduction-order
// tolerance. Max and min are exact everywhere.

// Reduce is a collective's reduction.
type Reduce int

// Reductions.
const (
	ReduceSum Reduce = iota
	ReduceMax
	ReduceMin
)

func (r Reduce) String() string {
	switch r {
	case ReduceSum:
		return "sum"
	case ReduceMax:
		return "max"
	case ReduceMin:
		return "min"
	}
	return fmt.Sprintf("Reduce(%d)", int(r))
}

// CollectiveDTypes are the dtypes collectives move: what NCCL and RCCL
// have (no f8e4m3).
var CollectiveDTypes = SetOf(dtype.F32, dtype.F64, dtype.F16, dtype.BF16, dtype.U8, dtype.U32, dtype.I64)

var collParamNames = []string{"size", "reduce", "root"}

func collectiveOp(name string) OpInfo {
	return OpInfo{Name: name, Arity: 1, Class: ClassCollective, In: CollectiveDTypes, Params: collParamNames}
}

// CollParams are a collective's parameters.
type CollParams struct {
	Size   int    // ranks in the group
	Reduce Reduce // all_reduce, reduce_scatter
	Root   int    // broadcast: the rank whose value every rank gets
}

// Encode returns the params as Node.Params.
func (p CollParams) Encode() []float64 { return f64s(p.Size, int(p.Reduce), p.Root) }

// Coll decodes a collective node's params.
func (n *Node) Coll() CollParams {
	return CollParams{Size: int(n.Params[0]), Reduce: Reduce(n.Params[1]), Root: int(n.Params[2])}
}

// IsCollective reports whether op combines the values of a group of ranks.
func (o Op) IsCollective() bool { return o.Info().Class == ClassCollective }

// CollOutShape returns the output shape of collective op over x (dtype dt)
// with params p, or an error naming the op, the shape and the parameter
// that does not fit.
func CollOutShape(op Op, group string, dt dtype.DType, x []int, p CollParams) ([]int, error) {
	switch {
	case !groupName(group):
		return nil, fmt.Errorf("group name %q: want letters, digits, '_', '-' and '.'", group)
	case p.Size < 1:
		return nil, fmt.Errorf("group %q: size %d, want at least 1", group, p.Size)
	case !CollectiveDTypes.Has(dt):
		return nil, fmt.Errorf("group %q: dtype %v not in {%v}", group, dt, CollectiveDTypes)
	case p.Reduce < ReduceSum || p.Reduce > ReduceMin:
		return nil, fmt.Errorf("group %q: unknown reduction %d", group, int(p.Reduce))
	case p.Root < 0 || p.Root >= p.Size:
		return nil, fmt.Errorf("group %q: root %d outside the group's %d ranks", group, p.Root, p.Size)
	}
	switch op {
	case OpAllReduce, OpBroadcast:
		return append([]int{}, x...), nil
	case OpAllGather:
		return append([]int{p.Size}, x...), nil
	case OpReduceScatter:
		if len(x) == 0 || x[0] != p.Size {
			return nil, fmt.Errorf("group %q: input %v, want a leading dim of the group's size %d", group, x, p.Size)
		}
		return append([]int{}, x[1:]...), nil
	}
	return nil, fmt.Errorf("%s is not a collective", op)
}

func verifyCollective(n *Node, bad func(*Node, string, ...any)) {
	if len(n.Args) != 1 || len(n.Params) != len(collParamNames) {
		bad(n, "has %d args and %d params, want 1 and %d", len(n.Args), len(n.Params), len(collParamNames))
		return
	}
	x := n.Args[0]
	if x.DType != n.DType {
		bad(n, "dtype %v, argument %v", n.DType, x.DType)
		return
	}
	want, err := CollOutShape(n.Op, n.Name, n.DType, x.Shape, n.Coll())
	if err != nil {
		bad(n, "%v", err)
		return
	}
	if !slices.Equal(want, n.Shape) {
		bad(n, "shape %v, want %v", n.Shape, want)
	}
}

// groupName reports whether s is a usable group name: not empty, and only
// characters a step name or file name can carry.
func groupName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

package graph

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/tensor"
)

// Sharded programs: the user builds the single-device graph (global
// shapes, no collectives) and says which inputs are split over the ranks
// of a group, along which dim; CompileSharded derives the one program
// every rank runs (SPMD: local shapes, the same on every rank) and places
// the collectives. Each node of the graph is either split along one dim
// (every rank holds a contiguous 1/Size of it, rank r the r-th part) or
// replicated (every rank holds all of it), decided from its arguments:
//
//   - a split input is split; sources (full, arange, random) are
//     replicated;
//   - a view of a split node stays split when the split dim survives it
//     whole (transposes, permutes, broadcasts, reshapes that keep the split
//     dim as the outermost of the dims it becomes, narrows of other dims);
//   - an elementwise op is split when its split arguments agree on the dim
//     and its replicated ones are broadcast along it (a bias, a scalar);
//   - a reduction over dims that are not split stays split; a sum, max or
//     min over the split dim reduces each rank's part, then an AllReduce;
//   - a matmul a·b: replicated a times b split by columns is split by
//     columns (column-parallel Linear); a and b both split along the
//     contracted dim give partial products, summed by an AllReduce
//     (row-parallel Linear); rows of a, or batch dims of both, stay split;
//   - a quantized matmul by a weight split by rows is split by columns;
//   - index_select of a replicated table split along another dim stays
//     split; a table split by rows along the selected dim is a sharded
//     embedding (ParallelEmbedding: each rank picks the ids it holds,
//     an AllReduce sums; the rank enters as the input ShardRankInput);
//   - causal attention with q, k and v split by heads stays split;
//   - convolutions stay split by batch (a replicated weight), or split
//     by output channels (a weight split by rows, one group); pools and
//     upsampling keep a batch or channel split; a cumsum or argsort along
//     another dim than the split one, and a cat of parts split alike along
//     another dim, stay split;
//   - anything else computes replicated, its split arguments gathered
//     first (AllGather): always correct, slower.
//
// Outputs are replicated (gathered where split), so every rank returns
// the whole result. The sums over ranks are ordered differently from one
// device's, so results match the unsharded program within the reduction
// order's rounding.

// ShardRankInput is the input a sharded program takes when it needs its
// rank (a sharded embedding): u32 [1], the rank's number.
// ShardedProgram.Run supplies it.
const ShardRankInput = "loom.shard.rank"

// ShardedProgram is the program every rank of a group runs, with the
// inputs it splits.
type ShardedProgram struct {
	// Program is the rank's program: local shapes, collectives placed.
	*Program
	// Group is the group its collectives run over.
	Group Group
	// Splits maps each split input to the dim it is split along (of its
	// whole shape); the other inputs are given whole to every rank.
	Splits map[string]int
	// Collectives counts the collectives the compiler placed, by op name
	// (all_reduce, all_gather).
	Collectives map[string]int
	rank        bool
	global      map[string][]int // the inputs' whole shapes
}

// shard is a node's placement in the sharded program: its tensor there
// and the dim it is split along (-1: replicated).
type shard struct {
	t   *Tensor
	dim int
}

// sharder carries CompileSharded's state.
type sharder struct {
	src      *ir.Graph
	g        *Graph
	grp      Group
	n        int
	m        []shard
	gathered map[int]*Tensor
	rank     *Tensor
	colls    map[string]int
}

// CompileSharded compiles g for the ranks of group: splits maps input
// names to the dim each is split along (its size there must be a multiple
// of group.Size); inputs not named are replicated. See the rules above.
// g must have no collectives of its own. The program is compiled once, for
// all ranks.
func (g *Graph) CompileSharded(group Group, splits map[string]int, opts Options) (*ShardedProgram, error) {
	if err := g.usable("compile_sharded"); err != nil {
		return nil, err
	}
	if err := g.Err(); err != nil {
		return nil, err
	}
	if group.Size < 1 || group.Name == "" {
		return nil, opErr("compile_sharded", "group %q of %d ranks: want a name and at least one rank", group.Name, group.Size)
	}
	g.mu.Lock()
	src := g.ir
	g.mu.Unlock()
	s := &sharder{src: src, g: New(), grp: group, n: group.Size, m: make([]shard, len(src.Nodes)), gathered: map[int]*Tensor{}, colls: map[string]int{}}
	sp := &ShardedProgram{Group: group, Splits: map[string]int{}, global: map[string][]int{}}
	seen := map[string]bool{}
	for _, n := range src.Nodes {
		if n.Op == ir.OpInput {
			seen[n.Name] = true
		}
	}
	for name, d := range splits {
		if !seen[name] {
			return nil, opErr("compile_sharded", "split input %q is not an input of the graph", name)
		}
		sp.Splits[name] = d
	}
	for _, n := range src.Nodes {
		if err := s.node(n, splits); err != nil {
			return nil, err
		}
		if n.Op == ir.OpInput {
			sp.global[n.Name] = slices.Clone(n.Shape)
		}
	}
	for _, o := range src.Outputs {
		s.g.Output(o.Name, s.rep(o.Node))
	}
	p, err := s.g.Compile(opts)
	if err != nil {
		return nil, err
	}
	sp.Program, sp.rank, sp.Collectives = p, s.rank != nil, s.colls
	return sp, nil
}

// node places n.
func (s *sharder) node(n *ir.Node, splits map[string]int) error {
	info := n.Info()
	switch {
	case n.Op == ir.OpInput:
		d, ok := splits[n.Name]
		if !ok {
			s.m[n.ID] = shard{s.g.Input(n.Name, n.DType, n.Shape...), -1}
			return nil
		}
		if d < 0 {
			d += len(n.Shape)
		}
		if d < 0 || d >= len(n.Shape) || n.Shape[d]%s.n != 0 {
			return opErr("compile_sharded", "input %q %v%v cannot be split along dim %d over %d ranks (the dim must exist and be a multiple of the ranks)",
				n.Name, n.DType, n.Shape, splits[n.Name], s.n)
		}
		s.m[n.ID] = shard{s.g.Input(n.Name, n.DType, s.local(n.Shape, d)...), d}
	case info.Class == ir.ClassCollective:
		return opErr("compile_sharded", "the graph already has a collective (%s over %q): CompileSharded places them itself", n.Op, n.Name)
	case info.Class == ir.ClassSource:
		s.m[n.ID] = shard{s.g.intern(n.Op, n.DType, n.Shape, nil, n.Params, nil, n.Name), -1}
	case n.Op == ir.OpView:
		s.view(n)
	case info.Class == ir.ClassElementwise:
		s.elementwise(n)
	case info.Class == ir.ClassReduce:
		s.reduce(n)
	case n.Op == ir.OpMatmul:
		s.matmul(n)
	case n.Op == ir.OpQMatmul:
		x, w := s.m[n.Args[0].ID], s.m[n.Args[1].ID]
		r := len(n.Shape)
		switch {
		case w.dim == 0 && x.dim < 0:
			s.split(n, r-1, x.t, w.t)
		case w.dim < 0 && x.dim >= 0 && x.dim < r-1:
			s.split(n, x.dim, x.t, w.t)
		default:
			s.replicated(n)
		}
	case n.Op == ir.OpIndexSelect:
		s.indexSelect(n)
	case n.Op == ir.OpConv:
		x, w := s.m[n.Args[0].ID], s.m[n.Args[1].ID]
		switch {
		case x.dim == 0 && w.dim < 0: // the batch
			s.split(n, 0, x.t, w.t)
		case x.dim < 0 && w.dim == 0 && n.Conv().Groups == 1: // output channels
			s.split(n, 1, x.t, w.t)
		default:
			s.replicated(n)
		}
	case n.Op == ir.OpConvTranspose:
		x, w := s.m[n.Args[0].ID], s.m[n.Args[1].ID]
		if x.dim == 0 && w.dim < 0 {
			s.split(n, 0, x.t, w.t)
		} else {
			s.replicated(n)
		}
	case n.Op == ir.OpMaxPool || n.Op == ir.OpAvgPool || n.Op == ir.OpUpsampleNearest || n.Op == ir.OpUpsampleBilinear:
		s.keep(n, func(d int) bool { return d <= 1 }) // batch or channels
	case n.Op == ir.OpCumsum:
		s.keep(n, func(d int) bool { return d != int(n.Params[0]) })
	case n.Op == ir.OpArgsort:
		s.keep(n, func(d int) bool { return d != len(n.Shape)-1 })
	case n.Op == ir.OpCat:
		s.cat(n)
	case n.Op == ir.OpAttention:
		q, k, v, st := s.m[n.Args[0].ID], s.m[n.Args[1].ID], s.m[n.Args[2].ID], s.m[n.Args[3].ID]
		if q.dim == 1 && k.dim == 1 && v.dim == 1 && st.dim < 0 {
			s.split(n, 1, q.t, k.t, v.t, st.t)
		} else {
			s.replicated(n)
		}
	default:
		s.replicated(n)
	}
	if t := s.m[n.ID].t; t == nil || t.err != nil {
		if t != nil {
			return t.err
		}
		return opErr("compile_sharded", "internal error: node %d (%s) not placed", n.ID, n.Op)
	}
	return nil
}

// local is shape with dim d divided over the ranks.
func (s *sharder) local(shape []int, d int) []int {
	out := slices.Clone(shape)
	out[d] /= s.n
	return out
}

// split places n split along d, computed from args (tensors of the
// sharded graph) with n's op and params at the local shape.
func (s *sharder) split(n *ir.Node, d int, args ...*Tensor) {
	s.m[n.ID] = shard{s.intern(n, s.local(n.Shape, d), args), d}
}

// intern records n's op over args with shape.
func (s *sharder) intern(n *ir.Node, shape []int, args []*Tensor) *Tensor {
	nodes := make([]*ir.Node, len(args))
	for i, a := range args {
		if a.err != nil {
			return a
		}
		nodes[i] = a.n
	}
	return s.g.intern(n.Op, n.DType, shape, nodes, n.Params, nil, n.Name)
}

// rep is n replicated: itself, or its parts gathered (once per node).
func (s *sharder) rep(n *ir.Node) *Tensor {
	sh := s.m[n.ID]
	if sh.dim < 0 {
		return sh.t
	}
	if t, ok := s.gathered[n.ID]; ok {
		return t
	}
	t := sh.t.AllGather(s.grp, sh.dim)
	s.colls["all_gather"]++
	s.gathered[n.ID] = t
	return t
}

// replicated places n replicated, its split arguments gathered.
func (s *sharder) replicated(n *ir.Node) {
	args := make([]*Tensor, len(n.Args))
	for i, a := range n.Args {
		args[i] = s.rep(a)
	}
	s.m[n.ID] = shard{s.intern(n, n.Shape, args), -1}
}

// allReduce sums (or maxes, mins) the ranks' t.
func (s *sharder) allReduce(t *Tensor, op Reduce) *Tensor {
	s.colls["all_reduce"]++
	return t.AllReduce(s.grp, op)
}

// keep places a one-argument op that works on each slice along its
// argument's split dim alone (ok(dim)) split the same way, else
// replicated.
func (s *sharder) keep(n *ir.Node, ok func(d int) bool) {
	if a := s.m[n.Args[0].ID]; a.dim >= 0 && ok(a.dim) {
		s.split(n, a.dim, a.t)
		return
	}
	s.replicated(n)
}

// cat places a concatenation: split when every argument is split along
// the same dim, another than the concatenated one.
func (s *sharder) cat(n *ir.Node) {
	d := s.m[n.Args[0].ID].dim
	args := make([]*Tensor, len(n.Args))
	for i, a := range n.Args {
		sh := s.m[a.ID]
		if sh.dim != d || d < 0 || d == int(n.Params[0]) {
			s.replicated(n)
			return
		}
		args[i] = sh.t
	}
	s.split(n, d, args...)
}

// view places a view: split when the base's split dim survives it whole
// (localView), else a view of the gathered base.
func (s *sharder) view(n *ir.Node) {
	base := n.Args[0]
	b := s.m[base.ID]
	if b.dim >= 0 {
		if l, j, ok := localView(*n.Layout, base.Shape, b.dim, s.n); ok {
			s.m[n.ID] = shard{b.t.view("shard", l), j}
			return
		}
	}
	s.m[n.ID] = shard{s.rep(base).view("shard", n.Layout.Clone()), -1}
}

// localView is the view l of a contiguous base of shape bs, split along
// dim d over n ranks, as a view of the rank's part. Exactly one view dim j
// must span d's range whole (stride × extent = the stride of the dim
// before d: d itself, the outermost of the dims a reshape split d into, or
// a dim a reshape merged d and the dims after it into), with an extent
// that is a multiple of n; that dim is split. Dims inside d (the inner
// pieces of a split d) and after it keep their strides, dims before d
// scale theirs with the part, and the view must start d at 0 (no narrow
// of d). ok is false otherwise: the rank's part is not a view of the
// result's part.
func localView(l ir.Layout, bs []int, d, n int) (ir.Layout, int, bool) {
	inner := ir.Numel(bs[d+1:]) // stride of d
	outer := inner * bs[d]      // stride of the dim before d
	if inner == 0 || outer == 0 || (l.Offset%outer)/inner != 0 {
		return ir.Layout{}, 0, false
	}
	j := -1
	for i, st := range l.Strides {
		if st == 0 || l.Dims[i] == 1 {
			continue
		}
		span := st * l.Dims[i]
		switch {
		case st >= outer:
			if st%outer != 0 {
				return ir.Layout{}, 0, false
			}
		case span == outer && (inner%st == 0 || st%inner == 0):
			if j >= 0 {
				return ir.Layout{}, 0, false
			}
			j = i
		case st >= inner:
			if st%inner != 0 || span > outer { // a piece inside d
				return ir.Layout{}, 0, false
			}
		case span > inner: // straddles d's boundary without spanning it
			return ir.Layout{}, 0, false
		}
	}
	if j < 0 || l.Dims[j]%n != 0 {
		return ir.Layout{}, 0, false
	}
	out := l.Clone()
	out.Dims[j] /= n
	for i, st := range out.Strides {
		if st >= outer {
			out.Strides[i] = st / n
		}
	}
	out.Offset = l.Offset/outer*(outer/n) + l.Offset%outer
	return out, j, true
}

// alongBroadcast reports whether a replicated node is the same on every
// part along dim d of the output: a view that does not move along d (a
// broadcast), or a fill.
func alongBroadcast(a *ir.Node, d int) bool {
	if a.Op == ir.OpFull {
		return true
	}
	return a.Op == ir.OpView && d < len(a.Layout.Strides) && (a.Layout.Strides[d] == 0 || a.Shape[d] == 1)
}

// sameAlong reports whether a, a replicated argument, is the same on every
// part along dim d (alongBroadcast) and can be read at the part's extent
// (localBroadcast): a fill, or a broadcast view of a replicated base.
func (s *sharder) sameAlong(a *ir.Node, d int) bool {
	return s.m[a.ID].dim < 0 && alongBroadcast(a, d) && (a.Op != ir.OpView || s.m[a.Args[0].ID].dim < 0)
}

// localBroadcast is replicated a (alongBroadcast) at the local extent of
// dim d.
func (s *sharder) localBroadcast(a *ir.Node, d int) *Tensor {
	shape := s.local(a.Shape, d)
	if a.Op == ir.OpFull {
		return s.g.intern(ir.OpFull, a.DType, shape, nil, a.Params, nil, "")
	}
	if a.Shape[d] == 1 {
		return s.m[a.ID].t
	}
	l := a.Layout.Clone()
	l.Dims[d] = shape[d]
	return s.m[a.Args[0].ID].t.view("shard", l)
}

// elementwise places an elementwise op: split when its split arguments
// agree on a dim and its replicated ones are broadcast along it.
func (s *sharder) elementwise(n *ir.Node) {
	d := -1
	for _, a := range n.Args {
		if sd := s.m[a.ID].dim; sd >= 0 {
			if d >= 0 && sd != d {
				s.replicated(n)
				return
			}
			d = sd
		}
	}
	if d < 0 {
		s.replicated(n)
		return
	}
	args := make([]*Tensor, len(n.Args))
	for i, a := range n.Args {
		switch {
		case s.m[a.ID].dim >= 0:
			args[i] = s.m[a.ID].t
		case s.sameAlong(a, d):
			args[i] = s.localBroadcast(a, d)
		default:
			s.replicated(n)
			return
		}
	}
	s.split(n, d, args...)
}

// reduce places a reduction over the trailing Params[0] dims.
func (s *sharder) reduce(n *ir.Node) {
	a := s.m[n.Args[0].ID]
	k := int(n.Params[0])
	switch {
	case a.dim < 0:
		s.replicated(n)
	case a.dim < len(n.Shape)-k:
		s.split(n, a.dim, a.t)
	case n.Op == ir.OpSum || n.Op == ir.OpMax || n.Op == ir.OpMin:
		part := s.intern(n, n.Shape, []*Tensor{a.t})
		op := map[ir.Op]Reduce{ir.OpSum: ReduceSum, ir.OpMax: ReduceMax, ir.OpMin: ReduceMin}[n.Op]
		s.m[n.ID] = shard{s.allReduce(part, op), -1}
	default:
		s.replicated(n)
	}
}

// matmul places a [..., M, K] · b [..., K, N].
func (s *sharder) matmul(n *ir.Node) {
	an, bn := n.Args[0], n.Args[1]
	a, b := s.m[an.ID], s.m[bn.ID]
	r := len(n.Shape)
	switch {
	case a.dim < 0 && b.dim < 0:
		s.replicated(n)
	case a.dim == r-1 && b.dim == r-2: // the contracted dim: partial products
		s.m[n.ID] = shard{s.allReduce(s.intern(n, n.Shape, []*Tensor{a.t, b.t}), ReduceSum), -1}
	case a.dim < 0 && b.dim == r-1: // columns
		s.split(n, r-1, a.t, b.t)
	case a.dim == r-2 && b.dim < 0: // rows
		s.split(n, r-2, a.t, b.t)
	case a.dim >= 0 && a.dim < r-2 && a.dim == b.dim: // batch
		s.split(n, a.dim, a.t, b.t)
	case a.dim >= 0 && a.dim < r-2 && s.sameAlong(bn, a.dim):
		s.split(n, a.dim, a.t, s.localBroadcast(bn, a.dim))
	case b.dim >= 0 && b.dim < r-2 && s.sameAlong(an, b.dim):
		s.split(n, b.dim, s.localBroadcast(an, b.dim), b.t)
	default:
		s.replicated(n)
	}
}

// indexSelect places index_select(src, ids, dim).
func (s *sharder) indexSelect(n *ir.Node) {
	src, ids := s.m[n.Args[0].ID], s.m[n.Args[1].ID]
	dim := int(n.Params[0])
	switch {
	case ids.dim >= 0 || src.dim < 0:
		s.replicated(n)
	case src.dim != dim:
		s.split(n, src.dim, src.t, ids.t)
	case dim == 0 && len(n.Args[0].Shape) == 2 && len(n.Args[1].Shape) == 1 && n.Args[1].DType == dtype.U32:
		// A sharded embedding: rows rank·V/Size … of the table here.
		if s.rank == nil {
			s.rank = s.g.Input(ShardRankInput, dtype.U32, 1)
		}
		start := s.rank.Affine(float64(n.Args[0].Shape[0]/s.n), 0)
		s.colls["all_reduce"]++ // ParallelEmbedding ends in one
		s.m[n.ID] = shard{ParallelEmbedding(ids.t, src.t, start, s.grp), -1}
	default:
		s.replicated(n)
	}
}

// Shard returns rank's part of t, the whole value of input name: the
// input's slice along its split dim, or t itself for a replicated input
// (for callers that place each rank's weights once and keep them).
func (sp *ShardedProgram) Shard(name string, rank int, t *tensor.Tensor) (*tensor.Tensor, error) {
	shape, ok := sp.global[name]
	if !ok {
		return nil, fmt.Errorf("loom: shard: %q is not an input of the program", name)
	}
	if t == nil {
		return nil, fmt.Errorf("loom: shard: input %q is nil", name)
	}
	if !slices.Equal(t.Shape(), shape) {
		return nil, fmt.Errorf("loom: shard: input %q is %v%v, the program was built for %v", name, t.DType(), t.Shape(), shape)
	}
	if rank < 0 || rank >= sp.Group.Size {
		return nil, fmt.Errorf("loom: shard: rank %d of a group of %d", rank, sp.Group.Size)
	}
	d, ok := sp.Splits[name]
	if !ok {
		return t, nil
	}
	if d < 0 {
		d += len(shape)
	}
	local := slices.Clone(shape)
	local[d] /= sp.Group.Size
	out, err := tensor.Zeros(t.DType(), local...)
	if err != nil {
		return nil, err
	}
	es := t.DType().Size()
	inner := ir.Numel(shape[d+1:]) * es
	part := local[d] * inner
	src, dst := t.Bytes(), out.Bytes()
	for o := range ir.Numel(shape[:d]) {
		copy(dst[o*part:(o+1)*part], src[o*shape[d]*inner+rank*part:])
	}
	return out, nil
}

// Run runs the program on every rank at once — rank r on execs[r] with
// comms[r], its communicator of sp.Group — given the whole inputs (each
// rank gets its part, Shard), and returns rank 0's outputs (every rank's
// are the same: outputs are replicated). A rank's failure fails the run,
// naming the rank; the others stop at their next collective when their
// communicators break (the CPU's do when the run's context is cancelled,
// which Run does on the first failure).
func (sp *ShardedProgram) Run(ctx context.Context, execs []exec.Executor, comms []exec.Comm, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	n := sp.Group.Size
	if len(execs) != n || len(comms) != n {
		return nil, fmt.Errorf("loom: run sharded: %d executors and %d communicators for a group of %d ranks", len(execs), len(comms), n)
	}
	local := make([]map[string]*tensor.Tensor, n)
	for r := range n {
		local[r] = map[string]*tensor.Tensor{}
		for name, t := range inputs {
			p, err := sp.Shard(name, r, t)
			if err != nil {
				return nil, err
			}
			local[r][name] = p
		}
		if sp.rank {
			local[r][ShardRankInput], _ = tensor.New([]uint32{uint32(r)}, 1)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outs := make([]map[string]*tensor.Tensor, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[r], errs[r] = sp.Program.Run(exec.WithComms(ctx, comms[r]), execs[r], local[r])
			if errs[r] != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, errs[r])
				cancel()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("loom: run sharded over %q: %w", sp.Group.Name, err)
	}
	return outs[0], nil
}

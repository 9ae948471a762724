package fuse

import (
	"fmt"
	"slices"

	"github.com/loomgraph/loom/ir"
)

// MaxKernelInputs bounds the operands of one fused kernel: each is a pointer
// argument and a live load stream, and register pressure grows with them.
const MaxKernelInputs = 16

// breakRule is one reason a producer is not computed inside its consumers'
// kernel. The rules are checked in order; the first that applies wins and its
// reason goes to the log.
type breakRule struct {
	name   string
	reason string // fmt format; %s is the rule's detail
	check  func(f *fuser, n *ir.Node) (detail string, breaks bool)
}

// breakRules is the fusion legality table.
var breakRules = []breakRule{
	{"output", "graph output: its value must be stored%s", func(f *fuser, n *ir.Node) (string, bool) {
		return "", f.outputs[n]
	}},
	{"class", "not elementwise (%s): runs as its own step", func(f *fuser, n *ir.Node) (string, bool) {
		return n.Info().Class.String(), !fusable(n)
	}},
	{"consumer", "read by a step that does not fuse elementwise producers (%s)", func(f *fuser, n *ir.Node) (string, bool) {
		for _, c := range f.readers(n) {
			if !fusable(c.node) {
				return c.node.Op.String(), true
			}
		}
		return "", false
	}},
	{"domain", "%s", func(f *fuser, n *ir.Node) (string, bool) {
		for _, g := range f.consumerGroups(n) {
			if _, _, why := f.domainWith(g, n); why != "" {
				return why, true
			}
		}
		return "", false
	}},
	{"shared", "read by %s kernels and not cheap to recompute (cheap: fills, arange and rand, and casts, copies, negations, abs, sqr and affine of values loaded from memory)", func(f *fuser, n *ir.Node) (string, bool) {
		gs := f.consumerGroups(n)
		return fmt.Sprint(len(gs)), len(gs) > 1 && !f.cheap(n)
	}},
	{"inputs", "the kernel would read more than %s operands", func(f *fuser, n *ir.Node) (string, bool) {
		for _, g := range f.consumerGroups(n) {
			if f.operandsWith(g, n) > MaxKernelInputs {
				return fmt.Sprint(MaxKernelInputs), true
			}
		}
		return "", false
	}},
}

// fusable reports whether a node can be computed inside a fused kernel.
func fusable(n *ir.Node) bool {
	c := n.Info().Class
	return c == ir.ClassElementwise || c == ir.ClassReduce || n.Op == ir.OpFull || n.Op == ir.OpArange || n.Op.IsRandom()
}

// rowShape is shape with its trailing k dims set to 1.
func rowShape(shape []int, k int) []int {
	s := slices.Clone(shape)
	for d := len(s) - k; d < len(s); d++ {
		s[d] = 1
	}
	return s
}

// rowAxesOf returns k when narrow is wide with its trailing k dims at 1
// (and at least one of them larger than 1 in wide), else 0.
func rowAxesOf(narrow, wide []int) int {
	if len(narrow) != len(wide) {
		return 0
	}
	k := 0
	for d := range wide {
		if narrow[d] != wide[d] {
			if narrow[d] != 1 {
				return 0
			}
			k = len(wide) - d
			break
		}
	}
	if k == 0 || !slices.Equal(narrow, rowShape(wide, k)) {
		return 0
	}
	return k
}

// domainWith returns the domain group g would have with n computed in it,
// or why n cannot join. Element order is the constraint: a kernel computes
// whole-shape values in row-major order and row values once per row, so n
// must be read directly (or through a reshape), or — as a row value —
// broadcast across the rows. A transposed, narrowed or other broadcast read
// needs n in memory.
func (f *fuser) domainWith(g *Group, n *ir.Node) ([]int, int, string) {
	shape, k := g.Shape, g.RowAxes
	if n.Info().Class == ir.ClassReduce {
		w, nk := n.Args[0].Shape, n.ReduceAxes()
		switch {
		case k == 0 && slices.Equal(n.Shape, shape):
			shape, k = w, nk // g's values become row values of the reduction
		case k == 0 && slices.Equal(w, shape):
			k = nk // g reads the reduction broadcast over its rows
		case k != nk || !slices.Equal(w, shape):
			return nil, 0, fmt.Sprintf("reduction over %v (%d axes) does not match the kernel's rows (%v, %d axes)", w, nk, shape, k)
		}
	}
	for _, r := range f.readers(n) {
		if !f.members[g][r.node] {
			continue
		}
		if r.view == nil || inlineView(r.view) {
			continue
		}
		rk := rowAxesOf(n.Shape, r.view.Shape)
		want, err := ir.Contiguous(n.Shape).BroadcastTo(r.view.Shape)
		if rk == 0 || err != nil || !want.Equal(*r.view.Layout) || !slices.Equal(r.view.Shape, shape) || (k != 0 && k != rk) {
			return nil, 0, fmt.Sprintf("read through a view (%v) that is not a broadcast of row values: a kernel computes values in its own row-major order, so the value must be in memory", r.view.Layout)
		}
		k = rk
	}
	if !slices.Equal(n.Shape, shape) && !slices.Equal(n.Shape, rowShape(shape, k)) {
		return nil, 0, fmt.Sprintf("shape %v is neither the kernel's %v nor its row shape", n.Shape, shape)
	}
	return shape, k, ""
}

// reader is one use of a node: the consumer, and the view it reads through
// (nil for a direct read).
type reader struct {
	node *ir.Node
	view *ir.Node
}

type fuser struct {
	s         *State
	consumers [][]*ir.Node
	outputs   map[*ir.Node]bool
	groupsOf  [][]*Group // groups each node is computed in
	members   map[*Group]map[*ir.Node]bool
	// ins is each group's operand set, base → layouts read, kept as members
	// join (operandsWith); nIns counts its (base, layout) pairs.
	ins  map[*Group]map[*ir.Node]map[string]bool
	nIns map[*Group]int
}

func (f *fuser) readers(n *ir.Node) []reader {
	var rs []reader
	for _, c := range f.consumers[n.ID] {
		if c.Op == ir.OpView {
			for _, cc := range f.consumers[c.ID] {
				rs = append(rs, reader{node: cc, view: c})
			}
			continue
		}
		rs = append(rs, reader{node: c})
	}
	return rs
}

func (f *fuser) consumerGroups(n *ir.Node) []*Group {
	var gs []*Group
	for _, r := range f.readers(n) {
		for _, g := range f.groupsOf[r.node.ID] {
			if !slices.Contains(gs, g) {
				gs = append(gs, g)
			}
		}
	}
	return gs
}

// cheap reports whether recomputing n in several kernels beats storing it
// once and loading it in each: fills, arange and uniform random values cost
// no memory traffic (a Philox block is some twenty integer multiplies per
// four values, which a memory-bound GPU kernel hides), and a single cheap
// op of a value loaded from memory costs one load either way. Normal random
// values are not cheap: a logarithm, a square root and a sine and cosine
// per pair.
func (f *fuser) cheap(n *ir.Node) bool {
	switch n.Op {
	case ir.OpFull, ir.OpArange, ir.OpRandUniform:
		return true
	case ir.OpCast, ir.OpCopy, ir.OpNeg, ir.OpAbs, ir.OpSqr, ir.OpAffine:
		base, _ := n.Args[0].Base()
		return !computes(base) || base.Op == ir.OpFull
	}
	return false
}

// operandsWith counts the operands group g would have if n joined it: one
// per distinct (buffer, layout) read, as plan makes them. It looks only at
// n's reads and g's running operand set (f.ins), so grouping a chain of any
// length stays linear.
func (f *fuser) operandsWith(g *Group, n *ir.Node) int {
	ins := f.ins[g]
	count := f.nIns[g] - len(ins[n]) // n's value is computed, no longer read
	var added map[*ir.Node]map[string]bool
	for _, a := range n.Args {
		base, l := a.Base()
		if f.members[g][base] {
			continue
		}
		key := l.String()
		if ins[base][key] || added[base][key] {
			continue
		}
		if added == nil {
			added = map[*ir.Node]map[string]bool{}
		}
		if added[base] == nil {
			added[base] = map[string]bool{}
		}
		added[base][key] = true
		count++
	}
	return count
}

// addReads records m's reads of non-members in g's operand set.
func (f *fuser) addReads(g *Group, m *ir.Node) {
	ins := f.ins[g]
	if ins == nil {
		ins = map[*ir.Node]map[string]bool{}
		f.ins[g] = ins
	}
	for _, a := range m.Args {
		base, l := a.Base()
		if f.members[g][base] {
			continue
		}
		key := l.String()
		if ins[base] == nil {
			ins[base] = map[string]bool{}
		}
		if !ins[base][key] {
			ins[base][key] = true
			f.nIns[g]++
		}
	}
}

func (f *fuser) join(g *Group, n *ir.Node) {
	g.Shape, g.RowAxes, _ = f.domainWith(g, n)
	g.Members = append(g.Members, n)
	f.members[g][n] = true
	f.groupsOf[n.ID] = append(f.groupsOf[n.ID], g)
	f.nIns[g] -= len(f.ins[g][n])
	delete(f.ins[g], n)
	f.addReads(g, n)
}

// fuseElementwise groups elementwise DAGs into kernels. It walks nodes from
// last to first; a node joins the group(s) of its consumers unless a break
// rule applies, in which case it roots a new group and is stored. Because a
// node joins only when every consumer is in that group (or it is cheap to
// recompute in each), every group has exactly one stored value, its root.
func fuseElementwise(s *State) error {
	g := s.Graph
	f := &fuser{s: s, consumers: g.Consumers(), outputs: map[*ir.Node]bool{}, groupsOf: make([][]*Group, len(g.Nodes)), members: map[*Group]map[*ir.Node]bool{}, ins: map[*Group]map[*ir.Node]map[string]bool{}, nIns: map[*Group]int{}}
	for _, o := range g.Outputs {
		f.outputs[stored(o.Node)] = true
	}
	var groups []*Group
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := g.Nodes[i]
		if !computes(n) {
			continue
		}
		broke := ""
		for _, r := range breakRules {
			if detail, b := r.check(f, n); b {
				broke = fmt.Sprintf(r.reason, detail)
				if r.name != "output" || len(f.consumers[n.ID]) > 0 {
					s.Log.Add("group", n.ID, "%s stored, not fused: %s", n.Op, broke)
				}
				break
			}
		}
		if broke == "" && len(f.consumerGroups(n)) > 0 {
			for _, cg := range f.consumerGroups(n) {
				f.join(cg, n)
			}
			continue
		}
		root := newGroup(n)
		f.members[root] = map[*ir.Node]bool{n: true}
		f.groupsOf[n.ID] = append(f.groupsOf[n.ID], root)
		f.addReads(root, n)
		groups = append(groups, root)
	}
	for _, gr := range groups {
		slices.SortFunc(gr.Members, func(a, b *ir.Node) int { return a.ID - b.ID })
	}
	slices.SortFunc(groups, func(a, b *Group) int { return a.Root.ID - b.Root.ID })
	s.Groups = groups
	return nil
}

package codegen

// Row kernel analysis: newRowGen checks a planned kernel and fixes what
// the rendering needs: each instruction's pass (schedule), the chunk width
// (chooseVector), the mapping of rows onto threads (newGroupLaunch),
// whether to run in two stages, and which whole-row values stay in
// registers between passes (planCache, demand). Kept apart from the
// rendering so each decision is made once and tests (TestRowPlans) can
// inspect it on rowGen without reading source text.

import (
	"fmt"
	"math"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

func newRowGen(k *plan.Kernel, t Target, opt rowOptions) (*rowGen, error) {
	t, err := t.check()
	if err != nil {
		return nil, err
	}
	if k.Out == nil {
		return nil, fmt.Errorf("no output buffer")
	}
	if len(k.Instrs) == 0 {
		return nil, fmt.Errorf("no instructions")
	}
	if k.RowAxes <= 0 || k.RowAxes > len(k.Shape) {
		return nil, fmt.Errorf("%d row axes for shape %v: not a row kernel", k.RowAxes, k.Shape)
	}
	g := &rowGen{k: k, t: t, opt: opt, rowShape: k.RowShape(), L: k.RowLen(), nOuter: len(k.Shape) - k.RowAxes}
	g.rows = ir.Numel(g.rowShape)
	g.degen = g.L == 1
	if !k.Out.DType.Valid() {
		return nil, fmt.Errorf("output dtype %v", k.Out.DType)
	}
	numel := k.Numel()
	for i, o := range k.Ins {
		if o.Buf == nil || !o.Buf.DType.Valid() {
			return nil, fmt.Errorf("operand %d has no buffer or an invalid dtype", i)
		}
		l := o.Layout
		whole := slices.Equal(l.Dims, k.Shape)
		if (!whole && !slices.Equal(l.Dims, g.rowShape)) || len(l.Strides) != len(l.Dims) {
			return nil, fmt.Errorf("operand %d has layout %v: its dims are neither the kernel shape %v nor the row shape %v", i, l, k.Shape, g.rowShape)
		}
		if l.Offset < 0 || slices.ContainsFunc(l.Strides, func(s int) bool { return s < 0 }) {
			return nil, fmt.Errorf("operand %d has a negative stride or offset: %v", i, l)
		}
		if _, hi := l.Span(); l.Numel() > 0 && hi > o.Buf.Numel() {
			return nil, fmt.Errorf("operand %d layout %v reads past its buffer %v", i, l, o.Buf)
		}
		whole = whole && !g.degen
		op := rowOperand{dt: o.Buf.DType, whole: whole,
			outer: ir.Layout{Dims: l.Dims[:g.nOuter], Strides: l.Strides[:g.nOuter], Offset: l.Offset}.Merged()}
		if whole {
			op.inner = ir.Layout{Dims: l.Dims[g.nOuter:], Strides: l.Strides[g.nOuter:]}.Merged()
		}
		g.ops = append(g.ops, op)
	}
	g.last = len(k.Instrs) - 1
	nred := 0
	for j, in := range k.Instrs {
		n := in.Node
		if n == nil {
			return nil, fmt.Errorf("instruction %d has no node", j)
		}
		ri := rowInstr{n: n, args: in.Args, row: slices.Equal(n.Shape, g.rowShape)}
		if !ri.row && !slices.Equal(n.Shape, k.Shape) {
			return nil, fmt.Errorf("instruction %d (%s) has shape %v: neither the kernel shape %v nor the row shape %v", j, n.Op, n.Shape, k.Shape, g.rowShape)
		}
		for _, r := range in.Args {
			var dt dtype.DType
			var argRow bool
			switch {
			case r.Operand && r.Index >= 0 && r.Index < len(k.Ins):
				dt, argRow = k.Ins[r.Index].Buf.DType, !g.ops[r.Index].whole
			case !r.Operand && r.Index >= 0 && r.Index < j:
				dt, argRow = k.Instrs[r.Index].Node.DType, g.ins[r.Index].row
			default:
				return nil, fmt.Errorf("instruction %d (%s) reads %v, which is not available", j, n.Op, r)
			}
			if r.Broadcast && !argRow {
				return nil, fmt.Errorf("instruction %d (%s) reads %v as a row value, but it holds whole rows", j, n.Op, r)
			}
			wantRow := ri.row && !(n.Info().Class == ir.ClassReduce && !g.degen)
			if !r.Broadcast && argRow != wantRow {
				return nil, fmt.Errorf("instruction %d (%s) reads %v: row value mismatch", j, n.Op, r)
			}
			ri.argDT = append(ri.argDT, dt)
		}
		if n.Info().Class == ir.ClassReduce {
			if err := checkReduce(n, ri.argDT); err != nil {
				return nil, err
			}
			if n.ReduceAxes() != k.RowAxes || !slices.Equal(n.Args[0].Shape, k.Shape) {
				return nil, fmt.Errorf("reduction %s (node %%%d) reduces %d axes of %v in a kernel with rows of %d axes of %v", n.Op, n.ID, n.ReduceAxes(), n.Args[0].Shape, k.RowAxes, k.Shape)
			}
			ri.red, ri.degen = !g.degen, g.degen
			if ri.red {
				nred++
				g.red = j
			}
		} else if err := checkInstr(n, ri.argDT); err != nil {
			return nil, err
		}
		g.ins = append(g.ins, ri)
	}
	if last := k.Instrs[g.last].Node; last.DType != k.Out.DType {
		return nil, fmt.Errorf("stores a %v value into a %v buffer", last.DType, k.Out.DType)
	}
	wantOut := numel
	if g.ins[g.last].row {
		wantOut = g.rows
	}
	if k.Out.Numel() != wantOut {
		return nil, fmt.Errorf("output buffer %v holds %d elements, the last instruction produces %d", k.Out, k.Out.Numel(), wantOut)
	}

	g.schedule()
	g.wide = numel > math.MaxInt32
	for _, o := range k.Ins {
		if _, hi := o.Layout.Span(); hi > 1<<31 {
			g.wide = true
		}
	}
	g.chooseVector()
	g.nv = 0
	if g.L > 0 && !g.degen {
		g.nv = g.L / g.vec
	}
	wave := t.WaveSize
	if g.degen {
		g.main = newGroupLaunch(g.rows, 1, 1, 1, wave)
	} else {
		g.main = newGroupLaunch(g.rows, g.nv, opt.vecsPerThread, opt.maxGroup, wave)
		for g.main.blocks < opt.fewBlocks && g.main.group < min(opt.maxGroup, 1024) && g.main.group < g.nv {
			wider := newGroupLaunch(g.rows, g.nv, (g.nv+2*g.main.group-1)/(2*g.main.group), opt.maxGroup, wave)
			if wider.group <= g.main.group {
				break
			}
			g.main = wider
		}
	}
	// Two stages: one reduction, read in the one pass, whose row value
	// (and what follows from it) is the output.
	if nred == 1 && g.passes == 1 && g.ins[g.last].row && g.rows > 0 && g.rows < opt.splitRows {
		cl := opt.splitBlock * opt.splitVecs // chunks per partial block
		if c := (g.nv + cl - 1) / cl; c >= 2 {
			g.split, g.chunks = true, c
			g.part = groupLaunch{group: opt.splitBlock, block: opt.splitBlock, rpb: 1, wg: max(1, opt.splitBlock/wave), iters: opt.splitVecs, rows: g.rows * c, n: cl, blocks: g.rows * c}
			g.comb = newGroupLaunch(g.rows, c, 4, opt.maxGroup, wave)
			if g.rows*c > maxThreads/opt.splitBlock {
				return nil, fmt.Errorf("%d partial blocks: too many", g.rows*c)
			}
		}
	}
	g.planCache()
	return g, nil
}

// checkReduce checks a reduction's argument and result dtypes.
func checkReduce(n *ir.Node, argDT []dtype.DType) error {
	info := n.Op.Info()
	switch {
	case len(argDT) != 1:
		return fmt.Errorf("op %s (node %%%d) has %d args, want 1", n.Op, n.ID, len(argDT))
	case len(n.Params) < 1:
		return fmt.Errorf("op %s (node %%%d) has no axes parameter", n.Op, n.ID)
	case !info.In.Has(argDT[0]):
		return fmt.Errorf("op %s does not support dtype %v", n.Op, argDT[0])
	case n.DType != info.OutDType(argDT[0]):
		return fmt.Errorf("op %s (node %%%d) of %v args has dtype %v, want %v", n.Op, n.ID, argDT[0], n.DType, info.OutDType(argDT[0]))
	}
	switch n.Op {
	case ir.OpSum, ir.OpMax, ir.OpMin, ir.OpArgmax, ir.OpArgmin:
		return nil
	}
	return fmt.Errorf("reduction %s has no GPU rendering", n.Op)
}

// maxThreads bounds a grid in threads (AMD counts a grid in work-items, a
// 32-bit number).
const maxThreads = 1 << 31

func newGroupLaunch(rows, n, perThread, maxGroup, wave int) groupLaunch {
	gl := groupLaunch{group: 1, rows: rows, n: n}
	maxGroup = min(maxGroup, 1024) // a block; and at most 32 waves, which the cross-wave butterfly needs
	for gl.group < maxGroup && gl.group*perThread < n {
		gl.group *= 2
	}
	gl.block = max(gl.group, BlockSize)
	gl.rpb = gl.block / gl.group
	gl.wg = max(1, gl.group/wave)
	gl.iters = (n + gl.group - 1) / gl.group
	gl.blocks = (rows + gl.rpb - 1) / gl.rpb
	if gl.blocks*gl.block > maxThreads {
		gl.blocks, gl.loop = maxThreads/gl.block, true
	}
	gl.blocks = max(gl.blocks, 1)
	return gl
}

// schedule assigns passes: a whole-row instruction runs in the first pass
// where its arguments are known (a row value is known after the pass that
// reads the reductions it depends on), and a reduction reads its input in
// that input's pass.
func (g *rowGen) schedule() {
	passOf := func(r plan.Ref) int {
		switch {
		case r.Operand && !r.Broadcast && g.ops[r.Index].whole:
			return 0
		case r.Operand:
			return 0 // row operands are known from the start
		case r.Broadcast || g.ins[r.Index].row:
			return g.ins[r.Index].avail
		}
		return g.ins[r.Index].pass
	}
	g.passes = 0
	for j := range g.ins {
		in := &g.ins[j]
		p := 0
		for _, a := range in.args {
			p = max(p, passOf(a))
		}
		switch {
		case in.red:
			in.pass, in.avail = p, p+1
			g.passes = max(g.passes, p+1)
		case in.row:
			in.avail = p
		default:
			in.pass = p
			g.passes = max(g.passes, p+1)
		}
	}
}

// chooseVector picks Elems: 16 bytes of the narrowest contiguous whole-row
// access (operands contiguous along the row, and the output when it holds
// whole rows), capped at 64 bytes of the widest, and a divisor of the row
// length (a power of two), so that chunks never straddle rows.
func (g *rowGen) chooseVector() {
	g.vec = 1
	minS, maxS := 0, 0
	note := func(s int) {
		if minS == 0 || s < minS {
			minS = s
		}
		maxS = max(maxS, s)
	}
	for _, o := range g.ops {
		if o.whole && len(o.inner.Dims) == 1 && o.inner.Strides[0] == 1 {
			note(o.dt.Size())
		}
	}
	if !g.ins[g.last].row {
		note(g.k.Out.DType.Size())
	}
	if minS > 0 && g.L > 0 && !g.degen {
		g.vec = vecBytes / minS
		for g.vec > 1 && g.vec*maxS > 64 {
			g.vec /= 2
		}
		for g.L%g.vec != 0 {
			g.vec /= 2
		}
	}
	for i := range g.ops {
		o := &g.ops[i]
		switch {
		case !o.whole:
			o.desc = "one value per row"
		case len(o.inner.Dims) == 0:
			o.desc = "broadcast along the row"
		case len(o.inner.Dims) == 1 && o.inner.Strides[0] == 1:
			c := g.chunk(o.dt)
			o.vector = loadFunc(o.dt, c) != "" && o.outer.Offset*o.dt.Size()%c == 0
			for _, s := range o.outer.Strides {
				o.vector = o.vector && s*o.dt.Size()%c == 0
			}
			o.desc = "contiguous along the row, scalar loads"
			if o.vector {
				o.desc = fmt.Sprintf("contiguous along the row, %d-byte loads", c)
			}
		case len(o.inner.Dims) == 1:
			o.desc = fmt.Sprintf("stride %d along the row", o.inner.Strides[0])
		default:
			o.desc = "strided along the row, address per element"
		}
	}
}

func (g *rowGen) chunk(d dtype.DType) int { return min(vecBytes, g.vec*d.Size()) }

// planCache decides which whole-row values are kept in registers between
// passes. Without caching, a pass recomputes every whole-row value it needs
// from the operands (reloading them). A value needed in several passes is
// cached when one of its readers is needed in one pass only (a reduction,
// or the end of a chain): that cuts the recomputation right there. The
// cache is used when it fits cacheWords 32-bit registers per thread (and
// half the register file of a full block); otherwise the kernel recomputes.
func (g *rowGen) planCache() {
	P := g.passes
	if g.split {
		P = 1
	}
	g.opCache, g.inCache = make([]bool, len(g.ops)), make([]bool, len(g.ins))
	g.demand(P)
	g.opFirst, g.inFirst = firstPasses(g.opDem), firstPasses(g.inDem)
	if g.split || g.degen || P < 2 {
		return
	}
	multi := func(d []bool) bool {
		n := 0
		for _, b := range d {
			if b {
				n++
			}
		}
		return n > 1
	}
	some := false
	for j, in := range g.ins {
		if in.row && !in.red {
			continue
		}
		for _, a := range in.args {
			if a.Broadcast {
				continue
			}
			single := in.red || !multi(g.inDem[j])
			if !single {
				continue
			}
			if a.Operand && g.ops[a.Index].whole && multi(g.opDem[a.Index]) {
				g.opCache[a.Index], some = true, true
			}
			if !a.Operand && !g.ins[a.Index].row && multi(g.inDem[a.Index]) {
				g.inCache[a.Index], some = true, true
			}
		}
	}
	if !some {
		return
	}
	words := 0
	for k, c := range g.opCache {
		if c {
			words += (computeSize(g.ops[k].dt) + 3) / 4
		}
	}
	for j, c := range g.inCache {
		if c {
			words += (computeSize(g.ins[j].n.DType) + 3) / 4
		}
	}
	words *= g.main.iters * g.vec
	budget := min(g.opt.cacheWords, 65536/g.main.block/2-8)
	if words > budget {
		clear(g.opCache)
		clear(g.inCache)
		return
	}
	g.cache = true
	g.demand(P)
}

// demand computes, for each of P passes, the whole-row values the pass
// needs: the inputs of the reductions it reads and the stored output, and
// recursively their arguments, stopping at values cached in an earlier
// pass.
func (g *rowGen) demand(P int) {
	g.opDem, g.inDem = make([][]bool, len(g.ops)), make([][]bool, len(g.ins))
	for k := range g.opDem {
		g.opDem[k] = make([]bool, P)
	}
	for j := range g.inDem {
		g.inDem[j] = make([]bool, P)
	}
	for q := range P {
		var visit func(r plan.Ref)
		visit = func(r plan.Ref) {
			switch {
			case r.Broadcast:
			case r.Operand:
				if g.ops[r.Index].whole {
					g.opDem[r.Index][q] = true
				}
			case !g.ins[r.Index].row && !g.inDem[r.Index][q]:
				g.inDem[r.Index][q] = true
				if g.inCache[r.Index] && g.inFirst[r.Index] < q {
					return
				}
				for _, a := range g.ins[r.Index].args {
					visit(a)
				}
			}
		}
		for _, in := range g.ins {
			if in.red && in.pass == q {
				visit(in.args[0])
			}
		}
		if l := g.ins[g.last]; !l.row && l.pass == q {
			visit(plan.Ref{Index: g.last})
		}
	}
}

func firstPasses(dem [][]bool) []int {
	out := make([]int, len(dem))
	for i, d := range dem {
		out[i] = slices.Index(d, true)
	}
	return out
}

// computeSize is the size in bytes of d's compute type.
func computeSize(d dtype.DType) int {
	switch computeType(d) {
	case "double", "long long":
		return 8
	}
	return 4
}

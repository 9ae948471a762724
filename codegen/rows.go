package codegen

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// rowOptions are the tuning knobs of row kernels (see doc.go, "Row
// kernels"); Rows uses defaultRowOptions, the tests also try others.
type rowOptions struct {
	// vecsPerThread is the number of chunks (Elems consecutive elements)
	// per thread and pass the group size aims at: a row of n chunks gets
	// the smallest power-of-two group with group·vecsPerThread ≥ n, at most
	// maxGroup threads.
	vecsPerThread, maxGroup int
	// cacheWords bounds the 32-bit registers per thread that hold whole-row
	// values between passes; a kernel needing more recomputes them.
	cacheWords int
	// A single reduction over fewer than splitRows rows is split in two
	// stages when a row spans at least two chunks of splitBlock threads ×
	// splitVecs vectors.
	splitRows, splitBlock, splitVecs int
	// minBlocks > 0 asks NVRTC for at least that many resident blocks per
	// multiprocessor (__launch_bounds__'s second argument, which bounds the
	// registers per thread); AMD ignores it (HIP gives that argument
	// another meaning).
	minBlocks int
}

var defaultRowOptions = rowOptions{vecsPerThread: 4, maxGroup: 1024, cacheWords: 64, splitRows: 512, splitBlock: 256, splitVecs: 8}

// Rows renders one planned row kernel (RowAxes > 0) for t. It fails, naming
// the op and dtype, for anything it cannot render.
func Rows(k *plan.Kernel, t Target) (*Source, error) {
	return rows(k, t, defaultRowOptions)
}

func rows(k *plan.Kernel, t Target, opt rowOptions) (*Source, error) {
	t, err := t.check()
	if err != nil {
		return nil, err
	}
	g, err := newRowGen(k, t, opt)
	if err != nil {
		return nil, fmt.Errorf("codegen: row kernel %s: %w", k.Name, err)
	}
	body := g.render()
	prelude := PreludeFor(t, body)
	h := fnv.New64a()
	h.Write([]byte(prelude))
	h.Write([]byte(body))
	name := fmt.Sprintf("%s_%08x", baseName(k.Name), uint32(h.Sum64()))
	body = strings.ReplaceAll(body, namePlaceholder, name)
	src := &Source{Name: name, Code: prelude + body, Body: body, Elems: g.vec, Index64: g.wide, Params: kernelParams(k), Row: true}
	if g.split {
		src.Launches = []Launch{
			{Name: name, Grid: [3]uint32{uint32(g.rows * g.chunks), 1, 1}, Block: [3]uint32{uint32(g.part.block), 1, 1}},
			{Name: name + "_combine", Grid: [3]uint32{uint32(g.comb.blocks), 1, 1}, Block: [3]uint32{uint32(g.comb.block), 1, 1}},
		}
		src.ScratchBytes = g.scratchBytes()
		src.Params = append(src.Params, Param{Name: "scratch", CType: "unsigned char* __restrict__", DType: dtype.U8, Scratch: true})
		src.Loop = g.comb.loop
	} else {
		src.Launches = []Launch{{Name: name, Grid: [3]uint32{uint32(g.main.blocks), 1, 1}, Block: [3]uint32{uint32(g.main.block), 1, 1}}}
		src.Loop = g.main.loop
	}
	src.Grid, src.Block = src.Launches[0].Grid, src.Launches[0].Block
	return src, nil
}

// rowOperand is how a row kernel reads one operand.
type rowOperand struct {
	dt    dtype.DType
	whole bool      // whole rows (else one value per row)
	outer ir.Layout // reduced, offset included: row index → its first element
	inner ir.Layout // reduced, offset 0: position in the row → element (whole)
	// vector: contiguous in the row and aligned for wide loads.
	vector bool
	desc   string
}

// rowInstr is one instruction with its place in the pass structure.
type rowInstr struct {
	n     *ir.Node
	args  []plan.Ref
	argDT []dtype.DType
	row   bool // one value per row
	red   bool // a reduction over the row
	// degen: a reduction over rows of one element (the kernel's row dims
	// are all 1): the value itself, computed like any row value.
	degen bool
	// pass: for a whole-row instruction, the first pass in which its
	// arguments are known; for a reduction, the pass that reads its input.
	pass int
	// avail: for a row value, the number of passes after which it is known.
	avail int
}

// groupLaunch is how one launch maps rows onto threads: a group of
// `group` lanes (a power of two) per row, `rpb` rows per block, each lane
// taking chunks lane, lane + group, … (iters of them) of the row's n.
type groupLaunch struct {
	group, block, rpb, wg, iters int
	rows, n                      int
	blocks                       int
	loop                         bool // a grid-stride loop over row blocks
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

// rowGen holds one row kernel's analysis.
type rowGen struct {
	k        *plan.Kernel
	t        Target
	opt      rowOptions
	rows, L  int
	rowShape []int
	nOuter   int // dims before the row dims
	ops      []rowOperand
	ins      []rowInstr
	last     int
	passes   int
	vec      int // elements per chunk
	nv       int // chunks per row
	wide     bool
	degen    bool // rows of one element: everything is a row value
	main     groupLaunch
	// Two-stage reduction: chunks partial blocks per row (part), then one
	// group per row combines them (comb).
	split      bool
	chunks     int
	part, comb groupLaunch
	red        int // the reduction of a split kernel
	// Demand: which whole-row values pass q needs, and which are kept in
	// registers between passes (cache) from their first pass (first).
	opDem, inDem     [][]bool
	opCache, inCache []bool
	opFirst, inFirst []int
	cache            bool
	// current emission context
	stage int // 0 single kernel, 1 partials, 2 combine
}

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
			outer: reduce(ir.Layout{Dims: l.Dims[:g.nOuter], Strides: l.Strides[:g.nOuter], Offset: l.Offset})}
		if whole {
			op.inner = reduce(ir.Layout{Dims: l.Dims[g.nOuter:], Strides: l.Strides[g.nOuter:]})
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

// computeSize is the size in bytes of d's compute type.
func computeSize(d dtype.DType) int {
	switch computeType(d) {
	case "double", "long long":
		return 8
	}
	return 4
}

func firstPasses(dem [][]bool) []int {
	out := make([]int, len(dem))
	for i, d := range dem {
		out[i] = slices.Index(d, true)
	}
	return out
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

// scratch layout of a split kernel: the partial values (the reduction's
// accumulator type), then, for max/min of floats and arg reductions, their
// indices.
func (g *rowGen) scratchBytes() int64 {
	n := int64(g.rows * g.chunks)
	in := g.ins[g.red]
	vb := (n*int64(computeSize(in.argDT[0])) + 15) / 16 * 16
	if g.pairRed(in) {
		ib := int64(4)
		if g.wide {
			ib = 8
		}
		return vb + n*ib
	}
	return vb
}

// pairRed reports whether a reduction carries (value, index) pairs: arg
// reductions, and max/min of floats (the CPU twin returns the first of
// equal values, which tells -0 from +0, and the first NaN).
func (g *rowGen) pairRed(in rowInstr) bool {
	return in.n.Op == ir.OpArgmax || in.n.Op == ir.OpArgmin || in.argDT[0].IsFloat() && in.n.Op != ir.OpSum
}

func (g *rowGen) idx() (typ, u string) {
	if g.wide {
		return "unsigned long long", "ull"
	}
	return "unsigned int", "u"
}

// identity is the reduction's starting value in its accumulator type.
func (g *rowGen) identity(in rowInstr) string {
	dt := in.argDT[0]
	c := computeType(dt)
	isMax := in.n.Op == ir.OpMax || in.n.Op == ir.OpArgmax
	switch in.n.Op {
	case ir.OpSum:
		return scalarLit(0, dt)
	}
	switch c {
	case "float":
		if isMax {
			return "-__uint_as_float(0x7f800000u)"
		}
		return "__uint_as_float(0x7f800000u)"
	case "double":
		if isMax {
			return "-__longlong_as_double(0x7ff0000000000000LL)"
		}
		return "__longlong_as_double(0x7ff0000000000000LL)"
	case "unsigned int":
		if isMax {
			return "0u"
		}
		return "0xffffffffu"
	}
	if isMax {
		return "(-9223372036854775807LL - 1LL)"
	}
	return "9223372036854775807LL"
}

func beats(op ir.Op) string {
	if op == ir.OpMax || op == ir.OpArgmax {
		return "loom_beats_max"
	}
	return "loom_beats_min"
}

// ---- rendering ----

// rowExpr is an instruction's C expression (before rounding), with flat the
// C expression of the element's flat index (arange).
func (g *rowGen) rowExpr(in rowInstr, args []string, flat string) string {
	n := in.n
	if n.Op == ir.OpArange {
		v := fmt.Sprintf("loom_add(%s, loom_mul((double)(%s), %s))", doubleLit(n.Params[0]), flat, doubleLit(n.Params[1]))
		return castExpr(dtype.F64, n.DType, v)
	}
	if in.degen { // a reduction of one element
		switch n.Op {
		case ir.OpSum:
			return fmt.Sprintf("loom_add(%s, %s)", scalarLit(0, in.argDT[0]), args[0])
		case ir.OpArgmax, ir.OpArgmin:
			return "0u"
		}
		return args[0]
	}
	e, _ := instrExpr(n, args, in.argDT) // checked by newRowGen
	return e
}

// rounded rounds instruction j's value to its dtype unless it is the
// stored one (narrowed by the store) or a comparison.
func (g *rowGen) rounded(j int, e string) string {
	n := g.ins[j].n
	if j == g.last || n.Op.Info().Out == ir.OutU8 {
		return e
	}
	return rounder(n.DType, e)
}

func (g *rowGen) comment(j int) string {
	n := g.ins[j].n
	op := n.Op.String()
	if ps := ir.FormatParams(n); ps != "" {
		op += "(" + ps + ")"
	}
	return fmt.Sprintf("%%%d %s %v", n.ID, op, n.DType)
}

func (g *rowGen) render() string {
	k := g.k
	I, u := g.idx()
	var b w
	b.line(0, "")
	b.line(0, "// Row kernel %s (%s) for %s.", k.Name, namePlaceholder, g.t)
	bits := 32
	if g.wide {
		bits = 64
	}
	mode := "no value kept across passes"
	switch {
	case g.degen:
		mode = "rows of one element: one thread per row, every value a row value"
	case g.cache:
		mode = "whole-row values kept in registers across passes"
	case g.passes > 1 && !g.split:
		mode = "whole-row values recomputed in each pass that needs them"
	}
	b.line(0, "// Shape %v: %d rows of %d; %d pass(es); %d per chunk, %d chunks per row; %d-bit indices; %s.", k.Shape, g.rows, g.L, g.passes, g.vec, g.nv, bits, mode)
	desc := func(name string, gl groupLaunch) {
		b.line(0, "// %s: %d lanes per row, %d rows per block of %d, %d chunk(s) per lane, %d blocks%s.", name, gl.group, gl.rpb, gl.block, gl.iters, gl.blocks, map[bool]string{true: " (grid-stride loop)"}[gl.loop])
	}
	if g.split {
		b.line(0, "// Two stages: %d partial blocks per row (%d chunks each), then a combine launch.", g.chunks, g.part.n)
		desc("partials", g.part)
		desc("combine", g.comb)
	} else {
		desc("launch", g.main)
	}
	for i, o := range k.Ins {
		b.line(0, "// in%d: %v b%d %v: %s.", i, o.Buf.DType, o.Buf.ID, o.Layout, g.ops[i].desc)
	}
	b.line(0, "namespace %s_ {", namePlaceholder)
	for i, o := range g.ops {
		addrFunc(&b, fmt.Sprintf("base%d", i), o.outer, I, u)
		if o.whole && len(o.inner.Dims) > 1 {
			addrFunc(&b, fmt.Sprintf("inner%d", i), o.inner, I, u)
		}
	}
	b.line(0, "} // namespace %s_", namePlaceholder)
	if g.split {
		g.stage = 1
		g.renderKernel(&b, namePlaceholder, g.part)
		g.stage = 2
		g.renderKernel(&b, namePlaceholder+"_combine", g.comb)
		g.stage = 0
	} else {
		g.renderKernel(&b, namePlaceholder, g.main)
	}
	return b.String()
}

// addrFunc writes a function from an index to an address under layout l.
func addrFunc(b *w, name string, l ir.Layout, I, u string) {
	b.line(0, "LOOM_DEV %s %s(%s i) {", I, name, I)
	r := len(l.Dims)
	switch {
	case r == 0:
		b.line(1, "return %d%s;", l.Offset, u)
	case r == 1:
		b.line(1, "return %s;", linear(l.Offset, "i", l.Strides[0], u))
	default:
		b.line(1, "%s a = %d%s;", I, l.Offset, u)
		for d := r - 1; d > 0; d-- {
			if s := l.Strides[d]; s != 0 {
				b.line(1, "a += (i %% %d%s) * %d%s;", l.Dims[d], u, s, u)
			}
			b.line(1, "i /= %d%s;", l.Dims[d], u)
		}
		if s := l.Strides[0]; s != 0 {
			b.line(1, "a += %s;", linear(0, "i", s, u))
		}
		b.line(1, "return a;")
	}
	b.line(0, "}")
}

// rowRef is the C expression of an argument read as a row value.
func (g *rowGen) rowRef(r plan.Ref) string {
	if r.Operand {
		return fmt.Sprintf("q%d", r.Index)
	}
	return fmt.Sprintf("r%d", r.Index)
}

// renderKernel writes one entry point: the whole row program (stage 0),
// the partial reductions (stage 1) or their combination (stage 2).
func (g *rowGen) renderKernel(b *w, name string, gl groupLaunch) {
	k := g.k
	I, u := g.idx()
	var ps []string
	for i, o := range k.Ins {
		ps = append(ps, fmt.Sprintf("const %s* __restrict__ in%d", storageType(o.Buf.DType), i))
	}
	ps = append(ps, fmt.Sprintf("%s* __restrict__ out", storageType(k.Out.DType)))
	if g.split {
		ps = append(ps, "unsigned char* __restrict__ scratch")
	}
	b.line(0, "")
	bounds := fmt.Sprint(gl.block)
	if m := min(g.opt.minBlocks, 2048/gl.block); g.t.Platform == NVIDIA && m > 0 {
		bounds = fmt.Sprintf("%d, %d", gl.block, m)
	}
	b.line(0, "extern \"C\" __global__ void __launch_bounds__(%s) %s(%s) {", bounds, name, strings.Join(ps, ", "))
	b.line(1, "using namespace %s_;", namePlaceholder)
	b.line(1, "static_assert(LOOM_WAVE == %d, \"rendered for another wave size\");", g.t.WaveSize)
	if g.rows == 0 {
		b.line(1, "// No rows.")
		b.line(0, "}")
		return
	}
	// Shared memory for the cross-wave step of each reduction.
	if gl.wg > 1 {
		for j, in := range g.ins {
			if !in.red || (g.stage != 0 && j != g.red) {
				continue
			}
			b.line(1, "__shared__ %s s%dv[%d];", computeType(in.argDT[0]), j, gl.rpb*gl.wg)
			if g.pairRed(in) {
				b.line(1, "__shared__ %s s%di[%d];", I, j, gl.rpb*gl.wg)
			}
		}
	}
	if g.split {
		in := g.ins[g.red]
		b.line(1, "%s* __restrict__ pv = reinterpret_cast<%s*>(scratch);", computeType(in.argDT[0]), computeType(in.argDT[0]))
		if g.pairRed(in) {
			vb := (g.rows*g.chunks*computeSize(in.argDT[0]) + 15) / 16 * 16
			b.line(1, "%s* __restrict__ pi = reinterpret_cast<%s*>(scratch + %d);", I, I, vb)
		}
	}
	if gl.group == gl.block {
		b.line(1, "const unsigned int lane = threadIdx.x;")
	} else {
		b.line(1, "const unsigned int lane = threadIdx.x %% %du;", gl.group)
	}
	if gl.wg > 1 {
		b.line(1, "const unsigned int slot = threadIdx.x / %du; // this wave's slot in shared memory", g.t.WaveSize)
		b.line(1, "const unsigned int gslot = threadIdx.x / %du * %du; // the group's first slot", gl.group, gl.wg)
	}
	ind := 1
	rowBlocks := (gl.rows + gl.rpb - 1) / gl.rpb
	rb := "blockIdx.x"
	if gl.loop {
		b.line(1, "for (%s rb = blockIdx.x; rb < %d%s; rb += gridDim.x) {", I, rowBlocks, u)
		rb, ind = "rb", 2
	}
	// row: the row (stage 1: the row of this partial block).
	guard := gl.rows%gl.rpb != 0
	switch {
	case g.stage == 1:
		b.line(ind, "const %s row = (%s)blockIdx.x / %d%s;", I, I, g.chunks, u)
		b.line(ind, "const %s part = (%s)blockIdx.x %% %d%s; // this block's chunk of the row", I, I, g.chunks, u)
	case gl.rpb == 1:
		b.line(ind, "const %s row = %s;", I, rb)
	default:
		b.line(ind, "const %s row = (%s)%s * %d%s + threadIdx.x / %du;", I, I, rb, gl.rpb, u, gl.group)
	}
	okc := "true"
	if guard {
		b.line(ind, "const bool ok = row < %d%s;", gl.rows, u)
		okc = "ok"
	}
	// Row operands and the row bases of whole-row operands.
	for i, o := range g.ops {
		if o.whole {
			b.line(ind, "const %s b%d = base%d(row);", I, i, i)
			continue
		}
		c := computeType(o.dt)
		if guard {
			b.line(ind, "const %s q%d = ok ? %s : (%s)0;", c, i, widen(o.dt, fmt.Sprintf("in%d[base%d(row)]", i, i)), c)
		} else {
			b.line(ind, "const %s q%d = %s;", c, i, widen(o.dt, fmt.Sprintf("in%d[base%d(row)]", i, i)))
		}
	}
	switch g.stage {
	case 0:
		g.rowValues(b, ind, 0)
		for q := range g.passes {
			g.renderPass(b, ind, gl, q, okc)
			g.rowValues(b, ind, q+1)
		}
		if g.ins[g.last].row {
			g.storeRow(b, ind, gl, okc)
		}
	case 1:
		g.rowValues(b, ind, 0)
		g.renderPass(b, ind, gl, 0, okc)
		in := g.ins[g.red]
		b.line(ind, "if (threadIdx.x == 0) {")
		b.line(ind+1, "pv[blockIdx.x] = a%dv;", g.red)
		if g.pairRed(in) {
			b.line(ind+1, "pi[blockIdx.x] = a%di;", g.red)
		}
		b.line(ind, "}")
	case 2:
		g.renderCombine(b, ind, gl, okc)
		g.rowValues(b, ind, 0)
		g.rowValues(b, ind, 1)
		g.storeRow(b, ind, gl, okc)
	}
	if gl.loop {
		b.line(2, "__syncthreads(); // shared memory is reused by the next row block")
		b.line(1, "}")
	}
	b.line(0, "}")
}

// rowValues writes the row values (non-reduction) known after `avail`
// passes, in order.
func (g *rowGen) rowValues(b *w, ind, avail int) {
	for j, in := range g.ins {
		if !in.row || in.red || in.avail != avail {
			continue
		}
		args := make([]string, len(in.args))
		for a, r := range in.args {
			args[a] = g.rowRef(r)
		}
		e := g.rounded(j, g.rowExpr(in, args, "row"))
		b.line(ind, "const %s r%d = %s; // %s", computeType(in.n.DType), j, e, g.comment(j))
	}
}

// storeRow stores the last instruction's row value.
func (g *rowGen) storeRow(b *w, ind int, gl groupLaunch, okc string) {
	cond := "lane == 0u"
	if okc != "true" {
		cond = okc + " && " + cond
	}
	b.line(ind, "if (%s) out[row] = %s;", cond, narrow(g.k.Out.DType, fmt.Sprintf("r%d", g.last)))
}

// elemRef is the C expression of an argument inside pass q's element loop.
func (g *rowGen) elemRef(r plan.Ref, q int) string {
	switch {
	case r.Broadcast:
		return g.rowRef(r)
	case r.Operand && !g.ops[r.Index].whole:
		return g.rowRef(r)
	case r.Operand:
		if g.opCache[r.Index] && g.opFirst[r.Index] < q {
			return fmt.Sprintf("cx%d[it * %du + e]", r.Index, g.vec)
		}
		return fmt.Sprintf("x%d[e]", r.Index)
	case g.ins[r.Index].row:
		return g.rowRef(r)
	case g.inCache[r.Index] && g.inFirst[r.Index] < q:
		return fmt.Sprintf("ct%d[it * %du + e]", r.Index, g.vec)
	}
	return fmt.Sprintf("v%d", r.Index)
}

// renderPass writes pass q: the loop over this lane's chunks computing the
// whole-row values the pass needs, feeding its reductions and storing the
// output if it is whole rows, then the reductions' combination across the
// group.
func (g *rowGen) renderPass(b *w, ind int, gl groupLaunch, q int, okc string) {
	k := g.k
	I, u := g.idx()
	V := g.vec
	b.line(ind, "// Pass %d.", q)
	if q == 0 && g.cache {
		for i, c := range g.opCache {
			if c {
				b.line(ind, "%s cx%d[%d]; // in%d, kept from pass %d", computeType(g.ops[i].dt), i, gl.iters*V, i, g.opFirst[i])
			}
		}
		for j, c := range g.inCache {
			if c {
				b.line(ind, "%s ct%d[%d]; // t%d, kept from pass %d", computeType(g.ins[j].n.DType), j, gl.iters*V, j, g.inFirst[j])
			}
		}
	}
	var reds []int
	for j, in := range g.ins {
		if in.red && in.pass == q && (g.stage == 0 || j == g.red) {
			reds = append(reds, j)
			c := computeType(in.argDT[0])
			switch {
			case in.n.Op == ir.OpSum:
				b.line(ind, "%s a%d[%d];", c, j, V)
				b.line(ind, "#pragma unroll")
				b.line(ind, "for (int e = 0; e < %d; ++e) a%d[e] = %s;", V, j, g.identity(in))
			case g.pairRed(in):
				b.line(ind, "%s a%dv = %s;", c, j, g.identity(in))
				b.line(ind, "%s a%di = ~(%s)0; // no element yet: loses every tie", I, j, I)
			default:
				b.line(ind, "%s a%dv = %s;", c, j, g.identity(in))
			}
		}
	}
	storeOut := !g.ins[g.last].row && g.ins[g.last].pass == q && g.stage == 0
	full := g.cache || gl.iters <= 8
	if full {
		b.line(ind, "#pragma unroll")
	} else {
		b.line(ind, "#pragma unroll 4")
	}
	b.line(ind, "for (unsigned int it = 0; it < %du; ++it) {", gl.iters)
	first := fmt.Sprintf("(%s)it * %d%s + lane", I, gl.group, u)
	if g.stage == 1 {
		first = fmt.Sprintf("part * %d%s + %s", gl.n, u, first)
	}
	b.line(ind+1, "const %s c = %s; // chunk", I, first)
	var conds []string
	if okc != "true" {
		conds = append(conds, okc)
	}
	if g.stage == 1 || gl.iters*gl.group != g.nv {
		conds = append(conds, fmt.Sprintf("c < %d%s", g.nv, u))
	}
	in2 := ind + 1
	if len(conds) > 0 {
		b.line(ind+1, "if (%s) {", strings.Join(conds, " && "))
		in2++
	}
	b.line(in2, "const %s p0 = c * %d%s; // position of the chunk in the row", I, V, u)
	// Loads of the whole-row operands this pass reads from memory.
	for i, o := range g.ops {
		if !o.whole || !g.opDem[i][q] || (g.opCache[i] && g.opFirst[i] < q) {
			continue
		}
		c := computeType(o.dt)
		x := fmt.Sprintf("x%d", i)
		b.line(in2, "%s %s[%d];", c, x, V)
		switch {
		case len(o.inner.Dims) == 0:
			b.line(in2, "#pragma unroll")
			b.line(in2, "for (int e = 0; e < %d; ++e) %s[e] = %s;", V, x, widen(o.dt, fmt.Sprintf("in%d[b%d]", i, i)))
		case o.vector:
			ch := g.chunk(o.dt)
			per := ch / o.dt.Size()
			for e := 0; e < V; e += per {
				b.line(in2, "%s(%s + %d, in%d + b%d + %s);", loadFunc(o.dt, ch), x, e, i, i, linear(e, "p0", 1, u))
			}
		case len(o.inner.Dims) == 1:
			b.line(in2, "#pragma unroll")
			b.line(in2, "for (int e = 0; e < %d; ++e) %s[e] = %s;", V, x, widen(o.dt, fmt.Sprintf("in%d[b%d + (p0 + e) * %d%s]", i, i, o.inner.Strides[0], u)))
		default:
			b.line(in2, "#pragma unroll")
			b.line(in2, "for (int e = 0; e < %d; ++e) %s[e] = %s;", V, x, widen(o.dt, fmt.Sprintf("in%d[b%d + inner%d(p0 + e)]", i, i, i)))
		}
	}
	od := k.Out.DType
	if storeOut {
		b.line(in2, "%s y[%d];", computeType(od), V)
	}
	b.line(in2, "#pragma unroll")
	b.line(in2, "for (int e = 0; e < %d; ++e) {", V)
	in3 := in2 + 1
	b.line(in3, "const %s p = p0 + e;", I)
	for i, o := range g.ops {
		if o.whole && g.opCache[i] && g.opFirst[i] == q {
			b.line(in3, "cx%d[it * %du + e] = x%d[e];", i, V, i)
		}
	}
	flat := fmt.Sprintf("row * %d%s + p", g.L, u)
	for j, in := range g.ins {
		if in.row || in.red || !g.inDem[j][q] || (g.inCache[j] && g.inFirst[j] < q) {
			continue
		}
		args := make([]string, len(in.args))
		for a, r := range in.args {
			args[a] = g.elemRef(r, q)
		}
		e := g.rounded(j, g.rowExpr(in, args, flat))
		b.line(in3, "const %s v%d = %s; // %s", computeType(in.n.DType), j, e, g.comment(j))
		if g.inCache[j] && g.inFirst[j] == q {
			b.line(in3, "ct%d[it * %du + e] = v%d;", j, V, j)
		}
	}
	for _, j := range reds {
		in := g.ins[j]
		x := g.elemRef(in.args[0], q)
		switch {
		case in.n.Op == ir.OpSum:
			b.line(in3, "a%d[e] = loom_add(a%d[e], %s); // %s", j, j, x, g.comment(j))
		case g.pairRed(in):
			// A lane scans its elements in increasing position: its first
			// element is taken, later ones replace the best only when
			// strictly better or the first NaN (so ties keep the first).
			cmp := ">"
			if in.n.Op == ir.OpMin || in.n.Op == ir.OpArgmin {
				cmp = "<"
			}
			better := fmt.Sprintf("%s %s a%dv", x, cmp, j)
			if in.argDT[0].IsFloat() {
				better = fmt.Sprintf("%s || (%s != %s && a%dv == a%dv)", better, x, x, j, j)
			}
			b.line(in3, "if ((it == 0u && e == 0) || %s) { a%dv = %s; a%di = p; } // %s", better, j, x, j, g.comment(j))
		case in.n.Op == ir.OpMax:
			b.line(in3, "a%dv = loom_max(a%dv, %s); // %s", j, j, x, g.comment(j))
		default:
			b.line(in3, "a%dv = loom_min(a%dv, %s); // %s", j, j, x, g.comment(j))
		}
	}
	if storeOut {
		b.line(in3, "y[e] = %s;", g.elemRef(plan.Ref{Index: g.last}, q))
	}
	b.line(in2, "}")
	if storeOut {
		ch := g.chunk(od)
		if sf := storeFunc(od, ch); sf != "" {
			per := ch / od.Size()
			for e := 0; e < V; e += per {
				b.line(in2, "%s(out + row * %d%s + %s, y + %d);", sf, g.L, u, linear(e, "p0", 1, u), e)
			}
		} else {
			b.line(in2, "#pragma unroll")
			b.line(in2, "for (int e = 0; e < %d; ++e) out[row * %d%s + p0 + e] = %s;", V, g.L, u, narrow(od, "y[e]"))
		}
	}
	if len(conds) > 0 {
		b.line(ind+1, "}")
	}
	b.line(ind, "}")
	// Combine each reduction across the lanes of the group.
	for _, j := range reds {
		in := g.ins[j]
		if in.n.Op == ir.OpSum && V > 1 {
			b.line(ind, "#pragma unroll")
			b.line(ind, "for (int s = 1; s < %d; s *= 2) {", V)
			b.line(ind+1, "#pragma unroll")
			b.line(ind+1, "for (int e = 0; e < %d; e += 2 * s) a%d[e] = loom_add(a%d[e], a%d[e + s]);", V, j, j, j)
			b.line(ind, "}")
		}
		if in.n.Op == ir.OpSum {
			b.line(ind, "%s a%dv = a%d[0];", computeType(in.argDT[0]), j, j)
		}
		g.groupReduce(b, ind, gl, j)
		if g.stage == 0 {
			b.line(ind, "const %s r%d = %s; // %s", computeType(in.n.DType), j, g.rounded(j, g.redValue(j)), g.comment(j))
		}
	}
}

// redValue is a combined reduction's value in its node's compute type.
func (g *rowGen) redValue(j int) string {
	switch g.ins[j].n.Op {
	case ir.OpArgmax, ir.OpArgmin:
		return fmt.Sprintf("(unsigned int)a%di", j)
	}
	return fmt.Sprintf("a%dv", j)
}

// groupReduce combines a%dv (and a%di) across the group's lanes: a
// butterfly of shuffles within each wave (every lane gets the result), then
// across the group's waves through shared memory and a second butterfly.
func (g *rowGen) groupReduce(b *w, ind int, gl groupLaunch, j int) {
	in := g.ins[j]
	I, _ := g.idx()
	c := computeType(in.argDT[0])
	pair := g.pairRed(in)
	combine := func(ind int, ov, oi string) {
		switch {
		case in.n.Op == ir.OpSum:
			b.line(ind, "a%dv = loom_add(a%dv, %s);", j, j, ov)
		case pair:
			b.line(ind, "if (%s(%s, %s, a%dv, a%di)) { a%dv = %s; a%di = %s; }", beats(in.n.Op), ov, oi, j, j, j, ov, j, oi)
		case in.n.Op == ir.OpMax:
			b.line(ind, "a%dv = loom_max(a%dv, %s);", j, j, ov)
		default:
			b.line(ind, "a%dv = loom_min(a%dv, %s);", j, j, ov)
		}
	}
	if m := min(gl.group, g.t.WaveSize) / 2; m > 0 {
		b.line(ind, "#pragma unroll")
		b.line(ind, "for (int m = %d; m > 0; m /= 2) {", m)
		b.line(ind+1, "const %s ov = loom_shfl_xor(a%dv, m);", c, j)
		if pair {
			b.line(ind+1, "const %s oi = loom_shfl_xor(a%di, m);", I, j)
		}
		combine(ind+1, "ov", "oi")
		b.line(ind, "}")
	}
	if gl.wg > 1 {
		// Across the group's waves: lane 0 of each wave publishes its
		// wave's result; then every wave loads the group's wg results
		// (lane l takes result l mod wg, so each aligned run of wg lanes
		// holds them all in order) and combines them with a butterfly of
		// its own: every lane ends with the same bits, in log2(wg) steps.
		b.line(ind, "if (threadIdx.x %% %du == 0u) {", g.t.WaveSize)
		b.line(ind+1, "s%dv[slot] = a%dv;", j, j)
		if pair {
			b.line(ind+1, "s%di[slot] = a%di;", j, j)
		}
		b.line(ind, "}")
		b.line(ind, "__syncthreads();")
		b.line(ind, "a%dv = s%dv[gslot + threadIdx.x %% %du];", j, j, gl.wg)
		if pair {
			b.line(ind, "a%di = s%di[gslot + threadIdx.x %% %du];", j, j, gl.wg)
		}
		b.line(ind, "#pragma unroll")
		b.line(ind, "for (int m = %d; m > 0; m /= 2) {", gl.wg/2)
		b.line(ind+1, "const %s ov = loom_shfl_xor(a%dv, m);", c, j)
		if pair {
			b.line(ind+1, "const %s oi = loom_shfl_xor(a%di, m);", I, j)
		}
		combine(ind+1, "ov", "oi")
		b.line(ind, "}")
	}
}

// renderCombine writes the second stage: each group reads its row's
// partials in order, combines them lane by lane and across the group.
func (g *rowGen) renderCombine(b *w, ind int, gl groupLaunch, okc string) {
	j := g.red
	in := g.ins[j]
	I, u := g.idx()
	c := computeType(in.argDT[0])
	pair := g.pairRed(in)
	b.line(ind, "%s a%dv = %s;", c, j, g.identity(in))
	if pair {
		b.line(ind, "%s a%di = ~(%s)0;", I, j, I)
	}
	if gl.iters <= 8 {
		b.line(ind, "#pragma unroll")
	} else {
		b.line(ind, "#pragma unroll 4")
	}
	b.line(ind, "for (unsigned int it = 0; it < %du; ++it) {", gl.iters)
	b.line(ind+1, "const %s c = (%s)it * %d%s + lane;", I, I, gl.group, u)
	cond := fmt.Sprintf("c < %d%s", g.chunks, u)
	if okc != "true" {
		cond = okc + " && " + cond
	}
	b.line(ind+1, "if (%s) {", cond)
	b.line(ind+2, "const %s at = row * %d%s + c;", I, g.chunks, u)
	switch {
	case in.n.Op == ir.OpSum:
		b.line(ind+2, "a%dv = loom_add(a%dv, pv[at]);", j, j)
	case pair:
		b.line(ind+2, "if (%s(pv[at], pi[at], a%dv, a%di)) { a%dv = pv[at]; a%di = pi[at]; }", beats(in.n.Op), j, j, j, j)
	case in.n.Op == ir.OpMax:
		b.line(ind+2, "a%dv = loom_max(a%dv, pv[at]);", j, j)
	default:
		b.line(ind+2, "a%dv = loom_min(a%dv, pv[at]);", j, j)
	}
	b.line(ind+1, "}")
	b.line(ind, "}")
	g.groupReduce(b, ind, gl, j)
	b.line(ind, "const %s r%d = %s; // %s", computeType(in.n.DType), j, g.rounded(j, g.redValue(j)), g.comment(j))
}

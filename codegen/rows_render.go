package codegen

// Row kernel source text: render writes the body of the translation unit
// (header comments, address functions, one or two entry points),
// renderKernel one entry point (the whole row program, or one stage of a
// two-stage kernel), renderPass one pass over the row. What it renders was
// decided in rows_plan.go; the per-op reduction pieces are in
// rows_reduce.go, the combine stage in rows_split.go.

import (
	"fmt"
	"strings"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

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
	b.line(0, "extern \"C\" __global__ void __launch_bounds__(%s) %s(%s) { loom_grid_entry();", bounds, name, strings.Join(ps, ", "))
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
		// Empty rows have no chunks, but C++ has no zero-length arrays:
		// keep at least one element (never read).
		n := max(gl.iters*V, 1)
		for i, c := range g.opCache {
			if c {
				b.line(ind, "%s cx%d[%d]; // in%d, kept from pass %d", computeType(g.ops[i].dt), i, n, i, g.opFirst[i])
			}
		}
		for j, c := range g.inCache {
			if c {
				b.line(ind, "%s ct%d[%d]; // t%d, kept from pass %d", computeType(g.ins[j].n.DType), j, n, j, g.inFirst[j])
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
	// Random values of the chunk: whole Philox blocks when they line up
	// (random.go), else each element draws its own in rowExpr.
	blocks := map[int]bool{}
	for j, in := range g.ins {
		if !in.n.Op.IsRandom() || in.row || in.red || !g.inDem[j][q] || (g.inCache[j] && g.inFirst[j] < q) || !randAligned(in.n, V) {
			continue
		}
		rv := fmt.Sprintf("rv%d", j)
		b.line(in2, "%s %s[%d]; // %s variates", computeType(in.n.DType), rv, V, g.comment(j))
		randBlocks(b, in2, in.n, rv, fmt.Sprintf("row * %d%s + p0", g.L, u), V)
		blocks[j] = true
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
		if blocks[j] {
			e = g.rounded(j, randExpr(in.n, fmt.Sprintf("rv%d[e]", j)))
		}
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

// rowRef is the C expression of an argument read as a row value.
func (g *rowGen) rowRef(r plan.Ref) string {
	if r.Operand {
		return fmt.Sprintf("q%d", r.Index)
	}
	return fmt.Sprintf("r%d", r.Index)
}

// rowExpr is an instruction's C expression (before rounding), with flat the
// C expression of the element's flat index (arange, rand, randn).
func (g *rowGen) rowExpr(in rowInstr, args []string, flat string) string {
	n := in.n
	if n.Op == ir.OpArange {
		v := fmt.Sprintf("loom_add(%s, loom_mul((double)(%s), %s))", doubleLit(n.Params[0]), flat, doubleLit(n.Params[1]))
		return castExpr(dtype.F64, n.DType, v)
	}
	if n.Op.IsRandom() {
		return randExpr(n, randAt(n, flat)) // each element its own block
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

func (g *rowGen) idx() (typ, u string) {
	if g.wide {
		return "unsigned long long", "ull"
	}
	return "unsigned int", "u"
}

package codegen

// Two-stage reductions (few long rows; doc.go, "Two stages"): the scratch
// layout of the partials and the combine stage. The decision to split is
// made in newRowGen and the partials stage is renderKernel with stage 1;
// this file holds only what exists for two stages alone.

import (
	"fmt"

	"github.com/loomgraph/loom/ir"
)

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

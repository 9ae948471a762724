package codegen

// Reductions, per op: starting values, which reductions carry (value,
// index) pairs and how pairs are ordered, and the combination across a
// group's lanes. One copy serves the single kernel and both stages of a
// two-stage one, so every combining step orders values the same way and
// the result does not depend on how a row was split.

import (
	"fmt"

	"github.com/loomgraph/loom/ir"
)

// pairRed reports whether a reduction carries (value, index) pairs: arg
// reductions, and max/min of floats (the CPU twin returns the first of
// equal values, which tells -0 from +0, and the first NaN).
func (g *rowGen) pairRed(in rowInstr) bool {
	return in.n.Op == ir.OpArgmax || in.n.Op == ir.OpArgmin || in.argDT[0].IsFloat() && in.n.Op != ir.OpSum
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

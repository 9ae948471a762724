package kernels

import (
	_ "embed"
	"fmt"
	"math"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

//go:embed index.hip
var indexHIP string

// idsMacros defines the ids type and sentinel.
func (c *config) idsMacros(d dtype.DType) {
	c.line("#define LOOM_IDS 1")
	c.line("typedef %s I_T;", ctypes[d].storage)
	c.line("#define LOOM_SENTINEL %dLL", int64(d.MaxID()))
}

func checkIDsDType(d dtype.DType) error {
	if !ir.IDDTypes.Has(d) {
		return fmt.Errorf("ids dtype %v is not one of %v", d, ir.IDDTypes)
	}
	if d.MaxID() == 0 || d.MaxID() > math.MaxInt64 {
		return fmt.Errorf("ids dtype %v has no sentinel", d)
	}
	return nil
}

// planSelect: index_select (src, ids) and gather (src, ids).
func planSelect(n *ir.Node, ops []operand) (*planned, error) {
	src, ids := ops[0], ops[1]
	dim, err := dimParam(n, src.l.Dims)
	if err != nil {
		return nil, err
	}
	if err := checkIDsDType(ids.dt); err != nil {
		return nil, err
	}
	gather := n.Op == ir.OpGather
	l, s, r := split(src.l.Dims, dim)
	_, m, _ := split(n.Shape, dim)
	numel := int64(n.Numel())
	switch {
	case len(n.Shape) != len(src.l.Dims) || l*m*r != numel:
		return nil, fmt.Errorf("output %v does not follow from source %v along dim %d", n.Shape, src.l.Dims, dim)
	case gather && !slices.Equal(ids.l.Dims, n.Shape):
		return nil, fmt.Errorf("gather ids %v must have the output's shape %v", ids.l.Dims, n.Shape)
	case !gather && (len(ids.l.Dims) != 1 || int64(ids.l.Dims[0]) != m):
		return nil, fmt.Errorf("index_select ids %v must be 1-D of length %d", ids.l.Dims, m)
	}
	c := &config{wide: needWide(spans(ops, numel)...)}
	c.header()
	c.valueMacros("V", n.DType)
	c.idsMacros(ids.dt)
	c.line("#define LOOM_SELECT 1")
	c.line("#define LOOM_GATHER %d", b2i(gather))
	c.define("LOOM_NUMEL", numel)
	c.define("LOOM_M", m)
	c.define("LOOM_S", s)
	c.define("LOOM_R", r)
	c.atFunc("at_src", src.l)
	c.atFunc("at_ids", ids.l)
	p := &planned{
		base:   fmt.Sprintf("%s_%v_%v", n.Op, n.DType, ids.dt),
		config: c.String(),
		body:   indexHIP,
		entries: fmt.Sprintf(`
extern "C" __global__ void __launch_bounds__(LOOM_BS) %s(const V_T* __restrict__ src, const I_T* __restrict__ ids, V_T* __restrict__ out, unsigned long long* __restrict__ flag) { loom_grid_entry();
  loom_select(src, ids, out, flag);
}
`, namePlaceholder),
	}
	p.launch = []Launch{{
		Grid: grid1(numel, blockSize), Block: [3]uint32{blockSize, 1, 1},
		Args: []Arg{{Operand, src.in}, {Operand, ids.in}, {Kind: Output}, {Kind: ErrorFlag}},
	}}
	return p, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// planScatter: scatter, scatter_add, index_add (dst, ids, src). Launches:
// init (acc = dst), the ordered loop, and for f16/bf16 adds a final rounding
// of the float accumulator (a scratch buffer) into the output.
func planScatter(n *ir.Node, ops []operand) (*planned, error) {
	dst, ids, src := ops[0], ops[1], ops[2]
	dim, err := dimParam(n, dst.l.Dims)
	if err != nil {
		return nil, err
	}
	if err := checkIDsDType(ids.dt); err != nil {
		return nil, err
	}
	indexAdd := n.Op == ir.OpIndexAdd
	l, d, r := split(n.Shape, dim)
	numel := int64(n.Numel())
	if !slices.Equal(dst.l.Dims, n.Shape) || len(src.l.Dims) != len(n.Shape) || src.dt != n.DType || dst.dt != n.DType {
		return nil, fmt.Errorf("dst %v%v / src %v%v do not match the output %v%v", dst.dt, dst.l.Dims, src.dt, src.l.Dims, n.DType, n.Shape)
	}
	sl, s, sr := split(src.l.Dims, dim)
	if sl != l || sr != r {
		return nil, fmt.Errorf("src %v must match dst %v on every dim but %d", src.l.Dims, n.Shape, dim)
	}
	if indexAdd {
		if len(ids.l.Dims) != 1 || int64(ids.l.Dims[0]) != s {
			return nil, fmt.Errorf("index_add ids %v must be 1-D of length %d", ids.l.Dims, s)
		}
	} else if !slices.Equal(ids.l.Dims, src.l.Dims) {
		return nil, fmt.Errorf("ids %v must have src's shape %v", ids.l.Dims, src.l.Dims)
	}
	halfAdd := isHalf(n.DType) && n.Op != ir.OpScatter
	c := &config{wide: needWide(spans(ops, numel)...)}
	c.header()
	c.valueMacros("V", n.DType)
	c.idsMacros(ids.dt)
	c.line("#define LOOM_SCATTER 1")
	c.line("#define LOOM_INDEX_ADD %d", b2i(indexAdd))
	ct := ctypes[n.DType]
	switch {
	case n.Op == ir.OpScatter:
		c.line("typedef V_T A_T;")
		c.line("#define A_INIT(x) V_CANON(x)")
		c.line("#define A_UPDATE(a, v) V_CANON(v)")
	case halfAdd:
		c.line("typedef float A_T;")
		c.line("#define A_INIT(x) %s(x)", ct.widen)
		c.line("#define A_UPDATE(a, v) loom_add((a), %s(v))", ct.widen)
		c.line("#define A_FINISH(x) %s(x)", ct.narrow)
	default: // integer adds wrap (u8 through its 32-bit compute type)
		c.line("typedef V_T A_T;")
		c.line("#define A_INIT(x) (x)")
		c.line("#define A_UPDATE(a, v) (V_T)loom_add((V_C)(a), (V_C)(v))")
	}
	c.define("LOOM_NUMEL", numel)
	c.define("LOOM_L", l)
	c.define("LOOM_S", s)
	c.define("LOOM_D", d)
	c.define("LOOM_R", r)
	c.atFunc("at_dst", dst.l)
	c.atFunc("at_ids", ids.l)
	c.atFunc("at_src", src.l)
	p := &planned{
		base:   fmt.Sprintf("%s_%v_%v", n.Op, n.DType, ids.dt),
		config: c.String(),
		body:   indexHIP,
	}
	entries := fmt.Sprintf(`
extern "C" __global__ void __launch_bounds__(LOOM_BS) %[1]s_init(const V_T* __restrict__ dst, A_T* __restrict__ acc) { loom_grid_entry();
  loom_init(dst, acc);
}
extern "C" __global__ void __launch_bounds__(LOOM_BS) %[1]s_loop(const I_T* __restrict__ ids, const V_T* __restrict__ src, A_T* __restrict__ acc, unsigned long long* __restrict__ flag) { loom_grid_entry();
  loom_scatter(ids, src, acc, flag);
}
`, namePlaceholder)
	bs := [3]uint32{blockSize, 1, 1}
	acc := Arg{Kind: Output}
	if halfAdd {
		entries += fmt.Sprintf(`extern "C" __global__ void __launch_bounds__(LOOM_BS) %s_finish(const A_T* __restrict__ acc, V_T* __restrict__ out) { loom_grid_entry();
  loom_finish(acc, out);
}
`, namePlaceholder)
		acc = Arg{Kind: Scratch, Index: 0}
		p.scratch = []ScratchBuf{{Bytes: numel * 4}}
	}
	p.entries = entries
	p.launch = []Launch{
		{Name: "_init", Grid: grid1(numel, blockSize), Block: bs, Args: []Arg{{Operand, dst.in}, acc},
			CopyOnly: !halfAdd && dst.l.IsIdentity()},
	}
	if l*s*r > 0 {
		p.launch = append(p.launch, Launch{Name: "_loop", Grid: grid1(l*r, blockSize), Block: bs,
			Args: []Arg{{Operand, ids.in}, {Operand, src.in}, acc, {Kind: ErrorFlag}}})
	}
	if halfAdd {
		p.launch = append(p.launch, Launch{Name: "_finish", Grid: grid1(numel, blockSize), Block: bs,
			Args: []Arg{acc, {Kind: Output}}})
	}
	return p, nil
}

// planSliceAssign: slice_assign (dst, src), Params dim, start.
func planSliceAssign(n *ir.Node, ops []operand) (*planned, error) {
	dst, src := ops[0], ops[1]
	dim, err := dimParam(n, n.Shape)
	if err != nil {
		return nil, err
	}
	l, d, r := split(n.Shape, dim)
	sl, s, sr := split(src.l.Dims, dim)
	start := int64(n.Params[1])
	if !slices.Equal(dst.l.Dims, n.Shape) || len(src.l.Dims) != len(n.Shape) || sl != l || sr != r ||
		float64(start) != n.Params[1] || start < 0 || start+s > d {
		return nil, fmt.Errorf("cannot write src %v at [%v, %v) of dim %d of %v", src.l.Dims, n.Params[1], n.Params[1]+float64(s), dim, n.Shape)
	}
	numel := int64(n.Numel())
	c := &config{wide: needWide(spans(ops, numel)...)}
	c.header()
	c.valueMacros("V", n.DType)
	c.line("#define LOOM_SLICE 1")
	c.define("LOOM_NUMEL", numel)
	c.define("LOOM_D", d)
	c.define("LOOM_S", s)
	c.define("LOOM_R", r)
	c.define("LOOM_START", start)
	c.atFunc("at_dst", dst.l)
	c.atFunc("at_src", src.l)
	p := &planned{
		base:   fmt.Sprintf("%s_%v", n.Op, n.DType),
		config: c.String(),
		body:   indexHIP,
		entries: fmt.Sprintf(`
extern "C" __global__ void __launch_bounds__(LOOM_BS) %s(const V_T* __restrict__ dst, const V_T* __restrict__ src, V_T* __restrict__ out) { loom_grid_entry();
  loom_slice(dst, src, out);
}
`, namePlaceholder),
	}
	p.launch = []Launch{{
		Grid: grid1(numel, blockSize), Block: [3]uint32{blockSize, 1, 1},
		Args: []Arg{{Operand, dst.in}, {Operand, src.in}, {Kind: Output}},
	}}
	return p, nil
}

// planCat: cat (a, b, …), Params dim. Empty inputs get no parameter.
func planCat(n *ir.Node, ops []operand) (*planned, error) {
	dim, err := dimParam(n, n.Shape)
	if err != nil {
		return nil, err
	}
	l, d, r := split(n.Shape, dim)
	numel := int64(n.Numel())
	c := &config{wide: needWide(spans(ops, numel)...)}
	c.header()
	c.valueMacros("V", n.DType)
	c.line("#define LOOM_CAT 1")
	c.define("LOOM_NUMEL", numel)
	c.define("LOOM_D", d)
	c.define("LOOM_R", r)
	type part struct {
		op       operand
		off, len int64
	}
	var parts []part
	var off int64
	for j, o := range ops {
		ol, os, or := split(o.l.Dims, dim)
		if o.dt != n.DType || len(o.l.Dims) != len(n.Shape) || ol != l || or != r {
			return nil, fmt.Errorf("input %d %v%v does not match the output %v%v except along %d", j, o.dt, o.l.Dims, n.DType, n.Shape, dim)
		}
		if os > 0 {
			parts = append(parts, part{o, off, os})
		}
		off += os
	}
	if off != d {
		return nil, fmt.Errorf("inputs add up to %d along dim %d, output has %d", off, dim, d)
	}
	c.line("struct loom_ins { const V_T* p[%d]; };", len(parts))
	for k, pt := range parts {
		c.atFunc(fmt.Sprintf("at_in%d", k), pt.op.l)
	}
	c.line("LOOM_DEV V_T loom_cat_load(const loom_ins& ins, loom_idx li, loom_idx rem) {")
	for k, pt := range parts {
		read := fmt.Sprintf("ins.p[%d][at_in%d(li * %s + (rem - %s))]", k, k, c.lit(pt.len*r), c.lit(pt.off*r))
		if pt.off == 0 {
			read = fmt.Sprintf("ins.p[%d][at_in%d(li * %s + rem)]", k, k, c.lit(pt.len*r))
		}
		if k == len(parts)-1 {
			c.line("  return %s;", read)
		} else {
			c.line("  if (rem < %s) return %s;", c.lit((pt.off+pt.len)*r), read)
		}
	}
	c.line("}")
	var params, names []string
	var args []Arg
	for k, pt := range parts {
		params = append(params, fmt.Sprintf("const V_T* __restrict__ in%d", k))
		names = append(names, fmt.Sprintf("in%d", k))
		args = append(args, Arg{Operand, pt.op.in})
	}
	args = append(args, Arg{Kind: Output})
	p := &planned{
		base:   fmt.Sprintf("%s%d_%v", n.Op, len(parts), n.DType),
		config: c.String(),
		body:   indexHIP,
		entries: fmt.Sprintf(`
extern "C" __global__ void __launch_bounds__(LOOM_BS) %s(%s, V_T* __restrict__ out) { loom_grid_entry();
  loom_ins ins;
%s  loom_cat(ins, out);
}
`, namePlaceholder, join(params), assigns(names)),
	}
	p.launch = []Launch{{Grid: grid1(numel, blockSize), Block: [3]uint32{blockSize, 1, 1}, Args: args}}
	return p, nil
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

func assigns(names []string) string {
	out := ""
	for k, x := range names {
		out += fmt.Sprintf("  ins.p[%d] = %s;\n", k, x)
	}
	return out
}

package kernels

import (
	_ "embed"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// Window kernels: max and avg pools, nearest and bilinear upsampling
// (window.hip; Go twins in exec/cpu/pool.go). Convolutions have no kernel
// here: HasWindowKernel reports false for them, and the GPU executor runs
// them on the CPU.
//
// Each kernel is one launch of one thread per output element (grid-stride,
// blocks of 256) with every size, stride, padding and scale baked into the
// source, so index arithmetic divides by constants and small windows unroll
// completely. The operand is the packed array fuse hands window ops
// (plan.WindowOperandOf), read at its element offset.

//go:embed window.hip
var windowHIP string

// maxUnroll is the largest window (kh·kw elements) whose loops are unrolled
// completely; larger ones (a global pool over a feature map) keep their
// loops, so that the source compiles quickly.
const maxUnroll = 64

// HasWindowKernel reports whether k is a window step with a kernel here: a
// pool or an upsampling whose index arithmetic fits 64 bits (a nearest
// upsampling without a scale factor multiplies an output index by the input
// size). Convolutions have none.
func HasWindowKernel(k *plan.Kernel) bool {
	n := k.WindowNode()
	if n == nil {
		return false
	}
	switch n.Op {
	case ir.OpMaxPool, ir.OpAvgPool, ir.OpUpsampleBilinear:
		return true
	case ir.OpUpsampleNearest:
		p, x := n.Upsample(), n.Args[0].Shape
		for a := range p.Rank {
			if hi, _ := bits.Mul64(uint64(x[2+a]), uint64(n.Shape[2+a])); hi != 0 && p.Scale[a] == 0 {
				return false
			}
		}
		return true
	}
	return false
}

// Handles reports whether Plan plans k: one indexing op, or a window step
// or fused window kernel (plan.WindowAt) with a kernel here
// (HasWindowKernel).
func Handles(k *plan.Kernel) bool {
	if k != nil && k.IsFusedWindow() {
		return HasWindowKernel(k)
	}
	if k == nil || len(k.Instrs) != 1 || k.Instrs[0].Node == nil {
		return false
	}
	return k.Instrs[0].Node.Info().Class == ir.ClassIndex || HasWindowKernel(k)
}

// windowAccum describes how a pool accumulates a dtype: the accumulator
// type and the loads and stores around it (the twin's compute kinds:
// float32 for f32/f16/bf16, double for f64, exact 64-bit sums for u8/u32).
type windowAccum struct {
	acc, load, store, nan string
}

var windowAccums = map[dtype.DType]windowAccum{
	dtype.F32:  {"float", "(x)", "(a)", "LOOM_NAN_F32"},
	dtype.F64:  {"double", "(x)", "(a)", "LOOM_NAN_F64"},
	dtype.F16:  {"float", "loom_f16_to_f32(x)", "loom_f32_to_f16(a)", "LOOM_NAN_F32"},
	dtype.BF16: {"float", "loom_bf16_to_f32(x)", "loom_f32_to_bf16(a)", "LOOM_NAN_F32"},
	dtype.U8:   {"unsigned long long", "((unsigned int)(x))", "((V_T)(a))", "0u"},
	dtype.U32:  {"unsigned long long", "((unsigned int)(x))", "((V_T)(a))", "0u"},
}

// windowFusion is what a fused window kernel (plan.WindowAt) adds to a
// window kernel: the prologue and epilogue functions (codegen.ScalarFunc)
// and the macros that call them, and the launch arguments (every operand
// of the fused kernel, then the output).
type windowFusion struct {
	funcs, macros string
	args          []Arg
	wide          bool
}

// fusedWindowSlack is the temporaries' first ID when a fused kernel is
// split for planning; the IDs appear nowhere in the source.
const fusedWindowSlack = 1 << 30

// planFusedWindow plans fused window kernel k as one launch: the window's
// kernel reading its input through the prologue (LOOM_XV) and storing
// through the epilogue (LOOM_STORE).
func planFusedWindow(k *plan.Kernel) (*planned, error) {
	parts, err := plan.SplitFused(k, fusedWindowSlack)
	if err != nil {
		return nil, err
	}
	ops, err := operands(parts.Core)
	if err != nil {
		return nil, fmt.Errorf("window %s: %w", parts.Core.Instrs[0].Node.Op, err)
	}
	fz := &windowFusion{}
	// Index width: the window's own test (planWindow), or any operand of
	// the fused kernel reaching 2^31 elements.
	for _, o := range k.Ins {
		_, hi := o.Layout.Span()
		fz.wide = fz.wide || needWide(int64(hi))
	}
	var params, names []string
	for i, o := range k.Ins {
		params = append(params, fmt.Sprintf("const %s* __restrict__ in%d", ctypes[o.Buf.DType].storage, i))
		names = append(names, fmt.Sprintf("in%d", i))
		fz.args = append(fz.args, Arg{Operand, i})
	}
	params = append(params, fmt.Sprintf("%s* __restrict__ out", ctypes[k.Out.DType].storage))
	names = append(names, "out")
	fz.args = append(fz.args, Arg{Kind: Output})
	var m strings.Builder
	fmt.Fprintf(&m, "#define LOOM_PARAMS %s\n", strings.Join(params, ", "))
	fmt.Fprintf(&m, "#define LOOM_ARGS %s\n", strings.Join(names, ", "))
	var funcs strings.Builder
	if parts.Pre != nil {
		f, err := codegen.ScalarFunc(parts.Pre, "loom_pre", -1, fz.wide)
		if err != nil {
			return nil, fmt.Errorf("prologue: %w", err)
		}
		funcs.WriteString(f)
		fmt.Fprintf(&m, "#define LOOM_XV(j) loom_pre(%s)\n", strings.Join(append(partPointers(parts.PreIns), "(j)"), ", "))
	} else {
		fmt.Fprintf(&m, "#define LOOM_XV(j) in%d[LOOM_OFF + (j)]\n", parts.CoreIns[0])
	}
	if parts.Post != nil {
		f, err := codegen.ScalarFunc(parts.Post, "loom_post", parts.PostValue, fz.wide)
		if err != nil {
			return nil, fmt.Errorf("epilogue: %w", err)
		}
		funcs.WriteString(f)
		fmt.Fprintf(&m, "#define LOOM_STORE(o, v) out[o] = loom_post(%s)\n", strings.Join(append(partPointers(parts.PostIns), "(v)", "(o)"), ", "))
	} else {
		m.WriteString("#define LOOM_STORE(o, v) out[o] = (v)\n")
	}
	fz.funcs, fz.macros = funcs.String(), m.String()
	p, err := planWindow(parts.Core.Instrs[0].Node, ops, fz)
	if err != nil {
		return nil, err
	}
	p.base = "fused_" + p.base
	return p, nil
}

// partPointers names the fused kernel's operands a part reads as pointers
// (in<i>, the fused kernel's parameter names), in the part's order: from
// maps the part's operands to the fused kernel's (plan.FusedParts), -1
// for a temporary, which is passed as a value, not a pointer.
func partPointers(from []int) []string {
	var ps []string
	for _, f := range from {
		if f >= 0 {
			ps = append(ps, fmt.Sprintf("in%d", f))
		}
	}
	return ps
}

// planWindow plans a pool or an upsampling: one launch, no scratch. fz,
// when not nil, fuses a prologue and an epilogue into it.
func planWindow(n *ir.Node, ops []operand, fz *windowFusion) (*planned, error) {
	x := ops[0]
	if len(ops) != 1 || x.dt != n.DType {
		return nil, fmt.Errorf("want one %v operand", n.DType)
	}
	if !plan.WindowOperandOf(x.l) {
		return nil, fmt.Errorf("operand layout %v is not a packed array", x.l)
	}
	xs, ys := x.l.Dims, n.Shape
	if len(xs) != len(ys) || (len(xs) != 3 && len(xs) != 4) || xs[0] != ys[0] || xs[1] != ys[1] {
		return nil, fmt.Errorf("input %v and output %v are not [N, C, spatial...] of one N and C", xs, ys)
	}
	h, w, oh, ow := 1, xs[len(xs)-1], 1, ys[len(ys)-1]
	if len(xs) == 4 {
		h, oh = xs[2], ys[2]
	}
	numel := int64(n.Numel())
	_, hi := x.l.Span()
	c := &config{wide: needWide(numel, int64(hi), int64(x.l.Numel())) || (fz != nil && fz.wide)}
	c.header()
	if c.wide {
		c.line("typedef long long loom_sidx;")
	} else {
		c.line("typedef int loom_sidx;")
	}
	c.valueMacros("V", n.DType)
	c.define("LOOM_NUMEL", numel)
	c.define("LOOM_H", int64(h))
	c.define("LOOM_W", int64(w))
	c.define("LOOM_OH", int64(oh))
	c.define("LOOM_OW", int64(ow))
	c.define("LOOM_OFF", int64(x.l.Offset))
	var entry string
	switch n.Op {
	case ir.OpMaxPool, ir.OpAvgPool:
		if err := poolConfig(c, n); err != nil {
			return nil, err
		}
		entry = "loom_pool"
	case ir.OpUpsampleNearest:
		p := n.Upsample()
		sh, sw := 0.0, p.Scale[0]
		if p.Rank == 2 {
			sh, sw = p.Scale[0], p.Scale[1]
		}
		c.line("#define LOOM_NEAREST 1")
		c.nearestIndex("loom_src_h", h, oh, sh)
		c.nearestIndex("loom_src_w", w, ow, sw)
		entry = "loom_nearest"
	case ir.OpUpsampleBilinear:
		p := n.Upsample()
		if oh == h && ow == w { // a copy (ir.UpsampleParams)
			c.line("#define LOOM_NEAREST 1")
			c.nearestIndex("loom_src_h", h, oh, 0)
			c.nearestIndex("loom_src_w", w, ow, 0)
			entry = "loom_nearest"
			break
		}
		if !n.DType.IsFloat() {
			return nil, fmt.Errorf("bilinear upsampling of %v", n.DType)
		}
		c.line("#define LOOM_BILINEAR 1")
		c.line("#define LOOM_ALIGN %d", b2i(p.AlignCorners))
		c.line("#define LOOM_RH %s", f64Lit(lerpScale(h, oh, p.AlignCorners, p.Scale[0])))
		c.line("#define LOOM_RW %s", f64Lit(lerpScale(w, ow, p.AlignCorners, p.Scale[1])))
		switch n.DType {
		case dtype.F32:
			c.line("#define V_F64(x) ((double)(x))")
			c.line("#define F64_V(r) ((r) != (r) ? LOOM_NAN_F32 : (float)(r))")
		case dtype.F64:
			c.line("#define V_F64(x) (x)")
			c.line("#define F64_V(r) (r)")
		case dtype.F16:
			c.line("#define V_F64(x) ((double)loom_f16_to_f32(x))")
			c.line("#define F64_V(r) loom_f32_to_f16(loom_f32_round_odd(r))")
		case dtype.BF16:
			c.line("#define V_F64(x) ((double)loom_bf16_to_f32(x))")
			c.line("#define F64_V(r) loom_f32_to_bf16(loom_f32_round_odd(r))")
		}
		entry = "loom_bilinear"
	default:
		return nil, fmt.Errorf("no GPU kernel for %s", n.Op)
	}
	args := []Arg{{Operand, x.in}, {Kind: Output}}
	if fz == nil {
		c.line("#define LOOM_PARAMS const V_T* __restrict__ x, V_T* __restrict__ out")
		c.line("#define LOOM_ARGS x, out")
		c.line("#define LOOM_XV(j) x[LOOM_OFF + (j)]")
		c.line("#define LOOM_STORE(o, v) out[o] = (v)")
	} else {
		c.WriteString(fz.funcs)
		c.WriteString(fz.macros)
		args = fz.args
	}
	p := &planned{
		base:   fmt.Sprintf("%s_%v", n.Op, n.DType),
		config: c.String(),
		body:   windowHIP,
		entries: fmt.Sprintf(`
extern "C" __global__ void __launch_bounds__(LOOM_BS) %s(LOOM_PARAMS) { loom_grid_entry();
  %s(LOOM_ARGS);
}
`, namePlaceholder, entry),
	}
	p.launch = []Launch{{
		Grid: grid1(numel, blockSize), Block: [3]uint32{blockSize, 1, 1},
		Args: args,
	}}
	return p, nil
}

// poolConfig writes a pool's parameters and accumulator.
func poolConfig(c *config, n *ir.Node) error {
	p := n.Pool()
	acc, ok := windowAccums[n.DType]
	if !ok {
		return fmt.Errorf("pool of %v", n.DType)
	}
	c.line("#define LOOM_POOL 1")
	c.line("#define LOOM_MAX %d", b2i(n.Op == ir.OpMaxPool))
	c.line("#define LOOM_COUNT_PAD %d", b2i(p.CountIncludePad))
	for _, d := range []struct {
		name string
		v    int
	}{{"KH", p.Kernel[0]}, {"KW", p.Kernel[1]}, {"SH", p.Stride[0]}, {"SW", p.Stride[1]}, {"PH", p.Padding[0]}, {"PW", p.Padding[1]}} {
		c.line("#define LOOM_%s ((loom_sidx)%d)", d.name, d.v)
	}
	c.line("typedef %s A_T;", acc.acc)
	c.line("#define V_LOAD(x) %s", acc.load)
	c.line("#define V_STORE(a) %s", acc.store)
	c.line("#define V_NAN %s", acc.nan)
	switch {
	case n.DType == dtype.F64:
		c.line("#define V_MAX(m, v) ((v) > (m) || ((__double_as_longlong(m) & ~__double_as_longlong(v)) < 0) ? (v) : (m))")
	case n.DType.IsFloat():
		c.line("#define V_MAX(m, v) ((v) > (m) || ((__float_as_uint(m) & ~__float_as_uint(v)) >> 31) != 0u ? (v) : (m))")
	default:
		c.line("#define V_MAX(m, v) ((v) > (m) ? (v) : (m))")
	}
	if n.DType.IsFloat() {
		c.line("#define V_ISNAN(v) ((v) != (v))")
		c.line("#define A_ADD(a, b) loom_add((a), (b))")
		c.line("#define A_DIV(a, d) loom_div((a), (A_T)(d))")
	} else {
		c.line("#define V_ISNAN(v) false")
		c.line("#define A_ADD(a, b) ((a) + (b))")
		c.line("#define A_DIV(a, d) ((a) / (A_T)(d))")
	}
	if p.Kernel[0]*p.Kernel[1] <= maxUnroll {
		c.line(`#define LOOM_UNROLL _Pragma("unroll")`)
	} else {
		c.line("#define LOOM_UNROLL") // a large window keeps its loops
	}
	return nil
}

// nearestIndex writes `loom_idx name(loom_idx d)`: the source index of
// output index d of an axis of size in resized to out — ⌊d·in/out⌋ in
// 64-bit integers (HasWindowKernel checks in·out fits), or with a scale
// factor min(⌊d/scale⌋, in − 1) in double, as the twin's nearestIndex.
func (c *config) nearestIndex(name string, in, out int, scale float64) {
	c.line("LOOM_DEV loom_idx %s(loom_idx d) {", name)
	switch {
	case in == out && scale == 0:
		c.line("  return d;")
	case in == 1:
		c.line("  (void)d;")
		c.line("  return 0;")
	case scale > 0:
		c.line("  const loom_idx s = (loom_idx)floor(loom_div((double)d, %s));", f64Lit(scale))
		c.line("  return s < %s ? s : %s;", c.lit(int64(in-1)), c.lit(int64(in-1)))
	default:
		c.line("  return (loom_idx)((unsigned long long)d * %dull / %dull);", in, out)
	}
	c.line("}")
}

// lerpScale is an axis's source-coordinate scale (ir.UpsampleParams): the
// twin's bilinearAxis computes the same float64 on the host.
func lerpScale(in, out int, align bool, scale float64) float64 {
	switch {
	case align && out > 1:
		return float64(in-1) / float64(out-1)
	case align:
		return 0
	case scale > 0:
		return 1 / scale
	}
	return float64(in) / float64(out)
}

// f64Lit is a C double literal that parses to exactly v (17 significant
// digits round-trip).
func f64Lit(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		panic(fmt.Sprintf("kernels: literal %v", v))
	}
	return strconv.FormatFloat(v, 'e', 16, 64)
}

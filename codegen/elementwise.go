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

// Launch shape constants (see doc.go).
const (
	// BlockSize is the threads per block of every elementwise kernel: a
	// multiple of both wave sizes, small enough for full occupancy.
	BlockSize = 256
	// maxExactBlocks bounds an exact grid: BlockSize·maxExactBlocks = 2^31
	// threads (AMD counts a grid in work-items, a 32-bit number). Larger
	// kernels use a grid-stride loop over loopBlocks blocks.
	maxExactBlocks = 1 << 23
	loopBlocks     = 1 << 22
	// vecBytes is the widest access: 16 bytes (global_load_dwordx4,
	// LDG.128).
	vecBytes = 16
)

// options are the tuning knobs of the generator; Elementwise uses
// defaultOptions, the tests also try others.
type options struct {
	// threadBytes is what the narrowest wide access moves per thread (a
	// multiple of vecBytes); maxThreadBytes caps any operand's bytes per
	// thread.
	threadBytes, maxThreadBytes int
	// gridBlocks > 0 forces a grid-stride loop over at most that many
	// blocks; 0 gives an exact grid (a loop only beyond maxExactBlocks).
	gridBlocks int
	// heavyElems > 0: a kernel of at least heavyMinElems elements whose
	// body calls a transcendental (heavyOps) takes at least this many
	// elements a thread, where no operand's vector path is lost by it and
	// maxThreadBytes allows. Such a body's instructions, not its bytes,
	// hold a thread of 4 f32 values: more values a thread keep more loads
	// in flight across them. H200, session 52, the codegen suite's sweep
	// (TestGPUBandwidth, one call): W6 gelu(x + bias) f32 8192² 0.135 ms
	// with 8 a thread against 0.142 with 4 (94% of copy against 89%),
	// while a plain copy lost (0.556 against 0.504) and W1 and W2, whose
	// f16 operand already gives them 8, lost at 16 (0.702 against 0.624,
	// 1.268 against 1.013).
	heavyElems int
}

var defaultOptions = options{threadBytes: 16, maxThreadBytes: 64, heavyElems: 8}

// heavyMinElems is the size from which heavyElems applies: a small kernel
// (a decode step's 2,048 values) gains more from threads than from values
// a thread.
const heavyMinElems = 1 << 20

// heavyOps are the ops whose device code is a libm-style function (or
// several), tens of instructions an element.
var heavyOps = map[ir.Op]bool{
	ir.OpExp: true, ir.OpLog: true, ir.OpSin: true, ir.OpCos: true, ir.OpTanh: true, ir.OpErf: true,
	ir.OpGelu: true, ir.OpGeluErf: true, ir.OpSilu: true, ir.OpSigmoid: true, ir.OpNormcdf: true,
	ir.OpElu: true, ir.OpPowf: true,
}

// Param is one kernel parameter: a device pointer to the base of a buffer
// (operand offsets are baked into the code).
type Param struct {
	Name  string // in0, in1, …, out
	CType string // C parameter type, e.g. "const float* __restrict__"
	DType dtype.DType
	Buf   *plan.Buffer // the buffer to pass (Kernel.Ins[k].Buf, then Kernel.Out); nil for scratch
	Out   bool         // the output pointer (after the operands)
	// Scratch marks the scratch pointer (last, after out; only when
	// Source.ScratchBytes > 0): device memory of ScratchBytes bytes, 16-byte
	// aligned, whose contents on entry do not matter, live for the step.
	Scratch bool
}

// Launch is one kernel launch of a source. Every launch of a source takes
// the source's Params.
type Launch struct {
	Name  string // entry point (extern "C") in Code
	Grid  [3]uint32
	Block [3]uint32
}

// Source is one rendered kernel.
type Source struct {
	// Name is the entry point (extern "C"): the kernel name made a C
	// identifier, plus a hash of the source, so it is unique per distinct
	// source and equal for equal sources.
	Name string
	// Code is the complete translation unit: PreludeFor(t, Body) + Body,
	// the prelude's helpers that Body uses and Body.
	Code string
	// Body is Code without the prelude: several bodies for one target can
	// share one full Prelude(t) in a translation unit (their helpers live in a
	// namespace named after the kernel).
	Body string
	// Block and Grid are the first launch's (Launches[0]), the only one of
	// an elementwise kernel.
	Block [3]uint32
	Grid  [3]uint32
	// Launches are the launches that compute the kernel, in stream order:
	// one, or two for a two-stage row reduction (rows_split.go).
	// Launches[0].Name is Name.
	Launches []Launch
	// ScratchBytes is the size of the scratch buffer the launches share (0:
	// none, and no scratch parameter).
	ScratchBytes int64
	// Params are the kernel parameters in order: one pointer per operand
	// (Kernel.Ins order), then the output pointer, then (ScratchBytes > 0)
	// the scratch pointer. Nothing else.
	Params []Param
	// Elems is the number of consecutive elements a thread computes in the
	// vector path; Index64 reports 64-bit index arithmetic; Loop reports a
	// grid-stride loop instead of an exact grid.
	Elems   int
	Index64 bool
	Loop    bool
	// Row reports a row kernel (rows.go): the threads of a block cooperate
	// through shuffles and barriers, so a block runs as a whole.
	Row bool
}

// operand modes.
type mode uint8

const (
	// run: a thread's Elems elements are at a + j·stride, a computed once
	// per thread (contiguous, broadcast, or a stride along the innermost
	// dim whose length is a multiple of Elems).
	modeRun mode = iota
	// general: every element's address is decomposed from its flat index.
	modeGeneral
)

type operand struct {
	dt     dtype.DType
	l      ir.Layout // reduced: unit dims dropped, mergeable dims merged
	mode   mode
	stride int  // run: the innermost stride
	vector bool // run with stride 1, aligned for wide loads
	desc   string
}

// Elementwise renders one planned elementwise kernel for t. It fails, naming
// the op and dtype, for anything it cannot render.
func Elementwise(k *plan.Kernel, t Target) (*Source, error) {
	return elementwise(k, t, defaultOptions)
}

func elementwise(k *plan.Kernel, t Target, opt options) (*Source, error) {
	t, err := t.check()
	if err != nil {
		return nil, err
	}
	g, err := newGen(k, opt)
	if err != nil {
		return nil, fmt.Errorf("codegen: kernel %s: %w", k.Name, err)
	}
	body := g.render(t)
	prelude := PreludeFor(t, body)
	h := fnv.New64a()
	h.Write([]byte(prelude))
	h.Write([]byte(body))
	name := fmt.Sprintf("%s_%08x", baseName(k.Name), uint32(h.Sum64()))
	body = strings.ReplaceAll(body, namePlaceholder, name)
	src := &Source{
		Name:    name,
		Code:    prelude + body,
		Body:    body,
		Block:   [3]uint32{BlockSize, 1, 1},
		Grid:    [3]uint32{uint32(g.blocks), 1, 1},
		Elems:   g.vec,
		Index64: g.wide,
		Loop:    g.loop,
	}
	src.Launches = []Launch{{Name: name, Grid: src.Grid, Block: src.Block}}
	src.Params = kernelParams(k)
	return src, nil
}

// kernelParams are the operand and output parameters of k.
func kernelParams(k *plan.Kernel) []Param {
	var ps []Param
	for i, o := range k.Ins {
		ps = append(ps, Param{Name: fmt.Sprintf("in%d", i), CType: "const " + storageType(o.Buf.DType) + "* __restrict__", DType: o.Buf.DType, Buf: o.Buf})
	}
	return append(ps, Param{Name: "out", CType: storageType(k.Out.DType) + "* __restrict__", DType: k.Out.DType, Buf: k.Out, Out: true})
}

// Kernel renders any planned kernel codegen handles: a row kernel
// (RowAxes > 0) with Rows, any other with Elementwise.
func Kernel(k *plan.Kernel, t Target) (*Source, error) {
	if k != nil && k.RowAxes > 0 {
		return Rows(k, t)
	}
	return Elementwise(k, t)
}

const namePlaceholder = "LOOM_KERNEL_NAME"

// baseName makes a kernel name a C identifier of reasonable length.
func baseName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" {
		out = "E_kernel"
	}
	if out[0] >= '0' && out[0] <= '9' {
		out = "E_" + out
	}
	if len(out) > 80 {
		out = strings.TrimRight(out[:80], "_")
	}
	return out
}

// gen holds one kernel's analysis.
type gen struct {
	k      *plan.Kernel
	numel  int
	ops    []operand
	argDT  [][]dtype.DType
	vec    int  // elements per thread in the vector path
	wide   bool // 64-bit indices
	nvec   int  // full vectors
	tail   int  // elements after the last full vector
	blocks int
	loop   bool
	arange bool // the body needs the element index
	heavy  bool // the body calls a transcendental (heavyOps)
	opt    options
}

func newGen(k *plan.Kernel, opt options) (*gen, error) {
	if k.Out == nil {
		return nil, fmt.Errorf("no output buffer")
	}
	if len(k.Instrs) == 0 {
		return nil, fmt.Errorf("no instructions")
	}
	if k.RowAxes != 0 {
		return nil, fmt.Errorf("a row kernel (%d row axes, ops %v): codegen renders elementwise kernels only", k.RowAxes, k.OpNames())
	}
	g := &gen{k: k, numel: k.Numel(), opt: opt}
	if k.Out.Numel() != g.numel {
		return nil, fmt.Errorf("output buffer %v holds %d elements, kernel shape %v has %d", k.Out, k.Out.Numel(), k.Shape, g.numel)
	}
	if !k.Out.DType.Valid() {
		return nil, fmt.Errorf("output dtype %v", k.Out.DType)
	}
	for i, o := range k.Ins {
		if o.Buf == nil || !o.Buf.DType.Valid() {
			return nil, fmt.Errorf("operand %d has no buffer or an invalid dtype", i)
		}
		if !slices.Equal(o.Layout.Dims, k.Shape) || len(o.Layout.Strides) != len(o.Layout.Dims) {
			return nil, fmt.Errorf("operand %d has layout %v, kernel shape %v", i, o.Layout, k.Shape)
		}
		if o.Layout.Offset < 0 || slices.ContainsFunc(o.Layout.Strides, func(s int) bool { return s < 0 }) {
			return nil, fmt.Errorf("operand %d has a negative stride or offset: %v", i, o.Layout)
		}
		if _, hi := o.Layout.Span(); g.numel > 0 && hi > o.Buf.Numel() {
			return nil, fmt.Errorf("operand %d layout %v reads past its buffer %v", i, o.Layout, o.Buf)
		}
		g.ops = append(g.ops, operand{dt: o.Buf.DType, l: o.Layout.Merged()})
	}
	for j, in := range k.Instrs {
		n := in.Node
		if n == nil {
			return nil, fmt.Errorf("instruction %d has no node", j)
		}
		dts := make([]dtype.DType, len(in.Args))
		for a, r := range in.Args {
			switch {
			case r.Broadcast:
				return nil, fmt.Errorf("instruction %d (%s) reads a row value %v outside a row kernel", j, n.Op, r)
			case r.Operand && r.Index >= 0 && r.Index < len(k.Ins):
				dts[a] = k.Ins[r.Index].Buf.DType
			case !r.Operand && r.Index >= 0 && r.Index < j:
				dts[a] = k.Instrs[r.Index].Node.DType
			default:
				return nil, fmt.Errorf("instruction %d (%s) reads %v, which is not available", j, n.Op, r)
			}
		}
		if err := checkInstr(n, dts); err != nil {
			return nil, err
		}
		g.argDT = append(g.argDT, dts)
		g.arange = g.arange || n.Op == ir.OpArange
		g.heavy = g.heavy || heavyOps[n.Op]
	}
	if last := k.Instrs[len(k.Instrs)-1].Node; last.DType != k.Out.DType {
		return nil, fmt.Errorf("stores a %v value into a %v buffer", last.DType, k.Out.DType)
	}

	// Index width: 32 bits when every index and address fits in an int32.
	g.wide = g.numel > math.MaxInt32
	for _, o := range k.Ins {
		if _, hi := o.Layout.Span(); hi > 1<<31 {
			g.wide = true
		}
	}
	g.chooseVector()
	g.nvec, g.tail = g.numel/g.vec, g.numel%g.vec
	threads := g.nvec
	if g.tail > 0 {
		threads++
	}
	g.blocks = max(1, (threads+BlockSize-1)/BlockSize)
	switch {
	case opt.gridBlocks > 0 && g.blocks > opt.gridBlocks:
		g.blocks, g.loop = opt.gridBlocks, true
	case g.blocks > maxExactBlocks:
		g.blocks, g.loop = loopBlocks, true
	}
	return g, nil
}

// chooseVector picks Elems and each operand's mode. Elems makes the
// narrowest wide access (the output, or an operand whose innermost stride
// is 1) 16 bytes, capped so that the widest such one moves at most 64 bytes
// per thread; Elems is a power of two, so vectors never straddle a row
// whose length is a multiple of it.
func (g *gen) chooseVector() {
	minS, maxS := g.k.Out.DType.Size(), g.k.Out.DType.Size()
	for _, o := range g.ops {
		if r := len(o.l.Dims); r > 0 && o.l.Strides[r-1] == 1 {
			minS, maxS = min(minS, o.dt.Size()), max(maxS, o.dt.Size())
		}
	}
	g.vec = max(1, g.opt.threadBytes/minS)
	for g.vec > 1 && g.vec*maxS > g.opt.maxThreadBytes {
		g.vec /= 2
	}
	if g.heavy && g.numel >= heavyMinElems {
		for g.vec < g.opt.heavyElems && 2*g.vec*maxS <= g.opt.maxThreadBytes && g.keepsRuns(2*g.vec) {
			g.vec *= 2
		}
	}
	for i := range g.ops {
		o := &g.ops[i]
		r := len(o.l.Dims)
		switch {
		case r == 0:
			o.mode, o.stride = modeRun, 0
		case r == 1 || o.l.Dims[r-1]%g.vec == 0:
			o.mode, o.stride = modeRun, o.l.Strides[r-1]
		default:
			o.mode = modeGeneral
		}
		if o.mode == modeRun && o.stride == 1 && loadFunc(o.dt, g.chunk(o.dt)) != "" {
			c := g.chunk(o.dt)
			o.vector = o.l.Offset*o.dt.Size()%c == 0
			for _, s := range o.l.Strides[:r-1] {
				o.vector = o.vector && s*o.dt.Size()%c == 0
			}
		}
		switch {
		case o.mode == modeGeneral:
			o.desc = "strided, address per element"
		case o.stride == 0:
			o.desc = "broadcast, one load per thread"
		case o.vector:
			o.desc = fmt.Sprintf("%d consecutive per thread, %d-byte loads", g.vec, g.chunk(o.dt))
		case o.stride == 1:
			o.desc = fmt.Sprintf("%d consecutive per thread, unaligned, scalar loads", g.vec)
		default:
			o.desc = fmt.Sprintf("%d per thread at stride %d", g.vec, o.stride)
		}
		if r == 1 && o.stride == 1 {
			o.desc = "contiguous, " + o.desc
		}
	}
}

// chunk is the access size of Elems consecutive values of d.
// keepsRuns reports whether every operand that runs in vectors of g.vec
// (a scalar, or an innermost dim that g.vec divides) still does in
// vectors of v: a wider vector must not send an operand to the general
// path.
func (g *gen) keepsRuns(v int) bool {
	for _, o := range g.ops {
		r := len(o.l.Dims)
		if r > 1 && o.l.Dims[r-1]%g.vec == 0 && o.l.Dims[r-1]%v != 0 {
			return false
		}
	}
	return true
}

func (g *gen) chunk(d dtype.DType) int { return min(vecBytes, g.vec*d.Size()) }

// loadFunc and storeFunc name the prelude's wide access for chunk bytes of
// d, or "" when there is none (the kernel then uses scalar accesses).
func loadFunc(d dtype.DType, chunk int) string {
	if chunk == 16 || (chunk == 8 && d.Size() == 1) {
		return fmt.Sprintf("loom_ld%d_%v", chunk, d)
	}
	return ""
}

func storeFunc(d dtype.DType, chunk int) string {
	if chunk == 16 || (chunk == 8 && d.Size() == 1) {
		return fmt.Sprintf("loom_st%d_%v", chunk, d)
	}
	return ""
}

// w accumulates C source.
type w struct{ strings.Builder }

func (b *w) line(indent int, format string, a ...any) {
	b.WriteString(strings.Repeat("  ", indent))
	fmt.Fprintf(b, format, a...)
	b.WriteByte('\n')
}

// idx is the index type; u its literal suffix.
func (g *gen) idx() (typ, u string) {
	if g.wide {
		return "unsigned long long", "ull"
	}
	return "unsigned int", "u"
}

// render writes the kernel (everything after the prelude), with
// namePlaceholder for the entry name.
func (g *gen) render(t Target) string {
	k := g.k
	I, u := g.idx()
	var b w
	b.line(0, "")
	b.line(0, "// Kernel %s (%s) for %s.", k.Name, namePlaceholder, t)
	bits := 32
	if g.wide {
		bits = 64
	}
	grid := "exact grid"
	if g.loop {
		grid = "grid-stride loop"
	}
	b.line(0, "// Shape %v: %d elements; %d per thread (%d vectors, tail %d); %d-bit indices; %s of %d x %d.",
		k.Shape, g.numel, g.vec, g.nvec, g.tail, bits, grid, g.blocks, BlockSize)
	for i, o := range k.Ins {
		b.line(0, "// in%d: %v b%d %v, reduced %v:%v+%d: %s.", i, o.Buf.DType, o.Buf.ID, o.Layout, g.ops[i].l.Dims, g.ops[i].l.Strides, g.ops[i].l.Offset, g.ops[i].desc)
	}
	outDesc := "scalar stores"
	if sf := storeFunc(k.Out.DType, g.chunk(k.Out.DType)); sf != "" {
		outDesc = fmt.Sprintf("%d-byte stores", g.chunk(k.Out.DType))
	}
	b.line(0, "// out: %v b%d, contiguous, %s.", k.Out.DType, k.Out.ID, outDesc)

	g.renderNamespace(&b, namePlaceholder)
	b.line(0, "")

	// The kernel.
	var ps []string
	for i, o := range k.Ins {
		ps = append(ps, fmt.Sprintf("const %s* __restrict__ in%d", storageType(o.Buf.DType), i))
	}
	ps = append(ps, fmt.Sprintf("%s* __restrict__ out", storageType(k.Out.DType)))
	b.line(0, "extern \"C\" __global__ void __launch_bounds__(%d) %s(%s) { loom_grid_entry();", BlockSize, namePlaceholder, strings.Join(ps, ", "))
	b.line(1, "using namespace %s_;", namePlaceholder)
	if g.numel == 0 {
		b.line(1, "// No elements.")
		b.line(0, "}")
		return b.String()
	}
	threads := g.nvec
	if g.tail > 0 {
		threads++
	}
	ind := 1
	first := fmt.Sprintf("(%s)blockIdx.x * %d%s + threadIdx.x", I, BlockSize, u)
	if !g.wide {
		first = fmt.Sprintf("blockIdx.x * %d%s + threadIdx.x", BlockSize, u)
	}
	if g.loop {
		b.line(1, "for (%s v = %s; v < %d%s; v += %d%s) {", I, first, threads, u, g.blocks*BlockSize, u)
		ind = 2
	} else {
		b.line(1, "const %s v = %s;", I, first)
	}
	if g.nvec > 0 {
		b.line(ind, "if (v < %d%s) {", g.nvec, u)
		g.renderVector(&b, ind+1)
		if g.tail > 0 {
			b.line(ind, "} else if (v == %d%s) {", g.nvec, u)
		}
	} else {
		b.line(ind, "if (v == 0%s) {", u)
	}
	if g.tail > 0 {
		g.renderTail(&b, ind+1)
	}
	b.line(ind, "}")
	if g.loop {
		b.line(1, "}")
	}
	b.line(0, "}")
	return b.String()
}

// renderNamespace writes namespace ns_: at<k>(i), operand k's element
// address for flat index i, and body(…), the per-element computation from
// the operands' compute values (then the index, with arange, and the
// random instructions' variates).
func (g *gen) renderNamespace(b *w, ns string) {
	k := g.k
	I, u := g.idx()
	b.line(0, "namespace %s_ {", ns)
	// Address of operand k's element i.
	for i := range g.ops {
		o := &g.ops[i]
		b.line(0, "LOOM_DEV %s at%d(%s i) {", I, i, I)
		r := len(o.l.Dims)
		switch {
		case r == 0:
			b.line(1, "return %d%s;", o.l.Offset, u)
		case r == 1:
			b.line(1, "return %s;", linear(o.l.Offset, "i", o.l.Strides[0], u))
		default:
			b.line(1, "%s a = %d%s;", I, o.l.Offset, u)
			for d := r - 1; d > 0; d-- {
				if s := o.l.Strides[d]; s != 0 {
					b.line(1, "a += (i %% %d%s) * %d%s;", o.l.Dims[d], u, s, u)
				}
				b.line(1, "i /= %d%s;", o.l.Dims[d], u)
			}
			if s := o.l.Strides[0]; s != 0 {
				b.line(1, "a += %s;", linear(0, "i", s, u))
			}
			b.line(1, "return a;")
		}
		b.line(0, "}")
	}
	// The per-element computation.
	outC := computeType(k.Out.DType)
	var params []string
	for i, o := range g.ops {
		params = append(params, fmt.Sprintf("%s in%d", computeType(o.dt), i))
	}
	if g.arange {
		params = append(params, I+" i")
	}
	for _, j := range g.randoms() {
		params = append(params, fmt.Sprintf("%s rv%d", computeType(k.Instrs[j].Node.DType), j))
	}
	b.line(0, "LOOM_DEV %s body(%s) {", outC, strings.Join(params, ", "))
	last := len(k.Instrs) - 1
	for j, in := range k.Instrs {
		n := in.Node
		args := make([]string, len(in.Args))
		for a, r := range in.Args {
			args[a] = r.String()
		}
		if n.Op.IsRandom() {
			args = []string{fmt.Sprintf("rv%d", j)} // its standard variate, computed by the caller
		}
		e, _ := instrExpr(n, args, g.argDT[j]) // checked by newGen
		// Round every intermediate to its dtype (comparisons give 0 or 1:
		// nothing to round); the last value is narrowed by the store.
		if j < last && n.Op.Info().Out != ir.OutU8 {
			e = rounder(n.DType, e)
		}
		op := n.Op.String()
		if ps := ir.FormatParams(n); ps != "" {
			op += "(" + ps + ")"
		}
		b.line(1, "const %s t%d = %s; // %%%d %s %v", computeType(n.DType), j, e, n.ID, op, n.DType)
	}
	b.line(1, "return t%d;", last)
	b.line(0, "}")
	b.line(0, "} // namespace %s_", ns)
}

// randoms returns the indices of the random instructions, whose standard
// variates the body takes as parameters (random.go).
func (g *gen) randoms() []int {
	var js []int
	for j, in := range g.k.Instrs {
		if in.Node.Op.IsRandom() {
			js = append(js, j)
		}
	}
	return js
}

// linear formats off + x·stride as a C index expression.
func linear(off int, x string, stride int, u string) string {
	var term string
	switch stride {
	case 0:
		return fmt.Sprintf("%d%s", off, u)
	case 1:
		term = x
	default:
		term = fmt.Sprintf("%s * %d%s", x, stride, u)
	}
	if off == 0 {
		return term
	}
	if stride == 1 {
		return fmt.Sprintf("(%s + %d%s)", x, off, u)
	}
	return fmt.Sprintf("%d%s + %s", off, u, term)
}

// renderVector writes the vector path: element i = v·Elems onwards.
func (g *gen) renderVector(b *w, ind int) {
	I, u := g.idx()
	V := g.vec
	b.line(ind, "const %s i = v * %d%s;", I, V, u)
	args := make([]string, len(g.ops))
	for k := range g.ops {
		o := &g.ops[k]
		c := computeType(o.dt)
		x := fmt.Sprintf("x%d", k)
		args[k] = x + "[j]"
		switch {
		case o.mode == modeGeneral:
			b.line(ind, "%s %s[%d];", c, x, V)
			b.line(ind, "#pragma unroll")
			b.line(ind, "for (int j = 0; j < %d; ++j) %s[j] = %s;", V, x, widen(o.dt, fmt.Sprintf("in%d[at%d(i + j)]", k, k)))
		case o.stride == 0:
			b.line(ind, "const %s %s = %s;", c, x, widen(o.dt, fmt.Sprintf("in%d[at%d(i)]", k, k)))
			args[k] = x
		case o.vector:
			ch := g.chunk(o.dt)
			per := ch / o.dt.Size()
			b.line(ind, "%s %s[%d];", c, x, V)
			b.line(ind, "{")
			b.line(ind+1, "const %s a = at%d(i);", I, k)
			for e := 0; e < V; e += per {
				b.line(ind+1, "%s(%s + %d, in%d + %s);", loadFunc(o.dt, ch), x, e, k, linear(e, "a", 1, u))
			}
			b.line(ind, "}")
		default:
			b.line(ind, "%s %s[%d];", c, x, V)
			b.line(ind, "{")
			b.line(ind+1, "const %s a = at%d(i);", I, k)
			b.line(ind+1, "#pragma unroll")
			b.line(ind+1, "for (int j = 0; j < %d; ++j) %s[j] = %s;", V, x, widen(o.dt, fmt.Sprintf("in%d[a + j * %d%s]", k, o.stride, u)))
			b.line(ind, "}")
		}
	}
	if g.arange {
		args = append(args, "i + j")
	}
	for _, j := range g.randoms() {
		n := g.k.Instrs[j].Node
		rv := fmt.Sprintf("rv%d", j)
		b.line(ind, "%s %s[%d]; // %%%d %s variates", computeType(n.DType), rv, V, n.ID, n.Op)
		randBlocks(b, ind, n, rv, "i", V)
		args = append(args, rv+"[j]")
	}
	od := g.k.Out.DType
	b.line(ind, "%s y[%d];", computeType(od), V)
	b.line(ind, "#pragma unroll")
	b.line(ind, "for (int j = 0; j < %d; ++j) y[j] = body(%s);", V, strings.Join(args, ", "))
	ch := g.chunk(od)
	if sf := storeFunc(od, ch); sf != "" {
		per := ch / od.Size()
		for e := 0; e < V; e += per {
			b.line(ind, "%s(out + %s, y + %d);", sf, linear(e, "i", 1, u), e)
		}
	} else {
		b.line(ind, "#pragma unroll")
		b.line(ind, "for (int j = 0; j < %d; ++j) out[i + j] = %s;", V, narrow(od, "y[j]"))
	}
}

// renderTail writes the scalar path for the last numel mod Elems elements.
func (g *gen) renderTail(b *w, ind int) {
	I, u := g.idx()
	args := g.argsAt(func(k int) string { return fmt.Sprintf("in%d[at%d(i)]", k, k) })
	b.line(ind, "for (%s i = %d%s; i < %d%s; ++i) out[i] = %s;", I, g.nvec*g.vec, u, g.numel, u,
		narrow(g.k.Out.DType, "body("+strings.Join(args, ", ")+")"))
}

// argsAt is body's argument list for the one element at flat index i (a C
// variable named i): operand k's storage value load(k) widened, then the
// index (with arange) and the random instructions' variates at i.
func (g *gen) argsAt(load func(k int) string) []string {
	args := make([]string, len(g.ops))
	for k := range g.ops {
		args[k] = widen(g.ops[k].dt, load(k))
	}
	if g.arange {
		args = append(args, "i")
	}
	for _, j := range g.randoms() {
		args = append(args, randAt(g.k.Instrs[j].Node, "i"))
	}
	return args
}

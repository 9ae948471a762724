package kernels

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// ArgKind says what a kernel parameter points at.
type ArgKind uint8

// Argument kinds.
const (
	// Operand is Kernel.Ins[Index]: the buffer's base address (the operand's
	// offset and strides are baked into the code).
	Operand ArgKind = iota
	// Output is Kernel.Out: a contiguous buffer of the node's shape.
	Output
	// ErrorFlag is the step's error flag: ErrorFlagWords int64s, zeroed
	// before the step (see DecodeError).
	ErrorFlag
	// Scratch is scratch buffer Index of the ScratchBuf list Plan returns.
	Scratch
	// Counters is the executor's counters: CounterWords uint32s, zero
	// when the launch begins, which the launch must leave zero when it
	// ends (a kernel's blocks count themselves in and the last one resets
	// the count). The executor allocates them once, zeroed; launches on
	// one stream never overlap in them (each kernel begins with
	// loom_grid_entry's wait for the one ahead).
	Counters
	// AheadInPlace is, on an attention step with plan.Kernel.NewKV, the
	// base of the attention's queries' buffer where the scatter ahead of
	// it (NewKV.Scatter) writes its output in its destination's memory in
	// this run, and null otherwise: the kernel then reads the new key and
	// value there and issues its loads before it waits for that scatter.
	AheadInPlace
)

// CounterWords is the number of uint32 counters Counters holds.
const CounterWords = 1 << 16

func (k ArgKind) String() string {
	switch k {
	case Operand:
		return "operand"
	case Output:
		return "output"
	case ErrorFlag:
		return "error-flag"
	case Scratch:
		return "scratch"
	case Counters:
		return "counters"
	case AheadInPlace:
		return "ahead-in-place"
	}
	return fmt.Sprintf("ArgKind(%d)", k)
}

// Arg is one kernel parameter: always a device pointer.
type Arg struct {
	Kind  ArgKind
	Index int // Operand: index into Kernel.Ins; Scratch: index into the ScratchBuf list
}

func (a Arg) String() string {
	switch a.Kind {
	case Operand, Scratch:
		return fmt.Sprintf("%v%d", a.Kind, a.Index)
	}
	return a.Kind.String()
}

// Launch is one kernel launch of a planned step.
type Launch struct {
	// Name is the entry point (extern "C") in Code.
	Name string
	// Code is the complete translation unit (codegen.PreludeFor + the kernel).
	// Launches of one step may share one Code (one compile, several entries).
	Code      string
	Grid      [3]uint32
	Block     [3]uint32
	SharedMem uint32 // dynamic shared memory: always 0 (kernels use static shared memory)
	// Args are the kernel's parameters in order, each a device pointer.
	Args []Arg
	// CopyOnly marks a launch that only copies operand Args[0] (read whole
	// through an identity layout) into the output Args[1]: an executor
	// skips it when the two are one memory (plan.InPlace, exec.Donate).
	CopyOnly bool
}

// ScratchBuf is a device buffer a step needs for its duration only. Its
// contents on entry do not matter; it must be aligned to 16 bytes (any
// allocator's alignment is).
type ScratchBuf struct {
	Bytes int64
}

// ErrorFlagWords is the number of int64 words of the error flag.
const ErrorFlagWords = 4

// blockSize is the block of the one-thread-per-element kernels.
const blockSize = 256

// maxGrid caps grids; kernels loop (grid stride) over what remains. AMD
// counts a grid in work-items, a 32-bit number: maxGrid·1024 < 2^32.
const maxGrid = 1 << 20

// Plan returns the launches that compute the indexing kernel k (or the
// window kernel: a pool or an upsampling, see HasWindowKernel) on target t,
// in order, and the scratch buffers they use. A kernel with an empty output
// needs no launch (nil, nil, nil). Launches that take ErrorFlag check ids;
// after the step the executor reads the flag and, if words[0] != 0, fails
// the step with DecodeError.
func Plan(k *plan.Kernel, t codegen.Target) ([]Launch, []ScratchBuf, error) {
	t, err := checkTarget(t)
	if err != nil {
		return nil, nil, err
	}
	if k != nil && k.IsFusedWindow() {
		if !HasWindowKernel(k) {
			return nil, nil, fmt.Errorf("kernels: kernel %s: no kernel for its %s", k.Name, k.WindowNode().Op)
		}
		if k.Out == nil || k.Out.Numel() == 0 {
			return nil, nil, nil
		}
		p, err := planFusedWindow(k)
		if err != nil {
			return nil, nil, fmt.Errorf("kernels: kernel %s: %w", k.Name, err)
		}
		return p.finish(t)
	}
	if k == nil || len(k.Instrs) != 1 || k.Instrs[0].Node == nil {
		return nil, nil, fmt.Errorf("kernels: want a kernel of exactly one indexing instruction")
	}
	n := k.Instrs[0].Node
	if n.Info().Class != ir.ClassIndex && !HasWindowKernel(k) {
		return nil, nil, fmt.Errorf("kernels: kernel %s: op %s is neither an indexing op nor a window op with a kernel here", k.Name, n.Op)
	}
	ops, err := operands(k)
	if err != nil {
		return nil, nil, fmt.Errorf("kernels: kernel %s (%s): %w", k.Name, n.Op, err)
	}
	if k.Out.Numel() == 0 {
		return nil, nil, nil
	}
	var p *planned
	switch n.Op {
	case ir.OpIndexSelect, ir.OpGather:
		p, err = planSelect(n, ops)
	case ir.OpScatter, ir.OpScatterAdd, ir.OpIndexAdd:
		p, err = planScatter(n, ops)
	case ir.OpCat:
		p, err = planCat(n, ops)
	case ir.OpSliceAssign:
		p, err = planSliceAssign(n, ops)
	case ir.OpArgsort:
		p, err = planArgsort(n, ops)
	case ir.OpMaxPool, ir.OpAvgPool, ir.OpUpsampleNearest, ir.OpUpsampleBilinear:
		p, err = planWindow(n, ops, nil)
	case ir.OpCumsum:
		p, err = planCumsum(n, ops) // scan.go
	case ir.OpAttention:
		p, err = planAttention(k, n, ops, t) // attention.go
	default:
		err = fmt.Errorf("no kernel for op %s", n.Op)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kernels: kernel %s (%s): %w", k.Name, n.Op, err)
	}
	return p.finish(t)
}

// DecodeError turns an error flag read back after a step into the error the
// CPU executor reports for the same bad id, or nil when words[0] is 0.
// The flag protocol: the first thread to meet a bad id sets words[0] with
// atomicCAS(0 → the ids dtype's sentinel, which is never 0) and then writes
// words[1] = the id, words[2] = its position (flat index into the ids
// tensor), words[3] = the size of the indexed dim.
func DecodeError(op string, words [4]int64) error {
	if words[0] == 0 {
		return nil
	}
	return fmt.Errorf("%s: id %d at position %d is out of range [0, %d) (the sentinel %d is the only id allowed outside it)",
		op, words[1], words[2], words[3], uint64(words[0]))
}

func checkTarget(t codegen.Target) (codegen.Target, error) {
	switch t.Platform {
	case codegen.AMD, codegen.NVIDIA:
	default:
		return t, fmt.Errorf("kernels: unknown platform %q (want %q or %q)", t.Platform, codegen.AMD, codegen.NVIDIA)
	}
	if t.WaveSize != 0 && t.WaveSize != 32 && t.WaveSize != 64 {
		return t, fmt.Errorf("kernels: wave size %d (want 32 or 64)", t.WaveSize)
	}
	return t, nil
}

// operand is one instruction argument: its buffer and layout.
type operand struct {
	in  int // index into Kernel.Ins
	dt  dtype.DType
	l   ir.Layout
	out *plan.Buffer // for the output pseudo-operand only
}

// operands resolves the instruction's args to Kernel.Ins and checks that
// the kernel is consistent: layouts match the args' shapes, never reach
// outside their buffers, and the output is the node's shape and dtype.
func operands(k *plan.Kernel) ([]operand, error) {
	in := k.Instrs[0]
	n := in.Node
	if k.Out == nil {
		return nil, fmt.Errorf("no output buffer")
	}
	if k.Out.DType != n.DType || k.Out.Numel() != n.Numel() {
		return nil, fmt.Errorf("output buffer %v does not hold %v%v", k.Out, n.DType, n.Shape)
	}
	if len(in.Args) != len(n.Args) {
		return nil, fmt.Errorf("%d instruction args for %d node args", len(in.Args), len(n.Args))
	}
	if want := n.Info().Arity; want >= 0 && len(n.Args) != want {
		return nil, fmt.Errorf("%d args, want %d", len(n.Args), want)
	}
	if len(n.Params) < len(n.Info().Params) {
		return nil, fmt.Errorf("params %v, want %v", n.Params, n.Info().Params)
	}
	var ops []operand
	for j, r := range in.Args {
		if !r.Operand || r.Index < 0 || r.Index >= len(k.Ins) {
			return nil, fmt.Errorf("arg %d (%v) is not an operand", j, r)
		}
		o := k.Ins[r.Index]
		a := n.Args[j]
		if o.Buf == nil || o.Buf.DType != a.DType {
			return nil, fmt.Errorf("arg %d: operand buffer %v is not %v", j, o.Buf, a.DType)
		}
		l := o.Layout
		if !slices.Equal(l.Dims, a.Shape) || len(l.Strides) != len(l.Dims) {
			return nil, fmt.Errorf("arg %d: layout %v, arg shape %v", j, l, a.Shape)
		}
		if l.Offset < 0 || slices.ContainsFunc(l.Strides, func(s int) bool { return s < 0 }) {
			return nil, fmt.Errorf("arg %d: negative stride or offset in %v", j, l)
		}
		if _, hi := l.Span(); l.Numel() > 0 && hi > o.Buf.Numel() {
			return nil, fmt.Errorf("arg %d: layout %v reads past its buffer %v", j, l, o.Buf)
		}
		ops = append(ops, operand{in: r.Index, dt: a.DType, l: l})
	}
	return ops, nil
}

// planned is a step's kernels before the source is finished: the body
// (config and entries, with namePlaceholder for the kernel name) and its
// launches (Name holds the entry's suffix).
type planned struct {
	base    string // name stem, e.g. "index_select_f32_u32"
	config  string // configuration text (macros, address functions)
	body    string // embedded kernel text
	entries string // extern "C" entry points
	launch  []Launch
	scratch []ScratchBuf
}

const namePlaceholder = "LOOM_KERNEL_NAME"

// operandParams is the parameter list a fused kernel's entry takes after
// its own: ", const T* __restrict__ inI" for each operand of k, in k.Ins
// order, T its storage type (the pointers the epilogue's function reads).
func operandParams(k *plan.Kernel) string {
	var b strings.Builder
	for i, o := range k.Ins {
		fmt.Fprintf(&b, ", const %s* __restrict__ in%d", ctypes[o.Buf.DType].storage, i)
	}
	return b.String()
}

// fusedUnit completes the translation unit of a hand-written kernel fused
// with its chains: the prelude body needs for t, and the entry name stem
// + "_fused_" + a hash of the whole source (equal sources get equal names,
// and a changed epilogue a new one) put in place of namePlaceholder.
func fusedUnit(t codegen.Target, body, stem string) (name, code string) {
	prelude := codegen.PreludeFor(t, body)
	h := fnv.New64a()
	h.Write([]byte(prelude))
	h.Write([]byte(body))
	name = fmt.Sprintf("%s_fused_%08x", stem, uint32(h.Sum64()))
	return name, prelude + strings.ReplaceAll(body, namePlaceholder, name)
}

// finish assembles the source for t and names the entries: the name stem
// and a hash of the source, so equal sources get equal names.
func (p *planned) finish(t codegen.Target) ([]Launch, []ScratchBuf, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "\n// Loom %s kernels (%s) for %s/%s.\n", p.base, namePlaceholder, t.Platform, t.Arch)
	b.WriteString(p.config)
	b.WriteString(p.body)
	b.WriteString(p.entries)
	body := b.String()
	prelude := codegen.PreludeFor(t, body)
	h := fnv.New64a()
	h.Write([]byte(prelude))
	h.Write([]byte(body))
	name := fmt.Sprintf("loom_%s_%08x", p.base, uint32(h.Sum64()))
	code := prelude + strings.ReplaceAll(body, namePlaceholder, name)
	out := make([]Launch, len(p.launch))
	for i, l := range p.launch {
		l.Name = name + l.Name
		l.Code = code
		out[i] = l
	}
	return out, p.scratch, nil
}

// grid1 is a 1-D grid covering n threads in blocks of bs, capped at maxGrid
// (kernels loop over the rest).
func grid1(n int64, bs int) [3]uint32 {
	g := (n + int64(bs) - 1) / int64(bs)
	g = max(1, min(g, maxGrid))
	return [3]uint32{uint32(g), 1, 1}
}

// ctype describes a dtype in kernels: storage type, compute type, and the
// conversions between them (the CPU twin's: f16/bf16/f8e4m3 compute in
// float, widened on load and rounded once on store). Kernels that only move
// values (select, gather, scatter, cat, slice_assign) keep them in their
// storage type, one byte for f8e4m3, and pass each through canon.
type ctype struct {
	storage, compute string
	widen, narrow    string // function names, "" for none
}

var ctypes = map[dtype.DType]ctype{
	dtype.F32:  {"float", "float", "", ""},
	dtype.F64:  {"double", "double", "", ""},
	dtype.F16:  {"unsigned short", "float", "loom_f16_to_f32", "loom_f32_to_f16"},
	dtype.BF16: {"unsigned short", "float", "loom_bf16_to_f32", "loom_f32_to_bf16"},
	dtype.U8:   {"unsigned char", "unsigned int", "", ""},
	dtype.U32:  {"unsigned int", "unsigned int", "", ""},
	dtype.I64:  {"long long", "long long", "", ""},

	dtype.F8E4M3: {"unsigned char", "float", "loom_f8e4m3_to_f32", "loom_f32_to_f8e4m3"},
}

// isHalf reports a float stored narrower than float: its adds accumulate in
// float and round once at the end, like the CPU twin's.
func isHalf(d dtype.DType) bool { return d.IsReduced() }

// canon is the C expression that moves a stored value through the CPU
// twin's load and store: the identity, except that an f16/bf16/f8e4m3 NaN
// becomes the canonical NaN the twin produces.
func canon(d dtype.DType, e string) string {
	c := ctypes[d]
	if c.widen == "" {
		return e
	}
	return fmt.Sprintf("%s(%s(%s))", c.narrow, c.widen, e)
}

// config accumulates C configuration text.
type config struct {
	strings.Builder
	wide bool // 64-bit index math
}

func (c *config) line(format string, a ...any) {
	fmt.Fprintf(c, format, a...)
	c.WriteByte('\n')
}

// idxType is the C index type.
func (c *config) idxType() string {
	if c.wide {
		return "unsigned long long"
	}
	return "unsigned int"
}

// lit is an index constant.
func (c *config) lit(v int64) string {
	if c.wide {
		return fmt.Sprintf("%dull", v)
	}
	return fmt.Sprintf("%du", v)
}

// define writes #define name value for an index constant.
func (c *config) define(name string, v int64) { c.line("#define %s %s", name, c.lit(v)) }

// header writes the index type.
func (c *config) header() {
	c.line("typedef %s loom_idx;", c.idxType())
}

// needWide reports whether any size or address reaches 2^31.
func needWide(sizes ...int64) bool {
	for _, s := range sizes {
		if s >= 1<<31 {
			return true
		}
	}
	return false
}

// spans returns the numel and the span end of every operand, for needWide.
func spans(ops []operand, extra ...int64) []int64 {
	out := slices.Clone(extra)
	for _, o := range ops {
		_, hi := o.l.Span()
		out = append(out, int64(o.l.Numel()), int64(hi))
	}
	return out
}

// atFunc writes `loom_idx name(loom_idx i)`: the element offset of logical
// (row-major) flat index i of layout l.
func (c *config) atFunc(name string, l ir.Layout) {
	r := l.Merged()
	c.line("// %s: layout %v, reduced %v:%v+%d.", name, l, r.Dims, r.Strides, r.Offset)
	c.line("LOOM_DEV loom_idx %s(loom_idx i) {", name)
	switch len(r.Dims) {
	case 0:
		c.line("  (void)i;")
		c.line("  return %s;", c.lit(int64(r.Offset)))
	case 1:
		c.line("  return %s;", c.linear(int64(r.Offset), "i", int64(r.Strides[0])))
	default:
		c.line("  loom_idx a = %s;", c.lit(int64(r.Offset)))
		for d := len(r.Dims) - 1; d > 0; d-- {
			if s := r.Strides[d]; s != 0 {
				c.line("  a += (i %% %s) * %s;", c.lit(int64(r.Dims[d])), c.lit(int64(s)))
			}
			c.line("  i /= %s;", c.lit(int64(r.Dims[d])))
		}
		if s := r.Strides[0]; s != 0 {
			c.line("  a += i * %s;", c.lit(int64(s)))
		}
		c.line("  return a;")
	}
	c.line("}")
}

// linear formats off + x·stride.
func (c *config) linear(off int64, x string, stride int64) string {
	switch {
	case stride == 0:
		return c.lit(off)
	case off == 0 && stride == 1:
		return x
	case off == 0:
		return fmt.Sprintf("%s * %s", x, c.lit(stride))
	case stride == 1:
		return fmt.Sprintf("%s + %s", x, c.lit(off))
	}
	return fmt.Sprintf("%s + %s * %s", c.lit(off), x, c.lit(stride))
}

// valueMacros defines the value type macros of dtype d with prefix p:
// p_T (storage), p_C (compute), p_CANON(x).
func (c *config) valueMacros(p string, d dtype.DType) {
	ct := ctypes[d]
	c.line("typedef %s %s_T;", ct.storage, p)
	c.line("typedef %s %s_C;", ct.compute, p)
	c.line("#define %s_CANON(x) %s", p, canon(d, "(x)"))
}

// split returns the sizes before, at and after dim.
func split(shape []int, dim int) (left, mid, right int64) {
	return int64(ir.Numel(shape[:dim])), int64(shape[dim]), int64(ir.Numel(shape[dim+1:]))
}

// dimParam validates and returns Params[0] as a dim of shape.
func dimParam(n *ir.Node, shape []int) (int, error) {
	d := int(n.Params[0])
	if float64(d) != n.Params[0] || d < 0 || d >= len(shape) {
		return 0, fmt.Errorf("dim %v out of range for shape %v", n.Params[0], shape)
	}
	return d, nil
}

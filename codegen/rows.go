package codegen

// Row kernels: the entry point (Rows), the tuning options and the types
// the generator shares across its files. The generator is split by
// concern: rows_plan.go analyses a kernel and makes every structural
// decision (passes, chunk width, thread mapping, two stages, register
// cache); rows_render.go writes the source from those decisions;
// rows_reduce.go holds what differs per reduction op; rows_split.go what
// exists only for two-stage reductions. Analysis finishes before any text
// is written, so the renderer reads rowGen and only makes local choices
// (unroll pragmas, guards).

import (
	"fmt"
	"hash/fnv"
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
	// fewBlocks: a kernel whose rows would fill fewer blocks than this
	// gets wider groups (down to one chunk per thread), so that more
	// threads share the few rows. A decode step's rows are few and short
	// (a softmax of 32 rows of 1024, an RMS norm of one row of 2048):
	// with the bandwidth-tuned groups they filled 1–2 blocks of a GPU
	// with 100+ multiprocessors and took 6–18 µs where a load's latency
	// or two would do.
	fewBlocks int
}

var defaultRowOptions = rowOptions{vecsPerThread: 4, maxGroup: 1024, cacheWords: 64, splitRows: 512, splitBlock: 256, splitVecs: 8, fewBlocks: 64}

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

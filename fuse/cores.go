package fuse

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// fuseCores (the "core-fusion" pass, fusion only) puts pools, upsamplings,
// matmuls and convs — the cores — in one kernel with their elementwise
// neighbours (plan.CoreAt): the chain that computes a core's (first)
// input becomes its prologue, computed at every input element the core
// reads, and the chain that reads its output element for element becomes
// its epilogue. A conv's bias and ReLU followed by a max pool is then the
// conv and one kernel, and the pooled feature map is written once; a
// decode step's output and down projections add the residual as they
// write. Products take no prologue (below: every group of output rows
// would compute it again). silu(gate)·up joins the product that computes
// gate and up instead, as a pair epilogue, where the model interleaves
// the two weights' rows (model's pairedFusion): the epilogue reads the
// product's output in pairs (2j, 2j+1) through strided views, over half
// its last dim (plan.Kernel.PairEpilogue, pairReads), and a GPU product
// holds both values of a pair when it stores (LOOM_PAIR_EPILOGUE=0 keeps
// it a kernel of its own, for comparison). So does an interleaved rotary
// embedding of a product whose query and key rows the model interleaves
// per head (model's interleaveHalves), keeping every element: each pair
// stores both its rotated values (plan.Kernel.PairKeep;
// LOOM_ROPE_EPILOGUE=0 to compare). A quantized product (qmatmul) takes
// an epilogue the same way: a quantized model's decode step adds its 2
// residuals a layer as the one-row mat-vec stores (exec/rocm/quant.go),
// not in 2 launches of their own. So does a dequantization: the chain
// that reads the dequantized values element for element (a scale, a cast,
// an add) applies as the GPU's kernel stores them, and the dequantized
// tensor is never written (exec/rocm/fusedqmm.go).
//
// The prologue is recomputed for each read of an element (2.25 times for
// a 3×3 pool of stride 2, four times for a ×2 upsampling, once per group
// of output rows for a skinny product): that trades a write and a read of
// the whole input, and a launch, for arithmetic, which memory-bound kernels
// have to spare. Executors that cannot recompute (the CPU; a GEMM library)
// run the three parts one after the other (plan.SplitFused), as unfused.
//
// A conv takes an epilogue only: the GPU's channels-last library path
// applies it as it transposes the conv's output back to NCHW, so a conv's
// bias and ReLU cost no pass of their own (exec/rocm/conv.go); elsewhere
// the parts run one after the other.
//
// A prologue joins only when its value is read by the core alone and
// straight (not an output, no view); an epilogue only when it is one plain
// elementwise kernel over the core's output that reads the core's value
// directly and is the only reader of it. Either way the kernel keeps at most
// MaxKernelInputs operands. Every refusal is logged with its reason.
func fuseCores(s *State) error {
	g := s.Graph
	consumers := g.Consumers()
	outputs := map[*ir.Node]bool{}
	for _, o := range g.Outputs {
		outputs[stored(o.Node)] = true
	}
	rootOf := map[*ir.Node]*Group{}
	groupsOf := map[*ir.Node][]*Group{}
	for _, gr := range s.Groups {
		rootOf[gr.Root] = gr
		for _, m := range gr.Members {
			groupsOf[m] = append(groupsOf[m], gr)
		}
	}
	// readers lists the nodes reading n, through views, with whether each
	// read is direct (n itself, or a reshape the kernel reads in place).
	type read struct {
		node   *ir.Node
		direct bool
	}
	readers := func(n *ir.Node) []read {
		var rs []read
		for _, c := range consumers[n.ID] {
			if c.Op == ir.OpView {
				for _, cc := range consumers[c.ID] {
					rs = append(rs, read{cc, inlineView(c)})
				}
				continue
			}
			rs = append(rs, read{c, true})
		}
		return rs
	}
	removed := map[*Group]bool{}
	for _, wg := range s.Groups {
		wn := wg.Root
		if len(wg.Members) != 1 || !plan.IsFusionCore(wn) {
			continue
		}
		pg := rootOf[wn.Args[0]]
		if pg == nil {
			continue // an input, or a view of a stored value: nothing to fuse
		}
		why := ""
		switch rs := readers(pg.Root); {
		case wn.Op == ir.OpMatmul || wn.Op == ir.OpQMatmul:
			// Every group of output rows of a product reads the whole
			// input: a decode step's down projection recomputing
			// silu(gate)·up per row took 41 µs instead of 13 + 5 (H200).
			// A quantized product quantizes its input first (to 8 bits,
			// once per block on the GPU).
			//
			// Nor does an RMSNorm join the product after it. Tried
			// (session 38, branch wip/rowpre): each block of the skinny
			// product or the one-row quantized mat-vec summed x² over the
			// row and wrote the normalized row into its shared memory
			// (runs of 8 a thread, one wave of blocks), then ran the
			// product from there — 33 launches fewer in a 1B decode step
			// (173 → 140). Slower on the H200 (TestGPUSpeed1B, alternating
			// in one call): bf16 median step 1.000 ms against 0.943, Q4_K
			// 0.694 against 0.677–0.679. Under programmatic dependent
			// launch the product's blocks already wait resident while the
			// RMSNorm runs, and start streaming weights the moment it
			// ends; inside the product, the norm delays every block's
			// first weight loads instead (an L2 prefetch of those rows
			// before it made bf16 slower still: 1.04 ms).
			why = "a product reads its input once per output row: computed once and stored"
		case wn.Op == ir.OpDequantize:
			why = "a dequantization reads raw blocks, which no elementwise kernel computes"
		case wn.Op == ir.OpConv || wn.Op == ir.OpConvTranspose:
			// A conv reads each input element once per tap, and the
			// vendor library reads arrays, not functions.
			why = "a conv reads its input once per tap of its kernel: computed once and stored"
		case outputs[pg.Root]:
			why = "it is a graph output"
		case len(rs) != 1:
			why = fmt.Sprintf("it has %d readers", len(rs))
		case pg.RowAxes != 0 || !plainElementwise(pg.Members):
			why = "its kernel is not a plain elementwise kernel"
		case !slices.Equal(pg.Shape, wn.Args[0].Shape):
			why = fmt.Sprintf("its kernel's shape %v is not the input's %v", pg.Shape, wn.Args[0].Shape)
		case operandCount(append(slices.Clone(pg.Members), wn)) > MaxKernelInputs:
			why = fmt.Sprintf("the kernel would read more than %d operands", MaxKernelInputs)
		}
		if why != "" {
			s.Log.Add("core-fusion", wn.ID, "%s reads its input %%%d from memory: %s", wn.Op, pg.Root.ID, why)
			continue
		}
		s.Log.Add("core-fusion", wn.ID, "%s computes its input (%s) at every element it reads", wn.Op, opChain(pg.Members))
		wg.Members = append(slices.Clone(pg.Members), wn)
		removed[pg] = true
	}
	for _, wg := range s.Groups {
		wn := wg.Root
		if removed[wg] || !plan.IsFusionCore(wn) {
			continue
		}
		rs := readers(wn)
		if len(rs) == 0 {
			continue
		}
		var eg *Group
		why := ""
		pair, keep, keepDims := false, false, []int(nil)
		if pairEpilogues {
			pair, keep, keepDims = pairReads(wn, consumers[wn.ID])
		}
		for _, r := range rs {
			gs := groupsOf[r.node]
			switch {
			case !r.direct && !pair:
				why = fmt.Sprintf("%%%d reads it through a view", r.node.ID)
			case len(gs) != 1:
				why = fmt.Sprintf("%%%d is computed in %d kernels", r.node.ID, len(gs))
			case eg != nil && gs[0] != eg:
				why = "it is read by several kernels"
			default:
				eg = gs[0]
			}
			if why != "" {
				break
			}
		}
		if why == "" {
			switch {
			case outputs[wn]:
				why = "it is a graph output"
			case removed[eg]:
				why = "its reader's kernel is the prologue of another core"
			case eg.RowAxes != 0 || !plainElementwise(eg.Members):
				why = "its reader is not a plain elementwise kernel"
			case pair && !keep && !slices.Equal(eg.Shape, plan.PairShape(wn.Shape)):
				why = fmt.Sprintf("its reader's kernel shape %v is not the output's pairs %v", eg.Shape, plan.PairShape(wn.Shape))
			case keep && !slices.Equal(eg.Shape, keepDims):
				why = fmt.Sprintf("its reader's kernel shape %v is not the pairs' view %v", eg.Shape, keepDims)
			case !pair && !slices.Equal(eg.Shape, wn.Shape):
				why = fmt.Sprintf("its reader's kernel shape %v is not the output's %v", eg.Shape, wn.Shape)
			case slices.ContainsFunc(eg.Members, func(m *ir.Node) bool { return slices.Contains(wg.Members, m) }):
				why = "both sides compute a common value"
			case operandCount(append(slices.Clone(wg.Members), eg.Members...)) > MaxKernelInputs:
				why = fmt.Sprintf("the kernel would read more than %d operands", MaxKernelInputs)
			}
		}
		if why != "" {
			s.Log.Add("core-fusion", wn.ID, "%s stores its output: %s", wn.Op, why)
			continue
		}
		if pair {
			s.Log.Add("core-fusion", wn.ID, "%s applies %s to every pair of elements it writes", wn.Op, opChain(eg.Members))
			eg.PairEpilogue, eg.PairKeep = true, keep
		} else {
			s.Log.Add("core-fusion", wn.ID, "%s applies %s to every element it writes", wn.Op, opChain(eg.Members))
		}
		// The window's members first (its prologue and itself), then the
		// epilogue's in their order: every epilogue value is over the
		// output shape, so none is needed before the window.
		eg.Members = append(slices.Clone(wg.Members), eg.Members...)
		removed[wg] = true
	}
	s.Groups = slices.DeleteFunc(s.Groups, func(gr *Group) bool { return removed[gr] })
	return nil
}

// pairEpilogues is false where LOOM_PAIR_EPILOGUE=0: a product read in
// pairs stores its output, and the pairs' kernel runs on its own.
var pairEpilogues = os.Getenv("LOOM_PAIR_EPILOGUE") != "0"

// pairKeepEpilogues is false where LOOM_ROPE_EPILOGUE=0: a product read in
// pairs that keep every element (a rotary embedding) stores its output,
// and the rotation runs as a kernel of its own.
var pairKeepEpilogues = os.Getenv("LOOM_ROPE_EPILOGUE") != "0"

// pairReads reports whether a product's output is read only in pairs:
// every reader a view of its even or odd elements along the last dim
// (plan.PairLayout), as silu(gate)·up reads a product whose weight
// interleaves the gate and up rows. Such an epilogue joins the product
// with its last dim halved (plan.Kernel.PairEpilogue). Or (keep) every
// reader views the output reshaped to keepDims, whose last dim of 2 holds
// the pairs, with one member broadcast over that dim (plan.PairKeepLayout),
// as an interleaved rotary embedding reads it: the epilogue is over
// keepDims and each pair stores both its outputs (plan.Kernel.PairKeep).
func pairReads(wn *ir.Node, cs []*ir.Node) (pair, keep bool, keepDims []int) {
	n := len(wn.Shape)
	if (wn.Op != ir.OpMatmul && wn.Op != ir.OpQMatmul) || n == 0 || wn.Shape[n-1]%2 != 0 || len(cs) == 0 {
		return false, false, nil
	}
	// reads reports whether every reader views one member of each pair
	// over the epilogue shape that shape gives a view's dims.
	reads := func(keep bool, shape func(dims []int) []int) bool {
		for _, c := range cs {
			if c.Op != ir.OpView || c.Layout == nil || !plan.PairDomain(shape(c.Layout.Dims), wn.Shape, keep) ||
				plan.PairMember(*c.Layout, shape(c.Layout.Dims), wn.Shape, keep) == 0 {
				return false
			}
		}
		return true
	}
	if reads(false, func([]int) []int { return plan.PairShape(wn.Shape) }) {
		return true, false, nil
	}
	if !pairKeepEpilogues || cs[0].Layout == nil {
		return false, false, nil
	}
	keepDims = cs[0].Layout.Dims
	if !reads(true, func([]int) []int { return keepDims }) {
		return false, false, nil
	}
	return true, true, slices.Clone(keepDims)
}

// plainElementwise reports whether members are elementwise ops only (no
// reduction, no window).
func plainElementwise(members []*ir.Node) bool {
	for _, m := range members {
		if c := m.Info().Class; !fusable(m) || c == ir.ClassReduce {
			return false
		}
	}
	return true
}

// operandCount is the number of operands a kernel computing members reads:
// one per distinct (stored base, layout), as plan makes them.
func operandCount(members []*ir.Node) int {
	in := map[*ir.Node]bool{}
	for _, m := range members {
		in[m] = true
	}
	seen := map[string]bool{}
	for _, m := range members {
		for _, a := range m.Args {
			base, l := a.Base()
			if in[base] {
				continue
			}
			seen[fmt.Sprintf("%d %s", base.ID, l)] = true
		}
	}
	return len(seen)
}

// opChain names members' ops for the log, constants left out.
func opChain(members []*ir.Node) string {
	var ops []string
	for _, m := range members {
		if m.Op != ir.OpFull {
			ops = append(ops, m.Op.String())
		}
	}
	if len(ops) == 0 {
		return "constants"
	}
	return strings.Join(ops, " → ")
}

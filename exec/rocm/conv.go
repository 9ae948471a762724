package rocm

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
)

// Convolutions on the GPU (ir.OpConv, ir.OpConvTranspose). Two paths, the
// choice made once per step when it is prepared:
//
//   - the vendor library (cuDNN on NVIDIA; hip.OpenDNN): one call per
//     step, its algorithm picked by the library's heuristics with at most
//     dnnWorkspaceMax bytes of workspace, taken from the allocator for the
//     step. f32 is computed without TF32 unless the plan allows TF32. A
//     forward f16/bf16 conv may run channels-last (convChannelsLast: its
//     operands and output transposed through scratch) where that was
//     measured faster when the step was prepared.
//   - Loom's own kernels (kernels/conv.hip), always available and the only
//     path on AMD (MIOpen is not bound) or with LOOM_GPU_CONV=portable:
//     conv = im2col + one GEMM per group on the GEMM engine of matmul
//     steps (cuBLAS/rocBLAS, or the portable GEMM); conv_transpose = one
//     GEMM per group into columns + col2im (f32, f64), or a direct kernel
//     (f16, bf16, which accumulates in float and rounds once).
//
// Scratch bound: the portable path's columns take at most convScratch
// bytes a step — conv works through the batch in chunks of images (or,
// when one image's columns are larger, in chunks of output pixels);
// conv_transpose in chunks of images, at least one image's columns. The
// scratch comes from the caching allocator, so a conv that cannot get it
// fails with the allocator's out-of-memory error.

// ConvEnv set to "portable" makes executors run convolutions on Loom's own
// kernels even where the vendor library loads; "nchw" keeps the library's
// convs on NCHW arrays, "nhwc" takes the channels-last path wherever the
// library plans it (the faster of its legacy and graph-API plans), and
// "graph" the channels-last path through the graph API's plan only (tests
// use each to cover each path).
const ConvEnv = "LOOM_GPU_CONV"

const dnnWorkspaceMax = 1 << 30

// graphEngines is how many of the graph API's engines (hip.ConvDesc.
// GraphRank 0, 1, …) a channels-last conv times beside the legacy plan:
// for W12 in bf16 the heuristics' first ran the conv in 0.178 ms where
// PyTorch's choice, timed among several, took 0.170 (H200).
const graphEngines = 3

// convScratch is the portable path's column bound (a variable so tests can
// force the chunked loops with small sizes).
var convScratch int64 = 256 << 20

type dnnState struct {
	once sync.Once
	lib  hip.DNN // nil: none
	why  string
	mode string // ConvEnv's value when the library was opened
	epi  string // and ConvEpilogueEnv's (convbias.go)

	mu    sync.Mutex
	plans []hip.ConvPlan // closed with the executor
}

// dnn returns the executor's convolution library state, opening it on
// first use.
func (e *Executor) dnn() *dnnState {
	s := &e.dnnS
	s.once.Do(func() {
		s.mode, s.epi = os.Getenv(ConvEnv), os.Getenv(ConvEpilogueEnv)
		if s.mode == "portable" {
			s.why = ConvEnv + "=portable"
			return
		}
		lib, err := e.dev.OpenDNN(e.stream)
		if err != nil {
			s.why = err.Error()
			return
		}
		s.lib, s.why = lib, lib.Name()
	})
	return s
}

// ConvBackend says what runs conv steps on this executor.
func (e *Executor) ConvBackend() string {
	s := e.dnn()
	if s.lib != nil {
		return s.lib.Name() + " (portable im2col + GEMM where it refuses a conv)"
	}
	return fmt.Sprintf("portable im2col + GEMM on %s (no vendor convolution library: %s)", e.GEMMBackend(), s.why)
}

func (e *Executor) closeDNN() error {
	s := &e.dnnS
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for _, p := range s.plans {
		if err := p.Close(); err != nil && first == nil {
			first = err
		}
	}
	s.plans = nil
	if s.lib != nil {
		if err := s.lib.Close(); err != nil && first == nil {
			first = err
		}
		s.lib = nil
	}
	return first
}

// convKey keys a conv step's prepared form in plan.Kernel.Cache.
type convKey struct{}

// convStep is a conv kernel prepared for this executor.
type convStep struct {
	d          dtype.DType
	g          kernels.ConvGeom
	transposed bool
	tf32       bool
	dnn        hip.ConvPlan // nil: the portable kernels
	nhwc       bool         // dnn works channels-last (convChannelsLast)
	how        string
}

// desc is cs's library descriptor over NCHW arrays (gt: cs.d's GEMM type).
func (cs *convStep) desc(gt hip.GemmType) hip.ConvDesc {
	g := cs.g
	return hip.ConvDesc{Type: gt, Transposed: cs.transposed,
		N: g.N, C: g.C, H: g.H, W: g.W, K: g.CO, R: g.KH, S: g.KW, OutH: g.OH, OutW: g.OW,
		PadH: g.PH, PadW: g.PW, StrideH: g.SH, StrideW: g.SW, DilH: g.DH, DilW: g.DW,
		Groups: g.G, TF32: cs.tf32, MaxWorkspace: dnnWorkspaceMax}
}

// convGeom maps a conv node onto the 2-D geometry the kernels and the
// library take (1-D: H = KH = 1).
func convGeom(n *ir.Node) kernels.ConvGeom {
	p, x, w, out := n.Conv(), n.Args[0].Shape, n.Args[1].Shape, n.Shape
	g := kernels.ConvGeom{N: x[0], C: x[1], CO: out[1], G: p.Groups, H: 1, KH: 1, OH: 1, SH: 1, DH: 1}
	if p.Rank == 1 {
		g.W, g.KW, g.OW = x[2], w[2], out[2]
		g.PW, g.SW, g.DW = p.Padding[0], p.Stride[0], p.Dilation[0]
		return g
	}
	g.H, g.W, g.KH, g.KW, g.OH, g.OW = x[2], x[3], w[2], w[3], out[2], out[3]
	g.PH, g.PW, g.SH, g.SW, g.DH, g.DW = p.Padding[0], p.Padding[1], p.Stride[0], p.Stride[1], p.Dilation[0], p.Dilation[1]
	return g
}

// prepareConv picks the step's path and makes it ready: the library's plan,
// or the portable kernels compiled and loaded (and the GEMM engine open).
func (e *Executor) prepareConv(k *plan.Kernel, tf32 bool) (*convStep, error) {
	if v, ok := k.Cache.Load(plan.KeyOf(e, convKey{})); ok {
		return v.(*convStep), nil
	}
	n := k.Instrs[0].Node
	cs := &convStep{d: n.DType, g: convGeom(n), transposed: n.Op == ir.OpConvTranspose, tf32: tf32}
	gt, err := gemmType(cs.d)
	if err != nil {
		return nil, err
	}
	g := cs.g
	empty := n.Numel() == 0 || g.C == 0
	var refused string
	// Transposed convs in f16/bf16 stay on Loom's direct kernel: cuDNN's
	// backward-data algorithms for halves were up to 3 ulps off the f32
	// accumulation Loom promises (stride 1, on cuDNN 9.14), even the
	// GEMM-like ones.
	halfT := cs.transposed && (cs.d == dtype.F16 || cs.d == dtype.BF16)
	if s := e.dnn(); s.lib != nil && !empty && !halfT {
		desc := cs.desc(gt)
		p, err := s.lib.Plan(desc)
		if err == nil {
			cs.dnn, cs.how = p, p.Algo()
			e.channelsLast(cs, desc, s.lib)
			s.mu.Lock()
			s.plans = append(s.plans, cs.dnn)
			s.mu.Unlock()
		} else {
			refused = err.Error()
		}
	}
	if cs.dnn == nil && !empty {
		if _, err := e.convFunction(kernels.ConvEntries()[0]); err != nil {
			return nil, err
		}
		cs.how = "portable: im2col + GEMM (" + e.GEMMBackend() + ")"
		if cs.transposed {
			cs.how = "portable: GEMM + col2im (" + e.GEMMBackend() + ")"
			if cs.d == dtype.F16 || cs.d == dtype.BF16 {
				cs.how = "portable: direct transposed conv"
			}
		}
		if refused != "" {
			cs.how += "; the library refused: " + refused
		} else if halfT && e.dnn().lib != nil {
			cs.how += " (not the library: its f16/bf16 transposed convs are not accumulated in f32)"
		}
		if st := e.gemm(); st.vendor == nil {
			// The portable GEMM compiles once for every call.
			if _, err := e.gemmFunction(kernels.GemmEntries()[0]); err != nil {
				return nil, err
			}
		}
	}
	v, _ := k.Cache.LoadOrStore(plan.KeyOf(e, convKey{}), cs)
	return v.(*convStep), nil
}

// convFunction compiles (once per process, through the code cache) and
// loads (once per executor) the portable conv kernels.
func (e *Executor) convFunction(name string) (hip.Function, error) {
	return e.libFunction("loom_conv", kernels.ConvSource, name)
}

// runConv queues a conv step.
func (e *Executor) runConv(k *plan.Kernel, mem []exec.Memory) error {
	cs, err := e.prepareConv(k, false)
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	size := int64(cs.d.Size())
	ptr := func(b *plan.Buffer, off int, n int) (hip.DevPtr, error) { return e.span(mem, b, int(size), off, n) }
	n := k.Instrs[0].Node
	if n.Numel() == 0 {
		return nil
	}
	out, err := ptr(k.Out, 0, n.Numel())
	if err != nil {
		return fmt.Errorf("rocm: %s output: %w", k.Name, err)
	}
	g := cs.g
	if g.C == 0 { // no input channels: every output is an empty sum
		e.launchMu.Lock()
		defer e.launchMu.Unlock()
		return e.dev.MemsetD8(out, 0, uint64(int64(n.Numel())*size), e.stream)
	}
	x, w, err := e.convOperands(k, mem)
	if err != nil {
		return fmt.Errorf("rocm: %s %w", k.Name, err)
	}
	if cs.dnn != nil && cs.nhwc {
		if err := e.convChannelsLast(cs, x, w, out, nil, nil); err != nil {
			return fmt.Errorf("rocm: %s (%s): %w", k.Name, cs.how, err)
		}
		return nil
	}
	if cs.dnn != nil {
		if err := e.convLibrary(cs.dnn, x, w, out); err != nil {
			return fmt.Errorf("rocm: %s (%s): %w", k.Name, cs.how, err)
		}
		return nil
	}
	if cs.transposed {
		err = e.convTransposePortable(cs, x, w, out)
	} else {
		err = e.convPortable(cs, x, w, out)
	}
	if err != nil {
		return fmt.Errorf("rocm: %s (%s): %w", k.Name, cs.how, err)
	}
	return nil
}

// convOperands returns where conv step k's input and weight start (packed
// arrays at their offsets, as fuse hands window ops).
func (e *Executor) convOperands(k *plan.Kernel, mem []exec.Memory) (x, w hip.DevPtr, err error) {
	n := k.Instrs[0].Node
	size := n.DType.Size()
	if x, err = e.span(mem, k.Ins[0].Buf, size, k.Ins[0].Layout.Offset, n.Args[0].Numel()); err != nil {
		return 0, 0, fmt.Errorf("input: %w", err)
	}
	if w, err = e.span(mem, k.Ins[1].Buf, size, k.Ins[1].Layout.Offset, n.Args[1].Numel()); err != nil {
		return 0, 0, fmt.Errorf("weight: %w", err)
	}
	return x, w, nil
}

// launchFlat queues a grid-stride conv kernel over n elements.
func (e *Executor) launchFlat(name string, n int64, args *hip.Args) error {
	grid, blk := kernels.FlatLaunch(int(n))
	return e.launchGrid(name, [2][3]uint32{grid, blk}, args)
}

// launchGrid launches a conv kernel on a given grid and block.
func (e *Executor) launchGrid(name string, gb [2][3]uint32, args *hip.Args) error {
	fn, err := e.convFunction(name)
	if err != nil {
		return err
	}
	grid, blk := gb[0], gb[1]
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := e.launchDep(fn, grid, blk, 0, args); err != nil {
		return fmt.Errorf("launch %s (grid %v): %w", name, grid, err)
	}
	e.launches.Add(1)
	return nil
}

// convPortable: per chunk of images (or of output pixels), im2col into the
// scratch, then per group out[n][g] = w[g] · cols[n][g], batched over the
// chunk's images.
func (e *Executor) convPortable(cs *convStep, x, w, out hip.DevPtr) error {
	g, size := cs.g, int64(cs.d.Size())
	ckk := int64(g.C * g.KH * g.KW)
	P := int64(g.OH * g.OW)
	nb, np := int64(g.N), P
	if per := ckk * P * size; per > convScratch {
		nb, np = 1, max(1, convScratch/(ckk*size))
	} else {
		nb = min(nb, max(1, convScratch/per))
	}
	cols, err := e.alloc.alloc(nb * ckk * np * size)
	if err != nil {
		return fmt.Errorf("im2col scratch: %w", err)
	}
	defer e.releaseScratch(cols)
	im2col, err := kernels.Im2colEntry(cs.d)
	if err != nil {
		return err
	}
	cog, ckkg := int64(g.CO/g.G), ckk/int64(g.G)
	for n0 := int64(0); n0 < int64(g.N); n0 += nb {
		b := min(nb, int64(g.N)-n0)
		for p0 := int64(0); p0 < P; p0 += np {
			m := min(np, P-p0)
			var a hip.Args
			a.Ptr(x).Ptr(cols.ptr).I64(n0).I64(b).I64(int64(g.C)).I64(int64(g.H)).I64(int64(g.W))
			a.I32(int32(g.KH)).I32(int32(g.KW)).I32(int32(g.PH)).I32(int32(g.PW)).I32(int32(g.SH)).I32(int32(g.SW)).I32(int32(g.DH)).I32(int32(g.DW))
			a.I64(int64(g.OW)).I64(p0).I64(m)
			if err := e.launchGrid(im2col, kernels.Im2colLaunch(b*ckk, m), &a); err != nil {
				return err
			}
			for gr := int64(0); gr < int64(g.G); gr++ {
				c := blas.Call{M: int(cog), N: int(m), K: int(ckkg), LDA: int(ckkg), LDB: int(m), LDC: int(P),
					StrideA: 0, StrideB: int(ckk * m), StrideC: int(int64(g.CO) * P), Batch: int(b), Alpha: 1}
				aw := w + hip.DevPtr(gr*cog*ckkg*size)
				bc := cols.ptr + hip.DevPtr(gr*ckkg*m*size)
				co := out + hip.DevPtr(((n0*int64(g.CO)+gr*cog)*P+p0)*size)
				if err := e.runGemm(cs.d, c, aw, bc, co, cs.tf32, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// convTransposePortable: f16/bf16 run the direct kernel; f32/f64 per chunk
// of images compute the columns cols[n][g] = w[g]ᵀ · x[n][g] with one GEMM
// per group, then col2im gathers them into the output.
func (e *Executor) convTransposePortable(cs *convStep, x, w, out hip.DevPtr) error {
	g, size := cs.g, int64(cs.d.Size())
	if cs.d == dtype.F16 || cs.d == dtype.BF16 {
		name, err := kernels.ConvTDirectEntry(cs.d)
		if err != nil {
			return err
		}
		var a hip.Args
		a.Ptr(x).Ptr(w).Ptr(out).I64(int64(g.N)).I64(int64(g.C)).I64(int64(g.H)).I64(int64(g.W)).I64(int64(g.CO))
		a.I32(int32(g.G)).I32(int32(g.KH)).I32(int32(g.KW)).I32(int32(g.PH)).I32(int32(g.PW)).I32(int32(g.SH)).I32(int32(g.SW)).I32(int32(g.DH)).I32(int32(g.DW))
		a.I64(int64(g.OH)).I64(int64(g.OW))
		return e.launchFlat(name, int64(g.N*g.CO*g.OH*g.OW), &a)
	}
	col2im, err := kernels.Col2imEntry(cs.d)
	if err != nil {
		return err
	}
	kk, hw := int64(g.KH*g.KW), int64(g.H*g.W)
	cig, cog := int64(g.C/g.G), int64(g.CO/g.G)
	per := int64(g.CO) * kk * hw * size
	nb := min(int64(g.N), max(1, convScratch/per))
	cols, err := e.alloc.alloc(nb * per)
	if err != nil {
		return fmt.Errorf("col2im scratch: %w", err)
	}
	defer e.releaseScratch(cols)
	for n0 := int64(0); n0 < int64(g.N); n0 += nb {
		b := min(nb, int64(g.N)-n0)
		for gr := int64(0); gr < int64(g.G); gr++ {
			c := blas.Call{M: int(cog * kk), N: int(hw), K: int(cig), TransA: true, LDA: int(cog * kk), LDB: int(hw), LDC: int(hw),
				StrideA: 0, StrideB: int(int64(g.C) * hw), StrideC: int(int64(g.CO) * kk * hw), Batch: int(b), Alpha: 1}
			aw := w + hip.DevPtr(gr*cig*cog*kk*size)
			bx := x + hip.DevPtr((n0*int64(g.C)+gr*cig)*hw*size)
			cc := cols.ptr + hip.DevPtr(gr*cog*kk*hw*size)
			if err := e.runGemm(cs.d, c, aw, bx, cc, cs.tf32, false); err != nil {
				return err
			}
		}
		var a hip.Args
		a.Ptr(cols.ptr).Ptr(out).I64(n0).I64(b).I64(int64(g.CO)).I64(int64(g.H)).I64(int64(g.W))
		a.I32(int32(g.KH)).I32(int32(g.KW)).I32(int32(g.PH)).I32(int32(g.PW)).I32(int32(g.SH)).I32(int32(g.SW)).I32(int32(g.DH)).I32(int32(g.DW))
		a.I64(int64(g.OH)).I64(int64(g.OW))
		if err := e.launchFlat(col2im, b*int64(g.CO*g.OH*g.OW), &a); err != nil {
			return err
		}
	}
	return nil
}

// The channels-last path. cuDNN's half-precision tensor-core convolutions
// work on NHWC arrays; given NCHW ones it converts them itself, and W12 in
// bf16 took 0.26 ms where PyTorch's channels-last conv takes 0.17. So a
// forward f16/bf16 conv on the library may run over channels-last copies
// of its operands: the input and the weight are transposed into scratch
// (kernels.TransposeEntries), the library convolves them into a
// channels-last output in scratch, and that is transposed into the
// step's NCHW output. The channels-last conv is planned twice over: by
// the legacy API (its best algorithm) and by the graph API (its first
// graphEngines engines), and the fastest is kept. The path is taken where
// a run of it, transposes included, is faster than a run over NCHW
// arrays, all timed once when
// the step is prepared (timeLayouts). Its scratch — the
// three channels-last arrays — is at most dnnWorkspaceMax bytes besides
// the library's workspace; a larger conv stays on NCHW arrays.

// chlBytes is the size of one channels-last array in the scratch, rounded
// up to 256 bytes so that each starts aligned for the library's loads.
func chlBytes(n int64) int64 { return (n*2 + 255) &^ 255 }

// chlMove is one transpose of the channels-last path: b matrices of r × c
// elements, each moved to c × r.
type chlMove struct {
	b    int64
	r, c int
}

// chlMoves returns the path's three moves for geometry g: the input
// [N][C][H·W] → [N][H·W][C], the weight [K][C/G][R·S] → [K][R·S][C/G], and
// the output back, [N][OH·OW][K] → [N][K][OH·OW].
func chlMoves(g kernels.ConvGeom) (x, w, y chlMove) {
	return chlMove{int64(g.N), g.C, g.H * g.W}, chlMove{int64(g.CO), g.C / g.G, g.KH * g.KW}, chlMove{int64(g.N), g.OH * g.OW, g.CO}
}

// numel is the number of elements a move reads (and writes).
func (m chlMove) numel() int64 { return m.b * int64(m.r) * int64(m.c) }

// chlScratchBytes is the scratch of the three channels-last arrays.
func chlScratchBytes(g kernels.ConvGeom) int64 {
	x, w, y := chlMoves(g)
	return chlBytes(x.numel()) + chlBytes(w.numel()) + chlBytes(y.numel())
}

// chlScratch allocates the three channels-last arrays of geometry g in one
// block (released by the caller with releaseScratch).
func (e *Executor) chlScratch(g kernels.ConvGeom) (buf *block, xs, ws, ys hip.DevPtr, err error) {
	x, w, _ := chlMoves(g)
	if buf, err = e.alloc.alloc(chlScratchBytes(g)); err != nil {
		return nil, 0, 0, 0, err
	}
	xs = buf.ptr
	ws = xs + hip.DevPtr(chlBytes(x.numel()))
	ys = ws + hip.DevPtr(chlBytes(w.numel()))
	return buf, xs, ws, ys, nil
}

// channelsLast decides whether library conv cs (planned over NCHW arrays
// from desc) runs channels-last instead, and if so replaces cs.dnn with
// the channels-last plan, and says why in cs.how either way. Only f16 and
// bf16 forward convs are considered.
func (e *Executor) channelsLast(cs *convStep, desc hip.ConvDesc, lib hip.DNN) {
	mode := e.dnn().mode
	if cs.transposed || (cs.d != dtype.F16 && cs.d != dtype.BF16) || mode == "nchw" {
		return
	}
	if chlScratchBytes(cs.g) > dnnWorkspaceMax {
		cs.how += " (not channels-last: its copies would take more than the scratch bound)"
		return
	}
	x, w, y := chlMoves(cs.g)
	for _, m := range []chlMove{x, w, y} {
		// Unaligned: single elements take the most tiles.
		if _, _, _, ok := kernels.TransposePlan(m.b, m.r, m.c, false, false); !ok {
			return
		}
	}
	desc.NHWC = true
	// The channels-last candidates: the legacy API's plan and the graph
	// API's (hip/dnn_graph.go), each where the library plans it.
	var cands []hip.ConvPlan
	var refused []string
	if mode != "graph" {
		if q, err := lib.Plan(desc); err == nil {
			cands = append(cands, q)
		} else {
			refused = append(refused, err.Error())
		}
	}
	for rank := range graphEngines {
		gd := desc
		gd.Graph, gd.GraphRank = true, rank
		q, err := lib.Plan(gd)
		if err != nil {
			if rank == 0 {
				refused = append(refused, err.Error())
			}
			break
		}
		cands = append(cands, q)
	}
	if len(cands) == 0 {
		cs.how += " (the library refused it channels-last: " + strings.Join(refused, "; ") + ")"
		return
	}
	closeAll := func(keep hip.ConvPlan) {
		for _, q := range cands {
			if q != keep {
				q.Close()
			}
		}
	}
	best, why := cands[0], "forced by "+ConvEnv+"="+mode
	if mode == "" || len(cands) > 1 {
		nchw, times, err := e.timeLayouts(cs, cands, mode == "")
		if err != nil {
			// No room to time it (or a failed run, which the step's own
			// run reports again): the conv stays on NCHW arrays.
			closeAll(nil)
			cs.how += " (channels-last not timed: " + err.Error() + ")"
			return
		}
		bi := 0
		var parts []string
		for i, t := range times {
			if t < times[bi] {
				bi = i
			}
			parts = append(parts, fmt.Sprintf("%s %.3f ms", cands[i].Algo(), t))
		}
		best = cands[bi]
		if mode == "" && times[bi] >= nchw {
			closeAll(nil)
			cs.how += fmt.Sprintf(" (NCHW arrays %.3f ms; channels-last with the transposes: %s)", nchw, strings.Join(parts, ", "))
			return
		}
		if mode == "" {
			why = fmt.Sprintf("%.3f ms with the transposes, against %.3f ms over NCHW arrays; channels-last: %s", times[bi], nchw, strings.Join(parts, ", "))
		} else {
			why += "; " + strings.Join(parts, ", ")
		}
	}
	closeAll(best)
	cs.dnn.Close()
	cs.dnn, cs.nhwc = best, true
	cs.how = best.Algo() + " (" + why + ")"
}

// timeLayouts times library conv cs over NCHW arrays (cs.dnn; only when
// nchw is set, else that time is +Inf) and channels-last through each of
// plans qs (with the transposes), on zeroed scratch arrays: the best of
// nine runs of each, in three alternating rounds after one run to warm up,
// in milliseconds of device time. (cuDNN's own measurements, cudnnFind*,
// are no guide here: they gave W12 in bf16 2.1–2.3 ms either way, against
// 0.26 ms measured around a run, and they leave out the transposes.)
func (e *Executor) timeLayouts(cs *convStep, qs []hip.ConvPlan, nchw bool) (tn float64, tq []float64, err error) {
	buf, x, w, y, err := e.chlScratch(cs.g)
	if err != nil {
		return 0, nil, fmt.Errorf("timing the conv's layouts: %w", err)
	}
	defer e.releaseScratch(buf)
	e.launchMu.Lock()
	err = e.dev.MemsetD8(x, 0, uint64(y-x), e.stream) // the input and the weight
	e.launchMu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	// The layouts' runs alternate, so that the device's clocks, still
	// rising after an idle spell, weigh on all alike.
	tn = math.Inf(1)
	tq = make([]float64, len(qs))
	for i := range tq {
		tq[i] = math.Inf(1)
	}
	for range 3 {
		if nchw {
			a, err := e.bestTime(func() error { return e.convLibrary(cs.dnn, x, w, y) })
			if err != nil {
				return 0, nil, err
			}
			tn = min(tn, a)
		}
		for i, q := range qs {
			chl := *cs
			chl.dnn, chl.nhwc = q, true
			b, err := e.bestTime(func() error { return e.convChannelsLast(&chl, x, w, y, nil, nil) })
			if err != nil {
				return 0, nil, err
			}
			tq[i] = min(tq[i], b)
		}
	}
	return tn, tq, nil
}

// bestTime runs f, which queues work on the stream, four times and returns
// the least device time of the last three, in milliseconds.
func (e *Executor) bestTime(f func() error) (float64, error) {
	var ev [2]hip.Event
	for i := range ev {
		var err error
		if ev[i], err = e.dev.NewEvent(); err != nil {
			return 0, err
		}
		defer e.dev.DestroyEvent(ev[i])
	}
	record := func(ev hip.Event) error {
		e.launchMu.Lock()
		defer e.launchMu.Unlock()
		return e.dev.Record(ev, e.stream)
	}
	best := math.Inf(1)
	for round := range 4 {
		if err := record(ev[0]); err != nil {
			return 0, err
		}
		if err := f(); err != nil {
			return 0, err
		}
		if err := record(ev[1]); err != nil {
			return 0, err
		}
		if err := e.dev.EventSynchronize(ev[1]); err != nil {
			return 0, err
		}
		ms, err := e.dev.ElapsedMs(ev[0], ev[1])
		if err != nil {
			return 0, err
		}
		if round > 0 {
			best = min(best, float64(ms))
		}
	}
	return best, nil
}

// transpose queues move m from in to out for 2-byte elements: on
// ConvSource's transposes, or with fused (not nil) on a fused conv's
// build of them, whose epilogue reads the operands extra.
// rev takes the tiles in reverse order (transpose.hip).
func (e *Executor) transpose(m chlMove, in, out hip.DevPtr, rev bool, fused *fusedTranspose, extra []hip.DevPtr) error {
	entry, _, _, _ := kernels.TransposePlan(m.b, m.r, m.c, in%4 == 0 && out%4 == 0, in%16 == 0 && out%16 == 0)
	return e.transposeWith(entry, m, in, out, rev, fused, extra)
}

// transposeWith is transpose on kernels.TransposeEntries[entry], which
// the caller has checked fits m and the arrays' alignment (tests run every
// entry).
func (e *Executor) transposeWith(entry int, m chlMove, in, out hip.DevPtr, rev bool, fused *fusedTranspose, extra []hip.DevPtr) error {
	gb, tilesC, ok := kernels.TransposeLaunch(entry, m.b, m.r, m.c)
	if !ok {
		return fmt.Errorf("transpose of %d × %d × %d elements does not fit a launch", m.b, m.r, m.c)
	}
	r := int32(0)
	if rev {
		r = 1
	}
	var a hip.Args
	a.Ptr(in).Ptr(out).I64(m.b).I32(int32(m.r)).I32(int32(m.c)).I32(int32(tilesC)).I32(r)
	if fused == nil {
		return e.launchGrid(kernels.TransposeEntries[entry], gb, &a)
	}
	for _, p := range extra {
		a.Ptr(p)
	}
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := e.launchDep(fused.fns[entry], gb[0], gb[1], 0, &a); err != nil {
		return fmt.Errorf("launch %s (grid %v): %w", fused.names[entry], gb[0], err)
	}
	e.launches.Add(1)
	return nil
}

// convChannelsLast queues a channels-last library conv: x and w
// transposed into scratch, the conv, its output transposed into out
// (through fused's epilogue when fused is not nil, its operands extra).
func (e *Executor) convChannelsLast(cs *convStep, x, w, out hip.DevPtr, fused *fusedTranspose, extra []hip.DevPtr) error {
	return e.chlRun(cs, x, w, out, func(xs, ws, ys hip.DevPtr) error { return e.convLibrary(cs.dnn, xs, ws, ys) }, fused, extra)
}

// chlRun is convChannelsLast with conv queuing the library conv of the
// channels-last arrays xs and ws into ys.
func (e *Executor) chlRun(cs *convStep, x, w, out hip.DevPtr, conv func(xs, ws, ys hip.DevPtr) error, fused *fusedTranspose, extra []hip.DevPtr) error {
	mx, mw, my := chlMoves(cs.g)
	buf, xs, ws, ys, err := e.chlScratch(cs.g)
	if err != nil {
		return fmt.Errorf("channels-last scratch: %w", err)
	}
	defer e.releaseScratch(buf)
	if err := e.transpose(mx, x, xs, e.chlRev&chlRevX != 0, nil, nil); err != nil {
		return err
	}
	if err := e.transpose(mw, w, ws, false, nil, nil); err != nil {
		return err
	}
	if err := conv(xs, ws, ys); err != nil {
		return err
	}
	return e.transpose(my, ys, out, e.chlRev&chlRevY != 0, fused, extra)
}

// Executor.chlRev: which of the channels-last path's transposes run in
// reverse order (transpose.hip), so that the conv reads first what the
// input's transpose wrote last, and the output's transpose reads first
// what the conv wrote last, while it is still in the L2 cache.
const (
	chlRevX = 1 << iota // the input's
	chlRevY             // the output's
)

// convLibrary queues library conv p over x and w into y, with its
// workspace from the allocator (stream-ordered: reused only by later work).
func (e *Executor) convLibrary(p hip.ConvPlan, x, w, y hip.DevPtr) error {
	return e.libraryRun(p, func(ws hip.DevPtr) error { return p.Run(x, w, y, ws) })
}

// libraryRun queues run, a run of library plan p, with p's workspace.
func (e *Executor) libraryRun(p hip.ConvPlan, run func(ws hip.DevPtr) error) error {
	var ws *block
	if need := p.Workspace(); need > 0 {
		var err error
		if ws, err = e.alloc.alloc(int64(need)); err != nil {
			return fmt.Errorf("workspace of %d bytes: %w", need, err)
		}
		defer e.releaseScratch(ws)
	}
	var wsp hip.DevPtr
	if ws != nil {
		wsp = ws.ptr
	}
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := run(wsp); err != nil {
		return err
	}
	e.launches.Add(1)
	return nil
}

// Fused conv kernels (plan.ConvAt: a conv with the elementwise chain that
// reads its output; fuse gives convs no prologue). On the channels-last
// path the epilogue runs in the transpose of the conv's output back to
// NCHW (kernels.TransposeFused): conv + bias + ReLU + residual is the
// conv's own launches, with no pass of its own for the epilogue. Anything
// else — NCHW arrays, the portable kernels, an empty conv — runs the parts
// (exec.RunFusedParts): the conv, then the epilogue's kernel, as unfused.

// fusedConvKey keys a fused conv's compiled transposes in plan.Kernel.Cache.
type fusedConvKey struct{}

// fusedTranspose is a fused conv's output transposes, compiled and loaded,
// in the order of kernels.TransposeEntries.
type fusedTranspose struct {
	names []string
	fns   []hip.Function
}

// prepareFusedConv readies a fused conv: its conv step (the layout chosen
// by measuring), and the fused transposes where it runs channels-last,
// else the epilogue's kernel.
func (e *Executor) prepareFusedConv(k *plan.Kernel, buffers int, tf32 bool) error {
	parts, err := exec.FusedParts(k, buffers)
	if err != nil {
		return err
	}
	cs, err := e.prepareConv(parts.Core, tf32)
	if err != nil {
		return err
	}
	if cs.nhwc && parts.Pre == nil && parts.Post != nil {
		ft, err := e.fusedTransposes(k, parts)
		if err == nil && k.Instrs[k.ConvAt()].Node.Numel() > 0 && cs.g.C > 0 {
			e.convBiasOf(k, parts, cs, ft)
		}
		return err
	}
	for _, p := range []*plan.Kernel{parts.Pre, parts.Post} {
		if p != nil {
			if _, err := e.prepare(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// fusedTransposes compiles (once per process, through the code cache) and
// loads (once per kernel and executor) fused conv k's output transposes.
func (e *Executor) fusedTransposes(k *plan.Kernel, parts *plan.FusedParts) (*fusedTranspose, error) {
	key := plan.KeyOf(e, fusedConvKey{})
	if v, ok := k.Cache.Load(key); ok {
		return v.(*fusedTranspose), nil
	}
	names, code, err := kernels.TransposeFused(e.target, k, parts)
	if err != nil {
		return nil, err
	}
	ft := &fusedTranspose{names: names, fns: make([]hip.Function, len(names))}
	for i, name := range names {
		obj, _, err := e.codes.get(e.comp, CacheDir(), code, name, e.info.Arch, e.opts)
		if err != nil {
			return nil, err
		}
		if ft.fns[i], err = e.function(obj, name); err != nil {
			return nil, err
		}
	}
	v, _ := k.Cache.LoadOrStore(key, ft)
	return v.(*fusedTranspose), nil
}

// runFusedConv queues a fused conv: channels-last with the epilogue in the
// output's transpose, or the parts.
func (e *Executor) runFusedConv(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	parts, err := exec.FusedParts(k, len(mem))
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	core := parts.Core
	cs, err := e.prepareConv(core, false)
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	n := core.Instrs[0].Node
	if !cs.nhwc || parts.Pre != nil || parts.Post == nil || n.Numel() == 0 || cs.g.C == 0 {
		return exec.RunFusedParts(ctx, partRunner{e}, k, mem)
	}
	ft, err := e.fusedTransposes(k, parts)
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	x, w, err := e.convOperands(core, mem)
	if err != nil {
		return fmt.Errorf("rocm: %s %w", k.Name, err)
	}
	out, err := e.span(mem, k.Out, k.Out.DType.Size(), 0, k.Out.Numel())
	if err != nil {
		return fmt.Errorf("rocm: %s output: %w", k.Name, err)
	}
	if cb := e.convBiasOf(k, parts, cs, ft); cb.plan != nil {
		var b hip.DevPtr
		if cb.bias >= 0 {
			op := k.Ins[cb.bias]
			if b, err = e.span(mem, op.Buf, op.Buf.DType.Size(), op.Layout.Offset, cs.g.CO); err != nil {
				return fmt.Errorf("rocm: %s bias: %w", k.Name, err)
			}
		}
		if err := e.convChannelsLastBias(cs, cb.plan, x, w, b, out); err != nil {
			return fmt.Errorf("rocm: %s (%s, %s): %w", k.Name, cs.how, cb.how, err)
		}
		return nil
	}
	extra, err := e.operandBases(k, mem)
	if err != nil {
		return fmt.Errorf("rocm: %s %w", k.Name, err)
	}
	if err := e.convChannelsLast(cs, x, w, out, ft, extra); err != nil {
		return fmt.Errorf("rocm: %s (%s, epilogue in the output's transpose): %w", k.Name, cs.how, err)
	}
	return nil
}

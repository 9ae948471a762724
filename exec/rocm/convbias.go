package rocm

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// The library's conv epilogue. A fused conv whose epilogue is a bias of
// one value an output channel, a ReLU, or the bias then the ReLU, all in
// the conv's own type, can have cuDNN apply them inside the conv
// (hip.ConvDesc.Bias and ReLU: the graph API's pointwise ops, fused into
// the conv kernel's epilogue), so that the output's transpose back to NCHW
// is the plain one. Loom's own epilogue in that transpose costs its bf16
// roundings, done in software: W12 with bias + ReLU in bf16 took 0.2238 ms
// against 0.2117 for the plain conv on an H200. The library rounds once,
// after the ReLU (Loom rounds the conv's output and the biased sum each to
// the conv's type), so the two epilogues may differ by an ulp of the
// output: both are within the conv's accuracy. When the fused conv is
// prepared on the channels-last path, the library's plans (the graph
// API's first graphEngines engines for the fused graph) and Loom's
// epilogue are run and timed on zeroed scratch, and the fastest is kept.
// ConvEpilogueEnv forces either.

// ConvEpilogueEnv names the environment variable that forces a fused
// conv's epilogue on the channels-last path: "loom" in the output's
// transpose, "library" in the library's conv wherever it plans one.
const ConvEpilogueEnv = "LOOM_GPU_CONV_EPILOGUE"

// convBiasKey keys a fused conv's convBias in plan.Kernel.Cache.
type convBiasKey struct{}

// convBias is how a fused conv on the channels-last path applies its
// epilogue: the library's plan (nil: Loom's transpose) and the fused
// kernel's operand that holds the bias (-1: none).
type convBias struct {
	plan hip.ConvBiasPlan
	bias int
	how  string
}

// biasEpilogue matches epilogue post of a conv of type d: bias add, ReLU,
// or bias add then ReLU, in d, the bias a contiguous vector along the
// output's channel dim (1) broadcast over the others. It returns the
// fused kernel's operand index of the bias (-1: none) and whether a ReLU
// follows.
func biasEpilogue(parts *plan.FusedParts, d dtype.DType) (bias int, relu, ok bool) {
	post := parts.Post
	if post == nil || post.Out == nil || post.Out.DType != d || len(post.Instrs) == 0 || len(post.Instrs) > 2 {
		return -1, false, false
	}
	value := plan.Ref{Operand: true, Index: parts.PostValue}
	bias = -1
	for j, in := range post.Instrs {
		n := in.Node
		if n.DType != d {
			return -1, false, false
		}
		prev := value // the value the instruction must read
		if j > 0 {
			prev = plan.Ref{Index: j - 1}
		}
		switch {
		case n.Op == ir.OpAdd && j == 0 && len(in.Args) == 2:
			o := in.Args[1]
			if in.Args[1] == prev {
				o = in.Args[0]
			} else if in.Args[0] != prev {
				return -1, false, false
			}
			if !o.Operand || o.Broadcast || o.Index == parts.PostValue || !channelVector(post.Ins[o.Index], d) {
				return -1, false, false
			}
			if bias = parts.PostIns[o.Index]; bias < 0 {
				return -1, false, false
			}
		case n.Op == ir.OpRelu && j == len(post.Instrs)-1 && len(in.Args) == 1 && in.Args[0] == prev:
			relu = true
		default:
			return -1, false, false
		}
	}
	return bias, relu, true
}

// channelVector reports whether operand o of an epilogue over a conv's
// output [N, K, …] reads one value of type d an output channel, K of them
// consecutive in memory.
func channelVector(o plan.Operand, d dtype.DType) bool {
	l := o.Layout
	if o.Buf == nil || o.Buf.DType != d || len(l.Dims) < 3 || len(l.Strides) != len(l.Dims) {
		return false
	}
	for i, s := range l.Strides {
		if i != 1 && s != 0 && l.Dims[i] != 1 {
			return false
		}
	}
	return l.Strides[1] == 1 || l.Dims[1] == 1
}

// convBiasOf returns fused conv k's convBias, deciding it the first time
// (cs runs channels-last; ft is k's fused transposes).
func (e *Executor) convBiasOf(k *plan.Kernel, parts *plan.FusedParts, cs *convStep, ft *fusedTranspose) *convBias {
	key := plan.KeyOf(e, convBiasKey{})
	if v, ok := k.Cache.Load(key); ok {
		return v.(*convBias)
	}
	// A decision that loses a race to another is dropped; its plan is
	// among the library state's, closed with the executor.
	v, _ := k.Cache.LoadOrStore(key, e.decideConvBias(k, parts, cs, ft))
	return v.(*convBias)
}

func (e *Executor) decideConvBias(k *plan.Kernel, parts *plan.FusedParts, cs *convStep, ft *fusedTranspose) *convBias {
	cb := &convBias{bias: -1, how: "epilogue in the output's transpose"}
	s := e.dnn()
	force := s.epi
	bias, relu, ok := biasEpilogue(parts, cs.d)
	if !ok || s.lib == nil || force == "loom" || cs.transposed {
		return cb
	}
	gt, err := gemmType(cs.d)
	if err != nil {
		return cb
	}
	desc := cs.desc(gt)
	desc.NHWC, desc.Graph, desc.Bias, desc.ReLU = true, true, bias >= 0, relu
	var cands []hip.ConvBiasPlan
	for rank := range graphEngines {
		desc.GraphRank = rank
		q, err := s.lib.Plan(desc)
		if err != nil {
			if rank == 0 {
				cb.how += " (the library refused the fused epilogue: " + err.Error() + ")"
			}
			break
		}
		bq, isBias := q.(hip.ConvBiasPlan)
		if !isBias {
			q.Close()
			break
		}
		cands = append(cands, bq)
	}
	if len(cands) == 0 {
		return cb
	}
	keep := func(q hip.ConvBiasPlan) {
		for _, c := range cands {
			if c != q {
				c.Close()
			}
		}
		if q != nil {
			s.mu.Lock()
			s.plans = append(s.plans, q)
			s.mu.Unlock()
		}
	}
	if force == "library" {
		keep(cands[0])
		cb.plan, cb.bias, cb.how = cands[0], bias, cands[0].Algo()+" (forced by "+ConvEpilogueEnv+"=library)"
		return cb
	}
	tl, tq, err := e.timeConvBias(k, cs, ft, cands)
	if err != nil {
		keep(nil)
		cb.how += " (the library's epilogue not timed: " + err.Error() + ")"
		return cb
	}
	bi := 0
	for i, t := range tq {
		if t < tq[bi] {
			bi = i
		}
	}
	times := fmt.Sprintf("Loom's %.3f ms", tl)
	for i, q := range cands {
		times += fmt.Sprintf(", %s %.3f ms", q.Algo(), tq[i])
	}
	if tq[bi] >= tl {
		keep(nil)
		cb.how += " (" + times + ")"
		return cb
	}
	keep(cands[bi])
	cb.plan, cb.bias, cb.how = cands[bi], bias, "epilogue in the library's conv: "+cands[bi].Algo()+" ("+times+")"
	return cb
}

// timeConvBias times fused conv k on the channels-last path with Loom's
// epilogue (ft) and with each library plan of qs, on zeroed scratch
// arrays (every operand of the epilogue reads zeros): the best of nine
// runs of each, in three alternating rounds, in milliseconds.
func (e *Executor) timeConvBias(k *plan.Kernel, cs *convStep, ft *fusedTranspose, qs []hip.ConvBiasPlan) (tl float64, tq []float64, err error) {
	buf, x, w, y, err := e.chlScratch(cs.g)
	if err != nil {
		return 0, nil, err
	}
	defer e.releaseScratch(buf)
	_, _, my := chlMoves(cs.g)
	size := int64(cs.d.Size())
	out, err := e.alloc.alloc(my.numel() * size)
	if err != nil {
		return 0, nil, err
	}
	defer e.releaseScratch(out)
	var ops int64 = 1
	for _, o := range k.Ins {
		_, hi := o.Layout.Span()
		ops = max(ops, int64(hi)*int64(o.Buf.DType.Size()))
	}
	zeros, err := e.alloc.alloc(ops)
	if err != nil {
		return 0, nil, err
	}
	defer e.releaseScratch(zeros)
	e.launchMu.Lock()
	err = errors.Join(e.dev.MemsetD8(x, 0, uint64(y-x), e.stream), // the input and the weight
		e.dev.MemsetD8(zeros.ptr, 0, uint64(ops), e.stream))
	e.launchMu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	extra := make([]hip.DevPtr, len(k.Ins))
	for i := range extra {
		extra[i] = zeros.ptr
	}
	tl, tq = math.Inf(1), slices.Repeat([]float64{math.Inf(1)}, len(qs))
	for range 3 {
		t, err := e.bestTime(func() error { return e.convChannelsLast(cs, x, w, out.ptr, ft, extra) })
		if err != nil {
			return 0, nil, err
		}
		tl = min(tl, t)
		for i, q := range qs {
			t, err := e.bestTime(func() error { return e.convChannelsLastBias(cs, q, x, w, zeros.ptr, out.ptr) })
			if err != nil {
				return 0, nil, err
			}
			tq[i] = min(tq[i], t)
		}
	}
	return tl, tq, nil
}

// convChannelsLastBias queues fused conv cs on the channels-last path with
// the epilogue in library plan q (b: the bias, or 0): the transposes in,
// the conv with its epilogue, the plain transpose out.
func (e *Executor) convChannelsLastBias(cs *convStep, q hip.ConvBiasPlan, x, w, b, out hip.DevPtr) error {
	return e.chlRun(cs, x, w, out, func(xs, ws, ys hip.DevPtr) error {
		return e.libraryRun(q, func(wsp hip.DevPtr) error { return q.RunBias(xs, ws, b, ys, wsp) })
	}, nil, nil)
}

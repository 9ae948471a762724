package model

import (
	"fmt"
	"math"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// The two programs. Both declare every weight and the rope tables as
// inputs, which the Model keeps on the executor and passes to every run.
//
// Prefill (B sequences of T tokens, positions 0..T−1) takes ids and
// returns the logits (of the last position, or of every position) and the
// KV cache: per layer one tensor [2, B, KVHeads, MaxSeqLen, HeadDim], the
// keys at [0] and the values at [1], the prompt's written at positions
// 0..T−1 (SliceAssign onto zeros). Its attention is causal within the
// prompt and reads the new keys and values directly, not the cache.
//
// Decode (B sequences of one token each) takes ids, each sequence's
// position and the caches, and returns the logits and the updated caches.
// The position is a run-time input, so one program serves many positions:
// the new key and value are written with one Scatter along the time axis
// (the ids are the position broadcast to the pair's shape), the rope rows
// are picked from the tables with IndexSelect, and the attention runs over the
// cache's first W positions (a view, no copy) with the mask t ≤ pos
// computed from the position input. W, the program's window, is the
// smallest of 16, 24, 32, 48, 64, 96, … that holds pos + 1, capped at
// MaxSeqLen: attention costs what the context holds (within 1.5×), not
// what it could hold, for at most 2·log₂(MaxSeqLen/16) + 1 programs.
//
// Grouped-query attention without copies: the G = Heads/KVHeads query
// heads that share a key/value head are rows of one product. Queries
// [B, Heads, T, D] are viewed as [B, KVHeads, G·T, D] (a reshape of a
// contiguous tensor, free) and multiplied by the keys [B, KVHeads, D, T]
// (a transposed view, read in place by the GEMM), so no key or value is
// ever repeated.
//
// Numerics follow Hugging Face's LlamaForCausalLM in eager mode, op for op
// in the compute dtype: RMSNorm in float32, rounded to the compute dtype
// before the weight multiplies it; scores = (q·kᵀ)·D^−½ rounded to the
// compute dtype; softmax in float32 (then rounded); SwiGLU as
// down(silu(gate(x))·up(x)); logits from the LM head in the compute dtype,
// widened to float32.

// Graph input and output names.
const (
	inIDs     = "ids"      // u32 [B·T], the tokens of each sequence in turn
	inPos     = "pos"      // u32 [B], decode: each sequence's position
	inRopeCos = "rope.cos" // [MaxSeqLen, HeadDim/2]
	inRopeSin = "rope.sin"
	outLogits = "logits" // f32 [B, V] (last position) or [B, T, V]
	// Decode programs also pick the greedy token on the device, so that a
	// greedy step copies 4 bytes a sequence to the host instead of the
	// logits (513 KB for a vocabulary of 128256) and scans nothing there.
	// The NaN check is folded into the same output: one download a step,
	// not two (each costs ~60 µs of host time on the H200 machine, 4% of a
	// 1B decode step).
	outNext = "next" // u32 [B]: the first index of the largest logit, plus Vocab when that logit is NaN
	// outNextPos is pos + 1 (decode): with outNext, the next step's inputs,
	// which a pipelined greedy decode hands on without the host.
	outNextPos = "next.pos" // u32 [B]
)

// A layer's cache keeps its keys and values in one tensor [2, B, KVHeads,
// MaxSeqLen, HeadDim] (keys at [0]), so that a decode step writes both
// with one Scatter: the rotation of the fused projection's keys passes its
// values through (qkv), and the pair is one strided view of that kernel's
// output. Two caches took two scatters, 16 launches a step more for a 1B
// llama (each ~2.5 µs on an H200 by itself).
func inCache(layer int) string  { return fmt.Sprintf("cache.kv.%d", layer) }
func outCache(layer int) string { return fmt.Sprintf("next.kv.%d", layer) }

// cacheKV views a layer's cache [2, B, KV, S, D] as its keys and values
// [B, KV, S, D].
func cacheKV(c *graph.Tensor) (k, v *graph.Tensor) {
	return c.Narrow(0, 0, 1).Squeeze(0), c.Narrow(0, 1, 1).Squeeze(0)
}

// prefillKey identifies a compiled prefill program.
type prefillKey struct {
	batch, tokens int
	all           bool // logits of every position, not only the last
}

// fwd builds one program's graph.
type fwd struct {
	m    *Model
	g    *graph.Graph
	w    map[string]*graph.Tensor
	q    map[string]*graph.QTensor
	cos  *graph.Tensor
	sin  *graph.Tensor
	head string // the LM head's weight name
}

func (m *Model) newFwd() (*fwd, error) {
	f := &fwd{m: m, g: graph.New(), w: map[string]*graph.Tensor{}, q: map[string]*graph.QTensor{}, head: "output"}
	if m.cfg.TieEmbeddings {
		f.head = "token_embd"
	}
	for _, w := range m.weights {
		if format, ok := m.quant[w.name]; ok {
			qt, err := f.g.QInput(w.name, format, w.shape...)
			if err != nil {
				return nil, err
			}
			f.q[w.name] = qt
			continue
		}
		f.w[w.name] = f.g.Input(w.name, m.dt, w.shape...)
	}
	f.cos = f.g.Input(inRopeCos, m.dt, m.maxSeq, m.cfg.HeadDim/2)
	f.sin = f.g.Input(inRopeSin, m.dt, m.maxSeq, m.cfg.HeadDim/2)
	return f, nil
}

// linear is x·Wᵀ (+ bias) for the weight called name+".weight".
func (f *fwd) linear(x *graph.Tensor, name string) *graph.Tensor {
	return f.addBias(f.product(x, name), name)
}

// product is x·Wᵀ for the weight called name+".weight", without its bias:
// a GEMM for a float weight, a quantized matmul for a block-format one.
func (f *fwd) product(x *graph.Tensor, name string) *graph.Tensor {
	if q, ok := f.q[name+".weight"]; ok {
		return x.QMatmul(q)
	}
	return graph.Linear(x, f.w[name+".weight"], nil)
}

// addBias adds the bias called name+".bias" to y, where the model has one.
func (f *fwd) addBias(y *graph.Tensor, name string) *graph.Tensor {
	if b, ok := f.w[name+".bias"]; ok {
		return y.Add(b)
	}
	return y
}

// residual is x + linear(h, name) for a weight whose input features are
// split over the ranks of a tensor-parallel model (attn_output, ffn_down:
// see parallel.go): the ranks' partial products are summed (AllReduce)
// and the bias is added once. Rank 0 adds x to its partial product before
// the all-reduce — an add the product's kernel does as it stores — so the
// sum arrives with the residual in it, and no rank runs an add of its own
// after each all-reduce (32 kernels a rank in a 1B decode step). The
// order of the additions changes: (x + p₀) + p₁ … for x + (p₀ + p₁ …),
// within the compute dtype's rounding. Without tensor parallelism it is
// x + linear(h, name).
func (f *fwd) residual(x, h *graph.Tensor, name string) *graph.Tensor {
	if !f.m.parallel() {
		return x.Add(f.linear(h, name))
	}
	y := f.product(h, name)
	if f.m.comm.Rank() == 0 {
		y = y.Add(x)
	}
	return f.addBias(y.AllReduce(f.m.tpGroup(), graph.ReduceSum), name)
}

// embed picks the embedding rows of ids (1-D): [len(ids), Hidden].
func (f *fwd) embed(ids *graph.Tensor) *graph.Tensor {
	if q, ok := f.q["token_embd.weight"]; ok {
		return q.Embedding(ids, f.m.dt)
	}
	return f.w["token_embd.weight"].IndexSelect(ids, 0)
}

// rmsNorm is Hugging Face's LlamaRMSNorm: x in float32 times
// 1/√(mean(x²) + eps), rounded to the compute dtype, times the weight. (It
// rounds before the weight multiplies; graph's RmsNorm rounds once after,
// which differs in the last bit for f16/bf16.) One fused row kernel. It
// stays a kernel of its own before a quantized product: folded into the
// product (each block of the one-row mat-vec normalising x as it quantizes
// it) the 1B Q4_K decode step was 9–15% slower with 33 launches fewer
// (session 48, README): the norm's launch is where the next product's
// blocks become resident and start loading their weight.
func (f *fwd) rmsNorm(x *graph.Tensor, name string) *graph.Tensor {
	x32 := x.Cast(dtype.F32)
	inv := x32.Sqr().Mean(true, -1).Add(graph.Scalar(f.m.cfg.RMSEps)).Sqrt().Recip()
	return x32.Mul(inv).Cast(f.m.dt).Mul(f.w[name+".weight"])
}

// linears is linear(x, name) for each of names, through their fused
// weight fused+".weight" where the model stacked them (fusions): one
// product, split along its last dim by views, each part's bias added.
func (f *fwd) linears(x *graph.Tensor, fused string, names ...string) []*graph.Tensor {
	out := make([]*graph.Tensor, len(names))
	parts, ok := f.m.fused[fused+".weight"]
	if !ok {
		for i, n := range names {
			out[i] = f.linear(x, n)
		}
		return out
	}
	y := f.linear(x, fused)
	last := len(y.Shape()) - 1
	off := 0
	for i, pt := range parts {
		out[i] = f.addBias(y.Narrow(last, off, pt.rows), names[i])
		off += pt.rows
	}
	return out
}

// mlp is the residual stream x plus SwiGLU of h: x + down(silu(gate(h))·up(h)).
// Where the gate and up weights are one interleaved matrix (pairedFusion),
// the product's output [..., 2I] is read in pairs, gate at 2j and up at
// 2j+1, through strided views: its pair epilogue.
func (f *fwd) mlp(x, h *graph.Tensor, p string) *graph.Tensor {
	if _, ok := f.m.fused[p+pairedFusion+".weight"]; ok {
		y := f.product(h, p+pairedFusion)
		s := y.Shape()
		lead, half := s[:len(s)-1:len(s)-1], s[len(s)-1]/2
		pairs := y.Reshape(append(lead, half, 2)...)
		gate := f.addBias(pairs.Narrow(len(s), 0, 1).Reshape(append(lead, half)...), p+"ffn_gate")
		up := f.addBias(pairs.Narrow(len(s), 1, 1).Reshape(append(lead, half)...), p+"ffn_up")
		return f.residual(x, gate.Silu().Mul(up), p+"ffn_down")
	}
	gu := f.linears(h, p+"ffn_gate_up", p+"ffn_gate", p+"ffn_up")
	return f.residual(x, gu[0].Silu().Mul(gu[1]), p+"ffn_down")
}

// qkv projects h [B, T, C] to rotated queries q [B, H, T, D] and the
// rotated keys and the values as the cache stores them, kv [2, B, KV, T,
// D] (a view). cos and sin are the rope tables Rope takes: [≥ T, D/2], or
// [B, T, D/2] per sequence.
func (f *fwd) qkv(h *graph.Tensor, p string, cos, sin *graph.Tensor) (q, kv *graph.Tensor) {
	c := f.m.lc
	s := h.Shape()
	b, t := s[0], s[1]
	// Rotated in the projections' own (b, t, h, d) layout (RopeThd), then
	// transposed as views: rotating the transposed views would copy each
	// to a contiguous layout first.
	_, fused := f.m.fused[p+"attn_qkv.weight"]
	_, qb := f.w[p+"attn_q.bias"]
	_, kb := f.w[p+"attn_k.bias"]
	_, vb := f.w[p+"attn_v.bias"]
	if fused && !qb && !kb && !vb {
		// One product and one elementwise chain (its epilogue, where the
		// halves are interleaved): the stacked projection viewed as Heads
		// + 2·KVHeads heads (queries, keys, values), the first Heads +
		// KVHeads rotated (the same tables for every head) and the values
		// passed through, then split by views; the keys and values [B, T,
		// 2, KV, D] are the cache's [2, B, KV, T, D] permuted.
		y := f.linear(h, p+"attn_qkv").Reshape(b, t, c.Heads+2*c.KVHeads, c.HeadDim)
		if f.m.ropePaired[p+"attn_qkv.weight"] {
			// Each head's halves interleaved at load (interleaveHalves):
			// the rotation joins the product (keys are cached so).
			y = y.RopeIThdHeads(cos, sin, c.Heads+c.KVHeads)
		} else {
			y = y.RopeThdHeads(cos, sin, c.Heads+c.KVHeads)
		}
		q = y.Narrow(2, 0, c.Heads).Transpose(1, 2)
		kv = y.Narrow(2, c.Heads, 2*c.KVHeads).Reshape(b, t, 2, c.KVHeads, c.HeadDim).Permute(2, 0, 3, 1, 4)
		return q, kv
	}
	if _, ok := f.m.fused[p+"attn_qk.weight"]; ok && !qb && !kb {
		// The queries and keys stacked without the values (stored in
		// another format): one product and one rotation for both, as
		// above, the values a product of their own.
		y := f.linear(h, p+"attn_qk").Reshape(b, t, c.Heads+c.KVHeads, c.HeadDim)
		if f.m.ropePaired[p+"attn_qk.weight"] {
			y = y.RopeIThdHeads(cos, sin, c.Heads+c.KVHeads)
		} else {
			y = y.RopeThdHeads(cos, sin, c.Heads+c.KVHeads)
		}
		q = y.Narrow(2, 0, c.Heads).Transpose(1, 2)
		k := y.Narrow(2, c.Heads, c.KVHeads)
		v := f.linear(h, p+"attn_v").Reshape(b, t, c.KVHeads, c.HeadDim)
		return q, graph.Stack(0, k, v).Permute(0, 1, 3, 2, 4)
	}
	qkv := f.linears(h, p+"attn_qkv", p+"attn_q", p+"attn_k", p+"attn_v")
	q = qkv[0].Reshape(b, t, c.Heads, c.HeadDim).RopeThd(cos, sin).Transpose(1, 2)
	k := qkv[1].Reshape(b, t, c.KVHeads, c.HeadDim).RopeThd(cos, sin)
	v := qkv[2].Reshape(b, t, c.KVHeads, c.HeadDim)
	return q, graph.Stack(0, k, v).Permute(0, 1, 3, 2, 4)
}

// attend is softmax(mask(q·kᵀ·D^−½))·v for queries q [B, H, T, D] against
// keys k and values v [B, KV, S, D]; keep (u8, broadcasting to
// [B, KV, G, T, S]) marks the pairs that may attend. It returns
// [B, T, H·D].
func (f *fwd) attend(q, k, v, keep *graph.Tensor) *graph.Tensor {
	c := f.m.lc
	qs, ks := q.Shape(), k.Shape()
	b, t, s := qs[0], qs[2], ks[2]
	g := c.group()
	// The scale applies after the reshape, so that it fuses into the
	// softmax's row kernel.
	scores := q.Reshape(b, c.KVHeads, g*t, c.HeadDim).Matmul(k.T()).Reshape(b, c.KVHeads, g, t, s).Affine(1/math.Sqrt(float64(c.HeadDim)), 0)
	scores = graph.Where(keep, scores, graph.Scalar(math.Inf(-1)))
	probs := scores.Softmax(-1).Reshape(b, c.KVHeads, g*t, s)
	out := probs.Matmul(v) // [B, KV, G·T, D] = [B, H, T, D]
	return out.Reshape(b, c.Heads, t, c.HeadDim).Transpose(1, 2).Reshape(b, t, c.qDim())
}

// attendCache is a decode step's attention: q [B, H, T, D] over the cache's
// first W positions k, v [B, KV, W, D], sequence b's query t seeing the
// positions ≤ pos[b] + t, as one CausalAttention step (one pass over the
// keys in blocks on the GPU, where attend's product, masked softmax and
// product were three launches with the scores and probabilities written
// out in between). It computes the scores and probabilities in float32
// without rounding them to the compute dtype (attend and transformers'
// eager attention round both to bf16), so bf16 decode logits differ
// from prefill's in those roundings. Returns [B, T, H·D].
func (f *fwd) attendCache(q, k, v, pos *graph.Tensor) *graph.Tensor {
	c := f.m.lc
	qs := q.Shape()
	b, t := qs[0], qs[2]
	out := graph.CausalAttention(q, k, v, pos, 1/math.Sqrt(float64(c.HeadDim)))
	return out.Transpose(1, 2).Reshape(b, t, c.qDim())
}

// logits applies the final norm and the LM head to x [..., C]: f32 [..., V].
// A tensor-parallel rank whose head is split (headSplit) computes its
// slice of the vocabulary, cast as the product stores it, and the ranks'
// slices are gathered in rank order.
func (f *fwd) logits(x *graph.Tensor) *graph.Tensor {
	h := f.rmsNorm(x, "output_norm")
	if !f.m.headSplit() {
		return f.linear(h, f.head).Cast(dtype.F32)
	}
	var y *graph.Tensor
	if f.m.cfg.TieEmbeddings {
		per := f.m.cfg.Vocab / f.m.comm.Size()
		y = graph.Linear(h, f.w["token_embd.weight"].Narrow(0, f.m.comm.Rank()*per, per), nil)
	} else {
		y = f.linear(h, f.head) // output.weight holds the rank's rows
	}
	y = y.Cast(dtype.F32)
	return y.AllGather(f.m.tpGroup(), len(y.Shape())-1)
}

// buildPrefill records the prefill program for B sequences of T tokens.
func (m *Model) buildPrefill(k prefillKey) (*graph.Program, error) {
	f, err := m.newFwd()
	if err != nil {
		return nil, err
	}
	c, g := m.lc, f.g
	b, t := k.batch, k.tokens
	ids := g.Input(inIDs, dtype.U32, b*t)
	x := f.embed(ids).Reshape(b, t, c.Hidden)
	// keep[i, j] = j ≤ i: causal within the prompt.
	ar := g.Arange(dtype.U32, 0, float64(t), 1)
	keep := ar.Reshape(1, t).Le(ar.Reshape(t, 1))
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		q, kv := f.qkv(f.rmsNorm(x, p+"attn_norm"), p, f.cos, f.sin)
		g.Output(outCache(l), g.Zeros(m.dt, 2, b, c.KVHeads, m.maxSeq, c.HeadDim).SliceAssign(kv, 3, 0))
		kk, v := cacheKV(kv)
		x = f.residual(x, f.attend(q, kk, v, keep), p+"attn_output")
		x = f.mlp(x, f.rmsNorm(x, p+"ffn_norm"), p)
	}
	if !k.all {
		x = x.Narrow(1, t-1, 1).Reshape(b, c.Hidden)
	}
	g.Output(outLogits, f.logits(x))
	return g.Compile(graph.Options{})
}

// minDecodeWindow is the smallest attention window of a decode program.
const minDecodeWindow = 16

// decodeWindow is the attention window of the decode program for a step
// whose sequences hold n positions (the new one included): the smallest of
// the powers of two from minDecodeWindow and the sizes halfway between
// them (16, 24, 32, 48, …) that holds n, capped at MaxSeqLen. Powers of
// two alone left a step at position 513 attending over 1,024 positions.
func (m *Model) decodeWindow(n int) int {
	w := minDecodeWindow
	for w < n {
		if w&(w-1) == 0 {
			w = w / 2 * 3 // 2^k → 3·2^(k−1)
		} else {
			w = w / 3 * 4 // 3·2^(k−1) → 2^(k+1)
		}
	}
	return min(w, m.maxSeq)
}

// decodeKey identifies a compiled decode program: B sequences, attention
// over the first window positions of the cache.
type decodeKey struct{ batch, window int }

// buildDecode records the decode program for B sequences of one token,
// attending over the first k.window positions.
func (m *Model) buildDecode(k decodeKey) (*graph.Program, error) {
	b, w := k.batch, k.window
	f, err := m.newFwd()
	if err != nil {
		return nil, err
	}
	c, g := m.lc, f.g
	ids := g.Input(inIDs, dtype.U32, b)
	pos := g.Input(inPos, dtype.U32, b)
	x := f.embed(ids).Reshape(b, 1, c.Hidden)
	// Each sequence's rope row, as the per-batch table form Rope takes.
	cos := f.cos.IndexSelect(pos, 0).Reshape(b, 1, c.HeadDim/2)
	sin := f.sin.IndexSelect(pos, 0).Reshape(b, 1, c.HeadDim/2)
	// Where the new key and value go: the position along the time axis.
	at := pos.Reshape(1, b, 1, 1, 1).BroadcastTo(2, b, c.KVHeads, 1, c.HeadDim)
	norm := f.rmsNorm
	if m.probe == probeNoNorm {
		norm = func(x *graph.Tensor, _ string) *graph.Tensor { return x }
	}
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		if m.probe == probeOneLayer {
			p = "blk.0."
		}
		q, kv := f.qkv(norm(x, p+"attn_norm"), p, cos, sin)
		kvc := g.Input(inCache(l), m.dt, 2, b, c.KVHeads, m.maxSeq, c.HeadDim).Scatter(at, kv, 3)
		g.Output(outCache(l), kvc)
		ka, va := cacheKV(kvc)
		if w < m.maxSeq {
			ka, va = ka.Narrow(2, 0, w), va.Narrow(2, 0, w)
		}
		start := pos
		if m.probe == probeTinyStep {
			// A step of its own after the scatter: the layer's constant
			// keeps the layers' steps apart (cse).
			c := g.Full(dtype.U32, float64(l+2)) // not 1: pos + 1 is the next position, an output
			start = pos.Add(c).Sub(c)
		}
		var a *graph.Tensor
		if m.probe == probeNoAttention {
			a = q.Transpose(1, 2).Reshape(b, 1, c.qDim()) // the attention's shape
		} else {
			a = f.attendCache(q, ka, va, start)
		}
		if m.probe == probeNoOutProj {
			x = x.Add(a)
		} else {
			x = f.residual(x, a, p+"attn_output")
		}
		x = f.mlp(x, norm(x, p+"ffn_norm"), p)
	}
	lg := f.logits(x.Reshape(b, c.Hidden))
	g.Output(outLogits, lg)
	am, mx := lg.Argmax(1, false), lg.Max(false, 1)
	nan := mx.Ne(mx)
	if m.probe != "" {
		// Without the norms (or with other layers' weights) random
		// weights may overflow to NaN; a probe times the steps, so the
		// token stays the argmax (the same kernels: a test that is never
		// true, NaN or not).
		nan = mx.Lt(mx)
	}
	g.Output(outNext, graph.Where(nan, am.Add(g.Full(dtype.U32, float64(c.Vocab))), am))
	g.Output(outNextPos, pos.Add(g.Full(dtype.U32, 1)))
	return g.Compile(graph.Options{})
}

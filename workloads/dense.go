package workloads

import (
	"fmt"
	"github.com/loomgraph/loom/quant"
	"math"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// The dense workloads (shared/workloads.md): W9 GEMM in three dtypes, W10
// a llama MLP, W11 naive causal attention, all through Matmul; and the
// transformer block written with Matmul (BlockMM) beside the one written
// without it (Block). Their figure of merit is FLOP/s (Flops), not bytes.

// Dense lists the dense workloads; ByID finds them too.
var Dense = []Workload{
	{ID: "W9-f32", Desc: "GEMM n³ f32 (TF32 off), n = Size.GemmN (4096 on a GPU, 1024 on the CPU)", Build: gemm(dtype.F32), Flops: gemmFlops},
	{ID: "W9-f16", Desc: "GEMM n³ f16 (f32 accumulation)", Build: gemm(dtype.F16), Flops: gemmFlops},
	{ID: "W9-bf16", Desc: "GEMM n³ bf16 (f32 accumulation)", Build: gemm(dtype.BF16), Flops: gemmFlops},
	{ID: "W10", Desc: "llama MLP bf16: silu(x·Wg) ⊙ (x·Wu) · Wd, x 4096×4096, Wg/Wu 4096×11008, Wd 11008×4096", Build: w10, Flops: func(Size) float64 { return 2 * 4096 * 4096 * 11008 * 3 }},
	{ID: "W11", Desc: "naive causal attention bf16: softmax(q·kᵀ/√D + mask)·v, B 8, H 32, S 2048, D 128", Build: w11, Flops: func(Size) float64 { return 4 * 8 * 32 * 2048 * 2048 * 128 / 2 }},
	{ID: "W13-q4_0", Desc: "decode mat-vec x[1,4096] bf16 · Wᵀ, W [14336, 4096] in Q4_0 (bytes: the weights)", Build: w13(quant.Q4_0, 1)},
	{ID: "W13-q4_k", Desc: "decode mat-vec, W in Q4_K", Build: w13(quant.Q4_K, 1)},
	{ID: "W13-q6_k", Desc: "decode mat-vec, W in Q6_K", Build: w13(quant.Q6_K, 1)},
	{ID: "W13-q8_0", Desc: "decode mat-vec, W in Q8_0", Build: w13(quant.Q8_0, 1)},
	{ID: "W13-q5_k", Desc: "decode mat-vec, W in Q5_K (the main format of llama.cpp's Q5_K_M files)", Build: w13(quant.Q5_K, 1)},
	{ID: "W13-q3_k", Desc: "decode mat-vec, W in Q3_K (Q3_K_M's)", Build: w13(quant.Q3_K, 1)},
	{ID: "W13-q2_k", Desc: "decode mat-vec, W in Q2_K", Build: w13(quant.Q2_K, 1)},
	{ID: "W13-q5_0", Desc: "decode mat-vec, W in Q5_0 (llama.cpp's Q4_K_M fallback where a row is not a multiple of 256)", Build: w13(quant.Q5_0, 1)},
	{ID: "W13-q4_1", Desc: "decode mat-vec, W in Q4_1", Build: w13(quant.Q4_1, 1)},
	{ID: "W13-q5_1", Desc: "decode mat-vec, W in Q5_1", Build: w13(quant.Q5_1, 1)},
	{ID: "W13-bf16", Desc: "decode mat-vec, W in bf16 (the peer's product)", Build: w13bf16},
	{ID: "W13m8-q4_0", Desc: "decode mat-vec with 8 activation rows (x[8,4096] bf16), W in Q4_0: issue 14 asks ≤ 1.5× the one-row time", Build: w13(quant.Q4_0, 8)},
	{ID: "W13m8-q4_k", Desc: "8-row decode mat-vec, W in Q4_K", Build: w13(quant.Q4_K, 8)},
	{ID: "W13m8-q6_k", Desc: "8-row decode mat-vec, W in Q6_K", Build: w13(quant.Q6_K, 8)},
	{ID: "W13m8-q8_0", Desc: "8-row decode mat-vec, W in Q8_0", Build: w13(quant.Q8_0, 8)},
	{ID: "W13m8-q5_k", Desc: "8-row decode mat-vec, W in Q5_K", Build: w13(quant.Q5_K, 8)},
	{ID: "W13m8-q3_k", Desc: "8-row decode mat-vec, W in Q3_K", Build: w13(quant.Q3_K, 8)},
	{ID: "W13m8-q2_k", Desc: "8-row decode mat-vec, W in Q2_K", Build: w13(quant.Q2_K, 8)},
	{ID: "W13m8-q5_0", Desc: "8-row decode mat-vec, W in Q5_0", Build: w13(quant.Q5_0, 8)},
	{ID: "W13x4-q4_0", Desc: "decode mat-vec with 4× W13's rows (W [57344, 4096] in Q4_0): beside W13, what a launch costs apart from the bytes it streams", Build: w13rows(quant.Q4_0, 1, 4*14336)},
	{ID: "W13x4-q4_k", Desc: "decode mat-vec with 4× W13's rows, W in Q4_K", Build: w13rows(quant.Q4_K, 1, 4*14336)},
	{ID: "W13x4-q6_k", Desc: "decode mat-vec with 4× W13's rows, W in Q6_K", Build: w13rows(quant.Q6_K, 1, 4*14336)},
	{ID: "W13x4-q8_0", Desc: "decode mat-vec with 4× W13's rows, W in Q8_0", Build: w13rows(quant.Q8_0, 1, 4*14336)},
	{ID: "W13x4m8-q4_0", Desc: "8-row decode mat-vec with 4× W13's rows, W in Q4_0", Build: w13rows(quant.Q4_0, 8, 4*14336)},
	{ID: "W13x4m8-q4_k", Desc: "8-row decode mat-vec with 4× W13's rows, W in Q4_K", Build: w13rows(quant.Q4_K, 8, 4*14336)},
	{ID: "W13p-q4_k", Desc: "prefill x[512,4096] bf16 · Wᵀ, W [14336, 4096] in Q4_K (dequantize + GEMM)", Build: w13(quant.Q4_K, 512), Flops: func(Size) float64 { return 2 * 512 * 4096 * 14336 }},
	{ID: "W13p-bf16", Desc: "prefill x[512,4096] · W[4096,14336], both bf16: the GEMM W13p-q4_k is held to (≥ 70% of its TFLOP/s)", Build: w13pbf16, Flops: func(Size) float64 { return 2 * 512 * 4096 * 14336 }},
	{ID: "W13d-q4_k", Desc: "dequantize W [14336, 4096] Q4_K to bf16 (the prefill path's first pass)", Build: w13d(quant.Q4_K, false)},
	{ID: "W13d-q4_0", Desc: "dequantize W [14336, 4096] Q4_0 to bf16", Build: w13d(quant.Q4_0, false)},
	{ID: "W13d-q6_k", Desc: "dequantize W [14336, 4096] Q6_K to bf16", Build: w13d(quant.Q6_K, false)},
	{ID: "W13d-q8_0", Desc: "dequantize W [14336, 4096] Q8_0 to bf16", Build: w13d(quant.Q8_0, false)},
	{ID: "W13d-q5_k", Desc: "dequantize W [14336, 4096] Q5_K to bf16", Build: w13d(quant.Q5_K, false)},
	{ID: "W13p-q5_k", Desc: "prefill x[512,4096] bf16 · Wᵀ, W [14336, 4096] in Q5_K (dequantize + GEMM)", Build: w13(quant.Q5_K, 512), Flops: func(Size) float64 { return 2 * 512 * 4096 * 14336 }},
	{ID: "W13ds-q4_k", Desc: "dequantize W [14336, 4096] Q4_K to bf16 times a scale s [4096] (a dequantization with an epilogue: one pass fused, two unfused)", Build: w13d(quant.Q4_K, true)},
	{ID: "W13ds-q4_0", Desc: "dequantize W [14336, 4096] Q4_0 to bf16 times a scale s [4096]", Build: w13d(quant.Q4_0, true)},
	{ID: "W13ds-q6_k", Desc: "dequantize W [14336, 4096] Q6_K to bf16 times a scale s [4096]", Build: w13d(quant.Q6_K, true)},
	{ID: "W13ds-q8_0", Desc: "dequantize W [14336, 4096] Q8_0 to bf16 times a scale s [4096]", Build: w13d(quant.Q8_0, true)},
	{ID: "W-attn", Desc: "decode attention bf16 (CausalAttention): q [1, 32, 1, 64] over 8 key/value heads, k and v [1, 8, 1024, 64], every key visible (bytes: the keys and values)", Build: wAttn},
	{ID: "W-attn768", Desc: "the 1B model's decode attention at position 640 (its window of 768 positions): q [1, 32, 1, 64] over k and v [1, 8, 768, 64], keys 0…640 visible (bytes: all the keys and values)", Build: wAttn768},
	{ID: "block-mm", Desc: "transformer block with Matmul, f32, T 128, D 512, 8 heads, hidden 1376", Build: func(Size) (*graph.Graph, error) { return BlockMM(CPUBlock) }, Flops: func(Size) float64 { return blockFlops(CPUBlock) }},
	{ID: "block-bcast", Desc: "the same block with every product a broadcast multiply and a sum (no Matmul)", Build: func(Size) (*graph.Graph, error) { return Block(CPUBlock) }, Flops: func(Size) float64 { return blockFlops(CPUBlock) }},
}

// CPUBlock is the block of issue 11's CPU target.
var CPUBlock = BlockSize{T: 128, D: 512, Heads: 8, Hidden: 1376}

func gemmFlops(sz Size) float64 { n := float64(sz.GemmN); return 2 * n * n * n }

// blockFlops counts the block's products (the rest is noise beside them).
func blockFlops(s BlockSize) float64 {
	T, D, H := float64(s.T), float64(s.D), float64(s.Hidden)
	return 2*T*D*D*4 + 2*T*T*D*2 + 2*T*D*H*3
}

func gemm(dt dtype.DType) func(Size) (*graph.Graph, error) {
	return func(sz Size) (*graph.Graph, error) {
		n := sz.GemmN
		g := graph.New()
		g.Output("c", g.Input("a", dt, n, n).Matmul(g.Input("b", dt, n, n)))
		return g, g.Err()
	}
}

func w10(Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.BF16, 4096, 4096)
	wg := g.Input("wg", dtype.BF16, 4096, 11008)
	wu := g.Input("wu", dtype.BF16, 4096, 11008)
	wd := g.Input("wd", dtype.BF16, 11008, 4096)
	g.Output("out", x.Matmul(wg).Silu().Mul(x.Matmul(wu)).Matmul(wd))
	return g, g.Err()
}

// w11 takes the causal mask as an input (0 on and below the diagonal, −inf
// above, bf16 [S, S]). As in the PyTorch peer (softmax(s.float())), the
// scores go to f32 for the softmax and back to bf16 for the second product;
// the scale and the mask are applied in f32 too (the peer applies them in
// bf16, rounding twice more). Cast, scale, mask, softmax and cast are one row
// kernel between the two batched products.
func w11(Size) (*graph.Graph, error) {
	const B, H, S, D = 8, 32, 2048, 128
	g := graph.New()
	q := g.Input("q", dtype.BF16, B, H, S, D)
	k := g.Input("k", dtype.BF16, B, H, S, D)
	v := g.Input("v", dtype.BF16, B, H, S, D)
	mask := g.Input("mask", dtype.BF16, S, S)
	s := q.Matmul(k.Transpose(2, 3)).Cast(dtype.F32).Affine(1/math.Sqrt(D), 0).Add(mask.Cast(dtype.F32))
	g.Output("out", s.Softmax(-1).Cast(dtype.BF16).Matmul(v))
	return g, g.Err()
}

// BlockMM is Block written with Matmul: the same graph a model would use.
func BlockMM(s BlockSize) (*graph.Graph, error) {
	if s.T < 1 || s.D < 1 || s.Heads < 1 || s.D%s.Heads != 0 || (s.D/s.Heads)%2 != 0 || s.Hidden < 1 {
		return nil, fmt.Errorf("workloads: block %+v: want positive sizes, D divisible by Heads into even head widths", s)
	}
	g := graph.New()
	T, D, H, hd := s.T, s.D, s.Heads, s.D/s.Heads
	x := g.Input("x", dtype.F32, T, D)
	w := func(name string, dims ...int) *graph.Tensor { return g.Input(name, dtype.F32, dims...) }
	cos, sin := w("cos", T, hd/2), w("sin", T, hd/2)
	mask := w("mask", T, T)
	h := x.RmsNorm(w("attn_norm", D), 1e-6)
	heads := func(t *graph.Tensor) *graph.Tensor { return t.Reshape(T, H, hd).Permute(1, 0, 2).Unsqueeze(0) }
	q := heads(h.Matmul(w("wq", D, D))).Rope(cos, sin)
	k := heads(h.Matmul(w("wk", D, D))).Rope(cos, sin)
	v := heads(h.Matmul(w("wv", D, D)))
	p := q.Matmul(k.Transpose(2, 3)).Affine(1/math.Sqrt(float64(hd)), 0).Add(mask).Softmax(3)
	att := p.Matmul(v).Squeeze(0).Permute(1, 0, 2).Reshape(T, D)
	x2 := x.Add(att.Matmul(w("wo", D, D)))
	h2 := x2.RmsNorm(w("mlp_norm", D), 1e-6)
	gate := h2.Matmul(w("w_gate", D, s.Hidden)).Silu()
	up := h2.Matmul(w("w_up", D, s.Hidden))
	y := x2.Add(gate.Mul(up).Matmul(w("w_down", s.Hidden, D)))
	g.Output("out", y)
	g.Output("head", y.LayerNorm(w("ln_w", D), w("ln_b", D), 1e-5).Gelu())
	return g, g.Err()
}

// w13 is the quantized decode (m = 1) or prefill product of issue 14's W13:
// x [m, 4096] bf16 · Wᵀ with W [14336, 4096] in format f. The weight is the
// input "wq_<format>", which Inputs fills with valid quantized rows.
func w13(f quant.Type, m int) func(Size) (*graph.Graph, error) { return w13rows(f, m, 14336) }

// w13rows is w13 with W [rows, 4096]. Timing the same product over 4× the
// rows separates a launch's fixed cost from its streaming rate: with t(n)
// = a + b·n, a = (4·t(1) − t(4))/3.
func w13rows(f quant.Type, m, rows int) func(Size) (*graph.Graph, error) {
	return func(Size) (*graph.Graph, error) {
		g := graph.New()
		w, err := g.QInput("wq_"+f.String(), f, rows, 4096)
		if err != nil {
			return nil, err
		}
		g.Output("out", g.Input("x", dtype.BF16, m, 4096).QMatmul(w))
		return g, g.Err()
	}
}

func w13bf16(Size) (*graph.Graph, error) {
	g := graph.New()
	g.Output("out", g.Input("x", dtype.BF16, 1, 4096).Matmul(g.Input("w", dtype.BF16, 4096, 14336)))
	return g, g.Err()
}

func w13pbf16(Size) (*graph.Graph, error) {
	g := graph.New()
	g.Output("out", g.Input("x", dtype.BF16, 512, 4096).Matmul(g.Input("w", dtype.BF16, 4096, 14336)))
	return g, g.Err()
}

// w13d dequantizes W13's weight in format f to bf16 (the prefill path's
// first pass). With scaled, each column of the dequantized weight is multiplied by s
// [4096] bf16 as it is read (W13ds: plan.DequantAt fuses the two).
func w13d(f quant.Type, scaled bool) func(Size) (*graph.Graph, error) {
	return func(Size) (*graph.Graph, error) {
		g := graph.New()
		w, err := g.QInput("wq_"+f.String(), f, 14336, 4096)
		if err != nil {
			return nil, err
		}
		out := w.Dequantize(dtype.BF16)
		if scaled {
			out = out.Mul(g.Input("s", dtype.BF16, 4096))
		}
		g.Output("out", out)
		return g, g.Err()
	}
}

// wAttn is a 1B llama's decode-step attention over a 1024-position window
// of its cache, as one CausalAttention step (the model's decode path).
// Its start input (Inputs: 2^31) lets every key be seen.
func wAttn(Size) (*graph.Graph, error) { return decodeAttention(1024, "start") }

// wAttn768 is W-attn as the 1B model's decode step at position 640 runs
// it: over its window of 768 positions (model.decodeWindow), keys 0…640
// visible.
func wAttn768(Size) (*graph.Graph, error) { return decodeAttention(768, "start_640") }

// decodeAttention is a 1B llama's decode-step attention over s positions
// of its cache (32 query heads over 8 key/value heads of 64, bf16), its
// offsets the input named start (Inputs gives it its value).
func decodeAttention(s int, start string) (*graph.Graph, error) {
	const H, KV, D = 32, 8, 64
	g := graph.New()
	q := g.Input("q", dtype.BF16, 1, H, 1, D)
	k := g.Input("k", dtype.BF16, 1, KV, s, D)
	v := g.Input("v", dtype.BF16, 1, KV, s, D)
	g.Output("out", graph.CausalAttention(q, k, v, g.Input(start, dtype.U32, 1), 1/math.Sqrt(D)))
	return g, g.Err()
}

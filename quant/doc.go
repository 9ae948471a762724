// Package quant holds GGML's tensor types: the type table (numbered as
// ggml_type, the number GGUF files store), and, in pure Go, the block
// formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
// and Q8_K with their quantizers, dequantizers and dot products, plus F32,
// F16 and BF16 as trivial codecs so that callers treat every supported type
// alike. It has no executor inside: it works on byte rows, and executors,
// the GGUF reader and the kernels' tests call it.
//
// # Layout
//
// Blocks are byte-for-byte GGML's packed C structs, little-endian, with
// IEEE binary16 scales (Q8_K: an f32 scale and int16 sums); Traits gives
// each type's values and bytes per block, and the comments on the
// quantizers in legacy.go and kquants.go give the fields. A row of n
// values is n/Block blocks; every function requires whole blocks and exact
// output lengths and returns an error (naming the function, the type and
// the length at fault) otherwise. Nothing panics and nothing reads outside
// the slices it is given, whatever the bytes (fuzzed).
//
// # Contract
//
// Quantize is bit-exact with GGML's reference quantizer as
// ggml_quantize_chunk runs it without an importance matrix:
// quantize_row_<t>_ref for every type, including the k-quant scale
// searches (make_qkx2_quants for Q2_K/Q4_K/Q5_K, make_q3_quants for Q3_K,
// make_qx_quants for Q6_K), nearest_int's round-half-even through the
// float adder, f16 rounding to nearest even, and GGML's order of float
// operations. Q8_1 and Q8_K, the activation formats, quantize as
// quantize_row_q8_1_ref and quantize_row_q8_K_ref do.
//
// Dequantize is bit-equal to GGML's dequantize_row_<t> (GGML has none for
// Q8_1; here it is d·q). DequantizeF16 and DequantizeBF16 round that f32
// result once. WidenToQ8_0 re-encodes Q4_0 and Q5_0 blocks as Q8_0 with
// the same scale bits and integers, so that they dequantize to the same
// bits (a model stacks such weights with Q8_0 ones into one product).
//
// VecDot is the specification of every quantized dot product Loom will run
// (future CPU assembly, GPU kernels): it returns, bit for bit, what GGML's
// generic (non-SIMD) ggml_vec_dot_<w>_<act> returns — exact integer sums
// per block or sub-block, scaled by the block scales, accumulated in
// float32 in GGML's order (for Q3_K…Q6_K that includes its eight float
// lanes). ActivationType(w) is the activation format GGML pairs with weight
// type w: Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the
// k-quants. For F32, F16 and BF16 VecDot is GGML's scalar loop (float32
// products summed in float64); those three are tested against a float64
// reference rather than against GGML's code. GGML's own SIMD dot products
// (AVX2, NEON) sum in other orders and differ from VecDot in the last
// bits, and so will GPU kernels; those are to be tested against VecDot
// with a tolerance.
//
// On amd64 with AVX2 and F16C, VecDot runs assembly for every weight
// format: Q4_0·Q8_0, Q4_1·Q8_1, Q5_0·Q8_0, Q5_1·Q8_1, Q8_0·Q8_0 and Q2_K …
// Q6_K·Q8_K (dot_amd64.s: VPMADDUBSW/VPMADDWD, with the byte order
// arranged so that the integer lanes are the twin's; the fifth bits of
// Q5_0/Q5_1 spread from their 32-bit word to bytes by a shuffle and a
// compare, those of Q5_K and Q3_K's high-mask bits shifted into place).
// VecDotRows's Q4_K rows (and VecDotRows2's) have an AVX-512 form (dotRowsQ4_KQ8_KAVX512P, …P2:
// two chunks' codes a step, permuted by one VPERMB; the same bits; on
// session 52's Zen 5 VM ~1.2× the AVX2 row kernel in cache and from
// memory, and the 1B-shaped Q4_K model's decode 28–33 against 26–27
// tokens/s, alternating in one process). So have its Q6_K rows (a
// quarter of a Q4_K_M model's weights; dotRowsQ6_KQ8_KAVX512P, …P2: a
// half's ql and qh bytes permuted by one VPERMB each before the codes
// are rebuilt 64 at a time, the activations permuted and their −32
// offset terms formed once a call (prepQ6_KY512) instead of for every
// weight row, the products scaled by VPDPWSSD; the same bits; on session
// 53's Zen 5 VM 5.0–5.4 µs against 10.6–12.0 for 64 rows of 4,096
// weights in cache, 29–36 GB/s against 16–19 from memory, the two-row
// form 7.9–8.4 µs against 17.8–19.6), its Q5_K rows (Q5_K_M models;
// dotRowsQ5_KQ8_KAVX512P, …P2: Q4_K's form with each chunk pair's fifth
// bits from the qh bytes permuted once a block by one VPERMB, the
// activations prepared once a call as for Q4_K; the same bits; 6.7–7.1
// µs against 11.2–11.7 in cache, 22–26 GB/s against 14–16 from memory,
// the two-row form 10.0–10.4 µs against 17.1–18.5) and its Q8_0 rows
// (dotRowsQ8_0Q8_0AVX512P: four rows at a time on Q4_0's prepared
// activations, the quants gathered by VPERMT2B and multiplied by VPDPBUSD
// as x+128 against −128·Σy, each block's four row products added by one
// VADDPS; the same bits; 4.2–4.4 µs against 14.7–16.2 in cache, 20–27
// GB/s against 16–18 from memory; session 53's Zen 5 VM). VecDotRows's two-row Q4_0
// kernel has an AVX-512 form too (F, BW, VL,
// VBMI, VNNI: VPERMT2B gathers a four-block quad's quants, VPDPBUSD
// multiplies them; ~1.2× the AVX2 kernel in cache, the same bits), and
// VecDotRows prepares the activation row for it once (prepQ4_0Y512: the
// quads' quants in the kernel's order, their −8·Σy and scales) instead of
// gathering it again for every pair of rows: 12–20% faster in cache for
// the kernel alone, 2–16% for 64 rows with the preparation. Its prefetches go to L2. W13 on 2 cores of a Zen 4 VM:
// 67–76% of the read measured beside each run against 53–64% for the AVX2
// kernel (LOOM_CPU_AVX512=off), 1.16–1.56 against 1.65–2.10 ms,
// alternating. The AVX2 kernel takes its activations prepared once a row
// too (prepQ4_0Y2: each pair of blocks' low-nibble quants side by side,
// then their high ones, so that a pair of weight blocks' nibbles is one
// 256-bit load, split and multiplied once; the blocks' 8·Σy and scales),
// and walks the pairs of rows in the assembly (dotRowsQ4_0Q8_0x2PAVX2):
// W13 on the 2 cores of a Zen 3 VM (no AVX-512), five rounds alternating,
// 1.47–1.62 ms and 70–73% of the read beside each run against 1.94–2.03
// ms and 52–63% for the kernel before (a call a pair, the activations'
// bytes and 8·Σy computed for every pair); in cache (64 rows) 9.9–10.2
// against 9.5 GB/s; each block's addition then one VADDPS for both rows
// (Q40FLOAT2T: the two rows' products paired by an unpack, where
// Q40FLOAT2 adds and shuffles each row's on its own): in cache 10.3–10.6
// against 10.2–10.3 GB/s, on W13 within the VM's noise (1.52–1.74 ms and
// 67–86% of the read against 1.58–1.89 and 72–79%, eight rounds
// alternating). Tried and left (same session): four rows at once, the
// four rows' products of a quad transposed so that each block's addition
// is one VADDPS for the four rows (the same bits): as fast in cache
// (10.2–10.4 GB/s both) but W13 2.13–2.38 ms against 1.65–1.82, four
// alternating rounds (four streams of weights, each prefetched a line a
// quad).
// VecDotRows2 takes two activation rows (a prompt's product): Q4_K, Q5_K
// and Q6_K have kernels that unpack each weight block once for both rows
// (dotRowsQ4_KQ8_KAVX2P2, dotRowsQ5_KQ8_KAVX2x2, dotRowsQ6_KQ8_KAVX2x2: the
// row loop in the assembly, as the one-row kernels), each row's
// bits those of its one-row kernel; 1.3–1.4× in cache.
// Unlike GGML's AVX2 code these return the twins' bits exactly (NaN
// payloads aside): the integer sums are exact for any bytes and the float
// operations are the twin's, in the twin's order, without FMA. The Go twins
// run everywhere else and are the oracle of the assembly's tests. On a
// 4096-value row (2-core AMD EPYC, medians of 10 runs): Q4_0 333 ns vs
// 5.1 µs (15×), Q8_0 288 ns vs 3.6 µs (12×), Q4_K 194 ns vs 4.7 µs (24×),
// Q6_K 156 ns vs 8.8 µs (56×). The Q4_0/Q8_0 kernels are bound by GGML's
// serial float32 sum over 32-value blocks, which exactness keeps. The
// other six, added later (the CI machine, medians of 5 runs, each beside
// its twin in the same run): Q4_1 395 ns vs 4.0 µs (10×), Q5_0 390 ns vs
// 5.3 µs (14×), Q5_1 450 ns vs 5.4 µs (12×), Q2_K 210 ns vs 5.4 µs (26×),
// Q3_K 232 ns vs 9.9 µs (43×), Q5_K 228 ns vs 6.8 µs (30×). The 32-value
// formats then took four blocks at a time, as Q4_0 does (their integer
// sums side by side, the float products four lanes at once with the
// twin's roundings, the serial sum kept): alternating with the one-block
// kernels, three rounds, Q4_1 264–321 against 432–488 ns, Q5_0 358–464
// against 500–525, Q5_1 346–425 against 559–595.
//
// "GGML's" means its reference C code compiled without floating-point
// contraction, each float32 operation rounded: what GGML's x86-64 baseline
// build computes. Go may fuse a*b+c into an FMA on some targets; this
// package converts every such product explicitly to float32, which forbids
// the fusion, so the results are the same on every platform. Where GGML's
// code converts an out-of-range float to an integer (NaN or ±Inf after the
// reciprocal of a subnormal scale), this package returns what x86-64
// returns. Inputs with NaN or ±Inf quantize without error to whatever
// GGML's formulas give.
//
// The golden test checks all of this against GGML's own code:
// quant/testdata/ggml-golden.json holds the SHA-256 of GGML's quantized
// bytes, dequantized floats and dot-product bits for 12 seeded input
// families (normal, uniform, all-positive, outliers, all-zero blocks,
// tiny, f32-subnormal, one huge value per block, constant blocks, exact
// ties, large, mixed magnitudes) and random block bytes, for every type;
// scripts/ggml-golden/gen.sh regenerates it from a ggml checkout.
//
// # Q8_1's s
//
// A Q8_1 block stores d and s. GGML's quantize_row_q8_1_ref, and therefore
// Quantize, stores s = d·Σq (with d before its f16 rounding). Candle's CUDA
// quantize_q8_1, which Loom's GPU mat-vec kernels port, stores s = Σx, the
// sum of the unquantized activations, and computes q = round(x/d) by
// division instead of by multiplication with 1/d. Both are approximations of
// the same sum and the dot products read s from the block either way.
// Loom's GPU kernels will quantize their activations on the device the way
// Candle does (Σx; Candle's CUDA results are the parity reference for those
// kernels), and the CPU path uses this package's Quantize (d·Σq, as GGML's
// CPU backend); a Q8_1 row is only ever consumed by the code that wrote it,
// so the two never meet.
//
// # Precision
//
// Scales are f16: a block whose scale falls below f16's normal range
// (2^-14 ≈ 6e-5: a Q8_0 block whose largest |x| is below 0.008, a Q4_0
// block below 0.0005) loses precision, and one below f16's smallest
// subnormal quantizes to zeros, in GGML as here (a Q5_K row of
// 1e-5-sized values comes back 2.3× off). Round-trip errors on Gaussian
// data, relative to the input's RMS: Q8_0 0.55%, Q6_K 1.8%, Q5_K 3.6%,
// Q5_0 4.2%, Q4_K 7.1%, Q4_0 8.6%, Q3_K 15%, Q2_K 29% (the bounds the
// tests enforce are in roundtrip_test.go).
//
// Quantizing is single-threaded per call; the k-quant searches cost
// 0.05–0.2 µs per value (Q6_K the least, Q2_K the most), so callers
// quantizing large tensors split them by rows across goroutines (blocks
// are independent).
package quant

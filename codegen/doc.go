// Package codegen renders planned kernels (plan.Kernel) as HIP C++ source
// for the runtime compilers of package hip: hiprtc (AMD, ROCm 5.2 and
// later) and NVRTC (NVIDIA, HIP's NVIDIA platform spoken directly):
// elementwise kernels (Elementwise, below) and row kernels — reductions,
// softmax, norms, fused with their elementwise prologues and epilogues
// (Rows, see "Row kernels"). Kernel(k, t) picks the right one.
//
// # Contract
//
// Elementwise(k, t) returns a Source: a complete translation unit (Code =
// PreludeFor(t, Body) + Body: of the prelude, only the helpers Body uses,
// transitively) with one extern "C" entry point, Name, and its launch
// shape (Block, Grid). The kernel takes exactly one device pointer per
// operand, in k.Ins order, then the output pointer (Params); each pointer is
// the base of the operand's buffer, whose layout offset is baked into the
// code. Buffers must be at least 16-byte aligned (device allocations are
// 256-byte aligned). Nothing else is passed: no sizes, no layout array.
// Compile with the compilers' defaults; never with fast-math options
// (-ffast-math, --use_fast_math, -ftz=true), which would change results.
//
// Name is the kernel name made a C identifier plus 8 hex digits of a hash
// of the whole source (Code, trimmed prelude included): equal sources get equal names, and distinct sources
// distinct ones (barring a 32-bit hash collision between kernels of the same
// ops and size), so the executor's cache, keyed by source, and the loaded
// functions, looked up by name, agree. Body can be concatenated with other
// bodies for the same target after one Prelude(t), or after
// PreludeFor(t, their concatenation) (the per-kernel helpers live in a
// namespace named after the kernel); the tests compile hundreds of kernels
// that way.
//
// Elementwise is a pure function of the kernel and the target, safe for
// concurrent use. It refuses, naming the op and dtype, anything outside the
// op table's contract: reduction and indexing ops and row kernels (not
// elementwise), a view or input op as an instruction, a dtype the op does
// not accept, mismatched argument dtypes, an operand layout whose dims are
// not the kernel shape or that reads past its buffer, an output buffer
// whose dtype is not the last instruction's.
//
// # Semantics
//
// The CPU twin (exec/cpu) is the spec; every op follows it:
//
//   - compute types: f32, f16, bf16 and f8e4m3 compute in float, f64 in
//     double, i64 in long long with wrapping arithmetic (through unsigned),
//     u8 and u32 in unsigned int; every intermediate is rounded to its
//     node's dtype (f16/bf16/f8e4m3 round-tripped through their storage
//     type, u8 masked), the last one by the store, so fused and unfused
//     kernels agree bit for bit;
//   - f16 and bf16 live in memory as unsigned short. The prelude's
//     conversions are exact: widening is exact (an f16 NaN becomes the
//     twin's 0x7fc00000), narrowing rounds to nearest even, overflows to
//     infinity and makes any NaN the canonical quiet NaN (0x7e00, bf16
//     0x7fc0; the CPU twin's stores do the same, so NaN results are the
//     same bits in every position). On AMD they are integer code; on NVIDIA the f16 ones are
//     the cvt.rn instructions (bit-identical) plus the NaN fix-up;
//   - f8e4m3 lives in memory as unsigned char, converted by integer code on
//     every platform (no hardware fp8 instructions: they exist on a few
//     targets only): widening is exact, narrowing rounds to nearest even,
//     saturates beyond 448 (±inf included) to ±448 like Candle's float8
//     crate, and makes any NaN 0x7f, the CPU twin's canonical NaN. It has
//     16- and 8-byte vector loads and stores like u8;
//   - casts are Rust `as` casts: float → int truncates and saturates, NaN →
//     0; int → int wraps; f64 → f16/bf16/f8e4m3 and int → f16/bf16/f8e4m3 go through an
//     f32 rounded to odd, so the final rounding is a single correct one;
//   - affine computes x·mul + add in the dtype (f32 parameters for
//     f16/bf16/f8e4m3; for integers the parameters are converted to the dtype
//     first, with `as`);
//   - maximum, minimum and relu propagate NaN; sign(±0) = ±0 and
//     sign(NaN) = NaN; integer division by zero is 0 (and i64 MIN / -1 is
//     MIN, like Go);
//   - no fused multiply-add where the twin rounds twice: the prelude's
//     loom_add/sub/mul/div are __fadd_rn & co. on NVIDIA (never contracted,
//     IEEE whatever -prec-div says) and plain operators under
//     `#pragma clang fp contract(off)` on AMD (hiprtc contracts across
//     statements by default). Division and square root are correctly
//     rounded (AMD's v_sqrt_f32 is not, so f32 sqrt goes through the
//     correctly rounded f64 one: the double rounding is innocuous);
//   - transcendentals use the vendor libm's accurate functions (expf,
//     logf, erfcf, …, never __expf): about 1–4 ulp in f32, a few ulp in
//     f64. Where a float formula would amplify rounding, the prelude takes
//     care: gelu's exp argument -2u = C·x·(1 + a·x²) is computed as a float
//     pair hi + lo with error-free transformations (fma, Fast2Sum), as
//     accurate as double arithmetic but without the f32↔f64 conversions and
//     f64 operations that throttle GPUs (they made W6 compute-bound); normcdf
//     and gelu_erf below -3, and silu, sigmoid and gelu where the result
//     falls to the subnormal range, compute in double for those inputs only.
//     The f32 results stay within a few ulp of the float64 definitions over
//     the whole range (the emulation test sweeps 500,000 inputs per op;
//     worst: normcdf and gelu_erf about 6e-7 relative, the rest below 3e-7).
//     The divisions inside gelu use a 2-ulp division (__fdividef on NVIDIA)
//     whose divisor is known to lie in [1, e^80].
//
// Exact (bit for bit, NaN payloads aside where the hardware makes its own):
// integers, comparisons, where, casts, copies, full, arange, affine,
// add/sub/mul/div, maximum/minimum, neg/abs/sqr/sign/relu, ceil/floor/round,
// recip and sqrt, and rand and randn (random.go: Philox4x32-10 in integers,
// and package philox's ln, sin and cos as fixed sequences of correctly
// rounded operations, not the vendor libm). The host emulation test (emulate_test.go) runs every
// rendered kernel on the CPU through a small shim and checks exactly that
// against the twin, and the rest against its tolerances.
//
// # Kernel shape
//
// Dims, strides, offsets and the element count are compile-time constants.
// Plans are compiled once for fixed shapes, so constant index math (the
// compiler turns division by a constant into a multiply-high and shifts) is
// cheaper than Candle's device-side info array and needs no extra copy or
// parameter; the cost is one compile per distinct layout, which the kernel
// cache (keyed by source) absorbs.
//
// Index arithmetic is 32-bit (unsigned int) when the element count and
// every operand's largest address are below 2^31, else 64-bit.
//
// Each operand's layout is first reduced (unit dims dropped, dims that
// address memory as one merged). A thread computes Elems consecutive output
// elements (the vector path), chosen so that the narrowest wide access —
// the output, or an operand whose innermost stride is 1 — is 16 bytes, and
// capped so that no operand moves more than 64 bytes per thread: f32 →
// 4, f16 → 8, u8 → 16, f16 in and f32 out → 8. A kernel of 2^20 elements
// or more whose body calls a transcendental (exp, log, sin, cos, tanh,
// erf, gelu, silu, sigmoid, normcdf, elu, powf) takes at least 8, where
// that keeps every operand's vector path and the 64-byte cap (f32 gelu
// 4 → 8): its instructions, not its bytes, bound a thread of 4 values.
// Operands are read
//
//   - contiguous (or, more generally, along an innermost dim of stride 1
//     whose length is a multiple of Elems, like a bias broadcast over rows)
//     with 16-byte loads (8 for 8 u8s) when the baked offset and the outer
//     strides keep that alignment, else with scalar loads;
//   - broadcast (innermost stride 0) with one load per thread;
//   - at a constant stride along the innermost dim: one address
//     decomposition per thread, then a + j·stride;
//   - otherwise (the innermost dim is not a multiple of Elems) with an
//     address decomposed from each element's flat index.
//
// The output is contiguous and always written with 16-byte stores (8 for
// eight u8). The last count mod Elems elements (the tail) are computed by one
// thread with scalar loads and stores.
//
// Launch: 256 threads per block (a multiple of both wave sizes) and an exact
// grid, one vector per thread, plus one thread for the tail; an exact grid
// has no loop overhead and gives the hardware scheduler the whole kernel to
// balance. Kernels needing more than 2^31 threads (AMD counts a grid in
// work-items, a 32-bit number) instead get a grid-stride loop over 2^22
// blocks. A kernel with no elements still gets one block, which does
// nothing.
//
// Measured on an NVIDIA H200 (device-to-device copy 4240 GB/s), fused, in
// GB/s of inputs read once plus output written once: W1 4297 (101% of
// copy), W2 3937 (93%), W6 3667 (86.5%), a generated f32 copy 4258 (100%).
// 32 bytes per thread and grid-stride loops over 8 blocks per SM were
// slower in every case. Those W2 and W6 figures predate the float-pair gelu
// argument, which removes the f64 work from their main path. Session 52,
// H200 (copy 4245 GB/s), TestGPUBandwidth: W6 at 8 values a thread 0.135
// ms (94% of copy) against 0.142 (89%) at 4, while the copy at 8 took
// 0.556 against 0.504 and W1 and W2 (8 a thread already) at 16 took 0.702
// and 1.268 against 0.624 and 1.013: hence 8 for transcendental bodies
// only (options.heavyElems). Session 53, H200, `loom bench` beside
// peers_fusion.py in one call: W6 0.135 ms (94% of copy; Inductor 0.131)
// against session 52's 0.143, W1–W5 unchanged.
//
// Not done: tiled (shared-memory) transposes — a transposed operand is read
// with a stride, so its reads are uncoalesced; streaming cache hints.
//
// # Row kernels
//
// Rows(k, t) renders a row kernel (k.RowAxes > 0: Shape's trailing RowAxes
// dims form rows of RowLen elements; exec/plan.go). The Source has the same
// contract as an elementwise one, plus: Launches lists the launches in
// stream order (one, or two for a two-stage reduction), every launch taking
// Params; ScratchBytes > 0 adds a last parameter, a scratch buffer of that
// many bytes (16-byte aligned, contents irrelevant, live for the step);
// Row is set (a block's threads cooperate through shuffles and barriers,
// so the host emulation runs blocks as fibers).
//
// Threads. A row is handled by a group of G lanes, a power of two: the
// smallest with G·4 ≥ the row's chunks (a chunk is Elems consecutive
// elements, 16 bytes of the narrowest contiguous access, like the
// elementwise vector path, and a divisor of the row length), at most 1024.
// Groups of G ≥ 256 are a block; smaller groups share blocks of 256 (a
// multiple of both wave sizes): one row per wave, or several rows per wave
// for short rows (G < LOOM_WAVE), one thread per row for rows of one
// element. Lane l takes chunks l, l + G, … (coalesced), with 16-byte loads
// and stores where the layout allows (contiguous along the row and the
// base offset and outer strides 16-byte aligned), else scalar accesses
// (strided or decomposed addresses). Rows are baked constants like
// everything else. A group combines a reduction with a butterfly of
// loom_shfl_xor within each wave (offsets below min(G, LOOM_WAVE): nothing
// assumes 32), then, for groups of several waves, through shared memory
// (one slot per wave) and a second butterfly over the waves' results; every
// lane ends with the same bits, so row values need no broadcast. The
// rendered wave size is checked against the prelude's LOOM_WAVE by a
// static_assert. Every lane executes every shuffle and barrier (rows past
// the end only skip their memory accesses).
//
// Passes. The instructions run per row in order, grouped into passes over
// the row: a whole-row instruction runs in the first pass where its
// arguments are known, and a reduction's row value is known after the pass
// that reads its input (softmax: max in pass 0, exp and sum in pass 1, the
// division and the store in pass 2). Row values (reductions and what is
// computed from them and from row operands) are computed redundantly by
// every lane of the group, in registers. A whole-row value needed in
// several passes is either kept in registers (a local array of
// iters·Elems values per lane, indexed by compile-time constants in fully
// unrolled loops) or recomputed from the operands in each later pass
// (reloading them, from L2 for short rows). The rule: keep a value that
// several passes need where one of its readers is needed in one pass only
// (a reduction, or the end of a chain) — softmax keeps x·0.125 and exp,
// layer norm keeps x and x − mean, rms norm keeps x — when the kept values
// fit 64 32-bit registers per lane (and half the register file of a full
// block); otherwise (rows longer than about 16K f32 for softmax) every pass
// recomputes.
//
// Two stages. A kernel with a single reduction read in one pass whose row
// value (or a row-value epilogue of it) is the output, over fewer than 512
// rows that each span at least two chunks of 256 lanes × 8 chunks, runs in
// two launches: blocks of 256 lanes each reduce one such chunk of a row to
// a partial (value, and index for max/min of floats and arg reductions) in
// the scratch buffer; then a group per row combines its partials (in chunk
// order per lane, then the butterfly) and computes the epilogue. A whole
// tensor of 2^24 f32 is 2048 partial blocks. The result is deterministic.
//
// Semantics (the CPU twin, exec/cpu/reduce.go): sums of f16, bf16 and f32
// accumulate in float (Candle accumulates half sums in half; like the twin
// we do not), f64 in double, integers in their compute type with wrapping
// (u8 and u32 sums equal the twin's int64 sums modulo 2^8 and 2^32), and
// an empty row sums to 0; max and min propagate NaN; argmax and argmin
// return the first index of the extreme, a NaN counting as the extreme.
// Max and min of floats, and all arg reductions, carry (value, index)
// pairs: a lane scans its elements in increasing position keeping the
// first best, and every combining step orders pairs with loom_beats_max /
// loom_beats_min (NaN first, then the value, then the smaller index): a
// total order, so any tree gives the twin's first-index answer, including
// the sign of a zero maximum (max(-0, +0) is whichever comes first) and
// the first NaN's payload. Intermediates are rounded to their dtypes as in
// elementwise kernels, so max/min/argmax/argmin and integer sums are bit
// for bit the twin's. Float sums associate differently (the twin runs 8
// float32 running sums; here each lane keeps Elems running sums over its
// chunks, then a tree): they agree to about n·eps of Σ|x| in the worst
// case and are usually more accurate than the twin's, which on rows of few
// distinct values errs like L·eps (a layer norm over 8192 small integers
// differs from the twin by about 1e-5 relative; the float64-referenced
// conformance suite passes).
//
// Measured on an NVIDIA H200 (copy 4213–4243 GB/s in the same runs),
// 8192 × 8192 f32, fused, median of 25 runs: W3 softmax(x·0.125)
// 3461–3522 GB/s (82–84% of copy), W4 layer_norm 3928–3972 (93%), W5
// rms_norm from primitives 3915–3974 (93–94%), W7 sum 4145–4162 (98–99%).
// W3 is compute-bound rather than memory-bound: per element it pays an
// accurate expf, a correctly rounded division and the NaN- and
// first-index-aware max (Inductor uses exp2 approximations and a
// reciprocal). 2 chunks per lane (a group of 1024) with
// __launch_bounds__(1024, 2) measured 84.4% once (rowOptions.minBlocks).
package codegen

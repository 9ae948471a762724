// Package philox is Loom's random number generator: the counter-based
// Philox4x32-10 of Salmon, Moraes, Dror and Shaw ("Parallel random numbers:
// as easy as 1, 2, 3", SC 2011), and the uniform and normal variates Loom's
// rand and randn ops draw from it. It is the specification both executors
// follow bit for bit: the CPU executor calls it, and the GPU code generator
// renders the same arithmetic as C from the constants exported here
// (codegen/random.go). It has no executor inside.
//
// # The generator
//
// Philox4x32-10 maps a 128-bit counter (four 32-bit words) and a 64-bit key
// (two words) to four 32-bit words, with the constants and round function
// of Random123's philox4x32 (and curand's and PyTorch's Philox): per round,
// with multipliers M0 = 0xD2511F53 and M1 = 0xCD9E8D57,
//
//	(hi0, lo0) = M0·c0, (hi1, lo1) = M1·c2  (64-bit products)
//	c = (hi1 ⊕ c1 ⊕ k0, lo1, hi0 ⊕ c3 ⊕ k1, lo0)
//
// ten rounds, the key bumped by the Weyl constants (0x9E3779B9,
// 0xBB67AE85) before each round after the first. The Random123 known-answer
// vectors are the tests.
//
// # The stream
//
// A seed (uint64) keys the generator: key = (low word, high word). The
// stream of a seed is a sequence of values indexed by a position p (uint64,
// wrapping). Element i of a rand/randn tensor with offset o is the value at
// position p = o + i (row-major i), so every element is a pure function of
// (seed, o + i) and a fused kernel computes it where it is needed.
// Positions map onto Philox blocks by the compute type of the dtype:
//
//   - float32 path (f32, f16, bf16): block b = p / 4, lane l = p mod 4; the
//     block's words are Philox4x32-10(counter = (b low, b high, 0, 0),
//     key). Uniform: u = (w[l] >> 8) · 2⁻²⁴, in [0, 1 − 2⁻²⁴], every value
//     a multiple of 2⁻²⁴ (24 random bits, exact in float32). Normal:
//     lanes pair up (0, 1) and (2, 3): the pair (a, c) = (w[2j], w[2j+1])
//     gives u1 = ((a >> 8) + 1) · 2⁻²⁴ in [2⁻²⁴, 1] and the angle
//     θ = 2π · (c >> 8) · 2⁻²⁴; r = √(−2 ln u1); lane 2j holds r·cos θ and
//     lane 2j+1 holds r·sin θ (Box–Muller). |z| ≤ √(48 ln 2) ≈ 5.77.
//   - float64 path (f64): block b = p / 2, half h = p mod 2. Uniform:
//     u = ((w[2h] >> 5)·2²⁶ + (w[2h+1] >> 6)) · 2⁻⁵³ (53 random bits, as
//     MT19937's genrand_res53). Normal: u1 = (m + 1) · 2⁻⁵³ with m the
//     53-bit integer of (w0, w1) as above, θ = 2π · k · 2⁻⁵³ with k that of
//     (w2, w3); position h = 0 holds r·cos θ, h = 1 holds r·sin θ.
//     |z| ≤ √(106 ln 2) ≈ 8.57.
//
// The block counter equals PyTorch's philox_engine(seed, subsequence 0,
// offset b): the words are PyTorch's and curand's for that counter, though
// the variates built from them are Loom's own.
//
// Because the offset counts positions, a caller continues a stream after
// drawing n values with offset o + n: the next tensor then shares no
// position with the previous one. Two tensors with the same seed and
// overlapping position ranges share their underlying words (a rand and a
// randn of the same seed are correlated): give independent tensors
// different seeds or disjoint ranges.
//
// # The arithmetic
//
// Everything above is integer arithmetic or exact in floating point except
// ln, the square root, sin and cos. Those are computed here with plain IEEE
// operations — add, subtract, multiply, divide and square root, each
// correctly rounded on every executor (the GPU prelude's loom_add & co.;
// in Go, explicit conversions forbid fusing a·b + c into an fma) — in a
// fixed order, with fixed polynomial coefficients, so the results are the
// same bits everywhere:
//
//   - Log32 / Log64: x = 2^e · f with f in [√2/2, √2), s = (f − 1)/(f + 1),
//     ln f = 2s + s·z·P(z) with z = s² and P the atanh series
//     (2/3, 2/5, …; 5 terms in float32, 10 in float64), then
//     e·ln2hi + (e·ln2lo + ln f) with ln2hi short enough that e·ln2hi is
//     exact. About 2 ulp.
//   - SinCos32 / SinCos64 of a whole turn fraction k/2^24 (k/2^53): the
//     quadrant n = round(4k/2^24) and the remainder j = k − n·2^22 are
//     exact integer arithmetic; a = j·2⁻²² is in [−½, ½) and exact; then
//     sin(πa/2) = a·S(a²) and cos(πa/2) = 1 + a²·C(a²) with the Taylor
//     coefficients of (π/2)^k/k! rounded once (sine through a⁹, cosine
//     through a¹⁰ in float32; a¹⁷ and a¹⁶ in float64, where the next
//     terms are below 2⁻⁵⁵), and the quadrant's rotation. About 2 ulp.
//
// The accuracy of these functions only shapes the distribution within an
// ulp or two; what matters for Loom is that they are the same everywhere,
// which the host emulation of the generated kernels (codegen) and the GPU
// conformance suite check bit for bit.
package philox

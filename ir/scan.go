package ir

import "slices"

// Cumsum (OpCumsum) is an inclusive scan: out[…, i, …] = x[…, 0, …] + … +
// x[…, i, …] along Params[0], as Candle's Tensor::cumsum (which computes it
// as a matmul with a triangular matrix of ones; Loom scans). Float addition
// is not associative, so the order of the additions is part of the op's
// definition: every executor, every kernel of every executor, fused or
// not, adds in this order and gives the same bits (NaN payloads aside).
//
// # The order
//
// Take one sequence x_0 … x_{N-1} along dim, values widened to the compute
// type (float32 for f32, f16 and bf16; float64 for f64). Cut it into tiles
// of ScanTile = 4096 elements, each tile into ScanGroups = 16 groups of
// ScanGroup = 16 chunks of ScanChunk = 16 elements (the last tile, group
// and chunk may be short). With k, g, q, p the tile, the group in the tile,
// the chunk in the group and the position in the chunk of element i:
//
//  1. chunk prefix: l0_i = x_i at p = 0, else l0_{i-1} + x_i;
//     the chunk's total c is l0 at its last element;
//  2. group prefix of chunk totals: l1_q = c_0 at q = 0, else l1_{q-1} + c_q;
//     the group's total d_g is l1 at its last chunk;
//  3. tile prefix of group totals: l2_g = d_0 at g = 0, else l2_{g-1} + d_g;
//     the tile's total A_k is l2 at its last group;
//  4. chunk offset in the tile (exclusive): none for chunk (0, 0);
//     l1_{q-1} in group 0; l2_{g-1} at q = 0; else l2_{g-1} + l1_{q-1};
//  5. tile offset (exclusive): none for tile 0; O_1 = A_0;
//     O_k = O_{k-1} + A_{k-1};
//  6. out_i = O_k + (e + l0_i), leaving out the terms that are none.
//
// f16 and bf16 outputs are rounded once from the float32 result (Candle's
// half matmul rounds per its GEMM). Integers wrap (u8, u32 modulo 2^8, 2^32;
// i64 two's complement), where every order gives the same result.
//
// The first element of a sequence is x_0 itself (no 0 + x_0: −0 stays
// −0), and out_i depends on x_0 … x_i only: an Inf or NaN reaches the
// elements after it, never those before (Candle's matmul multiplies later
// elements by 0, so a later Inf or NaN makes earlier outputs NaN).
//
// # Why this order
//
// Every quantity is a running sum, so one pass with four accumulators
// computes it (the GPU's one-thread-per-sequence kernel streams this way);
// a tile's outputs depend on the tiles
// before it only through O_k, a sequential sum of tile totals, so a long
// sequence can be scanned as independent tiles plus one carry (the CPU's
// two-pass scan, the GPU's decoupled look-back, which folds the totals it
// finds forward from the nearest inclusive prefix and so gets O_k's exact
// bits whatever the race); and inside a tile the three levels of 16 map
// onto a block of 256 threads holding 16 elements each, the chunk and
// group totals scanned by 16 threads and 1 thread in shared memory, with
// nothing that depends on the wave size.
//
// Every input reaches out_i through at most 48 + k additions (15 in each
// of the three levels, 3 for the offsets, k − 1 for the tile carry), so
// |out_i − Σ x_j| ≤ γ(48 + k)·Σ|x_j| before the f16/bf16 rounding, with
// γ(h) = h·u/(1 − h·u) and u the compute type's unit roundoff (Higham,
// Accuracy and Stability of Numerical Algorithms, §4.2).
const (
	ScanChunk  = 16                                 // elements summed in sequence into a chunk total
	ScanGroup  = 16                                 // chunks per group
	ScanGroups = 16                                 // groups per tile
	ScanTile   = ScanChunk * ScanGroup * ScanGroups // elements per tile (4096)
)

// CumsumDim returns a cumsum node's dim.
func (n *Node) CumsumDim() int { return int(n.Params[0]) }

// verifyCumsum checks what verifyIndex does not: an integral dim, and an
// output of the argument's shape (the dtype rule is checked there).
func verifyCumsum(n *Node, bad func(*Node, string, ...any)) {
	if d := n.Params[0]; d != float64(int(d)) {
		bad(n, "cumsum dim %v is not an integer", d)
	}
	if a := n.Args[0]; !slices.Equal(a.Shape, n.Shape) {
		bad(n, "cumsum of %v%v has shape %v, want the argument's", a.DType, a.Shape, n.Shape)
	}
}

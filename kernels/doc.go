// Package kernels holds Loom's hand-written GPU kernels for the indexing,
// sorting and data-movement ops (index_select, gather, scatter, scatter_add,
// index_add, cat, slice_assign, argsort) and for the pools and upsampling
// (max_pool, avg_pool, upsample_nearest, upsample_bilinear: window.hip,
// window.go), the scan (cumsum) and causal attention (attention.hip,
// attention.go), and plans their launches.
//
// The kernels are HIP C++ (index.hip, argsort.hip, scan.hip,
// attention.hip, embedded with go:embed);
// the same text compiles with hiprtc (AMD) and NVRTC (NVIDIA) after
// codegen.PreludeFor(target, text), which supplies the platform macros
// (LOOM_AMD or LOOM_NVIDIA, LOOM_WAVE) and, of the f16/bf16 ↔ float
// conversions and arithmetic helpers (loom_add, …) shared with the
// elementwise kernels, those the text uses.
// Their Go twins, the executable spec, are in exec/cpu/index.go and
// exec/cpu/pool.go and exec/cpu/scan.go (and CumsumTwin here models
// scan.hip's block structure); the GPU results equal the CPU's bit for bit
// (float adds aside, where NaN payloads follow the hardware), except
// attention, whose sums (like a matmul's) are defined up to their order:
// exec/cpu/attention.go computes them in float64, the GPU in float32
// blocks of keys, and the conformance group compares both with a float64
// reference within the accumulation error.
//
// # Contract
//
// Plan(k, target) takes a planned step whose kernel has exactly one
// instruction, an indexing op or a window op with a kernel here (Handles),
// and returns the launches that compute it, in
// order, and the scratch buffers they need. Each Launch names its entry point
// and carries the complete source (the prelude included); the launches of
// one step share one source, so the executor compiles it once (its code
// cache is keyed by the source). Every kernel parameter is a device pointer,
// listed by Launch.Args: an operand (Kernel.Ins[i], at its buffer's base),
// the output (contiguous, the node's shape), the error flag, a scratch
// buffer, or the executor's counters (CounterWords uint32s, zero on entry
// and left zero: attention's part blocks count themselves in, and each
// row's last block merges the row). Launches use static shared memory only
// (SharedMem is 0) and must run in order on one stream. An empty output
// needs no launch. Every entry point begins with codegen's
// loom_grid_entry(): the GPU executor launches with programmatic
// dependence on the kernel ahead where the device has it.
//
// Error flag: ErrorFlagWords int64s, zeroed before the step. The first
// thread that meets an id outside [0, dim) that is not the ids dtype's
// sentinel swaps word 0 from 0 to that sentinel (atomicCAS; the sentinel is
// never 0) and writes word 1 = the id, word 2 = its position (flat index
// into the ids tensor), word 3 = the dim size. After the step the executor
// reads the flag back; DecodeError formats the CPU executor's message from
// it. Kernels skip a bad id and go on, so the output is then garbage and
// must not be used. With several bad ids, which one is reported is up to
// the hardware.
//
// # Decisions
//
//   - Layouts are baked in: dims, strides, offsets and sizes are constants
//     of the source (as in codegen), so each distinct op × value dtype × ids
//     dtype × layout is its own source, named loom_<op>_<dtypes>_<hash of the
//     source> (plus an entry suffix when a step has several launches).
//     Operands may be strided, offset or broadcast views; every read goes
//     through at_<operand>(flat index), whose dims are reduced first (unit
//     dims dropped, mergeable dims merged: a contiguous operand costs one add).
//   - Index arithmetic is 32-bit unless some tensor, operand span or scratch
//     buffer reaches 2^31 elements, then 64-bit.
//   - Values move through the CPU twin's load and store: f16/bf16/f8e4m3
//     are widened to float and rounded once on store (so a NaN becomes the
//     canonical NaN the CPU produces); u8/u32 adds wrap; i64 adds wrap
//     through unsigned arithmetic. argsort orders f16/bf16/f8e4m3 keys by
//     their float value.
//   - index_select, gather, cat, slice_assign: one thread per output element
//     (grid-stride loops, blocks of 256).
//   - scatter, scatter_add, index_add: an init launch copies dst into the
//     output (one thread per element); then one thread per (left, right)
//     position loops over the source's dim in increasing order. Duplicates
//     therefore resolve exactly as on the CPU (the last write wins, adds in
//     order), deterministically and without atomics. For f16/bf16/f8e4m3
//     adds the loop accumulates in a float scratch buffer and a third launch rounds
//     it into the output, as the CPU accumulates in float and rounds once.
//     The loop is serial along the dim: a scatter into a 1-D tensor runs on
//     one thread.
//   - argsort (stable, u32 indices along the last dim): each value becomes
//     an unsigned key whose integer order is the spec's (floats: sign-
//     magnitude bits flipped, -0 equal to +0, every NaN the largest key;
//     descending: the bitwise not, so NaN comes first and ties stay in index
//     order), paired with its column. Pairs compare by key, then column, so
//     all pairs are distinct and any correct sort gives the stable order: a
//     32-bit key and its column pack into one 64-bit word (one comparison);
//     64-bit keys (f64, i64) use a 16-byte pair. A row that fits one block
//     (its length padded to a power of two: at most 4096 pairs of 32-bit
//     keys or 2048 of 64-bit keys, 32 KiB of shared memory) is sorted by a
//     bitonic network in one kernel, one block per row (or several short
//     rows per block): each thread holds E = 8 consecutive pairs in
//     registers; compare-exchanges at distance < E happen in registers,
//     partners in the same wave are reached with shuffles (LOOM_WAVE lanes,
//     32 or 64), farther ones through shared memory. Padding pairs are all
//     ones and sort last. A longer row is cut into tiles of that size, each
//     sorted by the same kernel into a scratch buffer of pairs; merge passes
//     (one thread per pair: its rank in its run plus a binary search for its
//     rank in the other run) double the sorted runs, ping-ponging between
//     two scratch buffers, and the last pass writes the indices.
//   - Pools and upsampling (window ops): one thread per output element,
//     consecutive threads on consecutive output columns (coalesced stores,
//     loads of a window row close together), every size, stride, padding
//     and scale a constant of the source; windows of up to 64 elements
//     unroll completely (bounds tests become predicates). Their operand is
//     the packed array fuse hands window ops, read at its element offset.
//     Max pools compare by IEEE 754-2019 maximum (+0 > −0, NaN propagates),
//     avg pools sum the window in row-major order in float (f16/bf16/f32), double
//     or exact 64-bit integers and divide once; bilinear upsampling computes
//     coordinates and the interpolation in double, every operation rounded
//     (no contraction), and rounds once to the dtype. A fused window
//     kernel (plan.WindowAt) reads its input through the prologue and
//     stores through the epilogue, both rendered by codegen.ScalarFunc as
//     device functions of the flat index (LOOM_XV, LOOM_STORE), so it
//     computes the values of its unfused steps. Convolutions have their
//     own kernels (conv.hip) and run through exec/rocm/conv.go; the
//     channels-last library path moves its operands and output with
//     transpose.hip's tiled transposes, and a fused conv kernel
//     (plan.ConvAt) gets its own build of them with the epilogue applied
//     at each stored element (TransposeFused).
//   - Skinny products (gemv.hip, at most 8 rows): GemvSource's entries, and
//     per fused matmul kernel (plan.MatmulAt) one entry with its epilogue
//     applied at each stored element (GemvFused).
//   - cumsum adds in the order ir/scan.go defines (chunks of 16, groups of
//     16 chunks, tiles of 4096, a sequential carry of tile totals), so the
//     bits match the CPU's whatever kernel runs. Plan picks one of four
//     (cumsumConfig): a thread per sequence, streaming with four running
//     sums (sequences of at most 16, or strided columns when there are at
//     least 8192 of them, 16 or more adjacent); a block per tile of up to 16
//     short rows (16 … 256 threads per row, 16 elements per thread: the
//     three levels are registers, 16 raking threads and one thread in
//     shared memory); a block per long row, tile after tile with the carry
//     in a register (at least 1024 rows: 8192 × 8192 runs here); or, for
//     few long rows, a decoupled look-back: one tile per block in the order
//     of a global counter, each publishing its total, then its inclusive
//     prefix, after folding forward from the nearest published prefix the
//     totals in between — the sequential carry's bits whatever the race (an
//     init launch clears the flags: scratch starts with garbage). Each
//     element is read once and written once; rows that are contiguous,
//     aligned and a multiple of 16 bytes move as 16-byte vectors, coalesced,
//     through a padded shared-memory stage (conflict-free chunk reads).
//     Strided (non-last-dim) sequences are read in place through the
//     layout, neighbouring sequences by neighbouring threads; no transposed
//     copy is made.
//   - Kernels are written for any wave size: nothing assumes 32 lanes.
//
// # Missing from codegen's prelude
//
// The wave shuffle (as_shfl32 in argsort.hip: __shfl_xor_sync on NVIDIA,
// __shfl_xor on AMD) is defined here, since the prelude has none.
package kernels

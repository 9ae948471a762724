// Package cpu is Loom's CPU executor and the plain-Go twin of every GPU
// kernel: the executable spec that faster paths are checked against.
//
// A kernel (one op, or a fused group of ops) runs in tiles of the output's
// flat index range. Each worker owns scratch tiles, one per operand and one
// per instruction, allocated once per worker and reused for every tile. A
// tile is loaded from its operand's buffer through the operand's strided
// layout (broadcast, transposed and offset reads cost no copy of the input),
// widened to the compute kind (f16, bf16, f8e4m3 → float32; u8, u32 →
// int64; f8e4m3 through a 256-entry table, never the F16C/AVX2 paths), then
// every instruction runs as one tight loop over the tile, and the last tile
// is narrowed into the output buffer. Tiles are spread over all cores on a
// process-wide team of helper goroutines that stay ready between loops
// (team.go: the caller takes a part too, and runs any part no helper has
// claimed); small kernels run on the calling goroutine.
//
// Indexing, matmul and window steps (pools, upsampling: pool.go) run their
// own loops over whole tensors instead of tiles.
// Matmul steps (matmul.go) run on the host BLAS, except products of a few
// rows against weight rows (a decode step's), which read the weight in
// place in the executor's own kernels (hgemv.go); convolution steps
// (conv.go) too, except float32 GEMMs on CPUs with AVX-512, which run on
// the executor's own kernel (sgemm.go). A convolution's scratch (column
// tiles, row copies) is bounded and comes from the arenas like the
// temporaries.
//
// Each intermediate value is rounded to its node's dtype (f16/bf16/f8e4m3
// values to their precision, u8/u32 wrapped) right after it is computed, so a fused
// kernel gives bit-for-bit the results of running its ops one at a time.
package cpu

// ---- transpose.hip: batched transposes for the channels-last library convs (package kernels, conv.go) ----
//
// Batched transpose of 2-byte elements: in [B][R][C] → out [B][C][R]. The
// channels-last path of the library convs (exec/rocm/conv.go) runs on it:
// NCHW → NHWC for the input (R = C channels, C = H·W pixels), KCRS → KRSC
// for the weight, and NHWC → NCHW for the output. A block of 32 × 8
// threads moves one tile through shared memory, so that both the reads and
// the writes are runs of consecutive elements; tiles are numbered in
// grid.x (tilesC across C), matrices in grid.y (a grid-stride loop past
// 65535). Two kernels (kernels.TransposePlan picks):
//   - loom_transpose_b2x2, where R and C are even and both arrays 4-byte
//     aligned: 64 × 64 tiles, each thread moving pairs of elements with
//     4-byte loads and stores (a warp's row is 128 bytes). With single
//     halves (32 × 32 tiles) the transposes of W12 ran at half the copy
//     bandwidth.
//   - loom_transpose_b2, anything else: 32 × 32 tiles of single elements.
// The tiles' row pitch is odd in words (b2: 34 halves, 17 words) or in
// halves (b2x2: 65), so that a column's reads fall in distinct banks.
// A fused epilogue (kernels.TransposeFused) defines LOOM_TR_POST(i, v), the
// value stored at flat index i of out for the moved value v, with
// LOOM_TR_NAME, LOOM_TR_OUT (out's element type) and LOOM_TR_EXTRA (the
// epilogue's pointers); b2x2 then stores pairs of 2-byte outputs as one
// word and wider ones one by one. Nothing depends on the wave size.
#ifndef LOOM_TR_POST
#define LOOM_TR_STORE(out, i, v) ((out)[i] = (v))
#define LOOM_TR_PAIR(out, i, v0, v1) \
  (*(unsigned int*)((out) + (i)) = (unsigned int)(v0) | ((unsigned int)(v1) << 16))
#else
template <typename T>
LOOM_DEV void loom_tr_pair(T* __restrict__ out, long long i, T a, T b) {
  out[i] = a;
  out[i + 1] = b;
}
template <>
LOOM_DEV void loom_tr_pair<unsigned short>(unsigned short* __restrict__ out, long long i, unsigned short a,
                                           unsigned short b) {
  *(unsigned int*)(out + i) = (unsigned int)a | ((unsigned int)b << 16);
}
#define LOOM_TR_STORE(out, i, v) ((out)[i] = LOOM_TR_POST(i, v))
#define LOOM_TR_PAIR(out, i, v0, v1) \
  loom_tr_pair<LOOM_TR_OUT>(out, i, LOOM_TR_POST(i, v0), LOOM_TR_POST((i) + 1, v1))
#endif
#ifndef LOOM_TR_NAME
#define LOOM_TR_NAME(SUFFIX) loom_transpose_##SUFFIX
#endif
#ifndef LOOM_TR_EXTRA
#define LOOM_TR_EXTRA
#endif
#ifndef LOOM_TR_OUT
#define LOOM_TR_OUT unsigned short
#endif
extern "C" __global__ void __launch_bounds__(256) LOOM_TR_NAME(b2)(const unsigned short* __restrict__ in,
                                                                   LOOM_TR_OUT* __restrict__ out, long long B,
                                                                   int R, int C, int tilesC LOOM_TR_EXTRA) {
  __shared__ unsigned short tile[32][34];
  const int tr = (int)(blockIdx.x / (unsigned)tilesC), tc = (int)blockIdx.x - tr * tilesC;
  const int r0 = tr * 32, c0 = tc * 32, tx = (int)threadIdx.x, ty = (int)threadIdx.y;
  const long long plane = (long long)R * C;
  for (long long b = blockIdx.y; b < B; b += gridDim.y) {
    const unsigned short* __restrict__ src = in + b * plane;
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
      const int r = r0 + ty + j, c = c0 + tx;
      if (r < R && c < C) tile[ty + j][tx] = src[(long long)r * C + c];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
      const int c = c0 + ty + j, r = r0 + tx;
      if (c < C && r < R) LOOM_TR_STORE(out, b * plane + (long long)c * R + r, tile[tx][ty + j]);
    }
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(256) LOOM_TR_NAME(b2x2)(const unsigned short* __restrict__ in,
                                                                     LOOM_TR_OUT* __restrict__ out, long long B,
                                                                     int R, int C, int tilesC LOOM_TR_EXTRA) {
  __shared__ unsigned short tile[64][65];
  const int tr = (int)(blockIdx.x / (unsigned)tilesC), tc = (int)blockIdx.x - tr * tilesC;
  const int r0 = tr * 64, c0 = tc * 64, tx = (int)threadIdx.x, ty = (int)threadIdx.y;
  const long long plane = (long long)R * C;
  for (long long b = blockIdx.y; b < B; b += gridDim.y) {
    const unsigned short* __restrict__ src = in + b * plane;
#pragma unroll
    for (int j = 0; j < 64; j += 8) {
      const int r = r0 + ty + j, c = c0 + 2 * tx;
      if (r < R && c < C) {  // C is even: c + 1 < C too
        const unsigned int v = *(const unsigned int*)(src + (long long)r * C + c);
        tile[ty + j][2 * tx] = (unsigned short)v;
        tile[ty + j][2 * tx + 1] = (unsigned short)(v >> 16);
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 64; j += 8) {
      const int c = c0 + ty + j, r = r0 + 2 * tx;
      if (c < C && r < R)  // R is even: r + 1 < R too
        LOOM_TR_PAIR(out, b * plane + (long long)c * R + r, tile[2 * tx][ty + j], tile[2 * tx + 1][ty + j]);
    }
    __syncthreads();
  }
}

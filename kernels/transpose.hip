// ---- transpose.hip: batched transposes for the channels-last library convs (package kernels, conv.go) ----
//
// Batched transpose of 2-byte elements: in [B][R][C] → out [B][C][R]. The
// channels-last path of the library convs (exec/rocm/conv.go) runs on it:
// NCHW → NHWC for the input (R = C channels, C = H·W pixels), KCRS → KRSC
// for the weight, and NHWC → NCHW for the output. A block of 32 × 8
// threads moves one tile through shared memory, so that both the reads and
// the writes are runs of consecutive elements; tiles are numbered in
// grid.x (tilesC across C), matrices in grid.y (a grid-stride loop past
// 65535). Five kernels (kernels.TransposePlan picks):
//   - loom_transpose_b2x8, where R and C are multiples of 8 and both
//     arrays 16-byte aligned: 64 × 64 tiles, each thread moving runs of
//     8 elements with 16-byte loads and stores. W12's input (32 × 256 ×
//     3136 halves) moved at 2.6 TB/s with pairs (b2x2), against 3.6 TB/s
//     for torch.compile's transpose of the same array (H200).
//   - loom_transpose_b2x2, where R and C are even and both arrays 4-byte
//     aligned: 64 × 64 tiles, each thread moving pairs of elements with
//     4-byte loads and stores (a warp's row is 128 bytes). With single
//     halves (32 × 32 tiles) the transposes of W12 ran at half the copy
//     bandwidth.
//   - loom_transpose_b2s, where C is shorter than 16 (a 3 × 3 conv's
//     weight: R = C channels, C = 9 taps): one thread an input row, read
//     whole and written at stride R (a tile would leave most of its
//     threads idle: W12's weight, 1.2 MB, took 10 µs in 32 × 32 tiles;
//     one thread an output element, b2e, 5 µs under ncu).
//   - loom_transpose_b2e, where R is shorter than 16 and C is not: one
//     thread an output element, the reads gathered.
//   - loom_transpose_b2, anything else: 32 × 32 tiles of single elements.
// Tried and dropped (H200, W12's 51 MB input and output, one call each):
// an 8 × 8 block a thread moved through registers with no shared memory
// (8 16-byte loads, the transpose as picked halves, 8 16-byte stores; a
// group of 32 threads a 32 × 64 or a 64 × 32 tile, so that either the
// loads or the stores were 128-byte runs): 0.035–0.037 ms against b2x8's
// 0.031–0.034 ms.
// The tiles' row pitch is odd in words (b2: 34 halves, 17 words; b2x8:
// 66 halves, 33 words) or in halves (b2x2: 65), so that a column's reads
// fall in distinct banks.
// A fused epilogue (kernels.TransposeFused) defines LOOM_TR_POST(i, v), the
// value stored at flat index i of out for the moved value v, with
// LOOM_TR_NAME, LOOM_TR_OUT (out's element type) and LOOM_TR_EXTRA (the
// epilogue's pointers); b2x2 then stores pairs of 2-byte outputs as one
// word and wider ones one by one. Nothing depends on the wave size.
// Stores of a pair and of a run of eight outputs at i, i+1, …: one 4- or
// 16-byte store for 2-byte outputs (i even, or a multiple of 8, and the
// array aligned to match), else one store each.
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
template <typename T>
LOOM_DEV void loom_tr_eight(T* __restrict__ out, long long i, const T* v) {
#pragma unroll
  for (int e = 0; e < 8; ++e) out[i + e] = v[e];
}
template <>
LOOM_DEV void loom_tr_eight<unsigned short>(unsigned short* __restrict__ out, long long i, const unsigned short* v) {
  uint4 u;
  u.x = (unsigned int)v[0] | ((unsigned int)v[1] << 16);
  u.y = (unsigned int)v[2] | ((unsigned int)v[3] << 16);
  u.z = (unsigned int)v[4] | ((unsigned int)v[5] << 16);
  u.w = (unsigned int)v[6] | ((unsigned int)v[7] << 16);
  *(uint4*)(out + i) = u;
}
#ifndef LOOM_TR_POST
#define LOOM_TR_STORE(out, i, v) ((out)[i] = (v))
#define LOOM_TR_PAIR(out, i, v0, v1) loom_tr_pair<unsigned short>(out, i, v0, v1)
#define LOOM_TR_EIGHT(out, i, v) loom_tr_eight<unsigned short>(out, i, v)
#else
#define LOOM_TR_STORE(out, i, v) ((out)[i] = LOOM_TR_POST(i, v))
#define LOOM_TR_PAIR(out, i, v0, v1) \
  loom_tr_pair<LOOM_TR_OUT>(out, i, LOOM_TR_POST(i, v0), LOOM_TR_POST((i) + 1, v1))
// The epilogue over the run at once where TransposeFused gives
// LOOM_TR_POST8, else element by element.
#ifdef LOOM_TR_POST8
#define LOOM_TR_EIGHT(out, i, v)                \
  do {                                          \
    LOOM_TR_OUT o_[8];                          \
    LOOM_TR_POST8(i, v, o_);                    \
    loom_tr_eight<LOOM_TR_OUT>(out, i, o_);     \
  } while (0)
#else
#define LOOM_TR_EIGHT(out, i, v)                                              \
  do {                                                                        \
    LOOM_TR_OUT o_[8];                                                        \
    _Pragma("unroll") for (int e_ = 0; e_ < 8; ++e_) o_[e_] = LOOM_TR_POST((i) + e_, (v)[e_]); \
    loom_tr_eight<LOOM_TR_OUT>(out, i, o_);                                   \
  } while (0)
#endif
#endif
// rev (every kernel's last argument before the epilogue's) takes the
// tiles and matrices in reverse order: the first blocks to run move the
// end of the array. The library conv writes its output from start to end
// and reads its input likewise, so the output transpose run in reverse
// first reads what the conv wrote last, still in the L2 cache, and the
// conv reads first what a reversed input transpose wrote last. W12 in
// bf16 on an H200 (TestGPUConvLayouts, one call, random inputs): with
// bias + ReLU 0.2289 ms in launch order, 0.2269 with the input's
// reversed, 0.2259 with the output's, 0.2238 with both; the plain conv
// 0.2132 → 0.2117.
#define LOOM_TR_TILE (rev ? gridDim.x - 1u - blockIdx.x : blockIdx.x)
#define LOOM_TR_MAT(b) (rev ? B - 1 - (b) : (b))
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
                                                                   int R, int C, int tilesC, int rev LOOM_TR_EXTRA) { loom_grid_entry();
  __shared__ unsigned short tile[32][34];
  const unsigned bx = LOOM_TR_TILE;
  const int tr = (int)(bx / (unsigned)tilesC), tc = (int)bx - tr * tilesC;
  const int r0 = tr * 32, c0 = tc * 32, tx = (int)threadIdx.x, ty = (int)threadIdx.y;
  const long long plane = (long long)R * C;
  for (long long by = blockIdx.y; by < B; by += gridDim.y) {
    const long long b = LOOM_TR_MAT(by);
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
                                                                     int R, int C, int tilesC, int rev LOOM_TR_EXTRA) { loom_grid_entry();
  __shared__ unsigned short tile[64][65];
  const unsigned bx = LOOM_TR_TILE;
  const int tr = (int)(bx / (unsigned)tilesC), tc = (int)bx - tr * tilesC;
  const int r0 = tr * 64, c0 = tc * 64, tx = (int)threadIdx.x, ty = (int)threadIdx.y;
  const long long plane = (long long)R * C;
  for (long long by = blockIdx.y; by < B; by += gridDim.y) {
    const long long b = LOOM_TR_MAT(by);
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

extern "C" __global__ void __launch_bounds__(256) LOOM_TR_NAME(b2x8)(const unsigned short* __restrict__ in,
                                                                     LOOM_TR_OUT* __restrict__ out, long long B,
                                                                     int R, int C, int tilesC, int rev LOOM_TR_EXTRA) { loom_grid_entry();
  __shared__ unsigned short tile[64][66];
  const unsigned bx = LOOM_TR_TILE;
  const int tr = (int)(bx / (unsigned)tilesC), tc = (int)bx - tr * tilesC;
  const int r0 = tr * 64, c0 = tc * 64;
  const int tid = (int)(threadIdx.y * blockDim.x + threadIdx.x), tx = tid % 8, ty = tid / 8;
  const long long plane = (long long)R * C;
  for (long long by = blockIdx.y; by < B; by += gridDim.y) {
    const long long b = LOOM_TR_MAT(by);
    const unsigned short* __restrict__ src = in + b * plane;
    // Rows r0 + ty and r0 + ty + 32, columns c0 + 8·tx … +7: C is a
    // multiple of 8, so a run is inside the matrix or past it whole.
    uint4 u[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = r0 + ty + 32 * j, c = c0 + 8 * tx;
      if (r < R && c < C) u[j] = *(const uint4*)(src + (long long)r * C + c);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = r0 + ty + 32 * j, c = c0 + 8 * tx;
      if (r < R && c < C) {
        const unsigned int w[4] = {u[j].x, u[j].y, u[j].z, u[j].w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          tile[ty + 32 * j][8 * tx + 2 * e] = (unsigned short)w[e];
          tile[ty + 32 * j][8 * tx + 2 * e + 1] = (unsigned short)(w[e] >> 16);
        }
      }
    }
    __syncthreads();
    // Output rows (input columns) c0 + ty and c0 + ty + 32, elements
    // r0 + 8·tx … +7 (R is a multiple of 8).
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int c = c0 + ty + 32 * j, r = r0 + 8 * tx;
      if (c < C && r < R) {
        unsigned short v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = tile[8 * tx + e][ty + 32 * j];
        LOOM_TR_EIGHT(out, b * plane + (long long)c * R + r, v);
      }
    }
    __syncthreads();
  }
}

extern "C" __global__ void __launch_bounds__(256) LOOM_TR_NAME(b2s)(const unsigned short* __restrict__ in,
                                                                    LOOM_TR_OUT* __restrict__ out, long long B,
                                                                    int R, int C, int tilesC, int rev LOOM_TR_EXTRA) { loom_grid_entry();
  // One thread an input row q = b·R + r of C < 16 elements, a grid-stride
  // loop over all of them (tilesC unused): the row's C consecutive
  // elements in, and out at stride R, so that consecutive threads read
  // consecutive rows and write consecutive elements of each output row.
  // 32-bit index arithmetic where every index fits, as b2e.
  const long long rows = B * (long long)R;
  const long long step = (long long)gridDim.x * blockDim.x * blockDim.y;
  const long long first = (long long)blockIdx.x * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
  unsigned short v[16];
  if (rows * C <= 0x7fffffffll) {
    for (unsigned int q0 = (unsigned int)first; q0 < (unsigned int)rows; q0 += (unsigned int)step) {
      const unsigned int q = rev ? (unsigned int)rows - 1u - q0 : q0;
      const unsigned int b = q / (unsigned int)R, r = q - b * (unsigned int)R;
#pragma unroll
      for (int c = 0; c < 16; ++c)
        if (c < C) v[c] = in[q * (unsigned int)C + c];
#pragma unroll
      for (int c = 0; c < 16; ++c)
        if (c < C) LOOM_TR_STORE(out, (b * (unsigned int)C + c) * (unsigned int)R + r, v[c]);
    }
    return;
  }
  for (long long q0 = first; q0 < rows; q0 += step) {
    const long long q = rev ? rows - 1 - q0 : q0;
    const long long b = q / R, r = q - b * R;
#pragma unroll
    for (int c = 0; c < 16; ++c)
      if (c < C) v[c] = in[q * C + c];
#pragma unroll
    for (int c = 0; c < 16; ++c)
      if (c < C) LOOM_TR_STORE(out, (b * C + c) * R + r, v[c]);
  }
}

extern "C" __global__ void __launch_bounds__(256) LOOM_TR_NAME(b2e)(const unsigned short* __restrict__ in,
                                                                    LOOM_TR_OUT* __restrict__ out, long long B,
                                                                    int R, int C, int tilesC, int rev LOOM_TR_EXTRA) { loom_grid_entry();
  // One thread an output element o = (b·C + c)·R + r, a grid-stride loop
  // over all of them (tilesC unused); 32-bit index arithmetic where every
  // index fits (64-bit divisions made W12's 1.2 MB weight take 13 µs).
  const long long n = B * (long long)R * C;
  const long long step = (long long)gridDim.x * blockDim.x * blockDim.y;
  const long long first = (long long)blockIdx.x * blockDim.x * blockDim.y + threadIdx.y * blockDim.x + threadIdx.x;
  if (n <= 0x7fffffffll) {
    for (unsigned int o0 = (unsigned int)first; o0 < (unsigned int)n; o0 += (unsigned int)step) {
      const unsigned int o = rev ? (unsigned int)n - 1u - o0 : o0;
      const unsigned int r = o % (unsigned int)R, bc = o / (unsigned int)R, c = bc % (unsigned int)C, b = bc / (unsigned int)C;
      LOOM_TR_STORE(out, o, in[(b * (unsigned int)R + r) * (unsigned int)C + c]);
    }
    return;
  }
  for (long long o0 = first; o0 < n; o0 += step) {
    const long long o = rev ? n - 1 - o0 : o0;
    const long long r = o % R, bc = o / R, c = bc % C, b = bc / C;
    LOOM_TR_STORE(out, o, in[(b * R + r) * C + c]);
  }
}

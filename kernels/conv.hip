// ---- conv.hip: Loom's portable convolution kernels (package kernels, conv.go) ----
//
// The GPU executor's own convolution path when no vendor library runs the
// step (exec/rocm/conv.go): im2col + GEMM for conv, GEMM + col2im for
// transposed conv in f32/f64, and a direct kernel for transposed conv in
// f16/bf16 (which accumulates in float and rounds once; GEMM + col2im
// would round the columns to half first). Tensors are packed NCHW (1-D
// convs come with H = 1); every size is a run-time argument, so one
// compiled source serves every conv step. One thread per output element,
// grid-stride loops, 64-bit indices; nothing depends on the wave size.

// im2col: cols[b][ckk][p] for images n0 + b (b < nb), ckk = (c, ky, kx)
// over C·KH·KW rows and p over the np output pixels from p0 (row-major
// over OH×OW); zero where the window reads padding. Pure copies, so one
// kernel per element size. Launch: grid.y walks the nb·ckk rows (a
// grid-stride loop past the grid), grid.x × 256 threads a row's pixels,
// about eight a thread. A row's coordinates are divided out once per row
// and thread, a thread's first pixel once, and its later pixels are
// stepped to without dividing; the arithmetic is 32-bit where every index
// fits (64-bit division is a long software sequence: with 64-bit math and
// a division per pixel the copy ran at 327 GB/s, as long as W12's GEMM).
template <typename T, typename I>
LOOM_DEV void loom_im2col_rows(const T* __restrict__ x, T* __restrict__ cols, I n0, I nb, I C, I H, I W,
                               int KH, int KW, int PH, int PW, int SH, int SW, int DH, int DW, I OW, I p0, I np) {
  const I kk2 = (I)KH * KW, ckk = C * kk2, rows = nb * ckk;
  const I step = (I)gridDim.x * (I)blockDim.x, dq = step / OW, dr = step - dq * OW;
  const I first = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x;
  if (first >= np) return;
  const I q0 = p0 + first, oy0 = q0 / OW, ox0 = q0 - oy0 * OW;
  for (I r = blockIdx.y; r < rows; r += gridDim.y) {
    const I b = r / ckk, row = r - b * ckk, c = row / kk2;
    const int kk = (int)(row - c * kk2), ky = kk / KW, kx = kk - ky * KW;
    const T* __restrict__ plane = x + ((n0 + b) * C + c) * H * W;
    T* __restrict__ out = cols + r * np;
    const I dy = (I)ky * DH - PH, dx = (I)kx * DW - PW;
    I oy = oy0, ox = ox0;
    for (I p = first; p < np; p += step) {
      const I iy = oy * SH + dy, ix = ox * SW + dx;
      T v = (T)0;
      if (iy >= 0 && iy < H && ix >= 0 && ix < W) v = plane[iy * W + ix];
      out[p] = v;
      ox += dr;
      oy += dq;
      if (ox >= OW) {
        ox -= OW;
        ++oy;
      }
    }
  }
}

#define LOOM_IM2COL(NAME, T)                                                                     \
  extern "C" __global__ void __launch_bounds__(256) NAME(                                        \
      const T* __restrict__ x, T* __restrict__ cols, long long n0, long long nb, long long C,    \
      long long H, long long W, int KH, int KW, int PH, int PW, int SH, int SW, int DH, int DW,   \
      long long OW, long long p0, long long np) { loom_grid_entry();                                                \
    const long long lim = 0x7fffffffLL;                                                          \
    if ((n0 + nb) * C * H * W <= lim && nb * C * KH * KW * np <= lim && p0 + np <= lim &&        \
        (long long)gridDim.x * blockDim.x + OW <= lim) {                                         \
      loom_im2col_rows<T, int>(x, cols, (int)n0, (int)nb, (int)C, (int)H, (int)W, KH, KW, PH, PW, \
                               SH, SW, DH, DW, (int)OW, (int)p0, (int)np);                       \
    } else {                                                                                     \
      loom_im2col_rows<T, long long>(x, cols, n0, nb, C, H, W, KH, KW, PH, PW, SH, SW, DH, DW,    \
                                     OW, p0, np);                                                \
    }                                                                                            \
  }

LOOM_IM2COL(loom_im2col_b2, unsigned short)
LOOM_IM2COL(loom_im2col_b4, unsigned int)
LOOM_IM2COL(loom_im2col_b8, unsigned long long)

// col2im (gather form, no atomics): out[n0 + b][co][oy][ox] = the sum over
// the taps (ky, kx) that land on it of cols[b][co·KH·KW + ky·KW + kx][iy·W + ix],
// where oy = iy·SH − PH + ky·DH (likewise x). T is float or double and
// accumulates in its own type, tap order ky-major.
#define LOOM_COL2IM(NAME, T)                                                                     \
  extern "C" __global__ void __launch_bounds__(256) NAME(                                        \
      const T* __restrict__ cols, T* __restrict__ out, long long n0, long long nb, long long CO,  \
      long long H, long long W, int KH, int KW, int PH, int PW, int SH, int SW, int DH, int DW,   \
      long long OH, long long OW) { loom_grid_entry();                                                              \
    const long long total = nb * CO * OH * OW;                                                   \
    const long long hw = H * W;                                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;              \
         i += (long long)gridDim.x * blockDim.x) {                                               \
      const long long ox = i % OW, oy = (i / OW) % OH, co = (i / (OW * OH)) % CO, b = i / (OW * OH * CO); \
      const T* cb = cols + (b * CO + co) * (long long)(KH * KW) * hw;                            \
      T acc = (T)0;                                                                              \
      for (int ky = 0; ky < KH; ++ky) {                                                          \
        const long long ty = oy + PH - (long long)ky * DH;                                       \
        if (ty < 0 || ty % SH != 0 || ty / SH >= H) continue;                                    \
        const long long iy = ty / SH;                                                            \
        for (int kx = 0; kx < KW; ++kx) {                                                        \
          const long long tx = ox + PW - (long long)kx * DW;                                     \
          if (tx < 0 || tx % SW != 0 || tx / SW >= W) continue;                                  \
          acc += cb[(long long)(ky * KW + kx) * hw + iy * W + tx / SW];                          \
        }                                                                                        \
      }                                                                                          \
      out[((n0 + b) * CO + co) * OH * OW + oy * OW + ox] = acc;                                  \
    }                                                                                            \
  }

LOOM_COL2IM(loom_col2im_f32, float)
LOOM_COL2IM(loom_col2im_f64, double)

// Direct transposed conv for half types: x [N, CI, H, W], w [CI, CO/G, KH, KW]
// → out [N, CO, OH, OW], accumulating in float over the group's input
// channels and the taps that land on each output, rounded once on store.
#define LOOM_CONVT_DIRECT(NAME, LD, ST)                                                          \
  extern "C" __global__ void __launch_bounds__(256) NAME(                                        \
      const unsigned short* __restrict__ x, const unsigned short* __restrict__ w,                \
      unsigned short* __restrict__ out, long long N, long long CI, long long H, long long W,     \
      long long CO, int G, int KH, int KW, int PH, int PW, int SH, int SW, int DH, int DW,         \
      long long OH, long long OW) { loom_grid_entry();                                                              \
    const long long total = N * CO * OH * OW;                                                    \
    const long long cog = CO / G, cig = CI / G;                                                  \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;              \
         i += (long long)gridDim.x * blockDim.x) {                                               \
      const long long ox = i % OW, oy = (i / OW) % OH, co = (i / (OW * OH)) % CO, n = i / (OW * OH * CO); \
      const long long g = co / cog, c = co % cog;                                                \
      float acc = 0.f;                                                                           \
      for (int ky = 0; ky < KH; ++ky) {                                                          \
        const long long ty = oy + PH - (long long)ky * DH;                                       \
        if (ty < 0 || ty % SH != 0 || ty / SH >= H) continue;                                    \
        const long long iy = ty / SH;                                                            \
        for (int kx = 0; kx < KW; ++kx) {                                                        \
          const long long tx = ox + PW - (long long)kx * DW;                                     \
          if (tx < 0 || tx % SW != 0 || tx / SW >= W) continue;                                  \
          const long long ix = tx / SW;                                                          \
          for (long long ci = g * cig; ci < (g + 1) * cig; ++ci)                                 \
            acc = fmaf(LD(x[((n * CI + ci) * H + iy) * W + ix]), LD(w[((ci * cog + c) * KH + ky) * KW + kx]), acc); \
        }                                                                                        \
      }                                                                                          \
      out[i] = ST(acc);                                                                          \
    }                                                                                            \
  }

LOOM_CONVT_DIRECT(loom_convt_direct_f16, loom_f16_to_f32, loom_f32_to_f16)
LOOM_CONVT_DIRECT(loom_convt_direct_bf16, loom_bf16_to_f32, loom_f32_to_bf16)

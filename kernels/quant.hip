// ---- quant.hip: GGML block formats on the GPU (package kernels, quant.go) ----
//
// dq_<fmt>(block, g, r) is element 16g + r of one block, computed with the
// float operations, in the order, of GGML's dequantize_row_<fmt> (package
// quant's Go twins are bit-exact with it; Loom compiles with contraction
// off, so no product is fused into an add). Blocks are byte arrays with no
// alignment: multi-byte fields are assembled from bytes.
//
// loom_dequant_<fmt>_<out>: y[i] = element i of the row-major quantized
// array, one thread per 4 outputs (grid-stride), rounded once to f16/bf16.
// Every row is a whole number of blocks of 32 or 256, so n is a multiple
// of 4.
//
// loom_qmv_<fmt>: y[m][n] = Σ_k x[m][k]·W[n][k] for M ≤ 8 activation rows
// (decode): 32 lanes per weight row, each lane walking the row's 32-element
// chunks (a legacy block, or an eighth of a k-quant super-block),
// dequantizing each weight once in registers and multiplying it into the
// M f32 accumulators; the lanes' sums meet by shuffles within 32-lane
// groups (correct on 32- and 64-wide waves). The weights are read once;
// x (M·K values) comes through the cache.

#define LOOM_U16(p) ((unsigned int)(p)[0] | ((unsigned int)(p)[1] << 8))
#define LOOM_U32(p) (LOOM_U16(p) | (LOOM_U16((p) + 2) << 16))
#define LOOM_H(p) loom_f16_to_f32((unsigned short)LOOM_U16(p))

// dq_<fmt>(b, g, r): element 16g + r of block b (r < 16). Every format's
// scales cover whole 16-element groups, so everything but the element's
// own bits is a function of (b, g) alone: for 4 consecutive elements of a
// group the compiler computes the block's header once.
LOOM_DEV float dq_q4_0(const unsigned char* b, int g, int r) {
  const float d = LOOM_H(b);
  const int q = g == 0 ? (b[2 + r] & 15) : (b[2 + r] >> 4);
  return (float)(q - 8) * d;
}
LOOM_DEV float dq_q4_1(const unsigned char* b, int g, int r) {
  const float d = LOOM_H(b), m = LOOM_H(b + 2);
  const int q = g == 0 ? (b[4 + r] & 15) : (b[4 + r] >> 4);
  return (float)q * d + m;
}
LOOM_DEV int q5_q(const unsigned char* qs, unsigned int qh, int g, int r) {
  if (g == 0) return (qs[r] & 15) | (int)(((qh >> r) << 4) & 0x10);
  return (qs[r] >> 4) | (int)((qh >> (r + 12)) & 0x10);
}
LOOM_DEV float dq_q5_0(const unsigned char* b, int g, int r) {
  const float d = LOOM_H(b);
  return (float)(q5_q(b + 6, LOOM_U32(b + 2), g, r) - 16) * d;
}
LOOM_DEV float dq_q5_1(const unsigned char* b, int g, int r) {
  const float d = LOOM_H(b), m = LOOM_H(b + 2);
  return (float)q5_q(b + 8, LOOM_U32(b + 4), g, r) * d + m;
}
LOOM_DEV float dq_q8_0(const unsigned char* b, int g, int r) { return (float)(signed char)b[2 + 16 * g + r] * LOOM_H(b); }
LOOM_DEV float dq_q8_1(const unsigned char* b, int g, int r) { return (float)(signed char)b[4 + 16 * g + r] * LOOM_H(b); }
LOOM_DEV float dq_q2_k(const unsigned char* b, int g, int r) {
  const float d = LOOM_H(b + 80), dmin = LOOM_H(b + 82);
  const int n = g >> 3, gg = (g >> 1) & 3, half = g & 1;
  const int s = b[g]; // scale index 8n + 2gg + half = g
  const float dl = d * (float)(s & 15), ml = dmin * (float)(s >> 4);
  const int q = (b[16 + 32 * n + 16 * half + r] >> (2 * gg)) & 3;
  return dl * (float)q - ml;
}
LOOM_DEV int q3_scale(const unsigned char* sc, int j) {
  if (j < 4) return (sc[j] & 15) | ((sc[j + 8] & 3) << 4);
  if (j < 8) return (sc[j] & 15) | (((sc[j + 4] >> 2) & 3) << 4);
  if (j < 12) return (sc[j - 8] >> 4) | (((sc[j] >> 4) & 3) << 4);
  return (sc[j - 8] >> 4) | (((sc[j - 4] >> 6) & 3) << 4);
}
LOOM_DEV float dq_q3_k(const unsigned char* b, int g, int r) {
  const float d = LOOM_H(b + 108);
  const int n = g >> 3, gg = (g >> 1) & 3, half = g & 1;
  const float dl = d * (float)(q3_scale(b + 96, g) - 32);
  int v = (b[32 + 32 * n + 16 * half + r] >> (2 * gg)) & 3;
  if ((b[16 * half + r] & (1 << (4 * n + gg))) == 0) v -= 4;
  return dl * (float)v;
}
LOOM_DEV void scale_min_k4(const unsigned char* q, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
LOOM_DEV float dq_q4_k(const unsigned char* b, int g, int r) {
  const int j = g >> 2, hi = (g >> 1) & 1, l = (g & 1) * 16 + r;
  int sc, m;
  scale_min_k4(b + 4, g >> 1, &sc, &m);
  const float d1 = LOOM_H(b) * (float)sc, m1 = LOOM_H(b + 2) * (float)m;
  const int q = hi ? (b[16 + 32 * j + l] >> 4) : (b[16 + 32 * j + l] & 15);
  return d1 * (float)q - m1;
}
LOOM_DEV float dq_q5_k(const unsigned char* b, int g, int r) {
  const int j = g >> 2, hi = (g >> 1) & 1, l = (g & 1) * 16 + r;
  int sc, m;
  scale_min_k4(b + 4, g >> 1, &sc, &m);
  const float d1 = LOOM_H(b) * (float)sc, m1 = LOOM_H(b + 2) * (float)m;
  int q = hi ? (b[48 + 32 * j + l] >> 4) : (b[48 + 32 * j + l] & 15);
  if (b[16 + l] & (1 << (g >> 1))) q += 16;
  return d1 * (float)q - m1;
}
LOOM_DEV float dq_q6_k(const unsigned char* b, int g, int r) {
  const float d = LOOM_H(b + 208);
  const int h = g >> 3, quarter = (g >> 1) & 3, l = (g & 1) * 16 + r;
  const unsigned char* ql = b + 64 * h;
  const int qh = b[128 + 32 * h + l];
  const int lo = quarter & 1 ? ql[l + 32] : ql[l];
  const int q = ((quarter < 2 ? (lo & 15) : (lo >> 4)) | (((qh >> (2 * quarter)) & 3) << 4)) - 32;
  const float sc = (float)(signed char)b[192 + 8 * h + (g & 1) + 2 * quarter];
  return d * sc * (float)q;
}
LOOM_DEV float dq_q8_k(const unsigned char* b, int g, int r) {
  return __int_as_float((int)LOOM_U32(b)) * (float)(signed char)b[4 + 16 * g + r];
}

#define LOOM_DEQUANT(FMT, BLK, BYTES, OUT, NAME, STORE)                                             \
  extern "C" __global__ void __launch_bounds__(256) NAME(const unsigned char* __restrict__ src,     \
                                                          OUT* __restrict__ y, long long n) {       \
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n / 4;               \
         q += (long long)gridDim.x * blockDim.x) {                                                \
      const long long i = 4 * q;                                                                  \
      const unsigned char* b = src + (i / BLK) * BYTES;                                           \
      const int e = (int)(i % BLK), g = e >> 4, r = e & 15;                                       \
      _Pragma("unroll") for (int t = 0; t < 4; ++t) y[i + t] = STORE(dq_##FMT(b, g, r + t));      \
    }                                                                                             \
  }
#define LOOM_ID(v) (v)
#define LOOM_DEQUANT3(FMT, BLK, BYTES)                                                            \
  LOOM_DEQUANT(FMT, BLK, BYTES, float, loom_dequant_##FMT##_f32, LOOM_ID)                         \
  LOOM_DEQUANT(FMT, BLK, BYTES, unsigned short, loom_dequant_##FMT##_f16, loom_f32_to_f16)        \
  LOOM_DEQUANT(FMT, BLK, BYTES, unsigned short, loom_dequant_##FMT##_bf16, loom_f32_to_bf16)

LOOM_DEQUANT3(q4_0, 32, 18)
LOOM_DEQUANT3(q4_1, 32, 20)
LOOM_DEQUANT3(q5_0, 32, 22)
LOOM_DEQUANT3(q5_1, 32, 24)
LOOM_DEQUANT3(q8_0, 32, 34)
LOOM_DEQUANT3(q8_1, 32, 36)
LOOM_DEQUANT3(q2_k, 256, 84)
LOOM_DEQUANT3(q3_k, 256, 110)
LOOM_DEQUANT3(q4_k, 256, 144)
LOOM_DEQUANT3(q5_k, 256, 176)
LOOM_DEQUANT3(q6_k, 256, 210)
LOOM_DEQUANT3(q8_k, 256, 292)

// Activation loads and output stores for the mat-vec: f32, f16, bf16.
LOOM_DEV float qmv_ld(const float* p) { return *p; }
LOOM_DEV float qmv_ld_h(const unsigned short* p) { return loom_f16_to_f32(*p); }
LOOM_DEV float qmv_ld_b(const unsigned short* p) { return loom_bf16_to_f32(*p); }

#define QMV_THREADS 256
#define QMV_GROUP 32
#define QMV_MAXM 8

// x [M, K] (row stride ldx), W [N, K/BLK blocks], y [M, N] (row stride
// ldy, x's type, rounded once from the f32 sum). A block is 8 groups of 32
// lanes, one weight row per group; the group walks the row in spans of
// 128 elements, lane l taking elements 4l … 4l+3 of each span (one
// 16-element scale group: the block header is decoded once for the four),
// so a group's loads of weights and activations are consecutive bytes.
// The span loop is unrolled 4 times so that a lane has several spans'
// loads in flight (one span at a time left the kernel latency-bound at
// ~10% of copy bandwidth). The lanes' sums meet by xor-shuffles of masks below 32, which stay
// inside an aligned 32-lane group on 32- and 64-wide waves alike; control
// flow is uniform across the block (rows past N compute and drop).
#define LOOM_QMV(FMT, BLK, BYTES, XT, LD, ST, NAME)                                                \
  extern "C" __global__ void __launch_bounds__(QMV_THREADS) NAME(                                 \
      const unsigned char* __restrict__ w, const XT* __restrict__ x, XT* __restrict__ y,          \
      int M, long long K, long long N, long long ldx, long long ldy) {                            \
    const long long rowBytes = K / BLK * BYTES;                                                   \
    const int lane = threadIdx.x % QMV_GROUP, group = threadIdx.x / QMV_GROUP;                    \
    const int groups = QMV_THREADS / QMV_GROUP;                                                   \
    for (long long base = (long long)blockIdx.x * groups; base < N; base += (long long)gridDim.x * groups) { \
      const long long n = base + group;                                                           \
      const bool valid = n < N;                                                                   \
      const unsigned char* row = w + (valid ? n : 0) * rowBytes;                                  \
      float acc[QMV_MAXM];                                                                        \
      _Pragma("unroll") for (int m = 0; m < QMV_MAXM; ++m) acc[m] = 0.f;                          \
      _Pragma("unroll 4") for (long long k0 = 4 * lane; k0 < K; k0 += 4 * QMV_GROUP) {            \
        const unsigned char* b = row + (k0 / BLK) * BYTES;                                        \
        const int e = (int)(k0 % BLK), g = e >> 4, r = e & 15;                                    \
        const float w0 = dq_##FMT(b, g, r), w1 = dq_##FMT(b, g, r + 1);                           \
        const float w2 = dq_##FMT(b, g, r + 2), w3 = dq_##FMT(b, g, r + 3);                       \
        _Pragma("unroll") for (int m = 0; m < QMV_MAXM; ++m) {                                    \
          if (m < M) {                                                                            \
            const XT* xr = x + m * ldx + k0;                                                      \
            float a = acc[m];                                                                     \
            a = fmaf(w0, LD(xr), a);                                                              \
            a = fmaf(w1, LD(xr + 1), a);                                                          \
            a = fmaf(w2, LD(xr + 2), a);                                                          \
            acc[m] = fmaf(w3, LD(xr + 3), a);                                                     \
          }                                                                                       \
        }                                                                                         \
      }                                                                                           \
      _Pragma("unroll") for (int m = 0; m < QMV_MAXM; ++m) {                                      \
        if (m < M) {                                                                              \
          float v = acc[m];                                                                       \
          _Pragma("unroll") for (int s = QMV_GROUP / 2; s > 0; s >>= 1) v += loom_shfl_xor(v, s); \
          if (valid && lane == 0) y[m * ldy + n] = ST(v);                                         \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
  }
#define LOOM_QMV3(FMT, BLK, BYTES)                                                                \
  LOOM_QMV(FMT, BLK, BYTES, float, qmv_ld, LOOM_ID, loom_qmv_##FMT##_f32)                         \
  LOOM_QMV(FMT, BLK, BYTES, unsigned short, qmv_ld_h, loom_f32_to_f16, loom_qmv_##FMT##_f16)      \
  LOOM_QMV(FMT, BLK, BYTES, unsigned short, qmv_ld_b, loom_f32_to_bf16, loom_qmv_##FMT##_bf16)

LOOM_QMV3(q4_0, 32, 18)
LOOM_QMV3(q4_1, 32, 20)
LOOM_QMV3(q5_0, 32, 22)
LOOM_QMV3(q5_1, 32, 24)
LOOM_QMV3(q8_0, 32, 34)
LOOM_QMV3(q2_k, 256, 84)
LOOM_QMV3(q3_k, 256, 110)
LOOM_QMV3(q4_k, 256, 144)
LOOM_QMV3(q5_k, 256, 176)
LOOM_QMV3(q6_k, 256, 210)

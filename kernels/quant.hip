// ---- quant.hip: GGML block formats on the GPU (package kernels, quant.go) ----
//
// dq_<fmt>(block, e) is element e of one block, computed with the float
// operations, in the order, of GGML's dequantize_row_<fmt> (package
// quant's Go twins are bit-exact with it; Loom compiles with contraction
// off, so no product is fused into an add). Blocks are byte arrays with no
// alignment: multi-byte fields are assembled from bytes.
//
// loom_dequant_<fmt>_<out>: y[i] = element i of the row-major quantized
// array, one thread per output (grid-stride), rounded once to f16/bf16.
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

LOOM_DEV float dq_q4_0(const unsigned char* b, int e) {
  const float d = LOOM_H(b);
  const int j = e & 15;
  const int q = e < 16 ? (b[2 + j] & 15) : (b[2 + j] >> 4);
  return (float)(q - 8) * d;
}
LOOM_DEV float dq_q4_1(const unsigned char* b, int e) {
  const float d = LOOM_H(b), m = LOOM_H(b + 2);
  const int j = e & 15;
  const int q = e < 16 ? (b[4 + j] & 15) : (b[4 + j] >> 4);
  return (float)q * d + m;
}
LOOM_DEV int q5_q(const unsigned char* qs, unsigned int qh, int e) {
  const int j = e & 15;
  if (e < 16) return (qs[j] & 15) | (int)(((qh >> j) << 4) & 0x10);
  return (qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
}
LOOM_DEV float dq_q5_0(const unsigned char* b, int e) {
  const float d = LOOM_H(b);
  return (float)(q5_q(b + 6, LOOM_U32(b + 2), e) - 16) * d;
}
LOOM_DEV float dq_q5_1(const unsigned char* b, int e) {
  const float d = LOOM_H(b), m = LOOM_H(b + 2);
  return (float)q5_q(b + 8, LOOM_U32(b + 4), e) * d + m;
}
LOOM_DEV float dq_q8_0(const unsigned char* b, int e) { return (float)(signed char)b[2 + e] * LOOM_H(b); }
LOOM_DEV float dq_q8_1(const unsigned char* b, int e) { return (float)(signed char)b[4 + e] * LOOM_H(b); }
LOOM_DEV float dq_q2_k(const unsigned char* b, int e) {
  const float d = LOOM_H(b + 80), dmin = LOOM_H(b + 82);
  const int n = e >> 7, g = (e >> 5) & 3, half = (e >> 4) & 1, l = e & 15;
  const int s = b[n * 8 + g * 2 + half];
  const float dl = d * (float)(s & 15), ml = dmin * (float)(s >> 4);
  const int q = (b[16 + 32 * n + 16 * half + l] >> (2 * g)) & 3;
  return dl * (float)q - ml;
}
LOOM_DEV int q3_scale(const unsigned char* sc, int j) {
  if (j < 4) return (sc[j] & 15) | ((sc[j + 8] & 3) << 4);
  if (j < 8) return (sc[j] & 15) | (((sc[j + 4] >> 2) & 3) << 4);
  if (j < 12) return (sc[j - 8] >> 4) | (((sc[j] >> 4) & 3) << 4);
  return (sc[j - 8] >> 4) | (((sc[j - 4] >> 6) & 3) << 4);
}
LOOM_DEV float dq_q3_k(const unsigned char* b, int e) {
  const float d = LOOM_H(b + 108);
  const int n = e >> 7, g = (e >> 5) & 3, half = (e >> 4) & 1, l = e & 15;
  const float dl = d * (float)(q3_scale(b + 96, 8 * n + 2 * g + half) - 32);
  int v = (b[32 + 32 * n + 16 * half + l] >> (2 * g)) & 3;
  if ((b[16 * half + l] & (1 << (4 * n + g))) == 0) v -= 4;
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
LOOM_DEV float dq_q4_k(const unsigned char* b, int e) {
  const float d = LOOM_H(b), dmin = LOOM_H(b + 2);
  const int j = e >> 6, hi = (e >> 5) & 1, l = e & 31;
  int sc, m;
  scale_min_k4(b + 4, 2 * j + hi, &sc, &m);
  const float d1 = d * (float)sc, m1 = dmin * (float)m;
  const int q = hi ? (b[16 + 32 * j + l] >> 4) : (b[16 + 32 * j + l] & 15);
  return d1 * (float)q - m1;
}
LOOM_DEV float dq_q5_k(const unsigned char* b, int e) {
  const float d = LOOM_H(b), dmin = LOOM_H(b + 2);
  const int j = e >> 6, hi = (e >> 5) & 1, l = e & 31;
  int sc, m;
  scale_min_k4(b + 4, 2 * j + hi, &sc, &m);
  const float d1 = d * (float)sc, m1 = dmin * (float)m;
  int q = hi ? (b[48 + 32 * j + l] >> 4) : (b[48 + 32 * j + l] & 15);
  if (b[16 + l] & (1 << (2 * j + hi))) q += 16;
  return d1 * (float)q - m1;
}
LOOM_DEV float dq_q6_k(const unsigned char* b, int e) {
  const float d = LOOM_H(b + 208);
  const int h = e >> 7, quarter = (e >> 5) & 3, l = e & 31;
  const unsigned char* ql = b + 64 * h;
  const int qh = b[128 + 32 * h + l];
  const int lo = quarter & 1 ? ql[l + 32] : ql[l];
  const int q = ((quarter < 2 ? (lo & 15) : (lo >> 4)) | (((qh >> (2 * quarter)) & 3) << 4)) - 32;
  const float sc = (float)(signed char)b[192 + 8 * h + l / 16 + 2 * quarter];
  return d * sc * (float)q;
}
LOOM_DEV float dq_q8_k(const unsigned char* b, int e) {
  return __int_as_float((int)LOOM_U32(b)) * (float)(signed char)b[4 + e];
}

#define LOOM_DEQUANT(FMT, BLK, BYTES, OUT, NAME, STORE)                                             \
  extern "C" __global__ void __launch_bounds__(256) NAME(const unsigned char* __restrict__ src,     \
                                                          OUT* __restrict__ y, long long n) {       \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;                   \
         i += (long long)gridDim.x * blockDim.x) {                                                \
      const float v = dq_##FMT(src + (i / BLK) * BYTES, (int)(i % BLK));                           \
      y[i] = STORE(v);                                                                            \
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

// Chunk decoders for the mat-vec: the 32 weights e0 … e0+31 of a block
// (e0 a multiple of 32), the block's scales decoded once, each weight by
// the same float operations as dq_<fmt>.
LOOM_DEV void dqc_q4_0(const unsigned char* b, int e0, float* w) {
  const float d = LOOM_H(b);
  _Pragma("unroll") for (int j = 0; j < 16; ++j) { w[j] = (float)((b[2 + j] & 15) - 8) * d; w[j + 16] = (float)((b[2 + j] >> 4) - 8) * d; }
}
LOOM_DEV void dqc_q4_1(const unsigned char* b, int e0, float* w) {
  const float d = LOOM_H(b), m = LOOM_H(b + 2);
  _Pragma("unroll") for (int j = 0; j < 16; ++j) { w[j] = (float)(b[4 + j] & 15) * d + m; w[j + 16] = (float)(b[4 + j] >> 4) * d + m; }
}
LOOM_DEV void dqc_q5_0(const unsigned char* b, int e0, float* w) {
  const float d = LOOM_H(b);
  const unsigned int qh = LOOM_U32(b + 2);
  _Pragma("unroll") for (int e = 0; e < 32; ++e) w[e] = (float)(q5_q(b + 6, qh, e) - 16) * d;
}
LOOM_DEV void dqc_q5_1(const unsigned char* b, int e0, float* w) {
  const float d = LOOM_H(b), m = LOOM_H(b + 2);
  const unsigned int qh = LOOM_U32(b + 4);
  _Pragma("unroll") for (int e = 0; e < 32; ++e) w[e] = (float)q5_q(b + 8, qh, e) * d + m;
}
LOOM_DEV void dqc_q8_0(const unsigned char* b, int e0, float* w) {
  const float d = LOOM_H(b);
  _Pragma("unroll") for (int e = 0; e < 32; ++e) w[e] = (float)(signed char)b[2 + e] * d;
}
LOOM_DEV void dqc_q2_k(const unsigned char* b, int e0, float* w) {
  const float d = LOOM_H(b + 80), dmin = LOOM_H(b + 82);
  const int n = e0 >> 7, g = (e0 >> 5) & 3;
  _Pragma("unroll") for (int half = 0; half < 2; ++half) {
    const int s = b[n * 8 + g * 2 + half];
    const float dl = d * (float)(s & 15), ml = dmin * (float)(s >> 4);
    _Pragma("unroll") for (int l = 0; l < 16; ++l) w[16 * half + l] = dl * (float)((b[16 + 32 * n + 16 * half + l] >> (2 * g)) & 3) - ml;
  }
}
LOOM_DEV void dqc_q3_k(const unsigned char* b, int e0, float* w) {
  const float d = LOOM_H(b + 108);
  const int n = e0 >> 7, g = (e0 >> 5) & 3, bit = 1 << (4 * n + g);
  _Pragma("unroll") for (int half = 0; half < 2; ++half) {
    const float dl = d * (float)(q3_scale(b + 96, 8 * n + 2 * g + half) - 32);
    _Pragma("unroll") for (int l = 0; l < 16; ++l) {
      int v = (b[32 + 32 * n + 16 * half + l] >> (2 * g)) & 3;
      if ((b[16 * half + l] & bit) == 0) v -= 4;
      w[16 * half + l] = dl * (float)v;
    }
  }
}
LOOM_DEV void dqc_q4_k(const unsigned char* b, int e0, float* w) {
  const int j = e0 >> 6, hi = (e0 >> 5) & 1;
  int sc, m;
  scale_min_k4(b + 4, 2 * j + hi, &sc, &m);
  const float d1 = LOOM_H(b) * (float)sc, m1 = LOOM_H(b + 2) * (float)m;
  const unsigned char* q = b + 16 + 32 * j;
  _Pragma("unroll") for (int l = 0; l < 32; ++l) w[l] = d1 * (float)(hi ? (q[l] >> 4) : (q[l] & 15)) - m1;
}
LOOM_DEV void dqc_q5_k(const unsigned char* b, int e0, float* w) {
  const int j = e0 >> 6, hi = (e0 >> 5) & 1, bit = 1 << (2 * j + hi);
  int sc, m;
  scale_min_k4(b + 4, 2 * j + hi, &sc, &m);
  const float d1 = LOOM_H(b) * (float)sc, m1 = LOOM_H(b + 2) * (float)m;
  const unsigned char* q = b + 48 + 32 * j;
  _Pragma("unroll") for (int l = 0; l < 32; ++l) {
    int v = hi ? (q[l] >> 4) : (q[l] & 15);
    if (b[16 + l] & bit) v += 16;
    w[l] = d1 * (float)v - m1;
  }
}
LOOM_DEV void dqc_q6_k(const unsigned char* b, int e0, float* w) {
  const float d = LOOM_H(b + 208);
  const int h = e0 >> 7, quarter = (e0 >> 5) & 3;
  const unsigned char* ql = b + 64 * h + (quarter & 1 ? 32 : 0);
  const unsigned char* qh = b + 128 + 32 * h;
  const float s0 = d * (float)(signed char)b[192 + 8 * h + 2 * quarter];
  const float s1 = d * (float)(signed char)b[192 + 8 * h + 1 + 2 * quarter];
  _Pragma("unroll") for (int l = 0; l < 32; ++l) {
    const int q = ((quarter < 2 ? (ql[l] & 15) : (ql[l] >> 4)) | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
    w[l] = (l < 16 ? s0 : s1) * (float)q;
  }
}

// Activation loads and output stores for the mat-vec: f32, f16, bf16.
LOOM_DEV float qmv_ld(const float* p) { return *p; }
LOOM_DEV float qmv_ld_h(const unsigned short* p) { return loom_f16_to_f32(*p); }
LOOM_DEV float qmv_ld_b(const unsigned short* p) { return loom_bf16_to_f32(*p); }

#define QMV_THREADS 256
#define QMV_GROUP 32
#define QMV_MAXM 8

// x [M, K] (row stride ldx), W [N, K/BLK blocks], y [M, N] (row stride
// ldy, x's type, rounded once from the f32 sum). A block is 8 groups of 32
// lanes, one weight row per group; lane l takes the row's 32-element
// chunks l, l+32, … (chunk c covers elements 32c … 32c+31, so a group
// reads 32 consecutive chunks — consecutive bytes — at a time), and the
// group's partial sums meet by xor-shuffles of masks below 32, which stay
// inside an aligned 32-lane group on 32- and 64-wide waves alike. Control
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
      for (long long c = lane; c < K / 32; c += QMV_GROUP) {                                      \
        float wv[32];                                                                             \
        dqc_##FMT(row + (c * 32 / BLK) * BYTES, (int)((c * 32) % BLK), wv);                       \
        _Pragma("unroll") for (int m = 0; m < QMV_MAXM; ++m) {                                    \
          if (m < M) {                                                                            \
            const XT* xr = x + m * ldx + c * 32;                                                  \
            _Pragma("unroll") for (int e = 0; e < 32; ++e) acc[m] = fmaf(wv[e], LD(xr + e), acc[m]); \
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

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

// Tried and dropped (H200, one call): the 4 outputs in one 8- or 16-byte
// store instead of 4 — the Q4_K dequantization of W13p (14336 × 4096 to
// bf16, loom bench W13d-q4_k) took 0.138 ms against 0.137, 27% of the copy
// bandwidth either way: the stores are not what holds it there.
//
// LOOM_DEQUANT_N: the dequantization kernels' one body, for the byte-wise
// kernels here (N = 4, stored one by one: dq_st4_<out>) and the 16-byte
// stores of loom_dequant8 (N = 8, O::store8; below): a grid-stride walk
// over runs of N consecutive outputs, a thread a run, each value dq_<fmt>
// of its block. n is a multiple of N (of 32 for every format).
#define LOOM_DEQUANT_N(FMT, BLK, BYTES, N, OUT, NAME, STOREN)                                     \
  extern "C" __global__ void __launch_bounds__(256) NAME(const unsigned char* __restrict__ src,     \
                                                          OUT* __restrict__ y, long long n) {       \
    loom_grid_entry();                                                                            \
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n / N;               \
         q += (long long)gridDim.x * blockDim.x) {                                                \
      const long long i = N * q;                                                                  \
      const unsigned char* b = src + (i / BLK) * BYTES;                                           \
      const int e = (int)(i % BLK), g = e >> 4, r = e & 15;                                       \
      float v[N];                                                                                 \
      _Pragma("unroll") for (int t = 0; t < N; ++t) v[t] = dq_##FMT(b, g, r + t);                 \
      STOREN(y + i, v);                                                                           \
    }                                                                                             \
  }
#define LOOM_ID(v) (v)
LOOM_DEV void dq_st4_f32(float* y, const float* v) {
#pragma unroll
  for (int t = 0; t < 4; ++t) y[t] = v[t];
}
LOOM_DEV void dq_st4_f16(unsigned short* y, const float* v) {
#pragma unroll
  for (int t = 0; t < 4; ++t) y[t] = loom_f32_to_f16(v[t]);
}
LOOM_DEV void dq_st4_bf16(unsigned short* y, const float* v) {
#pragma unroll
  for (int t = 0; t < 4; ++t) y[t] = loom_f32_to_bf16(v[t]);
}
#define LOOM_DEQUANT3(FMT, BLK, BYTES)                                                            \
  LOOM_DEQUANT_N(FMT, BLK, BYTES, 4, float, loom_dequant_##FMT##_f32, dq_st4_f32)                 \
  LOOM_DEQUANT_N(FMT, BLK, BYTES, 4, unsigned short, loom_dequant_##FMT##_f16, dq_st4_f16)        \
  LOOM_DEQUANT_N(FMT, BLK, BYTES, 4, unsigned short, loom_dequant_##FMT##_bf16, dq_st4_bf16)

#ifndef QMVF_FUSED
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
#endif

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
      int M, long long K, long long N, long long ldx, long long ldy) { loom_grid_entry();                            \
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

#ifndef QMVF_FUSED
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
#endif

// ---- loom_qmvw_<fmt>_<x>: the mat-vec with word loads (Q4_0, Q8_0, Q4_K, Q6_K) ----
//
// The byte-wise kernels above read every field a byte at a time and
// decode each weight with its block header: ~10 loads and a header
// decode for 4 weights, which left the Q4_K mat-vec of a 1B decode step at
// ~5% of the copy bandwidth (47 µs for a 9.4 MB weight on an H200). These
// kernels read blocks with 2-, 4- and 16-byte loads and decode a block's
// header once for 32 weights: a lane takes one 32-weight chunk (a Q4_0 or
// Q8_0 block; a quarter of a Q4_K super-block's quants, both nibbles of
// 16 bytes; an eighth of a Q6_K super-block's), converts the quants to f32
// without the slow int-to-float unit (the 2²³ exponent trick), multiplies
// them into the activations (16-byte loads of 8 values, through the cache)
// and folds the block's scale and minimum in once per 16- or 32-weight sum.
// 32 lanes own one weight row and take its chunks in turn; 4 rows a
// 128-thread block. They need the weight rows aligned to the loads (2
// bytes; Q4_K 16) and x 16-byte aligned with a row stride of whole 16-byte
// units; the host checks and otherwise runs the byte-wise kernel.

#define QMVW_THREADS 128

// qmvw_f(q) = (float)q for 0 ≤ q < 2²³: q in the mantissa of 2²³.
LOOM_DEV float qmvw_f(unsigned int q) { return __uint_as_float(0x4B000000u | q) - 8388608.f; }
LOOM_DEV unsigned int qmvw_u16(const unsigned char* p) { return *reinterpret_cast<const unsigned short*>(p); }
LOOM_DEV unsigned int qmvw_u32(const unsigned char* p) { return *reinterpret_cast<const unsigned int*>(p); }
LOOM_DEV float qmvw_h(const unsigned char* p) { return loom_f16_to_f32(*reinterpret_cast<const unsigned short*>(p)); }

struct qmvw_x_f32 {
  typedef float T;
  static LOOM_DEV void ld8(float* d, const float* p) {
    loom_ld16_f32(d, p);
    loom_ld16_f32(d + 4, p + 4);
  }
  static LOOM_DEV float st(float v) { return v; }
  static LOOM_DEV float ld1(const float* p) { return *p; }
};
struct qmvw_x_f16 {
  typedef unsigned short T;
  static LOOM_DEV void ld8(float* d, const unsigned short* p) { loom_ld16_f16(d, p); }
  static LOOM_DEV unsigned short st(float v) { return loom_f32_to_f16(v); }
  static LOOM_DEV float ld1(const unsigned short* p) { return loom_f16_to_f32(*p); }
};
struct qmvw_x_bf16 {
  typedef unsigned short T;
  static LOOM_DEV void ld8(float* d, const unsigned short* p) { loom_ld16_bf16(d, p); }
  static LOOM_DEV unsigned short st(float v) { return loom_f32_to_bf16(v); }
  static LOOM_DEV float ld1(const unsigned short* p) { return loom_bf16_to_f32(*p); }
};

// dot16(q, x): Σ q[i]·x[i] over 16 values.
LOOM_DEV float qmvw_dot16(const float* q, const float* x) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) s = fmaf(q[i], x[i], s);
  return s;
}
LOOM_DEV float qmvw_sum16(const float* x) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) s += x[i];
  return s;
}

// Chunk c of a row (32 weights) times x's rows, added into acc[0..M).
// Q4_0 block c: d, then 16 bytes whose low nibbles are weights 0–15 and
// high nibbles 16–31, each q − 8.
template <class X, int MAXM>
LOOM_DEV void qmvw_q4_0(const unsigned char* row, long long c, const typename X::T* x, long long ldx, int M, float* acc) {
  const unsigned char* b = row + 18 * c;
  const float d = qmvw_h(b);
  float lo[16], hi[16];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const unsigned int u = qmvw_u16(b + 2 + 2 * i);
    lo[2 * i] = qmvw_f(u & 15u);
    hi[2 * i] = qmvw_f((u >> 4) & 15u);
    lo[2 * i + 1] = qmvw_f((u >> 8) & 15u);
    hi[2 * i + 1] = qmvw_f((u >> 12) & 15u);
  }
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
    if (m < M) {
      float xa[16], xb[16];
      const typename X::T* xr = x + m * ldx + 32 * c;
      X::ld8(xa, xr);
      X::ld8(xa + 8, xr + 8);
      X::ld8(xb, xr + 16);
      X::ld8(xb + 8, xr + 24);
      const float s = qmvw_dot16(lo, xa) + qmvw_dot16(hi, xb);
      acc[m] = fmaf(d, s - 8.f * (qmvw_sum16(xa) + qmvw_sum16(xb)), acc[m]);
    }
  }
}

// Q8_0 block c: d, then 32 signed bytes.
template <class X, int MAXM>
LOOM_DEV void qmvw_q8_0(const unsigned char* row, long long c, const typename X::T* x, long long ldx, int M, float* acc) {
  const unsigned char* b = row + 34 * c;
  const float d = qmvw_h(b);
  float q[32];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const unsigned int u = qmvw_u16(b + 2 + 2 * i) ^ 0x8080u; // signed → offset by 128
    q[2 * i] = qmvw_f(u & 255u) - 128.f;
    q[2 * i + 1] = qmvw_f(u >> 8) - 128.f;
  }
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
    if (m < M) {
      float xa[16], xb[16];
      const typename X::T* xr = x + m * ldx + 32 * c;
      X::ld8(xa, xr);
      X::ld8(xa + 8, xr + 8);
      X::ld8(xb, xr + 16);
      X::ld8(xb + 8, xr + 24);
      acc[m] = fmaf(d, qmvw_dot16(q, xa) + qmvw_dot16(q + 16, xb), acc[m]);
    }
  }
}

// qmvw_scale_min_k4(s, j): the 6-bit scale and minimum of Q4_K sub-block j
// from the 12 scale bytes held as 3 words (get_scale_min_k4).
// (The word is picked with constant indices so that s stays in registers.)
LOOM_DEV unsigned int qmvw_byte(const unsigned int* s, int k) {
  const unsigned int w = k < 4 ? s[0] : (k < 8 ? s[1] : s[2]);
  return (w >> (8 * (k & 3))) & 255u;
}
// q3_scale_w: q3_scale of the 12 scale bytes held in words s.
LOOM_DEV unsigned int q3_scale_w(const unsigned int* s, int j) {
  if (j < 4) return (qmvw_byte(s, j) & 15u) | ((qmvw_byte(s, j + 8) & 3u) << 4);
  if (j < 8) return (qmvw_byte(s, j) & 15u) | (((qmvw_byte(s, j + 4) >> 2) & 3u) << 4);
  if (j < 12) return (qmvw_byte(s, j - 8) >> 4) | (((qmvw_byte(s, j) >> 4) & 3u) << 4);
  return (qmvw_byte(s, j - 8) >> 4) | (((qmvw_byte(s, j - 4) >> 6) & 3u) << 4);
}
LOOM_DEV void qmvw_scale_min_k4(const unsigned int* s, int j, float* sc, float* mn) {
  if (j < 4) {
    *sc = qmvw_f(qmvw_byte(s, j) & 63u);
    *mn = qmvw_f(qmvw_byte(s, j + 4) & 63u);
  } else {
    *sc = qmvw_f((qmvw_byte(s, j + 4) & 15u) | ((qmvw_byte(s, j - 4) >> 6) << 4));
    *mn = qmvw_f((qmvw_byte(s, j + 4) >> 4) | ((qmvw_byte(s, j) >> 6) << 4));
  }
}

// Q4_K: chunk c is part h of quarter j of super-block c/8 (t = c%8, j =
// t/2, h = t%2): quant bytes 32j + 16h … +15, whose low nibbles are
// weights 64j + 16h + i (sub-block 2j) and high nibbles weights 64j + 32 +
// 16h + i (sub-block 2j + 1); weight = d·sc·q − dmin·m.
template <class X, int MAXM>
LOOM_DEV void qmvw_q4_k(const unsigned char* row, long long c, const typename X::T* x, long long ldx, int M, float* acc) {
  const long long sb = c >> 3;
  const int t = (int)(c & 7), j = t >> 1, h = t & 1;
  const unsigned char* b = row + 144 * sb;
  const unsigned int dm = qmvw_u32(b);
  const float d = loom_f16_to_f32((unsigned short)(dm & 0xffffu)), dmin = loom_f16_to_f32((unsigned short)(dm >> 16));
  unsigned int s[3];
  s[0] = qmvw_u32(b + 4);
  s[1] = qmvw_u32(b + 8);
  s[2] = qmvw_u32(b + 12);
  float sc0, m0, sc1, m1;
  qmvw_scale_min_k4(s, 2 * j, &sc0, &m0);
  qmvw_scale_min_k4(s, 2 * j + 1, &sc1, &m1);
  const uint4 qw = *reinterpret_cast<const uint4*>(b + 16 + 32 * j + 16 * h);
  const unsigned int qs[4] = {qw.x, qw.y, qw.z, qw.w};
  float lo[16], hi[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const unsigned int by = (qs[i >> 2] >> (8 * (i & 3))) & 255u;
    lo[i] = qmvw_f(by & 15u);
    hi[i] = qmvw_f(by >> 4);
  }
  const float d0 = d * sc0, d1 = d * sc1, n0 = dmin * m0, n1 = dmin * m1;
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
    if (m < M) {
      float xa[16], xb[16];
      const typename X::T* xr = x + m * ldx + 256 * sb + 64 * j + 16 * h;
      X::ld8(xa, xr);
      X::ld8(xa + 8, xr + 8);
      X::ld8(xb, xr + 32);
      X::ld8(xb + 8, xr + 40);
      float a = acc[m];
      a = fmaf(d0, qmvw_dot16(lo, xa), a);
      a = fmaf(-n0, qmvw_sum16(xa), a);
      a = fmaf(d1, qmvw_dot16(hi, xb), a);
      acc[m] = fmaf(-n1, qmvw_sum16(xb), a);
    }
  }
}

// Q6_K: chunk c covers, in half hf = t/4 of super-block c/8 (t = c%8),
// positions l = 8(t%4) … +7 of its four 32-weight quarters: weight 128hf +
// 32r + l is (6-bit q − 32)·d·scale, q's low 4 bits from ql (byte l or
// l + 32, low or high nibble) and its high 2 from bits 2r of qh byte l; the
// eight positions share one scale per quarter (scale index l/16 + 2r).
template <class X, int MAXM>
LOOM_DEV void qmvw_q6_k(const unsigned char* row, long long c, const typename X::T* x, long long ldx, int M, float* acc) {
  const long long sb = c >> 3;
  const int t = (int)(c & 7), hf = t >> 2, l0 = 8 * (t & 3);
  const unsigned char* b = row + 210 * sb;
  const unsigned char* ql = b + 64 * hf + l0;
  const unsigned char* qh = b + 128 + 32 * hf + l0;
  const signed char* scl = reinterpret_cast<const signed char*>(b + 192 + 8 * hf + (l0 >> 4));
  const float d = qmvw_h(b + 208);
  float q[4][8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const unsigned int a = qmvw_u16(ql + 2 * i), a2 = qmvw_u16(ql + 32 + 2 * i), hb = qmvw_u16(qh + 2 * i);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const unsigned int l1 = (a >> (8 * k)) & 255u, l2 = (a2 >> (8 * k)) & 255u, hh = (hb >> (8 * k)) & 255u;
      q[0][2 * i + k] = qmvw_f((l1 & 15u) | ((hh & 3u) << 4)) - 32.f;
      q[1][2 * i + k] = qmvw_f((l2 & 15u) | (((hh >> 2) & 3u) << 4)) - 32.f;
      q[2][2 * i + k] = qmvw_f((l1 >> 4) | (((hh >> 4) & 3u) << 4)) - 32.f;
      q[3][2 * i + k] = qmvw_f((l2 >> 4) | (((hh >> 6) & 3u) << 4)) - 32.f;
    }
  }
  float ds[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) ds[r] = d * (float)scl[2 * r];
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
    if (m < M) {
      const typename X::T* xr = x + m * ldx + 256 * sb + 128 * hf + l0;
      float a = acc[m];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        float xv[8];
        X::ld8(xv, xr + 32 * r);
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) s = fmaf(q[r][i], xv[i], s);
        a = fmaf(ds[r], s, a);
      }
      acc[m] = a;
    }
  }
}

#define LOOM_QMVW(FMT, X, MAXM, NAME)                                                                  \
  extern "C" __global__ void __launch_bounds__(QMVW_THREADS) NAME(                                 \
      const unsigned char* __restrict__ w, const X::T* __restrict__ x, X::T* __restrict__ y, int M, \
      long long K, long long N, long long rowBytes, long long ldx, long long ldy) { loom_grid_entry();                 \
    const int lane = threadIdx.x % QMV_GROUP, group = threadIdx.x / QMV_GROUP;                    \
    const int groups = QMVW_THREADS / QMV_GROUP;                                                  \
    const long long chunks = K / 32;                                                              \
    for (long long base = (long long)blockIdx.x * groups; base < N; base += (long long)gridDim.x * groups) { \
      const long long n = base + group;                                                           \
      const bool valid = n < N;                                                                   \
      const unsigned char* row = w + (valid ? n : 0) * rowBytes;                                  \
      float acc[MAXM];                                                                            \
      _Pragma("unroll") for (int m = 0; m < MAXM; ++m) acc[m] = 0.f;                              \
      for (long long c = lane; c < chunks; c += QMV_GROUP) qmvw_##FMT<X, MAXM>(row, c, x, ldx, M, acc);          \
      _Pragma("unroll") for (int m = 0; m < MAXM; ++m) {                                          \
        if (m < M) {                                                                              \
          float v = acc[m];                                                                       \
          _Pragma("unroll") for (int s = QMV_GROUP / 2; s > 0; s >>= 1) v += loom_shfl_xor(v, s); \
          if (valid && lane == 0) y[m * ldy + n] = X::st(v);                                      \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
  }
// Each for 1 ≤ M ≤ 8 activation rows, and for M = 1 (suffix _m1: one
// accumulator, fewer registers, more rows resident).
#define LOOM_QMVW2(FMT, X, NAME)           \
  LOOM_QMVW(FMT, X, QMV_MAXM, NAME)         \
  LOOM_QMVW(FMT, X, 1, NAME##_m1)
#define LOOM_QMVW3(FMT)                                    \
  LOOM_QMVW2(FMT, qmvw_x_f32, loom_qmvw_##FMT##_f32)        \
  LOOM_QMVW2(FMT, qmvw_x_f16, loom_qmvw_##FMT##_f16)        \
  LOOM_QMVW2(FMT, qmvw_x_bf16, loom_qmvw_##FMT##_bf16)

#ifndef QMVF_FUSED
LOOM_QMVW3(q4_0)
LOOM_QMVW3(q8_0)
LOOM_QMVW3(q4_k)
LOOM_QMVW3(q6_k)
#endif

// ---- loom_dequantw_q4_k_<out>: the Q4_K dequantization with word loads ----
//
// loom_dequant_q4_k (above) assembles every field from bytes and decodes
// the super-block's header for each 4 outputs: W13p's weight (14336 ×
// 4096) to bf16 took 0.137 ms on an H200, 27% of the copy bandwidth, and
// the prefill product waits for it. Here a super-block's header (d, dmin,
// the 12 scale bytes) is one 16-byte load and a thread's 8 quant bytes
// another, and each thread's 8 outputs are one 16-byte store (bf16, f16;
// two for f32) (qdw_q4_k below says how the outputs are dealt out).
// The arithmetic is dq_q4_k's — d1 = d·sc, m1 = dmin·m, y = d1·q −
// m1, rounded once to the output type — so the results are
// bit-identical. The super-blocks and the output must be 16-byte aligned
// (the host checks, and otherwise runs loom_dequant_q4_k); n is a multiple
// of 256.
// store8f is store8 for 8 values the caller knows are not NaN.
// The word-load kernels below store a thread's 8 outputs, elements i …
// i + 7 of y, through an output object o: o.put8(y, i, v), or o.put8f
// where the caller knows no v is NaN. The plain outputs store the values
// (LOOM_QDW_PUT8: store8 at y + i); DequantFused's (kernels/quant.go)
// passes each, rounded to the dequantization's dtype, through the
// epilogue it was fused with.
#define LOOM_QDW_PUT8                                                                            \
  LOOM_DEV void put8(T* y, long long i, const float* v) const { store8(y + i, v); }             \
  LOOM_DEV void put8f(T* y, long long i, const float* v) const { store8f(y + i, v); }
struct QdwF32 {
  typedef float T;
  static LOOM_DEV void store8(float* y, const float* v) {
    reinterpret_cast<uint4*>(y)[0] = make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
    reinterpret_cast<uint4*>(y)[1] = make_uint4(__float_as_uint(v[4]), __float_as_uint(v[5]), __float_as_uint(v[6]), __float_as_uint(v[7]));
  }
  static LOOM_DEV void store8f(float* y, const float* v) { store8(y, v); }
  LOOM_QDW_PUT8
};
#define LOOM_QDW_HALF(NAME, CV2, CV2F)                                                               \
  struct NAME {                                                                                      \
    typedef unsigned short T;                                                                        \
    static LOOM_DEV void store8(unsigned short* y, const float* v) {                                 \
      reinterpret_cast<uint4*>(y)[0] = make_uint4(CV2(v[0], v[1]), CV2(v[2], v[3]), CV2(v[4], v[5]), CV2(v[6], v[7])); \
    }                                                                                                \
    static LOOM_DEV void store8f(unsigned short* y, const float* v) {                                \
      reinterpret_cast<uint4*>(y)[0] = make_uint4(CV2F(v[0], v[1]), CV2F(v[2], v[3]), CV2F(v[4], v[5]), CV2F(v[6], v[7])); \
    }                                                                                                \
    LOOM_QDW_PUT8                                                                                    \
  };
LOOM_DEV unsigned int qdw_f16x2(float lo, float hi) {
  return (unsigned int)loom_f32_to_f16(lo) | ((unsigned int)loom_f32_to_f16(hi) << 16);
}
// qdw_bf16x2_finite(lo, hi): loom_f32x2_to_bf16x2 of two values that are
// not NaN, without its test for them (the hardware's conversion alone on
// NVIDIA sm_80+).
LOOM_DEV unsigned int qdw_bf16x2_finite(float lo, float hi) {
#if defined(LOOM_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned int r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return loom_f32x2_to_bf16x2(lo, hi);
#endif
}
LOOM_QDW_HALF(QdwF16, qdw_f16x2, qdw_f16x2)
LOOM_QDW_HALF(QdwBF16, loom_f32x2_to_bf16x2, qdw_bf16x2_finite)

// loom_dequant8_<fmt>_<out>: the byte-wise kernels' arithmetic (dq_<fmt>,
// so the same bits) with 8 consecutive outputs a thread, stored at once
// (one 16-byte store for f16/bf16, two for f32), so that a wave's stores
// are consecutive bytes; the byte-wise kernel's 4 outputs a thread, stored
// one by one, write 2 or 4 bytes a lane 8 or 16 apart. The output must be
// 16-byte aligned (the host checks, and otherwise runs loom_dequant_*); n
// is a multiple of 8 (every block size is).
#define LOOM_DEQUANT8(FMT, BLK, BYTES, O, NAME) LOOM_DEQUANT_N(FMT, BLK, BYTES, 8, O::T, NAME, O::store8)
#define LOOM_DEQUANT8_3(FMT, BLK, BYTES)                                \
  LOOM_DEQUANT8(FMT, BLK, BYTES, QdwF32, loom_dequant8_##FMT##_f32)     \
  LOOM_DEQUANT8(FMT, BLK, BYTES, QdwF16, loom_dequant8_##FMT##_f16)     \
  LOOM_DEQUANT8(FMT, BLK, BYTES, QdwBF16, loom_dequant8_##FMT##_bf16)
#ifndef QMVF_FUSED
LOOM_DEQUANT8_3(q4_0, 32, 18)
LOOM_DEQUANT8_3(q4_1, 32, 20)
LOOM_DEQUANT8_3(q5_0, 32, 22)
LOOM_DEQUANT8_3(q5_1, 32, 24)
LOOM_DEQUANT8_3(q8_0, 32, 34)
LOOM_DEQUANT8_3(q8_1, 32, 36)
LOOM_DEQUANT8_3(q2_k, 256, 84)
LOOM_DEQUANT8_3(q3_k, 256, 110)
LOOM_DEQUANT8_3(q4_k, 256, 144)
LOOM_DEQUANT8_3(q5_k, 256, 176)
LOOM_DEQUANT8_3(q6_k, 256, 210)
LOOM_DEQUANT8_3(q8_k, 256, 292)
#endif
// qdw_q4_k: a group of 32 threads (whatever the wave size: the threads do
// not meet) takes 4 super-blocks (1024 outputs) at a time, its thread i
// outputs 8i … 8i + 7 of each (sub-block 2j + h, j = i/8, h = i/4 mod 2:
// quant bytes 32j + 8(i mod 4) …, their low or high nibbles), so that each
// store instruction writes 512 consecutive bytes (bf16). The first version
// gave a thread a 32-weight chunk and two 32-byte runs of outputs 64 bytes
// apart: each store wrote every other 16 bytes, and W13d ran at 50–51% of
// the copy bandwidth (0.071 ms, H200).
//
// ncu (H200, W13d-q4_k, session 35): SM throughput 80%, DRAM 49% — the
// kernel issued instructions more than it moved bytes. So a lane decodes
// its sub-block's 6-bit scale and minimum without branches (its sub-block
// s = 2j + h is fixed: bytes s and s + 4, and s − 4 for s ≥ 4, of the 12
// scale bytes; the branching form diverged within every warp, half its
// lanes at s < 4), its quants are masked 4 at a time before each becomes
// a float, and where the super-block's d and dmin are finite (every
// output is then finite: at most 65504·63·15 in magnitude) the outputs are
// narrowed without the per-pair NaN test (QdwBF16::store8f). W13d-q4_k,
// three rounds alternating in one call: 0.045 ms, 79–80% of copy, against
// 0.054, 66%; the prefill product W13p-q4_k 0.137 against 0.146 ms.
// Tried and taken back (session 36, three rounds alternating in one call):
// 8 super-blocks a warp instead of 4 (more loads in flight a lane, half
// the blocks): 0.048–0.049 ms, 74% of copy; streaming stores
// (st.global.cs) of the outputs: 0.046 ms, 77%. The prefill product
// followed each (0.139–0.140 and 0.138–0.139 against 0.137 ms).
// ncu (session 36, W13d, bf16): this kernel took 60 registers a thread
// with 4 super-blocks a warp at a time, so 4 blocks of 256 fitted a
// multiprocessor and 43% of its warps were active, DRAM 59% of peak;
// qdw_b32's Q4_0 takes 32 (8 blocks, 82% active, DRAM 65%). So a warp now
// takes QDW_Q4K_SB = 2 super-blocks at a time (the host still launches a
// thread per 32 outputs; the grid-stride loop takes the rest), half the
// headers live, and on NVIDIA the registers are capped so that
// QDW_Q4K_MINB = 6 blocks of 256 fit a multiprocessor. H200, three rounds
// alternating in one call (session 37): W13d-q4_k 0.044 ms, 81–82% of copy,
// against 0.045–0.046, 79–80%; the prefill product W13p-q4_k 0.135–0.136
// ms (442–444 TFLOP/s) against 0.136–0.137 (439–442). The 2 super-blocks
// without the register cap: 79–80%, no better than 4.
#define QDW_Q4K_SB 2
#define QDW_Q4K_MINB 6
#if defined(LOOM_NVIDIA)
#define QDW_Q4K_BOUNDS __launch_bounds__(256, QDW_Q4K_MINB)
#else
#define QDW_Q4K_BOUNDS __launch_bounds__(256)
#endif
// qdw_k45<O, HB>: qdw_q4_k (HB false), or Q5_K's the same way (HB:
// 176-byte super-blocks, the thread's 8 quant bytes at 48 + 32j + l and
// their fifth bits, bit s, in qh bytes l … l + 7 at 16 + l; q 0…31).
template <class O, bool HB>
LOOM_DEV void qdw_k45(const unsigned char* __restrict__ src, typename O::T* __restrict__ y, long long n, const O& o) {
  constexpr int SB = HB ? 176 : 144, QS = HB ? 48 : 16;
  const long long sbs = n / 256;
  const int lane = threadIdx.x & 31, j = lane >> 3, h = (lane >> 2) & 1, l = 8 * (lane & 3);
  // get_scale_min_k4 for sub-block s, with A = byte s + 4, P = byte s,
  // Q = byte s − 4: s < 4: scale P & 63, min A & 63; s ≥ 4: scale
  // (A & 15) | (Q >> 6) << 4, min (A >> 4) | (P >> 6) << 4.
  const int s = 2 * j + h;
  const bool hi = s >= 4;
  const int ia = s + 4, ip = s, iq = hi ? s - 4 : 0;
  const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long s0 = (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * QDW_Q4K_SB; s0 < sbs; s0 += QDW_Q4K_SB * warps) {
    uint4 hd[QDW_Q4K_SB];
    uint2 qw[QDW_Q4K_SB], qh[QDW_Q4K_SB];
#pragma unroll
    for (int k = 0; k < QDW_Q4K_SB; ++k) {
      const unsigned char* b = src + SB * min(s0 + k, sbs - 1);
      hd[k] = *reinterpret_cast<const uint4*>(b);
      qw[k] = *reinterpret_cast<const uint2*>(b + QS + 32 * j + l);
      if (HB) qh[k] = *reinterpret_cast<const uint2*>(b + 16 + l);
    }
#pragma unroll
    for (int k = 0; k < QDW_Q4K_SB; ++k) {
      if (s0 + k >= sbs) break;
      const float d = loom_f16_to_f32((unsigned short)(hd[k].x & 0xffffu)),
                  dmin = loom_f16_to_f32((unsigned short)(hd[k].x >> 16));
      const unsigned int sw[3] = {hd[k].y, hd[k].z, hd[k].w};
      const unsigned int A = qmvw_byte(sw, ia), P = qmvw_byte(sw, ip), Q = qmvw_byte(sw, iq);
      const float sc = qmvw_f(hi ? (A & 15u) | ((Q >> 6) << 4) : P & 63u);
      const float mn = qmvw_f(hi ? (A >> 4) | ((P >> 6) << 4) : A & 63u);
      const float d1 = d * sc, m1 = dmin * mn;
      unsigned int qs[2] = {(qw[k].x >> (4 * h)) & 0x0F0F0F0Fu, (qw[k].y >> (4 * h)) & 0x0F0F0F0Fu};
      if (HB) {
        qs[0] |= ((qh[k].x >> s) & 0x01010101u) << 4;
        qs[1] |= ((qh[k].y >> s) & 0x01010101u) << 4;
      }
      float v[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = d1 * qmvw_f((qs[i >> 2] >> (8 * (i & 3))) & 255u) - m1;
      const long long at = 256 * (s0 + k) + 64 * j + 32 * h + l;
      if ((hd[k].x & 0x7C00u) != 0x7C00u && (hd[k].x & 0x7C000000u) != 0x7C000000u) // d, dmin finite
        o.put8f(y, at, v);
      else
        o.put8(y, at, v);
    }
  }
}
template <class O>
LOOM_DEV void qdw_q4_k(const unsigned char* __restrict__ src, typename O::T* __restrict__ y, long long n, const O& o) {
  qdw_k45<O, false>(src, y, n, o);
}
template <class O>
LOOM_DEV void qdw_q5_k(const unsigned char* __restrict__ src, typename O::T* __restrict__ y, long long n, const O& o) {
  qdw_k45<O, true>(src, y, n, o);
}
// qdw_q6_k: Q6_K the same way (loom_dequantw_q6_k_<out>). A group of 32
// threads takes 4 super-blocks at a time; thread i outputs 8i … 8i + 7 of
// each: half h = i/16, quarter r = i/4 mod 4, positions l = 8(i mod 4) …
// + 7 of the quarter (dq_q6_k's l + 32r), whose 8 low-quant bytes (ql at
// 64h + 32(r & 1) + l, nibble r/2) and 8 high-bit bytes (qh at 128 + 32h
// + l, bits 2r) are each 8 consecutive bytes, 8-byte aligned within the
// super-block, and whose scale (byte 192 + 8h + l/16 + 2r) is one. A
// super-block is 210 bytes, so every other one lies 2 bytes off a 4-byte
// boundary: each 8-byte run is read as the 3 aligned words from the
// boundary at or below it and shifted by its misalignment (qdw_run8: every
// word read holds a byte of the run). The arithmetic is dq_q6_k's, d·sc
// first, then times q − 32 (exact as a float), so the results are
// bit-identical; with d finite every output is (at most 65504·128·32 in
// magnitude) and is narrowed without the NaN test. The loom_dequant8 kernel it replaces decoded every output from
// single bytes (five loads an output). H200, W13d-q6_k, three rounds
// alternating in one call (session 36): 0.052 ms, 76% of copy, against
// 0.071–0.072, 55%.
// qdw_run8(p, lo, hi): the 8 bytes at p (2-byte aligned) as two words,
// from the aligned words that hold them (a third only where p lies off a
// 4-byte boundary: every word read holds a byte of the run).
LOOM_DEV void qdw_run8(const unsigned char* p, unsigned int* lo, unsigned int* hi) {
  const unsigned long long a = (unsigned long long)p;
  const unsigned int* w = reinterpret_cast<const unsigned int*>(a & ~3ull);
  const unsigned int s = 8u * (unsigned int)(a & 3ull), w0 = w[0], w1 = w[1], w2 = w[s ? 2 : 1];
  *lo = (unsigned int)((((unsigned long long)w1 << 32) | w0) >> s);
  *hi = (unsigned int)((((unsigned long long)w2 << 32) | w1) >> s);
}
template <class O>
LOOM_DEV void qdw_q6_k(const unsigned char* __restrict__ src, typename O::T* __restrict__ y, long long n, const O& o) {
  const long long sbs = n / 256;
  const int lane = threadIdx.x & 31, h = lane >> 4, r = (lane >> 2) & 3, l = 8 * (lane & 3);
  const int oql = 64 * h + 32 * (r & 1) + l, oqh = 128 + 32 * h + l, osc = 192 + 8 * h + (l >> 4) + 2 * r;
  const int nib = 4 * (r >> 1), hb = 2 * r;
  const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long s0 = (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * 4; s0 < sbs; s0 += 4 * warps) {
    unsigned int L[4][2], H[4][2], D[4];
    int sc[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const unsigned char* b = src + 210 * min(s0 + k, sbs - 1);
      qdw_run8(b + oql, &L[k][0], &L[k][1]);
      qdw_run8(b + oqh, &H[k][0], &H[k][1]);
      sc[k] = (signed char)b[osc];
      D[k] = qmvw_u16(b + 208);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (s0 + k >= sbs) break;
      const float d1 = loom_f16_to_f32((unsigned short)D[k]) * (float)sc[k];
      float v[8];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const unsigned int q = ((L[k][j] >> nib) & 0x0F0F0F0Fu) | (((H[k][j] >> hb) & 0x03030303u) << 4);
#pragma unroll
        for (int i = 0; i < 4; ++i) v[4 * j + i] = d1 * (qmvw_f((q >> (8 * i)) & 255u) - 32.f);
      }
      const long long at = 256 * (s0 + k) + 8 * lane;
      if ((D[k] & 0x7C00u) != 0x7C00u) // d finite
        o.put8f(y, at, v);
      else
        o.put8(y, at, v);
    }
  }
}
// qdw_b32<F, O>: Q4_0 and Q8_0 the same way (loom_dequantw_q4_0_<out>,
// loom_dequantw_q8_0_<out>): a group of 32 threads takes 4 runs of 8
// blocks (1024 outputs) at a time, thread i outputs 8i … 8i + 7 of each
// run: block i/4's 8 quant bytes at F::off(i), read by qdw_run8 (the 18-
// and 34-byte blocks lie 2 bytes off a 4-byte boundary every other time)
// and made 4 bytes a word by F::bytes, each then a float as qmvw_f(b) −
// F::BIAS, exact: the byte-wise kernels' arithmetic, (q − 8)·d for Q4_0
// (its low nibbles for i mod 4 < 2, high ones after) and q·d for Q8_0 (a
// signed byte q biased by 128). The loom_dequant8 kernels they replace
// read a byte an output. H200, alternating in one call (session 36), to
// bf16: W13d-q4_0 0.043 ms, 83–84% of copy, against 0.050, 70–71%;
// W13d-q8_0 0.050 ms, 86–87%, against 0.054, 80%.
struct qdw_f_q4_0 {
  static const int BYTES = 18;
  static constexpr float BIAS = 8.f;
  static LOOM_DEV int off(int i) { return 2 + 8 * (i & 1); }
  static LOOM_DEV unsigned int bytes(unsigned int w, int i) { return (w >> (4 * ((i >> 1) & 1))) & 0x0F0F0F0Fu; }
};
struct qdw_f_q8_0 {
  static const int BYTES = 34;
  static constexpr float BIAS = 128.f;
  static LOOM_DEV int off(int i) { return 2 + 8 * (i & 3); }
  static LOOM_DEV unsigned int bytes(unsigned int w, int) { return w ^ 0x80808080u; }
};
template <class F, class O>
LOOM_DEV void qdw_b32(const unsigned char* __restrict__ src, typename O::T* __restrict__ y, long long n, const O& o) {
  const long long runs = n / 256;
  const int lane = threadIdx.x & 31, blk = lane >> 2, off = F::off(lane);
  const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
  for (long long s0 = (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * 4; s0 < runs; s0 += 4 * warps) {
    unsigned int Q[4][2], D[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const unsigned char* b = src + F::BYTES * (8 * min(s0 + k, runs - 1) + blk);
      qdw_run8(b + off, &Q[k][0], &Q[k][1]);
      D[k] = qmvw_u16(b);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (s0 + k >= runs) break;
      const float d = loom_f16_to_f32((unsigned short)D[k]);
      float v[8];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const unsigned int q = F::bytes(Q[k][j], lane);
#pragma unroll
        for (int i = 0; i < 4; ++i) v[4 * j + i] = (qmvw_f((q >> (8 * i)) & 255u) - F::BIAS) * d;
      }
      const long long at = 256 * (s0 + k) + 8 * lane;
      if ((D[k] & 0x7C00u) != 0x7C00u) // d finite: so is every output
        o.put8f(y, at, v);
      else
        o.put8(y, at, v);
    }
  }
}
// LOOM_DEQUANTW3(FMT, BOUNDS, CALL): a format's word-load entries
// loom_dequantw_<FMT>_<f32|f16|bf16>, each CALL<output>(src, y, n).
#define LOOM_DEQUANTW(BOUNDS, CALL, O, NAME)                                                          \
  extern "C" __global__ void BOUNDS NAME(const unsigned char* __restrict__ src, O::T* __restrict__ y, \
                                         long long n) {                                               \
    loom_grid_entry();                                                                                \
    CALL<O>(src, y, n, O());                                                                          \
  }
#define LOOM_DEQUANTW3(FMT, BOUNDS, CALL)                               \
  LOOM_DEQUANTW(BOUNDS, CALL, QdwF32, loom_dequantw_##FMT##_f32)        \
  LOOM_DEQUANTW(BOUNDS, CALL, QdwF16, loom_dequantw_##FMT##_f16)        \
  LOOM_DEQUANTW(BOUNDS, CALL, QdwBF16, loom_dequantw_##FMT##_bf16)
template <class O>
LOOM_DEV void qdw_q4_0(const unsigned char* __restrict__ src, typename O::T* __restrict__ y, long long n, const O& o) {
  qdw_b32<qdw_f_q4_0, O>(src, y, n, o);
}
template <class O>
LOOM_DEV void qdw_q8_0(const unsigned char* __restrict__ src, typename O::T* __restrict__ y, long long n, const O& o) {
  qdw_b32<qdw_f_q8_0, O>(src, y, n, o);
}
#ifndef QMVF_FUSED
LOOM_DEQUANTW3(q4_k, QDW_Q4K_BOUNDS, qdw_q4_k)
LOOM_DEQUANTW3(q5_k, QDW_Q4K_BOUNDS, qdw_q5_k)
LOOM_DEQUANTW3(q4_0, __launch_bounds__(256), qdw_q4_0)
LOOM_DEQUANTW3(q8_0, __launch_bounds__(256), qdw_q8_0)
LOOM_DEQUANTW3(q6_k, __launch_bounds__(256), qdw_q6_k)
#endif

// ---- loom_q8x_<x> and loom_qmvq_<fmt>_<x>: the mat-vec on 8-bit activations ----
//
// The word-load kernels above are bound by instructions, not bytes: every
// weight costs a nibble extraction, a conversion to f32, an activation
// conversion and a multiply-add, ~6 operations, which held a Q4_K mat-vec
// of W13's size at ~30 µs, a quarter of the copy bandwidth. As Candle and
// ggml do (mmvq), these quantize the activations once per product to 8
// bits per 32-value block, and multiply 4 weights by 4 activations in one
// integer dot-product instruction (dp4a on NVIDIA, v_dot4_i32_i8 on AMD
// where the target has it, four multiplies elsewhere); the block's scales
// are applied once per 8, 16 or 32 products.
//
// loom_q8x_<x>: x [M, K] (contiguous) → qa [M, K] int8, qa = rint(x/d)
// with d = amax/127 of each 32-value block (0 for a block of zeros), dx
// [M, K/32] the blocks' d, sx [M, K/16] the sums of each 16 values of x
// (f32, before quantization: a format with a minimum or an offset needs
// Σx over its sub-blocks). A thread per 4 values; the 8 threads of a
// block meet by shuffles with xor 1, 2, 4, which stay inside aligned
// groups of 8 lanes on 32- and 64-lane waves. K is a multiple of 32.
//
// Tried and dropped (H200, W13, one call): staging each weight row in
// shared memory with 16-byte loads before the same arithmetic (the 18- and
// 34-byte blocks are only 2-byte aligned, so lanes load them in 2- and
// 4-byte pieces) was no faster: Q4_0 41% of copy staged against 46% as
// here, Q4_K 35% both, Q6_K 37% against 39%, Q8_0 51% against 55%. The
// weight loads are not what holds these kernels near 40%.
//
// The result differs from the f32 product by the activations' rounding,
// |error| ≤ Σ_k |w_k|·d_k/2 over the row (d_k the block's step): the
// conformance tolerance of quantized products (tests/conformance/quant.go)
// is the CPU's, which quantizes the same way (GGML's Q8_0/Q8_K).

LOOM_DEV int loom_dp4a(int a, int b, int c) {
#if defined(LOOM_NVIDIA)
  int r;
  asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
#elif defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
    defined(__gfx941__) || defined(__gfx942__) || defined(__gfx1030__) || defined(__gfx1031__) ||  \
    defined(__gfx1032__) || defined(__gfx1034__) || defined(__gfx1035__)
  return __builtin_amdgcn_sdot4(a, b, c, false);
#else
#pragma unroll
  for (int i = 0; i < 32; i += 8) c += ((a << (24 - i)) >> 24) * ((b << (24 - i)) >> 24);
  return c;
#endif
}

// q8_pack4v quantizes a thread's 4 consecutive values v of x, the thread
// one of the 8 aligned lanes of a 32-value block (they meet by
// xor-shuffles with 1, 2, 4, so every lane must call it): it returns them
// as bytes rint(v/d) packed in a word, with *d the block's step amax/127
// (0 for a block of zeros) and *sum the sum of SUM lanes' values (4: the
// 16 of the thread's half-block; 8: all 32), in f32 before rounding.
// q8_pack4 loads the values from p first. loom_q8x, loom_q8t and
// loom_qmvf's quantizers (q8_quantize) take it, each storing in its own
// layout.
template <int SUM>
LOOM_DEV unsigned int q8_pack4v(const float* v, float* d, float* sum) {
  float amax = 0.f, s = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    amax = fmaxf(amax, fabsf(v[j]));
    s += v[j];
  }
#pragma unroll
  for (int k = 1; k < 8; k <<= 1) amax = fmaxf(amax, loom_shfl_xor(amax, k));
#pragma unroll
  for (int k = 1; k < SUM; k <<= 1) s += loom_shfl_xor(s, k);
  const float id = amax > 0.f ? 127.f / amax : 0.f;
  *d = amax / 127.f;
  *sum = s;
  unsigned int packed = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) packed |= ((unsigned int)(int)rintf(v[j] * id) & 255u) << (8 * j);
  return packed;
}
template <class X, int SUM>
LOOM_DEV unsigned int q8_pack4(const typename X::T* __restrict__ p, float* d, float* sum) {
  float v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = X::ld1(p + j);
  return q8_pack4v<SUM>(v, d, sum);
}

template <class X>
LOOM_DEV void q8x(const typename X::T* __restrict__ x, int* __restrict__ qa, float* __restrict__ dx,
                  float* __restrict__ sx, long long n4) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool valid = i < n4;
  float d, sum;
  const unsigned int packed = q8_pack4<X, 4>(x + 4 * (valid ? i : 0), &d, &sum);
  if (valid) {
    qa[i] = (int)packed;
    if ((i & 3) == 0) sx[i >> 2] = sum;
    if ((i & 7) == 0) dx[i >> 3] = d;
  }
}

#define LOOM_Q8X(X, NAME)                                                                          \
  extern "C" __global__ void __launch_bounds__(256) NAME(const X::T* __restrict__ x, int* __restrict__ qa, \
                                                         float* __restrict__ dx, float* __restrict__ sx,   \
                                                         long long n4) { loom_grid_entry();                          \
    q8x<X>(x, qa, dx, sx, n4);                                                                     \
  }
#ifndef QMVF_FUSED
LOOM_Q8X(qmvw_x_f32, loom_q8x_f32)
LOOM_Q8X(qmvw_x_f16, loom_q8x_f16)
LOOM_Q8X(qmvw_x_bf16, loom_q8x_bf16)
#endif

// qmvq_<fmt>(row, c, qa, dx, sx, K, M, acc): chunk c of a weight row (the
// same chunks as the word-load kernels) times the quantized activations,
// added into acc[0..M). Activation element e of row m is byte m·K + e of
// qa; its block's step dx[(m·K + e)/32]; sx[(m·K + e)/16] the sum of its
// 16 values.
LOOM_DEV unsigned int qmvq_w32(const unsigned char* p) { return qmvw_u16(p) | (qmvw_u16(p + 2) << 16); }

// Q4_0 block c: d, 16 bytes: weight i (low nibble of byte i) and i + 16
// (high nibble), each q − 8: Σ = d·(dx·Σ q·a − 8·Σx).
template <int MAXM>
LOOM_DEV void qmvq_q4_0(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                        long long K, int M, float* acc) {
  const unsigned char* b = row + 18 * c;
  const float d = qmvw_h(b);
  int lo[4], hi[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned int w = qmvq_w32(b + 2 + 4 * k);
    lo[k] = (int)(w & 0x0F0F0F0Fu);
    hi[k] = (int)((w >> 4) & 0x0F0F0F0Fu);
  }
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
    if (m < M) {
      const long long e = m * K + 32 * c;
      const uint4 a = *reinterpret_cast<const uint4*>(qa + e / 4);
      const uint4 a2 = *reinterpret_cast<const uint4*>(qa + e / 4 + 4);
      int s = loom_dp4a(lo[0], (int)a.x, 0);
      s = loom_dp4a(lo[1], (int)a.y, s);
      s = loom_dp4a(lo[2], (int)a.z, s);
      s = loom_dp4a(lo[3], (int)a.w, s);
      s = loom_dp4a(hi[0], (int)a2.x, s);
      s = loom_dp4a(hi[1], (int)a2.y, s);
      s = loom_dp4a(hi[2], (int)a2.z, s);
      s = loom_dp4a(hi[3], (int)a2.w, s);
      acc[m] = fmaf(d, dx[e / 32] * (float)s - 8.f * (sx[e / 16] + sx[e / 16 + 1]), acc[m]);
    }
  }
}

// Q8_0 block c: d, 32 signed bytes: Σ = d·dx·Σ q·a.
template <int MAXM>
LOOM_DEV void qmvq_q8_0(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                        long long K, int M, float* acc) {
  const unsigned char* b = row + 34 * c;
  const float d = qmvw_h(b);
  int q[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) q[k] = (int)qmvq_w32(b + 2 + 4 * k);
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
    if (m < M) {
      const long long e = m * K + 32 * c;
      const uint4 a = *reinterpret_cast<const uint4*>(qa + e / 4);
      const uint4 a2 = *reinterpret_cast<const uint4*>(qa + e / 4 + 4);
      int s = loom_dp4a(q[0], (int)a.x, 0);
      s = loom_dp4a(q[1], (int)a.y, s);
      s = loom_dp4a(q[2], (int)a.z, s);
      s = loom_dp4a(q[3], (int)a.w, s);
      s = loom_dp4a(q[4], (int)a2.x, s);
      s = loom_dp4a(q[5], (int)a2.y, s);
      s = loom_dp4a(q[6], (int)a2.z, s);
      s = loom_dp4a(q[7], (int)a2.w, s);
      acc[m] = fmaf(d * dx[e / 32], (float)s, acc[m]);
    }
  }
}

// Q4_K chunk c (part h of quarter j of super-block c/8, as qmvw_q4_k):
// low nibbles are 16 weights of sub-block 2j, high nibbles 16 of 2j + 1;
// Σ = d·sc·dx·Σ q·a − dmin·m·Σx per sub-block's 16.
// qmvq_k45<MAXM, HB>: Q4_K's chunk (HB false) or Q5_K's (HB: 176-byte
// super-blocks, quant bytes 48 + 32j + 16h …, whose fifth bits are bits
// 2j and 2j + 1 of qh bytes 16h + i at 16 + 16h: weights 16h + i of
// sub-blocks 2j and 2j + 1; q 0…31).
template <int MAXM, bool HB>
LOOM_DEV void qmvq_k45(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                       long long K, int M, float* acc) {
  const long long sb = c >> 3;
  const int t = (int)(c & 7), j = t >> 1, h = t & 1;
  const unsigned char* b = row + (HB ? 176 : 144) * sb;
  const unsigned int dm = qmvw_u32(b);
  const float d = loom_f16_to_f32((unsigned short)(dm & 0xffffu)), dmin = loom_f16_to_f32((unsigned short)(dm >> 16));
  unsigned int s[3];
  s[0] = qmvw_u32(b + 4);
  s[1] = qmvw_u32(b + 8);
  s[2] = qmvw_u32(b + 12);
  float sc0, m0, sc1, m1;
  qmvw_scale_min_k4(s, 2 * j, &sc0, &m0);
  qmvw_scale_min_k4(s, 2 * j + 1, &sc1, &m1);
  const uint4 qw = *reinterpret_cast<const uint4*>(b + (HB ? 48 : 16) + 32 * j + 16 * h);
  const unsigned int qs[4] = {qw.x, qw.y, qw.z, qw.w};
  unsigned int qh[4] = {0u, 0u, 0u, 0u};
  if (HB) {
    const uint4 hw = *reinterpret_cast<const uint4*>(b + 16 + 16 * h);
    qh[0] = hw.x;
    qh[1] = hw.y;
    qh[2] = hw.z;
    qh[3] = hw.w;
  }
  int lo[4], hi[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    lo[k] = (int)((qs[k] & 0x0F0F0F0Fu) | (((qh[k] >> (2 * j)) & 0x01010101u) << 4));
    hi[k] = (int)(((qs[k] >> 4) & 0x0F0F0F0Fu) | (((qh[k] >> (2 * j + 1)) & 0x01010101u) << 4));
  }
  const float d0 = d * sc0, d1 = d * sc1, n0 = dmin * m0, n1 = dmin * m1;
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
    if (m < M) {
      const long long e = m * K + 256 * sb + 64 * j + 16 * h;
      const uint4 a = *reinterpret_cast<const uint4*>(qa + e / 4);
      const uint4 a2 = *reinterpret_cast<const uint4*>(qa + e / 4 + 8);
      int s0 = loom_dp4a(lo[0], (int)a.x, 0);
      s0 = loom_dp4a(lo[1], (int)a.y, s0);
      s0 = loom_dp4a(lo[2], (int)a.z, s0);
      s0 = loom_dp4a(lo[3], (int)a.w, s0);
      int s1 = loom_dp4a(hi[0], (int)a2.x, 0);
      s1 = loom_dp4a(hi[1], (int)a2.y, s1);
      s1 = loom_dp4a(hi[2], (int)a2.z, s1);
      s1 = loom_dp4a(hi[3], (int)a2.w, s1);
      float v = acc[m];
      v = fmaf(d0 * dx[e / 32], (float)s0, v);
      v = fmaf(-n0, sx[e / 16], v);
      v = fmaf(d1 * dx[e / 32 + 1], (float)s1, v);
      acc[m] = fmaf(-n1, sx[e / 16 + 2], v);
    }
  }
}
template <int MAXM>
LOOM_DEV void qmvq_q4_k(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                        long long K, int M, float* acc) {
  qmvq_k45<MAXM, false>(row, c, qa, dx, sx, K, M, acc);
}
template <int MAXM>
LOOM_DEV void qmvq_q5_k(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                        long long K, int M, float* acc) {
  qmvq_k45<MAXM, true>(row, c, qa, dx, sx, K, M, acc);
}

// Q6_K chunk c (as qmvw_q6_k): 8 positions of each of four 32-weight
// quarters r, one scale each; the 6-bit q (0…63) go into the dot product
// as they are and the offset 32 comes off as 32·Σa (a dot product with
// ones): Σ = d·scale·dx·(Σ q·a − 32·Σ a).
template <int MAXM>
LOOM_DEV void qmvq_q6_k(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                        long long K, int M, float* acc) {
  const long long sb = c >> 3;
  const int t = (int)(c & 7), hf = t >> 2, l0 = 8 * (t & 3);
  const unsigned char* b = row + 210 * sb;
  const unsigned char* ql = b + 64 * hf + l0;
  const unsigned char* qh = b + 128 + 32 * hf + l0;
  const signed char* scl = reinterpret_cast<const signed char*>(b + 192 + 8 * hf + (l0 >> 4));
  const float d = qmvw_h(b + 208);
  int q[4][2];
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    const unsigned int L = qmvq_w32(ql + 4 * w), L2 = qmvq_w32(ql + 32 + 4 * w), H = qmvq_w32(qh + 4 * w);
    q[0][w] = (int)((L & 0x0F0F0F0Fu) | ((H & 0x03030303u) << 4));
    q[1][w] = (int)((L2 & 0x0F0F0F0Fu) | (((H >> 2) & 0x03030303u) << 4));
    q[2][w] = (int)(((L >> 4) & 0x0F0F0F0Fu) | (((H >> 4) & 0x03030303u) << 4));
    q[3][w] = (int)(((L2 >> 4) & 0x0F0F0F0Fu) | (((H >> 6) & 0x03030303u) << 4));
  }
  float ds[4];
#pragma unroll
  for (int r = 0; r < 4; ++r) ds[r] = d * (float)scl[2 * r];
#pragma unroll
  for (int m = 0; m < MAXM; ++m) {
    if (m < M) {
      float v = acc[m];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const long long e = m * K + 256 * sb + 128 * hf + 32 * r + l0;
        const uint2 a = *reinterpret_cast<const uint2*>(qa + e / 4);
        const int s = loom_dp4a(q[r][1], (int)a.y, loom_dp4a(q[r][0], (int)a.x, 0));
        const int n = loom_dp4a(0x01010101, (int)a.y, loom_dp4a(0x01010101, (int)a.x, 0));
        v = fmaf(ds[r] * dx[e / 32], (float)(s - 32 * n), v);
      }
      acc[m] = v;
    }
  }
}

#define LOOM_QMVQ(FMT, X, MAXM, NAME)                                                                  \
  extern "C" __global__ void __launch_bounds__(QMVW_THREADS) NAME(                                 \
      const unsigned char* __restrict__ w, const int* __restrict__ qa, const float* __restrict__ dx, \
      const float* __restrict__ sx, X::T* __restrict__ y, int M, long long K, long long N,          \
      long long rowBytes, long long ldy) { loom_grid_entry();                                                        \
    const int lane = threadIdx.x % QMV_GROUP, group = threadIdx.x / QMV_GROUP;                    \
    const int groups = QMVW_THREADS / QMV_GROUP;                                                  \
    const long long chunks = K / 32;                                                              \
    for (long long base = (long long)blockIdx.x * groups; base < N; base += (long long)gridDim.x * groups) { \
      const long long n = base + group;                                                           \
      const bool valid = n < N;                                                                   \
      const unsigned char* row = w + (valid ? n : 0) * rowBytes;                                  \
      float acc[MAXM];                                                                            \
      _Pragma("unroll") for (int m = 0; m < MAXM; ++m) acc[m] = 0.f;                              \
      _Pragma("unroll 4") for (long long c = lane; c < chunks; c += QMV_GROUP) qmvq_##FMT<MAXM>(row, c, qa, dx, sx, K, M, acc); \
      _Pragma("unroll") for (int m = 0; m < MAXM; ++m) {                                          \
        if (m < M) {                                                                              \
          float v = acc[m];                                                                       \
          _Pragma("unroll") for (int s = QMV_GROUP / 2; s > 0; s >>= 1) v += loom_shfl_xor(v, s); \
          if (valid && lane == 0) y[m * ldy + n] = X::st(v);                                      \
        }                                                                                         \
      }                                                                                           \
    }                                                                                             \
  }
#define LOOM_QMVQ2(FMT, X, NAME)           \
  LOOM_QMVQ(FMT, X, QMV_MAXM, NAME)         \
  LOOM_QMVQ(FMT, X, 1, NAME##_m1)
#define LOOM_QMVQ3(FMT)                                    \
  LOOM_QMVQ2(FMT, qmvw_x_f32, loom_qmvq_##FMT##_f32)        \
  LOOM_QMVQ2(FMT, qmvw_x_f16, loom_qmvq_##FMT##_f16)        \
  LOOM_QMVQ2(FMT, qmvw_x_bf16, loom_qmvq_##FMT##_bf16)

#ifndef QMVF_FUSED
LOOM_QMVQ3(q4_0)
LOOM_QMVQ3(q8_0)
LOOM_QMVQ3(q4_k)
LOOM_QMVQ3(q6_k)
LOOM_QMVQ3(q5_k)
#endif

// ---- loom_qmvt_<fmt>_<x>: 2–8 activation rows on the tensor cores (NVIDIA sm_80+) ----
//
// loom_qmvq multiplies each weight chunk into every activation row with
// dp4a: for 8 rows a lane loads the 8 rows' 32 activation bytes (256 from
// the cache) and issues 64 dp4a per 18-byte Q4_0 block, which held W13's
// product with 8 rows at 4.1–4.4× the one-row time (issue 14 asks ≤ 1.5×:
// the weight bytes are the same). The tensor cores' integer MMA
// (mma.m16n8k32 s8·s8 → s32) takes a 16-row × 32-weight tile of 8-bit
// weights and the 32 × 8 activation tile of all 8 rows in one instruction;
// each activation byte a warp loads now serves 16 weight rows. A 32-weight
// chunk of Q4_0, Q8_0 and Q4_K (one sub-block) has one scale, so it is one
// k32 MMA whose 16 × 8 integer sums are scaled into f32 accumulators;
// Q6_K's scales cover 16 weights, so it takes k16 MMAs. Quants with an
// offset (Q4_0's q − 8, Q6_K's q − 32) are made signed bytes in registers
// (q + 0x78 or 0x60, then the sign bit flipped, per byte without carries),
// so the offset is in the integer product; Q4_K's minimum, which is not a
// multiple of the quant, comes off as dmin·m·Σx with loom_q8t's f32 sums.
//
// A block is QMVT_WARPS warps on one tile of 16 weight rows; warp w takes
// the w-th of QMVT_WARPS equal runs of the row's chunks, and the warps' 16
// × 8 partial sums meet in shared memory, added in warp order. Lane 4g + t
// holds the MMA's fragments as the PTX ISA lays them out: weight rows g
// and g + 8, quant bytes 4t … 4t + 3 (and + 16); activation row g (zeros
// for g ≥ M), the same bytes; results for rows g, g + 8 and activation
// rows 2t, 2t + 1.
//
// Loads are what bound this kernel, counted in the cache's wavefronts (one
// per 128-byte line a warp's load touches): a fragment load touches 8
// weight rows, 8 lines for 2–4 bytes a lane. The first version read the
// fragments from global memory, and x from loom_q8x's row-major layout
// (8 lines a load too): ~72 wavefronts per Q4_0 block and warp, which
// held W13 with 8 rows at 0.044 ms (Q4_K 0.036, Q8_0 0.062; more warps or
// deeper unrolling changed nothing). Now (1) a warp copies its 16 rows'
// next U blocks into shared memory with 16-byte cp.async while it
// multiplies the current ones (fragment reads from shared memory are
// conflict-free: the row stride is 4 banks mod 32), and (2) x comes
// quantized by loom_q8t in tiles, block b's 8 rows' 32 bytes together, so
// a B fragment is 2 lines and the 8 rows' steps one. W13 with 8 rows went
// to 0.020 ms for Q4_0 and Q4_K (1.43× one row), Q6_K 0.032 (its x tiles
// only), Q8_0 0.032 (H200). Tried and dropped (one call, each twice): 3
// and 4 stages in flight instead of 2 (Q4_0, Q4_K): Q4_0 0.020 all three,
// Q4_K 0.021, 0.022–0.023 and 0.021–0.022 — the copies are not what waits.
// Also tried and dropped (three rounds alternating in one call): the block
// copying each stage together, QMVT_WARPS consecutive spans of each row
// (576 bytes of Q4_0 instead of a warp's 144, consecutive threads on
// consecutive bytes), warp w multiplying span w of the stage, a
// __syncthreads around each stage: Q4_0 0.028 against 0.020 ms, Q8_0
// 0.039 against 0.031, Q4_K 0.021 both — the block-wide barriers cost more
// than longer runs of bytes save.
//
// The first stage of each warp is issued before the kernel waits for the
// one ahead (loom_grid_defer: the weight is a constant, and the kernel
// ahead is always loom_q8t, which does not write it), so the weight's
// first round trip overlaps loom_q8t's 2.7 µs (ncu) instead of following
// it: W13 with 8 rows, three rounds alternating in one call (session 36,
// H200), Q4_0 1,721–1,739 GB/s against 1,650–1,696, Q4_K 1,669–1,696
// against 1,602–1,645, Q8_0 2,024–2,056 against 1,987–2,005 (0.019,
// 0.020, 0.031 ms).
//
// Tried and taken back (session 37, H200, three rounds alternating in one
// call): two stages a warp issued before the wait instead of one (the same
// two buffers), and three buffers, all three issued before the wait, where
// they fit 48 KiB (Q4_0, Q4_K): 8 rows Q4_0 0.021 ms both (1,559–1,620
// GB/s against 1,721–1,727), Q4_K 0.020 and 0.025 against 0.020, Q8_0
// 0.032 against 0.031 — more of the weight requested while loom_q8t runs
// slows loom_q8t and the first stages more than it saves (as session 31's
// L2 prefetches before the wait did the decode step). ncu (same session,
// W13m8-q4_0): 17.8 µs, DRAM 40% of peak, registers limiting a
// multiprocessor to 8 blocks (50% theoretical occupancy, 38% achieved),
// 10.4 cycles between a warp's instructions, a third of them waiting on
// L1 loads (the activation fragments, which every 16-row tile reads
// again). So the same session tried blocks of two 16-row tiles (Q4_0,
// Q4_K, Q6_K; Q8_0's stages would pass 48 KiB), each warp's activation
// fragments serving both (branch wip/qmvt-rt2; TestGPUQMVQ8 and the
// suite passed): slower, three rounds alternating in one call — 8 rows
// Q4_0 0.022 ms against 0.019–0.020, Q4_K 0.025 against 0.020, Q6_K
// 0.034 against 0.032: half the blocks, each warp's stages twice as long,
// fewer loads in flight.
//
// Also tried and taken back (session 42, H200, branch wip/qmvtf; its
// results were loom_qmvt's bits in every case of its GPU test):
// loom_q8t and loom_qmvt as one launch, loom_qmvtf — the blocks resident,
// one a multiprocessor (1,024 threads, ~200 KB of dynamic shared memory),
// each quantizing all 8 activation rows into its shared memory (one
// vector load a thread a group, all issued at once, the first weight
// stage already in flight) and then walking 7–8 of these 16-row tiles at
// once, the activation fragments read from shared memory: W13 with 8
// rows, two and three rounds alternating with the two launches in two
// calls, Q4_0 0.024–0.025 ms against 0.019–0.020, Q4_K 0.026–0.027
// against 0.020, Q6_K 0.033–0.036 against 0.032, Q8_0 0.036–0.038
// against 0.031. ncu: 24.4 µs, 11.9 cycles between a warp's issues at 32
// warps a multiprocessor (63 registers), DRAM 29% of peak: the same
// tiles' work as here, plus each block's quantization of the 32,768
// activations, which loom_q8t spreads over 32 blocks.
//
// Also tried and taken back (session 52, H200, branch wip/qmvt-layout;
// TestGPUQMVQ8's 632 cases passed): loom_q8t writing each block's words
// in the order 0, 4, 1, 5, 2, 6, 3, 7 and a row pair's steps and sums as
// one float4, so that a lane's B fragment is one 8-byte load and its
// steps and sums one 16-byte load (against the L1 waits ncu showed).
// W13 with 8 rows, two rounds alternating with the kernels here in one
// call: Q4_K 1,650–1,719 GB/s against 1,672–1,696, Q4_0 1,710–1,733
// against 1,713–1,759, Q8_0 1,991–2,011 against 2,038–2,041, Q6_K
// 1,653–1,666 against 1,599–1,611 — noise but for Q6_K (+3.5%) and Q8_0
// (−2%): fewer load instructions are not what these wait on.
//
// NVIDIA only (the mma.sync instruction; the host takes these from sm_80):
// elsewhere loom_qmvq does the job. (AMD's MFMA has int8 tiles too, on
// gfx90a and later; none of that hardware is here to test a port on.)
#if defined(LOOM_NVIDIA)
#define QMVT_WARPS 4

// qmvt_mma32(c, a, b): c = A·B, A 16 × 32 and B 32 × 8 signed bytes, as
// mma.m16n8k32.row.col lays them out (see above).
LOOM_DEV void qmvt_mma32(int* c, const unsigned int* a, const unsigned int* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0));
#else
  __trap();
#endif
}
// qmvt_mma16(c, a, b): the same for A 16 × 16 (rows g, g + 8; bytes 4t …)
// and B 16 × 8 (activation row g, bytes 4t …): mma.m16n8k16.
LOOM_DEV void qmvt_mma16(int* c, const unsigned int* a, unsigned int b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %7, %7, %7};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(b), "r"(0));
#else
  __trap();
#endif
}

// cp.async: 16 bytes global → shared without registers, in groups a
// thread commits and waits for (all but the newest n).
LOOM_DEV void qmvt_cp16(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned int d = (unsigned int)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
#else
  __trap();
#endif
}
LOOM_DEV void qmvt_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
LOOM_DEV void qmvt_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// qmvt_off8(q), qmvt_off32(q): q − 8 (quants 0 … 15) and q − 32 (0 … 63) in
// each byte, as signed bytes.
LOOM_DEV unsigned int qmvt_off8(unsigned int q) { return (q + 0x78787878u) ^ 0x80808080u; }
LOOM_DEV unsigned int qmvt_off32(unsigned int q) { return (q + 0x60606060u) ^ 0x80808080u; }

// loom_q8t_<x>: x [M, K] (M ≤ 8, K a multiple of 32) → the 8-bit
// activations as loom_qmvt reads them, a tile per 32-value block: qt
// [K/32][8][32] int8 (block b of row m at bytes 32(8b + m) …), dt [K/32][8]
// the blocks' steps amax/127, st [K/32][8] the sums of their 32 values
// (f32, before rounding); rows M … 7 are not written (the kernel does not
// read them). Q8TBytes(K) in all: 8K + K + K bytes. A thread per 4 values,
// the 8 of a block meeting by xor-shuffles (q8_pack4) as in loom_q8x.
template <class X>
LOOM_DEV void q8t(const typename X::T* __restrict__ x, unsigned int* __restrict__ qt, float* __restrict__ dt,
                  float* __restrict__ st, long long n4, long long K) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool valid = i < n4;
  const long long e = 4 * (valid ? i : 0);
  float d, sum;
  const unsigned int packed = q8_pack4<X, 8>(x + e, &d, &sum);
  const long long m = e / K, k = e - m * K, b = k >> 5;
  if (valid) {
    qt[(b * 8 + m) * 8 + ((k & 31) >> 2)] = packed;
    if ((k & 31) == 0) {
      dt[b * 8 + m] = d;
      st[b * 8 + m] = sum;
    }
  }
}
#define LOOM_Q8T(X, NAME)                                                                               \
  extern "C" __global__ void __launch_bounds__(256)                                                   \
      NAME(const X::T* __restrict__ x, unsigned int* __restrict__ qt, float* __restrict__ dt,          \
           float* __restrict__ st, long long n4, long long K) {                                        \
    loom_grid_entry();                                                                                \
    q8t<X>(x, qt, dt, st, n4, K);                                                                     \
  }

// What a lane reads of the activations: a = its activation row g's word t
// of block 0 (block b's is a[64b], a[64b + 4]; av false where g ≥ M, whose
// B fragment is zeros), d and x its activation rows 2t, 2t + 1's steps and
// sums of block 0 (block b's at d[8b], x[8b]).
struct qmvt_ctx {
  const unsigned int* a;
  bool av;
  const float* d;
  const float* x;
  int t;
  LOOM_DEV unsigned int act(long long word) const { return av ? a[word] : 0u; }
  LOOM_DEV float2 step(long long b) const { return *reinterpret_cast<const float2*>(d + 8 * b); }
  LOOM_DEV float2 sum(long long b) const { return *reinterpret_cast<const float2*>(x + 8 * b); }
};

// qmvt_acc(acc, r, s0, s1, e): acc[i] += scale · r[i] for rows g (weight
// scale s0) and g + 8 (s1) and activation rows 2t (step e.x), 2t + 1 (e.y).
// Tried and taken back (session 53, H200, branch wip/qmvt-f22;
// TestGPUQMVQ8's 633 cases passed): the sums converted without I2F, which
// NVIDIA issues at a quarter of the rate (16 a clock a multiprocessor),
// as __int_as_float(r + 0x4B400000) − 1.5·2^23 (exact for |r| < 2^22, so
// the same bits; Q6_K's scaled pairs kept I2F). W13 with 8 rows, three
// rounds alternating in one call: Q4_0 1,605–1,612 GB/s against
// 1,693–1,710, Q4_K 1,625–1,653 against 1,666–1,696, Q8_0 2,013–2,026
// against 2,001–2,030 — the two instructions cost more issue slots than
// the conversion unit's waits: it is not what these kernels wait on.
LOOM_DEV void qmvt_acc(float* acc, const int* r, float s0, float s1, float2 e) {
  acc[0] = fmaf(s0 * e.x, (float)r[0], acc[0]);
  acc[1] = fmaf(s0 * e.y, (float)r[1], acc[1]);
  acc[2] = fmaf(s1 * e.x, (float)r[2], acc[2]);
  acc[3] = fmaf(s1 * e.y, (float)r[3], acc[3]);
}

// A format: BYTES a step's bytes of one row (STEP weights); step(c, b0, b1,
// s, acc) multiplies step s of weight rows g (its bytes at b0) and g + 8
// (b1) into acc. U > 0: the warp stages U steps of its 16 rows at a time
// in shared memory (U·BYTES a multiple of 16; the host checks that rows are
// 16-byte aligned); U = 0: it reads them from global memory.

// Q4_0 block: d, 16 bytes (low nibbles weights 0–15, high 16–31).
struct qt_q4_0 {
  static const int STEP = 32, BYTES = 18, U = 8;
  static LOOM_DEV void step(const qmvt_ctx& c, const unsigned char* b0, const unsigned char* b1, long long s,
                            float* acc) {
    const unsigned int u0 = qmvq_w32(b0 + 2 + 4 * c.t), u1 = qmvq_w32(b1 + 2 + 4 * c.t);
    const unsigned int a[4] = {qmvt_off8(u0 & 0x0F0F0F0Fu), qmvt_off8(u1 & 0x0F0F0F0Fu),
                               qmvt_off8((u0 >> 4) & 0x0F0F0F0Fu), qmvt_off8((u1 >> 4) & 0x0F0F0F0Fu)};
    const unsigned int b[2] = {c.act(64 * s), c.act(64 * s + 4)};
    int r[4];
    qmvt_mma32(r, a, b);
    qmvt_acc(acc, r, qmvw_h(b0), qmvw_h(b1), c.step(s));
  }
};

// Q8_0 block: d, 32 signed bytes.
struct qt_q8_0 {
  static const int STEP = 32, BYTES = 34, U = 8;
  static LOOM_DEV void step(const qmvt_ctx& c, const unsigned char* b0, const unsigned char* b1, long long s,
                            float* acc) {
    const unsigned int a[4] = {qmvq_w32(b0 + 2 + 4 * c.t), qmvq_w32(b1 + 2 + 4 * c.t), qmvq_w32(b0 + 18 + 4 * c.t),
                               qmvq_w32(b1 + 18 + 4 * c.t)};
    const unsigned int b[2] = {c.act(64 * s), c.act(64 * s + 4)};
    int r[4];
    qmvt_mma32(r, a, b);
    qmvt_acc(acc, r, qmvw_h(b0), qmvw_h(b1), c.step(s));
  }
};

// Q4_K super-block: d, dmin, 12 scale bytes, then 4 quarters of 32 bytes
// whose low nibbles are sub-block 2q and high nibbles 2q + 1; weight =
// d·sc·q − dmin·m (16-byte aligned: the header is one load). qt_k45<HB>:
// Q4_K, or with HB Q5_K (below).
template <bool HB>
struct qt_k45 {
  static const int STEP = 256, BYTES = HB ? 176 : 144, U = 1;
  static LOOM_DEV void step(const qmvt_ctx& c, const unsigned char* b0, const unsigned char* b1, long long s,
                            float* acc) {
    const uint4 h0 = *reinterpret_cast<const uint4*>(b0), h1 = *reinterpret_cast<const uint4*>(b1);
    const float d0 = loom_f16_to_f32((unsigned short)(h0.x & 0xffffu)), n0 = loom_f16_to_f32((unsigned short)(h0.x >> 16));
    const float d1 = loom_f16_to_f32((unsigned short)(h1.x & 0xffffu)), n1 = loom_f16_to_f32((unsigned short)(h1.x >> 16));
    const unsigned int k0[3] = {h0.y, h0.z, h0.w}, k1[3] = {h1.y, h1.z, h1.w};
    // Q5_K: the fifth bits of the lane's quant bytes 4t … 4t + 3 (and
    // + 16) of every quarter, bit j for sub-block j.
    unsigned int e0 = 0u, e1 = 0u, f0 = 0u, f1 = 0u;
    if (HB) {
      e0 = qmvw_u32(b0 + 16 + 4 * c.t);
      e1 = qmvw_u32(b1 + 16 + 4 * c.t);
      f0 = qmvw_u32(b0 + 32 + 4 * c.t);
      f1 = qmvw_u32(b1 + 32 + 4 * c.t);
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int o = (HB ? 48 : 16) + 32 * q + 4 * c.t;
      const unsigned int u0 = qmvw_u32(b0 + o), u1 = qmvw_u32(b1 + o), v0 = qmvw_u32(b0 + o + 16),
                         v1 = qmvw_u32(b1 + o + 16);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * q + h;
        const long long blk = 8 * s + j;
        const unsigned int a[4] = {((u0 >> (4 * h)) & 0x0F0F0F0Fu) | (((e0 >> j) & 0x01010101u) << 4),
                                   ((u1 >> (4 * h)) & 0x0F0F0F0Fu) | (((e1 >> j) & 0x01010101u) << 4),
                                   ((v0 >> (4 * h)) & 0x0F0F0F0Fu) | (((f0 >> j) & 0x01010101u) << 4),
                                   ((v1 >> (4 * h)) & 0x0F0F0F0Fu) | (((f1 >> j) & 0x01010101u) << 4)};
        const unsigned int b[2] = {c.act(64 * blk), c.act(64 * blk + 4)};
        int r[4];
        qmvt_mma32(r, a, b);
        float sc0, m0, sc1, m1;
        qmvw_scale_min_k4(k0, j, &sc0, &m0);
        qmvw_scale_min_k4(k1, j, &sc1, &m1);
        qmvt_acc(acc, r, d0 * sc0, d1 * sc1, c.step(blk));
        const float2 x = c.sum(blk);
        const float o0 = n0 * m0, o1 = n1 * m1;
        acc[0] = fmaf(-o0, x.x, acc[0]);
        acc[1] = fmaf(-o0, x.y, acc[1]);
        acc[2] = fmaf(-o1, x.x, acc[2]);
        acc[3] = fmaf(-o1, x.y, acc[3]);
      }
    }
  }
};
typedef qt_k45<false> qt_q4_k;
// Q5_K super-block: Q4_K's with 32 bytes of fifth bits (qh) between the
// header and the quants: byte l of qh holds bit j of weight l of
// sub-block j's 32 (176 bytes, 16-byte aligned: staged as Q4_K's).
typedef qt_k45<true> qt_q5_k;

// Q6_K super-block: ql[128], qh[64], 16 signed scales, d. In half hf,
// weight 128hf + 32r + l (quarter r, position l) has ql byte 64hf + l (+ 32
// for odd r; the high nibble for r ≥ 2), qh bits 2r of byte 32hf + l, and
// scale 8hf + 2r + l/16: one scale per 16 weights, so a k16 MMA each.
// (Not staged: 210 bytes make 16-byte units only 8 super-blocks at a time,
// 27 KB a warp. Tried and taken back (session 36, H200, three rounds
// alternating in one call): a super-block a stage, each row's 53 aligned
// 4-byte words copied with 4-byte cp.async at the span's offset mod 4,
// 6.8 KB a warp: W13 with 8 rows 0.037–0.038 ms against 0.033 read from
// global memory — 27 copies a lane a stage cost more than the eight-line
// fragment loads they replaced.)
// PAIRED (qt_q6_k, the default): the two k16 MMAs of a 32-value block of
// the activations (one activation step) are scaled by their int8 weight
// scales and summed in integers (|Σ| ≤ 2 · 16 · 32 · 127 · 128 < 2^24:
// exact in the float it is converted to), then converted and multiplied
// once: per pair 4 conversions and 4 fused multiply-adds instead of 8 and
// 8, and the scales' multiplies by d gone. qt_q6_k_f, the form before
// (each MMA's sums converted and scaled on their own): LOOM_QMVT_Q6K=f,
// for comparison (kernels.QMVTEntry). H200, W13 with 8 rows, two rounds
// alternating in one call (session 50): 1,571–1,603 and 1,588–1,601 GB/s
// against 1,525–1,550 and 1,553 (0.030–0.031 ms against 0.031–0.032);
// 1.63× the one-row time against 1.70× (issue 14 asks ≤ 1.5×).
template <bool PAIRED>
struct qt_q6_k_t {
  static const int STEP = 256, BYTES = 210, U = 0;
  static LOOM_DEV int iscale(const unsigned int* sw, int k) {
    return (int)(signed char)((sw[k >> 2] >> (8 * (k & 3))) & 255u);
  }
  static LOOM_DEV float scale(const unsigned int* sw, int k) { return (float)iscale(sw, k); }
  static LOOM_DEV void quarters(const unsigned char* b, int o, int oh, unsigned int* q) {
    const unsigned int L = qmvq_w32(b + o), L2 = qmvq_w32(b + o + 32), H = qmvq_w32(b + oh);
    q[0] = (L & 0x0F0F0F0Fu) | ((H & 0x03030303u) << 4);
    q[1] = (L2 & 0x0F0F0F0Fu) | (((H >> 2) & 0x03030303u) << 4);
    q[2] = ((L >> 4) & 0x0F0F0F0Fu) | (((H >> 4) & 0x03030303u) << 4);
    q[3] = ((L2 >> 4) & 0x0F0F0F0Fu) | (((H >> 6) & 0x03030303u) << 4);
  }
  static LOOM_DEV void step(const qmvt_ctx& c, const unsigned char* b0, const unsigned char* b1, long long s,
                            float* acc) {
    const float d0 = qmvw_h(b0 + 208), d1 = qmvw_h(b1 + 208);
    unsigned int s0[4], s1[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s0[i] = qmvq_w32(b0 + 192 + 4 * i);
      s1[i] = qmvq_w32(b1 + 192 + 4 * i);
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      if constexpr (PAIRED) {
        unsigned int q0[2][4], q1[2][4];
#pragma unroll
        for (int gi = 0; gi < 2; ++gi) {
          const int o = 64 * hf + 16 * gi + 4 * c.t, oh = 128 + 32 * hf + 16 * gi + 4 * c.t;
          quarters(b0, o, oh, q0[gi]);
          quarters(b1, o, oh, q1[gi]);
        }
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const long long blk = 8 * s + 4 * hf + r;
          int ir[4] = {0, 0, 0, 0};
#pragma unroll
          for (int gi = 0; gi < 2; ++gi) {
            const unsigned int a[2] = {qmvt_off32(q0[gi][r]), qmvt_off32(q1[gi][r])};
            int res[4];
            qmvt_mma16(res, a, c.act(64 * blk + 4 * gi));
            const int k = 8 * hf + 2 * r + gi;
            const int c0 = iscale(s0, k), c1 = iscale(s1, k);
            ir[0] += res[0] * c0;
            ir[1] += res[1] * c0;
            ir[2] += res[2] * c1;
            ir[3] += res[3] * c1;
          }
          qmvt_acc(acc, ir, d0, d1, c.step(blk));
        }
      } else {
#pragma unroll
        for (int gi = 0; gi < 2; ++gi) {
          const int o = 64 * hf + 16 * gi + 4 * c.t, oh = 128 + 32 * hf + 16 * gi + 4 * c.t;
          unsigned int q0[4], q1[4];
          quarters(b0, o, oh, q0);
          quarters(b1, o, oh, q1);
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const unsigned int a[2] = {qmvt_off32(q0[r]), qmvt_off32(q1[r])};
            const long long blk = 8 * s + 4 * hf + r;
            int res[4];
            qmvt_mma16(res, a, c.act(64 * blk + 4 * gi));
            const int k = 8 * hf + 2 * r + gi;
            qmvt_acc(acc, res, d0 * scale(s0, k), d1 * scale(s1, k), c.step(blk));
          }
        }
      }
    }
  }
};
typedef qt_q6_k_t<true> qt_q6_k;
typedef qt_q6_k_t<false> qt_q6_k_f;

// qmvt_stage<F>: a warp's shared memory, two stages of 16 rows.
template <class F>
struct qmvt_stage {
  static const int SPAN = F::U * F::BYTES; // a row's bytes a stage
  static const int PER = F::U > 0 ? SPAN / 16 : 1; // its 16-byte units
  static const int UNITS = 16 * PER;
};

template <class F, class X>
LOOM_DEV void qmvt(const unsigned char* __restrict__ w, const unsigned int* __restrict__ qt,
                   const float* __restrict__ dt, const float* __restrict__ st, typename X::T* __restrict__ y, int M,
                   long long K, long long N, long long rowBytes, long long ldy) {
  static_assert(QMVT_WARPS * 32 >= 128, "qmvt: a thread per result of the 16 × 8 tile");
  static_assert(F::U == 0 || (F::U * F::BYTES) % 16 == 0, "qmvt: a stage is whole 16-byte units");
  typedef qmvt_stage<F> S;
  __shared__ uint4 stage[QMVT_WARPS][2][S::UNITS];
  __shared__ float part[QMVT_WARPS][128];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = (long long)blockIdx.x * 16;
  qmvt_ctx c;
  c.av = g < M;
  c.a = qt + g * 8 + t;
  c.d = dt + 2 * t;
  c.x = st + 2 * t;
  c.t = t;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  const long long steps = K / F::STEP;
  if (F::U > 0) {
    // Stage p holds steps pU … pU + U − 1 of the tile's 16 rows, row r at
    // bytes r·SPAN; the next stage's copies are in flight while this one
    // is multiplied.
    const long long spans = steps / (F::U > 0 ? F::U : 1);
    const long long p0 = spans * warp / QMVT_WARPS, p1 = spans * (warp + 1) / QMVT_WARPS;
    unsigned char* buf = reinterpret_cast<unsigned char*>(stage[warp]);
    auto issue = [&](long long p, int k) {
      for (int u = lane; u < S::UNITS; u += 32) {
        const int row = u / S::PER, off = 16 * (u - row * S::PER);
        const unsigned char* src = w + min(n0 + row, N - 1) * rowBytes + p * S::SPAN + off;
        qmvt_cp16(buf + (k * S::UNITS + row * S::PER) * 16 + off, src);
      }
      qmvt_commit();
    };
    if (p0 < p1) issue(p0, 0);
    // The weight is a constant the kernel ahead (loom_q8t) does not write:
    // its first stage is in flight before the wait (loom_grid_defer).
    loom_grid_entry();
    for (long long p = p0; p < p1; ++p) {
      const int k = (int)((p - p0) & 1);
      if (p + 1 < p1) {
        issue(p + 1, k ^ 1);
        qmvt_wait<1>();
      } else {
        qmvt_wait<0>();
      }
      __syncwarp();
      const unsigned char* r0 = buf + k * S::UNITS * 16 + g * S::SPAN;
      const unsigned char* r1 = r0 + 8 * S::SPAN;
#pragma unroll
      for (int u = 0; u < (F::U > 0 ? F::U : 1); ++u) F::step(c, r0 + u * F::BYTES, r1 + u * F::BYTES, p * F::U + u, acc);
      __syncwarp();
    }
  } else {
    loom_grid_entry();
    const unsigned char* w0 = w + min(n0 + g, N - 1) * rowBytes;
    const unsigned char* w1 = w + min(n0 + g + 8, N - 1) * rowBytes;
    const long long s0 = steps * warp / QMVT_WARPS, s1 = steps * (warp + 1) / QMVT_WARPS;
#pragma unroll 2
    for (long long s = s0; s < s1; ++s) F::step(c, w0 + s * F::BYTES, w1 + s * F::BYTES, s, acc);
  }
  // part[w][16·col + row]: rows g, g + 8; activation rows 2t, 2t + 1.
  part[warp][16 * (2 * t) + g] = acc[0];
  part[warp][16 * (2 * t + 1) + g] = acc[1];
  part[warp][16 * (2 * t) + g + 8] = acc[2];
  part[warp][16 * (2 * t + 1) + g + 8] = acc[3];
  __syncthreads();
  const int i = threadIdx.x, row = i & 15, col = i >> 4;
  if (i < 128) {
    float v = part[0][i];
#pragma unroll
    for (int k = 1; k < QMVT_WARPS; ++k) v += part[k][i];
    if (col < M && n0 + row < N) y[col * ldy + n0 + row] = X::st(v);
  }
}

#define LOOM_QMVT(FMT, X, NAME)                                                                          \
  extern "C" __global__ void __launch_bounds__(QMVT_WARPS * 32)                                        \
      NAME(const unsigned char* __restrict__ w, const unsigned int* __restrict__ qt,                   \
           const float* __restrict__ dt, const float* __restrict__ st, X::T* __restrict__ y, int M,     \
           long long K, long long N, long long rowBytes, long long ldy) {                              \
    loom_grid_defer();                                                                                 \
    qmvt<qt_##FMT, X>(w, qt, dt, st, y, M, K, N, rowBytes, ldy);                                       \
  }
#define LOOM_QMVT3(FMT)                                \
  LOOM_QMVT(FMT, qmvw_x_f32, loom_qmvt_##FMT##_f32)    \
  LOOM_QMVT(FMT, qmvw_x_f16, loom_qmvt_##FMT##_f16)    \
  LOOM_QMVT(FMT, qmvw_x_bf16, loom_qmvt_##FMT##_bf16)
#ifndef QMVF_FUSED
LOOM_Q8T(qmvw_x_f32, loom_q8t_f32)
LOOM_Q8T(qmvw_x_f16, loom_q8t_f16)
LOOM_Q8T(qmvw_x_bf16, loom_q8t_bf16)
LOOM_QMVT3(q4_0)
LOOM_QMVT3(q8_0)
LOOM_QMVT3(q4_k)
LOOM_QMVT3(q6_k)
LOOM_QMVT3(q6_k_f)
LOOM_QMVT3(q5_k)
#endif
#endif // LOOM_NVIDIA


// ---- loom_qmvf_<fmt>_<x>: the one-row 8-bit mat-vec in one launch ----
//
// loom_q8x + loom_qmvq's arithmetic for one activation row (a decode
// step), with three changes:
//
//   - each block quantizes x itself, into shared memory (qa, dx, sx as
//     loom_q8x lays them out), so the product is one launch; the blocks
//     stay resident (as many as the device holds) and walk the rows
//     grid-stride, so x is quantized once per block;
//   - weight blocks are read with aligned loads of V bytes (4 or 8; 16
//     measured no faster) from the aligned address at or below them, and the 2-byte
//     misalignment of Q4_0's 18-, Q8_0's 34- and Q6_K's 210-byte blocks is
//     undone in registers (qf_window); loom_qmvq reads them 2 bytes at a
//     time (and Q4_K's header 4), one pass of the load unit over the
//     wave's cache lines per load;
//   - a group of 32 lanes takes QMVF_ROWS = 2 weight rows at once, so the
//     activations it reads from shared memory serve both;
//   - a Q4_K lane takes 64 weights (two sub-blocks: one header load and
//     decode for both): W13 43% → 54–55% of the copy bandwidth (loom
//     bench, one call, twice).
//
// W13 on an H200 (x[1,4096] · W[14336,4096]ᵀ, 200 launches rotating over
// four copies of the weight, so that it is not read from L2): Q4_0 17.8 →
// 14.6 µs, Q8_0 26.1 → 21.8, Q4_K 23.1 → 20.7, Q6_K 28.6 → 24.6. The
// load width barely matters (4, 8 and 16 bytes within 2%, 16 slower for
// Q4_0 by 13%: more registers, fewer blocks resident); 2 rows a group
// beat 1 by 4–14% and 4 (fewer blocks resident).
//
// Tried and dropped: (1) the same for 8 activation rows: slower than the
// two launches (Q4_0 68 against 57 µs; the 8 rows' activations fill
// shared memory and registers), so more rows keep loom_q8x + loom_qmvq;
// (2) splitting a block's rows into equal runs of 32-chunk spans, one
// run per group, so that every group has the same work to within one
// span (with rows a group at a time, 14336 rows over the 5280 resident
// groups leave some a row more), with the next span's loads issued
// before the current one is multiplied: 23.0 against 14.6 µs for Q4_0 —
// the double-buffered loads cost registers, 3 blocks resident instead of
// 5, and these kernels are bound by how many loads are in flight; (3) 64
// weights a lane for Q4_0 (two blocks) and Q6_K (16 positions a quarter),
// as for Q4_K: Q4_0 51% against 56% of copy, Q6_K 45% against 44%, within
// the noise, so both keep 32; (4, session 31) each lane loading its
// first chunk of its first rows before quantizing x, so that the weight's
// and x's round trips would overlap: the 1B Q4_K decode step's median
// 0.819 against 0.739 ms the call before, W13 Q4_K 49% against 55% of
// copy (Q4_0 60% against 57–58%, Q6_K 43% against 45%, Q8_0 69% against
// 71%): the chunk's registers, live across the quantization, cost more
// than the round trip saved.
//
// Shared memory: K·(1 + 4/32 + 4/16) bytes (QMVFSharedBytes); the host
// takes this path where that fits in 48 KiB (K ≤ 35744).

// qf_funnel16(lo, hi): bytes 2–5 of the 8-byte value hi:lo.
LOOM_DEV unsigned int qf_funnel16(unsigned int lo, unsigned int hi) { return (lo >> 16) | (hi << 16); }

// qf_window<NW, V>(p, X): X[0..NW) are the NW aligned 4-byte words from
// the 4-byte boundary at or below p, read with aligned V-byte loads (V = 4
// or 8; 16 measured no faster) from the V-byte boundary at or below p.
// The reads may reach past the bytes the caller needs, up to the end of
// the last piece; each caller says why its pieces stay in memory that
// holds the weights (every piece holds a byte of the block, or lies
// inside the block or super-block).
template <int NW, int V>
LOOM_DEV void qf_window(const unsigned char* p, unsigned int* X) {
  static_assert(V == 4 || V == 8, "qf_window: V is 4 or 8");
  const unsigned long long a = (unsigned long long)p;
  if (V == 4) {
    const unsigned int* w = reinterpret_cast<const unsigned int*>(a & ~3ull);
#pragma unroll
    for (int k = 0; k < NW; ++k) X[k] = w[k];
  } else {
    // NW + 1 words from the 8-byte boundary; word j = (a >> 2) & 1 first.
    const uint2* w = reinterpret_cast<const uint2*>(a & ~7ull);
    unsigned int W[NW + 2];
#pragma unroll
    for (int k = 0; k < (NW + 2) / 2; ++k) {
      const uint2 u = w[k];
      W[2 * k] = u.x;
      W[2 * k + 1] = u.y;
    }
    const bool j = (a >> 2) & 1;
#pragma unroll
    for (int k = 0; k < NW; ++k) X[k] = j ? W[k + 1] : W[k];
  }
}

// A format's chunk: load(row, c) reads chunk c of a weight row (the
// chunks of loom_qmvq), dot(qa, dx, sx, c) multiplies it by one
// activation row in shared memory (qa its 8-bit values as ints, dx its
// 32-value steps, sx its 16-value sums).
template <int V>
struct qf_q4_0 {
  static constexpr int CHUNK = 32;
  float d;
  int lo[4], hi[4];
  LOOM_DEV void load(const unsigned char* row, long long c) {
    const unsigned char* p = row + 18 * c;
    unsigned int X[5];
    qf_window<5, V>(p, X); // V = 4: the last word starts ≤ p + 16; 8: ≤ p + 16 (block: p … p + 17)
    const bool s = ((unsigned long long)p & 2) != 0;
    d = loom_f16_to_f32((unsigned short)(s ? X[0] >> 16 : X[0] & 0xffffu));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const unsigned int q = s ? X[k + 1] : qf_funnel16(X[k], X[k + 1]);
      lo[k] = (int)(q & 0x0F0F0F0Fu);
      hi[k] = (int)((q >> 4) & 0x0F0F0F0Fu);
    }
  }
  LOOM_DEV float dot(const int* qa, const float* dx, const float* sx, long long c) const {
    const int4 a = reinterpret_cast<const int4*>(qa)[2 * c];
    const int4 a2 = reinterpret_cast<const int4*>(qa)[2 * c + 1];
    int s = loom_dp4a(lo[0], a.x, 0);
    s = loom_dp4a(lo[1], a.y, s);
    s = loom_dp4a(lo[2], a.z, s);
    s = loom_dp4a(lo[3], a.w, s);
    s = loom_dp4a(hi[0], a2.x, s);
    s = loom_dp4a(hi[1], a2.y, s);
    s = loom_dp4a(hi[2], a2.z, s);
    s = loom_dp4a(hi[3], a2.w, s);
    return d * (dx[c] * (float)s - 8.f * (sx[2 * c] + sx[2 * c + 1]));
  }
};

template <int V>
struct qf_q8_0 {
  static constexpr int CHUNK = 32;
  float d;
  int q[8];
  LOOM_DEV void load(const unsigned char* row, long long c) {
    const unsigned char* p = row + 34 * c;
    unsigned int X[9];
    qf_window<9, V>(p, X); // the last piece starts ≤ p + 32 (block: p … p + 33)
    const bool s = ((unsigned long long)p & 2) != 0;
    d = loom_f16_to_f32((unsigned short)(s ? X[0] >> 16 : X[0] & 0xffffu));
#pragma unroll
    for (int k = 0; k < 8; ++k) q[k] = (int)(s ? X[k + 1] : qf_funnel16(X[k], X[k + 1]));
  }
  LOOM_DEV float dot(const int* qa, const float* dx, const float* sx, long long c) const {
    const int4 a = reinterpret_cast<const int4*>(qa)[2 * c];
    const int4 a2 = reinterpret_cast<const int4*>(qa)[2 * c + 1];
    int s = loom_dp4a(q[0], a.x, 0);
    s = loom_dp4a(q[1], a.y, s);
    s = loom_dp4a(q[2], a.z, s);
    s = loom_dp4a(q[3], a.w, s);
    s = loom_dp4a(q[4], a2.x, s);
    s = loom_dp4a(q[5], a2.y, s);
    s = loom_dp4a(q[6], a2.z, s);
    s = loom_dp4a(q[7], a2.w, s);
    return d * dx[c] * (float)s;
  }
};

// Q4_K (super-blocks 16-byte aligned: the host checks): the header (d,
// dmin, 12 bytes of scales) in one 16-byte load, the 16 quant bytes in
// another; chunk c as qmvq_q4_k.
template <int V>
struct qf_q4_k {
  static constexpr int CHUNK = 64;
  float d0, d1, n0, n1;
  int lo[8], hi[8];
  LOOM_DEV void load(const unsigned char* row, long long c) {
    const long long sb = c >> 2;
    const int j = (int)(c & 3);
    const unsigned char* b = row + 144 * sb;
    const uint4 hd = *reinterpret_cast<const uint4*>(b);
    const uint4 q0 = *reinterpret_cast<const uint4*>(b + 16 + 32 * j);
    const uint4 q1 = *reinterpret_cast<const uint4*>(b + 32 + 32 * j);
    header(hd, j);
    const unsigned int qs[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      lo[k] = (int)(qs[k] & 0x0F0F0F0Fu);
      hi[k] = (int)((qs[k] >> 4) & 0x0F0F0F0Fu);
    }
  }
  // header: d0, d1, n0, n1 of sub-blocks 2j and 2j + 1 from a Q4_K or
  // Q5_K super-block's first 16 bytes hd (d, dmin, the 12 scale bytes).
  LOOM_DEV void header(const uint4& hd, int j) {
    const float d = loom_f16_to_f32((unsigned short)(hd.x & 0xffffu)),
                dmin = loom_f16_to_f32((unsigned short)(hd.x >> 16));
    unsigned int s[3] = {hd.y, hd.z, hd.w};
    float sc0, m0, sc1, m1;
    qmvw_scale_min_k4(s, 2 * j, &sc0, &m0);
    qmvw_scale_min_k4(s, 2 * j + 1, &sc1, &m1);
    d0 = d * sc0;
    d1 = d * sc1;
    n0 = dmin * m0;
    n1 = dmin * m1;
  }
  // Sub-block 2j's 32 weights are the low nibbles (activations e … e+31),
  // 2j + 1's the high ones (e+32 … e+63), e = 256·sb + 64·j = 64·c.
  LOOM_DEV float dot(const int* qa, const float* dx, const float* sx, long long c) const {
    const long long e = 64 * c;
    const int4* a = reinterpret_cast<const int4*>(qa + e / 4);
    const int4 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    int s0 = loom_dp4a(lo[0], a0.x, 0);
    s0 = loom_dp4a(lo[1], a0.y, s0);
    s0 = loom_dp4a(lo[2], a0.z, s0);
    s0 = loom_dp4a(lo[3], a0.w, s0);
    s0 = loom_dp4a(lo[4], a1.x, s0);
    s0 = loom_dp4a(lo[5], a1.y, s0);
    s0 = loom_dp4a(lo[6], a1.z, s0);
    s0 = loom_dp4a(lo[7], a1.w, s0);
    int s1 = loom_dp4a(hi[0], a2.x, 0);
    s1 = loom_dp4a(hi[1], a2.y, s1);
    s1 = loom_dp4a(hi[2], a2.z, s1);
    s1 = loom_dp4a(hi[3], a2.w, s1);
    s1 = loom_dp4a(hi[4], a3.x, s1);
    s1 = loom_dp4a(hi[5], a3.y, s1);
    s1 = loom_dp4a(hi[6], a3.z, s1);
    s1 = loom_dp4a(hi[7], a3.w, s1);
    float v = d0 * dx[e / 32] * (float)s0;
    v = fmaf(-n0, sx[e / 16] + sx[e / 16 + 1], v);
    v = fmaf(d1 * dx[e / 32 + 1], (float)s1, v);
    return fmaf(-n1, sx[e / 16 + 2] + sx[e / 16 + 3], v);
  }
};

// Q5_K (176-byte super-blocks: d, dmin, 12 scale bytes, 32 bytes of
// fifth bits qh, 128 quant bytes; 16-byte aligned where the weight is):
// qf_q4_k's chunk of two sub-blocks with each quant's fifth bit put in
// from qh — byte l of qh holds bit g of weight l of sub-block g, so qh
// word k lines up with quant word k of every 32-byte quarter. The
// arithmetic after that is Q4_K's (q now 0…31).
template <int V>
struct qf_q5_k : qf_q4_k<V> {
  LOOM_DEV void load(const unsigned char* row, long long c) {
    const long long sb = c >> 2;
    const int j = (int)(c & 3);
    const unsigned char* b = row + 176 * sb;
    const uint4 hd = *reinterpret_cast<const uint4*>(b);
    const uint4 h0 = *reinterpret_cast<const uint4*>(b + 16);
    const uint4 h1 = *reinterpret_cast<const uint4*>(b + 32);
    const uint4 q0 = *reinterpret_cast<const uint4*>(b + 48 + 32 * j);
    const uint4 q1 = *reinterpret_cast<const uint4*>(b + 64 + 32 * j);
    this->header(hd, j);
    const unsigned int qs[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    const unsigned int qh[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      this->lo[k] = (int)((qs[k] & 0x0F0F0F0Fu) | (((qh[k] >> (2 * j)) & 0x01010101u) << 4));
      this->hi[k] = (int)(((qs[k] >> 4) & 0x0F0F0F0Fu) | (((qh[k] >> (2 * j + 1)) & 0x01010101u) << 4));
    }
  }
};

// Q2_K and Q3_K (84- and 110-byte super-blocks; no unit path: neither
// size is a multiple of 16): chunk c is 32 weights, 128n + 32j … + 31 of
// super-block c/8 (n = c/4 mod 2, j = c mod 4), two groups of 16 with a
// scale each (scale index 8n + 2j and + 1), the quants bits 2j of 32
// bytes. Q2_K (scales[16]: 4-bit scale, 4-bit minimum; quants at 16 + 32n;
// d, dmin at 80): weight = d·sc·q − dmin·m, q 0…3, the minimum taken off
// with x's 16-value float sums, as Q4_K's. Q3_K (hmask[32]; quants at 32 +
// 32n; 12 bytes of 6-bit scales at 96, d at 108): weight = d·(sc − 32)·(q
// − 4·(1 − h)), h bit 4n + j of hmask byte l: q − 4 formed as a signed
// byte, so the integer sum is the whole weight's. k23_load reads the
// chunk: q (its 32 codes as 8 words of signed bytes), f0, f1 (each 16's
// d·scale) and, for Q2_K, o0, o1 (each 16's dmin·m); both formats' blocks
// are read through aligned 4-byte windows (Q2_K's are 4-byte aligned,
// Q3_K's every other one 2 bytes off), each word holding a byte of the
// super-block.
template <bool Q2>
struct qf_k23 {
  static constexpr int CHUNK = 32;
  int q[8];
  float f0, f1, o0, o1;
  LOOM_DEV void load(const unsigned char* row, long long c) {
    const long long sb = c >> 3;
    const int n = (int)((c >> 2) & 1), j = (int)(c & 3), g = 8 * n + 2 * j;
    if (Q2) {
      const unsigned char* b = row + 84 * sb;
      const unsigned int* w = reinterpret_cast<const unsigned int*>(b);
      const unsigned int dm = w[20];
      const float d = loom_f16_to_f32((unsigned short)(dm & 0xffffu)), dmin = loom_f16_to_f32((unsigned short)(dm >> 16));
      const unsigned int sc = qmvw_u16(b + g); // scales g, g + 1
      f0 = d * qmvw_f(sc & 15u);
      o0 = dmin * qmvw_f((sc >> 4) & 15u);
      f1 = d * qmvw_f((sc >> 8) & 15u);
      o1 = dmin * qmvw_f((sc >> 12) & 15u);
#pragma unroll
      for (int k = 0; k < 8; ++k) q[k] = (int)((w[4 + 8 * n + k] >> (2 * j)) & 0x03030303u);
    } else {
      const unsigned char* b = row + 110 * sb;
      const bool s = ((unsigned long long)b & 2) != 0;
      unsigned int Q[9], H[9], S[4];
      qf_window<9, 4>(b + 32 + 32 * n, Q);
      qf_window<9, 4>(b, H);
      qf_window<4, 4>(b + 96, S); // scales (12 bytes), d (2)
      unsigned int sw[3];
#pragma unroll
      for (int k = 0; k < 3; ++k) sw[k] = s ? qf_funnel16(S[k], S[k + 1]) : S[k];
      const float d = loom_f16_to_f32((unsigned short)(s ? S[3] >> 16 : S[3] & 0xffffu));
      f0 = d * (qmvw_f(q3_scale_w(sw, g)) - 32.f);
      f1 = d * (qmvw_f(q3_scale_w(sw, g + 1)) - 32.f);
      o0 = o1 = 0.f;
      const int hb = 4 * n + j;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const unsigned int qw = s ? qf_funnel16(Q[k], Q[k + 1]) : Q[k];
        const unsigned int hw = s ? qf_funnel16(H[k], H[k + 1]) : H[k];
        const unsigned int v = ((qw >> (2 * j)) & 0x03030303u) | (((hw >> hb) & 0x01010101u) << 2); // 0…7
        q[k] = (int)((v + 0x7C7C7C7Cu) ^ 0x80808080u); // v − 4 as signed bytes
      }
    }
  }
  // dotrow: the chunk times the activations of elements e … e + 31 of
  // the 8-bit layout (e = 32c for one row, m·K + 32c for row m).
  LOOM_DEV float dotrow(const int* qa, const float* dx, const float* sx, long long e) const {
    const int4 a = *reinterpret_cast<const int4*>(qa + e / 4);
    const int4 a2 = *reinterpret_cast<const int4*>(qa + e / 4 + 4);
    int s0 = loom_dp4a(q[0], a.x, 0);
    s0 = loom_dp4a(q[1], a.y, s0);
    s0 = loom_dp4a(q[2], a.z, s0);
    s0 = loom_dp4a(q[3], a.w, s0);
    int s1 = loom_dp4a(q[4], a2.x, 0);
    s1 = loom_dp4a(q[5], a2.y, s1);
    s1 = loom_dp4a(q[6], a2.z, s1);
    s1 = loom_dp4a(q[7], a2.w, s1);
    float v = dx[e / 32] * fmaf(f0, (float)s0, f1 * (float)s1);
    if (Q2) v -= fmaf(o0, sx[e / 16], o1 * sx[e / 16 + 1]);
    return v;
  }
  LOOM_DEV float dot(const int* qa, const float* dx, const float* sx, long long c) const { return dotrow(qa, dx, sx, 32 * c); }
};
template <int V>
struct qf_q2_k : qf_k23<true> {};
template <int V>
struct qf_q3_k : qf_k23<false> {};

// qmvq_q2_k, qmvq_q3_k: the same chunks for loom_qmvq (each multiplied
// into every activation row). ROCm 5.2's hiprtc (Debian's libamdhip64-5,
// CI's AMD compile) crashed with a segmentation fault compiling this file
// with the chunk loop over Q3_K's qf_k23 (through qf_k23's aligned windows)
// instantiated, the chunk loop unrolled 4 times or not; Q3_K's multi-row
// chunk is therefore qf_q3_k16: the same arithmetic with every word read
// as two 2-byte loads (Q3_K's fields are 2-byte aligned), no windows and
// no misalignment selects.
struct qf_q3_k16 {
  int q[8];
  float f0, f1;
  LOOM_DEV static unsigned int w16(const unsigned char* p) {
    const unsigned short* h = reinterpret_cast<const unsigned short*>(p);
    return (unsigned int)h[0] | ((unsigned int)h[1] << 16);
  }
  LOOM_DEV void load(const unsigned char* row, long long c) {
    const long long sb = c >> 3;
    const int n = (int)((c >> 2) & 1), j = (int)(c & 3), g = 8 * n + 2 * j;
    const unsigned char* b = row + 110 * sb;
    const unsigned int sw[3] = {w16(b + 96), w16(b + 100), w16(b + 104)};
    const float d = loom_f16_to_f32(*reinterpret_cast<const unsigned short*>(b + 108));
    f0 = d * (qmvw_f(q3_scale_w(sw, g)) - 32.f);
    f1 = d * (qmvw_f(q3_scale_w(sw, g + 1)) - 32.f);
    const int hb = 4 * n + j;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const unsigned int qw = w16(b + 32 + 32 * n + 4 * k), hw = w16(b + 4 * k);
      const unsigned int v = ((qw >> (2 * j)) & 0x03030303u) | (((hw >> hb) & 0x01010101u) << 2); // 0…7
      q[k] = (int)((v + 0x7C7C7C7Cu) ^ 0x80808080u);                                                // v − 4 as signed bytes
    }
  }
  LOOM_DEV float dotrow(const int* qa, const float* dx, const float*, long long e) const {
    const int4 a = *reinterpret_cast<const int4*>(qa + e / 4);
    const int4 a2 = *reinterpret_cast<const int4*>(qa + e / 4 + 4);
    int s0 = loom_dp4a(q[0], a.x, 0);
    s0 = loom_dp4a(q[1], a.y, s0);
    s0 = loom_dp4a(q[2], a.z, s0);
    s0 = loom_dp4a(q[3], a.w, s0);
    int s1 = loom_dp4a(q[4], a2.x, 0);
    s1 = loom_dp4a(q[5], a2.y, s1);
    s1 = loom_dp4a(q[6], a2.z, s1);
    s1 = loom_dp4a(q[7], a2.w, s1);
    return dx[e / 32] * fmaf(f0, (float)s0, f1 * (float)s1);
  }
};
// qmvq_by<MAXM, F>: loom_qmvq's chunk c of one weight row by the chunk
// type F (its load and dotrow), into every activation row.
template <int MAXM, class F>
LOOM_DEV void qmvq_by(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                       long long K, int M, float* acc) {
  F f;
  f.load(row, c);
#pragma unroll
  for (int m = 0; m < MAXM; ++m)
    if (m < M) acc[m] += f.dotrow(qa, dx, sx, m * K + 32 * c);
}
template <int MAXM>
LOOM_DEV void qmvq_q2_k(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                        long long K, int M, float* acc) {
  qmvq_by<MAXM, qf_k23<true>>(row, c, qa, dx, sx, K, M, acc);
}
template <int MAXM>
LOOM_DEV void qmvq_q3_k(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                        long long K, int M, float* acc) {
  qmvq_by<MAXM, qf_q3_k16>(row, c, qa, dx, sx, K, M, acc);
}
#ifndef QMVF_FUSED
LOOM_QMVQ3(q2_k)
LOOM_QMVQ3(q3_k)
#endif

// Q4_1, Q5_0 and Q5_1 (20-, 22- and 24-byte blocks of 32 weights; d, for
// Q4_1 and Q5_1 a minimum m, for Q5_0 and Q5_1 the fifth bits qh as a
// little-endian word, 16 quant bytes: weight i the low nibble of byte i,
// weight i + 16 the high one, fifth bits qh bit i and i + 16): a chunk is
// a block. Q5_0's weight d·(q − 16) goes into the integer sum whole (q −
// 16 as signed bytes); Q4_1's and Q5_1's d·q + m takes m off with x's
// 16-value float sums, as Q4_0's −8d. Q4_1 and Q5_1 blocks are 4-byte
// aligned where the weight is (rows of 20 and 24 bytes a block), Q5_0's
// every other one 2 bytes off: read through qf_window.
// qf_bits5(h): the 4 low bits of h as bit 4 of 4 bytes.
LOOM_DEV unsigned int qf_bits5(unsigned int h) { return ((h & 15u) * 0x00204081u & 0x01010101u) << 4; }

template <int KIND> // 0: Q4_1, 1: Q5_0, 2: Q5_1
struct qf_q451 {
  static constexpr int CHUNK = 32, BYTES = KIND == 0 ? 20 : (KIND == 1 ? 22 : 24);
  float d, m;
  int lo[4], hi[4];
  LOOM_DEV void load(const unsigned char* row, long long c) {
    const unsigned char* p = row + BYTES * c;
    unsigned int W[6], qs[4], qh = 0;
    if (KIND == 1) {
      unsigned int X[6];
      qf_window<6, 4>(p, X); // p … p + 21 within the 24 bytes from the boundary
      const bool s = ((unsigned long long)p & 2) != 0;
      d = loom_f16_to_f32((unsigned short)(s ? X[0] >> 16 : X[0] & 0xffffu));
      m = 0.f;
      qh = s ? X[1] : qf_funnel16(X[0], X[1]);
#pragma unroll
      for (int k = 0; k < 4; ++k) qs[k] = s ? X[k + 2] : qf_funnel16(X[k + 1], X[k + 2]);
    } else {
      const unsigned int* w = reinterpret_cast<const unsigned int*>(p);
#pragma unroll
      for (int k = 0; k < BYTES / 4; ++k) W[k] = w[k];
      d = loom_f16_to_f32((unsigned short)(W[0] & 0xffffu));
      m = loom_f16_to_f32((unsigned short)(W[0] >> 16));
      if (KIND == 2) qh = W[1];
#pragma unroll
      for (int k = 0; k < 4; ++k) qs[k] = W[BYTES / 4 - 4 + k];
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      unsigned int l = qs[k] & 0x0F0F0F0Fu, h = (qs[k] >> 4) & 0x0F0F0F0Fu;
      if (KIND != 0) {
        l |= qf_bits5(qh >> (4 * k));
        h |= qf_bits5(qh >> (16 + 4 * k));
      }
      if (KIND == 1) { // q − 16 as signed bytes
        l = (l + 0x70707070u) ^ 0x80808080u;
        h = (h + 0x70707070u) ^ 0x80808080u;
      }
      lo[k] = (int)l;
      hi[k] = (int)h;
    }
  }
  // dotrow: the block times the activations of elements e … e + 31 of the
  // 8-bit layout (e = 32c for one row, m·K + 32c for row m).
  LOOM_DEV float dotrow(const int* qa, const float* dx, const float* sx, long long e) const {
    const int4 a = *reinterpret_cast<const int4*>(qa + e / 4);
    const int4 a2 = *reinterpret_cast<const int4*>(qa + e / 4 + 4);
    int s = loom_dp4a(lo[0], a.x, 0);
    s = loom_dp4a(lo[1], a.y, s);
    s = loom_dp4a(lo[2], a.z, s);
    s = loom_dp4a(lo[3], a.w, s);
    s = loom_dp4a(hi[0], a2.x, s);
    s = loom_dp4a(hi[1], a2.y, s);
    s = loom_dp4a(hi[2], a2.z, s);
    s = loom_dp4a(hi[3], a2.w, s);
    const float v = d * dx[e / 32] * (float)s;
    return KIND == 1 ? v : fmaf(m, sx[e / 16] + sx[e / 16 + 1], v);
  }
  LOOM_DEV float dot(const int* qa, const float* dx, const float* sx, long long c) const { return dotrow(qa, dx, sx, 32 * c); }
};
template <int V>
struct qf_q4_1 : qf_q451<0> {};
// qf_q5_0: the one-row kernel's Q5_0 chunk is two blocks, 44 bytes, 4-byte
// aligned where the weight is and K a multiple of 64 (kernels.QMVFChunk,
// QMVFAlign): read as 11 aligned words whose funnels are known when the
// kernel is compiled, where a block alone (qf_q451<1>, the dp4a kernel's)
// is 2 bytes off every other time and picks its words at run time. Q5_1's
// aligned 24-byte blocks ran at 71–72% of copy on W13, Q5_0's single
// blocks at 55–56% (H200, session 55).
template <int V>
struct qf_q5_0 {
  static constexpr int CHUNK = 64;
  float d[2];
  int lo[2][4], hi[2][4];
  LOOM_DEV void load(const unsigned char* row, long long c) {
    const unsigned int* w = reinterpret_cast<const unsigned int*>(row + 44 * c);
    unsigned int W[11];
#pragma unroll
    for (int k = 0; k < 11; ++k) W[k] = w[k];
    // Block 0: d bytes 0–1, qh 2–5, quants 6–21; block 1: d 22–23, qh
    // 24–27 (word 6), quants 28–43 (words 7–10).
    d[0] = loom_f16_to_f32((unsigned short)(W[0] & 0xffffu));
    d[1] = loom_f16_to_f32((unsigned short)(W[5] >> 16));
    const unsigned int qh[2] = {qf_funnel16(W[0], W[1]), W[6]};
#pragma unroll
    for (int b = 0; b < 2; ++b) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const unsigned int q = b == 0 ? qf_funnel16(W[k + 1], W[k + 2]) : W[k + 7];
        const unsigned int l = (q & 0x0F0F0F0Fu) | qf_bits5(qh[b] >> (4 * k));
        const unsigned int h = ((q >> 4) & 0x0F0F0F0Fu) | qf_bits5(qh[b] >> (16 + 4 * k));
        lo[b][k] = (int)((l + 0x70707070u) ^ 0x80808080u); // q − 16 as signed bytes
        hi[b][k] = (int)((h + 0x70707070u) ^ 0x80808080u);
      }
    }
  }
  LOOM_DEV float dot(const int* qa, const float* dx, const float*, long long c) const {
    float v = 0.f;
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const long long e = 64 * c + 32 * b;
      const int4 a = *reinterpret_cast<const int4*>(qa + e / 4);
      const int4 a2 = *reinterpret_cast<const int4*>(qa + e / 4 + 4);
      int s = loom_dp4a(lo[b][0], a.x, 0);
      s = loom_dp4a(lo[b][1], a.y, s);
      s = loom_dp4a(lo[b][2], a.z, s);
      s = loom_dp4a(lo[b][3], a.w, s);
      s = loom_dp4a(hi[b][0], a2.x, s);
      s = loom_dp4a(hi[b][1], a2.y, s);
      s = loom_dp4a(hi[b][2], a2.z, s);
      s = loom_dp4a(hi[b][3], a2.w, s);
      v = fmaf(d[b] * dx[e / 32], (float)s, v);
    }
    return v;
  }
};
template <int V>
struct qf_q5_1 : qf_q451<2> {};
template <int MAXM>
LOOM_DEV void qmvq_q4_1(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                        long long K, int M, float* acc) {
  qmvq_by<MAXM, qf_q451<0>>(row, c, qa, dx, sx, K, M, acc);
}
template <int MAXM>
LOOM_DEV void qmvq_q5_0(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                        long long K, int M, float* acc) {
  qmvq_by<MAXM, qf_q451<1>>(row, c, qa, dx, sx, K, M, acc);
}
template <int MAXM>
LOOM_DEV void qmvq_q5_1(const unsigned char* row, long long c, const int* qa, const float* dx, const float* sx,
                        long long K, int M, float* acc) {
  qmvq_by<MAXM, qf_q451<2>>(row, c, qa, dx, sx, K, M, acc);
}
#ifndef QMVF_FUSED
LOOM_QMVQ3(q4_1)
LOOM_QMVQ3(q5_0)
LOOM_QMVQ3(q5_1)
#endif

// Q6_K (210-byte super-blocks, 2-byte aligned): chunk c as qmvq_q6_k, its
// three 8-byte runs of quants (low bits twice, high bits once) through
// qf_window and its four scales from one more window.
template <int V>
struct qf_q6_k {
  static constexpr int CHUNK = 32;
  float ds[4];
  int q[4][2];
  LOOM_DEV void load(const unsigned char* row, long long c) {
    const long long sb = c >> 3;
    const int t = (int)(c & 7), hf = t >> 2, l0 = 8 * (t & 3);
    const unsigned char* b = row + 210 * sb;
    const unsigned char* ql = b + 64 * hf + l0;
    const unsigned char* qh = b + 128 + 32 * hf + l0;
    const bool s = ((unsigned long long)b & 2) != 0; // every field's misalignment is the block's
    // An aligned run's third word (or an 8-byte run's second piece) lies
    // past the run but inside the super-block (qh + 8 ≤ b + 192).
    unsigned int A[3], B[3], C[3];
    qf_window<3, V>(ql, A);
    qf_window<3, V>(ql + 32, B);
    qf_window<3, V>(qh, C);
    unsigned int L[2], L2[2], H[2];
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      L[w] = s ? qf_funnel16(A[w], A[w + 1]) : A[w];
      L2[w] = s ? qf_funnel16(B[w], B[w + 1]) : B[w];
      H[w] = s ? qf_funnel16(C[w], C[w + 1]) : C[w];
    }
#pragma unroll
    for (int w = 0; w < 2; ++w) {
      q[0][w] = (int)((L[w] & 0x0F0F0F0Fu) | ((H[w] & 0x03030303u) << 4));
      q[1][w] = (int)((L2[w] & 0x0F0F0F0Fu) | (((H[w] >> 2) & 0x03030303u) << 4));
      q[2][w] = (int)(((L[w] >> 4) & 0x0F0F0F0Fu) | (((H[w] >> 4) & 0x03030303u) << 4));
      q[3][w] = (int)(((L2[w] >> 4) & 0x0F0F0F0Fu) | (((H[w] >> 6) & 0x03030303u) << 4));
    }
    // The 16 scales (bytes 192…207) and d (208, 209) from one window of
    // the super-block's last 18 bytes; this chunk's scales are bytes
    // 8hf + (l0 >> 4) + 2r (r = 0…3) of it.
    unsigned int S[5];
    qf_window<5, 4>(b + 192, S); // the last word holds d (bytes 208, 209)
    unsigned int sw[5];
#pragma unroll
    for (int k = 0; k < 4; ++k) sw[k] = s ? qf_funnel16(S[k], S[k + 1]) : S[k];
    sw[4] = s ? S[4] >> 16 : S[4];
    const float d = loom_f16_to_f32((unsigned short)(sw[4] & 0xffffu));
    const unsigned int s0 = hf ? sw[2] : sw[0], s1 = hf ? sw[3] : sw[1];
    const int so = l0 >> 4;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int byte = so + 2 * r; // 0…7 of the half's 8 scales
      const unsigned int word = byte < 4 ? s0 : s1;
      ds[r] = d * (float)(signed char)((word >> (8 * (byte & 3))) & 255u);
    }
  }
  LOOM_DEV float dot(const int* qa, const float* dx, const float* sx, long long c) const {
    const long long sb = c >> 3;
    const int t = (int)(c & 7), hf = t >> 2, l0 = 8 * (t & 3);
    float v = 0.f;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const long long e = 256 * sb + 128 * hf + 32 * r + l0;
      const int2 a = *reinterpret_cast<const int2*>(qa + e / 4);
      const int s = loom_dp4a(q[r][1], a.y, loom_dp4a(q[r][0], a.x, 0));
      const int n = loom_dp4a(0x01010101, a.y, loom_dp4a(0x01010101, a.x, 0));
      v = fmaf(ds[r] * dx[e / 32], (float)(s - 32 * n), v);
    }
    return v;
  }
};

extern __shared__ int qf_shared[];

// q8_quantize<X, SUM>(x, n4, put): the whole block quantizes x (4·n4
// values), 4 values a thread (q8_pack4v, sums over SUM lanes), 8 threads a
// 32-value block; whole 32-lane groups take every turn, so the shuffles
// see every lane, and the loads of 4 turns are issued before any of them
// is used. put(i, packed, d, sum) stores int i (values 4i … 4i + 3) for
// each i < n4.
template <class X, int SUM, class P>
LOOM_DEV void q8_quantize(const typename X::T* __restrict__ x, long long n4, P put) {
  const int lane = threadIdx.x % QMV_GROUP;
  for (long long i0 = threadIdx.x - lane; i0 < n4; i0 += 4 * (long long)blockDim.x) {
    float v[4][4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long i = i0 + u * (long long)blockDim.x + lane;
      const typename X::T* p = x + 4 * (i < n4 ? i : 0);
#pragma unroll
      for (int j = 0; j < 4; ++j) v[u][j] = X::ld1(p + j);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const long long i = i0 + u * (long long)blockDim.x + lane;
      float d, sum;
      const unsigned int packed = q8_pack4v<SUM>(v[u], &d, &sum);
      if (i < n4) put(i, packed, d, sum);
    }
  }
}

// qf_quantize: x (4·n4 values) → 8-bit activations in shared memory (qa,
// dx, sx as loom_q8x lays them out: sx holds 16-value sums).
template <class X>
LOOM_DEV void qf_quantize(const typename X::T* __restrict__ x, int* qa, float* dx, float* sx, long long n4) {
  q8_quantize<X, 4>(x, n4, [=](long long i, unsigned int packed, float d, float sum) {
    qa[i] = (int)packed;
    if ((i & 3) == 0) sx[i >> 2] = sum;
    if ((i & 7) == 0) dx[i >> 3] = d;
  });
}

// qmvf: y [N] = x [K] · Wᵀ, one activation row. Blocks of QMVF_THREADS
// threads quantize x into shared memory, then each group of 32 lanes
// (any wave size: the shuffles stay in aligned groups of 32) takes
// QMVF_ROWS weight rows at a time, lane l chunks l, l + 32, … of each,
// the blocks walking the rows grid-stride.
#define QMVF_THREADS 256
#define QMVF_ROWS 2
//
// store(n, v) stores row n's sum v (f32): X::st(v) into y, or, in a fused
// kernel (QMVFFused, kernels/quant.go), the epilogue of X::st(v) at flat
// index n of the output.
//
// Tried and dropped (session 44, H200, the 1B-shaped Q4_K model's decode,
// one call): a register cap on the fused one-row entries, as the bf16
// skinny products took (gemv.hip, GEMV_BOUNDS): __launch_bounds__(256,
// B) for B = 4, 6, 8 blocks a multiprocessor gave median steps of 631.8,
// 865.4 and 913.6 µs against 528.2 uncapped: already B = 4 (at most 64
// registers a thread) is slower, so these kernels likely need more
// registers than that, and what spills costs more than the extra blocks
// resident save (their register counts were not read: no device time was
// left for ncu).
template <class F, class X, int R, bool PAIR = false, bool DEFER = false, class S>
LOOM_DEV void qmvf(const unsigned char* __restrict__ w, const typename X::T* __restrict__ x,
                   long long K, long long N, long long rowBytes, S store) {
  static_assert(!PAIR || R == 2, "a pair epilogue takes a group's two rows");
  int* qa = qf_shared;
  float* dx = reinterpret_cast<float*>(qa + K / 4);
  float* sx = dx + K / 32;
  const int lane = threadIdx.x % QMV_GROUP, group = threadIdx.x / QMV_GROUP, groups = blockDim.x / QMV_GROUP;
  const long long chunks = K / F::CHUNK;
  const long long g0 = (long long)blockIdx.x * groups + group;
  // DEFER: each lane's first chunk of its group's first rows is loaded
  // before the wait, so that the weight's round trip overlaps the kernel
  // ahead (the norm computing x). For rows of up to 32 chunks (SmolLM's
  // 576-value rows: 9 Q5_0 chunks) that is the whole weight.
  F pre[R];
  if constexpr (DEFER) {
    if (g0 * R < N && lane < chunks) {
#pragma unroll
      for (int r = 0; r < R; ++r) pre[r].load(w + min(g0 * R + r, N - 1) * rowBytes, lane);
    }
    loom_grid_entry();
  }
  qf_quantize<X>(x, qa, dx, sx, K / 4);
  __syncthreads();
  for (long long g = g0; g * R < N; g += (long long)gridDim.x * groups) {
    const unsigned char* rows[R];
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      rows[r] = w + min(g * R + r, N - 1) * rowBytes;
      acc[r] = 0.f;
    }
    long long c0 = lane;
    if constexpr (DEFER) {
      if (g == g0) {
        if (lane < chunks) {
#pragma unroll
          for (int r = 0; r < R; ++r) acc[r] += pre[r].dot(qa, dx, sx, lane);
        }
        c0 += QMV_GROUP;
      }
    }
#pragma unroll 2
    for (long long c = c0; c < chunks; c += QMV_GROUP) {
      F f[R];
#pragma unroll
      for (int r = 0; r < R; ++r) f[r].load(rows[r], c);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] += f[r].dot(qa, dx, sx, c);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = acc[r];
#pragma unroll
      for (int s = QMV_GROUP / 2; s > 0; s >>= 1) v += loom_shfl_xor(v, s);
      if constexpr (PAIR) {
        acc[r] = v;
      } else {
        if (g * R + r < N && lane == 0) store(g * R + r, v);
      }
    }
    if constexpr (PAIR) {
      if (g * R < N && lane == 0) store(g, acc[0], acc[1]);
    }
  }
}

// ---- the unit path of loom_qmvf: a lane a 16-byte-aligned run of blocks ----
//
// Where K is a multiple of a format's unit (UV weights: Q4_0 8 blocks and
// Q4_K one super-block, 256 weights in 144 bytes; Q8_0 4 blocks, 128 in
// 136; Q6_K one super-block, 256 in 210, with K a multiple of 2,048) and
// the weight 16-byte aligned, loom_qmvf gives each lane whole
// units instead of 32-weight chunks: a unit starts on a 16-byte (Q8_0:
// 8-byte) boundary, so a lane reads it with 9 (17) plain vector loads and
// takes its blocks apart at offsets known when the kernel is compiled —
// no per-chunk window selects, no 64-bit address arithmetic a chunk, and
// a Q4_K header read once a super-block instead of once a chunk. P lanes
// (the power of two at or above the units U = K/UV a row, at most 32)
// take a row, so a group of 32 takes 32/P rows at once; rows of more than
// 32 units are walked 32 units at a time.
//
// The activations' 8-bit form is laid out by unit (qu_quantize): piece p
// (16 bytes) of unit u at 16-byte index p·U + u, and the 32-value steps
// dx and sums sx (over 32 values) in float4s at index q·U + u, so that
// the lanes of a row, taking consecutive units, read consecutive shared
// memory (the natural layout put every lane of a row in the same banks).
//
// Why (ncu, H200, W13 Q4_0 on the chunk path): 3.7 instructions a
// weight, issue slots 47% busy over the whole kernel, 4.2-way shared-load
// bank conflicts, DRAM 40% of peak.
//
// Measured (session 34, H200, loom bench W13, % of copy; LOOM_QMV=chunks
// / units pick the paths): the three alternating in one call, twice, with
// a first staged form (the copy waited for before the next was issued):
//
//                      Q4_0    Q4_K    Q8_0
//   chunks             57–58   55      70–71
//   units, global      53–54   53–54   58
//   units, staged      64–65   63–64   68
//
// and the staged form here against the chunks in another call, twice:
// 64–65, 62–63 and 72 against 57, 55 and 71;
// the 1B Q4_K decode step (TestGPUSpeed1B, median, the same call): 0.679
// ms staged against 0.727 by chunks (the first staged form: 0.703 against
// 0.732).
// Still under issue 14's 80%: a 33 MB weight streams in 7.8 µs at copy
// speed, and the launch, x's quantization and the first copy's round trip
// cost about 2 µs of the 12 (ncu, staged: 3 blocks of 8 groups
// resident, limited by registers (80) and shared memory (42 KB), DRAM 47%
// of peak with the profiler's cold L2).
//
// Q6_K by units (session 35, H200, W13, three rounds alternating with
// the chunk path in one call): 0.018 ms, 62–64% of copy, against 0.026,
// 44–45%. Its 32 units a group are 6,720 bytes, so its staged blocks are
// 4 groups (kernels.QMVFThreadsFor), not 8, to stay within 48 KB.
//
// Tried (same session, each against the chunk path in one call): asking L2
// for each group's first rows (prefetch.global.L2, a line a lane) before
// quantizing x: Q4_0 54% against 57, Q8_0 66 against 71 (its first four
// row pairs: 51 and 63); the chunk loop unrolled 4 deep: Q6_K 48 against
// 44, Q4_K 53 against 55, the others equal; 4 rows a group: Q4_0 64
// against 57, Q4_K 59 against 55, Q8_0 65 against 71 (the unit path
// bettered it for all three).
//
// Also tried (session 37, H200, two rounds in one call): capping the
// staged blocks a multiprocessor (fewer groups taking more steps each, so
// that W13's 7,168 steps would spread more evenly) at 2, 3, 4 and 6: Q4_0
// 62–64% of copy, Q4_K 62–63%, Q6_K 61–64%, the same as uncapped.
//
// Where this leaves the one-row products (session 37, H200, one call):
// W13 over 4× the rows (W13x4-*) gives t = a + b·bytes, a launch's fixed
// cost a = 4.8 µs (Q4_0), 5.0 (Q4_K), 6.9 (Q6_K), 7.1 (Q8_0) and a
// streaming rate of 4,311, 4,257, 4,239 and 4,615 GB/s (copy: 4,196,
// reads and writes counted). A kernel that only reads the same bytes
// (scripts/read_floor.py: a Triton program per 32 KB, timed as loom bench
// times a run) takes 11.7 µs for W13's 33.0 MB (67% of copy), 15.6 for
// Q6_K's 48.2 MB (73%), 18.5 for Q8_0's 62.4 MB (81%), 31.3 for bf16's
// 117.4 MB (89%): the launch's ramp and drain, ~4 µs, is most of what
// holds the one-row products under issue 14's 80%, and Q4_0 and Q4_K
// (12.4, 12.8 µs) are at 94% and 91% of that reader's speed, Q6_K (18.2)
// at 86%, Q8_0 (20.6) at 90%.

// qu_quantize<X, UV, SUMS>: qf_quantize with the unit layout above (U =
// K/UV units, n4 = K/4); sx holds SUMS-value sums (32, or 16 for Q2_K's
// minimums, a scale each 16 weights), laid out as dx: sum i of unit u at
// float4 (i/4)·U + u, component i mod 4.
template <class X, int UV, int SUMS = 32>
LOOM_DEV void qu_quantize(const typename X::T* __restrict__ x, int* qa, float* dx, float* sx, long long n4, int U) {
  q8_quantize<X, SUMS / 4>(x, n4, [=](long long i, unsigned int packed, float d, float sum) {
    const int un = (int)((4 * i) / UV), o = (int)((4 * i) % UV);
    qa[((o >> 4) * U + un) * 4 + ((o >> 2) & 3)] = (int)packed;
    if ((o & 31) == 0) {
      const int j = o >> 5;
      dx[((j >> 2) * U + un) * 4 + (j & 3)] = d;
    }
    if ((o & (SUMS - 1)) == 0) {
      const int j = o / SUMS;
      sx[((j >> 2) * U + un) * 4 + (j & 3)] = sum;
    }
  });
}

LOOM_DEV float qu_at(const float4& v, int k) { return k == 0 ? v.x : (k == 1 ? v.y : (k == 2 ? v.z : v.w)); }

LOOM_DEV int qu_dot4(const unsigned int* q, const int4& a, int s) {
  s = loom_dp4a((int)q[0], a.x, s);
  s = loom_dp4a((int)q[1], a.y, s);
  s = loom_dp4a((int)q[2], a.z, s);
  return loom_dp4a((int)q[3], a.w, s);
}

// qu_load<NV, V>(p, w): NV·V/4 words from p (V-byte aligned) with V-byte loads.
template <int NV, int V>
LOOM_DEV void qu_load(const unsigned char* p, unsigned int* w) {
  if (V == 16) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const uint4 t = q[k];
      w[4 * k] = t.x;
      w[4 * k + 1] = t.y;
      w[4 * k + 2] = t.z;
      w[4 * k + 3] = t.w;
    }
  } else {
    const uint2* q = reinterpret_cast<const uint2*>(p);
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const uint2 t = q[k];
      w[2 * k] = t.x;
      w[2 * k + 1] = t.y;
    }
  }
}

// Q4_0 unit: 8 blocks of 18 bytes; block j starts at byte 18j, so at word
// 9j/2 with d in its low half (j even) or at word (9j − 1)/2 with d in its
// high half and the quants word-aligned after it (j odd).
struct qu_q4_0 {
  static constexpr int UV = 256, UB = 144, KSTEP = 256, SUMS = 32;
  unsigned int w[36];
  LOOM_DEV void load(const unsigned char* p) { qu_load<9, 16>(p, w); }
  LOOM_DEV float dot(const int4* qa, const float4* dx, const float4* sx, int u, int U) const {
    const float4 D[2] = {dx[u], dx[U + u]}, S[2] = {sx[u], sx[U + u]};
    float v = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int w0 = 9 * j / 2;
      unsigned int q[4], lo[4], hi[4];
      float d;
      if (j % 2 == 0) {
        d = loom_f16_to_f32((unsigned short)(w[w0] & 0xffffu));
#pragma unroll
        for (int k = 0; k < 4; ++k) q[k] = qf_funnel16(w[w0 + k], w[w0 + k + 1]);
      } else {
        d = loom_f16_to_f32((unsigned short)(w[w0] >> 16));
#pragma unroll
        for (int k = 0; k < 4; ++k) q[k] = w[w0 + 1 + k];
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        lo[k] = q[k] & 0x0F0F0F0Fu;
        hi[k] = (q[k] >> 4) & 0x0F0F0F0Fu;
      }
      const int s = qu_dot4(hi, qa[(2 * j + 1) * U + u], qu_dot4(lo, qa[2 * j * U + u], 0));
      v = fmaf(d, qu_at(D[j >> 2], j & 3) * (float)s - 8.f * qu_at(S[j >> 2], j & 3), v);
    }
    return v;
  }
};

// qu_k45_dot: the dot product of a Q4_K or Q5_K unit's words w (16-byte
// header: d, dmin, 12 scale bytes; Q5_K's fifth bits qh, 8 words, where
// HB; 128 quant bytes at word QW): quant words QW + 8j … + 7 hold
// sub-block 2j in their low nibbles and 2j + 1 in their high ones
// (weights 64j …), with, for Q5_K, bit 2j (2j + 1) of qh word k their
// fifth bits.
template <bool HB, int QW>
LOOM_DEV float qu_k45_dot(const unsigned int* w, const int4* qa, const float4* dx, const float4* sx, int u, int U) {
  const float4 D[2] = {dx[u], dx[U + u]}, S[2] = {sx[u], sx[U + u]};
  const float d = loom_f16_to_f32((unsigned short)(w[0] & 0xffffu)), dmin = loom_f16_to_f32((unsigned short)(w[0] >> 16));
  const unsigned int sc[3] = {w[1], w[2], w[3]};
  float v = 0.f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    unsigned int lo[8], hi[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      lo[k] = w[QW + 8 * j + k] & 0x0F0F0F0Fu;
      hi[k] = (w[QW + 8 * j + k] >> 4) & 0x0F0F0F0Fu;
      if (HB) {
        lo[k] |= ((w[4 + k] >> (2 * j)) & 0x01010101u) << 4;
        hi[k] |= ((w[4 + k] >> (2 * j + 1)) & 0x01010101u) << 4;
      }
    }
    const int s0 = qu_dot4(lo + 4, qa[(4 * j + 1) * U + u], qu_dot4(lo, qa[4 * j * U + u], 0));
    const int s1 = qu_dot4(hi + 4, qa[(4 * j + 3) * U + u], qu_dot4(hi, qa[(4 * j + 2) * U + u], 0));
    float sc0, m0, sc1, m1;
    qmvw_scale_min_k4(sc, 2 * j, &sc0, &m0);
    qmvw_scale_min_k4(sc, 2 * j + 1, &sc1, &m1);
    const int b0 = 2 * j, b1 = 2 * j + 1;
    v = fmaf(d * sc0 * qu_at(D[b0 >> 2], b0 & 3), (float)s0, v);
    v = fmaf(-dmin * m0, qu_at(S[b0 >> 2], b0 & 3), v);
    v = fmaf(d * sc1 * qu_at(D[b1 >> 2], b1 & 3), (float)s1, v);
    v = fmaf(-dmin * m1, qu_at(S[b1 >> 2], b1 & 3), v);
  }
  return v;
}

// Q4_K unit: one super-block (16-byte header: d, dmin, 12 scale bytes;
// 128 quant bytes).
struct qu_q4_k {
  static constexpr int UV = 256, UB = 144, KSTEP = 256, SUMS = 32;
  unsigned int w[36];
  LOOM_DEV void load(const unsigned char* p) { qu_load<9, 16>(p, w); }
  LOOM_DEV float dot(const int4* qa, const float4* dx, const float4* sx, int u, int U) const {
    return qu_k45_dot<false, 4>(w, qa, dx, sx, u, U);
  }
};

// Q5_K unit: one super-block, 176 bytes (the header, 32 bytes of fifth
// bits, 128 quant bytes): 11 16-byte loads.
struct qu_q5_k {
  static constexpr int UV = 256, UB = 176, KSTEP = 256, SUMS = 32;
  unsigned int w[44];
  LOOM_DEV void load(const unsigned char* p) { qu_load<11, 16>(p, w); }
  LOOM_DEV float dot(const int4* qa, const float4* dx, const float4* sx, int u, int U) const {
    return qu_k45_dot<true, 12>(w, qa, dx, sx, u, U);
  }
};

// Q8_0 unit: 4 blocks of 34 bytes, 8-byte aligned (17 8-byte loads);
// block j starts at word 17j/2, d in the low half (j even, quants
// funnelled) or the high half (j odd, quants word-aligned).
struct qu_q8_0 {
  static constexpr int UV = 128, UB = 136, KSTEP = 128, SUMS = 32;
  unsigned int w[34];
  LOOM_DEV void load(const unsigned char* p) { qu_load<17, 8>(p, w); }
  LOOM_DEV float dot(const int4* qa, const float4* dx, const float4*, int u, int U) const {
    const float4 D = dx[u];
    float v = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int w0 = 17 * j / 2;
      unsigned int q[8];
      float d;
      if (j % 2 == 0) {
        d = loom_f16_to_f32((unsigned short)(w[w0] & 0xffffu));
#pragma unroll
        for (int k = 0; k < 8; ++k) q[k] = qf_funnel16(w[w0 + k], w[w0 + k + 1]);
      } else {
        d = loom_f16_to_f32((unsigned short)(w[w0] >> 16));
#pragma unroll
        for (int k = 0; k < 8; ++k) q[k] = w[w0 + 1 + k];
      }
      const int s = qu_dot4(q + 4, qa[(2 * j + 1) * U + u], qu_dot4(q, qa[2 * j * U + u], 0));
      v = fmaf(d * qu_at(D, j), (float)s, v);
    }
    return v;
  }
};

// Q6_K unit: one super-block, 210 bytes (ql[128]: the quants' low 4 bits;
// qh[64]: their high 2 bits; 16 signed 8-bit scales; d), so every other
// unit starts 2 bytes past a 4-byte boundary. A lane reads the 53 aligned
// words from the boundary at or below its unit and shifts them down by
// its misalignment. An aligned unit's 53rd word holds the next unit's
// first 2 bytes: inside the weight, because the path asks K to be a
// multiple of 2,048 (KSTEP: 8 units, a row of 16-byte multiples), so a
// row's last unit is an odd one, never aligned; the stage buffers hold
// whole rows or runs of 32 units, so the same holds there.
//
// The quants q (0…63) become q − 32 as signed bytes in registers
// (qu_off32), so that a 16-weight sub-block is one integer sum with no
// activation sum to take off; each sub-block's sum is scaled by d, its
// scale and its 32 activations' step, in order (q1…q4 of each half, as
// GGML's dequantize_row_q6_K lays the weights out: weight 128h + 32j + l
// is quant j of byte l of half h).
LOOM_DEV unsigned int qu_off32(unsigned int q) { return (q + 0x60606060u) ^ 0x80808080u; }

struct qu_q6_k {
  static constexpr int UV = 256, UB = 210, KSTEP = 2048, SUMS = 32;
  unsigned int w[53];
  LOOM_DEV void load(const unsigned char* p) {
    const unsigned int off = (unsigned int)((unsigned long long)p & 2);
    const unsigned int* r = reinterpret_cast<const unsigned int*>(p - off);
    unsigned int t[53];
#pragma unroll
    for (int i = 0; i < 53; ++i) t[i] = r[i];
#pragma unroll
    for (int i = 0; i < 52; ++i) w[i] = (unsigned int)((((unsigned long long)t[i + 1] << 32) | t[i]) >> (8 * off));
    w[52] = t[52] >> (8 * off);
  }
  LOOM_DEV float dot(const int4* qa, const float4* dx, const float4*, int u, int U) const {
    const float d = loom_f16_to_f32((unsigned short)(w[52] & 0xffffu));
    float v = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float4 D = dx[h * U + u];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int is = 0; is < 2; ++is) {
          unsigned int q[4];
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const unsigned int L = w[16 * h + 8 * (j & 1) + 4 * is + k], H = w[32 + 8 * h + 4 * is + k];
            const unsigned int lo = j < 2 ? (L & 0x0F0F0F0Fu) : ((L >> 4) & 0x0F0F0F0Fu);
            q[k] = qu_off32(lo | (((H >> (2 * j)) & 0x03030303u) << 4));
          }
          const int o = 128 * h + 32 * j + 16 * is;
          const int sum = qu_dot4(q, qa[(o >> 4) * U + u], 0);
          const int si = 8 * h + is + 2 * j; // scale byte
          const float sc = (float)(signed char)((w[48 + (si >> 2)] >> (8 * (si & 3))) & 255u);
          v = fmaf(d * sc * qu_at(D, j), (float)sum, v);
        }
      }
    }
    return v;
  }
};

// Q2_K and Q3_K units (session 55): one super-block a lane, as Q4_K and
// Q6_K. By 32-weight chunks (qf_k23) these ran at 29% and 23% of copy on
// W13 (H200, session 55's first call, against Q4_K's 62%): a chunk reads
// its 32 quant bytes for 2 bits of each, and Q3_K's every chunk all 32
// hmask bytes and the scales as well, 22 four-byte loads for 32 weights
// (Q4_K's chunk: 4 sixteen-byte loads for 64) — the L1's load throughput,
// not DRAM, bounded them. A unit is read once, 21 (Q2_K) or 28 (Q3_K)
// words from the stage (or global memory), and each of its words gives
// all four 2-bit planes.
//
// Q2_K (84 bytes, 4-byte aligned: scales[16], 4-bit scale and minimum
// each; qs[64]; d, dmin): weight 128n + 32j + 16s + l is d·sc·q − dmin·m
// with q bits 2j of quant byte 32n + 16s + l and sc, m from scale byte
// 8n + 2j + s. The minimums are taken off with each 16 activations' float
// sum (SUMS 16: the 8-bit model's, as the chunk path's), so a 32-weight
// group is one integer sum (both scales applied in integers) and three
// floats. K a multiple of 1,024 (4 units: rows of 16-byte multiples, as
// the stage's 16-byte copies need).
struct qu_q2_k {
  static constexpr int UV = 256, UB = 84, KSTEP = 1024, SUMS = 16;
  unsigned int w[21];
  LOOM_DEV void load(const unsigned char* p) {
    const unsigned int* r = reinterpret_cast<const unsigned int*>(p);
#pragma unroll
    for (int i = 0; i < 21; ++i) w[i] = r[i];
  }
  LOOM_DEV float dot(const int4* qa, const float4* dx, const float4* sx, int u, int U) const {
    const float d = loom_f16_to_f32((unsigned short)(w[20] & 0xffffu)), dmin = loom_f16_to_f32((unsigned short)(w[20] >> 16));
    float v = 0.f;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const float4 D = dx[n * U + u], S[2] = {sx[2 * n * U + u], sx[(2 * n + 1) * U + u]};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        int sq = 0;
        float sm = 0.f;
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          unsigned int q[4];
#pragma unroll
          for (int k = 0; k < 4; ++k) q[k] = (w[4 + 8 * n + 4 * s + k] >> (2 * j)) & 0x03030303u;
          const int g = 8 * n + 2 * j + s; // scale byte, and 16-value piece
          const unsigned int sc = (w[g >> 2] >> (8 * (g & 3))) & 255u;
          sq += (int)(sc & 15u) * qu_dot4(q, qa[g * U + u], 0);
          sm = fmaf((float)(sc >> 4), qu_at(S[j >> 1], 2 * (j & 1) + s), sm);
        }
        v = fmaf(d * qu_at(D, j), (float)sq, v);
        v = fmaf(-dmin, sm, v);
      }
    }
    return v;
  }
};

// Q3_K (110 bytes: hmask[32], qs[64], 12 bytes of 6-bit scales, d; every
// other unit 2 bytes past a 4-byte boundary, read as Q6_K's: the 28
// aligned words from the boundary at or below it, shifted down): weight
// 128n + 32j + 16s + l is d·(sc − 32)·(q − 4·(1 − h)), q bits 2j of quant
// byte 32n + 16s + l, h bit 4n + j of hmask byte 16s + l, sc scale
// 8n + 2j + s. q − 4·(1 − h) is formed as a signed byte (qf_k23's), so a
// 32-weight group is one integer sum, both scales applied in integers. K
// a multiple of 2,048 (8 units, rows of 16-byte multiples; a row's last
// unit is then an odd, unaligned one, so an aligned unit's 28th word
// lies inside its row, as Q6_K's 53rd does).
struct qu_q3_k {
  static constexpr int UV = 256, UB = 110, KSTEP = 2048, SUMS = 32;
  unsigned int w[28];
  LOOM_DEV void load(const unsigned char* p) {
    const unsigned int off = (unsigned int)((unsigned long long)p & 2);
    const unsigned int* r = reinterpret_cast<const unsigned int*>(p - off);
    unsigned int t[28];
#pragma unroll
    for (int i = 0; i < 28; ++i) t[i] = r[i];
#pragma unroll
    for (int i = 0; i < 27; ++i) w[i] = (unsigned int)((((unsigned long long)t[i + 1] << 32) | t[i]) >> (8 * off));
    w[27] = t[27] >> (8 * off);
  }
  LOOM_DEV float dot(const int4* qa, const float4* dx, const float4*, int u, int U) const {
    const float d = loom_f16_to_f32((unsigned short)(w[27] & 0xffffu));
    const unsigned int sw[3] = {w[24], w[25], w[26]};
    float v = 0.f;
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const float4 D = dx[n * U + u];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        int sum = 0;
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          unsigned int q[4];
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const unsigned int Q = w[8 + 8 * n + 4 * s + k], H = w[4 * s + k];
            const unsigned int c = ((Q >> (2 * j)) & 0x03030303u) | (((H >> (4 * n + j)) & 0x01010101u) << 2); // 0…7
            q[k] = (c + 0x7C7C7C7Cu) ^ 0x80808080u; // c − 4 as signed bytes
          }
          const int g = 8 * n + 2 * j + s;
          sum += ((int)q3_scale_w(sw, g) - 32) * qu_dot4(q, qa[g * U + u], 0);
        }
        v = fmaf(d * qu_at(D, j), (float)sum, v);
      }
    }
    return v;
  }
};

// qu_lanes(U): the lanes a row takes, the power of two at or above U, at
// most QMV_GROUP (kernels.QMVFRowsPerGroup repeats it).
LOOM_DEV int qu_lanes(int U) {
  int p = 1;
  while (p < U && p < QMV_GROUP) p <<= 1;
  return p;
}

// Staging (NVIDIA sm_80+, where the host gives the block the shared
// memory for it: QMVFStageBytes): each group copies the 32 units its lanes
// take — contiguous bytes, RG whole rows or 32 units of one — into a
// buffer of its own with cp.async, 16 (Q8_0: 8) bytes a lane and
// consecutive lanes at consecutive addresses, and the lanes then read
// their units from shared memory. Read straight from global memory, a
// unit a lane, every 16-byte load of a group touches 32 cache lines (the
// lanes 144 bytes apart), and the L1's throughput in lines, not DRAM,
// bounded the kernel (W13 Q8_0: 17 loads of 32 lines a row, 58% of copy
// against the chunk path's 70%).
#if defined(LOOM_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define QU_STAGE 1
#else
#define QU_STAGE 0
#endif

// qu_issue<UB>(dst, src, units, lane): starts copying units·UB bytes src →
// dst (shared), all lanes of the group taking part; qu_wait waits for the
// lane's copies, and qu_syncgroup then makes every lane's visible to the
// group.
template <int UB>
LOOM_DEV void qu_issue(unsigned char* dst, const unsigned char* src, int units, int lane) {
#if QU_STAGE
  // Q8_0's 136-byte units in 8-byte pieces; Q6_K's 210-byte units come
  // 8 or 32 at a time (whole rows of a multiple of 8 units), whole 16-byte
  // pieces.
  constexpr int V = UB % 16 != 0 && UB % 8 == 0 ? 8 : 16;
  const int pieces = units * UB / V;
  for (int i = lane; i < pieces; i += QMV_GROUP) {
    const unsigned int d = (unsigned int)__cvta_generic_to_shared(dst + i * V);
    if (V == 16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src + i * V) : "memory");
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"(src + i * V) : "memory");
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
LOOM_DEV void qu_syncgroup() {
#if QU_STAGE
  __syncwarp();
#endif
}
LOOM_DEV void qu_wait() {
#if QU_STAGE
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncwarp();
#endif
}

// qu_dynamic_shared: the block's dynamic shared memory in bytes (0 where
// staging is not compiled).
LOOM_DEV unsigned int qu_dynamic_shared() {
#if QU_STAGE
  unsigned int n;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
  return n;
#else
  return 0;
#endif
}

// qmvu: qmvf's product by units (above); the caller has checked that K is
// a multiple of F::KSTEP and w 16-byte aligned (rowBytes then is a multiple
// of 16, or for Q8_0 of 8). Staged (stage_it, and the block has the
// shared memory for it: qu_issue), a group's first copy is issued before x
// is quantized, and
// each later one as soon as the lanes have read the stage before it into
// registers, so that the copy is in flight while they multiply.
template <class F, class X, bool PAIR = false, bool DEFER = false, class S>
LOOM_DEV void qmvu(const unsigned char* __restrict__ w, const typename X::T* __restrict__ x, long long K, long long N,
                   long long rowBytes, bool stage_it, S store) {
  const int U = (int)(K / F::UV);
  int* qa = qf_shared;
  float* dx = reinterpret_cast<float*>(qa + K / 4);
  float* sx = dx + K / 32;
  const int lane = threadIdx.x % QMV_GROUP, group = threadIdx.x / QMV_GROUP, groups = blockDim.x / QMV_GROUP;
  const int P = qu_lanes(U), RG = QMV_GROUP / P, sub = lane / P, u0 = lane % P;
  // The stage buffers follow the activations (K·5/4 bytes, Q2_K's K·11/8 with 16-value sums; a multiple of 16).
  unsigned char* stage = reinterpret_cast<unsigned char*>(sx + K / F::SUMS) + group * (QMV_GROUP * F::UB);
  const bool staged = stage_it && qu_dynamic_shared() >= (unsigned long long)(K + K / 8 + 4 * K / F::SUMS + groups * QMV_GROUP * F::UB);
  const long long stride = (long long)gridDim.x * groups;
  // A step is a group's span: units ub … ub + 31 of rows r0 = g·RG … (all
  // RG rows' units where U ≤ 32).
  auto issue = [&](long long g, int ub) {
    const long long r0 = g * RG;
    const int rows = (int)min((long long)RG, N - r0);
    qu_issue<F::UB>(stage, w + r0 * rowBytes + (long long)ub * F::UB, U <= QMV_GROUP ? rows * U : min(QMV_GROUP, U - ub), lane);
  };
  long long g = (long long)blockIdx.x * groups + group;
  int ub = 0;
  if (staged && g * RG < N) issue(g, 0);
  // DEFER (a fused launch whose weight the step before does not write,
  // kernels.QMVFFused): the entry began with loom_grid_defer(), and the
  // first stage above is in flight while the kernel ahead finishes.
  if constexpr (DEFER) loom_grid_entry();
  qu_quantize<X, F::UV, F::SUMS>(x, qa, dx, sx, K / 4, U);
  __syncthreads();
  const int4* qa4 = reinterpret_cast<const int4*>(qa);
  const float4 *dx4 = reinterpret_cast<const float4*>(dx), *sx4 = reinterpret_cast<const float4*>(sx);
  float acc = 0.f;
  while (g * RG < N) {
    const long long r0 = g * RG;
    const int rows = (int)min((long long)RG, N - r0);
    // This lane's unit: ub + its index in the step's span.
    const int mine = U <= QMV_GROUP ? sub * U + u0 : lane;
    const bool valid = U <= QMV_GROUP ? (u0 < U && sub < rows) : ub + lane < U;
    F f;
    if (staged) {
      qu_wait();
      if (valid) f.load(stage + mine * F::UB);
      qu_syncgroup(); // every lane has its unit: the stage is free
      const bool last = ub + QMV_GROUP >= U;
      const long long g2 = last ? g + stride : g;
      if (g2 * RG < N) issue(g2, last ? 0 : ub + QMV_GROUP);
    } else if (valid) {
      f.load(w + r0 * rowBytes + (long long)(ub + mine) * F::UB);
    }
    if (valid) acc += f.dot(qa4, dx4, sx4, U <= QMV_GROUP ? u0 : ub + lane, U);
    ub += QMV_GROUP;
    if (ub >= U) {
      for (int s = P / 2; s > 0; s >>= 1) acc += loom_shfl_xor(acc, s);
      if constexpr (PAIR) {
        // Rows r0 + sub and r0 + sub + 1 (sub even; the host gives a pair
        // epilogue only where a group's step holds 2 rows or more) meet
        // across the P lanes between them.
        const float odd = loom_shfl_xor(acc, P);
        if (u0 == 0 && (sub & 1) == 0 && sub < rows) store((r0 + sub) / 2, acc, odd);
      } else {
        if (u0 == 0 && sub < rows) store(r0 + sub, acc);
      }
      acc = 0.f;
      ub = 0;
      g += stride;
    }
  }
}

// qmv1: the one-row product on the path the host picked
// (kernels.QMVFPathFor): 0 by chunks (qmvf), 1 by units read from global
// memory, 2 by units staged in shared memory (qmvu). A unit path K or w
// do not allow falls back to chunks, and staging without the shared
// memory for it to reading units from global memory.
//
// PAIR: a pair epilogue (kernels.QMVFFused): store(j, v0, v1) takes rows 2j
// and 2j+1 at once.
//
// DEFER: the entry began with loom_grid_defer() (the weight is not written
// by the step before): the staged path issues its first stage, then waits;
// the chunk path loads each lane's first chunk, then waits; the unit path
// from global memory waits first.
//
// A format without a unit (Q4_1, Q5_0, Q5_1: qu_none, KSTEP 0) always
// takes its chunks. The qu_<format> names are what QMVF_CALL and the fused
// entries (kernels.QMVFFused) pass.
struct qu_none {
  static constexpr int KSTEP = 0;
};
typedef qu_none qu_q4_1;
typedef qu_none qu_q5_0;
typedef qu_none qu_q5_1;
template <class F, class G, class X, bool PAIR = false, bool DEFER = false, class S>
LOOM_DEV void qmv1(const unsigned char* __restrict__ w, const typename X::T* __restrict__ x, long long K, long long N,
                   long long rowBytes, int path, S store) {
  if constexpr (G::KSTEP > 0) {
    if (path > 0 && K % G::KSTEP == 0 && ((unsigned long long)w & 15) == 0) {
      qmvu<G, X, PAIR, DEFER>(w, x, K, N, rowBytes, path == 2, store);
      return;
    }
  }
  qmvf<F, X, QMVF_ROWS, PAIR, DEFER>(w, x, K, N, rowBytes, store);
}

// QMVF_CALL(FMT, V, X): the function a format's one-row entry calls.
#define QMVF_CALL(FMT, V, X) QMVF_CALL_##FMT(V, X)
#define QMVF_CALL_q4_0(V, X) qmv1<qf_q4_0<V>, qu_q4_0, X>
#define QMVF_CALL_q4_k(V, X) qmv1<qf_q4_k<V>, qu_q4_k, X>
#define QMVF_CALL_q8_0(V, X) qmv1<qf_q8_0<V>, qu_q8_0, X>
#define QMVF_CALL_q6_k(V, X) qmv1<qf_q6_k<V>, qu_q6_k, X>
#define QMVF_CALL_q5_k(V, X) qmv1<qf_q5_k<V>, qu_q5_k, X>
#define QMVF_CALL_q2_k(V, X) qmv1<qf_q2_k<V>, qu_q2_k, X>
#define QMVF_CALL_q3_k(V, X) qmv1<qf_q3_k<V>, qu_q3_k, X>
#define QMVF_CALL_q4_1(V, X) qmv1<qf_q4_1<V>, qu_q4_1, X>
#define QMVF_CALL_q5_0(V, X) qmv1<qf_q5_0<V>, qu_q5_0, X>
#define QMVF_CALL_q5_1(V, X) qmv1<qf_q5_1<V>, qu_q5_1, X>
#define LOOM_QMVF(FMT, V, X, NAME)                                                                    \
  extern "C" __global__ void __launch_bounds__(QMVF_THREADS)                                         \
      NAME(const unsigned char* __restrict__ w, const X::T* __restrict__ x, X::T* __restrict__ y,    \
           long long K, long long N, long long rowBytes, int path) { loom_grid_entry();                                 \
    QMVF_CALL(FMT, V, X)(w, x, K, N, rowBytes, path, [=](long long n, float v) { y[n] = X::st(v); }); \
  }
#define LOOM_QMVF3(FMT, V)                            \
  LOOM_QMVF(FMT, V, qmvw_x_f32, loom_qmvf_##FMT##_f32) \
  LOOM_QMVF(FMT, V, qmvw_x_f16, loom_qmvf_##FMT##_f16) \
  LOOM_QMVF(FMT, V, qmvw_x_bf16, loom_qmvf_##FMT##_bf16)

// V per format, the fastest of 4, 8 and 16 bytes on the H200 (QMVFFused's
// qmvfVec in kernels/quant.go repeats them; a test compares) (Q4_K's
// fields are 16-byte aligned already; Q6_K's 8-byte runs would reach past
// the super-block with wider pieces).
#ifndef QMVF_FUSED
LOOM_QMVF3(q4_0, 8)
LOOM_QMVF3(q8_0, 8)
LOOM_QMVF3(q4_k, 16)
LOOM_QMVF3(q6_k, 4)
LOOM_QMVF3(q5_k, 16)
LOOM_QMVF3(q2_k, 4)
LOOM_QMVF3(q3_k, 4)
LOOM_QMVF3(q4_1, 4)
LOOM_QMVF3(q5_0, 4)
LOOM_QMVF3(q5_1, 4)
#endif

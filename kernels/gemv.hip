// ---- gemv.hip: skinny products for decode steps (package kernels, gemv.go) ----
//
// loom_gemv_<dt>_<v|s><lanes>: C[b][m][n] = Σ_k A[b][m][k]·B[b][n][k] for
// 1 ≤ M ≤ GEMV_MAXM rows: row-major C = A·Bᵀ, the form of x·Wᵀ for a
// Linear weight W [N, K] and of q·kᵀ over a key cache [S, D]. A decode
// step's matmuls are such products with M = the batch, where the cost is
// reading B once: a GEMM library's per-call host cost (cuBLAS: ~23 µs a
// call measured on an H100, 145 calls in a 1B llama decode step) was most
// of the step.
//
// A group of <lanes> lanes (8, 32, 64, 128 or 256) owns one row n of B
// and walks it in spans of <lanes>·VEC elements, lane l loading elements
// VEC·l … VEC·l+VEC−1 of each span, so the group's loads are consecutive
// bytes; the M rows of A (small, read by every group) come through the
// cache. Sums are f32 (fmaf in k order within a lane), then the lanes'
// partial sums meet in a butterfly: xor-shuffles with 1, 2, 4, … inside a
// wave, and, for a group wider than the wave, the waves' sums through
// shared memory in the same pairing (wave w with w ^ 1, then pairs of
// pairs), so the result does not depend on the wave size; rounded once to
// C's dtype. The 'v' kernels load 16 bytes at a time (VEC = 16 / sizeof(T));
// they need A, B, their leading dimensions and batch strides 16-byte
// aligned and K a multiple of VEC; the 's' kernels load one element at a
// time and take any layout. The width is the host's choice (gemv.go): 8
// lanes for short rows (attention heads of 64–128), 32 for long rows when
// there are rows enough to fill the device, and wider groups for few long
// rows (a decode step's 2048 × 8192 down projection), so that each lane
// has a few loads in flight at once instead of a long chain of them.
// Control flow is uniform up to the shuffles (groups past N compute and
// drop); the grid's y walks the batch.

#define GEMV_THREADS 256
#define GEMV_MAXM 8
// GEMV_NW(L): waves in a group of L lanes (1 for a group within a wave).
#define GEMV_NW(L) ((L) > LOOM_WAVE ? (L) / LOOM_WAVE : 1)
#define GEMV_W(L) ((L) > LOOM_WAVE ? LOOM_WAVE : (L))

// Hooks for a fused kernel (plan.CoreAt; GemvFused in gemv.go defines
// them and instantiates one entry): C's element type, parameters after
// GemvSource's, the load of A's elements and the store of C's (an epilogue
// applies to them).
#ifndef GEMV_FUSED
#define GEMV_CTYPE(T) T
#define GEMV_EXTRA
#define GEMV_LDA(LD, x, a, m, lda, k) LD(x, (a) + (m) * (lda) + (k))
#define GEMV_STC(c, m, ldc, n, v) (c)[(m) * (ldc) + (n)] = (v)
#endif

// GEMV_STORE: lane 0 of each valid group stores its rows' sums (through
// GEMV_STC); a pair epilogue (GemvFused) replaces it.
#ifndef GEMV_STORE
#define GEMV_STORE(valid, lane, group, acc, ST, MAXM, LANES)                                      \
  if (valid && lane == 0) {                                                                      \
    _Pragma("unroll") for (int m = 0; m < MAXM; ++m) {                                           \
      if (m < M) GEMV_STC(c, m, ldc, n, ST(acc[m]));                                             \
    }                                                                                            \
  }
#endif

LOOM_DEV void gemv_ld1_f32(float* d, const float* p) { d[0] = *p; }
LOOM_DEV void gemv_ld1_f16(float* d, const unsigned short* p) { d[0] = loom_f16_to_f32(*p); }
LOOM_DEV void gemv_ld1_bf16(float* d, const unsigned short* p) { d[0] = loom_bf16_to_f32(*p); }
#define GEMV_ID(v) (v)

// GEMV_BOUNDS: the one-row kernels (MAXM 1: a decode step with one
// sequence) ask for 8 blocks of 256 a multiprocessor on NVIDIA, which caps
// them at 32 registers a thread. Uncapped, the 32-lane kernel with a pair
// epilogue (the gate/up product) took 36 and fitted 6 blocks: ncu (H200,
// the 1B-shaped bf16 decode step's gate/up product, 2048 blocks of 256)
// 66% achieved occupancy and 63% of peak DRAM throughput, against 92% and
// 67% capped (the 64- and 128-lane kernels already took 32). The 1B
// bf16 decode step, two rounds alternating in one call (session 44):
// median step 849.5 / 848.1 µs against 881.3 / 880.9 (1,145.2 tokens/s
// both rounds against 1,087.1 / 1,071.2). The 8-row kernels keep the
// compiler's choice (their 8 accumulators). On AMD the bound stays the
// block size alone (its second argument means waves per execution unit
// there, and no AMD GPU is here to measure it).
#if defined(LOOM_NVIDIA)
#define GEMV_BOUNDS(MAXM) __launch_bounds__(GEMV_THREADS, (MAXM) == 1 ? 8 : 1)
#else
#define GEMV_BOUNDS(MAXM) __launch_bounds__(GEMV_THREADS)
#endif
// GEMV_PARAMS: an entry's parameters (a fused kernel's operands after
// them, GEMV_EXTRA).
#define GEMV_PARAMS(T)                                                                               \
  const T* __restrict__ a, const T* __restrict__ b, GEMV_CTYPE(T)* __restrict__ c, int M, int N, int K, \
      long long lda, long long ldb, long long ldc, long long sa, long long sb, long long sc GEMV_EXTRA

// GEMV_PRE: the spans of its first row that each lane of a deferred
// one-row kernel (LOOM_GEMV_DEFER) loads before it waits. Two: their 8
// registers held across the wait fit the kernel's 32 (GEMV_BOUNDS); four
// spilled and made the 1B bf16 decode step slower (gemv.go, gemvDeferOn).
#define GEMV_PRE 2

// gemv_pre holds a lane's first P spans of B, 16 bytes each, as loaded.
template <int P>
struct gemv_pre {
  uint4 v[P > 0 ? P : 1];
};

// gemv_defer (LOOM_GEMV_DEFER's entry, begun with loom_grid_defer()):
// issues the loads of the lane's first P spans of its group's first row of
// B (the row the body takes first), then waits for the kernel ahead
// (loom_grid_entry). B is the weight, an operand the step before does not
// write (plan.Kernel.Ahead): its loads are in flight while that kernel
// finishes, and everything before that kernel has finished (see codegen's
// loom_grid_defer). Spans past K load nothing.
template <class T, int VEC, int LANES, int P>
LOOM_DEV gemv_pre<P> gemv_defer(const T* __restrict__ b, int N, int K, long long ldb, long long sb) {
  gemv_pre<P> pre;
  const int lane = threadIdx.x % LANES, group = threadIdx.x / LANES;
  const long long n = (long long)blockIdx.x * (GEMV_THREADS / LANES) + group;
  const T* row = b + (long long)blockIdx.y * sb + (n < N ? n : 0) * ldb;
#pragma unroll
  for (int j = 0; j < P; ++j) {
    const int k = VEC * lane + j * VEC * LANES;
    pre.v[j] = k < K ? *reinterpret_cast<const uint4*>(row + k) : make_uint4(0, 0, 0, 0);
  }
  loom_grid_entry();
  return pre;
}

// gemv_cv16_<dt>: the VEC elements of 16 bytes of B already loaded (a
// deferred kernel's pre, by value: taking its address as the loads above
// do would put it in local memory), as loom_ld16_<dt> converts them.
LOOM_DEV void gemv_cv16_f32(float* d, uint4 u) {
  d[0] = __uint_as_float(u.x); d[1] = __uint_as_float(u.y); d[2] = __uint_as_float(u.z); d[3] = __uint_as_float(u.w);
}
LOOM_DEV void gemv_cv16_f16(float* d, uint4 u) {
  const unsigned int q[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    d[2 * k] = loom_f16_to_f32((unsigned short)(q[k] & 0xffffu));
    d[2 * k + 1] = loom_f16_to_f32((unsigned short)(q[k] >> 16));
  }
}
LOOM_DEV void gemv_cv16_bf16(float* d, uint4 u) {
  const unsigned int q[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    d[2 * k] = __uint_as_float(q[k] << 16);
    d[2 * k + 1] = __uint_as_float(q[k] & 0xffff0000u);
  }
}

// GEMV_STEP: a lane's products of one span of B (w, its VEC elements at k)
// with the M rows of A.
#define GEMV_STEP(w, k, LD, VEC, MAXM)                                                              \
  _Pragma("unroll") for (int m = 0; m < MAXM; ++m) {                                                \
    if (m < M) {                                                                                    \
      float x[VEC];                                                                                 \
      GEMV_LDA(LD, x, a, m, lda, k);                                                                \
      float s = acc[m];                                                                             \
      _Pragma("unroll") for (int v = 0; v < VEC; ++v) s = fmaf(w[v], x[v], s);                      \
      acc[m] = s;                                                                                   \
    }                                                                                               \
  }

// GEMV_ROW: a group's row n0 + group of C; with PU > 0 spans of it
// taken from pre (gemv_defer) before the rest are read from B.
#define GEMV_ROW(T, LD, CV, VEC, ST, LANES, MAXM, PU)                                                 \
    {                                                                                                 \
      const long long n = n0 + group;                                                                 \
      const bool valid = n < N;                                                                       \
      const T* row = b + (valid ? n : 0) * ldb;                                                       \
      float acc[MAXM];                                                                           \
      _Pragma("unroll") for (int m = 0; m < MAXM; ++m) acc[m] = 0.f;                             \
      _Pragma("unroll") for (int j = 0; j < (PU); ++j) {                                              \
        const int k = VEC * lane + j * VEC * LANES;                                                   \
        if (k < K) {                                                                                  \
          float w[VEC];                                                                               \
          CV(w, pre.v[j]);                                                                            \
          GEMV_STEP(w, k, LD, VEC, MAXM)                                                              \
        }                                                                                             \
      }                                                                                               \
      _Pragma("unroll 4") for (int k = VEC * lane + (PU) * VEC * LANES; k < K; k += VEC * LANES) {    \
        float w[VEC];                                                                                 \
        LD(w, row + k);                                                                               \
        GEMV_STEP(w, k, LD, VEC, MAXM)                                                                \
      }                                                                                               \
      _Pragma("unroll") for (int m = 0; m < MAXM; ++m) {                                         \
        _Pragma("unroll") for (int s = 1; s < GEMV_W(LANES); s <<= 1) acc[m] += loom_shfl_xor(acc[m], s); \
      }                                                                                               \
      if (GEMV_NW(LANES) > 1) {                                                                       \
        __shared__ float part[MAXM][GEMV_THREADS / LOOM_WAVE];                                        \
        const int wave = threadIdx.x / LOOM_WAVE, first = group * GEMV_NW(LANES);                    \
        if (threadIdx.x % LOOM_WAVE == 0) {                                                           \
          _Pragma("unroll") for (int m = 0; m < MAXM; ++m) part[m][wave] = acc[m];                    \
        }                                                                                             \
        __syncthreads();                                                                              \
        if (lane == 0) {                                                                              \
          _Pragma("unroll") for (int m = 0; m < MAXM; ++m) {                                          \
            float p[GEMV_NW(LANES)];                                                                  \
            _Pragma("unroll") for (int j = 0; j < GEMV_NW(LANES); ++j) p[j] = part[m][first + j];     \
            _Pragma("unroll") for (int st = 1; st < GEMV_NW(LANES); st <<= 1) {                       \
              _Pragma("unroll") for (int j = 0; j < GEMV_NW(LANES); j += 2 * st) p[j] += p[j + st];   \
            }                                                                                         \
            acc[m] = p[0];                                                                            \
          }                                                                                           \
        }                                                                                             \
        __syncthreads();                                                                              \
      }                                                                                               \
      GEMV_STORE(valid, lane, group, acc, ST, MAXM, LANES)                                             \
    }

// GEMV_BODY: an entry's work after its wait. With P > 0 the block's first
// rows (one a group) are peeled off the grid-stride walk: they take their
// first P spans from pre, which is dead after them (a pre live through
// the walk spilled: ncu of the gate/up product, 46 MB of local loads).
#define GEMV_BODY(T, LD, CV, VEC, ST, LANES, MAXM, P)                                                  \
    const int lane = threadIdx.x % LANES, group = threadIdx.x / LANES;                                \
    const int groups = GEMV_THREADS / LANES;                                                          \
    a += (long long)blockIdx.y * sa;                                                                  \
    b += (long long)blockIdx.y * sb;                                                                  \
    c += (long long)blockIdx.y * sc;                                                                  \
    long long n0 = (long long)blockIdx.x * groups;                                                    \
    if ((P) > 0) {                                                                                    \
      if (n0 < N) GEMV_ROW(T, LD, CV, VEC, ST, LANES, MAXM, P)                                        \
      n0 += (long long)gridDim.x * groups;                                                            \
    }                                                                                                 \
    for (; n0 < N; n0 += (long long)gridDim.x * groups) GEMV_ROW(T, LD, CV, VEC, ST, LANES, MAXM, 0)

// GEMV_NOCV: no spans preloaded (P = 0: never called).
#define GEMV_NOCV(w, u) (void)0
#define LOOM_GEMV(T, LD, VEC, ST, LANES, MAXM, NAME)                                                   \
  extern "C" __global__ void GEMV_BOUNDS(MAXM) NAME(GEMV_PARAMS(T)) { loom_grid_entry();              \
    const gemv_pre<0> pre{};                                                                          \
    (void)pre;                                                                                        \
    GEMV_BODY(T, LD, GEMV_NOCV, VEC, ST, LANES, MAXM, 0)                                              \
  }

// LOOM_GEMV_DEFER: the one-row 16-byte kernel whose first loads of B are
// issued before it waits for the kernel ahead (gemv_defer); GemvFused's
// choice where the step before does not write B.
#define LOOM_GEMV_DEFER(T, LD, CV, VEC, ST, LANES, NAME)                                                   \
  extern "C" __global__ void GEMV_BOUNDS(1) NAME(GEMV_PARAMS(T)) { loom_grid_defer();                 \
    const gemv_pre<GEMV_PRE> pre = gemv_defer<T, VEC, LANES, GEMV_PRE>(b, N, K, ldb, sb);             \
    GEMV_BODY(T, LD, CV, VEC, ST, LANES, 1, GEMV_PRE)                                                 \
  }

// Tried and taken back (session 26): at M = 8 a batch-8 decode step's
// products read their weights at about half the rate of M = 1 (49 µs for
// the 2048 × 16384 gate/up product on an H200). Groups that own 4 rows of
// B each, so that every row of A loaded serves 4 rows of B, were slower
// in the same call (gate/up 860 against 740 µs a step, q/k/v 360 against
// 280; the residual products 831 against 877).
//
// Also tried (same session): loading all 8 rows of A before any product,
// with no "m < M" branch among the loads (rows past M reloading row
// M − 1): no faster (gate/up 781 µs a step, the residual products 929),
// so the loads were not what the branches serialized. The same change in
// the quantized mat-vecs' chunk functions left W13m8 where it was (Q4_0
// 0.056 ms, Q4_K 0.062, Q8_0 0.058; Q6_K 0.098 against 0.113 the session
// before, not measured side by side).
//
// Also tried and taken back (session 31): each block asking L2 for its
// rows of B (prefetch.global.L2, a line a thread) before its
// griddepcontrol.wait, so that a product's weight read would start while
// the kernel ahead (an RMSNorm, an attention step) still ran. The 1B bf16
// decode step got slower, not faster: 916 tokens/s against 993 the call
// before (median step 1.053 against 0.958 ms; not pipelined 825 against
// 908), Q4_K (the same in loom_qmvf and loom_qmvw) 1,247 against 1,239.
// A likely reason: the waiting blocks' prefetches, megabytes of them, sit
// ahead of the latency-bound kernel's own loads. What landed instead
// (session 45, LOOM_GEMV_DEFER above): a one-row kernel's lanes load two
// spans of their first row into registers before the wait, bounded by the
// resident blocks, 16 µs off the step.
//
// Also tried (session 33, H200, TestGPUSpeed1B bf16, alternating runs of
// one binary in one call): the k loop unrolled 8 deep instead of 4 (all of
// a gate/up lane's 8 loads at once): median decode step 973 µs against
// 958–960; groups twice as wide (gemvFill 600,000): 981 µs. Both left.
//
// Each kernel comes twice: for 1 ≤ M ≤ 8 rows, and for M = 1 (suffix _m1:
// one accumulator, a fraction of the registers, so more groups stay
// resident to keep loads in flight: decode with one sequence).
#define LOOM_GEMV2(T, LD, VEC, ST, LANES, NAME) \
  LOOM_GEMV(T, LD, VEC, ST, LANES, GEMV_MAXM, NAME) \
  LOOM_GEMV(T, LD, VEC, ST, LANES, 1, NAME##_m1)
#define LOOM_GEMV4(DT, T, LD16, LD1, VEC, ST)                  \
  LOOM_GEMV2(T, LD16, VEC, ST, 256, loom_gemv_##DT##_v256)       \
  LOOM_GEMV2(T, LD16, VEC, ST, 128, loom_gemv_##DT##_v128)       \
  LOOM_GEMV2(T, LD16, VEC, ST, 64, loom_gemv_##DT##_v64)         \
  LOOM_GEMV2(T, LD16, VEC, ST, 32, loom_gemv_##DT##_v32)         \
  LOOM_GEMV2(T, LD16, VEC, ST, 8, loom_gemv_##DT##_v8)           \
  LOOM_GEMV2(T, LD1, 1, ST, 256, loom_gemv_##DT##_s256)          \
  LOOM_GEMV2(T, LD1, 1, ST, 128, loom_gemv_##DT##_s128)          \
  LOOM_GEMV2(T, LD1, 1, ST, 64, loom_gemv_##DT##_s64)            \
  LOOM_GEMV2(T, LD1, 1, ST, 32, loom_gemv_##DT##_s32)            \
  LOOM_GEMV2(T, LD1, 1, ST, 8, loom_gemv_##DT##_s8)

#ifndef GEMV_FUSED
LOOM_GEMV4(f32, float, loom_ld16_f32, gemv_ld1_f32, 4, GEMV_ID)
LOOM_GEMV4(f16, unsigned short, loom_ld16_f16, gemv_ld1_f16, 8, loom_f32_to_f16)
LOOM_GEMV4(bf16, unsigned short, loom_ld16_bf16, gemv_ld1_bf16, 8, loom_f32_to_bf16)
#endif

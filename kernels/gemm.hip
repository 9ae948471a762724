// ---- gemm.hip: Loom's portable GEMM (package kernels, gemm.go) ----
//
// C[b] = A[b]·B[b] for row-major matrices, the job of a vendor BLAS when
// none is loaded (no rocBLAS on an AMD machine, no cuBLAS on an NVIDIA one).
// Every size, transpose, leading dimension and batch stride is a run-time
// argument, so one compiled source serves every matmul step of a process.
//
// Tiling: a block of 256 threads computes a 128×128 tile of C, stepping
// through K in slices of 8: each step stages an 128×8 slice of A and an 8×128
// slice of B in shared memory (in the accumulator type, k-major), then
// every thread accumulates its 8×8 sub-tile — rows ty + 16i, columns
// tx + 16j, interleaved so that the 16 lanes of a row read 16 consecutive
// shared words (no bank conflicts) and store 16 consecutive elements of C — with fused multiply-adds (explicit fmaf: --fmad=false, which keeps
// Loom's elementwise kernels bit-exact, must not halve this loop). The
// shared stores of the next slice wait behind a barrier; nothing depends on
// the wave size (no shuffles), so the kernel is the same on 32- and 64-wide
// waves. Loads are bounds-checked scalar loads (any leading dimension, any
// alignment, transposed or not) that read 0 outside the matrices.
//
// f16 and bf16 load through the prelude's conversions and accumulate in
// float, rounded once on store (as Candle's cuBLAS calls with compute
// 32F do); f64 accumulates in double.
//
// Batches: blockIdx.z walks the batch, striding by gridDim.z past 65535.

#define GEMM_BM 128
#define GEMM_BN 128
#define GEMM_BK 8
#define GEMM_TM 8
#define GEMM_TN 8

template <typename T> struct gemm_io;
template <> struct gemm_io<float> {
  typedef float acc;
  static LOOM_DEV float ld(const float* p) { return *p; }
  static LOOM_DEV void st(float* p, float v) { *p = v; }
  static LOOM_DEV float fma(float a, float b, float c) { return fmaf(a, b, c); }
};
template <> struct gemm_io<double> {
  typedef double acc;
  static LOOM_DEV double ld(const double* p) { return *p; }
  static LOOM_DEV void st(double* p, double v) { *p = v; }
  static LOOM_DEV double fma(double a, double b, double c) { return ::fma(a, b, c); }
};
struct gemm_f16 { unsigned short bits; };
struct gemm_bf16 { unsigned short bits; };
template <> struct gemm_io<gemm_f16> {
  typedef float acc;
  static LOOM_DEV float ld(const gemm_f16* p) { return loom_f16_to_f32(p->bits); }
  static LOOM_DEV void st(gemm_f16* p, float v) { p->bits = loom_f32_to_f16(v); }
  static LOOM_DEV float fma(float a, float b, float c) { return fmaf(a, b, c); }
};
template <> struct gemm_io<gemm_bf16> {
  typedef float acc;
  static LOOM_DEV float ld(const gemm_bf16* p) { return loom_bf16_to_f32(p->bits); }
  static LOOM_DEV void st(gemm_bf16* p, float v) { p->bits = loom_f32_to_bf16(v); }
  static LOOM_DEV float fma(float a, float b, float c) { return fmaf(a, b, c); }
};

template <typename T, bool TA, bool TB>
LOOM_DEV void loom_gemm(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                        int M, int N, int K, long long lda, long long ldb, long long ldc,
                        long long sa, long long sb, long long sc, int batch) {
  typedef typename gemm_io<T>::acc acc;
  __shared__ acc As[GEMM_BK][GEMM_BM];
  __shared__ acc Bs[GEMM_BK][GEMM_BN];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int m0 = blockIdx.y * GEMM_BM, n0 = blockIdx.x * GEMM_BN;
  for (int b = blockIdx.z; b < batch; b += gridDim.z) {
    const T* a = A + (long long)b * sa;
    const T* bm = B + (long long)b * sb;
    T* c = C + (long long)b * sc;
    acc r[GEMM_TM][GEMM_TN];
    #pragma unroll
    for (int i = 0; i < GEMM_TM; ++i)
      #pragma unroll
      for (int j = 0; j < GEMM_TN; ++j) r[i][j] = (acc)0;
    for (int k0 = 0; k0 < K; k0 += GEMM_BK) {
      // Stage A[m0:+128, k0:+8] and B[k0:+8, n0:+128]: 1024 elements each,
      // 4 per thread, consecutive along the operand's unit-stride dim.
      #pragma unroll
      for (int q = 0; q < 4; ++q) {
        int mm, kk;
        if (TA) { kk = tid / 32; mm = (tid % 32) * 4 + q; }   // stored K×M: m is contiguous
        else { mm = tid / 2; kk = (tid % 2) * 4 + q; }        // stored M×K: k is contiguous
        const int gm = m0 + mm, gk = k0 + kk;
        acc v = (acc)0;
        if (gm < M && gk < K) v = gemm_io<T>::ld(a + (TA ? (long long)gk * lda + gm : (long long)gm * lda + gk));
        As[kk][mm] = v;
        int nn;
        if (TB) { nn = tid / 2; kk = (tid % 2) * 4 + q; }      // stored N×K: k is contiguous
        else { kk = tid / 32; nn = (tid % 32) * 4 + q; }       // stored K×N: n is contiguous
        const int gn = n0 + nn, gk2 = k0 + kk;
        acc w = (acc)0;
        if (gn < N && gk2 < K) w = gemm_io<T>::ld(bm + (TB ? (long long)gn * ldb + gk2 : (long long)gk2 * ldb + gn));
        Bs[kk][nn] = w;
      }
      __syncthreads();
      #pragma unroll
      for (int kk = 0; kk < GEMM_BK; ++kk) {
        acc av[GEMM_TM], bv[GEMM_TN];
        #pragma unroll
        for (int i = 0; i < GEMM_TM; ++i) av[i] = As[kk][ty + 16 * i];
        #pragma unroll
        for (int j = 0; j < GEMM_TN; ++j) bv[j] = Bs[kk][tx + 16 * j];
        #pragma unroll
        for (int i = 0; i < GEMM_TM; ++i)
          #pragma unroll
          for (int j = 0; j < GEMM_TN; ++j) r[i][j] = gemm_io<T>::fma(av[i], bv[j], r[i][j]);
      }
      __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < GEMM_TM; ++i) {
      const int gm = m0 + ty + 16 * i;
      if (gm >= M) continue;
      #pragma unroll
      for (int j = 0; j < GEMM_TN; ++j) {
        const int gn = n0 + tx + 16 * j;
        if (gn < N) gemm_io<T>::st(c + (long long)gm * ldc + gn, r[i][j]);
      }
    }
  }
}

// Entry points: loom_gemm_<dtype>_<nn|nt|tn|tt> (A's flag, then B's).
#define LOOM_GEMM_ENTRY(NAME, T, TA, TB)                                                              \
  extern "C" __global__ void __launch_bounds__(256) NAME(const T* A, const T* B, T* C, int M, int N, int K, \
      long long lda, long long ldb, long long ldc, long long sa, long long sb, long long sc, int batch) { loom_grid_entry(); \
    loom_gemm<T, TA, TB>(A, B, C, M, N, K, lda, ldb, ldc, sa, sb, sc, batch);                         \
  }
#define LOOM_GEMM_DTYPE(D, T)                   \
  LOOM_GEMM_ENTRY(loom_gemm_##D##_nn, T, false, false) \
  LOOM_GEMM_ENTRY(loom_gemm_##D##_nt, T, false, true)  \
  LOOM_GEMM_ENTRY(loom_gemm_##D##_tn, T, true, false)  \
  LOOM_GEMM_ENTRY(loom_gemm_##D##_tt, T, true, true)
LOOM_GEMM_DTYPE(f32, float)
LOOM_GEMM_DTYPE(f64, double)
LOOM_GEMM_DTYPE(f16, gemm_f16)
LOOM_GEMM_DTYPE(bf16, gemm_bf16)

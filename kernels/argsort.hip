// ---- argsort.hip: Loom's stable argsort along the last dim (package kernels) ----
//
// The text before this one (written by Go) configures it:
//   loom_idx          32- or 64-bit unsigned index type;
//   X_T               the value storage type; AS_KEY(x) maps a stored value to
//                     an unsigned key whose integer order is the spec's order
//                     (NaN after every number, -0 == +0; bitwise not for
//                     descending, so NaN comes first and ties stay by index);
//   AS_KEY64          1 when keys are 64-bit (f64, i64), else 0 (32-bit keys);
//   AS_N, AS_ROWS     row length and row count;
//   AS_P              segment length sorted by one bitonic network: the row
//                     length (short rows) or the tile length (long rows),
//                     padded to a power of two; AS_TILES segments per row;
//   AS_E, AS_T, AS_TPS, AS_G  elements per thread, threads per block, threads
//                     per segment (AS_P / AS_E) and segments per block;
//   at_x(i)           element offset of the input's logical flat index i.
//
// Stability: a key is paired with its column, and pairs compare by key, then
// column. Every pair is distinct, so any correct sorting network (bitonic,
// which is not stable by itself) and any merge produce the one stable order.

// Wave shuffles (LOOM_WAVE lanes; the block is a whole number of waves).
LOOM_DEV unsigned int as_shfl32(unsigned int v, int m) {
#ifdef LOOM_NVIDIA
  return __shfl_xor_sync(0xffffffffu, v, m);
#else
  return (unsigned int)__shfl_xor((int)v, m);
#endif
}
LOOM_DEV unsigned long long as_shfl64(unsigned long long v, int m) {
  const unsigned int lo = as_shfl32((unsigned int)v, m), hi = as_shfl32((unsigned int)(v >> 32), m);
  return ((unsigned long long)hi << 32) | lo;
}

// Keys. Floats: NaN (any payload) is the largest key, -0 equals +0, and the
// sign-magnitude bits become an unsigned order.
LOOM_DEV unsigned int as_fkey(float f) {
  if (f != f) return 0xffffffffu;
  const unsigned int u = f == 0.0f ? 0u : __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
LOOM_DEV unsigned long long as_dkey(double f) {
  if (f != f) return 0xffffffffffffffffull;
  const unsigned long long u = f == 0.0 ? 0ull : (unsigned long long)__double_as_longlong(f);
  return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
}
LOOM_DEV unsigned long long as_ikey(long long v) { return (unsigned long long)v ^ 0x8000000000000000ull; }

#if AS_KEY64
// (64-bit key, column): padding is all ones, after every real pair (a real
// column is below 2^32 - 1).
struct as_kt {
  unsigned long long k;
  unsigned int i;
};
LOOM_DEV bool as_less(const as_kt& a, const as_kt& b) { return a.k < b.k || (a.k == b.k && a.i < b.i); }
LOOM_DEV as_kt as_make(unsigned long long k, unsigned int i) {
  as_kt r;
  r.k = k;
  r.i = i;
  return r;
}
LOOM_DEV as_kt as_pad() { return as_make(0xffffffffffffffffull, 0xffffffffu); }
LOOM_DEV unsigned int as_col(const as_kt& a) { return a.i; }
LOOM_DEV as_kt as_shfl(const as_kt& a, int m) { return as_make(as_shfl64(a.k, m), as_shfl32(a.i, m)); }
#else
// key << 32 | column in one 64-bit word: one comparison orders both.
typedef unsigned long long as_kt;
LOOM_DEV bool as_less(as_kt a, as_kt b) { return a < b; }
LOOM_DEV as_kt as_make(unsigned int k, unsigned int i) { return ((unsigned long long)k << 32) | i; }
LOOM_DEV as_kt as_pad() { return 0xffffffffffffffffull; }
LOOM_DEV unsigned int as_col(as_kt a) { return (unsigned int)a; }
LOOM_DEV as_kt as_shfl(as_kt a, int m) { return as_shfl64(a, m); }
#endif

// as_pick returns min(a, b) or max(a, b).
LOOM_DEV as_kt as_pick(const as_kt& a, const as_kt& b, bool takeMin) {
  return (as_less(b, a) == takeMin) ? b : a;
}

// as_sort: bitonic sort of segments of AS_P pairs, AS_G segments per block.
// Thread t holds AS_E consecutive pairs of its segment in registers
// (positions base..base+AS_E-1). A compare-exchange at distance j is done in
// registers for j < AS_E, with wave shuffles for partner threads in the same
// wave, and through shared memory beyond. A segment is a whole row (FINAL:
// the sorted columns go to out) or a tile of a long row (the sorted pairs go
// to the scratch buffer, for the merge passes). Padding positions (past the
// row's end) hold as_pad(), which sorts last and is never stored.
template <bool FINAL>
LOOM_DEV void as_sort(const X_T* __restrict__ x, unsigned int* __restrict__ out, as_kt* __restrict__ tiles) {
#if AS_TPS > LOOM_WAVE
  __shared__ as_kt sh[AS_E * AS_T];
#endif
  const unsigned int t = threadIdx.x;
  const unsigned int seg = t / AS_TPS;
  const unsigned int base = (t % AS_TPS) * AS_E;
  const loom_idx nseg = (loom_idx)AS_ROWS * AS_TILES;
  for (loom_idx s0 = (loom_idx)blockIdx.x * AS_G; s0 < nseg; s0 += (loom_idx)gridDim.x * AS_G) {
    const loom_idx s = s0 + seg;
    const bool live = s < nseg;
    const loom_idx row = s / AS_TILES;
    const loom_idx col0 = (s % AS_TILES) * AS_P;
    as_kt v[AS_E];
#pragma unroll
    for (int e = 0; e < AS_E; ++e) {
      const loom_idx c = col0 + base + e;
      v[e] = (live && c < AS_N) ? as_make(AS_KEY(x[at_x(row * AS_N + c)]), (unsigned int)c) : as_pad();
    }
    for (unsigned int k = 2; k <= AS_P; k <<= 1) {
      // Partners in other threads: position p = base + e pairs with p ^ j.
      for (unsigned int j = k >> 1; j >= AS_E; j >>= 1) {
        const unsigned int tj = j / AS_E;
        // The lower position keeps the minimum in an ascending run.
        const bool takeMin = ((base & j) == 0) == ((base & k) == 0);
        if (tj < LOOM_WAVE) {
#pragma unroll
          for (int e = 0; e < AS_E; ++e) v[e] = as_pick(v[e], as_shfl(v[e], (int)tj), takeMin);
        } else {
#if AS_TPS > LOOM_WAVE
          __syncthreads();
#pragma unroll
          for (int e = 0; e < AS_E; ++e) sh[e * AS_T + t] = v[e];
          __syncthreads();
#pragma unroll
          for (int e = 0; e < AS_E; ++e) v[e] = as_pick(v[e], sh[e * AS_T + (t ^ tj)], takeMin);
#endif
        }
      }
      // Partners in registers.
#pragma unroll
      for (unsigned int j = AS_E >> 1; j > 0; j >>= 1) {
        if (j < k) {
#pragma unroll
          for (unsigned int e = 0; e < AS_E; ++e) {
            if ((e & j) == 0) {
              const bool asc = ((base + e) & k) == 0;
              const as_kt a = v[e], b = v[e | j];
              const bool sw = as_less(b, a) == asc;
              v[e] = sw ? b : a;
              v[e | j] = sw ? a : b;
            }
          }
        }
      }
    }
#pragma unroll
    for (int e = 0; e < AS_E; ++e) {
      const loom_idx c = col0 + base + e;
      if (live && c < AS_N) {
        if (FINAL) out[row * AS_N + c] = as_col(v[e]);
        else tiles[row * AS_N + c] = v[e];
      }
    }
  }
}

// as_merge merges sorted runs of W pairs pairwise (runs [s, s+W) and
// [s+W, s+2W) of each row), one thread per pair: a pair's place in the merged
// run is its place in its own run plus the number of pairs of the other run
// below it (a binary search; pairs are distinct, so no ties). FINAL writes
// the columns to out, else the pairs to dst.
#define AS_MERGE_BS 256
template <unsigned long long W, bool FINAL>
LOOM_DEV void as_merge(const as_kt* __restrict__ src, as_kt* __restrict__ dst, unsigned int* __restrict__ out) {
  const loom_idx w = (loom_idx)W;
  for (loom_idx i = (loom_idx)blockIdx.x * AS_MERGE_BS + threadIdx.x; i < (loom_idx)AS_ROWS * AS_N;
       i += (loom_idx)gridDim.x * AS_MERGE_BS) {
    const loom_idx row = i / AS_N, c = i % AS_N;
    const loom_idx s = c / (2 * w) * (2 * w);
    const loom_idx mid = s + w < AS_N ? s + w : AS_N;
    const loom_idx end = s + 2 * w < AS_N ? s + 2 * w : AS_N;
    const as_kt* r = src + row * AS_N;
    const as_kt key = src[i];
    const bool inA = c < mid;
    loom_idx lo = inA ? mid : s, hi = inA ? end : mid;
    while (lo < hi) {
      const loom_idx m = lo + (hi - lo) / 2;
      if (as_less(r[m], key)) lo = m + 1;
      else hi = m;
    }
    const loom_idx pos = inA ? c + (lo - mid) : (c - mid) + lo;
    if (FINAL) out[row * AS_N + pos] = as_col(key);
    else dst[row * AS_N + pos] = key;
  }
}

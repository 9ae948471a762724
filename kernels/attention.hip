// ---- attention.hip: causal attention with per-sequence offsets (ir/attention.go) ----
//
// Two launches (kernels/attention.go plans them):
//
// <name>_part, grid (rows, AT_NSPLIT): block (row, split) takes one query
// position t of one sequence b and one key/value head kh, the AT_G query
// heads that read kh (grouped-query attention: their keys and values are
// loaded once for all of them), and the keys [split·AT_SPLIT, +AT_SPLIT)
// that the row sees (s ≤ start[b] + t). It stages the queries in shared
// memory; computes the scores with a group of 8 lanes a key (each lane
// takes every 8th element of the head dim; the group meets by shuffles
// with xor 1, 2, 4, which stay inside any wave of 8 lanes or more); takes
// each head's largest score and the exponentials with one wave a head
// (shuffles over the whole wave, LOOM_WAVE lanes); and sums the values
// weighted by the exponentials. It writes the split's partial result to
// scratch: per head, the values' weighted sum acc[Dv], the largest score
// m and the sum of exponentials l. A split with no visible key, or whose
// scores are all −Inf, writes m = −Inf, l = 0.
//
// A decode step's block is short (32 keys), so its time is the chain of
// memory round trips, not bandwidth. Where the registers allow it
// (AT_PRE, the host's choice), every load is issued at the start, before
// the position that says how many keys are visible has arrived: the
// queries, the first pass's keys (AT_KPER elements a lane) and the values
// (AT_VPER a thread: thread i takes value element i % Dv of the keys
// ≡ i / Dv mod AT_KS), all within the cache's S keys and dropped past the
// visible ones; one round trip instead of four (H200: part 7.2 µs for
// 2 MB of keys and values in a 1B decode step). The values' sums then
// meet across the AT_KS key subsets in shared memory. Without AT_PRE a
// thread per (head, value element) loads its values after the softmax.
//
// With AT_CLUSTER (the host's choice, NVIDIA sm_90+: see at_cluster) a
// row's blocks are one thread block cluster and merge in its distributed
// shared memory: one launch, no scratch, no counter.
//
// With AT_FOLD (the host's choice, kernels/attention.go: a counter a row
// and the shared memory allow it) there is one launch: each part block
// counts itself in its row's counter and the row's last block merges it
// (at_fold, below), so a decode step's attention does not pay a second
// launch for a few microseconds of merging.
//
// <name>_merge: out = Σ_split acc·e^(m − M) / Σ_split l·e^(m − M) with M
// the largest m, skipping the splits with m = −Inf, l = 0 (a row whose
// every score is −Inf gets 0/0: NaN, as on the CPU). A group of 32 lanes
// (a wave on NVIDIA, half of one on a wave-64 AMD GPU: the shuffles' xor
// stays below 32) takes one (row, head): its lanes read the splits' m and
// l at once and meet by shuffles; each lane puts its splits' weights in
// shared memory, then sums every split of every 32nd value element, all
// the loads issued at once: two round trips. (The merge before took 9 µs
// for a 1B decode step's 8 rows of 32 splits, phases serialized behind
// barriers; a first version of this one, which read each split's m and
// l again for every element, 7.7 µs.) With more than AT_ML·8 splits
// (AT_MPL = 0) the lanes loop over them instead.
// Float32 throughout for f32, f16 and bf16 operands (float64 for f64),
// rounded once on store.
//
// NaN: the largest score is taken with a NaN-propagating max, so a NaN
// score (or a largest score of ±Inf, whose exponential is Inf − Inf) makes
// the row NaN, as the CPU's float64 twin (exec/cpu/attention.go) does.

LOOM_DEV AT_A at_max(AT_A m, AT_A x) { return (x > m || x != x) ? x : m; }

// AT_FOLD: the part launch merges the splits itself (at_fold), taking the
// executor's counters and the output. AT_CLUSTER: a cluster's blocks merge
// (at_cluster), taking the output.
#ifndef AT_CLUSTER
#define AT_CLUSTER 0
#endif
#if AT_CLUSTER
#define AT_FOLD_PARAMS , V_T* __restrict__ y
#define AT_FOLD_ARGS , y
#elif AT_FOLD
#define AT_FOLD_PARAMS , unsigned int* __restrict__ cnt, V_T* __restrict__ y
#define AT_FOLD_ARGS , cnt, y
#else
#define AT_FOLD_PARAMS
#define AT_FOLD_ARGS
#endif

#if AT_FOLD
// at_fold ends a part block's row (AT_FOLD, the host's choice: one launch a
// step instead of part then merge). The block's split result is in
// scratch; the block counts itself in the row's counter (cnt[row], zero on
// entry) after a fence, and the row's last split to arrive merges every
// split of the row as attention_merge does, reading the others' results
// through volatile loads after a fence (the threadfence-reduction pattern),
// then sets the counter back to zero for the next launch. The merge: the
// (head, split) maxima and sums in shared memory with one load each; a
// wave a head takes the head's largest m, each split's weight e^(m − M)
// (−1: a split to skip, with no visible key or only −Inf scores) and the
// weighted sum of the l; then a thread per (head, value element) sums the
// splits' values, the loads unrolled. A row whose every split is skipped
// gets 0/0: NaN, as the merge launch and the CPU give.
LOOM_DEV void at_fold(const AT_A* part, V_T* __restrict__ y, unsigned int* __restrict__ cnt, long long row,
                      long long b, long long kh, long long t, int tid) {
  __shared__ int last;
  __shared__ AT_A fm[AT_G * AT_NSPLIT], fl[AT_G * AT_NSPLIT], ft[AT_G];
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(cnt + row, 1u) == (unsigned int)(AT_NSPLIT - 1);
  __syncthreads();
  if (!last) return;  // the same for the whole block
  __threadfence();
  const long long sp_stride = AT_G * (AT_DV + 2);
  const volatile AT_A* p = part + row * AT_NSPLIT * sp_stride;
  for (int i = tid; i < AT_G * AT_NSPLIT; i += AT_THREADS) {
    const int g = i / AT_NSPLIT, sp = i % AT_NSPLIT;
    const volatile AT_A* s = p + sp * sp_stride + g * (AT_DV + 2);
    fm[i] = s[AT_DV];
    fl[i] = s[AT_DV + 1];
  }
  __syncthreads();
  const int wave = tid / LOOM_WAVE, wl = tid % LOOM_WAVE;
  for (int g = wave; g < AT_G; g += AT_THREADS / LOOM_WAVE) {
    AT_A M = AT_NEG_INF;
    for (int sp = wl; sp < AT_NSPLIT; sp += LOOM_WAVE) M = at_max(M, fm[g * AT_NSPLIT + sp]);
#pragma unroll
    for (int o = 1; o < LOOM_WAVE; o <<= 1) M = at_max(M, loom_shfl_xor(M, o));
    AT_A l = 0;
    for (int sp = wl; sp < AT_NSPLIT; sp += LOOM_WAVE) {
      const AT_A m = fm[g * AT_NSPLIT + sp], ls = fl[g * AT_NSPLIT + sp];
      const bool skip = ls == 0 && m == AT_NEG_INF;
      const AT_A w = skip ? (AT_A)0 : AT_EXP(m - M);
      l += skip ? (AT_A)0 : ls * w;
      fm[g * AT_NSPLIT + sp] = skip ? (AT_A)-1 : w;
    }
#pragma unroll
    for (int o = 1; o < LOOM_WAVE; o <<= 1) l += loom_shfl_xor(l, o);
    if (wl == 0) ft[g] = l;
  }
  __syncthreads();
  for (int i = tid; i < AT_G * AT_DV; i += AT_THREADS) {
    const int g = i / AT_DV, d = i % AT_DV;
    const volatile AT_A* s = p + g * (AT_DV + 2) + d;
    AT_A acc = 0;
#pragma unroll 32
    for (int sp = 0; sp < AT_NSPLIT; ++sp) {
      const AT_A w = fm[g * AT_NSPLIT + sp];
      const AT_A x = s[sp * sp_stride];
      acc += w < 0 ? (AT_A)0 : x * w;
    }
    y[((b * AT_H + kh * AT_G + g) * AT_T + t) * AT_DV + d] = AT_NARROW(acc / ft[g]);
  }
  if (tid == 0) cnt[row] = 0;
}
#endif

#if AT_CLUSTER
// AT_CLUSTER (the host's choice, kernels/attention.go: NVIDIA sm_90+, a
// decode step's few rows, S ≤ 8·128 keys): a row's AT_NSPLIT blocks are
// one thread block cluster (__cluster_dims__(1, AT_CLUSTER, 1) on the
// entry; a block's rank in it is its split), each block's partial result
// (acc[Dv], m, l a head) stays in its shared memory, and after a cluster
// barrier (release/acquire: every block's partial written) the blocks
// merge the row between them (at_cluster: a share of the outputs each,
// one lane a block's partial read from its shared memory with
// ld.shared::cluster); a second barrier (relaxed) keeps every block, and
// its shared memory, until that is done. The fold's
// store of the partials, threadfence, counter and two rounds of loads from
// global memory become two barriers and one round of loads within the GPC.
#ifndef __cluster_dims__
#define __cluster_dims__(...) __attribute__((cluster_dims(__VA_ARGS__)))
#endif
LOOM_DEV void at_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// at_cluster_done is the cluster's last barrier, which only keeps every
// block (and its shared memory) until the others have read it: relaxed,
// with no memory ordering (the release compiles to a GPU-wide membar that
// waits for the block's stores to the output). A thread's remote loads
// have returned before it arrives: their values are in the stores ahead.
LOOM_DEV void at_cluster_done() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}
LOOM_DEV unsigned int at_cluster_rank() {
  unsigned int r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// at_remote is the address of p (in this block's shared memory) in the
// shared memory of the cluster's block rank.
LOOM_DEV unsigned int at_remote(const AT_A* p, unsigned int rank) {
  unsigned long long g;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(g) : "l"(p));
  unsigned int r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"((unsigned int)g), "r"(rank));
  return r;
}
LOOM_DEV float at_dsmem(unsigned int a, float) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory");
  return v;
}
LOOM_DEV double at_dsmem(unsigned int a, double) {
  double v;
  asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(a) : "memory");
  return v;
}
// at_cluster ends a part block's row: cp is the block's partial result
// (G heads of Dv + 2), laid out as a scratch split's. Every block of the
// cluster merges a share of the row's G·Dv outputs: AT_CP lanes an output
// (the cluster's size rounded up to a power of 2), lane c reading block
// c's m, l and element of acc from its shared memory (ld.shared::cluster,
// all three loads at once), the lanes meeting by xor-shuffles (the largest
// m, then the weighted sums), so that a thread's chain is three remote
// loads and a few shuffles. (Rank 0 alone merging, each of its threads an
// output over every block in turn: 24 remote loads and 8 exponentials a
// thread in a chain, while the other blocks waited at the last barrier;
// ncu on W-attn, session 43: ~440 instructions a warp there, 15% of the
// kernel's stall samples at that barrier.)
#define AT_CP (AT_CLUSTER > 4 ? 8 : AT_CLUSTER > 2 ? 4 : AT_CLUSTER > 1 ? 2 : 1)
LOOM_DEV void at_cluster(const AT_A* cp, V_T* __restrict__ y, long long b, long long kh, long long t, int tid) {
  at_cluster_sync();
  const int rank = (int)at_cluster_rank();
  const AT_A zero = 0;
  // A uniform loop (i0 is the block's): every lane of a warp takes part
  // in the shuffles; items past the outputs, and lanes past the cluster's
  // blocks, take part as skipped blocks (m = −Inf, l = 0).
  for (int i0 = rank * AT_THREADS; i0 < (int)(AT_G * AT_DV) * AT_CP; i0 += AT_CLUSTER * AT_THREADS) {
    const int i = i0 + tid, c = i % AT_CP;
    const bool ok = i < (int)(AT_G * AT_DV) * AT_CP && c < AT_CLUSTER;
    const int o = ok ? i / AT_CP : 0, g = o / (int)AT_DV, d = o % (int)AT_DV;
    AT_A m = AT_NEG_INF, l = 0, x = 0;
    if (ok) {
      m = at_dsmem(at_remote(cp + g * (AT_DV + 2) + AT_DV, c), zero);
      l = at_dsmem(at_remote(cp + g * (AT_DV + 2) + AT_DV + 1, c), zero);
      x = at_dsmem(at_remote(cp + g * (AT_DV + 2) + d, c), zero);
    }
    AT_A M = m;
#pragma unroll
    for (int s = 1; s < AT_CP; s <<= 1) M = at_max(M, loom_shfl_xor(M, s));
    // A block with no visible key (or only −Inf scores) is skipped.
    const bool skip = l == 0 && m == AT_NEG_INF;
    const AT_A w = skip ? (AT_A)0 : AT_EXP(m - M);
    AT_A ls = skip ? (AT_A)0 : l * w, acc = skip ? (AT_A)0 : x * w;
#pragma unroll
    for (int s = 1; s < AT_CP; s <<= 1) {
      ls += loom_shfl_xor(ls, s);
      acc += loom_shfl_xor(acc, s);
    }
    if (ok && c == 0) y[((b * AT_H + kh * AT_G + g) * AT_T + t) * AT_DV + d] = AT_NARROW(acc / ls);
  }
  at_cluster_done();
}
#endif

LOOM_DEV const V_T* at_q(const V_T* q, long long b, long long h, long long t) {
  return q + AT_Q_OFF + b * AT_Q_SB + h * AT_Q_SH + t * AT_Q_ST;
}

LOOM_DEV void attention_part(const V_T* __restrict__ q, const V_T* __restrict__ k, const V_T* __restrict__ v,
                             const unsigned int* __restrict__ start, AT_A* __restrict__ part AT_FOLD_PARAMS) {
  __shared__ AT_A qs[AT_G * AT_DQ];
  __shared__ AT_A ps[AT_G * AT_SPLIT];
  __shared__ AT_A ml[AT_G * 2];
#if AT_PRE
  __shared__ AT_A red[AT_KS * AT_G * AT_DV];
#endif
  const int tid = threadIdx.x;
  const long long split = blockIdx.y;
  const int lane = tid % 8, kg = tid / 8;
  for (long long row = blockIdx.x; row < AT_ROWS; row += gridDim.x) {
    // row = (b·KV + kh)·T + t
    const long long t = row % AT_T, kh = (row / AT_T) % AT_KV, b = row / (AT_T * AT_KV);
    const long long h0 = kh * AT_G;
    const long long s0 = split * AT_SPLIT;  // < AT_S: the grid has ⌈S/split⌉ splits
    const V_T* kb = k + AT_K_OFF + b * AT_K_SB + kh * AT_K_SH;
    const V_T* vb = v + AT_V_OFF + b * AT_V_SB + kh * AT_V_SH;
#if AT_PRE
    // Every load at once: the keys and values that exist (s < S), used
    // only where visible.
    AT_A kr[AT_KPER];
    {
      const long long s = s0 + kg < AT_S ? s0 + kg : s0;
#pragma unroll
      for (int i = 0; i < AT_KPER; ++i) {
        const int d = lane + 8 * i;
        kr[i] = d < AT_D ? AT_WIDEN(kb[s * AT_K_SS + d * AT_K_SD]) : (AT_A)0;
      }
    }
    const int vd = tid % AT_DV, vk = tid / AT_DV;
    AT_A vr[AT_VPER];
#pragma unroll
    for (int r = 0; r < AT_VPER; ++r) {
      const long long j = vk + (long long)r * AT_KS;
      vr[r] = (vk < AT_KS && j < AT_SPLIT && s0 + j < AT_S) ? AT_WIDEN(vb[(s0 + j) * AT_V_SS + vd * AT_V_SD]) : (AT_A)0;
    }
#endif
    for (int i = tid; i < AT_G * AT_D; i += AT_THREADS) {
      const int g = i / AT_D, d = i % AT_D;
      qs[g * AT_DQ + d] = AT_WIDEN(at_q(q, b, h0 + g, t)[d * AT_Q_SD]);
    }
    const long long lim = (long long)start[AT_S_OFF + b * AT_S_SB] + t + 1;  // keys s < lim are visible
    const long long vis = lim < AT_S ? lim : AT_S;
    const int n = s0 >= vis ? 0 : (int)(vis - s0 < AT_SPLIT ? vis - s0 : AT_SPLIT);
    __syncthreads();
    // Scores: a group of 8 lanes a key, AT_THREADS / 8 keys a pass. Every
    // lane takes part in the shuffles (keys past n compute on key s0 and
    // drop the result).
    for (int j0 = 0; j0 < n; j0 += AT_THREADS / 8) {
      const int j = j0 + kg;
      const long long s = s0 + (j < n ? j : 0);
      const V_T* kp = kb + s * AT_K_SS;
      AT_A dot[AT_G];
#pragma unroll
      for (int g = 0; g < AT_G; ++g) dot[g] = 0;
#if AT_PRE
      if (j0 > 0) {
#pragma unroll
        for (int i = 0; i < AT_KPER; ++i) {
          const int d = lane + 8 * i;
          kr[i] = d < AT_D ? AT_WIDEN(kp[d * AT_K_SD]) : (AT_A)0;
        }
      }
#pragma unroll
      for (int i = 0; i < AT_KPER; ++i) {
        const int d = lane + 8 * i;
        if (d < AT_D) {
#pragma unroll
          for (int g = 0; g < AT_G; ++g) dot[g] += qs[g * AT_DQ + d] * kr[i];
        }
      }
#else
      for (int d = lane; d < AT_D; d += 8) {
        const AT_A kv = AT_WIDEN(kp[d * AT_K_SD]);
#pragma unroll
        for (int g = 0; g < AT_G; ++g) dot[g] += qs[g * AT_DQ + d] * kv;
      }
#endif
#pragma unroll
      for (int g = 0; g < AT_G; ++g) {
        AT_A x = dot[g];
        x += loom_shfl_xor(x, 1);
        x += loom_shfl_xor(x, 2);
        x += loom_shfl_xor(x, 4);
        if (lane == 0 && j < n) ps[g * AT_SPLIT + j] = (AT_A)AT_SCALE * x;
      }
    }
    __syncthreads();
    // Each head's largest score and exponentials: one wave a head.
    const int wave = tid / LOOM_WAVE, wl = tid % LOOM_WAVE;
    for (int g = wave; g < AT_G; g += AT_THREADS / LOOM_WAVE) {
      AT_A m = AT_NEG_INF;
      for (int j = wl; j < n; j += LOOM_WAVE) m = at_max(m, ps[g * AT_SPLIT + j]);
#pragma unroll
      for (int o = 1; o < LOOM_WAVE; o <<= 1) m = at_max(m, loom_shfl_xor(m, o));
      AT_A l = 0;
      // Every score −Inf: weights 0 and l = 0, so that the merge skips
      // the split (e^(−Inf − −Inf) would be NaN).
      for (int j = wl; j < n; j += LOOM_WAVE) {
        const AT_A p = m == AT_NEG_INF ? (AT_A)0 : AT_EXP(ps[g * AT_SPLIT + j] - m);
        ps[g * AT_SPLIT + j] = p;
        l += p;
      }
#pragma unroll
      for (int o = 1; o < LOOM_WAVE; o <<= 1) l += loom_shfl_xor(l, o);
      if (wl == 0) {
        ml[2 * g] = m;
        ml[2 * g + 1] = l;
      }
    }
    __syncthreads();
#if AT_CLUSTER
    __shared__ AT_A cp[AT_G * (AT_DV + 2)];
    AT_A* out = cp;
#else
    AT_A* out = part + (row * AT_NSPLIT + split) * (AT_G * (AT_DV + 2));
#endif
#if AT_PRE
    // Each thread's keys weighted, per head; then the AT_KS subsets' sums.
    if (vk < AT_KS) {
      AT_A acc[AT_G];
#pragma unroll
      for (int g = 0; g < AT_G; ++g) acc[g] = 0;
#pragma unroll
      for (int r = 0; r < AT_VPER; ++r) {
        const int j = vk + r * AT_KS;
        if (j < n) {
#pragma unroll
          for (int g = 0; g < AT_G; ++g) acc[g] += ps[g * AT_SPLIT + j] * vr[r];
        }
      }
#pragma unroll
      for (int g = 0; g < AT_G; ++g) red[(vk * AT_G + g) * AT_DV + vd] = acc[g];
    }
    __syncthreads();
    for (int i = tid; i < AT_G * AT_DV; i += AT_THREADS) {
      AT_A acc = 0;
#pragma unroll
      for (int r = 0; r < AT_KS; ++r) acc += red[r * AT_G * AT_DV + i];
      out[(i / AT_DV) * (AT_DV + 2) + i % AT_DV] = acc;
    }
#else
    // The weighted values: a thread per (head, value element), its loads
    // issued together (the loop is unrolled over the block's keys,
    // predicated on n).
    for (int i = tid; i < AT_G * AT_DV; i += AT_THREADS) {
      const int g = i / AT_DV, d = i % AT_DV;
      const V_T* vc = vb + s0 * AT_V_SS + d * AT_V_SD;
      const AT_A* p = ps + g * AT_SPLIT;
      AT_A acc = 0;
#pragma unroll 32
      for (int j = 0; j < AT_SPLIT; ++j) {
        if (j < n) acc += p[j] * AT_WIDEN(vc[j * AT_V_SS]);
      }
      out[g * (AT_DV + 2) + d] = acc;
    }
#endif
    for (int g = tid; g < AT_G; g += AT_THREADS) {
      out[g * (AT_DV + 2) + AT_DV] = n > 0 ? ml[2 * g] : AT_NEG_INF;
      out[g * (AT_DV + 2) + AT_DV + 1] = n > 0 ? ml[2 * g + 1] : (AT_A)0;
    }
#if AT_CLUSTER
    __syncthreads();
    at_cluster(cp, y, b, kh, t, tid);
#elif AT_FOLD
    at_fold(part, y, cnt, row, b, kh, t, tid);
#endif
    __syncthreads();
  }
}

#if AT_WARPS
// The warp form (AT_WARPS warps a block; the host's choice,
// kernels/attention.go: NVIDIA sm_90+, a decode step's few rows, keys and
// values with unit element stride and 16-byte aligned rows; NVIDIA's
// warps are 32 lanes, which the lane arithmetic below takes): a row's
// blocks are one cluster (AT_CLUSTER), and each warp takes AT_KPW keys,
// AT_LPK = 32/AT_KPW lanes a key, each lane a run of D/AT_LPK of its key's
// elements (16-byte loads). Every load is issued at once after the wait:
// the lane's part of its key, its Dv/32 value elements of each of the
// warp's keys (one row a load across the warp), the queries into shared
// memory, and the start. A key's lanes meet by xor-shuffles below AT_LPK
// for its scores (the queries broadcast from shared memory); the warp's
// largest score and sum of exponentials of each head take the shuffles
// from AT_LPK up; the exponentials go through the warp's shared memory
// (__syncwarp) to the lanes, which sum their value elements over the
// warp's visible keys. The block's warps then merge in shared memory (one
// barrier), and the cluster's blocks as at_cluster merges them.
//
// Why a few keys a warp: the part kernel's decode step (a group of 8
// lanes a key, a wave a head for the softmax, five barriers over 1,024
// threads) and a first warp form (a lane a key, 4 warps a block) both took
// 9.2 µs for W-attn's 2 MB (ncu, H200): each multiprocessor busy ~7 µs of
// it, the first stalled at barriers (21.8 cycles between a warp's
// instructions), the second issuing its ~2,600 instructions a warp one
// every 5.4 cycles with a single warp a scheduler. Fewer keys a warp cut
// each warp's chain (a lane's D/AT_LPK products a head, AT_KPW keys'
// values) and put more warps on each scheduler: 8.70 µs (ncu, 64 blocks
// of 16 warps, 64 registers), 6,403 active cycles a multiprocessor on
// average against 6,900–7,018. In the 1B model's decode step
// (TestGPUSpeed1B, alternating with LOOM_ATTENTION_WARPS=0 in one call,
// two rounds, session 42): Q4_K median step 553.1 / 552.3 µs against
// 563.2 / 562.6, bf16 920.2 / 918.7 against 924.3 / 923.2. (The first
// warp form, a lane a key, measured 565.8 / 566.0 and 921.8 / 921.2
// against 563.8 / 562.7 and 923.2 / 923.4: no faster.) The kernel was
// still latency-bound there: 11.6 cycles between a warp's instructions.
// So the products are fused multiply-adds, the queries come in 16-byte
// reads (each lane's run padded so that a key's lanes read different
// banks) and the weights 4 at a time: one round alternating in one call
// (same session), bf16 median step 909.7 µs against 927.8 with
// LOOM_ATTENTION_WARPS=0, Q4_K 540.6 against 564.0.
//
// The block's merge by the block's largest score (below) and at_cluster's
// merge spread over the blocks: ncu on W-attn 7.26–7.55 µs against
// 7.71–7.97 (session 43; ~520 and ~440 instructions a warp had gone to
// the two merges, of ~990). Tried after that and dropped (same session):
// the row's runs of AT_KPW keys dealt to the blocks in turn (run
// warp·AT_CLUSTER + rank), with warps past the visible keys skipping
// their products, so that each block would hold its share of the visible
// keys: W-attn 8.10–8.22 µs against 7.26–7.39, a 2,048-key row with 641
// visible 9.47–9.66 against 10.21–10.43, and the 1B decode step slower
// (bf16 median 911.2 / 910.3 µs against 902.5 / 902.4, Q4_K 545.0 /
// 545.1 against 535.4 / 536.5).
#define AT_LPK (32 / AT_KPW)
#define AT_DL (AT_D / AT_LPK)  // a lane's elements of its key
#define AT_QR (AT_DL + 4)       // a run of a query head in shared memory
#define AT_QH (AT_LPK * AT_QR)  // a query head in shared memory
#define AT_VL (AT_DV / 32)
#define AT_KW (AT_DL * (int)sizeof(V_T) / 4)
#define AT_VW (AT_VL * (int)sizeof(V_T) / 4)
// AT_WP: threads an output in the block's merge, a power of 2 of at most
// the warps: as many as the block's threads allow for G·Dv outputs.
#define AT_WP_(n) ((int)(AT_G * AT_DV) * (n) <= AT_THREADS && (n) <= AT_WARPS)
#define AT_WP (AT_WP_(32) ? 32 : AT_WP_(16) ? 16 : AT_WP_(8) ? 8 : AT_WP_(4) ? 4 : AT_WP_(2) ? 2 : 1)
// at_word(w, i): element i of the elements packed in words w.
LOOM_DEV V_T at_word(const unsigned int* w, int i) {
  if constexpr (sizeof(V_T) == 4) {
    return __uint_as_float(w[i]);
  } else {
    return (V_T)((w[i >> 1] >> (16 * (i & 1))) & 0xffffu);
  }
}
#ifndef AT_NEWKV
#define AT_NEWKV 0
#endif
// at_ld_key(p, w): a lane's run of a key, AT_KW words from p (16-byte
// aligned) with 16-byte loads. at_ld_value(p, w): a lane's AT_VW words of
// a value (4, 8 or 16 bytes) with one load. The cache's keys and values
// and, with AT_NEWKV, the new position's are read the same way.
LOOM_DEV void at_ld_key(const V_T* p, unsigned int* w) {
  const uint4* kp = reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < AT_KW / 4; ++i) {
    const uint4 u = kp[i];
    w[4 * i] = u.x;
    w[4 * i + 1] = u.y;
    w[4 * i + 2] = u.z;
    w[4 * i + 3] = u.w;
  }
}
LOOM_DEV void at_ld_value(const V_T* p, unsigned int* w) {
  if (AT_VW == 4) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    w[0] = u.x;
    w[AT_VW > 1 ? 1 : 0] = u.y;
    w[AT_VW > 2 ? 2 : 0] = u.z;
    w[AT_VW > 3 ? 3 : 0] = u.w;
  } else if (AT_VW == 2) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    w[0] = u.x;
    w[AT_VW > 1 ? 1 : 0] = u.y;
  } else {
    w[0] = *reinterpret_cast<const unsigned int*>(p);
  }
}
LOOM_DEV void attention_warps(const V_T* __restrict__ q, const V_T* __restrict__ k, const V_T* __restrict__ v,
                              const unsigned int* __restrict__ start, V_T* __restrict__ y,
                              const V_T* __restrict__ nkv) {
  // AT_NEWKV (the host's choice, kernels/attention.go: a decode step's
  // attention right behind the scatter that writes its query's position
  // of the cache, plan.Kernel.NewKV): the entry began with
  // loom_grid_defer(), and where that scatter runs in place (nkv, the
  // queries' buffer, not null) every load below is issued before the
  // wait — the cache's other positions were written by earlier runs, the
  // queries and positions by steps before the scatter — and the new
  // position's key and value are taken from nkv (what the scatter
  // writes) once the position has arrived. Otherwise the kernel waits
  // first and reads the cache as the plain form does.
  bool waited = !AT_NEWKV || nkv == 0;
#if AT_NEWKV
  if (waited) loom_grid_entry();
#endif
  // The queries, each lane's run of AT_DL elements 4 floats apart from
  // the next (AT_QR), so that the 16-byte reads of a key's AT_LPK lanes
  // fall in different banks.
  // (float4 arrays: 16-byte aligned; AT_A is float in this form.)
  __shared__ float4 qs4[AT_G * AT_QH / 4];
  __shared__ float4 ps4[AT_WARPS][AT_G * AT_KPW / 4];
  AT_A* qs = reinterpret_cast<AT_A*>(qs4);
  __shared__ AT_A wp[AT_WARPS][AT_G * (AT_DV + 2)];
  __shared__ AT_A wm[AT_G][AT_WARPS];  // each warp's largest score a head
  __shared__ AT_A cp[AT_G * (AT_DV + 2)];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, kl = lane / AT_LPK, part = lane % AT_LPK;
  for (long long row = blockIdx.x; row < AT_ROWS; row += gridDim.x) {
    const long long t = row % AT_T, kh = (row / AT_T) % AT_KV, b = row / (AT_T * AT_KV);
    const long long h0 = kh * AT_G;
    const long long s0 = ((long long)blockIdx.y * AT_WARPS + warp) * AT_KPW;  // the warp's first key
    const V_T* kb = k + AT_K_OFF + b * AT_K_SB + kh * AT_K_SH;
    const V_T* vb = v + AT_V_OFF + b * AT_V_SB + kh * AT_V_SH;
    // Keys past the cache's S read key 0 and are never visible. A lane's
    // part of its key is AT_KW words, its values AT_VW words a key.
    unsigned int kw[AT_KW];
    at_ld_key(kb + (s0 + kl < AT_S ? s0 + kl : 0) * AT_K_SS + part * AT_DL, kw);
    unsigned int vw[AT_KPW][AT_VW];
#pragma unroll
    for (int j = 0; j < AT_KPW; ++j) at_ld_value(vb + (s0 + j < AT_S ? s0 + j : 0) * AT_V_SS + lane * AT_VL, vw[j]);
#if AT_NEWKV
    // The new key's run of this lane and the new value's elements (T = 1).
    unsigned int newk[AT_KW], newv[AT_VW];
    if (!waited) {
      const V_T* np = nkv + AT_NK_OFF + b * AT_NK_SB + kh * AT_NK_SH;
      at_ld_key(np + part * AT_DL, newk);
      at_ld_value(nkv + AT_NV_OFF + b * AT_NK_SB + kh * AT_NK_SH + lane * AT_VL, newv);
    }
#endif
    for (int i = tid; i < AT_G * AT_D; i += AT_THREADS) {
      const int g = i / AT_D, d = i % AT_D;
      qs[g * AT_QH + d / AT_DL * AT_QR + d % AT_DL] = AT_WIDEN(at_q(q, b, h0 + g, t)[d * AT_Q_SD]);
    }
    const long long lim = (long long)start[AT_S_OFF + b * AT_S_SB] + t + 1;  // keys s < lim are visible
    const long long vis = lim < AT_S ? lim : AT_S;
#if AT_NEWKV
    if (!waited) {
      loom_grid_entry();
      waited = true;
      // Position lim − 1 (t = 0) is the one the scatter writes: its key
      // and value as the scatter writes them, not as the cache held them
      // when they were loaded.
      const long long pos = lim - 1;
      if (s0 + kl == pos) {
#pragma unroll
        for (int i = 0; i < AT_KW; ++i) kw[i] = newk[i];
      }
#pragma unroll
      for (int j = 0; j < AT_KPW; ++j) {
        if (s0 + j == pos) {
#pragma unroll
          for (int i = 0; i < AT_VW; ++i) vw[j][i] = newv[i];
        }
      }
    }
#endif
    __syncthreads();
    // This lane's key's scores (−Inf where not visible), its lanes' parts
    // summed.
    AT_A l[AT_G];
    {
      AT_A sc[AT_G];
#pragma unroll
      for (int g = 0; g < AT_G; ++g) sc[g] = 0;
#pragma unroll
      for (int d = 0; d < AT_DL; d += 4) {
        const AT_A k0 = AT_WIDEN(at_word(kw, d)), k1 = AT_WIDEN(at_word(kw, d + 1)),
                   k2 = AT_WIDEN(at_word(kw, d + 2)), k3 = AT_WIDEN(at_word(kw, d + 3));
#pragma unroll
        for (int g = 0; g < AT_G; ++g) {
          const float4 qv = *reinterpret_cast<const float4*>(qs + g * AT_QH + part * AT_QR + d);
          sc[g] = fmaf(qv.x, k0, sc[g]);
          sc[g] = fmaf(qv.y, k1, sc[g]);
          sc[g] = fmaf(qv.z, k2, sc[g]);
          sc[g] = fmaf(qv.w, k3, sc[g]);
        }
      }
      const bool seen = s0 + kl < vis;
#pragma unroll
      for (int g = 0; g < AT_G; ++g) {
        AT_A x = sc[g];
#pragma unroll
        for (int o = 1; o < AT_LPK; o <<= 1) x += loom_shfl_xor(x, o);
        x = seen ? (AT_A)AT_SCALE * x : AT_NEG_INF;
        AT_A mx = x;
#pragma unroll
        for (int o = AT_LPK; o < 32; o <<= 1) mx = at_max(mx, loom_shfl_xor(mx, o));
        sc[g] = x;
        if (lane == 0) wm[g][warp] = mx;
      }
      __syncthreads();
      // The block's largest score of each head (lane w reads warp w's),
      // so that every warp's exponentials share it: the block's merge is
      // then a plain sum.
#pragma unroll
      for (int g = 0; g < AT_G; ++g) {
        AT_A mx = lane < AT_WARPS ? wm[g][lane < AT_WARPS ? lane : 0] : AT_NEG_INF;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) mx = at_max(mx, loom_shfl_xor(mx, o));
        const AT_A x = sc[g];
        // A block with no visible key (or only −Inf scores): weights 0,
        // l = 0, m = −Inf, so that the cluster's merge skips it.
        const AT_A p = mx == AT_NEG_INF || x == AT_NEG_INF ? (AT_A)0 : AT_EXP(x - mx);
        AT_A sum = p;
#pragma unroll
        for (int o = AT_LPK; o < 32; o <<= 1) sum += loom_shfl_xor(sum, o);
        if (part == 0) reinterpret_cast<AT_A*>(ps4[warp])[g * AT_KPW + kl] = p;
        if (tid == 0) cp[g * (AT_DV + 2) + AT_DV] = mx;
        l[g] = sum;
      }
    }
    __syncwarp();
    // This lane's value elements lane·VL … of each head, over the warp's
    // visible keys (a key past them may hold anything, even NaN).
    AT_A acc[AT_G][AT_VL];
#pragma unroll
    for (int g = 0; g < AT_G; ++g)
#pragma unroll
      for (int e = 0; e < AT_VL; ++e) acc[g][e] = 0;
    // A key past the visible ones takes no part (its weight is 0, but
    // its values may be NaN).
    const int nv = vis - s0 < AT_KPW ? (vis - s0 > 0 ? (int)(vis - s0) : 0) : AT_KPW;
#pragma unroll
    for (int j0 = 0; j0 < AT_KPW; j0 += 4) {
#pragma unroll
      for (int g = 0; g < AT_G; ++g) {
        const float4 p4 = ps4[warp][(g * AT_KPW + j0) / 4];
        const AT_A p[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          if (j0 + u < nv) {
#pragma unroll
            for (int e = 0; e < AT_VL; ++e) acc[g][e] = fmaf(p[u], AT_WIDEN(at_word(vw[j0 + u], e)), acc[g][e]);
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < AT_G; ++g) {
#pragma unroll
      for (int e = 0; e < AT_VL; ++e) wp[warp][g * (AT_DV + 2) + lane * AT_VL + e] = acc[g][e];
      if (lane == 0) wp[warp][g * (AT_DV + 2) + AT_DV + 1] = l[g];
    }
    __syncthreads();
    // The block's partial result: its warps' sums (one largest score for
    // all of them), AT_WP threads an output, each summing every AT_WP-th
    // warp, then meeting by xor-shuffles. (Each thread an output, merging
    // every warp's own largest score in turn: ~520 instructions a warp in
    // a chain, half of the block's threads idle; ncu on W-attn, session 43.)
    for (int i0 = 0; i0 < (int)(AT_G * AT_DV) * AT_WP; i0 += AT_THREADS) {
      const int i = i0 + tid, sub = i % AT_WP;
      const bool ok = i < (int)(AT_G * AT_DV) * AT_WP;
      const int o = ok ? i / AT_WP : 0, g = o / (int)AT_DV, d = o % (int)AT_DV;
      AT_A a = 0, ls = 0;
#pragma unroll
      for (int j = 0; j < (AT_WARPS + AT_WP - 1) / AT_WP; ++j) {
        const int w = sub + j * AT_WP;
        if (w < AT_WARPS) {
          a += wp[w][g * (AT_DV + 2) + d];
          ls += wp[w][g * (AT_DV + 2) + AT_DV + 1];
        }
      }
#pragma unroll
      for (int st = 1; st < AT_WP; st <<= 1) {
        a += loom_shfl_xor(a, st);
        ls += loom_shfl_xor(ls, st);
      }
      if (ok && sub == 0) {
        cp[g * (AT_DV + 2) + d] = a;
        if (d == 0) cp[g * (AT_DV + 2) + AT_DV + 1] = ls;
      }
    }
    // at_cluster's first barrier (the cluster's, release/acquire) also
    // orders the block's own stores of cp before its reads, and its last
    // keeps every block until the others have read it.
    at_cluster(cp, y, b, kh, t, tid);
  }
}
#endif

// AT_ML lanes a (row, head) in the merge.
#define AT_ML 32

LOOM_DEV void attention_merge(const AT_A* __restrict__ part, V_T* __restrict__ y) {
#if AT_MPL
  // Each group's split weights, written by the lane that read the split
  // (−1: a split to skip).
  __shared__ AT_A wsh[(AT_THREADS / AT_ML) * AT_NSPLIT];
#endif
  const int lane = threadIdx.x % AT_ML, grp = threadIdx.x / AT_ML;
  const long long items = AT_ROWS * AT_G;
  const long long sp_stride = AT_G * (AT_DV + 2);
  for (long long i0 = (long long)blockIdx.x * (AT_THREADS / AT_ML); i0 < items; i0 += (long long)gridDim.x * (AT_THREADS / AT_ML)) {
    // Groups past the last item compute on item 0 and store nothing, so
    // that every lane of a wave takes part in the shuffles.
    const long long item = i0 + grp;
    const bool valid = item < items;
    const long long it = valid ? item : 0;
    const long long row = it / AT_G, g = it % AT_G;
    const long long t = row % AT_T, kh = (row / AT_T) % AT_KV, b = row / (AT_T * AT_KV);
    const AT_A* p = part + row * AT_NSPLIT * sp_stride + g * (AT_DV + 2);
    V_T* yr = y + ((b * AT_H + kh * AT_G + g) * AT_T + t) * AT_DV;
#if AT_MPL
    // At most AT_MPL splits a lane: their m and l read at once.
    AT_A mr[AT_MPL], lr[AT_MPL];
    AT_A M = AT_NEG_INF;
#pragma unroll
    for (int r = 0; r < AT_MPL; ++r) {
      const int sp = lane + r * AT_ML;
      mr[r] = sp < AT_NSPLIT ? p[sp * sp_stride + AT_DV] : AT_NEG_INF;
      lr[r] = sp < AT_NSPLIT ? p[sp * sp_stride + AT_DV + 1] : (AT_A)0;
      M = at_max(M, mr[r]);
    }
#pragma unroll
    for (int o = 1; o < AT_ML; o <<= 1) M = at_max(M, loom_shfl_xor(M, o));
    AT_A l = 0;
#pragma unroll
    for (int r = 0; r < AT_MPL; ++r) {
      const int sp = lane + r * AT_ML;
      // A split with no visible key (or only −Inf scores) is skipped.
      const bool skip = lr[r] == 0 && mr[r] == AT_NEG_INF;
      const AT_A w = skip ? (AT_A)0 : AT_EXP(mr[r] - M);
      l += skip ? (AT_A)0 : lr[r] * w;
      if (sp < AT_NSPLIT) wsh[grp * AT_NSPLIT + sp] = skip ? (AT_A)-1 : w;
    }
#pragma unroll
    for (int o = 1; o < AT_ML; o <<= 1) l += loom_shfl_xor(l, o);
    __syncthreads();
    // Every split's value element d at once (the loops unrolled).
#pragma unroll
    for (int dd = 0; dd < (AT_DV + AT_ML - 1) / AT_ML; ++dd) {
      const int d = lane + dd * AT_ML;
      if (d < AT_DV) {
        AT_A acc = 0;
#pragma unroll 32
        for (int sp = 0; sp < AT_NSPLIT; ++sp) {
          const AT_A w = wsh[grp * AT_NSPLIT + sp];
          const AT_A x = p[sp * sp_stride + d];
          acc += w < 0 ? (AT_A)0 : x * w;
        }
        if (valid) yr[d] = AT_NARROW(acc / l);
      }
    }
    __syncthreads();
#else
    AT_A M = AT_NEG_INF;
    for (long long sp = lane; sp < AT_NSPLIT; sp += AT_ML) M = at_max(M, p[sp * sp_stride + AT_DV]);
#pragma unroll
    for (int o = 1; o < AT_ML; o <<= 1) M = at_max(M, loom_shfl_xor(M, o));
    AT_A l = 0;
    for (long long sp = lane; sp < AT_NSPLIT; sp += AT_ML) {
      const AT_A m = p[sp * sp_stride + AT_DV], ls = p[sp * sp_stride + AT_DV + 1];
      // A split with no visible key (or only −Inf scores) is skipped.
      if (!(ls == 0 && m == AT_NEG_INF)) l += ls * AT_EXP(m - M);
    }
#pragma unroll
    for (int o = 1; o < AT_ML; o <<= 1) l += loom_shfl_xor(l, o);
    for (int d = lane; d < AT_DV; d += AT_ML) {
      AT_A acc = 0;
#pragma unroll 8
      for (long long sp = 0; sp < AT_NSPLIT; ++sp) {
        const AT_A* q = p + sp * sp_stride;
        const AT_A m = q[AT_DV], ls = q[AT_DV + 1];
        if (!(ls == 0 && m == AT_NEG_INF)) acc += q[d] * AT_EXP(m - M);
      }
      if (valid) yr[d] = AT_NARROW(acc / l);
    }
#endif
  }
}

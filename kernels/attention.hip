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
// weighted by the exponentials with one thread per (head, value element).
// It writes the split's partial result to scratch: per head, the values'
// weighted sum acc[Dv], the largest score m and the sum of exponentials l.
// A split with no visible key, or whose scores are all −Inf, writes
// m = −Inf, l = 0.
//
// <name>_merge, grid (rows): out = Σ_split acc·e^(m − M) / Σ_split l·e^(m − M)
// with M the largest m, skipping the splits with m = −Inf, l = 0 (a row
// whose every score is −Inf gets 0/0: NaN, as on the CPU). Float32 throughout for f32,
// f16 and bf16 operands (float64 for f64), rounded once on store.
//
// NaN: the largest score is taken with a NaN-propagating max, so a NaN
// score (or a largest score of ±Inf, whose exponential is Inf − Inf) makes
// the row NaN, as the CPU's float64 twin (exec/cpu/attention.go) does.

LOOM_DEV AT_A at_max(AT_A m, AT_A x) { return (x > m || x != x) ? x : m; }

LOOM_DEV const V_T* at_q(const V_T* q, long long b, long long h, long long t) {
  return q + AT_Q_OFF + b * AT_Q_SB + h * AT_Q_SH + t * AT_Q_ST;
}

LOOM_DEV void attention_part(const V_T* __restrict__ q, const V_T* __restrict__ k, const V_T* __restrict__ v,
                             const unsigned int* __restrict__ start, AT_A* __restrict__ part) {
  __shared__ AT_A qs[AT_G * AT_DQ];
  __shared__ AT_A ps[AT_G * AT_SPLIT];
  __shared__ AT_A ml[AT_G * 2];
  const int tid = threadIdx.x;
  const long long split = blockIdx.y;
  for (long long row = blockIdx.x; row < AT_ROWS; row += gridDim.x) {
    // row = (b·KV + kh)·T + t
    const long long t = row % AT_T, kh = (row / AT_T) % AT_KV, b = row / (AT_T * AT_KV);
    const long long h0 = kh * AT_G;
    for (int i = tid; i < AT_G * AT_D; i += AT_THREADS) {
      const int g = i / AT_D, d = i % AT_D;
      qs[g * AT_DQ + d] = AT_WIDEN(at_q(q, b, h0 + g, t)[d * AT_Q_SD]);
    }
    const long long lim = (long long)start[AT_S_OFF + b * AT_S_SB] + t + 1;  // keys s < lim are visible
    const long long s0 = split * AT_SPLIT;
    const long long vis = lim < AT_S ? lim : AT_S;
    const int n = s0 >= vis ? 0 : (int)(vis - s0 < AT_SPLIT ? vis - s0 : AT_SPLIT);
    __syncthreads();
    // Scores: a group of 8 lanes a key, AT_THREADS / 8 keys a pass. Every
    // lane takes part in the shuffles (keys past n compute on key s0 and
    // drop the result).
    const int lane = tid % 8;
    for (int j0 = 0; j0 < n; j0 += AT_THREADS / 8) {
      const int j = j0 + tid / 8;
      const long long s = s0 + (j < n ? j : 0);
      const V_T* kr = k + AT_K_OFF + b * AT_K_SB + kh * AT_K_SH + s * AT_K_SS;
      AT_A dot[AT_G];
#pragma unroll
      for (int g = 0; g < AT_G; ++g) dot[g] = 0;
      for (int d = lane; d < AT_D; d += 8) {
        const AT_A kv = AT_WIDEN(kr[d * AT_K_SD]);
#pragma unroll
        for (int g = 0; g < AT_G; ++g) dot[g] += qs[g * AT_DQ + d] * kv;
      }
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
    // The weighted values: a thread per (head, value element), its loads
    // issued together (the loop is unrolled over the block's keys,
    // predicated on n).
    AT_A* out = part + (row * AT_NSPLIT + split) * (AT_G * (AT_DV + 2));
    for (int i = tid; i < AT_G * AT_DV; i += AT_THREADS) {
      const int g = i / AT_DV, d = i % AT_DV;
      const V_T* vc = v + AT_V_OFF + b * AT_V_SB + kh * AT_V_SH + s0 * AT_V_SS + d * AT_V_SD;
      const AT_A* p = ps + g * AT_SPLIT;
      AT_A acc = 0;
#pragma unroll 32
      for (int j = 0; j < AT_SPLIT; ++j) {
        if (j < n) acc += p[j] * AT_WIDEN(vc[j * AT_V_SS]);
      }
      out[g * (AT_DV + 2) + d] = acc;
    }
    for (int g = tid; g < AT_G; g += AT_THREADS) {
      out[g * (AT_DV + 2) + AT_DV] = n > 0 ? ml[2 * g] : AT_NEG_INF;
      out[g * (AT_DV + 2) + AT_DV + 1] = n > 0 ? ml[2 * g + 1] : (AT_A)0;
    }
    __syncthreads();
  }
}

LOOM_DEV void attention_merge(const AT_A* __restrict__ part, V_T* __restrict__ y) {
#if AT_G * AT_NSPLIT <= AT_MERGE_SHARED
  // Every split's weight e^(m − M) once per head, in shared memory (the
  // maxima and sums read by one thread each, all at once), then a thread
  // per (head, value element) sums the splits' weighted values.
  __shared__ AT_A wt[AT_G * AT_NSPLIT];
  __shared__ AT_A lt[AT_G * AT_NSPLIT];
  __shared__ AT_A hm[AT_G];
  __shared__ AT_A hl[AT_G];
#endif
  for (long long row = blockIdx.x; row < AT_ROWS; row += gridDim.x) {
    const long long t = row % AT_T, kh = (row / AT_T) % AT_KV, b = row / (AT_T * AT_KV);
    const AT_A* p = part + row * AT_NSPLIT * (AT_G * (AT_DV + 2));
#if AT_G * AT_NSPLIT <= AT_MERGE_SHARED
    for (int i = threadIdx.x; i < AT_G * AT_NSPLIT; i += AT_THREADS) {
      const int g = i / AT_NSPLIT, sp = i % AT_NSPLIT;
      const AT_A* q = p + sp * (AT_G * (AT_DV + 2)) + g * (AT_DV + 2);
      wt[i] = q[AT_DV];
      lt[i] = q[AT_DV + 1];
    }
    __syncthreads();
    for (int g = threadIdx.x; g < AT_G; g += AT_THREADS) {
      AT_A M = AT_NEG_INF;
      for (int sp = 0; sp < AT_NSPLIT; ++sp) M = at_max(M, wt[g * AT_NSPLIT + sp]);
      hm[g] = M;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < AT_G * AT_NSPLIT; i += AT_THREADS) {
      const int g = i / AT_NSPLIT;
      // A split with no visible key (or only −Inf scores): weight 0.
      const bool skip = lt[i] == 0 && wt[i] == AT_NEG_INF;
      wt[i] = skip ? (AT_A)0 : AT_EXP(wt[i] - hm[g]);
    }
    __syncthreads();
    for (int g = threadIdx.x; g < AT_G; g += AT_THREADS) {
      AT_A l = 0;
      for (int sp = 0; sp < AT_NSPLIT; ++sp) l += lt[g * AT_NSPLIT + sp] * wt[g * AT_NSPLIT + sp];
      hl[g] = l;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < AT_G * AT_DV; i += AT_THREADS) {
      const int g = i / AT_DV, d = i % AT_DV;
      AT_A acc = 0;
#pragma unroll 16
      for (int sp = 0; sp < AT_NSPLIT; ++sp) {
        acc += p[sp * (AT_G * (AT_DV + 2)) + g * (AT_DV + 2) + d] * wt[g * AT_NSPLIT + sp];
      }
      y[((b * AT_H + kh * AT_G + g) * AT_T + t) * AT_DV + d] = AT_NARROW(acc / hl[g]);
    }
    __syncthreads();
#else
    for (int i = threadIdx.x; i < AT_G * AT_DV; i += AT_THREADS) {
      const int g = i / AT_DV, d = i % AT_DV;
      AT_A M = AT_NEG_INF;
      for (int sp = 0; sp < AT_NSPLIT; ++sp) M = at_max(M, p[sp * (AT_G * (AT_DV + 2)) + g * (AT_DV + 2) + AT_DV]);
      AT_A acc = 0, l = 0;
      for (int sp = 0; sp < AT_NSPLIT; ++sp) {
        const AT_A* q = p + sp * (AT_G * (AT_DV + 2)) + g * (AT_DV + 2);
        if (q[AT_DV + 1] == 0 && q[AT_DV] == AT_NEG_INF) continue;  // no visible key
        const AT_A w = AT_EXP(q[AT_DV] - M);
        acc += q[d] * w;
        l += q[AT_DV + 1] * w;
      }
      y[((b * AT_H + kh * AT_G + g) * AT_T + t) * AT_DV + d] = AT_NARROW(acc / l);
    }
#endif
  }
}

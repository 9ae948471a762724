// ---- index.hip: Loom's indexing and data-movement kernels (package kernels) ----
//
// The text before this one (written by Go for one kernel) configures it:
//   loom_idx           32- or 64-bit unsigned index type;
//   V_T, V_C, V_CANON  value storage type, compute type, and the CPU twin's
//                      load-then-store of a value (f16/bf16 NaNs canonical);
//   I_T                ids storage type; LOOM_SENTINEL the ids dtype's max;
//   LOOM_L/M/S/D/R...  sizes (left, middle, source and destination dim, right);
//   at_<operand>(i)    element offset of an operand's logical flat index i
//                      (offsets and strides are baked in);
//   LOOM_SELECT, LOOM_SCATTER, LOOM_SLICE, LOOM_CAT  which kernel this is.
// Every loop is a grid-stride loop over blocks of LOOM_BS threads.

#define LOOM_BS 256
LOOM_DEV loom_idx loom_first() { return (loom_idx)blockIdx.x * LOOM_BS + (loom_idx)threadIdx.x; }
LOOM_DEV loom_idx loom_step() { return (loom_idx)gridDim.x * LOOM_BS; }

#ifdef LOOM_IDS
// The error flag (4 int64 words, zeroed before the step): the first thread
// that meets a bad id swaps word 0 from 0 to the sentinel (never 0) and
// records the id, its position (flat index into ids) and the dim size.
LOOM_DEV void loom_bad_id(unsigned long long* flag, long long id, loom_idx pos, long long size) {
  if (atomicCAS(flag, 0ull, (unsigned long long)LOOM_SENTINEL) == 0ull) {
    flag[1] = (unsigned long long)id;
    flag[2] = (unsigned long long)pos;
    flag[3] = (unsigned long long)size;
  }
}

// loom_id_ok reports whether id addresses an element of a dim of size: the
// sentinel is skipped silently, any other id outside [0, size) is flagged
// and skipped.
LOOM_DEV bool loom_id_ok(long long id, long long size, loom_idx pos, unsigned long long* flag) {
  if (id == LOOM_SENTINEL) return false;
  if (id < 0 || id >= size) {
    loom_bad_id(flag, id, pos, size);
    return false;
  }
  return true;
}
#endif

#ifdef LOOM_SELECT
// index_select and gather: one thread per output element o = (li·M + j)·R + ri.
// The id is ids[j] (index_select) or ids[o] (gather, ids has the output's
// shape); it picks src element (li·S + id)·R + ri. A sentinel reads 0.
LOOM_DEV void loom_select(const V_T* __restrict__ src, const I_T* __restrict__ ids, V_T* __restrict__ out,
                          unsigned long long* __restrict__ flag) {
  for (loom_idx o = loom_first(); o < LOOM_NUMEL; o += loom_step()) {
    const loom_idx ri = o % LOOM_R, lj = o / LOOM_R;
    const loom_idx j = lj % LOOM_M, li = lj / LOOM_M;
    const loom_idx pos = LOOM_GATHER ? o : j;
    const long long id = (long long)ids[at_ids(pos)];
    V_T v = (V_T)0;
    if (loom_id_ok(id, (long long)LOOM_S, pos, flag)) v = V_CANON(src[at_src((li * LOOM_S + (loom_idx)id) * LOOM_R + ri)]);
    out[o] = v;
  }
}
#endif

#ifdef LOOM_SCATTER
// scatter, scatter_add, index_add. A_T is the accumulator's type: the output
// itself, or (f16/bf16 adds) a float scratch copy that is rounded once at the
// end, as the CPU twin accumulates in float and rounds on store.

// loom_init: acc = dst (through its layout), one thread per element.
LOOM_DEV void loom_init(const V_T* __restrict__ dst, A_T* __restrict__ acc) {
  for (loom_idx o = loom_first(); o < LOOM_NUMEL; o += loom_step()) acc[o] = A_INIT(dst[at_dst(o)]);
}

// loom_scatter: one thread per (li, ri), looping over j in increasing order,
// so that duplicates resolve exactly as on the CPU (the last write wins;
// adds happen in order) with no atomics. The id of source element
// si = (li·S + j)·R + ri is ids[si] (scatter, scatter_add: ids has src's
// shape) or ids[j] (index_add); it goes to (li·D + id)·R + ri.
LOOM_DEV void loom_scatter(const I_T* __restrict__ ids, const V_T* __restrict__ src, A_T* __restrict__ acc,
                           unsigned long long* __restrict__ flag) {
  for (loom_idx t = loom_first(); t < LOOM_L * LOOM_R; t += loom_step()) {
    const loom_idx li = t / LOOM_R, ri = t % LOOM_R;
    for (loom_idx j = 0; j < LOOM_S; ++j) {
      const loom_idx si = (li * LOOM_S + j) * LOOM_R + ri;
      const loom_idx pos = LOOM_INDEX_ADD ? j : si;
      const long long id = (long long)ids[at_ids(pos)];
      if (!loom_id_ok(id, (long long)LOOM_D, pos, flag)) continue;
      A_T& a = acc[(li * LOOM_D + (loom_idx)id) * LOOM_R + ri];
      a = A_UPDATE(a, src[at_src(si)]);
    }
  }
}

#ifdef A_FINISH
// loom_finish: out = the float accumulator rounded to the dtype.
LOOM_DEV void loom_finish(const A_T* __restrict__ acc, V_T* __restrict__ out) {
  for (loom_idx o = loom_first(); o < LOOM_NUMEL; o += loom_step()) out[o] = A_FINISH(acc[o]);
}
#endif
#endif

#ifdef LOOM_SLICE
// slice_assign: one thread per output element o = (li·D + c)·R + ri: from src
// element (li·S + c - START)·R + ri when START ≤ c < START + S, else from dst.
LOOM_DEV void loom_slice(const V_T* __restrict__ dst, const V_T* __restrict__ src, V_T* __restrict__ out) {
  for (loom_idx o = loom_first(); o < LOOM_NUMEL; o += loom_step()) {
    const loom_idx ri = o % LOOM_R, lc = o / LOOM_R;
    const loom_idx c = lc % LOOM_D, li = lc / LOOM_D;
    V_T v;
    if (c >= LOOM_START && c < LOOM_START + LOOM_S) v = src[at_src((li * LOOM_S + (c - LOOM_START)) * LOOM_R + ri)];
    else v = dst[at_dst(o)];
    out[o] = V_CANON(v);
  }
}
#endif

#ifdef LOOM_CAT
// cat: one thread per output element o = li·(D·R) + rem; loom_cat_load (written
// by Go: one branch per input) finds the input k whose slab
// [OFF_k·R, (OFF_k + S_k)·R) holds rem and reads its element
// li·S_k·R + rem - OFF_k·R.
LOOM_DEV void loom_cat(const loom_ins ins, V_T* __restrict__ out) {
  for (loom_idx o = loom_first(); o < LOOM_NUMEL; o += loom_step()) {
    const loom_idx rem = o % (LOOM_D * LOOM_R), li = o / (LOOM_D * LOOM_R);
    out[o] = V_CANON(loom_cat_load(ins, li, rem));
  }
}
#endif

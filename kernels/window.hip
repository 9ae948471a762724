// ---- window.hip: Loom's pool and upsampling kernels (package kernels) ----
//
// One thread per output element o of [P, OH, OW] (P = N·C planes; for one
// spatial dim H = OH = 1), consecutive threads on consecutive columns, so
// that stores are coalesced and loads of a window row are close together.
// The Go twins are exec/cpu/pool.go: every element is computed with the
// same operations in the same order, so results are equal bit for bit.
//
// The text before this one (written by Go for one kernel) configures it:
//   loom_idx, loom_sidx  unsigned index type and signed coordinate type
//                        (32- or 64-bit);
//   V_T, V_C, V_CANON    value storage type, compute type, the CPU twin's
//                        load-then-store (f16/bf16 NaNs canonical);
//   LOOM_NUMEL, LOOM_H, LOOM_W, LOOM_OH, LOOM_OW, LOOM_OFF  sizes and the
//                        input's element offset (the input is packed);
//   LOOM_POOL: LOOM_MAX, LOOM_KH/KW/SH/SW/PH/PW, LOOM_COUNT_PAD, A_T (the
//     accumulator: float, double or unsigned long long), V_LOAD (storage →
//     compute), V_STORE (compute → storage), V_NAN (the compute type's
//     canonical NaN), V_ISNAN (false for integers), V_MAX (the larger,
//     +0 over −0), A_ADD, A_DIV;
//   LOOM_NEAREST: loom_src_h(oh), loom_src_w(ow), the source indices;
//   LOOM_BILINEAR: LOOM_ALIGN, LOOM_RH, LOOM_RW (the axes' float64 scales),
//     V_F64 (storage → double), F64_V (double → storage, rounded once).
//   LOOM_UNROLL          _Pragma("unroll") for windows small enough to
//                        unroll completely, else nothing;
//   LOOM_PARAMS, LOOM_ARGS  the entry's parameters and their names;
//   LOOM_XV(j)           the input's storage value at flat index j of
//                        [P, H, W]: a load at LOOM_OFF + j, or a fused
//                        prologue computed at j (plan.WindowAt);
//   LOOM_STORE(o, v)     stores storage value v as output element o: as it
//                        is, or through a fused epilogue.
// Loops are grid-stride loops over blocks of LOOM_BS threads; nothing
// depends on the wave size.

#define LOOM_BS 256
LOOM_DEV loom_idx loom_first() { return (loom_idx)blockIdx.x * LOOM_BS + (loom_idx)threadIdx.x; }
LOOM_DEV loom_idx loom_step() { return (loom_idx)gridDim.x * LOOM_BS; }

#ifdef LOOM_POOL
// Window of output (oh, ow): rows [hs, hs + KH) and columns [ws, ws + KW),
// hs = oh·SH − PH, clipped to the input and read in row-major order. The
// loops run over the whole kernel with a bounds test per row and column, so
// that small kernels unroll; they visit the input elements in the twin's
// order.
LOOM_DEV void loom_pool(LOOM_PARAMS) {
  for (loom_idx o = loom_first(); o < LOOM_NUMEL; o += loom_step()) {
    const loom_idx ow = o % LOOM_OW, t = o / LOOM_OW;
    const loom_idx oh = t % LOOM_OH, p = t / LOOM_OH;
    const loom_idx plane = p * (LOOM_H * LOOM_W);
    const loom_sidx hs = (loom_sidx)(oh * LOOM_SH) - LOOM_PH, ws = (loom_sidx)(ow * LOOM_SW) - LOOM_PW;
#if LOOM_MAX
    // IEEE 754-2019 maximum (+0 > −0; a NaN makes the result the canonical
    // NaN), so the order of the reads does not matter.
    const loom_sidx h0 = hs > 0 ? hs : 0, w0 = ws > 0 ? ws : 0;
    V_C m = V_LOAD(LOOM_XV(plane + (loom_idx)h0 * LOOM_W + (loom_idx)w0));
    bool nan = false;
LOOM_UNROLL
    for (loom_sidx i = 0; i < LOOM_KH; ++i) {
      const loom_sidx r = hs + i;
      if (r < 0 || r >= (loom_sidx)LOOM_H) continue;
      const loom_idx row = plane + (loom_idx)r * LOOM_W;
LOOM_UNROLL
      for (loom_sidx j = 0; j < LOOM_KW; ++j) {
        const loom_sidx c = ws + j;
        if (c < 0 || c >= (loom_sidx)LOOM_W) continue;
        const V_C v = V_LOAD(LOOM_XV(row + (loom_idx)c));
        nan = nan || V_ISNAN(v);
        m = V_MAX(m, v);
      }
    }
    LOOM_STORE(o, V_STORE(nan ? V_NAN : m));
#else
    // The sum in A_T in row-major order, then one division by the divisor:
    // the window clipped to the padded input (LOOM_COUNT_PAD) or the number
    // of input elements in it.
    A_T sum = (A_T)0;
    loom_sidx rows = 0, cols = 0;
LOOM_UNROLL
    for (loom_sidx i = 0; i < LOOM_KH; ++i) {
      const loom_sidx r = hs + i;
      if (r < 0 || r >= (loom_sidx)LOOM_H) continue;
      ++rows;
      const loom_idx row = plane + (loom_idx)r * LOOM_W;
      cols = 0;
LOOM_UNROLL
      for (loom_sidx j = 0; j < LOOM_KW; ++j) {
        const loom_sidx c = ws + j;
        if (c < 0 || c >= (loom_sidx)LOOM_W) continue;
        ++cols;
        sum = A_ADD(sum, (A_T)V_LOAD(LOOM_XV(row + (loom_idx)c)));
      }
    }
#if LOOM_COUNT_PAD
    const loom_sidx he = hs + LOOM_KH, we = ws + LOOM_KW;
    const loom_sidx hp = (loom_sidx)LOOM_H + LOOM_PH, wp = (loom_sidx)LOOM_W + LOOM_PW;
    const loom_sidx div = ((he < hp ? he : hp) - hs) * ((we < wp ? we : wp) - ws);
#else
    const loom_sidx div = rows * cols;
#endif
    LOOM_STORE(o, V_STORE(A_DIV(sum, div)));
#endif
  }
}
#endif

#ifdef LOOM_NEAREST
// Each output element is its source element (the twin's index tables are
// loom_src_h and loom_src_w here).
LOOM_DEV void loom_nearest(LOOM_PARAMS) {
  for (loom_idx o = loom_first(); o < LOOM_NUMEL; o += loom_step()) {
    const loom_idx ow = o % LOOM_OW, t = o / LOOM_OW;
    const loom_idx oh = t % LOOM_OH, p = t / LOOM_OH;
    LOOM_STORE(o, V_CANON(LOOM_XV(p * (LOOM_H * LOOM_W) + loom_src_h(oh) * LOOM_W + loom_src_w(ow))));
  }
}
#endif

#ifdef LOOM_BILINEAR
// One axis of the interpolation (ir.UpsampleParams), in double with every
// operation rounded: source indices i0, i1 and weights 1 − λ, λ.
LOOM_DEV void loom_lerp_axis(loom_idx d, double scale, loom_idx in, loom_idx& i0, loom_idx& i1, double& w0, double& w1) {
#if LOOM_ALIGN
  const double src = loom_mul(scale, (double)d);
#else
  double src = loom_sub(loom_mul(scale, loom_add((double)d, 0.5)), 0.5);
  src = src > 0.0 ? src : 0.0;
#endif
  const loom_idx f = (loom_idx)floor(src);
  i0 = f < in - 1 ? f : in - 1;
  i1 = i0 + 1 < in - 1 ? i0 + 1 : in - 1;
  w1 = loom_sub(src, (double)i0);
  w0 = loom_sub(1.0, w1);
}

LOOM_DEV void loom_bilinear(LOOM_PARAMS) {
  for (loom_idx o = loom_first(); o < LOOM_NUMEL; o += loom_step()) {
    const loom_idx ow = o % LOOM_OW, t = o / LOOM_OW;
    const loom_idx oh = t % LOOM_OH, p = t / LOOM_OH;
    loom_idx h0, h1, w0, w1;
    double a0, a1, b0, b1;
    loom_lerp_axis(oh, LOOM_RH, LOOM_H, h0, h1, a0, a1);
    loom_lerp_axis(ow, LOOM_RW, LOOM_W, w0, w1, b0, b1);
    const loom_idx top = p * (LOOM_H * LOOM_W) + h0 * LOOM_W;
    const loom_idx bot = p * (LOOM_H * LOOM_W) + h1 * LOOM_W;
    const double u = loom_add(loom_mul(V_F64(LOOM_XV(top + w0)), b0), loom_mul(V_F64(LOOM_XV(top + w1)), b1));
    const double v = loom_add(loom_mul(V_F64(LOOM_XV(bot + w0)), b0), loom_mul(V_F64(LOOM_XV(bot + w1)), b1));
    const double r = loom_add(loom_mul(u, a0), loom_mul(v, a1));
    LOOM_STORE(o, F64_V(r != r ? LOOM_NAN_F64 : r));
  }
}
#endif

// ---- scan.hip: Loom's cumsum (inclusive scan along one dim; package kernels) ----
//
// The text before this one (written by Go for one step) configures it:
//   loom_idx         32- or 64-bit unsigned index type;
//   CS_T, CS_C       storage type and accumulator type (float for f32, f16,
//                    bf16; double; unsigned int for u8, u32; unsigned long
//                    long for i64, so that its adds wrap);
//   CS_WIDEN(x), CS_NARROW(c)  storage → accumulator and back (f16/bf16
//                    rounded once, u8 wrapped, i64 two's complement);
//   CS_N, CS_R, CS_NSEQ  the sequence length (the scanned dim), the stride
//                    between a sequence's elements in the logical order (the
//                    size of the dims after it) and the number of sequences;
//   CS_TR, CS_RPB    threads per sequence (16 … 256, 16 elements each) and
//                    sequences per block (256 / CS_TR) of the tile kernels;
//   CS_TILES         tiles of 4096 per sequence;
//   CS_VIN, CS_VOUT  1 when the input (output) is read (written) with
//                    16-byte vectors: rows contiguous, aligned, CS_N a
//                    multiple of CS_V = 16 / sizeof(CS_T);
//   CS_MODE          which kernel this step uses (CS_M_SEQ, CS_M_TILE,
//                    CS_M_ROWS, CS_M_LOOKBACK: below);
//   at_x(i)          element offset of the input's logical flat index i.
//
// The order of the additions is ir/scan.go's, exactly (the CPU executor's
// loops in exec/cpu/scan.go compute the same bits; kernels.CumsumTwin is
// this file's structure in Go): chunks of 16 elements summed in sequence,
// the chunk totals of a group of 16 in sequence, the group totals of a tile
// of 16 groups in sequence, out = O_k + (e + l0), with O_k the sequential
// sum of the tile totals before tile k. Nothing here depends on the wave
// size: threads meet in shared memory, behind __syncthreads.
//
// Kernels:
//   CS_M_SEQ     one thread per sequence, streaming along it with four
//                running sums; for short sequences, or strided ones
//                (CS_R > 1) with enough of them that neighbouring threads
//                read neighbouring addresses.
//   CS_M_TILE    sequences of at most 4096: a block of 256 threads scans
//                CS_RPB of them at once, each thread a chunk of 16.
//   CS_M_ROWS    longer sequences, many of them: a block scans a whole
//                sequence tile after tile, the carry in a register.
//   CS_M_LOOKBACK longer sequences, few of them: one tile per block, in the
//                order of a global counter (tile-major: the same tile of
//                neighbouring sequences, which may share cache lines, at
//                once); a tile publishes its total,
//                looks back for the nearest tile before it (same sequence)
//                that has published its inclusive prefix, and folds the
//                totals in between forward from it: O_k = P_j + A_{j+1} +
//                … + A_{k−1}, which is the sequential carry's exact bits
//                whichever tiles had finished (decoupled look-back made
//                deterministic). Its init entry clears the flags first.

#define CS_BS 256
#define CS_V (16 / (int)sizeof(CS_T))
#define CS_CHB (16 * (int)sizeof(CS_T)) // bytes of a chunk
#define CS_CHS (CS_CHB + 16)            // a chunk's stride in shared memory: padded against bank conflicts
#define CS_GPR (CS_TR / 16)             // groups per sequence in a tile

// 16 bytes, aligned: one vector load or store (a plain struct, so that it
// can live in shared memory and in a union on every platform).
struct __attribute__((aligned(16))) cs_u4 {
  unsigned int a, b, c, d;
};

// Element (sequence rho, position i) in the logical (row-major) order.
LOOM_DEV loom_idx cs_flat(loom_idx rho, loom_idx i) {
  return (rho / CS_R * CS_N + i) * CS_R + rho % CS_R;
}

#if CS_MODE == CS_M_SEQ
// One thread per sequence. The state: O (the tile carry), s2 (the tile
// prefix of the group totals so far), s1 (the group prefix of the chunk
// totals so far); each chunk's 16 loads are issued before its adds.
LOOM_DEV void cs_seq(const CS_T* __restrict__ x, CS_T* __restrict__ out) {
  for (loom_idx rho = (loom_idx)blockIdx.x * CS_BS + threadIdx.x; rho < CS_NSEQ; rho += (loom_idx)gridDim.x * CS_BS) {
    CS_C o = 0, s1 = 0, s2 = 0;
    for (loom_idx i0 = 0; i0 < CS_N; i0 += 16) {
      const unsigned int j = (unsigned int)((i0 / 16) % 256); // chunk in the tile
      const unsigned int g = j / 16, q = j % 16;
      const bool hasO = i0 >= 4096, hasE = j != 0;
      const CS_C e = g == 0 ? s1 : q == 0 ? s2 : s2 + s1;
      CS_C v[16];
#pragma unroll
      for (int p = 0; p < 16; ++p) v[p] = i0 + p < CS_N ? CS_WIDEN(x[at_x(cs_flat(rho, i0 + p))]) : (CS_C)0;
      CS_C c = v[0];
#pragma unroll
      for (int p = 0; p < 16; ++p) {
        if (i0 + p >= CS_N) break;
        if (p > 0) c = c + v[p];
        CS_C r = hasE ? e + c : c;
        if (hasO) r = o + r;
        out[cs_flat(rho, i0 + p)] = CS_NARROW(r);
      }
      s1 = q == 0 ? c : s1 + c;
      if (q == 15) s2 = g == 0 ? s1 : s2 + s1;
      if (j == 255) o = hasO ? o + s2 : s2;
    }
  }
}
#else
// The tile kernels. Shared memory: the stage (each chunk's 16 stored values,
// chunks CS_CHS bytes apart), the chunk totals (padded: chunk t at
// t + t/16, so the 16 threads of level 1 hit distinct banks), the group
// totals, and the tile's carry.
__shared__ cs_u4 cs_stage[CS_BS * CS_CHS / 16];
__shared__ CS_C cs_tot[CS_BS + CS_BS / 16];
__shared__ CS_C cs_grp[16];
__shared__ CS_C cs_off;

LOOM_DEV CS_T* cs_chunk(unsigned int c) { return (CS_T*)((char*)cs_stage + c * CS_CHS); }

union cs_chunk_u {
  cs_u4 u[CS_CHB / 16];
  CS_T v[16];
};

// cs_load stages positions [i0, i0+m) of sequences [rho0, rho0+nr) (at most
// CS_RPB; m ≤ 16·CS_TR) into their chunks: chunk row·CS_TR + col/16. Rows in
// the logical order (CS_R == 1) are one contiguous range, read in order
// (16-byte vectors when CS_VIN); strided sequences are read sequence-fastest,
// so that neighbouring threads read neighbouring columns.
LOOM_DEV void cs_load(const CS_T* __restrict__ x, loom_idx rho0, loom_idx i0, unsigned int m, unsigned int nr) {
#if CS_R == 1
  const loom_idx base = rho0 * CS_N + i0;
  const unsigned int total = nr * m;
#if CS_VIN
  for (unsigned int e = threadIdx.x * CS_V; e < total; e += CS_BS * CS_V) {
    const unsigned int row = CS_RPB == 1 ? 0u : e / (unsigned int)CS_N, col = CS_RPB == 1 ? e : e % (unsigned int)CS_N;
    *(cs_u4*)(cs_chunk(row * CS_TR + col / 16) + col % 16) = *(const cs_u4*)(x + at_x(base + e));
  }
#else
  for (unsigned int e = threadIdx.x; e < total; e += CS_BS) {
    const unsigned int row = CS_RPB == 1 ? 0u : e / (unsigned int)CS_N, col = CS_RPB == 1 ? e : e % (unsigned int)CS_N;
    cs_chunk(row * CS_TR + col / 16)[col % 16] = x[at_x(base + e)];
  }
#endif
#else
  for (unsigned int e = threadIdx.x; e < CS_RPB * m; e += CS_BS) {
    const unsigned int row = e % CS_RPB, col = e / CS_RPB;
    if (row < nr) cs_chunk(row * CS_TR + col / 16)[col % 16] = x[at_x(cs_flat(rho0 + row, i0 + col))];
  }
#endif
}

// cs_store writes the staged outputs back, as cs_load read them.
LOOM_DEV void cs_store(CS_T* __restrict__ out, loom_idx rho0, loom_idx i0, unsigned int m, unsigned int nr) {
#if CS_R == 1
  const loom_idx base = rho0 * CS_N + i0;
  const unsigned int total = nr * m;
#if CS_VOUT
  for (unsigned int e = threadIdx.x * CS_V; e < total; e += CS_BS * CS_V) {
    const unsigned int row = CS_RPB == 1 ? 0u : e / (unsigned int)CS_N, col = CS_RPB == 1 ? e : e % (unsigned int)CS_N;
    *(cs_u4*)(out + base + e) = *(const cs_u4*)(cs_chunk(row * CS_TR + col / 16) + col % 16);
  }
#else
  for (unsigned int e = threadIdx.x; e < total; e += CS_BS) {
    const unsigned int row = CS_RPB == 1 ? 0u : e / (unsigned int)CS_N, col = CS_RPB == 1 ? e : e % (unsigned int)CS_N;
    out[base + e] = cs_chunk(row * CS_TR + col / 16)[col % 16];
  }
#endif
#else
  for (unsigned int e = threadIdx.x; e < CS_RPB * m; e += CS_BS) {
    const unsigned int row = e % CS_RPB, col = e / CS_RPB;
    if (row < nr) out[cs_flat(rho0 + row, i0 + col)] = cs_chunk(row * CS_TR + col / 16)[col % 16];
  }
#endif
}

#if CS_MODE == CS_M_LOOKBACK
// Tile descriptors in the scratch buffer: flags (0 empty, 1 total
// published, 2 inclusive prefix published) for CS_NSEQ·CS_TILES tiles and
// the tile counter after them, then the totals, then the inclusive
// prefixes. Values are written before their flag, behind a fence; readers
// see the flag, fence, then read the value (volatile: from L2, not a stale
// L1 line).
#define CS_NT ((loom_idx)CS_NSEQ * CS_TILES)
#define CS_VAL_OFF (((CS_NT + 1) * 4 + 15) / 16 * 16)
LOOM_DEV unsigned int* cs_flags(void* s) { return (unsigned int*)s; }
LOOM_DEV CS_C* cs_aggs(void* s) { return (CS_C*)((char*)s + CS_VAL_OFF); }
LOOM_DEV CS_C* cs_incls(void* s) { return cs_aggs(s) + CS_NT; }
LOOM_DEV void cs_publish(void* s, loom_idx tau, CS_C v, unsigned int flag) {
  if (flag == 1) cs_aggs(s)[tau] = v;
  else cs_incls(s)[tau] = v;
  __threadfence();
  *(volatile unsigned int*)(cs_flags(s) + tau) = flag;
}

// cs_lookback returns O_k for tile tau (k > 0 its index in its sequence;
// tiles are numbered tile-major, tau = k·CS_NSEQ + rho, so the tile before
// it in its sequence is tau − CS_NSEQ).
LOOM_DEV CS_C cs_lookback(void* s, loom_idx tau) {
  volatile unsigned int* flags = cs_flags(s);
  loom_idx j = tau - CS_NSEQ;
  CS_C p;
  for (;;) {
    unsigned int f;
    do {
      f = flags[j];
    } while (f == 0);
    __threadfence();
    if (f == 2) {
      p = ((volatile CS_C*)cs_incls(s))[j];
      break;
    }
    j -= CS_NSEQ; // a total only: look further back (tile 0 of a sequence publishes its prefix at once)
  }
  for (loom_idx i = j + CS_NSEQ; i < tau; i += CS_NSEQ) p = p + ((volatile CS_C*)cs_aggs(s))[i];
  return p;
}
#endif

// cs_tile scans one tile: positions [i0, i0+m) of sequences [rho0, rho0+nr)
// (tile k of its sequence; tau its global index in CS_M_LOOKBACK). In
// CS_M_ROWS, carry is thread 0's running O across the sequence's tiles.
LOOM_DEV void cs_tile(const CS_T* __restrict__ x, CS_T* __restrict__ out, void* scratch, loom_idx rho0, loom_idx i0,
                      unsigned int m, unsigned int nr, unsigned int k, loom_idx tau, CS_C& carry) {
  (void)scratch, (void)tau, (void)carry;
  const unsigned int t = threadIdx.x;
  cs_load(x, rho0, i0, m, nr);
  __syncthreads();
  // Level 0: this thread's chunk, in sequence.
  const unsigned int row = t / CS_TR, j = t % CS_TR;
  const unsigned int valid = row < nr ? (m > j * 16 ? min(m - j * 16, 16u) : 0u) : 0u;
  cs_chunk_u ck;
#pragma unroll
  for (int w = 0; w < CS_CHB / 16; ++w) ck.u[w] = ((const cs_u4*)cs_chunk(t))[w];
  CS_C l[16];
  CS_C s = (CS_C)0;
#pragma unroll
  for (int p = 0; p < 16; ++p) {
    const CS_C v = (unsigned int)p < valid ? CS_WIDEN(ck.v[p]) : (CS_C)0;
    s = p == 0 ? v : s + v;
    l[p] = s;
  }
  cs_tot[t + t / 16] = s;
  __syncthreads();
  // Level 1: 16 threads, one per group of 16 chunks.
  if (t < 16) {
    CS_C a = cs_tot[17 * t];
    for (int q = 1; q < 16; ++q) {
      a = a + cs_tot[17 * t + q];
      cs_tot[17 * t + q] = a;
    }
    cs_grp[t] = a;
  }
  __syncthreads();
  // Level 2: one thread per sequence of the block, over its groups; then
  // the tile's carry.
  if (t < CS_RPB) {
    CS_C a = cs_grp[t * CS_GPR];
    for (int g = 1; g < CS_GPR; ++g) {
      a = a + cs_grp[t * CS_GPR + g];
      cs_grp[t * CS_GPR + g] = a;
    }
#if CS_MODE == CS_M_ROWS
    cs_off = carry;
    carry = k == 0 ? a : carry + a;
#elif CS_MODE == CS_M_LOOKBACK
    if (k == 0) {
      cs_publish(scratch, tau, a, 2);
    } else {
      cs_publish(scratch, tau, a, 1);
      const CS_C o = cs_lookback(scratch, tau);
      cs_publish(scratch, tau, o + a, 2);
      cs_off = o;
    }
#endif
  }
  __syncthreads();
  // Offsets: e for this chunk (ir/scan.go step 4), then the tile's O.
  const unsigned int g = j / 16, q = j % 16, grp = t / 16;
  CS_C e = (CS_C)0;
  if (g == 0) {
    if (q > 0) e = cs_tot[(t - 1) + (t - 1) / 16];
  } else {
    e = q == 0 ? cs_grp[grp - 1] : cs_grp[grp - 1] + cs_tot[(t - 1) + (t - 1) / 16];
  }
  const bool hasE = j > 0, hasO = CS_MODE != CS_M_TILE && k > 0;
  const CS_C o = hasO ? cs_off : (CS_C)0;
#pragma unroll
  for (int p = 0; p < 16; ++p) {
    CS_C r = hasE ? e + l[p] : l[p];
    if (hasO) r = o + r;
    ck.v[p] = CS_NARROW(r);
  }
  // Each thread wrote back only its own chunk, which only it has read.
#pragma unroll
  for (int w = 0; w < CS_CHB / 16; ++w) ((cs_u4*)cs_chunk(t))[w] = ck.u[w];
  __syncthreads();
  cs_store(out, rho0, i0, m, nr);
}
#endif

#if CS_MODE == CS_M_SEQ
extern "C" __global__ void __launch_bounds__(CS_BS) LOOM_KERNEL_NAME_seq(const CS_T* __restrict__ x, CS_T* __restrict__ out) { loom_grid_entry();
  cs_seq(x, out);
}
#elif CS_MODE == CS_M_TILE
extern "C" __global__ void __launch_bounds__(CS_BS) LOOM_KERNEL_NAME_tile(const CS_T* __restrict__ x, CS_T* __restrict__ out) { loom_grid_entry();
  CS_C carry = (CS_C)0;
  for (loom_idx b = blockIdx.x; b * CS_RPB < CS_NSEQ; b += gridDim.x) {
    const loom_idx rho0 = b * CS_RPB;
    const unsigned int nr = (unsigned int)min((loom_idx)CS_RPB, (loom_idx)CS_NSEQ - rho0);
    __syncthreads(); // the stage is free again
    cs_tile(x, out, nullptr, rho0, 0, (unsigned int)CS_N, nr, 0, 0, carry);
  }
}
#elif CS_MODE == CS_M_ROWS
extern "C" __global__ void __launch_bounds__(CS_BS) LOOM_KERNEL_NAME_rows(const CS_T* __restrict__ x, CS_T* __restrict__ out) { loom_grid_entry();
  for (loom_idx rho = blockIdx.x; rho < CS_NSEQ; rho += gridDim.x) {
    CS_C carry = (CS_C)0;
    for (unsigned int k = 0; k < CS_TILES; ++k) {
      const loom_idx i0 = (loom_idx)k * 4096;
      __syncthreads(); // the stage is free again
      cs_tile(x, out, nullptr, rho, i0, (unsigned int)min((loom_idx)4096, (loom_idx)CS_N - i0), 1, k, 0, carry);
    }
  }
}
#elif CS_MODE == CS_M_LOOKBACK
extern "C" __global__ void __launch_bounds__(CS_BS) LOOM_KERNEL_NAME_init(unsigned int* scratch) { loom_grid_entry();
  for (loom_idx i = (loom_idx)blockIdx.x * CS_BS + threadIdx.x; i <= CS_NT; i += (loom_idx)gridDim.x * CS_BS) scratch[i] = 0u;
}
__shared__ loom_idx cs_next;
extern "C" __global__ void __launch_bounds__(CS_BS) LOOM_KERNEL_NAME_lookback(const CS_T* __restrict__ x, CS_T* __restrict__ out,
                                                                             unsigned int* scratch) { loom_grid_entry();
  CS_C carry = (CS_C)0;
  for (;;) {
    if (threadIdx.x == 0) cs_next = (loom_idx)atomicAdd(cs_flags(scratch) + CS_NT, 1u);
    __syncthreads();
    const loom_idx tau = cs_next;
    if (tau >= CS_NT) break;
    const loom_idx rho = tau % CS_NSEQ;
    const unsigned int k = (unsigned int)(tau / CS_NSEQ);
    const loom_idx i0 = (loom_idx)k * 4096;
    cs_tile(x, out, scratch, rho, i0, (unsigned int)min((loom_idx)4096, (loom_idx)CS_N - i0), 1, k, tau, carry);
    __syncthreads(); // every thread has read cs_next, and the stage is free again
  }
}
#endif

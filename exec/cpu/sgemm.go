package cpu

import (
	"github.com/loomgraph/loom/blas"
)

// The executor's own float32 GEMM for convolution steps, on CPUs with
// AVX-512: C (+)= op(A)·B with A packed into panels of 8 rows and an 8×32
// micro-kernel (sgemm_amd64.s) that keeps the 8×32 block of C in 16
// registers while it streams a row of B and broadcasts 8 values of A per
// step. The convolutions' B (column tiles, row copies) is read in place: a
// slice of gemmKC rows × 32 columns of it stays in the L1 cache while the
// micro-kernel walks down the row panels of A. Workers take contiguous
// ranges of 32-column blocks (of every batch item).
//
// Why not the host BLAS here: the Debian OpenBLAS runs its Haswell (AVX2)
// kernel on this hardware (OPENBLAS_CORETYPE is pinned there, since older
// builds misdetect newer CPUs), about 200 GFLOP/s on 2 cores; this kernel
// uses the 512-bit FMA units (W12's GEMM, 64×192·192×3136: 267 GFLOP/s on
// one core of this 2-core EPYC against OpenBLAS's 124 on two, same run). Where AVX-512 is missing, or for f64, the
// host BLAS runs the GEMMs. The sums are the same multiply-adds in float32,
// fused (one rounding per step), in k order.

// gemm512 holds one conv step's packing buffers, carved from its scratch.
type gemm512 struct {
	ap    []float32 // packed A: ⌈M/8⌉ panels of [K][8]
	tiles []float32 // per worker: an 8×32 C tile and a gemmKC×32 B panel
	m, k  int       // the largest M and K it was sized for
}

// gemmKC is the depth of one micro-kernel call: the gemmKC×32 slice of B
// it streams (32 KiB) stays in a 48 KiB L1 cache while it is reused for every
// panel of A; deeper products accumulate over several calls.
const gemmKC = 256

// gemmTile is a worker's scratch: an 8×32 C tile and a gemmKC×32 B panel.
const gemmTile = 8*32 + gemmKC*32

// gemm512Floats is the scratch (in floats) for calls up to m × k on
// workers workers.
func gemm512Floats(m, k, workers int) int {
	return (m+7)/8*8*k + workers*gemmTile
}

// newGemm512 sizes the buffers from buf (gemm512Floats long).
func newGemm512(buf []float32, m, k, workers int) *gemm512 {
	n := (m + 7) / 8 * 8 * k
	return &gemm512{ap: buf[:n], tiles: buf[n:], m: m, k: k}
}

// fits reports whether g runs c: no transposed B, alpha 1, beta 0 or 1,
// A shared by the batch, and within the sizes g was made for.
func (g *gemm512) fits(c blas.Call) bool {
	return g != nil && !c.TransB && c.Alpha == 1 && (c.Beta == 0 || c.Beta == 1) &&
		(c.StrideA == 0 || c.Batch <= 1) && c.M <= g.m && c.K <= g.k
}

// run computes c on workers goroutines (c must fit).
func (g *gemm512) run(c blas.Call, a, b, cc []float32, workers int) error {
	if err := c.Check(len(a), len(b), len(cc)); err != nil {
		return err
	}
	if c.M == 0 || c.N == 0 || c.Batch == 0 {
		return nil
	}
	acc := 0
	if c.Beta == 1 {
		acc = 1
	}
	if c.K == 0 {
		if acc == 0 {
			for bi := range c.Batch {
				for i := range c.M {
					clear(cc[bi*c.StrideC+i*c.LDC:][:c.N])
				}
			}
		}
		return nil
	}
	M, N, K := c.M, c.N, c.K
	panels := (M + 7) / 8
	// Pack A: panel p holds rows 8p … 8p+7 as [K][8], zeros past M.
	for p := range panels {
		dst := g.ap[p*8*K : (p+1)*8*K]
		for r := range 8 {
			i := p*8 + r
			if i >= M {
				for kk := range K {
					dst[kk*8+r] = 0
				}
				continue
			}
			for kk := range K {
				if c.TransA {
					dst[kk*8+r] = a[kk*c.LDA+i]
				} else {
					dst[kk*8+r] = a[i*c.LDA+kk]
				}
			}
		}
	}
	blocks := (N + 31) / 32
	items := c.Batch * blocks
	workers = max(1, min(workers, items))
	if float64(M)*float64(N)*float64(K)*float64(c.Batch) < 1<<20 {
		workers = 1
	}
	work := func(w int) {
		tile := g.tiles[w*gemmTile : w*gemmTile+8*32]
		panel := g.tiles[w*gemmTile+8*32 : (w+1)*gemmTile]
		for it := items * w / workers; it < items*(w+1)/workers; it++ {
			bi, jb := it/blocks, it%blocks
			B, C := b[bi*c.StrideB:], cc[bi*c.StrideC:]
			j0 := jb * 32
			cols := min(32, N-j0)
			for k0 := 0; k0 < K; k0 += gemmKC {
				kc := min(gemmKC, K-k0)
				first := acc
				if k0 > 0 {
					first = 1 // later depths add to the earlier ones
				}
				Bk := B[k0*c.LDB:]
				bp, ldb := &Bk[j0], c.LDB
				if cols < 32 { // a copy of the last columns, padded with zeros
					for kk := range kc {
						row := panel[kk*32 : kk*32+32]
						copy(row, Bk[kk*c.LDB+j0:kk*c.LDB+j0+cols])
						clear(row[cols:])
					}
					bp, ldb = &panel[0], 32
				}
				for p := range panels {
					i0 := p * 8
					rows := min(8, M-i0)
					ap := &g.ap[p*8*K+k0*8]
					if rows == 8 && cols == 32 {
						sgemm8x32(kc, ap, bp, ldb, &C[i0*c.LDC+j0], c.LDC, first)
						continue
					}
					clear(tile)
					if first == 1 {
						for r := range rows {
							copy(tile[r*32:r*32+cols], C[(i0+r)*c.LDC+j0:])
						}
					}
					sgemm8x32(kc, ap, bp, ldb, &tile[0], 32, first)
					for r := range rows {
						copy(C[(i0+r)*c.LDC+j0:(i0+r)*c.LDC+j0+cols], tile[r*32:r*32+cols])
					}
				}
			}
		}
	}
	if workers == 1 {
		work(0)
		return nil
	}
	parallel(workers, work)
	return nil
}

package kernels

import (
	_ "embed"
	"fmt"
	"math"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
)

//go:embed gemm.hip
var gemmHIP string

// Portable GEMM launch geometry (gemm.hip): a 128×128 tile of C per block
// of 256 threads; the grid's z walks the batch.
const (
	gemmTile    = 128
	gemmThreads = 256
	maxGridZ    = 65535
)

// GemmSource returns the translation unit of the portable GEMM for t: the
// prelude helpers it uses and gemm.hip, with one entry point per dtype (f32,
// f64, f16, bf16) and transpose pair. One compile serves every call.
func GemmSource(t codegen.Target) string { return codegen.PreludeFor(t, gemmHIP) + gemmHIP }

// GemmEntries lists every entry point of GemmSource.
func GemmEntries() []string {
	var names []string
	for _, d := range []string{"f32", "f64", "f16", "bf16"} {
		for _, tt := range []string{"nn", "nt", "tn", "tt"} {
			names = append(names, "loom_gemm_"+d+"_"+tt)
		}
	}
	return names
}

// GemmLaunch is one launch of the portable GEMM.
type GemmLaunch struct {
	Name        string
	Grid, Block [3]uint32
}

// PlanGemm returns the launch that runs c (row-major, alpha 1, beta 0) on
// dtype d. The kernel's sizes are 32-bit ints (its leading dimensions and
// strides 64-bit): larger M, N or K are rejected, naming the call.
func PlanGemm(d dtype.DType, c blas.Call) (GemmLaunch, error) {
	var dn string
	switch d {
	case dtype.F32:
		dn = "f32"
	case dtype.F64:
		dn = "f64"
	case dtype.F16:
		dn = "f16"
	case dtype.BF16:
		dn = "bf16"
	default:
		return GemmLaunch{}, fmt.Errorf("kernels: gemm on %v (want f32, f64, f16 or bf16)", d)
	}
	if c.Alpha != 1 || c.Beta != 0 {
		return GemmLaunch{}, fmt.Errorf("kernels: %v: the portable gemm computes alpha 1, beta 0 only", c)
	}
	if c.M > math.MaxInt32 || c.N > math.MaxInt32 || c.K > math.MaxInt32 || c.Batch > math.MaxInt32 {
		return GemmLaunch{}, fmt.Errorf("kernels: %v: sizes beyond 2^31-1 are not supported", c)
	}
	tt := map[[2]bool]string{{false, false}: "nn", {false, true}: "nt", {true, false}: "tn", {true, true}: "tt"}[[2]bool{c.TransA, c.TransB}]
	gx := (c.N + gemmTile - 1) / gemmTile
	gy := (c.M + gemmTile - 1) / gemmTile
	if gy > maxGridZ {
		return GemmLaunch{}, fmt.Errorf("kernels: %v: M needs %d row tiles, more than the grid's %d", c, gy, maxGridZ)
	}
	return GemmLaunch{
		Name:  "loom_gemm_" + dn + "_" + tt,
		Grid:  [3]uint32{uint32(max(gx, 1)), uint32(max(gy, 1)), uint32(max(min(c.Batch, maxGridZ), 1))},
		Block: [3]uint32{gemmThreads, 1, 1},
	}, nil
}

// GemmTwin is the plain-Go specification of the portable kernel on float64
// values: each C element is the sum over k in increasing order of
// A[m,k]·B[k,n], accumulated with fused multiply-adds in the accumulator
// precision (round to float32 after every step when f32 is true), then
// stored. The GPU kernel computes exactly this order, so on f32 inputs it
// matches the twin bit for bit.
func GemmTwin(c blas.Call, a, b, out []float64, f32 bool) {
	for bi := range c.Batch {
		for m := range c.M {
			for n := range c.N {
				acc := 0.0
				for k := range c.K {
					ai := bi*c.StrideA + m*c.LDA + k
					if c.TransA {
						ai = bi*c.StrideA + k*c.LDA + m
					}
					bj := bi*c.StrideB + k*c.LDB + n
					if c.TransB {
						bj = bi*c.StrideB + n*c.LDB + k
					}
					acc = math.FMA(a[ai], b[bj], acc)
					if f32 {
						acc = float64(float32(acc))
					}
				}
				out[bi*c.StrideC+m*c.LDC+n] = acc
			}
		}
	}
}

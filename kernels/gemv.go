package kernels

import (
	_ "embed"
	"math"
	"strconv"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
)

//go:embed gemv.hip
var gemvHIP string

// GemvMaxRows is the most rows of A a skinny product (gemv.hip) takes.
const GemvMaxRows = 8

const gemvThreads = 256

// GemvSource returns the translation unit of the skinny products (gemv.hip)
// for t.
func GemvSource(t codegen.Target) string { return codegen.PreludeFor(t, gemvHIP) + gemvHIP }

// GemvEntries lists every entry point of GemvSource.
func GemvEntries() []string {
	var names []string
	for _, d := range []string{"f32", "f16", "bf16"} {
		for _, v := range []string{"v256", "v128", "v64", "v32", "v8", "s256", "s128", "s64", "s32", "s8"} {
			names = append(names, "loom_gemv_"+d+"_"+v, "loom_gemv_"+d+"_"+v+"_m1")
		}
	}
	return names
}

// PlanGemv returns the skinny-product launch for c on dtype d, and false
// when c is not a product it takes: C = A·Bᵀ (TransB, not TransA), 1 ≤ M ≤
// GemvMaxRows, alpha 1, beta 0, f32/f16/bf16, sizes within int32 and a
// batch within the grid. aligned says whether A's and B's addresses, leading
// dimensions and batch strides are multiples of 16 bytes (the vector
// kernels' requirement, with K a multiple of the vector width).
func PlanGemv(d dtype.DType, c blas.Call, aligned bool) (GemmLaunch, bool) {
	var dn string
	vec := 0
	switch d {
	case dtype.F32:
		dn, vec = "f32", 4
	case dtype.F16:
		dn, vec = "f16", 8
	case dtype.BF16:
		dn, vec = "bf16", 8
	default:
		return GemmLaunch{}, false
	}
	if c.TransA || !c.TransB || c.M < 1 || c.M > GemvMaxRows || c.Alpha != 1 || c.Beta != 0 ||
		c.N < 1 || c.K < 1 || c.N > math.MaxInt32 || c.K > math.MaxInt32 || c.Batch < 1 || c.Batch > maxGridZ {
		return GemmLaunch{}, false
	}
	kind := "s"
	if aligned && c.K%vec == 0 {
		kind = "v"
	} else {
		vec = 1
	}
	lanes := GemvLanes(c.N, c.K, vec)
	groups := gemvThreads / lanes
	gx := min((c.N+groups-1)/groups, 1<<20)
	name := "loom_gemv_" + dn + "_" + kind + strconv.Itoa(lanes)
	if c.M == 1 {
		name += "_m1" // one accumulator: fewer registers, more groups resident
	}
	return GemmLaunch{
		Name:  name,
		Grid:  [3]uint32{uint32(gx), uint32(c.Batch), 1},
		Block: [3]uint32{gemvThreads, 1, 1},
	}, true
}

// gemvFill is the number of threads that keeps every multiprocessor of a
// large GPU busy (an H200: 132 × 2048; an MI250X die: 110 × 2560).
const gemvFill = 300_000

// GemvLanes is the group width of a skinny product with n rows of k
// elements, read vec at a time: 8 lanes for rows of at most 16 vectors
// (attention heads); otherwise 32, doubled (up to a block of 256) while
// the groups of all n rows hold fewer than gemvFill threads and each lane
// still has two vectors to load. Measured on an H200 for a 1B llama's
// decode step: its 2048 × 8192 down projection with 32 lanes (a chain of
// 32 loads a lane) read 2 TB/s; few rows need each lane's loads in flight
// together.
func GemvLanes(n, k, vec int) int {
	chunks := (k + vec - 1) / vec
	if chunks <= 16 {
		return 8
	}
	lanes := 32
	for lanes < gemvThreads && n*lanes*2 <= gemvFill && chunks >= 4*lanes {
		lanes *= 2
	}
	return lanes
}

// Gemv is the plain-Go twin of the skinny-product kernels: c = a·bᵀ for one
// batch item (a [m, k] with row stride lda, b [n, k] with row stride ldb, c
// [m, n] with row stride ldc), f32 values in the kernels' order of
// operations for a launch of the given lanes and vector width: each lane
// accumulates its spans' products with fused multiply-adds in k order, then
// the lanes' sums meet in a butterfly (lane l adds lane l^s for s = 1, 2,
// 4, …: within a wave by shuffles, across waves through shared memory in
// the same pairs, so one twin serves every wave size). (Go has no float32 fused
// multiply-add: it is computed in float64 and rounded, which differs from
// the device's in the last bit in rare halfway cases.)
func Gemv(a, b, c []float32, m, n, k, lda, ldb, ldc, lanes, vec int) {
	part := make([]float32, lanes)
	for i := range m {
		for j := range n {
			for l := range lanes {
				s := float32(0)
				for k0 := vec * l; k0 < k; k0 += vec * lanes {
					for v := range vec {
						s = float32(math.FMA(float64(b[j*ldb+k0+v]), float64(a[i*lda+k0+v]), float64(s)))
					}
				}
				part[l] = s
			}
			// Lane l adds lane l^s's value, for s = 1 … lanes/2.
			for s := 1; s < lanes; s <<= 1 {
				next := make([]float32, lanes)
				for l := range lanes {
					next[l] = part[l] + part[l^s]
				}
				copy(part, next)
			}
			c[i*ldc+j] = part[0]
		}
	}
}

package kernels

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/plan"
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

// gemvTypes are the skinny products' element types: storage type, the
// 16-byte and one-element loads, the vector width and the store
// conversion.
var gemvTypes = map[string]struct{ t, ld16, ld1, vec, st string }{
	"f32":  {"float", "loom_ld16_f32", "gemv_ld1_f32", "4", "GEMV_ID"},
	"f16":  {"unsigned short", "loom_ld16_f16", "gemv_ld1_f16", "8", "loom_f32_to_f16"},
	"bf16": {"unsigned short", "loom_ld16_bf16", "gemv_ld1_bf16", "8", "loom_f32_to_bf16"},
}

// GemvFused returns the translation unit and entry name of skinny product
// variant (an entry of GemvEntries, as PlanGemv names it) fused with the
// epilogue of fused matmul kernel k (parts from plan.SplitFused): C's
// elements stored through the epilogue at their flat index in C's shape.
// The entry takes GemvSource's parameters — A, B, C (k's output), sizes,
// leading dimensions, batch strides — then one pointer per operand of k,
// in k.Ins order. C must be contiguous (ldc = N, batch stride M·N); the
// caller checks.
func GemvFused(t codegen.Target, variant string, k *plan.Kernel, parts *plan.FusedParts) (name, code string, err error) {
	rest, ok := strings.CutPrefix(variant, "loom_gemv_")
	if !ok {
		return "", "", fmt.Errorf("kernels: %q is not a skinny product", variant)
	}
	f := strings.Split(rest, "_")
	ty, ok := gemvTypes[f[0]]
	if !ok || len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "m1") || len(f[1]) < 2 {
		return "", "", fmt.Errorf("kernels: %q is not a skinny product", variant)
	}
	lanes, err := strconv.Atoi(f[1][1:])
	if err != nil || (f[1][0] != 'v' && f[1][0] != 's') {
		return "", "", fmt.Errorf("kernels: %q is not a skinny product", variant)
	}
	ld, vec := ty.ld16, ty.vec
	if f[1][0] == 's' {
		ld, vec = ty.ld1, "1"
	}
	maxm := "GEMV_MAXM"
	if len(f) == 3 {
		maxm = "1"
	}
	var b strings.Builder
	b.WriteString("#define GEMV_FUSED 1\n")
	fmt.Fprintf(&b, "#define GEMV_EXTRA %s\n", operandParams(k))
	if parts.Pre != nil {
		// fuse never gives a product a prologue: every group of output rows
		// reads the whole input, so it is computed once and stored.
		return "", "", fmt.Errorf("kernels: %s: a skinny product with a prologue", k.Name)
	}
	b.WriteString("#define GEMV_LDA(LD, x, a, m, lda, k) LD(x, (a) + (m) * (lda) + (k))\n")
	if k.PairEpilogue {
		// A pair epilogue: groups 2g and 2g+1 of a block own rows 2j and
		// 2j+1; lane 0 of each puts its sums in shared memory, and the
		// even group's stores the pair's epilogue at j (or, keeping every
		// element, plan.Kernel.PairKeep, both its outputs at 2j and 2j+1).
		if lanes > gemvThreads/2 || parts.Post == nil {
			return "", "", fmt.Errorf("kernels: %s: a pair epilogue needs two groups a block, not %d lanes", k.Name, lanes)
		}
		fn, err := codegen.ScalarFuncPair(parts.Post, "loom_post", parts.PostPair[0], parts.PostPair[1], true)
		if err != nil {
			return "", "", fmt.Errorf("kernels: %s epilogue: %w", k.Name, err)
		}
		b.WriteString(fn)
		fmt.Fprintf(&b, "#define GEMV_CTYPE(T) %s\n", ctypes[k.Out.DType].storage)
		b.WriteString("#define GEMV_STC(c, m, ldc, n, v) (void)0\n")
		at := "(unsigned long long)m * (unsigned long long)(N / 2) + (unsigned long long)(n / 2)"
		st := "c[at] = loom_post(%[1]s, at);"
		if k.PairKeep {
			at = "(unsigned long long)m * (unsigned long long)N + (unsigned long long)n"
			st = "c[at] = loom_post(%[1]s, at); c[at + 1] = loom_post(%[1]s, at + 1);"
		}
		st = fmt.Sprintf(st, strings.Join(append(partPointers(parts.PostIns), "ST(acc[m])", "ST(gemv_pair[group + 1][m])"), ", "))
		fmt.Fprintf(&b, "#define GEMV_STORE(valid, lane, group, acc, ST, MAXM, LANES) { "+
			"__shared__ float gemv_pair[GEMV_THREADS / (LANES)][MAXM]; "+
			"if (lane == 0) { _Pragma(\"unroll\") for (int m = 0; m < MAXM; ++m) gemv_pair[group][m] = acc[m]; } "+
			"__syncthreads(); "+
			"if (valid && lane == 0 && (group & 1) == 0) { _Pragma(\"unroll\") for (int m = 0; m < MAXM; ++m) { if (m < M) { "+
			"const unsigned long long at = %s; %s } } } "+
			"__syncthreads(); }\n", at, st)
	} else if parts.Post != nil {
		fn, err := codegen.ScalarFunc(parts.Post, "loom_post", parts.PostValue, true)
		if err != nil {
			return "", "", fmt.Errorf("kernels: %s epilogue: %w", k.Name, err)
		}
		b.WriteString(fn)
		fmt.Fprintf(&b, "#define GEMV_CTYPE(T) %s\n", ctypes[k.Out.DType].storage)
		fmt.Fprintf(&b, "#define GEMV_STC(c, m, ldc, n, v) (c)[(m) * (ldc) + (n)] = loom_post(%s)\n",
			strings.Join(append(partPointers(parts.PostIns), "(v)", "((unsigned long long)blockIdx.y * (unsigned long long)M + (unsigned long long)(m)) * (unsigned long long)N + (unsigned long long)(n)"), ", "))
	} else {
		b.WriteString("#define GEMV_CTYPE(T) T\n")
		b.WriteString("#define GEMV_STC(c, m, ldc, n, v) (c)[(m) * (ldc) + (n)] = (v)\n")
	}
	inst := fmt.Sprintf("\nLOOM_GEMV(%s, %s, %s, %s, %d, %s, %s)\n", ty.t, ld, vec, ty.st, lanes, maxm, namePlaceholder)
	if maxm == "1" && f[1][0] == 'v' && gemvWeightAhead(k, parts) {
		inst = fmt.Sprintf("\nLOOM_GEMV_DEFER(%s, %s, gemv_cv16_%s, %s, %s, %d, %s)\n", ty.t, ld, f[0], vec, ty.st, lanes, namePlaceholder)
	}
	body := b.String() + gemvHIP + inst
	name, code = fusedUnit(t, body, variant)
	return name, code, nil
}

// gemvDeferOn: a fused one-row skinny product whose weight (B) the step
// before does not write issues its first loads of B before it waits for
// the kernel ahead (gemv.hip's LOOM_GEMV_DEFER); LOOM_GEMV_DEFER=0 waits
// first, to compare. Measured on an H200 (session 45, TestGPUSpeed1B bf16,
// alternating runs in one call, two rounds): median decode step 838.5 /
// 837.4 µs against 854.2 / 853.6 waiting first (1,143.8 / 1,151.0 tokens/s
// against 1,114.4 / 1,147.0). Two spans a lane (GEMV_PRE); four took
// 930.3 / 930.2 µs and eight 1,565: the loads held across the wait do not
// fit the one-row kernels' 32 registers (ncu: 8 MB of local memory read
// by the gate/up product with four).
var gemvDeferOn = os.Getenv("LOOM_GEMV_DEFER") != "0"

// gemvWeightAhead says whether fused kernel k's core reads its B operand
// from one of k's operands that the step before k does not write
// (plan.Kernel.Ahead): a deferred product may then load it before its wait.
func gemvWeightAhead(k *plan.Kernel, parts *plan.FusedParts) bool {
	if !gemvDeferOn || parts.Core == nil {
		return false
	}
	g, err := plan.Gemm(parts.Core)
	if err != nil || g.B == g.A {
		return false
	}
	for i, op := range parts.Core.Ins {
		if op.Buf != g.B {
			continue
		}
		j := -1
		if i < len(parts.CoreIns) {
			j = parts.CoreIns[i]
		}
		// B must be an operand of k (not a temporary) that the step
		// before does not write.
		if j < 0 || j >= len(k.Ahead) || !k.Ahead[j] {
			return false
		}
	}
	return slices.ContainsFunc(parts.Core.Ins, func(op plan.Operand) bool { return op.Buf == g.B })
}

// GemvPairs reports whether skinny product variant (a PlanGemv name) can
// take a pair epilogue (GemvFused): groups of at most half a block, so
// that the groups owning rows 2j and 2j+1 share one.
func GemvPairs(variant string) bool {
	rest, ok := strings.CutPrefix(variant, "loom_gemv_")
	f := strings.Split(rest, "_")
	if !ok || len(f) < 2 || len(f[1]) < 2 {
		return false
	}
	lanes, err := strconv.Atoi(f[1][1:])
	return err == nil && lanes <= gemvThreads/2
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

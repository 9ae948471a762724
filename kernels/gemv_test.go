package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
)

// TestGemvTwin: the skinny-product twin agrees with a float64 product
// within f32 accumulation error, for every lane count and vector width.
func TestGemvTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, sz := range [][3]int{{1, 7, 2048}, {3, 33, 64}, {8, 5, 129}, {2, 1, 1}} {
		m, n, k := sz[0], sz[1], sz[2]
		a, b := make([]float32, m*k), make([]float32, n*k)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		for _, lv := range [][2]int{{32, 1}, {8, 1}, {32, 4}, {8, 8}, {64, 4}, {128, 8}, {256, 1}} {
			if k%lv[1] != 0 {
				continue
			}
			c := make([]float32, m*n)
			Gemv(a, b, c, m, n, k, k, k, n, lv[0], lv[1])
			for i := range m {
				for j := range n {
					want, mag := 0.0, 0.0
					for q := range k {
						p := float64(a[i*k+q]) * float64(b[j*k+q])
						want += p
						mag += math.Abs(p)
					}
					if d := math.Abs(float64(c[i*n+j]) - want); d > 4e-7*math.Sqrt(float64(k))*mag+1e-30 {
						t.Errorf("m %d n %d k %d lanes %d vec %d: c[%d][%d] = %v, want %v", m, n, k, lv[0], lv[1], i, j, c[i*n+j], want)
					}
				}
			}
		}
	}
}

// TestPlanGemv: which calls the skinny kernels take, and the variant.
func TestPlanGemv(t *testing.T) {
	nt := blas.Call{M: 1, N: 4096, K: 2048, TransB: true, LDA: 2048, LDB: 2048, LDC: 4096, Batch: 1, Alpha: 1}
	for _, c := range []struct {
		d       dtype.DType
		mod     func(*blas.Call)
		aligned bool
		want    string
	}{
		{dtype.BF16, func(*blas.Call) {}, true, "loom_gemv_bf16_v64_m1"},
		{dtype.BF16, func(*blas.Call) {}, false, "loom_gemv_bf16_s64_m1"},
		{dtype.BF16, func(c *blas.Call) { c.M = 2 }, true, "loom_gemv_bf16_v64"},
		{dtype.BF16, func(c *blas.Call) { c.N = 14336; c.K = 4096; c.LDA, c.LDB = 4096, 4096 }, true, "loom_gemv_bf16_v32_m1"},
		{dtype.BF16, func(c *blas.Call) { c.N = 2048; c.K = 8192; c.LDA, c.LDB = 8192, 8192 }, true, "loom_gemv_bf16_v128_m1"},
		{dtype.F32, func(c *blas.Call) { c.N = 64; c.K = 8192; c.LDA, c.LDB = 8192, 8192 }, true, "loom_gemv_f32_v256_m1"},
		{dtype.F32, func(c *blas.Call) { c.K, c.LDA, c.LDB = 64, 64, 64; c.M = 4; c.Batch = 8 }, true, "loom_gemv_f32_v8"},
		{dtype.F16, func(c *blas.Call) { c.K, c.LDA, c.LDB = 64, 64, 64 }, true, "loom_gemv_f16_v8_m1"},
		{dtype.F16, func(c *blas.Call) { c.M = 9 }, true, ""},
		{dtype.F64, func(*blas.Call) {}, true, ""},
		{dtype.F32, func(c *blas.Call) { c.TransB = false }, true, ""},
		{dtype.F32, func(c *blas.Call) { c.Beta = 1 }, true, ""},
	} {
		call := nt
		c.mod(&call)
		l, ok := PlanGemv(c.d, call, c.aligned)
		if got := map[bool]string{true: l.Name, false: ""}[ok]; got != c.want {
			t.Errorf("%v %v aligned %v: %q, want %q", c.d, call, c.aligned, got, c.want)
		}
	}
}

// TestGemvFused: a fused product's source instantiates the one variant
// asked for, with the epilogue at each stored element and every operand of
// the fused kernel after GemvSource's parameters; malformed variant names
// and a prologue are errors; equal kernels give equal names.
func TestGemvFused(t *testing.T) {
	g := graph.New()
	a := g.Input("a", dtype.BF16, 1, 64)
	w := g.Input("w", dtype.BF16, 40, 64)
	r := g.Input("r", dtype.BF16, 1, 40)
	g.Output("y", a.Matmul(w.T()).Add(r).Cast(dtype.F32))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := p.Plan().Steps[0].Kernel
	parts, err := plan.SplitFused(k, 100)
	if err != nil || !k.IsFusedMatmul() {
		t.Fatalf("%s: %v", k.Name, err)
	}
	nv := codegen.Target{Platform: codegen.NVIDIA, Arch: "sm_90"}
	name, code, err := GemvFused(nv, "loom_gemv_bf16_v32_m1", k, parts)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#define GEMV_FUSED 1", "loom_post(", "#define GEMV_CTYPE(T) float", "LOOM_GEMV(unsigned short, loom_ld16_bf16, 8, loom_f32_to_bf16, 32, 1, " + name + ")", ", const unsigned short* __restrict__ in2"} {
		if !strings.Contains(code, want) {
			t.Errorf("fused source lacks %q", want)
		}
	}
	if n := gemvInstances(code); n != 1 || !strings.HasPrefix(name, "loom_gemv_bf16_v32_m1_fused_") {
		t.Errorf("%s: %d entries", name, n)
	}
	if name2, _, _ := GemvFused(nv, "loom_gemv_bf16_v32_m1", k, parts); name2 != name {
		t.Errorf("names %s and %s for one kernel", name, name2)
	}
	for _, bad := range []string{"loom_gemm_bf16_v32", "loom_gemv_i8_v32", "loom_gemv_bf16_x32", "loom_gemv_bf16_v32_m2", "loom_gemv_bf16"} {
		if _, _, err := GemvFused(nv, bad, k, parts); err == nil {
			t.Errorf("variant %q: no error", bad)
		}
	}
	withPre := *parts
	withPre.Pre = parts.Core
	if _, _, err := GemvFused(nv, "loom_gemv_bf16_v32_m1", k, &withPre); err == nil || !strings.Contains(err.Error(), "prologue") {
		t.Errorf("a prologue: %v", err)
	}
	// The weight not written by the step before (plan.Kernel.Ahead): the
	// one-row 16-byte variant loads its first spans before it waits
	// (LOOM_GEMV_DEFER); the 8-row and one-element variants wait first.
	k.Ahead = slices.Repeat([]bool{true}, len(k.Ins))
	for variant, want := range map[string]string{
		"loom_gemv_bf16_v32_m1": "\nLOOM_GEMV_DEFER(unsigned short, loom_ld16_bf16, gemv_cv16_bf16, 8, loom_f32_to_bf16, 32, ",
		"loom_gemv_bf16_v32":    "\nLOOM_GEMV(unsigned short, loom_ld16_bf16, 8, loom_f32_to_bf16, 32, GEMV_MAXM, ",
		"loom_gemv_bf16_s32_m1": "\nLOOM_GEMV(unsigned short, gemv_ld1_bf16, 1, loom_f32_to_bf16, 32, 1, ",
	} {
		name, code, err := GemvFused(nv, variant, k, parts)
		if err != nil || !strings.Contains(code, want+name+")") || gemvInstances(code) != 1 {
			t.Errorf("%s with its weight ahead: %d entries, want %q (%v)", variant, gemvInstances(code), want, err)
		}
	}
}

// gemvInstances counts a fused unit's entries: the lines instantiating
// LOOM_GEMV or LOOM_GEMV_DEFER (gemv.hip defines both macros).
func gemvInstances(code string) int {
	return strings.Count(code, "\nLOOM_GEMV(") + strings.Count(code, "\nLOOM_GEMV_DEFER(")
}

package kernels

// Host emulation of the skinny products (gemv.hip), a decode step's x·Wᵀ
// and q·kᵀ: without a GPU, GemvSource's AMD flavour (gfx90a: waves of 64,
// so groups of 128 and 256 lanes meet across waves through shared memory,
// a path no NVIDIA GPU takes) is compiled with the host C++ compiler behind
// internal/hostemu's shim and run block by block, each block's threads as
// fibers, for the launch PlanGemv gives, and every element compared with
// the float64 product. The conformance suite's matmul cases run the same
// kernels on a device.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/internal/hostemu"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// gemvEmuMain launches one skinny-product entry of the table Go writes in
// (one batch: sa = sb = sc = 0).
const gemvEmuMain = `
struct gargs { const void* a; const void* b; void* c; int M, N, K; };
/*TABLE*/
// usage: prog NAME M N K GRID A B OUTBYTES OUT
int main(int argc, char** argv) {
  if (argc != 10) return 2;
  void (*fn)(void*) = loom_find(table, argv[1])->fn;
  gargs g;
  g.M = atoi(argv[2]); g.N = atoi(argv[3]); g.K = atoi(argv[4]);
  g.a = loom_slurp(argv[6]);
  g.b = loom_slurp(argv[7]);
  const size_t ob = (size_t)atoll(argv[8]);
  g.c = loom_poisoned(ob);
  loom_launch((unsigned int)atoi(argv[5]), GEMV_THREADS, fn, &g);
  loom_write(argv[9], g.c, ob);
  return 0;
}
`

var gemvEmu = newEmuProg()

// gemvEmuSource is GemvSource (AMD) with a wrapper and a table row for
// every GemvEntries entry.
func gemvEmuSource() (string, error) {
	var w strings.Builder
	for _, name := range GemvEntries() {
		ty := gemvTypes[strings.Split(strings.TrimPrefix(name, "loom_gemv_"), "_")[0]].t
		fmt.Fprintf(&w, "static void run_%s(void* p) { gargs* g = (gargs*)p; %s((const %s*)g->a, (const %s*)g->b, (%s*)g->c, g->M, g->N, g->K, g->K, g->K, g->N, 0, 0, 0); }\n",
			name, name, ty, ty, ty)
	}
	w.WriteString(emuTable("table", "run_", GemvEntries()))
	return hostemu.Shim + GemvSource(emuTarget) + hostemu.Helpers + strings.Replace(gemvEmuMain, "/*TABLE*/", w.String(), 1), nil
}

// TestEmulateGemv runs the skinny product C = A·Bᵀ (A [M, K], B [N, K])
// for f32, f16 and bf16 on the launches PlanGemv gives — 1 to 8 rows of A
// (the one-accumulator _m1 form at M = 1), the vector and the scalar
// kernels, groups of 8 to 256 lanes — with fewer blocks than B's rows (the
// grid-stride walk), against the float64 product to within f32 sums and
// C's rounding.
func TestEmulateGemv(t *testing.T) {
	prog := gemvEmu.get(t, gemvEmuSource)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(15, 16))
	for _, d := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		for _, c := range []struct {
			m, n, k int
			aligned bool
		}{{1, 300, 512, true}, {3, 70, 1000, true}, {8, 33, 4096, true}, {1, 20, 7, true}, {2, 9, 100, false},
			{1, 5, 16384, true}, {5, 40, 130, true}, {1, 64, 2048, true}, {4, 16, 8192, true}, {1, 16, 3000, false}, {2, 12, 9000, false},
			{2, 10, 1536, true}, {1, 10, 3072, true}, {1, 7, 300, false}} {
			l, ok := PlanGemv(d, blas.Call{M: c.m, N: c.n, K: c.k, TransB: true, Alpha: 1, Batch: 1}, c.aligned)
			if !ok {
				t.Fatalf("%v %+v: PlanGemv refused", d, c)
			}
			t.Run(fmt.Sprintf("%v/%s/M%dN%dK%d", d, l.Name, c.m, c.n, c.k), func(t *testing.T) {
				mat := func(rows int) (*tensor.Tensor, []float64) {
					v := make([]float64, rows*c.k)
					for i := range v {
						v[i] = r.Float64()*2 - 1
					}
					tt, err := tensor.FromFloat64s(d, v, rows, c.k)
					if err != nil {
						t.Fatal(err)
					}
					return tt, tt.Float64s() // the values as stored
				}
				at, a := mat(c.m)
				bt, b := mat(c.n)
				ap, bp, out := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
				if err := os.WriteFile(ap, at.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(bp, bt.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				grid := min(int(l.Grid[0]), 3)
				ob := c.m * c.n * d.Size()
				if err := hostemu.Run(prog, l.Name, fmt.Sprint(c.m), fmt.Sprint(c.n), fmt.Sprint(c.k), fmt.Sprint(grid), ap, bp, fmt.Sprint(ob), out); err != nil {
					t.Fatal(err)
				}
				raw, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				gv := emuValues(t, d, raw)
				half := map[dtype.DType]float64{dtype.F32: 0, dtype.F16: 1.0 / 2048, dtype.BF16: 1.0 / 256}[d]
				for m := range c.m {
					for n := range c.n {
						var ref, abs float64
						for k := range c.k {
							ref += a[m*c.k+k] * b[n*c.k+k]
							abs += math.Abs(a[m*c.k+k] * b[n*c.k+k])
						}
						tol := 1e-5*abs + half*(math.Abs(ref)+1e-5*abs) + 1e-30
						if y := gv[m*c.n+n]; math.IsNaN(y) || math.Abs(y-ref) > tol {
							t.Fatalf("C[%d][%d] = %v, float64 %v (tolerance %.3g)", m, n, y, ref, tol)
						}
					}
				}
			})
		}
	}
}

// gemvPairMain launches one fused skinny product with a pair epilogue:
// A, B, C, sizes, leading dimensions, batch strides 0, then the fused
// kernel's operands (x and the weight: the epilogue reads only the pairs).
const gemvPairMain = `
struct pargs { const void* a; const void* b; void* c; int M, N, K; };
static void run(void* p) {
  pargs* g = (pargs*)p;
  ENTRY((const T*)g->a, (const T*)g->b, (C*)g->c, g->M, g->N, g->K, g->K, g->K, g->N, 0, 0, 0, (const T*)g->a, (const T*)g->b);
}
// usage: prog M N K GRID A B OUTBYTES OUT
int main(int argc, char** argv) {
  if (argc != 9) return 2;
  pargs g;
  g.M = atoi(argv[1]); g.N = atoi(argv[2]); g.K = atoi(argv[3]);
  g.a = loom_slurp(argv[5]);
  g.b = loom_slurp(argv[6]);
  const size_t ob = (size_t)atoll(argv[7]);
  g.c = loom_poisoned(ob);
  loom_launch((unsigned int)atoi(argv[4]), GEMV_THREADS, run, &g);
  loom_write(argv[8], g.c, ob);
  return 0;
}
`

// swigluKernel compiles silu(y[:, 2j])·y[:, 2j+1] for y = product(g) [m,
// 2n] and returns its one kernel, a product with SwiGLU as its pair
// epilogue, and the kernel's parts.
func swigluKernel(t *testing.T, m, n int, product func(g *graph.Graph) *graph.Tensor) (*plan.Kernel, *plan.FusedParts) {
	t.Helper()
	g := graph.New()
	y := product(g).Reshape(m, n, 2)
	g.Output("y", y.Narrow(2, 0, 1).Reshape(m, n).Silu().Mul(y.Narrow(2, 1, 1).Reshape(m, n)))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := p.Plan().Steps[0].Kernel
	if !k.PairEpilogue || len(p.Plan().Steps) != 1 {
		t.Fatalf("want one fused kernel with a pair epilogue, have %d steps (%s)", len(p.Plan().Steps), k.Name)
	}
	parts, err := plan.SplitFused(k, 100)
	if err != nil {
		t.Fatal(err)
	}
	return k, parts
}

// buildGemvPair builds the emulation of fused kernel k, a skinny product
// of dt with K = kdim and a pair epilogue, launched by main (ENTRY, T and
// C its entry and types; OPERANDS replaced by ops): the program and the
// launch PlanGemv gives.
func buildGemvPair(t *testing.T, dt dtype.DType, kdim int, k *plan.Kernel, parts *plan.FusedParts, main, ops string) (string, GemmLaunch) {
	return buildGemvVariant(t, dt, kdim, k, parts, main, ops, "")
}

// buildGemvVariant is buildGemvPair with the skinny product's variant
// given (a PlanGemv name of the same kind, or "" for PlanGemv's own).
func buildGemvVariant(t *testing.T, dt dtype.DType, kdim int, k *plan.Kernel, parts *plan.FusedParts, main, ops, variant string) (string, GemmLaunch) {
	t.Helper()
	gs, err := plan.Gemm(parts.Core)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := PlanGemv(dt, gs.Call, kdim%8 == 0)
	if variant != "" {
		l.Name = variant
	}
	if !ok || !GemvPairs(l.Name) {
		t.Fatalf("PlanGemv: %s, pairs %v", l.Name, GemvPairs(l.Name))
	}
	name, code, err := GemvFused(emuTarget, l.Name, k, parts)
	if err != nil {
		t.Fatal(err)
	}
	ty := ctypes[dt].storage
	main = strings.NewReplacer("ENTRY", name, "OPERANDS", ops, "(const T*)", "(const "+ty+"*)", "(C*)", "("+ty+"*)").Replace(main)
	prog, err := hostemu.Build("", hostemu.Shim+code+hostemu.Helpers+main)
	if err != nil {
		if strings.HasPrefix(err.Error(), "no host C++ compiler") && os.Getenv("CI") != "true" {
			t.Skipf("host emulation skipped: %v", err)
		}
		t.Fatal(firstLines(err.Error(), 30))
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(prog)) })
	return prog, l
}

// TestEmulateGemvPair runs the skinny product fused with SwiGLU as its pair
// epilogue (GemvFused, plan.Kernel.PairEpilogue: rows 2j and 2j+1 of an
// interleaved gate/up weight, silu(gate)·up stored at j) on AMD's waves of
// 64, with fewer blocks than the rows need (the grid-stride walk, and its
// barriers), against the float64 SwiGLU of the products rounded to the
// dtype as the unfused kernels store them.
func TestEmulateGemvPair(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	dir := t.TempDir()
	for _, c := range []struct {
		d       dtype.DType
		m, k, n int    // n pairs
		ahead   bool   // the weight marked as not written by the step before: the deferred one-row kernel
		variant string // the product's variant ("": PlanGemv's)
	}{{dtype.BF16, 1, 256, 40, false, ""}, {dtype.F32, 3, 512, 24, false, ""}, {dtype.F16, 8, 1024, 9, false, ""}, {dtype.BF16, 1, 100, 13, false, ""},
		// LOOM_GEMV_DEFER: rows longer than the spans loaded before the
		// wait and shorter (spans past K load nothing), and a grid of
		// fewer blocks than the rows need (a group's later rows read B
		// themselves).
		{dtype.BF16, 1, 2048, 40, true, "loom_gemv_bf16_v32_m1"}, {dtype.F32, 1, 1000, 24, true, "loom_gemv_f32_v32_m1"},
		{dtype.F16, 1, 512, 9, true, ""}, {dtype.BF16, 1, 4096, 20, true, "loom_gemv_bf16_v64_m1"}} {
		t.Run(fmt.Sprintf("%v/M%dK%dN%d/ahead=%v/%s", c.d, c.m, c.k, c.n, c.ahead, c.variant), func(t *testing.T) {
			k, parts := swigluKernel(t, c.m, c.n, func(g *graph.Graph) *graph.Tensor {
				return g.Input("x", c.d, c.m, c.k).Matmul(g.Input("w", c.d, 2*c.n, c.k).T())
			})
			if c.ahead {
				for i := range k.Ahead {
					k.Ahead[i] = true
				}
			}
			prog, l := buildGemvVariant(t, c.d, c.k, k, parts, gemvPairMain, "", c.variant)
			if _, code, err := GemvFused(emuTarget, l.Name, k, parts); err != nil || strings.Contains(code, "\nLOOM_GEMV_DEFER(") != c.ahead {
				t.Fatalf("GemvFused(%s) with the weight ahead %v: deferred variant %v (%v)", l.Name, c.ahead, !c.ahead, err)
			}
			vals := func(rows int, scale float64) []float64 {
				v := make([]float64, rows*c.k)
				for i := range v {
					v[i] = (r.Float64()*2 - 1) * scale
				}
				return v
			}
			xv, wv := vals(c.m, 1), vals(2*c.n, 4/math.Sqrt(float64(c.k)))
			ap, bp, out := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
			xb, wb := emuBytes(t, c.d, xv), emuBytes(t, c.d, wv)
			if err := os.WriteFile(ap, xb, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bp, wb, 0o644); err != nil {
				t.Fatal(err)
			}
			xs, ws := emuValues(t, c.d, xb), emuValues(t, c.d, wb)
			grid := min(int(l.Grid[0]), 3)
			ob := c.m * c.n * c.d.Size()
			if err := hostemu.Run(prog, fmt.Sprint(c.m), fmt.Sprint(2*c.n), fmt.Sprint(c.k), fmt.Sprint(grid), ap, bp, fmt.Sprint(ob), out); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			gv := emuValues(t, c.d, raw)
			u := map[dtype.DType]float64{dtype.F32: 1.0 / (1 << 23), dtype.F16: 1.0 / 2048, dtype.BF16: 1.0 / 256}[c.d]
			silu := func(v float64) float64 { return v / (1 + math.Exp(-v)) }
			for m := range c.m {
				for j := range c.n {
					var gate, up, gsum, usum float64
					for k := range c.k {
						gate += xs[m*c.k+k] * ws[2*j*c.k+k]
						up += xs[m*c.k+k] * ws[(2*j+1)*c.k+k]
						gsum += math.Abs(xs[m*c.k+k] * ws[2*j*c.k+k])
						usum += math.Abs(xs[m*c.k+k] * ws[(2*j+1)*c.k+k])
					}
					want := silu(gate) * up
					eg, eu := 1e-5*gsum+u*math.Abs(gate), 1e-5*usum+u*math.Abs(up)
					tol := 1.1*eg*(math.Abs(up)+eu) + math.Abs(silu(gate))*eu + 3*u*(math.Abs(silu(gate)*up)+math.Abs(want)) + 1e-30
					if y := gv[m*c.n+j]; math.IsNaN(y) || math.Abs(y-want) > tol {
						t.Fatalf("y[%d][%d] = %v, want %v ± %.3g (%s)", m, j, y, want, tol, l.Name)
					}
				}
			}
		})
	}
}

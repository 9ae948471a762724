package kernels

// Host emulation of the portable GEMM (gemm.hip), the matmul engine where
// no vendor library is loaded (AMD without rocBLAS among them): its AMD
// source is compiled with the host C++ compiler behind internal/hostemu's
// shim and run block by block (a block's threads as fibers, its tiles'
// barriers as on a GPU), on PlanGemm's launches. f32 and f64 must equal
// the plain-Go twin (GemmTwin) bit for bit — the kernel sums in k order
// with fused multiply-adds, as the host's fma does — and f16 and bf16
// must equal the twin's float32 sums rounded once to their type.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomgraph/loom/blas"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/internal/hostemu"
	"github.com/loomgraph/loom/tensor"
)

// gemmEmuMain launches one GEMM entry (batch 1).
const gemmEmuMain = `
struct gargs { const void* a; const void* b; void* c; int M, N, K; long long lda, ldb, ldc; };
/*TABLE*/
// usage: prog NAME M N K LDA LDB LDC GX GY A B OUTBYTES OUT
int main(int argc, char** argv) {
  if (argc != 14) return 2;
  void (*fn)(void*) = loom_find(table, argv[1])->fn;
  gargs g;
  g.M = atoi(argv[2]); g.N = atoi(argv[3]); g.K = atoi(argv[4]);
  g.lda = atoll(argv[5]); g.ldb = atoll(argv[6]); g.ldc = atoll(argv[7]);
  g.a = loom_slurp(argv[10]);
  g.b = loom_slurp(argv[11]);
  const size_t ob = (size_t)atoll(argv[12]);
  g.c = loom_poisoned(ob);
  loom_launch3((unsigned int)atoi(argv[8]), (unsigned int)atoi(argv[9]), 1, 256, fn, &g);
  loom_write(argv[13], g.c, ob);
  return 0;
}
`

var gemmEmu = newEmuProg()

// gemmEmuSource is GemmSource (AMD) with a wrapper and a table row for
// every entry.
func gemmEmuSource() (string, error) {
	var w strings.Builder
	var names []string
	for _, d := range []struct{ name, t string }{{"f32", "float"}, {"f64", "double"}, {"f16", "gemm_f16"}, {"bf16", "gemm_bf16"}} {
		for _, tt := range []string{"nn", "nt", "tn", "tt"} {
			name := "loom_gemm_" + d.name + "_" + tt
			fmt.Fprintf(&w, "static void run_%s(void* p) { gargs* g = (gargs*)p; %s((const %s*)g->a, (const %s*)g->b, (%s*)g->c, g->M, g->N, g->K, g->lda, g->ldb, g->ldc, 0, 0, 0, 1); }\n",
				name, name, d.t, d.t, d.t)
			names = append(names, name)
		}
	}
	w.WriteString(emuTable("table", "run_", names))
	return hostemu.Shim + GemmSource(emuTarget) + hostemu.Helpers + strings.Replace(gemmEmuMain, "/*TABLE*/", w.String(), 1), nil
}

// TestEmulateGemm runs every dtype and transposition of the portable GEMM
// on one element, on sizes that leave partial tiles in M, N and K, and on
// more than one tile each way, with padded leading dimensions.
func TestEmulateGemm(t *testing.T) {
	prog := gemmEmu.get(t, gemmEmuSource)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(17, 18))
	for _, d := range []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16} {
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, sz := range [][3]int{{1, 1, 1}, {130, 70, 37}, {33, 257, 64}} {
				m, n, k := sz[0], sz[1], sz[2]
				c := blas.Call{M: m, N: n, K: k, TransA: tr[0], TransB: tr[1], Alpha: 1, Batch: 1}
				// Stored shapes and leading dimensions, each padded by 3.
				ar, ac := m, k
				if c.TransA {
					ar, ac = k, m
				}
				br, bc := k, n
				if c.TransB {
					br, bc = n, k
				}
				c.LDA, c.LDB, c.LDC = ac+3, bc+3, n+3
				l, err := PlanGemm(d, c)
				if err != nil {
					t.Fatal(err)
				}
				t.Run(fmt.Sprintf("%s/%dx%dx%d", l.Name, m, n, k), func(t *testing.T) {
					mat := func(rows, lead int) (*tensor.Tensor, []float64) {
						v := make([]float64, rows*lead)
						for i := range v {
							v[i] = r.Float64()*2 - 1
						}
						tt, err := tensor.FromFloat64s(d, v, rows, lead)
						if err != nil {
							t.Fatal(err)
						}
						return tt, tt.Float64s()
					}
					at, a := mat(ar, c.LDA)
					bt, b := mat(br, c.LDB)
					ap, bp, out := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
					if err := os.WriteFile(ap, at.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(bp, bt.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					ob := m * c.LDC * d.Size()
					if err := hostemu.Run(prog, l.Name, fmt.Sprint(m), fmt.Sprint(n), fmt.Sprint(k), fmt.Sprint(c.LDA), fmt.Sprint(c.LDB),
						fmt.Sprint(c.LDC), fmt.Sprint(l.Grid[0]), fmt.Sprint(l.Grid[1]), ap, bp, fmt.Sprint(ob), out); err != nil {
						t.Fatal(err)
					}
					raw, err := os.ReadFile(out)
					if err != nil {
						t.Fatal(err)
					}
					want := make([]float64, m*c.LDC)
					GemmTwin(c, a, b, want, d != dtype.F64)
					// The twin's sums rounded to d once, as the kernel stores them.
					wt, err := tensor.FromFloat64s(d, want, m, c.LDC)
					if err != nil {
						t.Fatal(err)
					}
					gv, wv := emuValues(t, d, raw), wt.Float64s()
					for i := range m {
						for j := range n {
							if g, w := gv[i*c.LDC+j], wv[i*c.LDC+j]; g != w {
								t.Fatalf("C[%d][%d] = %v, the twin's %v", i, j, g, w)
							}
						}
					}
				})
			}
		}
	}
}

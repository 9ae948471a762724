package kernels

// Host emulation of the products whose rotary embedding is their pair
// epilogue keeping every element (plan.Kernel.PairKeep: a llama layer's
// query/key/value product, each head's halves interleaved, rotated as it
// stores): the skinny product (GemvFused) and the one-row quantized
// mat-vec (QMVFFused), on AMD's waves of 64, each pair storing both its
// rotated values. The conformance suite's RopeLinear and QRopeMatmul run
// the same kernels on a device.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/internal/hostemu"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/quant"
)

// ropeKernel compiles the interleaved rotation (RopeIThdHeads) of the
// first r of h heads of d for y = product(g) [m, h·d], tables cos and sin
// [m, 1, d/2], and returns the product's kernel, which must keep pairs,
// and its parts.
func ropeKernel(t *testing.T, dt dtype.DType, m, h, d, r int, product func(g *graph.Graph) *graph.Tensor) (*plan.Kernel, *plan.FusedParts) {
	t.Helper()
	g := graph.New()
	y := product(g).Reshape(m, 1, h, d)
	g.Output("y", y.RopeIThdHeads(g.Input("cos", dt, m, 1, d/2), g.Input("sin", dt, m, 1, d/2), r))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Plan().Steps {
		if k := s.Kernel; k.PairKeep {
			parts, err := plan.SplitFused(k, 100)
			if err != nil {
				t.Fatal(err)
			}
			return k, parts
		}
	}
	t.Fatalf("no kernel keeps pairs in the %d steps", len(p.Plan().Steps))
	return nil, nil
}

// ropeOperands writes the fused kernel's operands to files in dir, in
// k.Ins order, and returns their paths: the graph inputs from named (raw
// bytes), and the two small masks the rotation computes once a run — the
// pair member (u8 [0, 1]) and whether a head rotates (u8 [h], 1 for the
// first r).
func ropeOperands(t *testing.T, dir string, k *plan.Kernel, named map[string][]byte, h, r int) []string {
	t.Helper()
	var paths []string
	for i, o := range k.Ins {
		b, ok := named[o.Buf.Name]
		switch {
		case ok:
		case o.Buf.DType == dtype.U8 && o.Buf.Numel() == 2:
			b = []byte{0, 1}
		case o.Buf.DType == dtype.U8 && o.Buf.Numel() == h:
			b = make([]byte, h)
			for j := range r {
				b[j] = 1
			}
		default:
			t.Fatalf("operand %d: buffer %v", i, o.Buf)
		}
		p := filepath.Join(dir, fmt.Sprintf("e%d", i))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// ropeOperandArgs is the entry's operand arguments, each from the
// program's e[i] as the operand's storage type.
func ropeOperandArgs(k *plan.Kernel, s string) string {
	var b strings.Builder
	for i, o := range k.Ins {
		fmt.Fprintf(&b, ", (const %s*)%s->e[%d]", ctypes[o.Buf.DType].storage, s, i)
	}
	return b.String()
}

// ropeTablesF32 returns random angles' cos and sin, n each, as f32 bytes and
// values.
func ropeTablesF32(t *testing.T, r *rand.Rand, dt dtype.DType, n int) (cb, sb []byte, cv, sv []float64) {
	cv, sv = make([]float64, n), make([]float64, n)
	for i := range cv {
		a := r.Float64() * 2 * math.Pi
		cv[i], sv[i] = math.Cos(a), math.Sin(a)
	}
	cb, sb = emuBytes(t, dt, cv), emuBytes(t, dt, sv)
	return cb, sb, emuValues(t, dt, cb), emuValues(t, dt, sb)
}

// gemvRopeMain launches one fused skinny product (one batch) with the
// fused kernel's operands from files.
const gemvRopeMain = `
struct pargs { const void* a; const void* b; void* c; int M, N, K; const void* e[16]; };
static void run(void* p) {
  pargs* g = (pargs*)p;
  ENTRY((const T*)g->a, (const T*)g->b, (C*)g->c, g->M, g->N, g->K, g->K, g->K, g->N, 0, 0, 0 OPERANDS);
}
// usage: prog M N K GRID A B OUTBYTES OUT E0 E1 …
int main(int argc, char** argv) {
  if (argc < 9 || argc > 9 + 16) return 2;
  pargs g;
  g.M = atoi(argv[1]); g.N = atoi(argv[2]); g.K = atoi(argv[3]);
  g.a = loom_slurp(argv[5]);
  g.b = loom_slurp(argv[6]);
  for (int i = 9; i < argc; ++i) g.e[i - 9] = loom_slurp(argv[i]);
  const size_t ob = (size_t)atoll(argv[7]);
  g.c = loom_poisoned(ob);
  loom_launch((unsigned int)atoi(argv[4]), GEMV_THREADS, run, &g);
  loom_write(argv[8], g.c, ob);
  return 0;
}
`

// TestEmulateGemvRope runs the skinny product with the rotation as its
// pair epilogue on AMD's waves of 64, fewer blocks than the rows need,
// against the float64 rotation of the products rounded to the dtype as
// the unfused kernels store them.
func TestEmulateGemvRope(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	dir := t.TempDir()
	for _, c := range []struct {
		d                dtype.DType
		m, k, h, hd, rot int
	}{{dtype.BF16, 1, 256, 6, 16, 4}, {dtype.F32, 3, 512, 5, 8, 3}, {dtype.F16, 1, 100, 4, 16, 2}} {
		t.Run(fmt.Sprintf("%v/M%dK%dH%dD%dR%d", c.d, c.m, c.k, c.h, c.hd, c.rot), func(t *testing.T) {
			n := c.h * c.hd
			k, parts := ropeKernel(t, c.d, c.m, c.h, c.hd, c.rot, func(g *graph.Graph) *graph.Tensor {
				return g.Input("x", c.d, c.m, c.k).Matmul(g.Input("w", c.d, n, c.k).T())
			})
			prog, l := buildGemvPair(t, c.d, c.k, k, parts, gemvRopeMain, ropeOperandArgs(k, "g"))
			vals := func(rows int, scale float64) []float64 {
				v := make([]float64, rows*c.k)
				for i := range v {
					v[i] = (r.Float64()*2 - 1) * scale
				}
				return v
			}
			xb, wb := emuBytes(t, c.d, vals(c.m, 1)), emuBytes(t, c.d, vals(n, 4/math.Sqrt(float64(c.k))))
			cb, sb, cv, sv := ropeTablesF32(t, r, c.d, c.m*c.hd/2)
			ops := ropeOperands(t, dir, k, map[string][]byte{"x": xb, "w": wb, "cos": cb, "sin": sb}, c.h, c.rot)
			xs, ws := emuValues(t, c.d, xb), emuValues(t, c.d, wb)
			grid := min(int(l.Grid[0]), 3)
			out := filepath.Join(dir, "c")
			args := append([]string{fmt.Sprint(c.m), fmt.Sprint(n), fmt.Sprint(c.k), fmt.Sprint(grid), ops[0], ops[1], fmt.Sprint(c.m * n * c.d.Size()), out}, ops...)
			if k.Ins[0].Buf.Name != "x" || k.Ins[1].Buf.Name != "w" {
				t.Fatalf("operands 0 and 1 are %q and %q, want x and w", k.Ins[0].Buf.Name, k.Ins[1].Buf.Name)
			}
			if err := hostemu.Run(prog, args...); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			gv := emuValues(t, c.d, raw)
			u := map[dtype.DType]float64{dtype.F32: 1.0 / (1 << 23), dtype.F16: 1.0 / 2048, dtype.BF16: 1.0 / 256}[c.d]
			prod := func(i, row int) (v, e float64) {
				var abs float64
				for l := range c.k {
					v += xs[i*c.k+l] * ws[row*c.k+l]
					abs += math.Abs(xs[i*c.k+l] * ws[row*c.k+l])
				}
				return v, 1e-5*abs + u*math.Abs(v)
			}
			for i := range c.m {
				for j := range n / 2 {
					p0, e0 := prod(i, 2*j)
					p1, e1 := prod(i, 2*j+1)
					want, tol := [2]float64{p0, p1}, [2]float64{e0, e1}
					if j/(c.hd/2) < c.rot {
						at := i*c.hd/2 + j%(c.hd/2)
						cs, sn := cv[at], sv[at]
						want = [2]float64{p0*cs - p1*sn, p0*sn + p1*cs}
						for m := range 2 {
							tol[m] = (e0+e1)*(math.Abs(cs)+math.Abs(sn)) + 3*u*(math.Abs(p0)+math.Abs(p1)+math.Abs(want[m])) + 1e-30
						}
					}
					for m := range 2 {
						if y := gv[i*n+2*j+m]; math.IsNaN(y) || math.Abs(y-want[m]) > tol[m] {
							t.Fatalf("y[%d][%d] (head %d) = %v, want %v ± %.3g (%s)", i, 2*j+m, (2*j+m)/c.hd, y, want[m], tol[m], l.Name)
						}
					}
				}
			}
		})
	}
}

// qmvfRopeMain launches one fused one-row mat-vec (f32 activations and
// output): QMVFFused's arguments, then the fused kernel's operands from
// files.
const qmvfRopeMain = `
struct pargs { const unsigned char* w; const float* x; float* y; long long K, N, rb; int path; const void* e[16]; };
static void run(void* p) {
  pargs* a = (pargs*)p;
  ENTRY(a->w, a->x, a->y, a->K, a->N, a->rb, a->path OPERANDS);
}
// usage: prog K N RB PATH GRID W X E0 E1 … OUT
int main(int argc, char** argv) {
  if (argc < 9 || argc > 9 + 16) return 2;
  pargs a;
  a.K = atoll(argv[1]); a.N = atoll(argv[2]); a.rb = atoll(argv[3]); a.path = atoi(argv[4]);
  a.w = (const unsigned char*)loom_slurp(argv[6]);
  a.x = (const float*)loom_slurp(argv[7]);
  for (int i = 8; i < argc - 1; ++i) a.e[i - 8] = loom_slurp(argv[i]);
  a.y = (float*)loom_poisoned(a.N * 4);
  loom_launch((unsigned int)atoi(argv[5]), QMVF_THREADS, run, &a);
  loom_write(argv[argc - 1], a.y, a.N * 4);
  return 0;
}
`

// TestEmulateQMVFRope runs the one-row mat-vec with the rotation as its
// pair epilogue on the chunk path (a lane's two rows) and the unit path (a
// group's step's neighbouring rows, met by a shuffle), f32 activations,
// and compares each output with the float32 rotation of the unfused
// kernel's y on the same path: the same sums, so only the epilogue's
// arithmetic differs (an ulp or two).
func TestEmulateQMVFRope(t *testing.T) {
	plain := quantEmu.get(t, quantEmuSource)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(23, 24))
	for _, c := range []struct {
		f                   quant.Type
		h, hd, rot, k, grid int
	}{{quant.Q4_K, 6, 16, 4, 2048, 2}, {quant.Q8_0, 5, 8, 3, 256, 1}, {quant.Q6_K, 3, 32, 2, 1024, 2}} {
		t.Run(fmt.Sprintf("%v/H%dD%dR%dK%d", c.f, c.h, c.hd, c.rot, c.k), func(t *testing.T) {
			n := c.h * c.hd
			k, parts := ropeKernel(t, dtype.F32, 1, c.h, c.hd, c.rot, func(g *graph.Graph) *graph.Tensor {
				w, err := g.QInput("w", c.f, n, c.k)
				if err != nil {
					t.Fatal(err)
				}
				return g.Input("x", dtype.F32, 1, c.k).QMatmul(w)
			})
			prog := buildQMVFFused(t, c.f, k, parts, qmvfRopeMain, ropeOperandArgs(k, "a"))
			raw, _, _, wp, xp := emuQuantized(t, r, dir, c.f, n, c.k, 1)
			xb, err := os.ReadFile(xp)
			if err != nil {
				t.Fatal(err)
			}
			cb, sb, cv, sv := ropeTablesF32(t, r, dtype.F32, c.hd/2)
			ops := ropeOperands(t, dir, k, map[string][]byte{"x": xb, "w": raw, "cos": cb, "sin": sb}, c.h, c.rot)
			tr, _ := c.f.Traits()
			rb := c.k / tr.Block * tr.Size
			for path := range 2 {
				if path == QMVFUnits && QMVFRowsPerGroup(c.f, int64(c.k), path)%2 != 0 {
					continue // the host runs the parts there
				}
				ys := emuRun(t, plain, n, c.f.String(), fmt.Sprint(c.k), fmt.Sprint(n), fmt.Sprint(rb),
					fmt.Sprint(path), fmt.Sprint(c.grid), wp, xp, filepath.Join(dir, "y"))
				args := append([]string{fmt.Sprint(c.k), fmt.Sprint(n), fmt.Sprint(rb), fmt.Sprint(path), fmt.Sprint(c.grid), wp, xp}, ops...)
				got := emuRun(t, prog, n, append(args, filepath.Join(dir, "yp"))...)
				for j := range n / 2 {
					x0, x1 := float64(ys[2*j]), float64(ys[2*j+1])
					want := [2]float64{x0, x1}
					if j/(c.hd/2) < c.rot {
						cs, sn := cv[j%(c.hd/2)], sv[j%(c.hd/2)]
						want = [2]float64{x0*cs - x1*sn, x0*sn + x1*cs}
					}
					for m := range 2 {
						g := float64(got[2*j+m])
						if d := math.Abs(g - want[m]); math.IsNaN(g) || d > 1e-6*(math.Abs(x0)+math.Abs(x1)) {
							t.Fatalf("path %d, y[%d] (head %d): %v, want %v (pair %v, %v)", path, 2*j+m, (2*j+m)/c.hd, g, want[m], x0, x1)
						}
					}
				}
			}
		})
	}
}

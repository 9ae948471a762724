package kernels

// Host emulation of the quantized kernels: the dequantizations, bit for
// bit against package quant (TestEmulateDequant), and the one-row mat-vec
// (loom_qmvf_*, TestEmulateQMVF). Without a GPU, quant.hip's AMD flavour
// is compiled with the host C++ compiler
// behind internal/hostemu's shim and launched block by block, each block's
// threads as fibers (its barriers and shuffles as on a GPU; dynamic shared
// memory a static array). The chunk path and the unit path (read from
// global memory, AMD's; the staged path is NVIDIA's, cp.async, and falls
// back to it here) must agree row by row to within their different orders
// of float additions, and both must match the float64 product of the
// dequantized weights and x to within the activations' 8-bit rounding.
// This checks the units' decoding, the activations' unit layout, the
// lanes' and rows' index arithmetic (rows of 1 to 56 units, idle lanes,
// rows past N) and the grid-stride walk without a GPU; TestGPUQMVQ8 runs
// the same on a device.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/internal/hostemu"
	"github.com/loomgraph/loom/quant"
)

// quantEmuMain launches one loom_qmvf_*_f32 entry or (first argument
// "dequant") one dequantization entry of the table Go writes in.
const quantEmuMain = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct qargs { const unsigned char* w; const float* x; float* y; long long K, N, rb; int path; };
#define QMVF_EMU(NAME) \
  static void body_##NAME(void* p) { qargs* a = (qargs*)p; NAME(a->w, a->x, a->y, a->K, a->N, a->rb, a->path); }
QMVF_EMU(loom_qmvf_q4_0_f32)
QMVF_EMU(loom_qmvf_q4_k_f32)
QMVF_EMU(loom_qmvf_q8_0_f32)
QMVF_EMU(loom_qmvf_q6_k_f32)
static const struct { const char* name; void (*fn)(void*); } table[] = {
  {"q4_0", body_loom_qmvf_q4_0_f32}, {"q4_k", body_loom_qmvf_q4_k_f32},
  {"q8_0", body_loom_qmvf_q8_0_f32}, {"q6_k", body_loom_qmvf_q6_k_f32},
};
/*DQ_TABLE*/
static void* slurp(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) { perror(path); exit(2); }
  fseek(f, 0, SEEK_END); size_t n = (size_t)ftell(f); fseek(f, 0, SEEK_SET);
  void* p = aligned_alloc(256, (n + 256) / 256 * 256);
  if (n && fread(p, 1, n, f) != n) { perror(path); exit(2); }
  fclose(f);
  return p;
}
// usage: prog dequant NAME COUNT GRID SRC OUTBYTES OUT
static int dequant(char** argv) {
  void (*fn)(void*) = 0;
  for (size_t i = 0; i < sizeof(dq_table) / sizeof(dq_table[0]); ++i)
    if (strcmp(dq_table[i].name, argv[2]) == 0) fn = dq_table[i].fn;
  if (!fn) { fprintf(stderr, "no kernel %s\n", argv[2]); return 2; }
  dqargs a;
  a.n = atoll(argv[3]);
  a.src = (const unsigned char*)slurp(argv[5]);
  const size_t ob = (size_t)atoll(argv[6]);
  a.y = aligned_alloc(256, (ob + 256) / 256 * 256);
  memset(a.y, 0xA5, ob); // poison
  loom_launch((unsigned int)atoi(argv[4]), 256, fn, &a);
  FILE* f = fopen(argv[7], "wb");
  if (!f || fwrite(a.y, 1, ob, f) != ob) { perror(argv[7]); return 2; }
  fclose(f);
  return 0;
}
// usage: prog FORMAT K N ROWBYTES PATH GRID W X OUT
int main(int argc, char** argv) {
  if (argc == 8 && strcmp(argv[1], "dequant") == 0) return dequant(argv);
  if (argc != 10) return 2;
  void (*fn)(void*) = 0;
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i)
    if (strcmp(table[i].name, argv[1]) == 0) fn = table[i].fn;
  if (!fn) { fprintf(stderr, "no format %s\n", argv[1]); return 2; }
  qargs a;
  a.K = atoll(argv[2]); a.N = atoll(argv[3]); a.rb = atoll(argv[4]); a.path = atoi(argv[5]);
  a.w = (const unsigned char*)slurp(argv[7]);
  a.x = (const float*)slurp(argv[8]);
  float* y = (float*)aligned_alloc(256, (a.N * 4 + 256) / 256 * 256);
  memset(y, 0xA5, a.N * 4); // poison: rows the kernel never stores show up
  a.y = y;
  loom_launch((unsigned int)atoi(argv[6]), QMVF_THREADS, fn, &a);
  FILE* f = fopen(argv[9], "wb");
  if (!f || fwrite(y, 4, a.N, f) != (size_t)a.N) { perror(argv[9]); return 2; }
  fclose(f);
  return 0;
}
`

var quantEmu struct {
	once sync.Once
	prog string
	err  error
}

// buildQuantEmulator compiles quant.hip (AMD flavour) with the shim, the
// runtime and quantEmuMain into one host program.
func buildQuantEmulator(dir string) (string, error) {
	cxx, err := hostemu.Compiler()
	if err != nil {
		return "", err
	}
	// Dynamic shared memory: a static array of the most the host asks for.
	body := strings.Replace(quantHIP, "extern __shared__ int qf_shared[];",
		fmt.Sprintf("static int qf_shared[%d];", QMVFMaxShared/4), 1)
	if body == quantHIP {
		return "", fmt.Errorf("quant.hip declares no qf_shared")
	}
	// A wrapper and a table row for every dequantization entry.
	var dq, rows strings.Builder
	dq.WriteString("struct dqargs { const unsigned char* src; void* y; long long n; };\n")
	for _, e := range dequantEntries() {
		ct := map[dtype.DType]string{dtype.F32: "float", dtype.F16: "unsigned short", dtype.BF16: "unsigned short"}[e.out]
		fmt.Fprintf(&dq, "static void dq_%s(void* p) { dqargs* a = (dqargs*)p; %s(a->src, (%s*)a->y, a->n); }\n", e.name, e.name, ct)
		fmt.Fprintf(&rows, "  {\"%s\", dq_%s},\n", e.name, e.name)
	}
	fmt.Fprintf(&dq, "static const struct { const char* name; void (*fn)(void*); } dq_table[] = {\n%s};\n", rows.String())
	src := hostemu.Shim + "void loom_launch(unsigned int grid, unsigned int block, void (*fn)(void*), void* arg);\n" +
		codegen.PreludeFor(codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}, quantHIP) + body +
		strings.Replace(quantEmuMain, "/*DQ_TABLE*/", dq.String(), 1)
	cc, rt := filepath.Join(dir, "qmvf.cc"), filepath.Join(dir, "runtime.cc")
	if err := os.WriteFile(cc, []byte(src), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(rt, []byte(hostemu.Runtime), 0o644); err != nil {
		return "", err
	}
	prog := filepath.Join(dir, "qmvf")
	if err := hostemu.Run(cxx, append(append([]string{}, hostemu.Flags...), "-U_FORTIFY_SOURCE", cc, rt, "-o", prog, "-lm")...); err != nil {
		return "", err
	}
	return prog, nil
}

// dequantEntry is a dequantization kernel: its name, format, output
// dtype and outputs a thread.
type dequantEntry struct {
	name string
	f    quant.Type
	out  dtype.DType
	per  int
}

// dequantEntries lists every dequantization entry of QuantSource: the
// byte-wise kernels (4 outputs a thread), the word-load one (32) and the
// 8-a-thread ones.
func dequantEntries() []dequantEntry {
	var out []dequantEntry
	for _, f := range []quant.Type{quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.Q8_1,
		quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q8_K} {
		for _, d := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			if n, err := DequantEntry(f, d); err == nil {
				out = append(out, dequantEntry{n, f, d, 4})
			}
			if n, ok := DequantWordEntry(f, d); ok {
				out = append(out, dequantEntry{n, f, d, 32})
			}
			if n, ok := Dequant8Entry(f, d); ok {
				out = append(out, dequantEntry{n, f, d, 8})
			}
		}
	}
	return out
}

// quantEmulator builds the emulator once.
func quantEmulator(t *testing.T) string {
	t.Helper()
	quantEmu.once.Do(func() {
		dir, err := os.MkdirTemp("", "loom-qmvf-emu-")
		if err != nil {
			quantEmu.err = err
			return
		}
		quantEmu.prog, quantEmu.err = buildQuantEmulator(dir)
	})
	if quantEmu.err != nil {
		if strings.HasPrefix(quantEmu.err.Error(), "no host C++ compiler") && os.Getenv("CI") != "true" {
			t.Skipf("host emulation skipped: %v", quantEmu.err)
		}
		t.Fatalf("building the host emulator: %v", quantEmu.err)
	}
	return quantEmu.prog
}

func TestEmulateQMVF(t *testing.T) {
	prog := quantEmulator(t)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(7, 8))
	for _, f := range []quant.Type{quant.Q4_0, quant.Q4_K, quant.Q8_0, quant.Q6_K} {
		tr, _ := f.Traits()
		// Rows of 1, 3, 8, 12, 32 and 56 Q4 units (Q8_0: twice as many),
		// K = 800 (no whole unit), grids smaller than the rows' groups.
		for _, c := range []struct{ n, k, grid int }{{41, 256, 1}, {37, 768, 2}, {33, 800, 1}, {300, 2048, 3},
			{70, 3072, 2}, {9, 8192, 2}, {6, 14336, 1}} {
			if c.k%tr.Block != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%v/N%dK%d", f, c.n, c.k), func(t *testing.T) {
				w := make([]float32, c.n*c.k)
				for i := range w {
					w[i] = float32(r.NormFloat64())
				}
				raw := make([]byte, c.n*c.k/tr.Block*tr.Size)
				if err := quant.Quantize(f, w, raw); err != nil {
					t.Fatal(err)
				}
				if err := quant.Dequantize(f, raw, w); err != nil {
					t.Fatal(err)
				}
				x := make([]float32, c.k)
				for i := range x {
					x[i] = float32(r.Float64()*2 - 1)
				}
				wp, xp := filepath.Join(dir, "w"), filepath.Join(dir, "x")
				xb := make([]byte, 4*c.k)
				for i, v := range x {
					binary.LittleEndian.PutUint32(xb[4*i:], math.Float32bits(v))
				}
				if err := os.WriteFile(wp, raw, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(xp, xb, 0o644); err != nil {
					t.Fatal(err)
				}
				rb := c.k / tr.Block * tr.Size
				var got [2][]float32
				for path := range 2 {
					out := filepath.Join(dir, fmt.Sprint("y", path))
					if err := hostemu.Run(prog, f.String(), fmt.Sprint(c.k), fmt.Sprint(c.n), fmt.Sprint(rb),
						fmt.Sprint(path), fmt.Sprint(c.grid), wp, xp, out); err != nil {
						t.Fatal(err)
					}
					b, err := os.ReadFile(out)
					if err != nil {
						t.Fatal(err)
					}
					got[path] = make([]float32, c.n)
					for i := range got[path] {
						got[path][i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
					}
				}
				for n := range c.n {
					var ref, abs, bound float64
					for k0 := 0; k0 < c.k; k0 += 32 {
						var amax, wabs float64
						for k := k0; k < k0+32; k++ {
							wv, xv := float64(w[n*c.k+k]), float64(x[k])
							ref += wv * xv
							abs += math.Abs(wv * xv)
							amax = max(amax, math.Abs(xv))
							wabs += math.Abs(wv)
						}
						// The activations' rounding: half a step a value, times
						// at most |w| plus a Q4 format's offset (8 steps of its
						// scale, bounded by |w|'s block maximum: 2·Σ|w|).
						bound += 2 * wabs * amax / 127 / 2
					}
					tol := bound + 1e-5*abs
					for path, g := range got {
						if v := float64(g[n]); math.IsNaN(v) || math.Abs(v-ref) > tol {
							t.Fatalf("row %d, path %d: %v, float64 product %v (tolerance %.3g)", n, path, g[n], ref, tol)
						}
					}
					if d := math.Abs(float64(got[1][n]) - float64(got[0][n])); d > 1e-5*abs+1e-30 {
						t.Fatalf("row %d: units %v, chunks %v: %.3g apart, over the f32 sums' %.3g", n, got[1][n], got[0][n], d, 1e-5*abs)
					}
				}
			})
		}
	}
}

// TestEmulateDequant runs every dequantization kernel (byte-wise, word-load,
// 8 a thread; to f32, f16 and bf16) on the host emulation and compares its
// output bit for bit with package quant's (the kernels' spec), over valid
// blocks of random values: one block or super-block and 2,048 values (8
// super-blocks, more outputs than one grid-stride pass of a small grid).
func TestEmulateDequant(t *testing.T) {
	prog := quantEmulator(t)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(9, 10))
	for _, e := range dequantEntries() {
		tr, _ := e.f.Traits()
		for _, count := range []int{tr.Block, 2048} {
			if count%e.per != 0 || (e.per == 32 && count%256 != 0) {
				continue // the host takes another kernel there
			}
			v := make([]float32, count)
			for i := range v {
				v[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(8)-4))
			}
			raw := make([]byte, count/tr.Block*tr.Size)
			if err := quant.Quantize(e.f, v, raw); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, count*e.out.Size())
			switch e.out {
			case dtype.F32:
				if err := quant.Dequantize(e.f, raw, v); err != nil {
					t.Fatal(err)
				}
				for i, x := range v {
					binary.LittleEndian.PutUint32(want[4*i:], math.Float32bits(x))
				}
			case dtype.F16:
				h := make([]dtype.Float16, count)
				if err := quant.DequantizeF16(e.f, raw, h); err != nil {
					t.Fatal(err)
				}
				for i, x := range h {
					binary.LittleEndian.PutUint16(want[2*i:], uint16(x))
				}
			case dtype.BF16:
				h := make([]dtype.BFloat16, count)
				if err := quant.DequantizeBF16(e.f, raw, h); err != nil {
					t.Fatal(err)
				}
				for i, x := range h {
					binary.LittleEndian.PutUint16(want[2*i:], uint16(x))
				}
			}
			src, out := filepath.Join(dir, "src"), filepath.Join(dir, "out")
			if err := os.WriteFile(src, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			grid, _ := FlatLaunch(count / e.per)
			g := min(int(grid[0]), 2) // fewer blocks than outputs: the grid-stride loop
			if err := hostemu.Run(prog, "dequant", e.name, fmt.Sprint(count), fmt.Sprint(g), src, fmt.Sprint(len(want)), out); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < len(want); i += e.out.Size() {
				if string(got[i:i+e.out.Size()]) != string(want[i:i+e.out.Size()]) {
					t.Fatalf("%s, %d values: value %d is %x, package quant's %x", e.name, count, i/e.out.Size(), got[i:i+e.out.Size()], want[i:i+e.out.Size()])
				}
			}
		}
	}
}

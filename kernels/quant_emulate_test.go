package kernels

// Host emulation of the quantized kernels: the dequantizations, bit for
// bit against package quant (TestEmulateDequant), the one-row mat-vec
// (loom_qmvf_*, TestEmulateQMVF), AMD's product of 2–8 rows (loom_q8x_*
// then loom_qmvq_*, TestEmulateQMVQ) and the mat-vecs that multiply in
// f32 (loom_qmv_*, loom_qmvw_*: TestEmulateQMVF32). Without a GPU, quant.hip's AMD
// flavour is compiled with the host C++ compiler behind internal/hostemu's
// shim and launched block by block, each block's threads as fibers (its
// barriers and shuffles as on a GPU; dynamic shared memory a static
// array). Each product must match a float64 model of the 8-bit arithmetic
// (q8Model: the activations rounded as the kernels round them, the offsets
// the kernels take from float sums) to within float32 sums: the one-row
// kernel's chunk path, its unit path (read from global memory, AMD's; the
// staged path is NVIDIA's, cp.async, and falls back to it here), and the
// 2–8-row product, whose rows must also match the one-row kernel's. This
// checks the formats' decoding, the activations' layouts, the lanes' and
// rows' index arithmetic (rows of 1 to 56 units, idle lanes, rows past N)
// and the grid-stride walks without a GPU; TestGPUQMVQ8 runs the same
// kernels on a device.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/internal/hostemu"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// quantEmuMain launches one loom_qmvf_* entry (f32 or bf16), or (first argument
// "dequant", "qmvq" or "f32") a dequantization, the 2–8-row product or an
// f32 mat-vec (the first and last from tables Go writes in).
const quantEmuMain = `
struct qargs { const unsigned char* w; const void* x; void* y; long long K, N, rb; int path; };
#define QMVF_EMU(NAME, T) \
  static void body_##NAME(void* p) { qargs* a = (qargs*)p; NAME(a->w, (const T*)a->x, (T*)a->y, a->K, a->N, a->rb, a->path); }
QMVF_EMU(loom_qmvf_q4_0_f32, float)
QMVF_EMU(loom_qmvf_q4_k_f32, float)
QMVF_EMU(loom_qmvf_q8_0_f32, float)
QMVF_EMU(loom_qmvf_q6_k_f32, float)
QMVF_EMU(loom_qmvf_q5_k_f32, float)
QMVF_EMU(loom_qmvf_q2_k_f32, float)
QMVF_EMU(loom_qmvf_q3_k_f32, float)
QMVF_EMU(loom_qmvf_q4_0_bf16, unsigned short)
QMVF_EMU(loom_qmvf_q4_k_bf16, unsigned short)
QMVF_EMU(loom_qmvf_q8_0_bf16, unsigned short)
QMVF_EMU(loom_qmvf_q6_k_bf16, unsigned short)
QMVF_EMU(loom_qmvf_q5_k_bf16, unsigned short)
QMVF_EMU(loom_qmvf_q2_k_bf16, unsigned short)
QMVF_EMU(loom_qmvf_q3_k_bf16, unsigned short)
QMVF_EMU(loom_qmvf_q4_1_f32, float)
QMVF_EMU(loom_qmvf_q5_0_f32, float)
QMVF_EMU(loom_qmvf_q5_1_f32, float)
QMVF_EMU(loom_qmvf_q4_1_bf16, unsigned short)
QMVF_EMU(loom_qmvf_q5_0_bf16, unsigned short)
QMVF_EMU(loom_qmvf_q5_1_bf16, unsigned short)
// The format (and "_bf16" for bf16 activations and output), the entry and
// the element size.
static const struct { const char* name; void (*fn)(void*); int size; } table[] = {
  {"q4_0", body_loom_qmvf_q4_0_f32, 4}, {"q4_k", body_loom_qmvf_q4_k_f32, 4},
  {"q8_0", body_loom_qmvf_q8_0_f32, 4}, {"q6_k", body_loom_qmvf_q6_k_f32, 4},
  {"q4_0_bf16", body_loom_qmvf_q4_0_bf16, 2}, {"q4_k_bf16", body_loom_qmvf_q4_k_bf16, 2},
  {"q8_0_bf16", body_loom_qmvf_q8_0_bf16, 2}, {"q6_k_bf16", body_loom_qmvf_q6_k_bf16, 2},
  {"q5_k", body_loom_qmvf_q5_k_f32, 4}, {"q5_k_bf16", body_loom_qmvf_q5_k_bf16, 2},
  {"q2_k", body_loom_qmvf_q2_k_f32, 4}, {"q2_k_bf16", body_loom_qmvf_q2_k_bf16, 2},
  {"q3_k", body_loom_qmvf_q3_k_f32, 4}, {"q3_k_bf16", body_loom_qmvf_q3_k_bf16, 2},
  {"q4_1", body_loom_qmvf_q4_1_f32, 4}, {"q4_1_bf16", body_loom_qmvf_q4_1_bf16, 2},
  {"q5_0", body_loom_qmvf_q5_0_f32, 4}, {"q5_0_bf16", body_loom_qmvf_q5_0_bf16, 2},
  {"q5_1", body_loom_qmvf_q5_1_f32, 4}, {"q5_1_bf16", body_loom_qmvf_q5_1_bf16, 2},
};
/*DQ_TABLE*/
// usage: prog dequant NAME COUNT GRID SRC OUTBYTES OUT
static int dequant(char** argv) {
  void (*fn)(void*) = loom_find(dq_table, argv[2])->fn;
  dqargs a;
  a.n = atoll(argv[3]);
  a.src = (const unsigned char*)loom_slurp(argv[5]);
  const size_t ob = (size_t)atoll(argv[6]);
  a.y = loom_poisoned(ob);
  loom_launch((unsigned int)atoi(argv[4]), 256, fn, &a);
  loom_write(argv[7], a.y, ob);
  return 0;
}
// The two-launch product of 2–8 rows (AMD's decode path): loom_q8x_f32,
// then loom_qmvq_<format>_f32.
struct q8xargs { const float* x; int* qa; float* dx; float* sx; long long n4; };
static void body_q8x(void* p) { q8xargs* a = (q8xargs*)p; loom_q8x_f32(a->x, a->qa, a->dx, a->sx, a->n4); }
struct qmvqargs { const unsigned char* w; const int* qa; const float* dx; const float* sx; float* y; int M; long long K, N, rb; };
#define QMVQ_EMU(NAME) \
  static void body_##NAME(void* p) { qmvqargs* a = (qmvqargs*)p; NAME(a->w, a->qa, a->dx, a->sx, a->y, a->M, a->K, a->N, a->rb, a->N); }
QMVQ_EMU(loom_qmvq_q4_0_f32)
QMVQ_EMU(loom_qmvq_q4_k_f32)
QMVQ_EMU(loom_qmvq_q8_0_f32)
QMVQ_EMU(loom_qmvq_q6_k_f32)
QMVQ_EMU(loom_qmvq_q5_k_f32)
QMVQ_EMU(loom_qmvq_q2_k_f32)
QMVQ_EMU(loom_qmvq_q3_k_f32)
QMVQ_EMU(loom_qmvq_q4_1_f32)
QMVQ_EMU(loom_qmvq_q5_0_f32)
QMVQ_EMU(loom_qmvq_q5_1_f32)
static const struct { const char* name; void (*fn)(void*); } qmvq_table[] = {
  {"q4_0", body_loom_qmvq_q4_0_f32}, {"q4_k", body_loom_qmvq_q4_k_f32},
  {"q8_0", body_loom_qmvq_q8_0_f32}, {"q6_k", body_loom_qmvq_q6_k_f32},
  {"q5_k", body_loom_qmvq_q5_k_f32}, {"q2_k", body_loom_qmvq_q2_k_f32},
  {"q3_k", body_loom_qmvq_q3_k_f32}, {"q4_1", body_loom_qmvq_q4_1_f32},
  {"q5_0", body_loom_qmvq_q5_0_f32}, {"q5_1", body_loom_qmvq_q5_1_f32},
};
// usage: prog qmvq FORMAT M K N ROWBYTES GRID W X OUT
static int qmvq(char** argv) {
  void (*fn)(void*) = loom_find(qmvq_table, argv[2])->fn;
  const int M = atoi(argv[3]);
  const long long K = atoll(argv[4]), N = atoll(argv[5]), n = M * K;
  // Scratch as the host lays it out (Q8XBytes): qa, then dx, then sx.
  unsigned char* scratch = (unsigned char*)loom_poisoned(n + n / 32 * 4 + n / 16 * 4);
  q8xargs qx = {(const float*)loom_slurp(argv[9]), (int*)scratch, (float*)(scratch + n), (float*)(scratch + n + n / 32 * 4), n / 4};
  loom_launch((unsigned int)((n / 4 + 255) / 256), 256, body_q8x, &qx);
  float* y = (float*)loom_poisoned(M * N * 4);
  qmvqargs a = {(const unsigned char*)loom_slurp(argv[8]), qx.qa, qx.dx, qx.sx, y, M, K, N, atoll(argv[6])};
  loom_launch((unsigned int)atoi(argv[7]), QMVW_THREADS, fn, &a);
  loom_write(argv[10], y, M * N * 4);
  return 0;
}
// usage: prog f32 NAME M K N ROWBYTES GRID THREADS W X OUT: a mat-vec that
// multiplies in f32 (loom_qmv_*, loom_qmvw_*) from the table Go writes in.
static int f32mv(char** argv) {
  void (*fn)(void*) = loom_find(mv_table, argv[2])->fn;
  mvargs a;
  a.M = atoi(argv[3]); a.K = atoll(argv[4]); a.N = atoll(argv[5]); a.rb = atoll(argv[6]);
  a.w = (const unsigned char*)loom_slurp(argv[9]);
  a.x = (const float*)loom_slurp(argv[10]);
  float* y = (float*)loom_poisoned(a.M * a.N * 4);
  a.y = y;
  loom_launch((unsigned int)atoi(argv[7]), (unsigned int)atoi(argv[8]), fn, &a);
  loom_write(argv[11], y, a.M * a.N * 4);
  return 0;
}
// usage: prog FORMAT K N ROWBYTES PATH GRID W X OUT
int main(int argc, char** argv) {
  if (argc == 8 && strcmp(argv[1], "dequant") == 0) return dequant(argv);
  if (argc == 12 && strcmp(argv[1], "f32") == 0) return f32mv(argv);
  if (argc == 11 && strcmp(argv[1], "qmvq") == 0) return qmvq(argv);
  if (argc != 10) return 2;
  const auto* e = loom_find(table, argv[1]);
  void (*fn)(void*) = e->fn;
  const int size = e->size;
  qargs a;
  a.K = atoll(argv[2]); a.N = atoll(argv[3]); a.rb = atoll(argv[4]); a.path = atoi(argv[5]);
  a.w = (const unsigned char*)loom_slurp(argv[7]);
  a.x = loom_slurp(argv[8]);
  void* y = loom_poisoned(a.N * size);
  a.y = y;
  loom_launch((unsigned int)atoi(argv[6]), QMVF_THREADS, fn, &a);
  loom_write(argv[9], y, a.N * size);
  return 0;
}
`

var quantEmu = newEmuProg()

// quantEmuSource is QuantSource (AMD) with quantEmuMain and the tables of
// dequantization and f32 mat-vec entries it launches.
func quantEmuSource() (string, error) {
	// Dynamic shared memory: a static array of the most the host asks for.
	body := strings.Replace(quantHIP, "extern __shared__ int qf_shared[];",
		fmt.Sprintf("static int qf_shared[%d];", QMVFMaxShared/4), 1)
	if body == quantHIP {
		return "", fmt.Errorf("quant.hip declares no qf_shared")
	}
	// A wrapper and a table row for every dequantization entry.
	var dq strings.Builder
	var names []string
	dq.WriteString("struct dqargs { const unsigned char* src; void* y; long long n; };\n")
	for _, e := range dequantEntries() {
		ct := map[dtype.DType]string{dtype.F32: "float", dtype.F16: "unsigned short", dtype.BF16: "unsigned short"}[e.out]
		fmt.Fprintf(&dq, "static void dq_%s(void* p) { dqargs* a = (dqargs*)p; %s(a->src, (%s*)a->y, a->n); }\n", e.name, e.name, ct)
		names = append(names, e.name)
	}
	dq.WriteString(emuTable("dq_table", "dq_", names))
	// And for every mat-vec that multiplies in f32, with f32 activations:
	// the byte-wise kernels take (w, x, y, M, K, N, ldx, ldy), the
	// word-load ones rowBytes before ldx.
	names = nil
	dq.WriteString("struct mvargs { const unsigned char* w; const float* x; float* y; int M; long long K, N, rb; };\n")
	for _, e := range f32MatVecs() {
		call := "a->w, a->x, a->y, a->M, a->K, a->N, a->K, a->N"
		if e.word {
			call = "a->w, a->x, a->y, a->M, a->K, a->N, a->rb, a->K, a->N"
		}
		fmt.Fprintf(&dq, "static void mv_%s(void* p) { mvargs* a = (mvargs*)p; %s(%s); }\n", e.name, e.name, call)
		names = append(names, e.name)
	}
	dq.WriteString(emuTable("mv_table", "mv_", names))
	return hostemu.Shim + codegen.PreludeFor(emuTarget, quantHIP) + body +
		hostemu.Helpers + strings.Replace(quantEmuMain, "/*DQ_TABLE*/", dq.String(), 1), nil
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

// f32MatVec is a mat-vec kernel that multiplies dequantized weights with
// the activations in f32: the byte-wise kernel of each format (QMVEntry)
// or a word-load one (QMVWordEntry, its MAXM and one-row forms).
type f32MatVec struct {
	name string
	f    quant.Type
	word bool
	m1   bool // the one-row form: M = 1 only
}

// f32MatVecs lists them for f32 activations.
func f32MatVecs() []f32MatVec {
	var out []f32MatVec
	for _, f := range []quant.Type{quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0,
		quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		if n, err := QMVEntry(f, dtype.F32); err == nil {
			out = append(out, f32MatVec{name: n, f: f})
		}
		for _, m := range []int{QMVMaxRows, 1} {
			if n, _, ok := QMVWordEntry(f, dtype.F32, m); ok {
				out = append(out, f32MatVec{name: n, f: f, word: true, m1: m == 1})
			}
		}
	}
	return out
}

// emuQuantized returns random weights [n, k] quantized to f (the raw rows
// and their dequantized values) and a random x [m, k], the raw rows and x
// written to the files wp and xp in dir.
func emuQuantized(t *testing.T, r *rand.Rand, dir string, f quant.Type, n, k, m int) (raw []byte, w, x []float32, wp, xp string) {
	t.Helper()
	tr, _ := f.Traits()
	w = make([]float32, n*k)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	raw = make([]byte, n*k/tr.Block*tr.Size)
	if err := quant.Quantize(f, w, raw); err != nil {
		t.Fatal(err)
	}
	if err := quant.Dequantize(f, raw, w); err != nil {
		t.Fatal(err)
	}
	x = make([]float32, m*k)
	xb := make([]byte, 4*m*k)
	for i := range x {
		x[i] = float32(r.Float64()*2 - 1)
		binary.LittleEndian.PutUint32(xb[4*i:], math.Float32bits(x[i]))
	}
	wp, xp = filepath.Join(dir, "w"), filepath.Join(dir, "x")
	if err := os.WriteFile(wp, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(xp, xb, 0o644); err != nil {
		t.Fatal(err)
	}
	return raw, w, x, wp, xp
}

// emuRun runs the emulator with args, its last the output file, and
// returns the output as float32s.
func emuRun(t *testing.T, prog string, count int, args ...string) []float32 {
	t.Helper()
	if err := hostemu.Run(prog, args...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(args[len(args)-1])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, count)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// q8Model is what the 8-bit mat-vecs compute for one weight row (raw, in
// format f; w its dequantized values) and x, in float64: Σ w·x̃, x̃ the
// activations rounded to 8 bits a 32-value block as the kernels round them
// (step d = amax/127, codes rint(x·127/amax), in float32), plus, for Q4_0,
// Q2_K, Q4_K and Q5_K, the offset the kernels take from x's float sums
// rather than x̃'s: 8d·Σ(x̃ − x) a Q4_0 block, dmin·m·Σ(x̃ − x) a Q4_K or
// Q5_K sub-block or a Q2_K group of 16. It also returns the scale of the
// kernels' float32 rounding: Σ|w·x| and the offsets' Σ|c·x|.
func q8Model(f quant.Type, raw []byte, w, x []float32) (model, scale float64) {
	tr, _ := f.Traits()
	for b0 := 0; b0 < len(x); b0 += 32 {
		var amax float32
		for _, v := range x[b0 : b0+32] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d, id := amax/127, float32(0)
		if amax > 0 {
			id = 127 / amax
		}
		// The offset's coefficient c for this block of 32 values (c16:
		// for each group of 16).
		var c float64
		var c16 [2]float64
		switch blk := raw[b0/tr.Block*tr.Size:]; f {
		case quant.Q2_K:
			for h := range c16 {
				g := b0%256/16 + h // scale byte
				c16[h] = float64(f16(blk[82:])) * float64(blk[g]>>4)
			}
		case quant.Q4_0:
			c = 8 * float64(f16(blk))
		case quant.Q4_1, quant.Q5_1: // d·q + m: the offset −m
			c = -float64(f16(blk[2:]))
		case quant.Q4_K, quant.Q5_K:
			j := b0 % 256 / 32 // sub-block
			sc := blk[4:16]
			var m byte
			if j < 4 {
				m = sc[j+4] & 63
			} else {
				m = sc[j+4]>>4 | (sc[j]>>6)<<4
			}
			c = float64(f16(blk[2:])) * float64(m)
		}
		for i := b0; i < b0+32; i++ {
			ci := c + c16[(i-b0)/16]
			xt := float64(d) * math.RoundToEven(float64(x[i]*id))
			model += float64(w[i])*xt + ci*(xt-float64(x[i]))
			scale += math.Abs(float64(w[i])*float64(x[i])) + math.Abs(ci*float64(x[i]))
		}
	}
	return model, scale
}

// f16 is the little-endian f16 at b as float32.
func f16(b []byte) float32 {
	h := uint32(b[0]) | uint32(b[1])<<8
	sign, exp, man := h>>15, h>>10&31, h&1023
	switch {
	case exp == 0:
		v := float32(man) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 31:
		return math.Float32frombits(sign<<31 | 0xff<<23 | man<<13)
	}
	return math.Float32frombits(sign<<31 | (exp+112)<<23 | man<<13)
}

// checkProduct checks y, a kernel's product of weight row raw (format f,
// dequantized w) and x, against q8Model to within float32 sums (1e-6 of
// their scale: the kernels came within 2e-8; one activation code off by
// one moves a row by ~1e-4), and returns that scale.
func checkProduct(t *testing.T, what string, f quant.Type, y float32, raw []byte, w, x []float32) float64 {
	t.Helper()
	model, scale := q8Model(f, raw, w, x)
	if v := float64(y); math.IsNaN(v) || math.Abs(v-model) > 1e-6*scale {
		t.Fatalf("%s: %v, the 8-bit model's %v (tolerance %.3g)", what, y, model, 1e-6*scale)
	}
	return scale
}

// TestEmulateQMVF runs the one-row mat-vec on its chunk path and its unit
// path (read from global memory) for every format with f32 and with bf16
// activations and output, against q8Model.
func TestEmulateQMVF(t *testing.T) {
	prog := quantEmu.get(t, quantEmuSource)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(7, 8))
	for _, f := range []quant.Type{quant.Q4_0, quant.Q4_K, quant.Q8_0, quant.Q6_K, quant.Q5_K, quant.Q2_K, quant.Q3_K, quant.Q4_1, quant.Q5_0, quant.Q5_1} {
		tr, _ := f.Traits()
		// Rows of 1, 3, 8, 12, 32 and 56 Q4 units (Q8_0: twice as many),
		// K = 800 (no whole unit), grids smaller than the rows' groups.
		// K = 576 and 896 (SmolLM's and Qwen2-0.5B's rows: Q5_0 in their
		// k-quant files).
		for _, c := range []struct{ n, k, grid int }{{41, 256, 1}, {37, 768, 2}, {33, 800, 1}, {300, 2048, 3},
			{70, 3072, 2}, {9, 8192, 2}, {6, 14336, 1}, {23, 576, 2}, {19, 896, 1}} {
			if c.k%tr.Block != 0 || c.k%QMVFChunk(f) != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%v/N%dK%d", f, c.n, c.k), func(t *testing.T) {
				raw, w, x, wp, xp := emuQuantized(t, r, dir, f, c.n, c.k, 1)
				rb := c.k / tr.Block * tr.Size
				var got [2][]float32
				for path := range 2 {
					got[path] = emuRun(t, prog, c.n, f.String(), fmt.Sprint(c.k), fmt.Sprint(c.n), fmt.Sprint(rb),
						fmt.Sprint(path), fmt.Sprint(c.grid), wp, xp, filepath.Join(dir, "y"))
				}
				for n := range c.n {
					for path := range got {
						checkProduct(t, fmt.Sprintf("row %d, path %d", n, path), f, got[path][n], raw[n*rb:(n+1)*rb], w[n*c.k:(n+1)*c.k], x)
					}
				}
				// bf16 activations and output (a decode step's): x as
				// stored in bf16, the sum rounded once to bf16.
				xh := make([]byte, 2*c.k)
				x16 := make([]float32, c.k)
				for i, v := range x {
					h := dtype.ToBF16(v)
					binary.LittleEndian.PutUint16(xh[2*i:], uint16(h))
					x16[i] = h.Float32()
				}
				xhp := filepath.Join(dir, "xh")
				if err := os.WriteFile(xhp, xh, 0o644); err != nil {
					t.Fatal(err)
				}
				for path := range 2 {
					out := filepath.Join(dir, "yh")
					if err := hostemu.Run(prog, f.String()+"_bf16", fmt.Sprint(c.k), fmt.Sprint(c.n), fmt.Sprint(rb),
						fmt.Sprint(path), fmt.Sprint(c.grid), wp, xhp, out); err != nil {
						t.Fatal(err)
					}
					b, err := os.ReadFile(out)
					if err != nil {
						t.Fatal(err)
					}
					for n := range c.n {
						y := float64(dtype.BFloat16(binary.LittleEndian.Uint16(b[2*n:])).Float32())
						model, scale := q8Model(f, raw[n*rb:(n+1)*rb], w[n*c.k:(n+1)*c.k], x16)
						if tol := 1e-6*scale + math.Abs(model)/256; math.IsNaN(y) || math.Abs(y-model) > tol {
							t.Fatalf("bf16, row %d, path %d: %v, the 8-bit model's %v (tolerance %.3g)", n, path, y, model, tol)
						}
					}
				}
			})
		}
	}
}

// TestEmulateQMVQ runs the decode product of 2–8 activation rows as AMD
// runs it (loom_q8x_f32, then the dp4a mat-vec loom_qmvq_*_f32; NVIDIA
// sm_80+ takes the tensor cores instead) and compares every row with the
// one-row kernel's product of that row (the same 8-bit activations, other
// sums' order) and with the float64 product.
func TestEmulateQMVQ(t *testing.T) {
	prog := quantEmu.get(t, quantEmuSource)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(11, 12))
	for _, f := range []quant.Type{quant.Q4_0, quant.Q4_K, quant.Q8_0, quant.Q6_K, quant.Q5_K, quant.Q2_K, quant.Q3_K, quant.Q4_1, quant.Q5_0, quant.Q5_1} {
		tr, _ := f.Traits()
		for _, c := range []struct{ m, n, k, grid int }{{2, 37, 768, 2}, {5, 33, 800, 1}, {8, 64, 2048, 3}, {3, 9, 4096, 1}} {
			if c.k%tr.Block != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%v/M%dN%dK%d", f, c.m, c.n, c.k), func(t *testing.T) {
				raw, w, x, wp, xp := emuQuantized(t, r, dir, f, c.n, c.k, c.m)
				rb := c.k / tr.Block * tr.Size
				got := emuRun(t, prog, c.m*c.n, "qmvq", f.String(), fmt.Sprint(c.m), fmt.Sprint(c.k), fmt.Sprint(c.n),
					fmt.Sprint(rb), fmt.Sprint(c.grid), wp, xp, filepath.Join(dir, "y"))
				for m := range c.m {
					xm := x[m*c.k : (m+1)*c.k]
					xb := make([]byte, 4*c.k)
					for i, v := range xm {
						binary.LittleEndian.PutUint32(xb[4*i:], math.Float32bits(v))
					}
					xmp := filepath.Join(dir, "xm")
					if err := os.WriteFile(xmp, xb, 0o644); err != nil {
						t.Fatal(err)
					}
					// The one-row kernel where K allows it (Q5_0's chunk of
					// two blocks wants K a multiple of 64; the host sends
					// other rows to this kernel).
					var one []float32
					if c.k%QMVFChunk(f) == 0 {
						one = emuRun(t, prog, c.n, f.String(), fmt.Sprint(c.k), fmt.Sprint(c.n), fmt.Sprint(rb),
							"0", "1", wp, xmp, filepath.Join(dir, "y1"))
					}
					for n := range c.n {
						y := got[m*c.n+n]
						scale := checkProduct(t, fmt.Sprintf("row %d of x, row %d of W", m, n), f, y, raw[n*rb:(n+1)*rb], w[n*c.k:(n+1)*c.k], xm)
						if one == nil {
							continue
						}
						if d := math.Abs(float64(y) - float64(one[n])); d > 2e-6*scale {
							t.Fatalf("row %d of x, row %d of W: %v, the one-row kernel's %v: %.3g apart", m, n, y, one[n], d)
						}
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
	prog := quantEmu.get(t, quantEmuSource)
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
			err := quant.Quantize(e.f, v, raw)
			if err != nil {
				t.Fatal(err)
			}
			if (e.f == quant.Q4_K || e.f == quant.Q5_K) && count > 1024 {
				specialQ4KHeaders(raw, tr.Size)
			}
			if (e.f == quant.Q4_0 || e.f == quant.Q8_0 || e.f == quant.Q6_K) && count > 1024 {
				specialScales(e.f, raw)
			}
			var spec *tensor.Tensor
			switch e.out {
			case dtype.F32:
				err = quant.Dequantize(e.f, raw, v)
				spec, _ = tensor.New(v, count)
			case dtype.F16:
				h := make([]dtype.Float16, count)
				err = quant.DequantizeF16(e.f, raw, h)
				spec, _ = tensor.New(h, count)
			case dtype.BF16:
				h := make([]dtype.BFloat16, count)
				err = quant.DequantizeBF16(e.f, raw, h)
				spec, _ = tensor.New(h, count)
			}
			if err != nil {
				t.Fatal(err)
			}
			want := spec.Bytes()
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
			gv, wv := emuValues(t, e.out, got), emuValues(t, e.out, want)
			for i := 0; i < len(want); i += e.out.Size() {
				if k := i / e.out.Size(); math.IsNaN(gv[k]) && math.IsNaN(wv[k]) {
					continue // NaN's sign and payload are not kept (package quant's follows the host's arithmetic)
				}
				if string(got[i:i+e.out.Size()]) != string(want[i:i+e.out.Size()]) {
					t.Fatalf("%s, %d values: value %d is %x, package quant's %x", e.name, count, i/e.out.Size(), got[i:i+e.out.Size()], want[i:i+e.out.Size()])
				}
			}
		}
	}
}

// TestEmulateQMVF32 runs the mat-vecs that multiply dequantized weights
// with the activations in f32 — the byte-wise kernel of every format (what
// the GPU takes for Q4_1, Q5_0, Q5_1, Q2_K, Q3_K and Q5_K, and with
// LOOM_QMV=bytewise) and the word-load ones (LOOM_QMV=word) — for 1, 3 and
// 8 activation rows against the float64 product of the dequantized
// weights, to within float32 sums.
func TestEmulateQMVF32(t *testing.T) {
	prog := quantEmu.get(t, quantEmuSource)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(13, 14))
	for _, e := range f32MatVecs() {
		tr, _ := e.f.Traits()
		threads, rowsPerBlock := QMVThreads, QMVRowsPerBlock
		if e.word {
			threads, rowsPerBlock = QMVWordThreads, QMVWordRowsPerBlock
		}
		for _, c := range []struct{ m, n, k int }{{1, 37, 768}, {3, 33, 512}, {8, 20, 1024}} {
			if c.k%tr.Block != 0 || e.m1 && c.m != 1 {
				continue
			}
			t.Run(fmt.Sprintf("%s/M%dN%dK%d", e.name, c.m, c.n, c.k), func(t *testing.T) {
				_, w, x, wp, xp := emuQuantized(t, r, dir, e.f, c.n, c.k, c.m)
				// A grid smaller than the rows: the blocks walk them.
				grid := min((c.n+rowsPerBlock-1)/rowsPerBlock, 2)
				got := emuRun(t, prog, c.m*c.n, "f32", e.name, fmt.Sprint(c.m), fmt.Sprint(c.k), fmt.Sprint(c.n),
					fmt.Sprint(c.k/tr.Block*tr.Size), fmt.Sprint(grid), fmt.Sprint(threads), wp, xp, filepath.Join(dir, "y"))
				for m := range c.m {
					for n := range c.n {
						var ref, abs float64
						for k := range c.k {
							v := float64(w[n*c.k+k]) * float64(x[m*c.k+k])
							ref += v
							abs += math.Abs(v)
						}
						if y := float64(got[m*c.n+n]); math.IsNaN(y) || math.Abs(y-ref) > 1e-5*abs {
							t.Fatalf("row %d of x, row %d of W: %v, float64 %v (tolerance %.3g)", m, n, y, ref, 1e-5*abs)
						}
					}
				}
			})
		}
	}
}

// specialScales gives blocks 1–4 of Q4_0, Q8_0 or Q6_K data (format f) a
// d that is not finite or zero (+Inf, NaN, −Inf, −0; for Q6_K super-block
// 1 a zero scale too, so Inf·0), so that outputs are ±Inf, NaN and ±0: the
// word-load kernels' narrowing without a NaN test must not take them, and
// zeros keep their signs. d is a block's first 2 bytes, a Q6_K
// super-block's last 2.
func specialScales(f quant.Type, raw []byte) {
	tr, _ := f.Traits()
	at := 0
	if f == quant.Q6_K {
		at = tr.Size - 2
	}
	for i, d := range []uint16{0x7C00, 0x7E00, 0xFC00, 0x8000} {
		binary.LittleEndian.PutUint16(raw[(i+1)*tr.Size+at:], d)
	}
	if f == quant.Q6_K {
		raw[tr.Size+192] = 0
	}
}

// specialQ4KHeaders gives super-blocks 1–4 of Q4_K or Q5_K data raw (super-blocks of size bytes) d and dmin
// that are not finite (+Inf d; NaN dmin; −Inf d with +Inf dmin; zero d
// with +Inf dmin), so that outputs are ±Inf and NaN (Inf·0, Inf − Inf):
// the word-load kernel's narrowing without a NaN test must not take
// them.
func specialQ4KHeaders(raw []byte, size int) {
	for i, h := range [][2]uint16{{0x7C00, 0}, {0, 0x7E00}, {0xFC00, 0x7C00}, {0, 0x7C00}} {
		b := raw[(i+1)*size:]
		if h[0] != 0 || i == 3 {
			binary.LittleEndian.PutUint16(b[0:], h[0])
		}
		if h[1] != 0 {
			binary.LittleEndian.PutUint16(b[2:], h[1])
		}
	}
}

// qmvfPairMain launches one fused one-row mat-vec with a pair epilogue
// (f32 activations and output): QMVFFused's arguments, then the fused
// kernel's operands, named by the graph's inputs.
const qmvfPairMain = `
struct pargs { const unsigned char* w; const float* x; float* y; long long K, N, rb; int path; };
static void run(void* p) {
  pargs* a = (pargs*)p;
  ENTRY(a->w, a->x, a->y, a->K, a->N, a->rb, a->path OPERANDS);
}
// usage: prog K N RB PATH GRID W X OUT
int main(int argc, char** argv) {
  if (argc != 9) return 2;
  pargs a;
  a.K = atoll(argv[1]); a.N = atoll(argv[2]); a.rb = atoll(argv[3]); a.path = atoi(argv[4]);
  a.w = (const unsigned char*)loom_slurp(argv[6]);
  a.x = (const float*)loom_slurp(argv[7]);
  a.y = (float*)loom_poisoned(a.N / 2 * 4);
  loom_launch((unsigned int)atoi(argv[5]), QMVF_THREADS, run, &a);
  loom_write(argv[8], a.y, a.N / 2 * 4);
  return 0;
}
`

// buildQMVFFused builds the emulation of fused kernel k, a one-row
// mat-vec of format f with f32 activations, launched by main (ENTRY its
// entry, OPERANDS replaced by ops), its dynamic shared memory a static
// array of the most the kernels take.
func buildQMVFFused(t *testing.T, f quant.Type, k *plan.Kernel, parts *plan.FusedParts, main, ops string) string {
	t.Helper()
	entry, ok := QMVFEntry(f, dtype.F32)
	if !ok {
		t.Fatalf("no one-row mat-vec for %v", f)
	}
	name, code, err := QMVFFused(emuTarget, entry, k, parts)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(code, "extern __shared__ int qf_shared[];", fmt.Sprintf("static int qf_shared[%d];", QMVFMaxShared/4), 1)
	if body == code {
		t.Fatal("the fused unit declares no qf_shared")
	}
	main = strings.NewReplacer("ENTRY", name, "OPERANDS", ops).Replace(main)
	prog, err := hostemu.Build("", hostemu.Shim+body+hostemu.Helpers+main)
	if err != nil {
		t.Fatal(firstLines(err.Error(), 30))
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(prog)) })
	return prog
}

// TestEmulateQMVFPair runs the one-row mat-vec fused with SwiGLU as its
// pair epilogue (QMVFFused, plan.Kernel.PairEpilogue: rows 2j and 2j+1 of
// an interleaved gate/up weight, silu(gate)·up stored at j) on the chunk
// path (a lane's two rows) and the unit path (a group's step's
// neighbouring rows, met by a shuffle), f32 activations, and compares each
// output with silu(y[2j])·y[2j+1] of the unfused kernel's y on the same
// path: the same sums, so only the epilogue's float32 arithmetic differs.
func TestEmulateQMVFPair(t *testing.T) { emulateQMVFPair(t, false) }

// TestEmulateQMVFDefer runs the same with the weight marked as not written
// by the step before (plan.Kernel.Ahead), so that the kernel takes
// quant.hip's DEFER (the staged path's first stage, or the chunk path's
// first chunk a lane, issued before the grid-dependency wait, which the
// emulation does not model): this checks that the variant computes the
// same.
func TestEmulateQMVFDefer(t *testing.T) { emulateQMVFPair(t, true) }

// emulateQMVFPair runs the pair cases with the deferred variant on or off
// (LOOM_QMV_DEFER's default aside).
func emulateQMVFPair(t *testing.T, deferLoads bool) {
	defer func(on bool) { qmvDeferOn = on }(qmvDeferOn)
	qmvDeferOn = deferLoads
	plain := quantEmu.get(t, quantEmuSource)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(19, 20))
	for _, c := range []struct {
		f          quant.Type
		n, k, grid int // n pairs
	}{{quant.Q4_K, 20, 2048, 2}, {quant.Q4_0, 9, 256, 1}, {quant.Q8_0, 33, 2048, 3}, {quant.Q6_K, 12, 1024, 2}, {quant.Q5_K, 10, 2048, 2},
		{quant.Q2_K, 7, 768, 1}, {quant.Q3_K, 9, 1280, 2},
		// The formats with chunks only: rows of fewer chunks than a group
		// has lanes (SmolLM's 576 values: 9 Q5_0 chunks), of more, and
		// groups taking several row pairs each.
		{quant.Q5_0, 21, 576, 2}, {quant.Q4_1, 17, 1536, 1}, {quant.Q5_1, 40, 320, 2}} {
		t.Run(fmt.Sprintf("%v/N%dK%d", c.f, c.n, c.k), func(t *testing.T) {
			k, parts := swigluKernel(t, 1, c.n, func(g *graph.Graph) *graph.Tensor {
				w, err := g.QInput("w", c.f, 2*c.n, c.k)
				if err != nil {
					t.Fatal(err)
				}
				return g.Input("x", dtype.F32, 1, c.k).QMatmul(w)
			})
			var ops strings.Builder
			for _, o := range k.Ins {
				fmt.Fprintf(&ops, ", (const %s*)a->%s", ctypes[o.Buf.DType].storage, o.Buf.Name)
			}
			if deferLoads {
				k.Ahead[parts.CoreIns[1]] = true
				entry, _ := QMVFEntry(c.f, dtype.F32)
				if _, code, err := QMVFFused(emuTarget, entry, k, parts); err != nil || !strings.Contains(code, "{ loom_grid_defer();") || !strings.Contains(code, ", true, true>(w, x,") {
					t.Fatalf("the deferred variant was not rendered (%v)", err)
				}
			}
			prog := buildQMVFFused(t, c.f, k, parts, qmvfPairMain, ops.String())
			_, _, _, wp, xp := emuQuantized(t, r, dir, c.f, 2*c.n, c.k, 1)
			tr, _ := c.f.Traits()
			rb := c.k / tr.Block * tr.Size
			for path := range 2 {
				if path == QMVFUnits && QMVFRowsPerGroup(c.f, int64(c.k), path)%2 != 0 {
					continue // the host runs the parts there
				}
				ys := emuRun(t, plain, 2*c.n, c.f.String(), fmt.Sprint(c.k), fmt.Sprint(2*c.n), fmt.Sprint(rb),
					fmt.Sprint(path), fmt.Sprint(c.grid), wp, xp, filepath.Join(dir, "y"))
				got := emuRun(t, prog, c.n, fmt.Sprint(c.k), fmt.Sprint(2*c.n), fmt.Sprint(rb),
					fmt.Sprint(path), fmt.Sprint(c.grid), wp, xp, filepath.Join(dir, "yp"))
				for j := range c.n {
					gate, up := float64(ys[2*j]), float64(ys[2*j+1])
					want := gate / (1 + math.Exp(-gate)) * up
					if d := math.Abs(float64(got[j]) - want); math.IsNaN(float64(got[j])) || d > 1e-6*math.Abs(want)+1e-7*(math.Abs(gate)+1)*math.Abs(up) {
						t.Fatalf("path %d, pair %d: %v, silu(%v)·%v = %v", path, j, got[j], gate, up, want)
					}
				}
			}
		})
	}
}

const dequantFusedMain = `
struct dargs { const unsigned char* w; const float* s; float* y; long long n; };
static void run(void* p) {
  dargs* a = (dargs*)p;
  ENTRY(a->w, a->y, a->n OPERANDS);
}
// usage: prog N GRID W S OUT
int main(int argc, char** argv) {
  if (argc != 6) return 2;
  dargs a;
  a.n = atoll(argv[1]);
  a.w = (const unsigned char*)loom_slurp(argv[3]);
  a.s = (const float*)loom_slurp(argv[4]);
  a.y = (float*)loom_poisoned(a.n * 4);
  loom_launch((unsigned int)atoi(argv[2]), 256, run, &a);
  loom_write(argv[5], a.y, a.n * 4);
  return 0;
}
`

// TestEmulateDequantFused runs the dequantization fused with the chain
// after it (DequantFused: y = dequantize(w)·s, s broadcast over the rows,
// f32) on the host emulation, with one block and several (grid-stride),
// and compares every output with package quant's value times s in
// float32, bit for bit: the fused kernel stores what loom_dequant_* and
// the multiply's kernel would, with the byte-wise body and, where the
// format has one, the word-load body.
func TestEmulateDequantFused(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(63, 64))
	for _, c := range []struct {
		f          quant.Type
		rows, grid int
	}{{quant.Q4_0, 3, 1}, {quant.Q4_K, 5, 2}, {quant.Q6_K, 4, 3}, {quant.Q8_0, 6, 1}, {quant.Q2_K, 2, 2}, {quant.Q5_1, 3, 2}} {
		for _, word := range []bool{false, true} {
			if word && !DequantFusedWord(c.f, dtype.F32) {
				continue
			}
			t.Run(fmt.Sprintf("%v/word=%v", c.f, word), func(t *testing.T) {
				const k = 512
				g := graph.New()
				q, err := g.QInput("w", c.f, c.rows, k)
				if err != nil {
					t.Fatal(err)
				}
				g.Output("y", q.Dequantize(dtype.F32).Mul(g.Input("s", dtype.F32, k)))
				p, err := g.Compile(graph.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Plan().Steps) != 1 || !p.Plan().Steps[0].Kernel.IsFusedDequant() {
					t.Fatalf("want one fused dequantization, have %d steps", len(p.Plan().Steps))
				}
				kn := p.Plan().Steps[0].Kernel
				parts, err := plan.SplitFused(kn, 100)
				if err != nil {
					t.Fatal(err)
				}
				name, code, err := DequantFused(emuTarget, kn, parts, word)
				if err != nil {
					t.Fatal(err)
				}
				var ops strings.Builder
				for _, o := range kn.Ins {
					fmt.Fprintf(&ops, ", (const %s*)a->%s", ctypes[o.Buf.DType].storage, o.Buf.Name)
				}
				body := strings.Replace(code, "extern __shared__ int qf_shared[];", fmt.Sprintf("static int qf_shared[%d];", QMVFMaxShared/4), 1)
				main := strings.NewReplacer("ENTRY", name, "OPERANDS", ops.String()).Replace(dequantFusedMain)
				prog, err := hostemu.Build("", hostemu.Shim+body+hostemu.Helpers+main)
				if err != nil {
					t.Fatal(firstLines(err.Error(), 30))
				}
				t.Cleanup(func() { os.RemoveAll(filepath.Dir(prog)) })
				_, w, _, wp, _ := emuQuantized(t, r, dir, c.f, c.rows, k, 1)
				s := make([]float32, k)
				sb := make([]byte, 4*k)
				for i := range s {
					s[i] = float32(r.Float64()*2 - 1)
					binary.LittleEndian.PutUint32(sb[4*i:], math.Float32bits(s[i]))
				}
				sp := filepath.Join(dir, "s")
				if err := os.WriteFile(sp, sb, 0o644); err != nil {
					t.Fatal(err)
				}
				got := emuRun(t, prog, c.rows*k, fmt.Sprint(c.rows*k), fmt.Sprint(c.grid), wp, sp, filepath.Join(dir, "y"))
				for i, v := range got {
					if want := w[i] * s[i%k]; math.Float32bits(v) != math.Float32bits(want) {
						t.Fatalf("y[%d] = %v, want %v·%v = %v", i, v, w[i], s[i%k], want)
					}
				}
			})
		}
	}
}

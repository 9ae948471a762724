package kernels

// Host emulation of the portable convolution's kernels (conv.hip), the conv
// path where no vendor library is loaded: im2col for 2-, 4- and 8-byte
// elements, bit for bit against Im2col, and col2im for f32 and f64 against
// Col2im (f64 bit for bit: the kernel adds the taps in the twin's order),
// on random geometries (strides, padding, dilation, groups) in image and
// pixel chunks; and the batched transposes of the channels-last library
// path (transpose.hip), against Transpose. Compiled from AMD's source with
// the host C++ compiler behind internal/hostemu's shim.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/internal/hostemu"
)

// convEmuMain launches im2col (18 integer arguments after the two
// pointers) or col2im (17) from the command line.
const convEmuMain = `
struct cargs { const void* in; void* out; long long v[18]; const char* name; };
#define V(i) a->v[i]
static void run(void* p) {
  cargs* a = (cargs*)p;
  const char* n = a->name;
  if (!strcmp(n, "loom_im2col_b2"))
    loom_im2col_b2((const unsigned short*)a->in, (unsigned short*)a->out, V(0), V(1), V(2), V(3), V(4), (int)V(5), (int)V(6), (int)V(7), (int)V(8), (int)V(9), (int)V(10), (int)V(11), (int)V(12), V(13), V(14), V(15));
  else if (!strcmp(n, "loom_im2col_b4"))
    loom_im2col_b4((const unsigned int*)a->in, (unsigned int*)a->out, V(0), V(1), V(2), V(3), V(4), (int)V(5), (int)V(6), (int)V(7), (int)V(8), (int)V(9), (int)V(10), (int)V(11), (int)V(12), V(13), V(14), V(15));
  else if (!strcmp(n, "loom_im2col_b8"))
    loom_im2col_b8((const unsigned long long*)a->in, (unsigned long long*)a->out, V(0), V(1), V(2), V(3), V(4), (int)V(5), (int)V(6), (int)V(7), (int)V(8), (int)V(9), (int)V(10), (int)V(11), (int)V(12), V(13), V(14), V(15));
  else if (!strcmp(n, "loom_col2im_f32"))
    loom_col2im_f32((const float*)a->in, (float*)a->out, V(0), V(1), V(2), V(3), V(4), (int)V(5), (int)V(6), (int)V(7), (int)V(8), (int)V(9), (int)V(10), (int)V(11), (int)V(12), V(13), V(14));
  else if (!strcmp(n, "loom_col2im_f64"))
    loom_col2im_f64((const double*)a->in, (double*)a->out, V(0), V(1), V(2), V(3), V(4), (int)V(5), (int)V(6), (int)V(7), (int)V(8), (int)V(9), (int)V(10), (int)V(11), (int)V(12), V(13), V(14));
  else { fprintf(stderr, "no kernel %s\n", n); exit(2); }
}
struct targs { const unsigned short* in; unsigned short* out; long long B; int R, C, tilesC, rev; const char* name; };
static void run_transpose(void* p) {
  targs* a = (targs*)p;
  const char* n = a->name;
  if (!strcmp(n, "loom_transpose_b2")) loom_transpose_b2(a->in, a->out, a->B, a->R, a->C, a->tilesC, a->rev);
  else if (!strcmp(n, "loom_transpose_b2x2")) loom_transpose_b2x2(a->in, a->out, a->B, a->R, a->C, a->tilesC, a->rev);
  else if (!strcmp(n, "loom_transpose_b2x8")) loom_transpose_b2x8(a->in, a->out, a->B, a->R, a->C, a->tilesC, a->rev);
  else if (!strcmp(n, "loom_transpose_b2e")) loom_transpose_b2e(a->in, a->out, a->B, a->R, a->C, a->tilesC, a->rev);
  else if (!strcmp(n, "loom_transpose_b2s")) loom_transpose_b2s(a->in, a->out, a->B, a->R, a->C, a->tilesC, a->rev);
  else { fprintf(stderr, "no kernel %s\n", n); exit(2); }
}
// usage: prog transpose NAME GX GY BX BY IN OUTBYTES OUT B R C TILESC REV
static int transpose(char** argv) {
  targs a;
  a.name = argv[2];
  a.in = (const unsigned short*)loom_slurp(argv[7]);
  const size_t ob = (size_t)atoll(argv[8]);
  a.out = (unsigned short*)loom_poisoned(ob);
  a.B = atoll(argv[10]); a.R = atoi(argv[11]); a.C = atoi(argv[12]); a.tilesC = atoi(argv[13]); a.rev = atoi(argv[14]);
  loom_launch2d((unsigned int)atoi(argv[3]), (unsigned int)atoi(argv[4]), 1, (unsigned int)atoi(argv[5]), (unsigned int)atoi(argv[6]), run_transpose, &a);
  loom_write(argv[9], a.out, ob);
  return 0;
}
// usage: prog NAME GX GY IN OUTBYTES OUT INTS...
int main(int argc, char** argv) {
  if (argc == 15 && !strcmp(argv[1], "transpose")) return transpose(argv);
  if (argc < 7) return 2;
  cargs a;
  a.name = argv[1];
  a.in = loom_slurp(argv[4]);
  const size_t ob = (size_t)atoll(argv[5]);
  a.out = loom_poisoned(ob);
  for (int i = 7; i < argc && i - 7 < 18; ++i) a.v[i - 7] = atoll(argv[i]);
  loom_launch3((unsigned int)atoi(argv[2]), (unsigned int)atoi(argv[3]), 1, 256, run, &a);
  loom_write(argv[6], a.out, ob);
  return 0;
}
`

var convEmu = newEmuProg()

// convEmuSource is ConvSource (AMD: conv.hip and transpose.hip) with
// convEmuMain.
func convEmuSource() (string, error) {
	return hostemu.Shim + ConvSource(emuTarget) + hostemu.Helpers + convEmuMain, nil
}

// TestEmulateConv runs im2col (every element size) and col2im (f32, f64)
// on 40 random geometries each, in image and pixel chunks, against their
// twins.
func TestEmulateConv(t *testing.T) {
	prog := convEmu.get(t, convEmuSource)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(19, 20))
	run := func(name string, grid [3]uint32, in []byte, outBytes int, ints ...int) []byte {
		t.Helper()
		inp, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
		if err := os.WriteFile(inp, in, 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{name, fmt.Sprint(grid[0]), fmt.Sprint(grid[1]), inp, fmt.Sprint(outBytes), out}
		for _, v := range ints {
			args = append(args, fmt.Sprint(v))
		}
		if err := hostemu.Run(prog, args...); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for trial := range 40 {
		g := randConvGeom(r)
		dt := []dtype.DType{dtype.F16, dtype.F32, dtype.F64}[trial%3]
		if g.OH >= 1 && g.OW >= 1 {
			x := make([]float64, g.N*g.C*g.H*g.W)
			for i := range x {
				x[i] = float64(int(r.IntN(2001)) - 1000) // exact in f16
			}
			P, ckk := g.OH*g.OW, g.C*g.KH*g.KW
			n0, nb := r.IntN(g.N), 1
			if n0+2 <= g.N {
				nb = 2
			}
			np := 1 + r.IntN(P)
			p0 := r.IntN(P - np + 1)
			name, _ := Im2colEntry(dt)
			l := Im2colLaunch(int64(nb*ckk), int64(np))
			got := emuValues(t, dt, run(name, l[0], emuBytes(t, dt, x), nb*ckk*np*dt.Size(),
				n0, nb, g.C, g.H, g.W, g.KH, g.KW, g.PH, g.PW, g.SH, g.SW, g.DH, g.DW, g.OW, p0, np))
			want := Im2col(g, x, n0, nb, p0, np)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("trial %d, %s, %+v, images %d+%d, pixels %d+%d: cols[%d] = %v, twin %v", trial, name, g, n0, nb, p0, np, i, got[i], want[i])
				}
			}
		}
		// col2im, for the transposed conv of the same geometry.
		g.OH = (g.H-1)*g.SH - 2*g.PH + g.DH*(g.KH-1) + 1
		g.OW = (g.W-1)*g.SW - 2*g.PW + g.DW*(g.KW-1) + 1
		if g.OH < 1 || g.OW < 1 || dt == dtype.F16 {
			continue
		}
		kk, hw := g.KH*g.KW, g.H*g.W
		cols := make([]float64, g.N*g.CO*kk*hw)
		for i := range cols {
			cols[i] = r.Float64()*2 - 1
		}
		if dt == dtype.F32 {
			cols = emuValues(t, dt, emuBytes(t, dt, cols)) // as stored
		}
		want := make([]float64, g.N*g.CO*g.OH*g.OW)
		Col2im(g, cols, want, 0, g.N)
		name, _ := Col2imEntry(dt)
		grid, _ := FlatLaunch(g.N * g.CO * g.OH * g.OW)
		grid[0] = min(grid[0], 3) // the grid-stride loop
		got := emuValues(t, dt, run(name, grid, emuBytes(t, dt, cols), len(want)*dt.Size(),
			0, g.N, g.CO, g.H, g.W, g.KH, g.KW, g.PH, g.PW, g.SH, g.SW, g.DH, g.DW, g.OH, g.OW))
		for i := range want {
			tol := 0.0
			if dt == dtype.F32 {
				tol = 1e-6 * float64(kk) // f32 sums of at most KH·KW terms of magnitude ≤ 1
			}
			if math.Abs(got[i]-want[i]) > tol || math.IsNaN(got[i]) {
				t.Fatalf("trial %d, %s, %+v: out[%d] = %v, twin %v", trial, name, g, i, got[i], want[i])
			}
		}
	}
}

// TestEmulateTranspose runs every transpose kernel (TransposeEntries), in
// both tile orders, on the shapes TransposePlan gives it and on shapes
// that leave partial tiles, against Transpose, bit for bit.
func TestEmulateTranspose(t *testing.T) {
	prog := convEmu.get(t, convEmuSource)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(21, 22))
	for entry, name := range TransposeEntries {
		for _, sh := range [][3]int{{1, 1, 1}, {3, 5, 9}, {2, 70, 33}, {1, 128, 64}, {4, 16, 8}, {2, 40, 15}} {
			b, rows, cols := sh[0], sh[1], sh[2]
			if entry == TrB2s && cols >= 16 || entry == TrB2x8 && (rows%8 != 0 || cols%8 != 0) || entry == TrB2x2 && (rows%2 != 0 || cols%2 != 0) {
				continue // not a shape the host gives it
			}
			gb, tilesC, ok := TransposeLaunch(entry, int64(b), rows, cols)
			if !ok {
				t.Fatalf("%s %v: no launch", name, sh)
			}
			for _, rev := range []int{0, 1} {
				in := make([]float64, b*rows*cols)
				raw := make([]byte, 2*len(in))
				for i := range in {
					v := uint16(r.Uint32())
					in[i] = float64(v)
					binary.LittleEndian.PutUint16(raw[2*i:], v)
				}
				inp, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
				if err := os.WriteFile(inp, raw, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := hostemu.Run(prog, "transpose", name, fmt.Sprint(gb[0][0]), fmt.Sprint(gb[0][1]), fmt.Sprint(gb[1][0]), fmt.Sprint(gb[1][1]),
					inp, fmt.Sprint(len(raw)), out, fmt.Sprint(b), fmt.Sprint(rows), fmt.Sprint(cols), fmt.Sprint(tilesC), fmt.Sprint(rev)); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				want := Transpose(b, rows, cols, in)
				for i, w := range want {
					if g := float64(binary.LittleEndian.Uint16(got[2*i:])); g != w {
						t.Fatalf("%s %v rev %d: out[%d] = %v, want %v", name, sh, rev, i, g, w)
					}
				}
			}
		}
	}
}

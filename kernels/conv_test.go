package kernels

import (
	"debug/elf"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/exec/rocm/hip"
)

// directConv is the definition of conv2d (cross-correlation) on float64.
func directConv(g ConvGeom, x, w []float64) []float64 {
	out := make([]float64, g.N*g.CO*g.OH*g.OW)
	cig, cog := g.C/g.G, g.CO/g.G
	for n := range g.N {
		for co := range g.CO {
			gr := co / cog
			for oy := range g.OH {
				for ox := range g.OW {
					s := 0.0
					for ci := range cig {
						for ky := range g.KH {
							for kx := range g.KW {
								iy, ix := oy*g.SH-g.PH+ky*g.DH, ox*g.SW-g.PW+kx*g.DW
								if iy >= 0 && iy < g.H && ix >= 0 && ix < g.W {
									s += x[((n*g.C+gr*cig+ci)*g.H+iy)*g.W+ix] * w[((co*cig+ci)*g.KH+ky)*g.KW+kx]
								}
							}
						}
					}
					out[((n*g.CO+co)*g.OH+oy)*g.OW+ox] = s
				}
			}
		}
	}
	return out
}

// directConvT is the definition of conv_transpose2d: every input element
// scatters x·w into the outputs its taps reach.
func directConvT(g ConvGeom, x, w []float64) []float64 {
	out := make([]float64, g.N*g.CO*g.OH*g.OW)
	cig, cog := g.C/g.G, g.CO/g.G
	for n := range g.N {
		for ci := range g.C {
			gr := ci / cig
			for iy := range g.H {
				for ix := range g.W {
					v := x[((n*g.C+ci)*g.H+iy)*g.W+ix]
					for c := range cog {
						for ky := range g.KH {
							for kx := range g.KW {
								oy, ox := iy*g.SH-g.PH+ky*g.DH, ix*g.SW-g.PW+kx*g.DW
								if oy >= 0 && oy < g.OH && ox >= 0 && ox < g.OW {
									out[((n*g.CO+gr*cog+c)*g.OH+oy)*g.OW+ox] += v * w[((ci*cog+c)*g.KH+ky)*g.KW+kx]
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

func randSlice(r *rand.Rand, n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = r.Float64()*2 - 1
	}
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*(1+math.Abs(b)) }

// randConvGeom is a random conv geometry (stride 1–3, padding 0–2,
// dilation 1–2, groups 1–2, 4–8 pixels a side) with its output size, which
// may be below 1 (the caller skips it).
func randConvGeom(r *rand.Rand) ConvGeom {
	g := ConvGeom{N: 1 + r.IntN(3), KH: 1 + r.IntN(3), KW: 1 + r.IntN(3), SH: 1 + r.IntN(3), SW: 1 + r.IntN(3),
		DH: 1 + r.IntN(2), DW: 1 + r.IntN(2), PH: r.IntN(3), PW: r.IntN(3), G: 1 + r.IntN(2)}
	g.C, g.CO = g.G*(1+r.IntN(3)), g.G*(1+r.IntN(3))
	g.H, g.W = 4+r.IntN(5), 4+r.IntN(5)
	g.OH = (g.H+2*g.PH-g.DH*(g.KH-1)-1)/g.SH + 1
	g.OW = (g.W+2*g.PW-g.DW*(g.KW-1)-1)/g.SW + 1
	return g
}

// TestConvTwins: the twins composed as the executor composes the kernels
// (im2col in image and pixel chunks, then a GEMM per group; a GEMM per
// group, then col2im) equal the definitions.
func TestConvTwins(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 60 {
		g := randConvGeom(r)
		if g.OH >= 1 && g.OW >= 1 {
			x := randSlice(r, g.N*g.C*g.H*g.W)
			w := randSlice(r, g.CO*g.C/g.G*g.KH*g.KW)
			want := directConv(g, x, w)
			got := make([]float64, len(want))
			P, ckk := g.OH*g.OW, g.C*g.KH*g.KW
			ckkg, cog := ckk/g.G, g.CO/g.G
			np := 1 + r.IntN(P) // pixel chunks
			for n := range g.N {
				for p0 := 0; p0 < P; p0 += np {
					m := min(np, P-p0)
					cols := Im2col(g, x, n, 1, p0, m)
					for gr := range g.G {
						for co := range cog {
							for p := range m {
								s := 0.0
								for k := range ckkg {
									s += w[(gr*cog+co)*ckkg+k] * cols[(gr*ckkg+k)*m+p]
								}
								got[(n*g.CO+gr*cog+co)*P+p0+p] = s
							}
						}
					}
				}
			}
			for i := range want {
				if !near(got[i], want[i]) {
					t.Fatalf("trial %d conv %+v: out[%d] = %v, want %v", trial, g, i, got[i], want[i])
				}
			}
		}
		// transposed conv (output padding 0 or 1 when the stride allows)
		op := 0
		if g.SH > 1 && g.SW > 1 {
			op = r.IntN(2)
		}
		g.OH = (g.H-1)*g.SH - 2*g.PH + g.DH*(g.KH-1) + op + 1
		g.OW = (g.W-1)*g.SW - 2*g.PW + g.DW*(g.KW-1) + op + 1
		if g.OH < 1 || g.OW < 1 {
			continue
		}
		x := randSlice(r, g.N*g.C*g.H*g.W)
		cig, cog := g.C/g.G, g.CO/g.G
		w := randSlice(r, g.C*cog*g.KH*g.KW)
		want := directConvT(g, x, w)
		got := make([]float64, len(want))
		kk, hw := g.KH*g.KW, g.H*g.W
		for n := range g.N {
			cols := make([]float64, g.CO*kk*hw)
			for gr := range g.G {
				for row := range cog * kk { // row = c·KK + tap
					for p := range hw {
						s := 0.0
						for ci := range cig {
							s += w[(gr*cig+ci)*cog*kk+row] * x[(n*g.C+gr*cig+ci)*hw+p]
						}
						cols[(gr*cog*kk+row)*hw+p] = s
					}
				}
			}
			Col2im(g, cols, got, n, 1)
		}
		for i := range want {
			if !near(got[i], want[i]) {
				t.Fatalf("trial %d conv_transpose %+v: out[%d] = %v, want %v", trial, g, i, got[i], want[i])
			}
		}
	}
}

// TestConvCompile compiles ConvSource, QuantSource and GemvSource with hiprtc for gfx90a (wave 64) and
// gfx1030 (wave 32), and with NVRTC for sm_90 where it loads; every entry
// point is in the code object.
func TestConvCompile(t *testing.T) {
	type tgt struct {
		comp     func() (hip.Compiler, error)
		platform string
		arch     string
		machine  elf.Machine
		amd      bool
	}
	for _, tg := range []tgt{
		{func() (hip.Compiler, error) { return hip.LoadCompiler(hip.AMD) }, codegen.AMD, "gfx90a", elf.EM_AMDGPU, true},
		{func() (hip.Compiler, error) { return hip.LoadCompiler(hip.AMD) }, codegen.AMD, "gfx1030", elf.EM_AMDGPU, true},
		{func() (hip.Compiler, error) { return hip.LoadCompiler(hip.NVIDIA) }, codegen.NVIDIA, "sm_90", elf.EM_CUDA, false},
	} {
		t.Run(tg.arch, func(t *testing.T) {
			c, err := tg.comp()
			if err != nil {
				if tg.amd {
					amdCompiler(t) // fails under CI=true, else skips with the reason
				}
				t.Skipf("no compiler for %s: %v", tg.arch, err)
			}
			target := codegen.Target{Platform: tg.platform, Arch: tg.arch}
			js := []compileJob{
				{name: "conv", code: ConvSource(target), entries: ConvEntries()},
				{name: "quant", code: QuantSource(target), entries: quantEntriesFor(target)},
				{name: "gemv", code: GemvSource(target), entries: GemvEntries()},
			}
			res := compileJobs(c, js, tg.arch)
			for i, j := range js {
				checkCompiled(t, j, res[i], tg.arch, tg.machine, tg.amd)
			}
		})
	}
}

// TestChannelsLastTwin checks the operand moves of the channels-last conv
// path (exec/rocm/conv.go) on the twins: the input [N][C][HW] → [N][HW][C],
// the weight [K][C/G][RS] → [K][RS][C/G], a conv over those channels-last
// arrays, and its output [N][OHW][K] → [N][K][OHW] equal directConv.
func TestChannelsLastTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 40 {
		g := randConvGeom(r)
		if g.OH < 1 || g.OW < 1 {
			continue
		}
		cig, cog := g.C/g.G, g.CO/g.G
		x := randSlice(r, g.N*g.C*g.H*g.W)
		w := randSlice(r, g.CO*cig*g.KH*g.KW)
		want := directConv(g, x, w)
		xl := Transpose(g.N, g.C, g.H*g.W, x)     // [N][H][W][C]
		wl := Transpose(g.CO, cig, g.KH*g.KW, w)  // [K][KH][KW][C/G]
		yl := make([]float64, g.N*g.OH*g.OW*g.CO) // [N][OH][OW][K]
		for n := range g.N {
			for oy := range g.OH {
				for ox := range g.OW {
					for k := range g.CO {
						gr, s := k/cog, 0.0
						for ky := range g.KH {
							iy := oy*g.SH - g.PH + ky*g.DH
							for kx := range g.KW {
								ix := ox*g.SW - g.PW + kx*g.DW
								if iy < 0 || iy >= g.H || ix < 0 || ix >= g.W {
									continue
								}
								for c := range cig {
									s += xl[((n*g.H+iy)*g.W+ix)*g.C+gr*cig+c] * wl[((k*g.KH+ky)*g.KW+kx)*cig+c]
								}
							}
						}
						yl[((n*g.OH+oy)*g.OW+ox)*g.CO+k] = s
					}
				}
			}
		}
		got := Transpose(g.N, g.OH*g.OW, g.CO, yl)
		for i := range want {
			if !near(got[i], want[i]) {
				t.Fatalf("trial %d %+v: out[%d] = %v, want %v", trial, g, i, got[i], want[i])
			}
		}
	}
	if got := Transpose(2, 2, 3, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}); !slices.Equal(got, []float64{1, 4, 2, 5, 3, 6, 7, 10, 8, 11, 9, 12}) {
		t.Fatalf("Transpose(2, 2, 3) = %v", got)
	}
	if _, _, _, ok := TransposePlan(1, 1<<22, 1<<20, false, false); ok {
		t.Fatal("TransposePlan(1, 2^22, 2^20) fits 2^32 tiles in grid.x")
	}
	for _, c := range []struct {
		b               int64
		r, c            int
		align4, align16 bool
		name            string
		gb              [2][3]uint32
		tilesC          int
	}{
		{70000, 33, 64, true, true, "loom_transpose_b2", [2][3]uint32{{4, 65535, 1}, {32, 8, 1}}, 2},
		{3, 256, 3136, true, true, "loom_transpose_b2x8", [2][3]uint32{{4 * 49, 3, 1}, {32, 8, 1}}, 49},
		{3, 256, 3136, true, false, "loom_transpose_b2x2", [2][3]uint32{{4 * 49, 3, 1}, {32, 8, 1}}, 49},
		{3, 258, 3136, true, true, "loom_transpose_b2x2", [2][3]uint32{{5 * 49, 3, 1}, {32, 8, 1}}, 49},
		{3, 256, 3136, false, false, "loom_transpose_b2", [2][3]uint32{{8 * 98, 3, 1}, {32, 8, 1}}, 98},
		{256, 256, 9, true, true, "loom_transpose_b2s", [2][3]uint32{{256, 1, 1}, {32, 8, 1}}, 1},
		{1 << 20, 15, 1024, true, true, "loom_transpose_b2e", [2][3]uint32{{1 << 20, 1, 1}, {32, 8, 1}}, 1},
		{1 << 20, 1024, 15, true, true, "loom_transpose_b2s", [2][3]uint32{{1 << 20, 1, 1}, {32, 8, 1}}, 1},
		{4, 9, 3, true, true, "loom_transpose_b2s", [2][3]uint32{{1, 1, 1}, {32, 8, 1}}, 1},
	} {
		entry, gb, tc, ok := TransposePlan(c.b, c.r, c.c, c.align4, c.align16)
		if !ok || TransposeEntries[entry] != c.name || tc != c.tilesC || gb != c.gb {
			t.Fatalf("TransposePlan(%d, %d, %d, %v, %v) = %s, %v, %d, %v", c.b, c.r, c.c, c.align4, c.align16, TransposeEntries[entry], gb, tc, ok)
		}
	}
}

// quantEntriesFor is QuantEntries, and for NVIDIA the tensor-core
// mat-vecs, which only its sources hold.
func quantEntriesFor(t codegen.Target) []string {
	if t.Platform == codegen.NVIDIA {
		return append(QuantEntries(), QMVTEntries()...)
	}
	return QuantEntries()
}

package kernels

import (
	_ "embed"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/plan"
)

//go:embed conv.hip
var convHIP string

//go:embed transpose.hip
var transposeHIP string

// ConvSource returns the translation unit of the portable convolution
// kernels for t (conv.hip and transpose.hip with the prelude helpers they
// use): im2col for 2-, 4- and 8-byte elements, col2im for f32 and f64, the
// direct transposed conv for f16 and bf16, and the transposes of the
// channels-last library path. One compile serves every conv step.
func ConvSource(t codegen.Target) string {
	body := convHIP + transposeHIP
	return codegen.PreludeFor(t, body) + body
}

// TransposeFused returns the translation unit of the output transposes of
// fused conv kernel k (a conv with an epilogue: parts from
// plan.SplitFused, no prologue) and their entry names, names[i] the fused
// build of TransposeEntries[i]: transpose.hip's kernels storing each
// element of the conv's output through the epilogue at its flat index in
// the NCHW output, in k's output type (the index 32-bit where the output
// allows: the epilogue's operands divide it to find their elements, and
// 64-bit divisions made the fused store cost most of a pass of its own).
// The entries take the transposes' parameters, then one pointer per
// operand of k, in k.Ins order.
func TransposeFused(t codegen.Target, k *plan.Kernel, parts *plan.FusedParts) (names []string, code string, err error) {
	if parts.Pre != nil || parts.Post == nil {
		return nil, "", fmt.Errorf("kernels: %s: a fused conv takes an epilogue and no prologue", k.Name)
	}
	if d := parts.Core.Out.DType; d.Size() != 2 {
		return nil, "", fmt.Errorf("kernels: %s: transposes move 2-byte elements, not %v", k.Name, d)
	}
	fn, err := codegen.ScalarFunc(parts.Post, "loom_post", parts.PostValue, false)
	if err != nil {
		return nil, "", fmt.Errorf("kernels: %s epilogue: %w", k.Name, err)
	}
	var b strings.Builder
	b.WriteString(fn)
	fmt.Fprintf(&b, "#define LOOM_TR_EXTRA %s\n", operandParams(k))
	fmt.Fprintf(&b, "#define LOOM_TR_OUT %s\n", ctypes[k.Out.DType].storage)
	fmt.Fprintf(&b, "#define LOOM_TR_POST(i, v) loom_post(%s)\n",
		strings.Join(append(partPointers(parts.PostIns), "(v)", "(i)"), ", "))
	// Runs of eight (b2x8) compute the epilogue's addresses once a run
	// where its operands allow (codegen.ScalarFunc8); an epilogue that
	// reads the flat index itself keeps the per-element function.
	if fn8, err := codegen.ScalarFunc8(parts.Post, "loom_post8", parts.PostValue, false); err == nil {
		b.WriteString(fn8)
		fmt.Fprintf(&b, "#define LOOM_TR_POST8(i, v, r) loom_post8(%s)\n",
			strings.Join(append(partPointers(parts.PostIns), "(v)", "(i)", "(r)"), ", "))
	}
	fmt.Fprintf(&b, "#define LOOM_TR_NAME(S) %s_##S\n", namePlaceholder)
	body := b.String() + transposeHIP
	prelude := codegen.PreludeFor(t, body)
	h := fnv.New64a()
	h.Write([]byte(prelude))
	h.Write([]byte(body))
	prefix := fmt.Sprintf("loom_transpose_fused_%08x", uint32(h.Sum64()))
	for _, e := range TransposeEntries {
		names = append(names, prefix+strings.TrimPrefix(e, "loom_transpose"))
	}
	return names, prelude + strings.ReplaceAll(body, namePlaceholder, prefix), nil
}

// ConvEntries lists every entry point of ConvSource.
func ConvEntries() []string {
	return append([]string{"loom_im2col_b2", "loom_im2col_b4", "loom_im2col_b8", "loom_col2im_f32", "loom_col2im_f64",
		"loom_convt_direct_f16", "loom_convt_direct_bf16"}, TransposeEntries...)
}

// TransposeEntries are the batched transposes of 2-byte elements
// (transpose.hip): in [B][R][C] → out [B][C][R], which the channels-last
// library convs take their operands and output through. TransposePlan
// picks one.
var TransposeEntries = []string{"loom_transpose_b2", "loom_transpose_b2x2", "loom_transpose_b2x8", "loom_transpose_b2e", "loom_transpose_b2s"}

// The indices of TransposeEntries.
const (
	TrB2 = iota
	TrB2x2
	TrB2x8
	TrB2e
	TrB2s
)

// TransposePlan returns which of TransposeEntries (or of a fused conv's
// TransposeFused names, in the same order) moves b matrices of r × c
// elements, its grid and block, and the kernel's tilesC argument: with
// rows shorter than 16, one thread a row (b2s); with fewer than 16 rows,
// one thread an element (b2e); else runs of 8
// elements (b2x8) where r and c are multiples of 8 and both arrays
// 16-byte aligned (align16), pairs (b2x2) where they are even and
// 4-byte aligned (align4), single elements (b2) otherwise. ok is false
// where the launch does not fit (TransposeLaunch).
func TransposePlan(b int64, r, c int, align4, align16 bool) (entry int, gb [2][3]uint32, tilesC int, ok bool) {
	switch {
	case c < 16:
		entry = TrB2s
	case r < 16:
		entry = TrB2e
	case align16 && r%8 == 0 && c%8 == 0:
		entry = TrB2x8
	case align4 && r%2 == 0 && c%2 == 0:
		entry = TrB2x2
	default:
		entry = TrB2
	}
	gb, tilesC, ok = TransposeLaunch(entry, b, r, c)
	return entry, gb, tilesC, ok
}

// TransposeLaunch returns the grid and block of TransposeEntries[entry]
// over b matrices of r × c elements, and its tilesC argument: b2e and b2s
// 1-D grid-stride grids of one thread an element and a row (b2s takes
// rows shorter than 16 only); the others a block of 32 × 8
// threads per tile (b2 32 × 32, b2x2 and b2x8 64 × 64) in
// grid.x, tilesC across c, the matrices in grid.y (at most 65535; the
// kernels loop over the rest). It does not check the entry's conditions
// on r, c and alignment (TransposePlan does). ok is false where the tiles
// do not fit grid.x or a side does not fit an int.
func TransposeLaunch(entry int, b int64, r, c int) (gb [2][3]uint32, tilesC int, ok bool) {
	if b < 1 || r < 1 || c < 1 || int64(r) > 1<<31-1 || int64(c) > 1<<31-1 || entry < 0 || entry >= len(TransposeEntries) {
		return gb, 0, false
	}
	switch entry {
	case TrB2e:
		n := b * int64(r) * int64(c)
		return [2][3]uint32{{uint32(min((n+255)/256, 1<<20)), 1, 1}, {32, 8, 1}}, 1, true
	case TrB2s:
		if c >= 16 {
			return gb, 0, false
		}
		n := b * int64(r)
		return [2][3]uint32{{uint32(min((n+255)/256, 1<<20)), 1, 1}, {32, 8, 1}}, 1, true
	}
	t := 64 // b2x2, b2x8
	if entry == TrB2 {
		t = 32
	}
	tilesR, tilesC := (r+t-1)/t, (c+t-1)/t
	tiles := int64(tilesR) * int64(tilesC)
	if tiles > 1<<31-1 {
		return gb, 0, false
	}
	return [2][3]uint32{{uint32(tiles), uint32(min(b, 65535)), 1}, {32, 8, 1}}, tilesC, true
}

// ConvGeom is a 2-D convolution's geometry over packed NCHW arrays (1-D
// convolutions have H = KH = 1, PH = 0, SH = DH = 1). For conv, C and H×W
// are the input's and OH×OW the output's; for the transposed conv, the
// same names describe the transposed conv's own input and output.
type ConvGeom struct {
	N, C, H, W     int
	CO, KH, KW     int
	OH, OW         int
	PH, PW, SH, SW int
	DH, DW         int
	G              int
}

// Im2colEntry names the im2col kernel for elements of d.
func Im2colEntry(d dtype.DType) (string, error) {
	switch d.Size() {
	case 2, 4, 8:
		return fmt.Sprintf("loom_im2col_b%d", d.Size()), nil
	}
	return "", fmt.Errorf("kernels: im2col of %v", d)
}

// Im2colLaunch is the grid and block of an im2col launch over rows rows
// of np pixels (conv.hip): blocks of 256 threads over a row's pixels in x,
// about eight pixels a thread (at most 64 blocks), rows in y (at most
// 65535; the kernel loops over the rest).
func Im2colLaunch(rows, np int64) [2][3]uint32 {
	gx := min(max(1, (np+2047)/2048), 64)
	gy := min(max(1, rows), 65535)
	return [2][3]uint32{{uint32(gx), uint32(gy), 1}, {256, 1, 1}}
}

// Col2imEntry names the col2im kernel for d (f32, f64).
func Col2imEntry(d dtype.DType) (string, error) {
	switch d {
	case dtype.F32:
		return "loom_col2im_f32", nil
	case dtype.F64:
		return "loom_col2im_f64", nil
	}
	return "", fmt.Errorf("kernels: col2im of %v (f32 and f64 only)", d)
}

// ConvTDirectEntry names the direct transposed conv for d (f16, bf16).
func ConvTDirectEntry(d dtype.DType) (string, error) {
	switch d {
	case dtype.F16:
		return "loom_convt_direct_f16", nil
	case dtype.BF16:
		return "loom_convt_direct_bf16", nil
	}
	return "", fmt.Errorf("kernels: direct transposed conv of %v (f16 and bf16 only)", d)
}

// FlatLaunch returns the grid and block of a grid-stride kernel over n
// elements: 256 threads a block, at most 65535·8 blocks.
func FlatLaunch(n int) (grid, block [3]uint32) {
	b := (n + 255) / 256
	b = min(max(b, 1), 65535*8)
	return [3]uint32{uint32(b), 1, 1}, [3]uint32{256, 1, 1}
}

// The Go twins: the spec of each kernel, on float64 arrays.

// Im2col is the twin of loom_im2col_*: cols[b][ckk][p] for images n0+b
// (b < nb) and output pixels p0+p (p < np).
func Im2col(g ConvGeom, x []float64, n0, nb, p0, np int) []float64 {
	ckk := g.C * g.KH * g.KW
	cols := make([]float64, nb*ckk*np)
	for b := range nb {
		for row := range ckk {
			c, ky, kx := row/(g.KH*g.KW), row%(g.KH*g.KW)/g.KW, row%g.KW
			for p := range np {
				oy, ox := (p0+p)/g.OW, (p0+p)%g.OW
				iy, ix := oy*g.SH-g.PH+ky*g.DH, ox*g.SW-g.PW+kx*g.DW
				if iy >= 0 && iy < g.H && ix >= 0 && ix < g.W {
					cols[(b*ckk+row)*np+p] = x[(((n0+b)*g.C+c)*g.H+iy)*g.W+ix]
				}
			}
		}
	}
	return cols
}

// Transpose is the twin of loom_transpose_b2 and b2x2: out[b][j][i] = in[b][i][j]
// for b matrices of r × c elements.
func Transpose(b, r, c int, in []float64) []float64 {
	out := make([]float64, len(in))
	for m := range b {
		for i := range r {
			for j := range c {
				out[(m*c+j)*r+i] = in[(m*r+i)*c+j]
			}
		}
	}
	return out
}

// Col2im is the twin of loom_col2im_*: for the transposed conv of geometry
// g (input C×H×W, output CO×OH×OW), it adds the columns cols[b][co·KH·KW +
// ky·KW + kx][iy·W + ix] of images n0+b into out, tap order ky-major.
func Col2im(g ConvGeom, cols, out []float64, n0, nb int) {
	hw, kk := g.H*g.W, g.KH*g.KW
	for b := range nb {
		for co := range g.CO {
			for oy := range g.OH {
				for ox := range g.OW {
					acc := 0.0
					for ky := range g.KH {
						ty := oy + g.PH - ky*g.DH
						if ty < 0 || ty%g.SH != 0 || ty/g.SH >= g.H {
							continue
						}
						for kx := range g.KW {
							tx := ox + g.PW - kx*g.DW
							if tx < 0 || tx%g.SW != 0 || tx/g.SW >= g.W {
								continue
							}
							acc += cols[((b*g.CO+co)*kk+ky*g.KW+kx)*hw+ty/g.SH*g.W+tx/g.SW]
						}
					}
					out[(((n0+b)*g.CO+co)*g.OH+oy)*g.OW+ox] = acc
				}
			}
		}
	}
}

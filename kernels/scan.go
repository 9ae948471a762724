package kernels

import (
	_ "embed"
	"fmt"
	"os"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

//go:embed scan.hip
var scanHIP string

// cumsumConfig chooses among scan.hip's kernels (tests may change it).
var cumsumConfig = struct {
	// SeqMaxN: sequences of at most this many elements run one thread per
	// sequence (a tile kernel would leave most of its threads idle).
	SeqMaxN int
	// SeqMinRight, SeqMinSeqs: strided sequences (a non-last dim) run one
	// thread per sequence when the dims after the scanned one hold at least
	// SeqMinRight elements (neighbouring threads then read neighbouring
	// addresses, SeqMinRight·size bytes in a row) and there are at least
	// SeqMinSeqs sequences (threads enough to keep the memory busy).
	SeqMinRight, SeqMinSeqs int
	// RowsMin: sequences longer than a tile are scanned one block per
	// sequence (the carry in a register, no inter-block traffic) when there
	// are at least RowsMin of them, blocks enough to fill a GPU; fewer use
	// the decoupled look-back, one block per tile.
	RowsMin int
}{SeqMaxN: 16, SeqMinRight: 16, SeqMinSeqs: 8192, RowsMin: 1024}

// The kernels of scan.hip (CS_MODE).
const (
	csSeq = iota
	csTile
	csRows
	csLookback
)

var csModeNames = [...]string{"seq", "tile", "rows", "lookback"}

// csTypes are the accumulator type and the conversions of each dtype: the
// CPU twin's compute kinds (f16, bf16 → float; u8, u32 → 32-bit wrapping;
// i64 → unsigned 64-bit, whose adds wrap as Go's int64 does).
var csTypes = map[dtype.DType]struct{ acc, widen, narrow string }{
	dtype.F32:  {"float", "(x)", "(c)"},
	dtype.F64:  {"double", "(x)", "(c)"},
	dtype.F16:  {"float", "loom_f16_to_f32(x)", "loom_f32_to_f16(c)"},
	dtype.BF16: {"float", "loom_bf16_to_f32(x)", "loom_f32_to_bf16(c)"},
	dtype.U8:   {"unsigned int", "((unsigned int)(x))", "((unsigned char)(c))"},
	dtype.U32:  {"unsigned int", "(x)", "(c)"},
	dtype.I64:  {"unsigned long long", "((unsigned long long)(x))", "((long long)(c))"},
}

// cumsumPlan is the shape of a cumsum step: the kernel, the [left, n,
// right] view of the shape, threads per sequence and sequences per block
// (tile kernels), tiles per sequence, and vector I/O.
type cumsumPlan struct {
	mode             int
	left, n, right   int64
	seqs             int64
	tr, rpb          int
	tiles            int64
	vecIn, vecOut    bool
	accBytes, vWidth int
}

// cumsumEnv names the variable that forces one of scan.hip's kernels
// (for measurements on a device: every kernel computes the same bits).
const cumsumEnv = "LOOM_GPU_CUMSUM"

// planCumsumShape picks the kernel for a cumsum of x (operand layout l,
// dtype dt) along dim of shape: cumsumConfig's choice, or the one
// LOOM_GPU_CUMSUM names (seq, tile, rows or lookback; tile only for
// sequences of at most 4096, where it is ignored otherwise).
func planCumsumShape(shape []int, dim int, dt dtype.DType, xl ir.Layout) (cumsumPlan, error) {
	cfg := cumsumConfig
	left, n, right := split(shape, dim)
	p := cumsumPlan{left: left, n: n, right: right, seqs: left * right, tr: 256, rpb: 1}
	p.tiles = (n + ir.ScanTile - 1) / ir.ScanTile
	p.vWidth = 16 / dt.Size()
	p.accBytes = 4
	if dt == dtype.F64 || dt == dtype.I64 {
		p.accBytes = 8
	}
	switch {
	case n <= int64(cfg.SeqMaxN) || (right > 1 && right >= int64(cfg.SeqMinRight) && p.seqs >= int64(cfg.SeqMinSeqs)):
		p.mode = csSeq
	case n <= ir.ScanTile:
		p.mode = csTile
	case p.seqs >= int64(cfg.RowsMin):
		p.mode = csRows
	default:
		p.mode = csLookback
	}
	if v := os.Getenv(cumsumEnv); v != "" {
		i := slices.Index(csModeNames[:], v)
		if i < 0 {
			return p, fmt.Errorf("%s=%q: want one of %v", cumsumEnv, v, csModeNames)
		}
		if i != csTile || n <= ir.ScanTile {
			p.mode = i
		}
	}
	if p.mode == csTile {
		p.tr = int(max(16, pow2ceil((n+ir.ScanChunk-1)/ir.ScanChunk)))
		p.rpb = 256 / p.tr
	}
	if p.mode != csSeq && right == 1 && n%int64(p.vWidth) == 0 {
		p.vecOut = true
		r := xl.Merged()
		numel := int64(ir.Numel(shape))
		p.vecIn = len(r.Dims) == 1 && int64(r.Dims[0]) == numel && r.Strides[0] == 1 && r.Offset%p.vWidth == 0
	}
	return p, nil
}

// planCumsum plans a cumsum step (see scan.hip for the kernels).
func planCumsum(n *ir.Node, ops []operand) (*planned, error) {
	x := ops[0]
	dim, err := dimParam(n, n.Shape)
	if err != nil {
		return nil, err
	}
	if n.DType != x.dt || !slices.Equal(n.Shape, x.l.Dims) {
		return nil, fmt.Errorf("cumsum of %v%v must give %v%v, not %v%v", x.dt, x.l.Dims, x.dt, x.l.Dims, n.DType, n.Shape)
	}
	ct, ok := csTypes[x.dt]
	if !ok {
		return nil, fmt.Errorf("cumsum of dtype %v", x.dt)
	}
	p, err := planCumsumShape(n.Shape, dim, x.dt, x.l)
	if err != nil {
		return nil, err
	}
	nt := p.seqs * p.tiles
	if p.mode == csLookback && nt >= 1<<31 {
		return nil, fmt.Errorf("cumsum of %v%v: %d tiles, the look-back counts at most 2^31", x.dt, n.Shape, nt)
	}
	scratch := (nt+1)*4 + 15
	scratch = scratch/16*16 + 2*nt*int64(p.accBytes)
	c := &config{wide: needWide(spans(ops, int64(n.Numel()), nt+1, scratch)...)}
	c.header()
	c.line("#define CS_M_SEQ %d", csSeq)
	c.line("#define CS_M_TILE %d", csTile)
	c.line("#define CS_M_ROWS %d", csRows)
	c.line("#define CS_M_LOOKBACK %d", csLookback)
	c.line("#define CS_MODE %d", p.mode)
	c.line("typedef %s CS_T;", ctypes[x.dt].storage)
	c.line("typedef %s CS_C;", ct.acc)
	c.line("#define CS_WIDEN(x) %s", ct.widen)
	c.line("#define CS_NARROW(c) %s", ct.narrow)
	c.define("CS_N", p.n)
	c.define("CS_R", p.right)
	c.define("CS_NSEQ", p.seqs)
	c.line("#define CS_TR %d", p.tr)
	c.line("#define CS_RPB %d", p.rpb)
	c.line("#define CS_TILES %du", p.tiles)
	c.line("#define CS_VIN %d", b2i(p.vecIn))
	c.line("#define CS_VOUT %d", b2i(p.vecOut))
	c.atFunc("at_x", x.l)

	pl := &planned{config: c.String(), body: scanHIP}
	pl.base = fmt.Sprintf("cumsum_%v_%s", x.dt, csModeNames[p.mode])
	block := [3]uint32{256, 1, 1}
	io := []Arg{{Operand, x.in}, {Kind: Output}}
	switch p.mode {
	case csSeq:
		pl.launch = []Launch{{Name: "_seq", Grid: grid1(p.seqs, 256), Block: block, Args: io}}
	case csTile:
		pl.launch = []Launch{{Name: "_tile", Grid: grid1((p.seqs+int64(p.rpb)-1)/int64(p.rpb), 1), Block: block, Args: io}}
	case csRows:
		pl.launch = []Launch{{Name: "_rows", Grid: grid1(p.seqs, 1), Block: block, Args: io}}
	case csLookback:
		pl.scratch = []ScratchBuf{{Bytes: scratch}}
		pl.launch = []Launch{
			{Name: "_init", Grid: grid1(nt+1, 256), Block: block, Args: []Arg{{Kind: Scratch, Index: 0}}},
			{Name: "_lookback", Grid: grid1(nt, 1), Block: block, Args: append(io, Arg{Kind: Scratch, Index: 0})},
		}
	}
	return pl, nil
}

// CumsumTwin is the plain-Go specification of scan.hip's tile kernels on
// one sequence x (values already in the compute type T): what the threads
// of a block compute, step by step, in the same order. Each tile of 4096
// is one block's work: 256 threads each scan a chunk of 16 in registers
// (level 0), 16 threads scan the chunk totals of a group in shared memory
// (level 1), one thread the group totals (level 2) and forms the tile's
// carry; then every thread adds its chunk's offset and the carry. A short
// sequence is a block of tr = 16 … 256 threads (scan.hip's CS_TR),
// padded with zeros to 16·tr elements, as scan.hip pads.
//
// lookback, when not nil, plays the decoupled look-back: for tile k > 0 it
// returns the tile j < k whose inclusive prefix the look-back found
// published (the tiles between had published their totals only); the twin
// then folds those totals forward from P_j as the kernel does. Without it,
// each tile's carry is the running sum (scan.hip's CS_M_ROWS).
func CumsumTwin[T float32 | float64 | uint32 | uint64](x []T, lookback func(k int) int) []T {
	out := make([]T, len(x))
	n := len(x)
	if n == 0 {
		return out
	}
	tr := 256
	if n <= ir.ScanTile {
		tr = int(max(16, pow2ceil(int64(n+15)/16)))
	}
	tiles := (n + ir.ScanTile - 1) / ir.ScanTile
	totals := make([]T, tiles) // A_k as published
	incl := make([]T, tiles)   // P_k = O_k + A_k, the inclusive prefixes as published
	var carry T                // CS_M_ROWS: thread 0's register
	for k := range tiles {
		i0 := k * ir.ScanTile
		m := min(ir.ScanTile, n-i0)
		// cs_load + level 0: thread t holds chunk t, zero-padded.
		var l [256][16]T
		var tot [256]T
		for t := range tr {
			var s T
			for p := range 16 {
				var v T
				if i := t*16 + p; i < m {
					v = x[i0+i]
				}
				if p == 0 {
					s = v
				} else {
					s = s + v
				}
				l[t][p] = s
			}
			tot[t] = s
		}
		// Level 1: thread g < 16 scans chunk totals 16g … 16g+15 in place.
		var grp [16]T
		for g := range tr / 16 {
			a := tot[16*g]
			for q := 1; q < 16; q++ {
				a = a + tot[16*g+q]
				tot[16*g+q] = a
			}
			grp[g] = a
		}
		// Level 2 and the carry: thread 0.
		a := grp[0]
		for g := 1; g < tr/16; g++ {
			a = a + grp[g]
			grp[g] = a
		}
		var o T
		switch {
		case k == 0:
			incl[0] = a
		case lookback != nil:
			totals[k] = a
			j := lookback(k)
			if j < 0 || j >= k {
				panic(fmt.Sprintf("CumsumTwin: look-back of tile %d found tile %d", k, j))
			}
			o = incl[j]
			for i := j + 1; i < k; i++ {
				o = o + totals[i]
			}
			incl[k] = o + a
		default:
			o = carry
		}
		if k == 0 {
			carry = a
		} else {
			carry = carry + a
		}
		// Offsets: every thread.
		for t := range tr {
			g, q := t/16, t%16
			var e T
			switch {
			case g == 0 && q > 0:
				e = tot[t-1]
			case g > 0 && q == 0:
				e = grp[g-1]
			case g > 0:
				e = grp[g-1] + tot[t-1]
			}
			for p := range 16 {
				i := t*16 + p
				if i >= m {
					break
				}
				r := l[t][p]
				if t > 0 {
					r = e + r
				}
				if k > 0 {
					r = o + r
				}
				out[i0+i] = r
			}
		}
	}
	return out
}

// CumsumKernel names the scan.hip kernel a cumsum of a contiguous input of
// shape along dim uses ("seq", "tile", "rows" or "lookback").
func CumsumKernel(shape []int, dim int, dt dtype.DType) (string, error) {
	p, err := planCumsumShape(shape, dim, dt, ir.Contiguous(shape))
	return csModeNames[p.mode], err
}

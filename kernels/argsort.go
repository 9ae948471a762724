package kernels

import (
	_ "embed"
	"fmt"
	"math/bits"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

//go:embed argsort.hip
var argsortHIP string

// sortConfig is the shape of the bitonic kernel.
type sortConfig struct {
	// E is the number of pairs a thread holds in registers (a power of two).
	E int
	// MinThreads is the smallest block: short segments are packed several
	// to a block.
	MinThreads int
	// MaxSeg32 and MaxSeg64 are the longest segment sorted in one block
	// (a power of two), for 32-bit keys (8-byte pairs) and 64-bit keys
	// (16-byte pairs): shared memory holds one block's pairs, at most
	// 32 KiB. Longer rows are sorted as tiles of this length, then merged.
	MaxSeg32, MaxSeg64 int
}

// argsortConfig is the configuration Plan uses (tests may change it).
var argsortConfig = sortConfig{E: 8, MinThreads: 128, MaxSeg32: 4096, MaxSeg64: 2048}

// sortKey returns the C key expression of a stored value x and whether the
// key is 64-bit. Descending is the bitwise not of the ascending key.
func sortKey(d dtype.DType, desc bool) (expr string, key64 bool, err error) {
	switch d {
	case dtype.F32:
		expr = "as_fkey(x)"
	case dtype.F16:
		expr = "as_fkey(loom_f16_to_f32(x))"
	case dtype.BF16:
		expr = "as_fkey(loom_bf16_to_f32(x))"
	case dtype.F8E4M3: // by value: both NaN codes widen to the one NaN
		expr = "as_fkey(loom_f8e4m3_to_f32(x))"
	case dtype.U8, dtype.U32:
		expr = "((unsigned int)(x))"
	case dtype.F64:
		expr, key64 = "as_dkey(x)", true
	case dtype.I64:
		expr, key64 = "as_ikey(x)", true
	default:
		return "", false, fmt.Errorf("argsort of dtype %v", d)
	}
	if desc {
		expr = "(~" + expr + ")"
	}
	return expr, key64, nil
}

func pow2ceil(n int64) int64 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len64(uint64(n-1))
}

// planArgsort: rows of the last dim. A row that fits one block (padded to a
// power of two, at most MaxSeg) is sorted by one bitonic kernel that writes
// the indices. A longer row is cut into tiles of MaxSeg, each sorted by the
// same kernel into a scratch buffer of (key, column) pairs; merge passes
// then double the sorted runs (ping-ponging between two scratch buffers)
// until one run covers the row, the last pass writing the indices.
func planArgsort(n *ir.Node, ops []operand) (*planned, error) {
	x := ops[0]
	if n.DType != dtype.U32 || !slices.Equal(n.Shape, x.l.Dims) || len(n.Shape) == 0 {
		return nil, fmt.Errorf("argsort of %v%v must give u32%v", x.dt, x.l.Dims, x.l.Dims)
	}
	desc := n.Params[0] == 1
	key, key64, err := sortKey(x.dt, desc)
	if err != nil {
		return nil, err
	}
	cfg := argsortConfig
	N := int64(n.Shape[len(n.Shape)-1])
	rows := int64(n.Numel()) / N
	if N >= 1<<32-1 {
		return nil, fmt.Errorf("argsort rows of %d elements: u32 indices hold at most 2^32-1", N)
	}
	maxSeg, pairBytes := int64(cfg.MaxSeg32), int64(8)
	if key64 {
		maxSeg, pairBytes = int64(cfg.MaxSeg64), 16
	}
	P := pow2ceil(N)
	tiled := P > maxSeg
	tiles := int64(1)
	if tiled {
		P = maxSeg
		tiles = (N + P - 1) / P
	}
	E := min(int64(cfg.E), P)
	tps := P / E
	T := max(tps, int64(cfg.MinThreads))
	if T > 1024 {
		return nil, fmt.Errorf("argsort config: %d threads per block", T)
	}
	G := T / tps
	nseg := rows * tiles
	c := &config{wide: needWide(spans(ops, int64(n.Numel()), rows*tiles*P)...)}
	c.header()
	c.line("typedef %s X_T;", ctypes[x.dt].storage)
	c.line("#define AS_KEY(x) %s", key)
	c.line("#define AS_KEY64 %d", b2i(key64))
	c.line("#define AS_DESC %d", b2i(desc))
	c.define("AS_N", N)
	c.define("AS_ROWS", rows)
	c.line("#define AS_P %du", P)
	c.line("#define AS_TILES %du", tiles)
	c.line("#define AS_E %d", E)
	c.line("#define AS_T %d", T)
	c.line("#define AS_TPS %d", tps)
	c.line("#define AS_G %d", G)
	c.atFunc("at_x", x.l)

	p := &planned{config: c.String(), body: argsortHIP}
	order := "asc"
	if desc {
		order = "desc"
	}
	p.base = fmt.Sprintf("argsort_%v_%s", x.dt, order)
	sortGrid := grid1(nseg, int(G))
	block := [3]uint32{uint32(T), 1, 1}
	mergeBlock := [3]uint32{256, 1, 1}
	total := rows * N
	var entries string
	if !tiled {
		entries = fmt.Sprintf(`
extern "C" __global__ void __launch_bounds__(AS_T) %s_sort(const X_T* __restrict__ x, unsigned int* __restrict__ out) { loom_grid_entry();
  as_sort<true>(x, out, nullptr);
}
`, namePlaceholder)
		p.launch = []Launch{{Name: "_sort", Grid: sortGrid, Block: block, Args: []Arg{{Operand, x.in}, {Kind: Output}}}}
		p.entries = entries
		return p, nil
	}
	entries = fmt.Sprintf(`
extern "C" __global__ void __launch_bounds__(AS_T) %s_tiles(const X_T* __restrict__ x, as_kt* __restrict__ tiles) { loom_grid_entry();
  as_sort<false>(x, nullptr, tiles);
}
`, namePlaceholder)
	p.scratch = []ScratchBuf{{Bytes: total * pairBytes}}
	p.launch = []Launch{{Name: "_tiles", Grid: sortGrid, Block: block, Args: []Arg{{Operand, x.in}, {Kind: Scratch, Index: 0}}}}
	cur := 0
	for w := P; w < N; w *= 2 {
		final := 2*w >= N
		name := fmt.Sprintf("_m%d", w)
		if final {
			entries += fmt.Sprintf(`extern "C" __global__ void __launch_bounds__(AS_MERGE_BS) %s%s(const as_kt* __restrict__ src, unsigned int* __restrict__ out) { loom_grid_entry();
  as_merge<%dull, true>(src, nullptr, out);
}
`, namePlaceholder, name, w)
			p.launch = append(p.launch, Launch{Name: name, Grid: grid1(total, 256), Block: mergeBlock,
				Args: []Arg{{Kind: Scratch, Index: cur}, {Kind: Output}}})
			break
		}
		if len(p.scratch) == 1 {
			p.scratch = append(p.scratch, ScratchBuf{Bytes: total * pairBytes})
		}
		entries += fmt.Sprintf(`extern "C" __global__ void __launch_bounds__(AS_MERGE_BS) %s%s(const as_kt* __restrict__ src, as_kt* __restrict__ dst) { loom_grid_entry();
  as_merge<%dull, false>(src, dst, nullptr);
}
`, namePlaceholder, name, w)
		p.launch = append(p.launch, Launch{Name: name, Grid: grid1(total, 256), Block: mergeBlock,
			Args: []Arg{{Kind: Scratch, Index: cur}, {Kind: Scratch, Index: 1 - cur}}})
		cur = 1 - cur
	}
	p.entries = entries
	return p, nil
}

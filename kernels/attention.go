package kernels

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

//go:embed attention.hip
var attentionHIP string

// attentionThreads is the block of both attention launches.
const attentionThreads = 256

// attentionShared bounds the part kernel's shared memory: queries G·D,
// scores G·split and 2·G maxima and sums, in elements of the compute type
// (48 KiB of float32: the static limit on both platforms).
const attentionShared = 12 << 10

// attentionMergeItems is the number of (row, head) pairs a merge block
// takes: a group of 32 lanes each (AT_ML in attention.hip).
const attentionMergeItems = attentionThreads / 32

// attentionMaxPer bounds the keys' and values' elements a thread of the
// part kernel holds in registers when it issues every load at once.
const attentionMaxPer = 16

// attentionPrefetch says whether the part kernel issues all its loads at
// once (attention.hip, AT_PRE) for blocks of threads, G query heads a key
// head, head dims D and Dv and split keys a block: when each thread's
// share of the first pass's keys (kper = ⌈D/8⌉) and of the values
// (vper = ⌈split/ks⌉, with ks = threads/Dv key subsets) fits attentionMaxPer registers, G does too, and
// the subsets' sums (ks·G·Dv elements) fit the 48 KiB of static shared
// memory beside the queries and scores (accBytes: 4 for float, 8 for
// double).
func attentionPrefetch(threads, g, d, dv, split, accBytes int) (pre bool, kper, vper, ks int) {
	if d < 1 || dv < 1 || dv > threads {
		return false, 1, 1, 1
	}
	kper, ks = (d+7)/8, threads/dv
	vper = (split + ks - 1) / ks
	pre = kper <= attentionMaxPer && vper <= attentionMaxPer && g <= attentionMaxPer &&
		attentionPartShared(g, d, dv, split, ks, true)*accBytes <= attentionShared*4
	if !pre {
		return false, 1, 1, 1
	}
	return true, kper, vper, ks
}

// attentionFill is the number of part blocks a split size aims for: a
// few per multiprocessor of a large GPU, so that a decode step's few rows
// (B·KV blocks of queries) spread over the device. Measured (session 33,
// H200, a 1B bf16 decode step over a 1024-key window, alternating runs in
// one call): 264 gave a median step of 957–958 µs; 128, 987 µs (64 keys a
// block); 64, 1,213 µs; 512, 959 µs.
const attentionFill = 264

// attentionPartShared is the part kernel's static shared memory in
// elements of the compute type: queries G·D, scores G·split, maxima and
// sums 2·G, and with the prefetch (pre) the key subsets' sums ks·G·Dv.
func attentionPartShared(g, d, dv, split, ks int, pre bool) int {
	n := g * (max(d, 1) + split + 2)
	if pre {
		n += ks * g * dv
	}
	return n
}

// attentionFoldMax bounds a folded merge's (head, split) pairs, whose
// maxima and sums it stages in shared memory.
const attentionFoldMax = 2048

// attentionFold says whether the part launch merges the splits itself
// (attention.hip, AT_FOLD): the last block of a row to finish, counted in
// the executor's counters, merges the row, so a step is one launch, not
// two. It needs a counter a row, and the shared memory of the part kernel
// (queries, scores, maxima and sums, the prefetch's subset sums) plus 2·G
// per split and G more within the 48 KiB of static shared memory.
// Measured (H200, s29): see attention.hip.
func attentionFold(rows, g, d, dv, split, nsplit, accBytes int, pre bool, ks int) bool {
	if !attentionFoldOn || rows > CounterWords || g*nsplit > attentionFoldMax {
		return false
	}
	elems := attentionPartShared(g, d, dv, split, ks, pre) + 2*g*nsplit + g
	return elems*accBytes+16 <= attentionShared*4 // 16: the flag a block reads
}

// attentionClusterMax is the most blocks a cluster of the attention's part
// launch takes (AT_CLUSTER): 8, the cluster size every sm_90 GPU runs.
const attentionClusterMax = 8

// attentionClusterRows bounds the rows (B·KV·T) the cluster form takes: it
// is for a decode step's few rows, whose time is a chain of round trips.
const attentionClusterRows = 256

// attentionClusterOn is false with LOOM_ATTENTION_CLUSTER=0: the fold's
// counters and scratch instead of a cluster's shared memory, to compare.
var attentionClusterOn = os.Getenv("LOOM_ATTENTION_CLUSTER") != "0"

// attentionCluster picks the cluster form of the part launch (attention.hip,
// AT_CLUSTER) where the target has thread block clusters (NVIDIA sm_90+),
// the rows are few (attentionClusterRows) and the S keys fit one cluster of
// at most attentionClusterMax blocks of split ∈ {32, 64, 128} keys with
// 8·split threads (a group of 8 lanes a key: one pass) and every load
// issued at once (attentionPrefetch). A row's blocks then meet in the
// cluster's distributed shared memory: no scratch, no counter, no
// threadfence and no second read of partial results from global memory
// (the fold's chain of round trips after a block's own work).
// Returns the cluster's size (0: the fold or merge form), its split and
// its threads a block.
func attentionCluster(t codegen.Target, rows, s, g, d, dv, accBytes int) (size, split, threads int) {
	if !attentionClusterOn || nvidiaSM(t) < 90 || rows > attentionClusterRows || s < 1 {
		return 0, 0, 0
	}
	for split = 32; split <= 128; split *= 2 {
		size = (s + split - 1) / split
		if size > attentionClusterMax {
			continue
		}
		threads = 8 * split
		pre, _, _, ks := attentionPrefetch(threads, g, d, dv, split, accBytes)
		if !pre {
			return 0, 0, 0
		}
		// Shared memory: the part's and the block's partial result G·(Dv+2).
		if (attentionPartShared(g, d, dv, split, ks, true)+g*(dv+2))*accBytes > attentionShared*4 {
			return 0, 0, 0
		}
		return size, split, threads
	}
	return 0, 0, 0
}

// attentionWarpsOn is false with LOOM_ATTENTION_WARPS=0: the cluster form
// of the part kernel instead of the warp form, to compare.
var attentionWarpsOn = os.Getenv("LOOM_ATTENTION_WARPS") != "0"

// attentionWarpsMax bounds the warp form's block: 32 warps, 1,024 threads.
const attentionWarpsMax = 32

// attentionWarpForm picks the warp form (attention.hip, AT_WARPS) where
// the target has thread block clusters (NVIDIA sm_90+), the rows are few
// (attentionClusterRows), the dtype is f32, f16 or bf16, the keys' and
// values' elements are consecutive (k and v layouts: unit last stride),
// a lane's Dv/32 value elements are 4, 8 or 16 bytes, every row starts on
// a boundary of the loads that read it, at most 8 query heads share a key
// head, and the S keys fit one cluster of at most attentionClusterMax
// blocks of at most attentionWarpsMax warps with the shared memory for
// it. A warp takes kpw keys: 8 (4 lanes a key, each a quarter of it in
// 16-byte loads), else 16 or 32 where the shared memory or the key's
// bytes ask for it. Returns the cluster's size (0: not this form), the
// warps a block and kpw; as many warps as keep the cluster within
// attentionClusterMax blocks.
func attentionWarpForm(t codegen.Target, rows, s, g, d, dv int, dt dtype.DType, k, v ir.Layout) (size, warps, kpw int) {
	if !attentionWarpsOn || nvidiaSM(t) < 90 || rows > attentionClusterRows || s < 1 || g < 1 || g > 8 {
		return 0, 0, 0
	}
	if dt != dtype.F32 && dt != dtype.F16 && dt != dtype.BF16 {
		return 0, 0, 0
	}
	es := dt.Size()
	vb := dv / 32 * es
	if dv%32 != 0 || (vb != 4 && vb != 8 && vb != 16) || d*es > 512 {
		return 0, 0, 0
	}
	if len(k.Strides) != 4 || len(v.Strides) != 4 || k.Strides[3] != 1 || v.Strides[3] != 1 {
		return 0, 0, 0
	}
	for _, x := range []int{k.Offset, k.Strides[0], k.Strides[1], k.Strides[2]} {
		if x*es%16 != 0 {
			return 0, 0, 0
		}
	}
	for _, x := range []int{v.Offset, v.Strides[0], v.Strides[1], v.Strides[2]} {
		if x*es%vb != 0 {
			return 0, 0, 0
		}
	}
	for kpw = 8; kpw <= 32; kpw *= 2 {
		lpk := 32 / kpw
		if d%lpk != 0 || d/lpk*es%16 != 0 {
			continue
		}
		warps = (s + kpw*attentionClusterMax - 1) / (kpw * attentionClusterMax)
		if warps > attentionWarpsMax {
			continue
		}
		// Shared memory (float): queries (a run of a head 4 apart from
		// the next), each warp's weights, largest scores and partial
		// result, the block's partial result.
		if g*(d+4*lpk)+warps*g*(kpw+1)+(warps+1)*g*(dv+2) > attentionShared {
			continue
		}
		return (s + kpw*warps - 1) / (kpw * warps), warps, kpw
	}
	return 0, 0, 0
}

// attentionNewKVOn is false with LOOM_ATTENTION_NEWKV=0: an attention
// step behind its cache's scatter then waits for it before any load, for
// comparison. Measured (session 50, H200, TestGPUSpeed1B, one round in
// one call): median step bf16 832.1 µs against 836.4, Q4_K 521.3 against
// 522.5 — the loads overlap the scatter, but the kernel's time is its
// chain of shuffles, barriers and the cluster's merge after them (the
// whole attention is ~3.7 µs a layer of a Q4_K step).
var attentionNewKVOn = os.Getenv("LOOM_ATTENTION_NEWKV") != "0"

// attentionNewKV says whether the warp form of attention step k (one
// query position, T = 1) reads its new key and value from the queries'
// buffer before it waits (plan.Kernel.NewKV, attention.hip's AT_NEWKV):
// the new key's runs a lane loads (16 bytes at the offset, batch and head
// strides of the source) and the value's (Dv/32 elements a lane) must be
// aligned as the cache's, with unit strides along the head dim.
func attentionNewKV(k *plan.Kernel, dt dtype.DType, t, dv int) bool {
	if !attentionNewKVOn || k == nil || k.NewKV == nil || t != 1 {
		return false
	}
	l := k.NewKV.Src.Layout
	if len(l.Strides) != 5 || l.Strides[4] != 1 {
		return false
	}
	es := dt.Size()
	vb := dv / 32 * es
	for _, x := range []int{l.Offset, l.Strides[1], l.Strides[2]} {
		if x*es%16 != 0 {
			return false
		}
	}
	return (l.Offset+l.Strides[0])*es%vb == 0
}

// attentionFoldOn is false with LOOM_GPU_ATTENTION=merge: every attention
// step then merges its splits in a launch of its own, for comparison.
var attentionFoldOn = os.Getenv("LOOM_GPU_ATTENTION") != "merge"

// AttentionSplit is the number of keys a part block of the attention
// kernel takes: 256, halved (down to 32) while rows·⌈S/split⌉ blocks are
// fewer than attentionFill or the shared memory of G·(D + split + 2)
// elements exceeds attentionShared. ok is false when even 32 keys do not
// fit (a group of query heads too wide for one block's shared memory).
func AttentionSplit(rows, s, g, d int) (split int, ok bool) {
	split = 256
	for split > 32 && (rows*((s+split-1)/split) < attentionFill || g*(max(d, 1)+split+2) > attentionShared) {
		split /= 2
	}
	return split, g*(max(d, 1)+split+2) <= attentionShared
}

// planAttention plans ir.OpAttention (q, k, v, start): the part launch over
// (rows, splits) and the merge launch over rows (attention.hip), with the
// partial results in one scratch buffer.
//
// With plan.Kernel.NewKV (a decode step's attention right behind its
// cache's one-position scatter) the warp form takes one more argument
// (AheadInPlace): where the scatter ran in place, the queries' buffer,
// whose new keys and values it then reads for the query's position,
// issuing every load before it waits for the scatter (attentionNewKV).
func planAttention(k *plan.Kernel, n *ir.Node, ops []operand, t codegen.Target) (*planned, error) {
	q, kk, v, st := ops[0], ops[1], ops[2], ops[3]
	shape, why := ir.AttentionShape(q.l.Dims, kk.l.Dims, v.l.Dims, st.l.Dims, q.dt, kk.dt, v.dt, st.dt)
	if why != "" {
		return nil, fmt.Errorf("%s", why)
	}
	if n.DType != q.dt || !slices.Equal(n.Shape, shape) {
		return nil, fmt.Errorf("output %v%v, want %v%v", n.DType, n.Shape, q.dt, shape)
	}
	B, H, T, D := shape[0], shape[1], shape[2], q.l.Dims[3]
	KV, S, Dv := kk.l.Dims[1], kk.l.Dims[2], v.l.Dims[3]
	G := H / KV
	rows := B * KV * T
	split, ok := AttentionSplit(rows, S, G, D)
	if !ok {
		return nil, fmt.Errorf("%d query heads a key head with head dim %d do not fit one block's shared memory (G·(D + 34) ≤ %d)", G, D, attentionShared)
	}
	nsplit := (S + split - 1) / split
	if nsplit > 65535 {
		return nil, fmt.Errorf("%d keys need %d blocks of %d along the grid's y (at most 65535)", S, nsplit, split)
	}
	ct := ctypes[q.dt]
	acc, accBytes := ct.compute, int64(4) // float, or double for f64
	if acc == "double" {
		accBytes = 8
	}
	threads := attentionThreads
	csize, csplit, cthreads := attentionCluster(t, rows, S, G, D, Dv, int(accBytes))
	wsize, warps, kpw := attentionWarpForm(t, rows, S, G, D, Dv, q.dt, kk.l, v.l)
	if wsize > 0 {
		csize, csplit, cthreads = wsize, kpw*warps, 32*warps
	}
	if csize > 0 {
		split, nsplit, threads = csplit, csize, cthreads
	}
	scratch := int64(rows) * int64(nsplit) * int64(G) * int64(Dv+2) * accBytes
	c := &config{wide: true}
	c.header()
	c.valueMacros("V", q.dt)
	c.line("typedef %s AT_A;", acc)
	c.line("#define AT_WIDEN(x) ((AT_A)%s(x))", ct.widen)
	c.line("#define AT_NARROW(x) %s(x)", ct.narrow)
	if acc == "double" {
		c.line("#define AT_EXP(x) exp(x)")
		c.line("#define AT_NEG_INF (-__longlong_as_double(0x7ff0000000000000ll))")
	} else {
		c.line("#define AT_EXP(x) expf(x)")
		c.line("#define AT_NEG_INF (-__int_as_float(0x7f800000))")
	}
	c.line("#define AT_SCALE %s", cFloat(n.Params[0], acc))
	c.line("#define AT_THREADS %d", threads)
	pre, kper, vper, ks := attentionPrefetch(threads, G, D, Dv, split, int(accBytes))
	c.line("#define AT_PRE %d", b2i(pre))
	c.line("#define AT_KPER %d", kper)
	c.line("#define AT_VPER %d", vper)
	c.line("#define AT_KS %d", ks)
	// The merge holds each lane's splits' maxima and sums in registers
	// and every group's weights in shared memory while there are at most
	// 8 a lane (attention.hip, AT_MPL).
	mpl := (nsplit + 31) / 32
	if mpl > 8 || int64(attentionMergeItems*nsplit)*accBytes > 16<<10 {
		mpl = 0
	}
	c.line("#define AT_MPL %d", mpl)
	fold := csize == 0 && attentionFold(rows, G, D, Dv, split, nsplit, int(accBytes), pre, ks)
	c.line("#define AT_FOLD %d", b2i(fold))
	c.line("#define AT_CLUSTER %d", csize)
	c.line("#define AT_WARPS %d", warps)
	c.line("#define AT_KPW %d", kpw)
	nkv := wsize > 0 && attentionNewKV(k, q.dt, T, Dv)
	c.line("#define AT_NEWKV %d", b2i(nkv))
	if nkv {
		l := k.NewKV.Src.Layout // [2, B, KV, 1, D]
		c.line("#define AT_NK_OFF %dll", l.Offset)
		c.line("#define AT_NV_OFF %dll", l.Offset+l.Strides[0])
		c.line("#define AT_NK_SB %dll", l.Strides[1])
		c.line("#define AT_NK_SH %dll", l.Strides[2])
	}
	for _, kv := range []struct {
		name string
		v    int
	}{{"AT_ROWS", rows}, {"AT_T", T}, {"AT_H", H}, {"AT_KV", KV}, {"AT_G", G}, {"AT_S", S}, {"AT_D", D},
		{"AT_DQ", max(D, 1)}, {"AT_DV", Dv}, {"AT_SPLIT", split}, {"AT_NSPLIT", nsplit}} {
		c.line("#define %s %dll", kv.name, kv.v)
	}
	for _, o := range []struct {
		p string
		l ir.Layout
	}{{"AT_Q", q.l}, {"AT_K", kk.l}, {"AT_V", v.l}} {
		c.line("#define %s_OFF %dll", o.p, o.l.Offset)
		for i, sfx := range []string{"SB", "SH", "ST", "SD"} {
			name := sfx
			if o.p != "AT_Q" && sfx == "ST" {
				name = "SS" // keys and values: the key axis
			}
			c.line("#define %s_%s %dll", o.p, name, o.l.Strides[i])
		}
	}
	c.line("#define AT_S_OFF %dll", st.l.Offset)
	c.line("#define AT_S_SB %dll", st.l.Strides[0])
	p := &planned{
		base:   fmt.Sprintf("attention_%v", q.dt),
		config: c.String(),
		body:   attentionHIP,
		entries: fmt.Sprintf(`
#if AT_WARPS && AT_NEWKV
extern "C" __global__ void __launch_bounds__(AT_THREADS) __cluster_dims__(1, AT_CLUSTER, 1) %[1]s_part(const V_T* __restrict__ q, const V_T* __restrict__ k, const V_T* __restrict__ v, const unsigned int* __restrict__ start, V_T* __restrict__ y, const V_T* __restrict__ nkv) { loom_grid_defer();
  attention_warps(q, k, v, start, y, nkv);
}
#elif AT_WARPS
extern "C" __global__ void __launch_bounds__(AT_THREADS) __cluster_dims__(1, AT_CLUSTER, 1) %[1]s_part(const V_T* __restrict__ q, const V_T* __restrict__ k, const V_T* __restrict__ v, const unsigned int* __restrict__ start, V_T* __restrict__ y) { loom_grid_entry();
  attention_warps(q, k, v, start, y, (const V_T*)0);
}
#elif AT_CLUSTER
extern "C" __global__ void __launch_bounds__(AT_THREADS) __cluster_dims__(1, AT_CLUSTER, 1) %[1]s_part(const V_T* __restrict__ q, const V_T* __restrict__ k, const V_T* __restrict__ v, const unsigned int* __restrict__ start, V_T* __restrict__ y) { loom_grid_entry();
  attention_part(q, k, v, start, (AT_A*)0 AT_FOLD_ARGS);
}
#else
extern "C" __global__ void __launch_bounds__(AT_THREADS) %[1]s_part(const V_T* __restrict__ q, const V_T* __restrict__ k, const V_T* __restrict__ v, const unsigned int* __restrict__ start, AT_A* __restrict__ part AT_FOLD_PARAMS) { loom_grid_entry();
  attention_part(q, k, v, start, part AT_FOLD_ARGS);
}
#endif
extern "C" __global__ void __launch_bounds__(AT_THREADS) %[1]s_merge(const AT_A* __restrict__ part, V_T* __restrict__ y) { loom_grid_entry();
  attention_merge(part, y);
}
`, namePlaceholder),
		scratch: []ScratchBuf{{Bytes: scratch}},
	}
	bs := [3]uint32{uint32(threads), 1, 1}
	gx := uint32(min(rows, maxGrid))
	if csize > 0 {
		// The cluster's blocks are a row's splits (grid y: one cluster
		// along it, attention.hip's __cluster_dims__).
		p.scratch = nil
		args := []Arg{{Operand, q.in}, {Operand, kk.in}, {Operand, v.in}, {Operand, st.in}, {Kind: Output}}
		if nkv {
			args = append(args, Arg{Kind: AheadInPlace})
		}
		p.launch = []Launch{{Name: "_part", Grid: [3]uint32{gx, uint32(nsplit), 1}, Block: bs, Args: args}}
		return p, nil
	}
	partArgs := []Arg{{Operand, q.in}, {Operand, kk.in}, {Operand, v.in}, {Operand, st.in}, {Kind: Scratch, Index: 0}}
	if fold {
		p.launch = []Launch{{Name: "_part", Grid: [3]uint32{gx, uint32(nsplit), 1}, Block: bs,
			Args: append(partArgs, Arg{Kind: Counters}, Arg{Kind: Output})}}
		return p, nil
	}
	mx := uint32(min((rows*G+attentionMergeItems-1)/attentionMergeItems, maxGrid))
	p.launch = []Launch{
		{Name: "_part", Grid: [3]uint32{gx, uint32(nsplit), 1}, Block: bs, Args: partArgs},
		{Name: "_merge", Grid: [3]uint32{mx, 1, 1}, Block: bs,
			Args: []Arg{{Kind: Scratch, Index: 0}, {Kind: Output}}},
	}
	return p, nil
}

// cFloat is v as a C literal of type acc ("float" or "double") that
// rounds to v's value in that type.
func cFloat(v float64, acc string) string {
	if acc == "float" {
		return fmt.Sprintf("%.9ef", float32(v))
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.17e", v)
}

package kernels

import (
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// TestAttentionPrefetch checks when the attention part kernel issues all
// its loads at once (AT_PRE) and each thread's share of them.
func TestAttentionPrefetch(t *testing.T) {
	for _, c := range []struct {
		g, d, dv, split, acc int
		pre                  bool
		kper, vper, ks       int
	}{
		{4, 64, 64, 32, 4, true, 8, 8, 4},      // a 1B llama's decode step
		{4, 128, 128, 32, 4, true, 16, 16, 2},  // wide heads
		{4, 64, 64, 256, 4, false, 1, 1, 1},    // 64 values a thread: too many registers
		{16, 8, 8, 32, 8, true, 1, 1, 32},      // f64, narrow heads
		{17, 64, 64, 32, 4, false, 1, 1, 1},    // too many heads a group
		{4, 64, 300, 32, 4, false, 1, 1, 1},    // a value row wider than the block
		{4, 0, 8, 32, 4, false, 1, 1, 1},       // no head dim
		{16, 128, 128, 32, 4, true, 16, 16, 2}, // f32: queries, scores and sums fit 48 KiB
		{16, 128, 128, 32, 8, false, 1, 1, 1},  // f64: they would not
	} {
		pre, kper, vper, ks := attentionPrefetch(attentionThreads, c.g, c.d, c.dv, c.split, c.acc)
		if pre != c.pre || kper != c.kper || vper != c.vper || ks != c.ks {
			t.Errorf("attentionPrefetch(%d, %d, %d, %d, %d) = %v, %d, %d, %d; want %v, %d, %d, %d",
				c.g, c.d, c.dv, c.split, c.acc, pre, kper, vper, ks, c.pre, c.kper, c.vper, c.ks)
		}
		if pre && (c.g*(c.d+c.split+2)+ks*c.g*c.dv)*c.acc > attentionShared*4 {
			t.Errorf("%+v: prefetch over the shared memory bound", c)
		}
	}
}

// TestAttentionFold checks when the part launch merges the splits itself
// (AT_FOLD): a counter a row, and the merge's shared memory beside the
// part kernel's within 48 KiB.
func TestAttentionFold(t *testing.T) {
	for _, c := range []struct {
		name                                   string
		rows, g, d, dv, split, nsplit, acc, ks int
		pre, fold                              bool
	}{
		{"1B decode step", 8, 4, 64, 64, 32, 32, 4, 4, true, true},
		{"batch-8 decode step", 64, 4, 64, 64, 32, 32, 4, 4, true, true},
		{"prefill of 512", 4096, 4, 64, 64, 256, 2, 4, 1, false, true},
		{"rows past the counters", CounterWords + 1, 4, 64, 64, 256, 2, 4, 1, false, false},
		{"f32, 100 splits of 16 heads", 1, 16, 8, 8, 32, 100, 4, 32, true, true},
		{"f64, 100 splits of 16 heads", 1, 16, 8, 8, 32, 100, 8, 32, true, false},
		{"too many (head, split) pairs", 1, 16, 8, 8, 32, 200, 4, 32, true, false},
	} {
		if got := attentionFold(c.rows, c.g, c.d, c.dv, c.split, c.nsplit, c.acc, c.pre, c.ks); got != c.fold {
			t.Errorf("%s: attentionFold = %v, want %v", c.name, got, c.fold)
		}
	}
}

// TestAttentionCluster checks when the part launch takes the cluster form
// (AT_CLUSTER) and its geometry: one pass of 8·split threads over at most
// 8 blocks a row, on NVIDIA sm_90+ only.
func TestAttentionCluster(t *testing.T) {
	h200 := codegen.Target{Platform: codegen.NVIDIA, Arch: "sm_90"}
	for _, c := range []struct {
		name                   string
		tg                     codegen.Target
		rows, s, g, d, dv, acc int
		size, split, threads   int
	}{
		{"1B decode step", h200, 8, 1024, 4, 64, 64, 4, 8, 128, 1024},
		{"window of 600", h200, 8, 600, 4, 64, 64, 4, 5, 128, 1024},
		{"window of 256", h200, 8, 256, 4, 64, 64, 4, 8, 32, 256},
		{"one key", h200, 1, 1, 1, 1, 1, 4, 1, 32, 256},
		{"batch-8 decode step", h200, 64, 512, 4, 64, 64, 4, 8, 64, 512},
		{"a window past one cluster", h200, 8, 2048, 4, 64, 64, 4, 0, 0, 0},
		{"too many rows", h200, 512, 1024, 4, 64, 64, 4, 0, 0, 0},
		{"sm_80", codegen.Target{Platform: codegen.NVIDIA, Arch: "sm_80"}, 8, 1024, 4, 64, 64, 4, 0, 0, 0},
		{"AMD", codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}, 8, 1024, 4, 64, 64, 4, 0, 0, 0},
		{"f64 wide heads: shared memory", h200, 4, 300, 8, 128, 128, 8, 0, 0, 0},
		{"f32 wide heads", h200, 4, 300, 8, 128, 128, 4, 5, 64, 512},
		{"value rows wider than the block", h200, 1, 50, 2, 8, 260, 4, 0, 0, 0},
	} {
		size, split, threads := attentionCluster(c.tg, c.rows, c.s, c.g, c.d, c.dv, c.acc)
		if size != c.size || split != c.split || threads != c.threads {
			t.Errorf("%s: attentionCluster = %d, %d, %d; want %d, %d, %d", c.name, size, split, threads, c.size, c.split, c.threads)
		}
		if size > 0 && (size*split < c.s || (size-1)*split >= c.s || threads != 8*split) {
			t.Errorf("%s: %d blocks of %d keys for %d keys", c.name, size, split, c.s)
		}
	}
}

// TestAttentionWarpForm checks where the warp form applies and its
// geometry: a cluster of size blocks of warps warps of kpw keys, covering
// the S keys with less than a block's worth to spare.
func TestAttentionWarpForm(t *testing.T) {
	h200 := codegen.Target{Platform: codegen.NVIDIA, Arch: "sm_90"}
	cache := func(kv, s, d int) ir.Layout { return ir.Contiguous([]int{1, kv, s, d}) }
	window := ir.Layout{Dims: []int{1, 8, 600, 64}, Strides: []int{8 * 2048 * 64, 2048 * 64, 64, 1}}
	bf, f32 := dtype.BF16, dtype.F32
	for _, c := range []struct {
		name              string
		tg                codegen.Target
		rows, s, g, d, dv int
		dt                dtype.DType
		k, v              ir.Layout
		size, warps, kpw  int
	}{
		{"1B decode step", h200, 8, 1024, 4, 64, 64, bf, cache(8, 1024, 64), cache(8, 1024, 64), 8, 16, 8},
		{"window of 600", h200, 8, 600, 4, 64, 64, bf, cache(8, 600, 64), cache(8, 600, 64), 8, 10, 8},
		{"2,048 keys", h200, 2, 2048, 2, 64, 64, bf, cache(1, 2048, 64), cache(1, 2048, 64), 8, 32, 8},
		{"33 keys", h200, 3, 33, 2, 64, 64, bf, cache(3, 33, 64), cache(3, 33, 64), 5, 1, 8},
		{"wide heads, 8 query heads a key head: 16 keys a warp", h200, 2, 1000, 8, 128, 128, bf, cache(2, 1000, 128), cache(2, 1000, 128), 8, 8, 16},
		{"f32 heads of 64", h200, 8, 1024, 4, 64, 64, f32, cache(8, 1024, 64), cache(8, 1024, 64), 8, 16, 8},
		{"heads of 32 in f32", h200, 8, 1024, 4, 32, 32, f32, cache(8, 1024, 32), cache(8, 1024, 32), 8, 16, 8},
		{"f32 heads of 256: 1 KB keys", h200, 8, 1024, 4, 256, 256, f32, cache(8, 1024, 256), cache(8, 1024, 256), 0, 0, 0},
		{"a window of a longer cache", h200, 8, 600, 4, 64, 64, bf, window, ir.Layout{Dims: window.Dims, Strides: window.Strides, Offset: 8 * 2048 * 64}, 8, 10, 8},
		{"2,049 keys: 16 keys a warp", h200, 2, 2049, 2, 64, 64, bf, cache(1, 2049, 64), cache(1, 2049, 64), 8, 17, 16},
		{"too many rows", h200, 512, 1024, 4, 64, 64, bf, cache(8, 1024, 64), cache(8, 1024, 64), 0, 0, 0},
		{"9 query heads a key head", h200, 2, 100, 9, 64, 64, bf, cache(1, 100, 64), cache(1, 100, 64), 0, 0, 0},
		{"heads of 32 in bf16: 2-byte value pieces", h200, 2, 100, 2, 32, 32, bf, cache(1, 100, 32), cache(1, 100, 32), 0, 0, 0},
		{"f64", h200, 2, 100, 2, 64, 64, dtype.F64, cache(1, 100, 64), cache(1, 100, 64), 0, 0, 0},
		{"keys strided along D", h200, 2, 100, 2, 64, 64, bf, ir.Layout{Dims: []int{1, 1, 100, 64}, Strides: []int{6400, 6400, 1, 100}}, cache(1, 100, 64), 0, 0, 0},
		{"keys off a 16-byte boundary", h200, 2, 100, 2, 64, 64, bf, ir.Layout{Dims: []int{1, 1, 100, 64}, Strides: []int{6400, 6400, 64, 1}, Offset: 4}, cache(1, 100, 64), 0, 0, 0},
		{"sm_80", codegen.Target{Platform: codegen.NVIDIA, Arch: "sm_80"}, 8, 1024, 4, 64, 64, bf, cache(8, 1024, 64), cache(8, 1024, 64), 0, 0, 0},
		{"AMD", codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}, 8, 1024, 4, 64, 64, bf, cache(8, 1024, 64), cache(8, 1024, 64), 0, 0, 0},
	} {
		size, warps, kpw := attentionWarpForm(c.tg, c.rows, c.s, c.g, c.d, c.dv, c.dt, c.k, c.v)
		if size != c.size || warps != c.warps || kpw != c.kpw {
			t.Errorf("%s: attentionWarpForm = %d, %d, %d; want %d, %d, %d", c.name, size, warps, kpw, c.size, c.warps, c.kpw)
		}
		if size > 0 && (size*warps*kpw < c.s || (size-1)*warps*kpw >= c.s || size > attentionClusterMax || warps > attentionWarpsMax) {
			t.Errorf("%s: %d blocks of %d warps of %d keys for %d keys", c.name, size, warps, kpw, c.s)
		}
	}
}

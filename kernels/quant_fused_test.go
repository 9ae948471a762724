package kernels

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/quant"
)

// TestQMVFVec checks that QMVFFused instantiates each format's one-row
// mat-vec with the load width quant.hip's own instantiation has.
func TestQMVFVec(t *testing.T) {
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^LOOM_QMVF3\((\w+), (\d+)\)`).FindAllStringSubmatch(quantHIP, -1) {
		v, _ := strconv.Atoi(m[2])
		got[m[1]] = v
	}
	if len(got) != len(qmvfVec) {
		t.Fatalf("quant.hip instantiates %v, qmvfVec is %v", got, qmvfVec)
	}
	for f, v := range qmvfVec {
		if got[f] != v {
			t.Errorf("%s: quant.hip loads %d bytes, qmvfVec says %d", f, got[f], v)
		}
	}
}

// TestQMVFFusedRefuses checks QMVFFused's errors: an entry that is not a
// one-row mat-vec.
func TestQMVFFusedRefuses(t *testing.T) {
	for _, e := range []string{"loom_qmvq_q4_k_bf16", "loom_qmvf_q8_1_bf16", "loom_qmvf_q8_k_bf16", "loom_qmvf_q4_k_u8", "loom_qmvf_"} {
		if _, _, err := QMVFFused(codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}, e, nil, nil); err == nil {
			t.Errorf("QMVFFused(%q): no error", e)
		}
	}
}

// TestQMVFPaths checks the host's picture of loom_qmvf's unit path against
// quant.hip (each qu_* struct's UV and UB, and which formats' entries call
// qmv1 with a unit) and the path, rows a group and shared memory it gives
// for the shapes that matter: W13 (K = 4096), a 1B llama's K = 2048 and
// 8192, K too large to stage (14336), K not a multiple of the unit, an
// unaligned weight, AMD and an NVIDIA GPU without cp.async.
func TestQMVFPaths(t *testing.T) {
	units := map[string][4]int{}
	for _, m := range regexp.MustCompile(`struct qu_(\w+) \{\n  static constexpr int UV = (\d+), UB = (\d+), KSTEP = (\d+), SUMS = (\d+);`).FindAllStringSubmatch(quantHIP, -1) {
		uv, _ := strconv.Atoi(m[2])
		ub, _ := strconv.Atoi(m[3])
		ks, _ := strconv.Atoi(m[4])
		sums, _ := strconv.Atoi(m[5])
		units[m[1]] = [4]int{uv, ub, ks, sums}
	}
	calls := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#define QMVF_CALL_(\w+)\(V, X\) qmv1<qf_\w+<V>, qu_(\w+), X>`).FindAllStringSubmatch(quantHIP, -1) {
		if m[1] != m[2] {
			t.Errorf("QMVF_CALL_%s uses qu_%s", m[1], m[2])
		}
		calls[m[1]] = true
	}
	for _, f := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q6_K, quant.Q5_K, quant.Q2_K, quant.Q3_K, quant.Q4_1, quant.Q5_0, quant.Q5_1} {
		u, ok := units[f.String()]
		// The activations' bytes the kernel's SUMS implies (K values, K/32
		// steps, K/SUMS sums) against the host's, at K = 2048.
		act := int64(2048 + 2048/32*4 + 2048*4/max(u[3], 1))
		// Every format has a QMVF_CALL (Q4_1, Q5_0, Q5_1 with qu_none's
		// typedefs); a unit only where the host knows one.
		if ok != (QMVFUnit(f) != 0) || !calls[f.String()] || u[0] != QMVFUnit(f) || int64(u[1]) != qmvfUnits[f].bytes || int64(u[2]) != qmvfUnits[f].kstep || ok && act != qmvfActBytes(f, 2048) {
			t.Errorf("%v: quant.hip unit %v (called: %v); QMVFUnit %d, %d bytes, K a multiple of %d, activations %d bytes at K 2048", f, u, calls[f.String()], QMVFUnit(f), qmvfUnits[f].bytes, qmvfUnits[f].kstep, qmvfActBytes(f, 2048))
		}
	}
	h200 := codegen.Target{Platform: codegen.NVIDIA, Arch: "sm_90"}
	for _, c := range []struct {
		f       quant.Type
		k       int64
		aligned bool
		target  codegen.Target
		path    int
		rows    int
		shared  int64
		threads int
	}{
		{quant.Q4_0, 4096, true, h200, QMVFStaged, 2, 5120 + 8*32*144, 256},
		{quant.Q4_K, 2048, true, h200, QMVFStaged, 4, 2560 + 8*32*144, 256},
		{quant.Q4_K, 8192, true, h200, QMVFStaged, 1, 10240 + 8*32*144, 256},
		{quant.Q8_0, 4096, true, h200, QMVFStaged, 1, 5120 + 8*32*136, 256},
		{quant.Q8_0, 768, true, h200, QMVFStaged, 4, 960 + 8*32*136, 256},
		{quant.Q4_0, 14336, true, h200, QMVFUnits, 1, 14336 * 11 / 8, 256},
		{quant.Q4_0, 3072, true, h200, QMVFStaged, 2, 3840 + 8*32*144, 256},
		{quant.Q4_0, 800, true, h200, QMVFChunks, QMVFRows, 800 * 11 / 8, 256},
		{quant.Q4_0, 4096, false, h200, QMVFChunks, QMVFRows, 4096 * 11 / 8, 256},
		{quant.Q6_K, 4096, true, h200, QMVFStaged, 2, 5120 + 4*32*210, 128},
		{quant.Q6_K, 14336, true, h200, QMVFStaged, 1, 17920 + 4*32*210, 128},
		{quant.Q6_K, 3072, true, h200, QMVFChunks, QMVFRows, 3072 * 11 / 8, 256},
		{quant.Q6_K, 2048, false, h200, QMVFChunks, QMVFRows, 2048 * 11 / 8, 256},
		{quant.Q6_K, 2048, true, codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}, QMVFUnits, 4, 2048 * 11 / 8, 256},
		{quant.Q4_K, 4096, true, codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}, QMVFUnits, 2, 4096 * 11 / 8, 256},
		{quant.Q4_K, 4096, true, codegen.Target{Platform: codegen.NVIDIA, Arch: "sm_75"}, QMVFUnits, 2, 4096 * 11 / 8, 256},
		{quant.Q5_K, 2048, true, h200, QMVFStaged, 4, 2560 + 4*32*176, 128},
		{quant.Q5_K, 8192, true, h200, QMVFStaged, 1, 10240 + 4*32*176, 128},
		{quant.Q5_K, 14336, true, h200, QMVFStaged, 1, 17920 + 4*32*176, 128},
		{quant.Q5_K, 4096, false, h200, QMVFChunks, QMVFRows, 4096 * 11 / 8, 256},
		{quant.Q5_K, 4096, true, codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}, QMVFUnits, 2, 4096 * 11 / 8, 256},
		{quant.Q3_K, 2048, true, h200, QMVFStaged, 4, 2560 + 8*32*110, 256},
		{quant.Q3_K, 4096, true, h200, QMVFStaged, 2, 5120 + 8*32*110, 256},
		{quant.Q3_K, 14336, true, h200, QMVFStaged, 1, 17920 + 8*32*110, 256},
		{quant.Q3_K, 3072, true, h200, QMVFChunks, QMVFRows, 3072 * 11 / 8, 256},
		{quant.Q3_K, 4096, false, h200, QMVFChunks, QMVFRows, 4096 * 11 / 8, 256},
		{quant.Q3_K, 4096, true, codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}, QMVFUnits, 2, 4096 * 11 / 8, 256},
		{quant.Q2_K, 1024, true, h200, QMVFStaged, 8, 1408 + 8*32*84, 256},
		{quant.Q2_K, 3072, true, h200, QMVFStaged, 2, 4224 + 8*32*84, 256},
		{quant.Q2_K, 14336, true, h200, QMVFStaged, 1, 19712 + 8*32*84, 256},
		{quant.Q2_K, 2560, true, h200, QMVFChunks, QMVFRows, 2560 * 11 / 8, 256},
		{quant.Q2_K, 4096, false, h200, QMVFChunks, QMVFRows, 4096 * 11 / 8, 256},
	} {
		path := QMVFPathFor(c.f, c.k, c.aligned, c.target)
		rows, shared, threads := QMVFRowsPerGroup(c.f, c.k, path), QMVFShared(c.f, c.k, path), QMVFThreadsFor(c.f, path)
		if path != c.path || rows != c.rows || shared != c.shared || threads != c.threads {
			t.Errorf("%v K=%d aligned %v on %v: path %d, %d rows a group, %d bytes, %d threads; want %d, %d, %d, %d", c.f, c.k, c.aligned, c.target, path, rows, shared, threads, c.path, c.rows, c.shared, c.threads)
		}
		if shared > QMVFMaxShared {
			t.Errorf("%v K=%d: %d bytes of shared memory, over %d", c.f, c.k, shared, QMVFMaxShared)
		}
	}
}

package kernels

import (
	_ "embed"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/quant"
)

//go:embed quant.hip
var quantHIP string

// QuantSource returns the translation unit of the GGML block-format kernels
// for t: dequantization of every supported block format to f32, f16 and
// bf16, and the mat-vec (decode) product of a quantized weight with up to
// QMVMaxRows activation rows. One compile serves every quantized step.
func QuantSource(t codegen.Target) string { return codegen.PreludeFor(t, quantHIP) + quantHIP }

// QMVMaxRows is the most activation rows one mat-vec launch takes.
const QMVMaxRows = 8

// QMVThreads is the mat-vec's block size: QMVRowsPerBlock groups of 32
// lanes, one weight row per group.
const (
	QMVThreads      = 256
	QMVRowsPerBlock = 8
)

func quantName(t quant.Type) (string, bool) {
	switch t {
	case quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.Q8_1,
		quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q8_K:
		return t.String(), true
	}
	return "", false
}

func halfName(d dtype.DType) (string, bool) {
	switch d {
	case dtype.F32:
		return "f32", true
	case dtype.F16:
		return "f16", true
	case dtype.BF16:
		return "bf16", true
	}
	return "", false
}

// DequantEntry names the kernel dequantizing t to out (f32, f16, bf16).
func DequantEntry(t quant.Type, out dtype.DType) (string, error) {
	q, ok := quantName(t)
	o, ok2 := halfName(out)
	if !ok || !ok2 {
		return "", fmt.Errorf("kernels: no dequantization of %v to %v", t, out)
	}
	return "loom_dequant_" + q + "_" + o, nil
}

// DequantWordEntry names the word-load dequantization of t to out
// (quant.hip's loom_dequantw_*: Q4_0, Q8_0, Q4_K, Q5_K and Q6_K, a group of 32
// threads 1024 outputs, 32 a thread; the source and the output 16-byte
// aligned and the count a multiple of 256), and reports whether there is
// one.
func DequantWordEntry(t quant.Type, out dtype.DType) (string, bool) {
	o, ok := halfName(out)
	if t != quant.Q4_0 && t != quant.Q8_0 && t != quant.Q4_K && t != quant.Q5_K && t != quant.Q6_K || !ok {
		return "", false
	}
	q, _ := quantName(t)
	return "loom_dequantw_" + q + "_" + o, true
}

// Dequant8Entry names the dequantization of t to out with 8 outputs a
// thread stored at once (quant.hip's loom_dequant8_*: DequantEntry's
// arithmetic and bits; the output 16-byte aligned; a thread per 8
// outputs), and reports whether there is one (every format and output
// DequantEntry takes).
func Dequant8Entry(t quant.Type, out dtype.DType) (string, bool) {
	name, err := DequantEntry(t, out)
	if err != nil {
		return "", false
	}
	return strings.Replace(name, "loom_dequant_", "loom_dequant8_", 1), true
}

// QMVEntry names the mat-vec kernel of weight format t with activations
// (and output) of dtype x. The activation formats Q8_1 and Q8_K have none.
func QMVEntry(t quant.Type, x dtype.DType) (string, error) {
	q, ok := quantName(t)
	o, ok2 := halfName(x)
	if !ok || !ok2 || t == quant.Q8_1 || t == quant.Q8_K {
		return "", fmt.Errorf("kernels: no quantized mat-vec of %v weights with %v activations", t, x)
	}
	return "loom_qmv_" + q + "_" + o, nil
}

// QMVWordThreads and QMVWordRowsPerBlock are the word-load mat-vec's block
// size and weight rows a block (32 lanes a row).
const (
	QMVWordThreads      = 128
	QMVWordRowsPerBlock = 4
)

// QMVWordEntry names the word-load mat-vec of weight format t with
// activations (and output) of dtype x for m activation rows (1 ≤ m ≤
// QMVMaxRows; one row has its own kernel), and the alignment in bytes its
// weight rows need; ok is false where there is none (formats other than
// Q4_0, Q8_0, Q4_K and Q6_K). Its activations must be 16-byte aligned with
// a row stride of whole 16-byte units.
func QMVWordEntry(t quant.Type, x dtype.DType, m int) (name string, align int, ok bool) {
	o, ok := halfName(x)
	if !ok {
		return "", 0, false
	}
	switch t {
	case quant.Q4_0, quant.Q8_0, quant.Q6_K:
		align = 2
	case quant.Q4_K:
		align = 16
	default:
		return "", 0, false
	}
	name = "loom_qmvw_" + t.String() + "_" + o
	if m == 1 {
		name += "_m1"
	}
	return name, align, true
}

// Q8XEntry names the kernel quantizing activations of dtype x to the 8-bit
// blocks the loom_qmvq_* mat-vecs read: x [M, K] (contiguous, K a
// multiple of 32) → qa [M·K] int8, dx [M·K/32] f32 block steps, sx
// [M·K/16] f32 sums of 16 values (Q8XBytes in all); a thread per 4 values
// (FlatLaunch of M·K/4).
func Q8XEntry(x dtype.DType) (string, bool) {
	o, ok := halfName(x)
	return "loom_q8x_" + o, ok
}

// Q8XBytes is the scratch Q8XEntry's output takes for n = M·K values,
// laid out qa, dx, sx (for n a multiple of 32 each part starts 4-byte
// aligned, as its floats need; qa at the start of the allocation, 16-byte
// aligned for the mat-vecs' 16-byte loads).
func Q8XBytes(n int64) int64 { return n + n/32*4 + n/16*4 }

// QMVQEntry names the mat-vec of weight format t on 8-bit activations
// (Q8XEntry's) with output dtype x, for m activation rows (one row has its
// own kernel); ok is false where there is none (Q8_1 and Q8_K, the
// activations' formats). Its block size is the word-load kernels'
// (QMVWordThreads); its weight rows must be aligned to QMVQAlign(t) bytes.
func QMVQEntry(t quant.Type, x dtype.DType, m int) (name string, ok bool) {
	o, ok := halfName(x)
	if !ok || QMVQAlign(t) == 0 {
		return "", false
	}
	name = "loom_qmvq_" + t.String() + "_" + o
	if m == 1 {
		name += "_m1"
	}
	return name, true
}

// QMVQAlign is the alignment in bytes loom_qmvq_* needs of its weight
// rows in format t (Q4_K's and Q5_K's 16-byte quant loads, Q2_K's, Q4_1's
// and Q5_1's 4-byte ones; the others read 2 bytes at a time or through
// aligned windows), 0 for a format without that kernel.
func QMVQAlign(t quant.Type) int {
	switch t {
	case quant.Q4_K, quant.Q5_K:
		return 16
	case quant.Q2_K:
		return 4
	case quant.Q4_1, quant.Q5_1:
		return 4
	case quant.Q4_0, quant.Q5_0, quant.Q8_0, quant.Q6_K, quant.Q3_K:
		return 2
	}
	return 0
}

// QMVTEntry names the mat-vec of weight format t on 8-bit activations
// (Q8TEntry's tiles) on the tensor cores' integer MMA (loom_qmvt_*), with
// output dtype x, for 2 … QMVMaxRows activation rows on target; ok is
// false where there is none: formats other than Q4_0, Q8_0, Q4_K, Q5_K and
// Q6_K, or a target other than NVIDIA sm_80 and later (the mma.sync and
// cp.async instructions; elsewhere QMVQEntry's dp4a kernel does the job).
// A block of QMVTThreads threads takes QMVTRows weight rows (grid
// ⌈N/QMVTRows⌉); K must be a multiple of QMVTStep(t) and the weight rows
// aligned to QMVTAlign(t) bytes. Arguments: w, qt, dt, st (Q8TEntry's
// output), y, M (i32), K, N, rowBytes, ldy (i64).
func QMVTEntry(t quant.Type, x dtype.DType, target codegen.Target) (name string, ok bool) {
	if target.Platform != codegen.NVIDIA {
		return "", false
	}
	// The host asks for every product of 2–8 rows: no Sscanf there.
	if nvidiaSM(target) < 80 {
		return "", false
	}
	return qmvtName(t, x)
}

func qmvtName(t quant.Type, x dtype.DType) (string, bool) {
	switch t {
	case quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K:
	default:
		return "", false // no tensor-core step (quant.hip's qt_*)
	}
	name, ok := QMVQEntry(t, x, QMVMaxRows)
	if !ok {
		return "", false
	}
	name = strings.Replace(name, "loom_qmvq_", "loom_qmvt_", 1)
	if t == quant.Q6_K && qmvtQ6KFloat {
		name = qmvtQ6KFloatName(name)
	}
	return name, true
}

// qmvtQ6KFloatName is the float-scaled form's name (qt_q6_k_f) of a Q6_K
// tensor-core mat-vec name.
func qmvtQ6KFloatName(name string) string {
	return strings.Replace(name, "loom_qmvt_q6_k_", "loom_qmvt_q6_k_f_", 1)
}

// qmvtQ6KFloat makes Q6_K's tensor-core mat-vec scale each k16 MMA's sums
// in floats (loom_qmvt_q6_k_f_*, quant.hip's qt_q6_k_f) instead of summing
// a 32-value block's two in integers first: LOOM_QMVT_Q6K=f, for
// comparison.
var qmvtQ6KFloat = os.Getenv("LOOM_QMVT_Q6K") == "f"

// Q8TEntry names the kernel quantizing activations of dtype x for
// loom_qmvt (NVIDIA only, as QMVTEntry): x [M, K] (contiguous, M ≤ 8, K a
// multiple of 32) → qt [K/32][8][32] int8, dt [K/32][8] f32 block steps,
// st [K/32][8] f32 sums of each block's 32 values (Q8TBytes(K) in all,
// whatever M); a thread per 4 values (FlatLaunch of M·K/4). Arguments: x,
// qt, dt, st, M·K/4, K (i64).
func Q8TEntry(x dtype.DType) (string, bool) {
	o, ok := halfName(x)
	return "loom_q8t_" + o, ok
}

// Q8TBytes is the scratch Q8TEntry's output takes for rows of k values,
// laid out qt (8k bytes), dt (k bytes), st (k bytes).
func Q8TBytes(k int64) int64 { return 10 * k }

// QMVTThreads is loom_qmvt's block size (QMVT_WARPS warps in quant.hip)
// and QMVTRows the weight rows a block takes (the MMA's 16).
const (
	QMVTThreads = 128
	QMVTRows    = 16
)

// QMVTStep is what K must be a multiple of for loom_qmvt in format t: a
// k-quant's super-block, or the 8 blocks of Q4_0 and Q8_0 a warp stages
// at a time (whole 16-byte units).
func QMVTStep(t quant.Type) int { return 256 }

// QMVTAlign is the alignment loom_qmvt needs of each weight row: 16 where
// it copies rows with 16-byte loads (Q4_0, Q8_0, Q4_K, Q5_K; with K a
// multiple of QMVTStep their rows are whole 16-byte units), 2 for Q6_K
// (2-byte loads).
func QMVTAlign(t quant.Type) int {
	if t == quant.Q6_K {
		return 2
	}
	return 16
}

// QMVTEntries lists loom_qmvt's entry points: QuantSource has them for
// NVIDIA targets only.
func QMVTEntries() []string {
	var out []string
	for _, t := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		for _, d := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			n, _ := qmvtName(t, d)
			out = append(out, n)
			if t == quant.Q6_K && !qmvtQ6KFloat {
				out = append(out, qmvtQ6KFloatName(n)) // for LOOM_QMVT_Q6K=f
			}
			if t == quant.Q4_0 {
				n, _ := Q8TEntry(d)
				out = append(out, n)
			}
		}
	}
	return out
}

// QMVFEntry names the one-launch mat-vec on 8-bit activations
// (loom_qmvf_*: each block quantizes x into shared memory, then its
// groups of 32 lanes walk the weight rows) of weight format t with
// activations and output of dtype x; ok is false where there is none
// (Q8_1 and Q8_K). It takes one
// activation row (more rows take Q8XEntry + QMVQEntry, faster there),
// launches QMVFThreads threads a block with QMVFSharedBytes(K) bytes of
// dynamic shared memory (at most QMVFMaxShared), needs K a multiple of
// QMVFChunk(t), the weight rows aligned to QMVFAlign(t) bytes and x
// contiguous. Arguments: w, x, y, K (i64), N (i64), rowBytes (i64), path
// (i32: QMVFPathFor's, with QMVFShared's shared memory and
// QMVFRowsPerGroup's rows a group).
func QMVFEntry(t quant.Type, x dtype.DType) (name string, ok bool) {
	o, ok := halfName(x)
	if QMVFAlign(t) == 0 || !ok {
		return "", false
	}
	return "loom_qmvf_" + t.String() + "_" + o, true
}

// QMVFAlign is the alignment in bytes loom_qmvf needs of its weight rows
// in format t, 0 for a format without that kernel: its chunks are read as
// loom_qmvq reads them (QMVQAlign; Q3_K's through 2-byte-aligned windows
// in one and 2-byte loads in the other; Q5_0's two blocks at a time as
// aligned words, 4), and its units need 16 bytes, which the host checks
// apart (QMVFPathFor).
func QMVFAlign(t quant.Type) int {
	if t == quant.Q5_0 {
		return 4 // two blocks a chunk, read as aligned words (quant.hip's qf_q5_0)
	}
	return QMVQAlign(t)
}

// qmvfVec is the weight load width (bytes) of loom_qmvf per format, as
// quant.hip instantiates it (LOOM_QMVF3; TestQMVFVec compares).
var qmvfVec = map[string]int{"q4_0": 8, "q8_0": 8, "q4_k": 16, "q6_k": 4, "q5_k": 16, "q2_k": 4, "q3_k": 4,
	"q4_1": 4, "q5_0": 4, "q5_1": 4}

// QMVFFused returns the translation unit and entry name of the one-row
// mat-vec entry (a QMVFEntry name) fused with the epilogue of fused
// quantized matmul kernel k (parts from plan.SplitFused, no prologue): row
// n's result, rounded to the activations' dtype as entry stores it, goes
// through the epilogue at flat index n of k's output, which k.Out's dtype
// then holds. A quantized model's decode step adds the residual as its
// output and down projections store, and its LM head casts its logits,
// without launches of their own. The entry takes QMVFEntry's arguments —
// w, x, y (k's output), K, N, rowBytes, path — then one pointer per operand of
// k, in k.Ins order, and the launch QMVFEntry's does. It is for one
// activation row: the flat index of row n of the output is n.
func QMVFFused(t codegen.Target, entry string, k *plan.Kernel, parts *plan.FusedParts) (name, code string, err error) {
	rest, ok := strings.CutPrefix(entry, "loom_qmvf_")
	i := strings.LastIndex(rest, "_")
	if !ok || i < 0 {
		return "", "", fmt.Errorf("kernels: %q is not a one-row quantized mat-vec", entry)
	}
	format, xd := rest[:i], rest[i+1:]
	vec, ok := qmvfVec[format]
	if _, ok2 := gemvTypes[xd]; !ok || !ok2 {
		return "", "", fmt.Errorf("kernels: %q is not a one-row quantized mat-vec", entry)
	}
	if parts.Pre != nil || parts.Post == nil {
		return "", "", fmt.Errorf("kernels: %s: a fused quantized mat-vec takes an epilogue and no prologue", k.Name)
	}
	x := "qmvw_x_" + xd
	// The weight's first stage ahead of the wait (quant.hip's DEFER): where
	// the step before does not write it unless LOOM_QMV_DEFER=0.
	w := parts.CoreIns
	deferLoads := qmvDeferOn && len(w) > 1 && w[1] >= 0 && w[1] < len(k.Ahead) && k.Ahead[w[1]]
	var fn, call, store string
	if k.PairEpilogue {
		// A pair epilogue: rows 2j and 2j+1 (a lane's two rows by chunks,
		// neighbouring rows of a group's step by units: the host checks
		// kernels.QMVFRowsPerGroup) go through the epilogue at j.
		// Keeping every element (plan.Kernel.PairKeep), the pair stores
		// both its outputs, at 2j and 2j+1.
		fn, err = codegen.ScalarFuncPair(parts.Post, "loom_post", parts.PostPair[0], parts.PostPair[1], true)
		call = fmt.Sprintf("qmv1<qf_%s<%d>, qu_%s, %s, true, %v>", format, vec, format, x, deferLoads)
		args := strings.Join(append(partPointers(parts.PostIns), x+"::st(v0)", x+"::st(v1)"), ", ")
		store = fmt.Sprintf("[=](long long j, float v0, float v1) { y[j] = loom_post(%s, (unsigned long long)j); }", args)
		if k.PairKeep {
			store = fmt.Sprintf("[=](long long j, float v0, float v1) { const unsigned long long at = 2ull * (unsigned long long)j; "+
				"y[at] = loom_post(%[1]s, at); y[at + 1] = loom_post(%[1]s, at + 1); }", args)
		}
	} else {
		fn, err = codegen.ScalarFunc(parts.Post, "loom_post", parts.PostValue, true)
		call = fmt.Sprintf("qmv1<qf_%s<%d>, qu_%s, %s, false, %v>", format, vec, format, x, deferLoads)
		store = fmt.Sprintf("[=](long long n, float v) { y[n] = loom_post(%s); }",
			strings.Join(append(partPointers(parts.PostIns), x+"::st(v)", "(unsigned long long)n"), ", "))
	}
	if err != nil {
		return "", "", fmt.Errorf("kernels: %s epilogue: %w", k.Name, err)
	}
	var b strings.Builder
	b.WriteString("#define QMVF_FUSED 1\n")
	b.WriteString(fn)
	b.WriteString(quantHIP)
	fmt.Fprintf(&b, `
extern "C" __global__ void __launch_bounds__(QMVF_THREADS) %s(const unsigned char* __restrict__ w,
    const %s::T* __restrict__ x, %s* __restrict__ y, long long K, long long N, long long rowBytes, int path%s) { %s
  %s(w, x, K, N, rowBytes, path, %s);
}
`, namePlaceholder, x, ctypes[k.Out.DType].storage, operandParams(k), map[bool]string{false: "loom_grid_entry();", true: "loom_grid_defer();"}[deferLoads], call, store)
	body := b.String()
	name, code = fusedUnit(t, body, entry)
	return name, code, nil
}

// DequantFused returns the translation unit and entry name of the
// dequantization of fused kernel k (a dequantize core with an epilogue:
// parts from plan.SplitFused) with the epilogue applied to every element
// as it is stored: element i, rounded to the dequantization's dtype as
// loom_dequant_* stores it, goes through the epilogue at flat index i of
// k's output, which k.Out's dtype then holds. The dequantized tensor is
// never written: a dequantize-then-scale (or cast, or add) is one pass
// over the quantized bytes and one over the output.
//
// word picks the body. With word (formats with a word-load
// dequantization, DequantWordEntry: Q4_0, Q8_0, Q4_K, Q6_K) it is that
// kernel's (quant.hip's qdw_<fmt>, same bits as loom_dequant_*), its 8
// outputs a thread passed through the epilogue and stored at once: the
// source and the output must be 16-byte aligned and n a multiple of 256;
// launch it as FlatLaunch(n/32). Without word it is loom_dequant_*'s
// (quant.hip's dq_<fmt>, GGML's order), 4 consecutive outputs a thread,
// any format, n a multiple of 32; launch it as FlatLaunch(n/4). Either is
// grid-stride. The entry takes src (the raw blocks), y (k's output) and
// n (the element count), then one pointer per operand of k in k.Ins
// order.
//
// The byte-wise body alone was measured on an H200 (W13ds-q4_k: 14336 ×
// 4096 Q4_K dequantized to bf16 and scaled by a row vector): 0.139 ms
// fused against 0.102 for the word-load dequantization and the multiply
// as two launches, so a format with a word-load kernel takes its body:
// 0.077 ms with it (the same call's unfused 0.102; session 49).
func DequantFused(t codegen.Target, k *plan.Kernel, parts *plan.FusedParts, word bool) (name, code string, err error) {
	if parts.Pre != nil || parts.Post == nil || k.PairEpilogue {
		return "", "", fmt.Errorf("kernels: %s: a fused dequantization takes an epilogue and no prologue", k.Name)
	}
	n := parts.Core.Instrs[0].Node
	f, _ := n.QuantFormat()
	tr, _ := f.Traits()
	q, ok := quantName(f)
	o, ok2 := halfName(n.DType)
	if !ok || !ok2 || n.Op != ir.OpDequantize {
		return "", "", fmt.Errorf("kernels: %s: no dequantization of %v to %v", k.Name, f, n.DType)
	}
	if word && !DequantFusedWord(f, n.DType) {
		return "", "", fmt.Errorf("kernels: %s: no word-load dequantization of %v", k.Name, f)
	}
	fn, err := codegen.ScalarFunc(parts.Post, "loom_post", parts.PostValue, true)
	if err != nil {
		return "", "", fmt.Errorf("kernels: %s epilogue: %w", k.Name, err)
	}
	round := map[string]string{"f32": "%s", "f16": "loom_f32_to_f16(%s)", "bf16": "loom_f32_to_bf16(%s)"}[o]
	post := func(v, i string) string {
		return "loom_post(" + strings.Join(append(partPointers(parts.PostIns), fmt.Sprintf(round, v), "(unsigned long long)("+i+")"), ", ") + ")"
	}
	out := ctypes[k.Out.DType].storage
	var b strings.Builder
	b.WriteString("#define QMVF_FUSED 1\n")
	b.WriteString(fn)
	b.WriteString(quantHIP)
	if !word {
		fmt.Fprintf(&b, `
extern "C" __global__ void __launch_bounds__(256) %s(const unsigned char* __restrict__ src,
    %s* __restrict__ y, long long n%s) {
  loom_grid_entry();
  for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n / 4; q += (long long)gridDim.x * blockDim.x) {
    const long long i = 4 * q;
    const unsigned char* b = src + (i / %d) * %d;
    const int e = (int)(i %% %d), g = e >> 4, r = e & 15;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const float v = dq_%s(b, g, r + t);
      y[i + t] = %s;
    }
  }
}
`, namePlaceholder, out, operandParams(k), tr.Block, tr.Size, tr.Block, q, post("v", "i + t"))
		name, code = fusedUnit(t, b.String(), "loom_dequant_"+q+"_"+o)
		return name, code, nil
	}
	// The output object qdw_<fmt> stores through (quant.hip's put8): the
	// operands as members, the 8 results gathered in registers and stored
	// 16 bytes at a time (the output is 16-byte aligned and i a multiple
	// of 8), or one by one for 1-byte outputs.
	var fields, init strings.Builder
	for i, op := range k.Ins {
		fmt.Fprintf(&fields, "  const %s* in%d;\n", ctypes[op.Buf.DType].storage, i)
		fmt.Fprintf(&init, "  o.in%d = in%d;\n", i, i)
	}
	bounds := "__launch_bounds__(256)"
	if (f == quant.Q4_K || f == quant.Q5_K) && dequantFusedCap {
		bounds = "QDW_Q4K_BOUNDS"
	}
	fmt.Fprintf(&b, `
struct QdwFused {
  typedef %[2]s T;
%[3]s  LOOM_DEV void put8(T* y, long long i, const float* v) const {
    union { T r[8]; uint4 u[(8 * sizeof(T) + 15) / 16]; } s;
#pragma unroll
    for (int t = 0; t < 8; ++t) s.r[t] = %[4]s;
    if (sizeof(T) >= 2) {
#pragma unroll
      for (int w = 0; w < (int)sizeof(T) / 2; ++w) reinterpret_cast<uint4*>(y + i)[w] = s.u[w];
    } else {
#pragma unroll
      for (int t = 0; t < 8; ++t) y[i + t] = s.r[t];
    }
  }
  LOOM_DEV void put8f(T* y, long long i, const float* v) const { put8(y, i, v); }
};
extern "C" __global__ void %[5]s %[1]s(const unsigned char* __restrict__ src,
    %[2]s* __restrict__ y, long long n%[6]s) {
  loom_grid_entry();
  QdwFused o;
%[7]s  qdw_%[8]s<QdwFused>(src, y, n, o);
}
`, namePlaceholder, out, fields.String(), post("v[t]", "i + t"), bounds, operandParams(k), init.String(), q)
	name, code = fusedUnit(t, b.String(), "loom_dequantw_"+q+"_"+o)
	return name, code, nil
}

// dequantFusedCap: the fused Q4_K (and Q5_K) word-load body keeps the plain kernel's
// register cap (QDW_Q4K_BOUNDS: 6 blocks of 256 a multiprocessor on
// NVIDIA); LOOM_DEQUANT_FUSED_CAP=0 drops it, to compare.
var dequantFusedCap = os.Getenv("LOOM_DEQUANT_FUSED_CAP") != "0"

// DequantFusedWord says whether a fused dequantization of t to out has a
// word-load body (DequantFused's word).
func DequantFusedWord(t quant.Type, out dtype.DType) bool {
	_, ok := DequantWordEntry(t, out)
	return ok
}

// qmvDeferOn: a fused one-row quantized mat-vec whose weight the step
// before does not write issues its first staged stage before it waits for
// the kernel ahead (quant.hip's DEFER); LOOM_QMV_DEFER=0 waits first, to
// compare. Measured on an H200 (1B-shaped model, Q4_K weights, alternating
// runs in one call): median decode step 0.573 ms against 0.628 ms waiting
// first; the weight's first stage (a quarter of a block's bytes) is in
// flight while the kernel ahead, the norm that computes the activations,
// finishes.
var qmvDeferOn = os.Getenv("LOOM_QMV_DEFER") != "0"

// QMVFChunk is the weights a lane of loom_qmvf takes at a time in format
// t (a chunk's struct in quant.hip): K must be a multiple of it.
func QMVFChunk(t quant.Type) int {
	if t == quant.Q4_K || t == quant.Q5_K || t == quant.Q5_0 {
		return 64
	}
	return 32
}

// QMVFThreads is loom_qmvf's block size; QMVFRows the weight rows a group
// of 32 lanes takes at once (QMVF_ROWS in quant.hip).
const (
	QMVFThreads = 256
	QMVFRows    = 2
)

// The paths of loom_qmvf, its argument path (quant.hip's qmv1): by
// 32-weight chunks, by units read from global memory, by units staged in
// shared memory.
const (
	QMVFChunks = 0
	QMVFUnits  = 1
	QMVFStaged = 2
)

// qmvfUnits are loom_qmvf's units (quant.hip's qu_* structs: a run of
// blocks that one lane takes whole, starting on a 16- or 8-byte boundary,
// or for Q6_K on a 2-byte one): their weights (UV) and bytes (UB), what K
// must be a multiple of (KSTEP: Q6_K's rows a multiple of 16 bytes) and
// the block size of the staged path (Q6_K's 32 units a group, 6,720
// bytes, leave room for 4 groups a block, not 8, within QMVFMaxShared).
var qmvfUnits = map[quant.Type]struct{ weights, bytes, kstep, threads int64 }{
	quant.Q4_0: {256, 144, 256, QMVFThreads}, quant.Q4_K: {256, 144, 256, QMVFThreads},
	quant.Q8_0: {128, 136, 128, QMVFThreads}, quant.Q6_K: {256, 210, 2048, QMVFThreads / 2},
	// Q5_K's 176-byte units: 4 groups a block (22,528 bytes of stage), so
	// that rows of up to ~20,000 weights stage within QMVFMaxShared (8
	// groups' 45,056 bytes would leave K at most 3,200).
	quant.Q5_K: {256, 176, 256, QMVFThreads / 2},
	// Q2_K's 84-byte and Q3_K's 110-byte units: rows of 16-byte multiples
	// take 4 and 8 units (K a multiple of 1,024 and 2,048); 8 groups a
	// block stage 21,504 and 28,160 bytes, leaving K up to ~21,000 and
	// ~16,000 (an 8B llama's 14,336) within QMVFMaxShared.
	quant.Q2_K: {256, 84, 1024, QMVFThreads}, quant.Q3_K: {256, 110, 2048, QMVFThreads},
}

// QMVFUnit is the weights of loom_qmvf's unit in format t, 0 for a format
// without one.
func QMVFUnit(t quant.Type) int { return int(qmvfUnits[t].weights) }

// qmvfUnitPath says whether K allows format t's unit path.
func qmvfUnitPath(t quant.Type, k int64) bool {
	u, ok := qmvfUnits[t]
	return ok && k%u.kstep == 0
}

// QMVFPathFor is the path loom_qmvf takes for format t, K weights a row
// and a weight aligned to 16 bytes or not, on target: by units where t has
// one, K is a multiple of its KSTEP and the weight is aligned; staged where,
// besides, the target is NVIDIA sm_80 or newer (cp.async) and
// QMVFStageBytes fits in QMVFMaxShared; else by chunks.
func QMVFPathFor(t quant.Type, k int64, aligned16 bool, target codegen.Target) int {
	if !qmvfUnitPath(t, k) || !aligned16 {
		return QMVFChunks
	}
	if target.Platform != codegen.NVIDIA || QMVFStageBytes(t, k) > QMVFMaxShared {
		return QMVFUnits
	}
	if nvidiaSM(target) < 80 {
		return QMVFUnits
	}
	return QMVFStaged
}

// QMVFThreadsFor is the block size of a loom_qmvf launch on path for
// format t: QMVFThreads, or fewer where t's staged path needs it.
func QMVFThreadsFor(t quant.Type, path int) int {
	if u, ok := qmvfUnits[t]; ok && path == QMVFStaged {
		return int(u.threads)
	}
	return QMVFThreads
}

// QMVFRowsPerGroup is the weight rows a group of 32 lanes of loom_qmvf
// takes at once on path for format t and K weights a row: QMVFRows by
// chunks; by units 32/P, P the lanes of a row (the power of two at or
// above the row's units, at most 32; quant.hip's qu_lanes).
func QMVFRowsPerGroup(t quant.Type, k int64, path int) int {
	if path == QMVFChunks || !qmvfUnitPath(t, k) {
		return QMVFRows
	}
	uv := int64(QMVFUnit(t))
	p := int64(1)
	for p < k/uv && p < 32 {
		p <<= 1
	}
	return int(32 / p)
}

// QMVFStageBytes is the shared memory loom_qmvf's staged path needs (the
// activations' qmvfActBytes, then 32 units for each group of lanes), or 0
// where t has no unit path for K.
func QMVFStageBytes(t quant.Type, k int64) int64 {
	if !qmvfUnitPath(t, k) {
		return 0
	}
	u := qmvfUnits[t]
	return qmvfActBytes(t, k) + u.threads/32*32*u.bytes
}

// qmvfActBytes is the unit path's activations in shared memory: K bytes
// of 8-bit values, K/32 steps and a sum every 32 values (Q2_K: every 16,
// a minimum each 16 weights; quant.hip's SUMS), 4 bytes each.
func qmvfActBytes(t quant.Type, k int64) int64 {
	if t == quant.Q2_K {
		return k + k/8 + k/4
	}
	return k + k/8 + k/8
}

// QMVFShared is the dynamic shared memory a loom_qmvf launch on path asks
// for: QMVFStageBytes staged, else QMVFSharedBytes (the chunk path's
// activation layout, which the unit path's fits in).
func QMVFShared(t quant.Type, k int64, path int) int64 {
	if path == QMVFStaged {
		return max(QMVFSharedBytes(k), QMVFStageBytes(t, k))
	}
	return QMVFSharedBytes(k)
}

// QMVFSharedBytes is the shared memory loom_qmvf needs for K activation
// values (Q8XBytes' layout), and QMVFMaxShared the most the host asks
// for (the default per-block limit of both platforms).
func QMVFSharedBytes(k int64) int64 { return Q8XBytes(k) }

const QMVFMaxShared = 48 << 10

// QuantEntries lists every entry point of QuantSource.
func QuantEntries() []string {
	var out []string
	for _, t := range []quant.Type{quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.Q8_1,
		quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.Q8_K} {
		for _, d := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
			n, _ := DequantEntry(t, d)
			out = append(out, n)
			if n, ok := DequantWordEntry(t, d); ok {
				out = append(out, n)
			}
			if n, ok := Dequant8Entry(t, d); ok {
				out = append(out, n)
			}
			if n, err := QMVEntry(t, d); err == nil {
				out = append(out, n)
			}
			for _, m := range []int{QMVMaxRows, 1} {
				if n, _, ok := QMVWordEntry(t, d, m); ok {
					out = append(out, n)
				}
				if n, ok := QMVQEntry(t, d, m); ok {
					out = append(out, n)
				}
			}
		}
	}
	for _, d := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		n, _ := Q8XEntry(d)
		out = append(out, n)
		for _, t := range []quant.Type{quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K} {
			n, _ := QMVFEntry(t, d)
			out = append(out, n)
		}
	}
	return out
}

// nvidiaSM is the compute capability of an NVIDIA target's Arch "sm_XY"
// as the number XY; 0 for AMD or an Arch that is not of that form.
func nvidiaSM(t codegen.Target) int {
	v, ok := strings.CutPrefix(t.Arch, "sm_")
	sm, err := strconv.Atoi(v)
	if t.Platform != codegen.NVIDIA || !ok || err != nil {
		return 0
	}
	return sm
}

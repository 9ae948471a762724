package kernels

import (
	"fmt"
	"strings"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/plan"
)

// A decode step's product with a row prologue (plan.Kernel.PreRowAxes: the
// RMSNorm before the q/k/v, gate/up and LM head products) runs as one
// launch: every block first computes the normalized rows it is about to
// read into its shared memory (loom_rowpre), then runs the product on
// them. The rows are a few kilobytes (a 1B llama's 2048 bf16 values), and
// the RMSNorm's own launch — 33 of a 1B decode step's ~173 — is gone.
// Each block sums its rows again rather than reading a stored sum: the
// product's blocks are one wave (loom_qmvf) or two (gemv), so the prologue
// costs each block a pass over 4 KB from L2, not a kernel boundary.

// RowPreMaxBytes is the most shared memory a block gives a row prologue's
// rows (M·K values of the product's input dtype); larger ones run as
// parts.
const RowPreMaxBytes = 16 << 10

// rowPreHIP computes a fused product's row prologue into shared memory.
// Every thread of the block calls it; it returns h after a barrier.
const rowPreHIP = `
// loom_rowpre: the block computes its product's input, M rows of K values,
// into h (plan.RowPrologue): each row's sum of pe over the row (each
// thread's share in k order, a butterfly of xor-shuffles within each wave,
// then the waves' sums in wave order, so every thread holds the same
// bits), the row value pr of that sum, and po of the row value at every
// element. LOOM_ROWPRE(h, M, K) calls it with the parts (LOOM_PRE_*) as
// lambdas over the kernel's operand pointers.
template <class T, class PE, class PR, class PO>
LOOM_DEV const T* loom_rowpre(T* h, int M, long long K, PE pe, PR pr, PO po) {
  __shared__ float part[1024 / 32];
  const int waves = (blockDim.x + LOOM_WAVE - 1) / LOOM_WAVE;
  for (int m = 0; m < M; ++m) {
    const unsigned long long base = (unsigned long long)m * (unsigned long long)K;
    float s = 0.f;
    for (long long k = threadIdx.x; k < K; k += blockDim.x) s += pe(base + (unsigned long long)k);
#pragma unroll
    for (int o = 1; o < LOOM_WAVE; o <<= 1) s += loom_shfl_xor(s, o);
    if (threadIdx.x % LOOM_WAVE == 0) part[threadIdx.x / LOOM_WAVE] = s;
    __syncthreads();
    s = 0.f;
    for (int w = 0; w < waves; ++w) s += part[w];
    const float r = pr(s, (unsigned long long)m);
    for (long long k = threadIdx.x; k < K; k += blockDim.x) h[base + (unsigned long long)k] = po(r, base + (unsigned long long)k);
    __syncthreads();
  }
  return h;
}
#define LOOM_ROWPRE(h, M, K) loom_rowpre((h), (M), (K), [=](unsigned long long i) { return LOOM_PRE_E(i); }, \
    [=](float s, unsigned long long m) { return LOOM_PRE_R(s, m); }, [=](float r, unsigned long long i) { return LOOM_PRE_O(r, i); })
`

// rowPre returns the device code of fused kernel k's row prologue (parts
// from plan.SplitFused, k.PreRowAxes > 0): its three parts as functions of
// the flat index (codegen.ScalarFunc), the LOOM_PRE_* macros over them —
// LOOM_PRE_ELEMS, the prologue's values — loom_rowpre and LOOM_ROWPRE. bytes is the
// shared memory the rows take.
func rowPre(k *plan.Kernel, parts *plan.FusedParts) (code string, bytes int, err error) {
	if parts.Pre == nil || k.PreRowAxes == 0 {
		return "", 0, fmt.Errorf("kernels: %s: a fused product's prologue must be a row kernel", k.Name)
	}
	rp, err := plan.SplitRowPrologue(parts.Pre)
	if err != nil {
		return "", 0, fmt.Errorf("kernels: %s: %w", k.Name, err)
	}
	bytes = parts.Pre.Out.Bytes()
	if bytes > RowPreMaxBytes {
		return "", 0, fmt.Errorf("kernels: %s: its prologue's rows take %d bytes, over %d", k.Name, bytes, RowPreMaxBytes)
	}
	// ptrs names the fused kernel's operands a part reads, in the part's
	// order, the value operand left out.
	ptrs := func(ins []int) []string {
		var ps []string
		for _, i := range ins {
			if i >= 0 {
				ps = append(ps, fmt.Sprintf("in%d", parts.PreIns[i]))
			}
		}
		return ps
	}
	call := func(fn string, ins []int, args ...string) string {
		return fmt.Sprintf("%s(%s)", fn, strings.Join(append(ptrs(ins), args...), ", "))
	}
	var b strings.Builder
	elem, err := codegen.ScalarFunc(rp.Elem, "loom_pre_e", -1, true)
	if err != nil {
		return "", 0, fmt.Errorf("kernels: %s prologue: %w", k.Name, err)
	}
	b.WriteString(elem)
	fmt.Fprintf(&b, "#define LOOM_PRE_ELEMS %d\n", parts.Pre.Out.Numel())
	fmt.Fprintf(&b, "#define LOOM_PRE_E(i) %s\n", call("loom_pre_e", rp.ElemIns, "(i)"))
	if rp.Row != nil {
		row, err := codegen.ScalarFunc(rp.Row, "loom_pre_r", rp.RowValue, true)
		if err != nil {
			return "", 0, fmt.Errorf("kernels: %s prologue: %w", k.Name, err)
		}
		b.WriteString(row)
		fmt.Fprintf(&b, "#define LOOM_PRE_R(s, m) %s\n", call("loom_pre_r", rp.RowIns, "(s)", "(m)"))
	} else {
		b.WriteString("#define LOOM_PRE_R(s, m) (s)\n")
	}
	out, err := codegen.ScalarFunc(rp.Out, "loom_pre_o", rp.OutValue, true)
	if err != nil {
		return "", 0, fmt.Errorf("kernels: %s prologue: %w", k.Name, err)
	}
	b.WriteString(out)
	if rp.OutValue >= 0 {
		fmt.Fprintf(&b, "#define LOOM_PRE_O(r, i) %s\n", call("loom_pre_o", rp.OutIns, "(r)", "(i)"))
	} else {
		fmt.Fprintf(&b, "#define LOOM_PRE_O(r, i) %s\n", call("loom_pre_o", rp.OutIns, "(i)"))
	}
	b.WriteString(rowPreHIP)
	return b.String(), bytes, nil
}

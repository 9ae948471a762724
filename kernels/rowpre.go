package kernels

import (
	"fmt"
	"os"
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

// rowPrePrefetch is false where LOOM_ROWPRE_PREFETCH=0: the skinny
// product does not ask L2 for its first weight rows before its prologue
// (for runs with and without side by side).
var rowPrePrefetch = os.Getenv("LOOM_ROWPRE_PREFETCH") != "0"

// RowPreMaxBytes is the most shared memory a block gives a row prologue's
// rows (M·K values of the product's input dtype); larger ones run as
// parts.
const RowPreMaxBytes = 16 << 10

// rowPreHIP computes a fused product's row prologue into shared memory.
// Every thread of the block calls it; it returns h after a barrier.
const rowPreHIP = `
// loom_rowpre: the block computes its product's input, LOOM_PRE_M rows of
// LOOM_PRE_K values, into h (plan.RowPrologue): each row's sum of pe over
// the row (each thread's runs of LOOM_PRE_V consecutive values in k
// order, a butterfly of xor-shuffles within each wave, then the waves'
// sums in wave order, so every thread holds the same bits), the row value
// pr of that sum, and po of the row value at every element. A run of 8
// (K a multiple of 8: codegen.ScalarFunc8) is one load a thread of each
// operand, so a block waits for L2 twice, not twice per element of its
// share. LOOM_ROWPRE(h) calls it with the parts (LOOM_PRE_*) as lambdas
// over the kernel's operand pointers.
template <class T, class PE, class PR, class PO>
LOOM_DEV const T* loom_rowpre(T* h, PE pe, PR pr, PO po) {
  constexpr int V = LOOM_PRE_V;
  __shared__ float part[1024 / 32];
  const int waves = (blockDim.x + LOOM_WAVE - 1) / LOOM_WAVE;
  for (int m = 0; m < LOOM_PRE_M; ++m) {
    const unsigned long long base = (unsigned long long)m * LOOM_PRE_K;
    float s = 0.f;
#pragma unroll 4
    for (int k = V * threadIdx.x; k < LOOM_PRE_K; k += V * blockDim.x) {
      float e[V];
      pe(base + (unsigned long long)k, e);
#pragma unroll
      for (int j = 0; j < V; ++j) s += e[j];
    }
#pragma unroll
    for (int o = 1; o < LOOM_WAVE; o <<= 1) s += loom_shfl_xor(s, o);
    if (threadIdx.x % LOOM_WAVE == 0) part[threadIdx.x / LOOM_WAVE] = s;
    __syncthreads();
    s = 0.f;
    for (int w = 0; w < waves; ++w) s += part[w];
    float r[V];
#pragma unroll
    for (int j = 0; j < V; ++j) r[j] = pr(s, (unsigned long long)m);
#pragma unroll 4
    for (int k = V * threadIdx.x; k < LOOM_PRE_K; k += V * blockDim.x) {
      __attribute__((aligned(16))) T o[V];
      po(r, base + (unsigned long long)k, o);
      if (V * sizeof(T) % 16 == 0) {
#pragma unroll
        for (int q = 0; q < (int)(V * sizeof(T) / 16); ++q)
          reinterpret_cast<uint4*>(h + base + k)[q] = reinterpret_cast<const uint4*>(o)[q];
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) h[base + k + j] = o[j];
      }
    }
    __syncthreads();
  }
  return h;
}
// loom_prefetch_l2 asks L2 for the line holding p (NVIDIA; elsewhere
// nothing): a product's first weight rows, requested before its prologue
// so that the weight stream starts while the block normalizes its input.
LOOM_DEV void loom_prefetch_l2(const void* p) {
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#endif
}
#define LOOM_ROWPRE(h) loom_rowpre((h), LOOM_PRE_EL, [=](float s, unsigned long long m) { return LOOM_PRE_R(s, m); }, LOOM_PRE_OL)
`

// rowPre returns the device code of fused kernel k's row prologue (parts
// from plan.SplitFused, k.PreRowAxes > 0): its three parts as functions of
// the flat index (codegen.ScalarFunc8 over runs of 8 where the row allows,
// else codegen.ScalarFunc), the LOOM_PRE_* macros over them — LOOM_PRE_ELEMS
// the prologue's values, LOOM_PRE_K and LOOM_PRE_M its rows — loom_rowpre
// and LOOM_ROWPRE. bytes is the
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
	// Runs of 8 where the row is whole runs of 8 and the parts take them
	// (ScalarFunc8 refuses values that depend on the flat index).
	kl := parts.Pre.RowLen()
	eight := kl%8 == 0
	var elem, out string
	if eight {
		elem, err = codegen.ScalarFunc8(rp.Elem, "loom_pre_e", -1, true)
		if err == nil {
			out, err = codegen.ScalarFunc8(rp.Out, "loom_pre_o", rp.OutValue, true)
		}
		eight = err == nil
	}
	v := 8
	if !eight {
		v = 1
		if elem, err = codegen.ScalarFunc(rp.Elem, "loom_pre_e", -1, true); err == nil {
			out, err = codegen.ScalarFunc(rp.Out, "loom_pre_o", rp.OutValue, true)
		}
		if err != nil {
			return "", 0, fmt.Errorf("kernels: %s prologue: %w", k.Name, err)
		}
	}
	b.WriteString(elem)
	b.WriteString(out)
	fmt.Fprintf(&b, "#define LOOM_PRE_ELEMS %d\n#define LOOM_PRE_K %d\n#define LOOM_PRE_M %d\n#define LOOM_PRE_V %d\n",
		parts.Pre.Out.Numel(), kl, parts.Pre.Out.Numel()/kl, v)
	// The element parts as lambdas of (flat index, V results), the value
	// broadcast to V copies for the out part.
	vals := "(r)"
	if v == 1 {
		vals = "(r)[0]"
	}
	if eight {
		fmt.Fprintf(&b, "#define LOOM_PRE_EL [=](unsigned long long i, float* e) { %s; }\n", call("loom_pre_e", rp.ElemIns, "i", "e"))
	} else {
		fmt.Fprintf(&b, "#define LOOM_PRE_EL [=](unsigned long long i, float* e) { e[0] = %s; }\n", call("loom_pre_e", rp.ElemIns, "i"))
	}
	oargs := []string{"i"}
	if rp.OutValue >= 0 {
		oargs = []string{vals, "i"}
	}
	if eight {
		fmt.Fprintf(&b, "#define LOOM_PRE_OL [=](const float* r, unsigned long long i, %s* o) { %s; }\n",
			ctypes[parts.Pre.Out.DType].storage, call("loom_pre_o", rp.OutIns, append(oargs, "o")...))
	} else {
		fmt.Fprintf(&b, "#define LOOM_PRE_OL [=](const float* r, unsigned long long i, %s* o) { o[0] = %s; }\n",
			ctypes[parts.Pre.Out.DType].storage, call("loom_pre_o", rp.OutIns, oargs...))
	}
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
	b.WriteString(rowPreHIP)
	return b.String(), bytes, nil
}

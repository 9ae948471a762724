package exec

import (
	"context"
	"fmt"
	"slices"

	"github.com/loomgraph/loom/plan"
)

// RunFusedParts runs fused kernel k (plan.CoreAt: a pool, an upsampling
// or a matmul with its prologue and epilogue) on e as the three kernels of
// plan.SplitFused — prologue, core, epilogue — over two temporaries it
// allocates from e and frees before returning. Executors that do not render
// the fused kernel as one (the CPU; the GPU where its GEMM is not a skinny
// product) run it this way; the values are those of the one kernel, since
// elementwise instructions compute every element alone. mem backs the
// plan's buffers, as in Run.
func RunFusedParts(ctx context.Context, e Executor, k *plan.Kernel, mem []Memory) (err error) {
	parts, err := FusedParts(k, len(mem))
	if err != nil {
		return err
	}
	all := slices.Clone(mem)
	for _, t := range parts.Temps {
		m, err := e.Alloc(t.Bytes(), plan.BufTemp)
		if err != nil {
			return fmt.Errorf("kernel %s: temporary %v: %w", k.Name, t, err)
		}
		defer e.Free(m)
		all = append(all, m)
	}
	for _, part := range []*plan.Kernel{parts.Pre, parts.Core, parts.Post} {
		if part == nil {
			continue
		}
		if err := e.Run(ctx, &plan.Step{Kernel: part}, all); err != nil {
			return err
		}
	}
	return nil
}

type fusedPartsKey struct{ buffers int }

// FusedParts returns fused kernel k's parts (plan.SplitFused) with
// temporaries numbered from buffers, kept in k's cache so that the parts'
// own caches (compiled programs, prepared GEMMs) last as long as the plan.
func FusedParts(k *plan.Kernel, buffers int) (*plan.FusedParts, error) {
	key := fusedPartsKey{buffers}
	if v, ok := k.Cache.Load(key); ok {
		return v.(*plan.FusedParts), nil
	}
	parts, err := plan.SplitFused(k, buffers)
	if err != nil {
		return nil, err
	}
	v, _ := k.Cache.LoadOrStore(key, parts)
	return v.(*plan.FusedParts), nil
}

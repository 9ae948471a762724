package exec

import (
	"context"
	"fmt"
	"slices"

	"github.com/loomgraph/loom/plan"
)

// RunWindowParts runs fused window kernel k (plan.WindowAt) on e as the
// three kernels of plan.SplitWindow — prologue, window, epilogue — over two
// temporaries it allocates from e and frees before returning. Executors
// that do not render the fused kernel as one (the CPU) run it this way; the
// values are those of the one kernel, since elementwise instructions
// compute every element alone. mem backs the plan's buffers, as in Run.
func RunWindowParts(ctx context.Context, e Executor, k *plan.Kernel, mem []Memory) (err error) {
	parts, err := windowParts(k, len(mem))
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
	for _, part := range []*plan.Kernel{parts.Pre, parts.Win, parts.Post} {
		if part == nil {
			continue
		}
		if err := e.Run(ctx, &plan.Step{Kernel: part}, all); err != nil {
			return err
		}
	}
	return nil
}

type windowPartsKey struct{ buffers int }

// windowParts returns k's parts with temporaries numbered from buffers,
// kept in k's cache so that the parts' own caches (compiled programs) last
// as long as the plan.
func windowParts(k *plan.Kernel, buffers int) (*plan.WindowParts, error) {
	key := windowPartsKey{buffers}
	if v, ok := k.Cache.Load(key); ok {
		return v.(*plan.WindowParts), nil
	}
	parts, err := plan.SplitWindow(k, buffers)
	if err != nil {
		return nil, err
	}
	v, _ := k.Cache.LoadOrStore(key, parts)
	return v.(*plan.WindowParts), nil
}

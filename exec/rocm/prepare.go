package rocm

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/plan"
)

var _ exec.Preparer = (*Executor)(nil)

// preparedKey marks a plan whose every GPU step is prepared on this executor.
type preparedKey struct{}

// compileWorkers bounds the kernels prepared at once. NVRTC compiles run in
// parallel (it is documented thread-safe); hiprtc's are serialised inside
// the compiler, so on AMD the bound only overlaps generation and disk reads.
var compileWorkers = runtime.NumCPU()

// Prepare generates, compiles (or finds in the code cache) and loads the
// kernel of every step of p that runs on the GPU, all at once, so that no
// run of p compiles: the generated kernels missing from both caches are
// compiled together in one translation unit (batch.go), then every step is
// readied with up to compileWorkers in flight, one compile per distinct
// source (the code cache's singleflight) for whatever is still missing. Steps that
// fall back to the CPU are left alone. On the first failure the other
// compiles are cancelled and whatever this call prepared is dropped from
// the plan's kernels (nothing stays half-prepared; compiled code objects
// stay in the code cache, which is harmless and speeds up a retry); the
// error names the step, the kernel and the first lines of the compiler log.
// Last, each distinct vendor GEMM call of the plan is made once on scratch
// operands (gemmwarm.go), so that the library's first-call cost of a
// shape is not the first run's.
func (e *Executor) Prepare(ctx context.Context, p *plan.Plan) error {
	if err := e.checkOpen(); err != nil {
		return err
	}
	if _, ok := p.Cache.Load(plan.KeyOf(e, preparedKey{})); ok {
		return nil
	}
	e.warmBatch(ctx, p)
	var (
		mu   sync.Mutex
		done []*plan.Kernel
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(compileWorkers)
	for i, s := range p.Steps {
		k := s.Kernel
		if e.prepared(k) || e.Supports(k) != nil {
			continue
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return fmt.Errorf("rocm: prepare step %d (%s): %w", i, k.Name, err)
			}
			var err error
			switch {
			case k.IsMatmul():
				_, err = e.prepareMatmul(k, p.AllowTF32)
			case k.IsFusedMatmul():
				err = e.prepareFusedMatmul(k, len(p.Buffers), p.AllowTF32)
			case k.IsFusedConv():
				err = e.prepareFusedConv(k, len(p.Buffers), p.AllowTF32)
			case k.IsFusedQMatmul():
				err = e.prepareFusedQMatmul(k, len(p.Buffers))
			case k.IsFusedDequant():
				err = e.prepareFusedDequant(k, len(p.Buffers))
			case isIndexKernel(k): // indexing, pools, upsampling
				_, err = e.prepareIndex(k)
			case k.IsWindow(): // convolutions
				err = e.prepareWindow(k, p.AllowTF32)
			case k.IsQuant():
				err = e.prepareQuant(k)
			case k.IsCollective():
				err = e.supportsCollective()
			default:
				_, err = e.prepare(k)
			}
			if err != nil {
				return &prepareError{step: i, kernel: k.Name, err: err}
			}
			mu.Lock()
			done = append(done, k)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		for _, k := range done {
			k.Cache.Delete(plan.KeyOf(e, nil))
			k.Cache.Delete(plan.KeyOf(e, indexKey{}))
			k.Cache.Delete(plan.KeyOf(e, matmulKey{}))
			if k.IsWindow() {
				k.Cache.Delete(plan.KeyOf(e, windowKey(k)))
			}
			k.Cache.Delete(plan.KeyOf(e, quantKey{}))
		}
		return err
	}
	e.warmGemms(ctx, p) // gemmwarm.go
	p.Cache.Store(plan.KeyOf(e, preparedKey{}), true)
	return nil
}

// prepared reports whether k's device form is already made on e.
func (e *Executor) prepared(k *plan.Kernel) bool {
	if k.IsMatmul() {
		_, ok := k.Cache.Load(plan.KeyOf(e, matmulKey{}))
		return ok
	}
	if k.IsFusedMatmul() || k.IsFusedConv() || k.IsFusedQuant() {
		return false // prepareFused* are cheap once their parts are
	}
	if isIndexKernel(k) {
		_, ok := k.Cache.Load(plan.KeyOf(e, indexKey{}))
		return ok
	}
	if k.IsWindow() {
		_, ok := k.Cache.Load(plan.KeyOf(e, windowKey(k)))
		return ok
	}
	if k.IsQuant() {
		_, ok := k.Cache.Load(plan.KeyOf(e, quantKey{}))
		return ok
	}
	if k.IsCollective() {
		return e.supportsCollective() == nil
	}
	_, ok := k.Cache.Load(plan.KeyOf(e, nil))
	return ok
}

// prepareError is a step that could not be prepared. Its message is short
// (the step, the kernel, the cause's first lines: for a failed compile the
// compiler log's first lines rather than the whole numbered source); the
// full error, source included, stays reachable with errors.As/Unwrap.
type prepareError struct {
	step   int
	kernel string
	err    error
}

// logLines is how many lines of a compile log a prepare error quotes.
const logLines = 6

func (e *prepareError) Error() string {
	var ce *compileError
	if errors.As(e.err, &ce) {
		var log []string
		for _, l := range strings.Split(strings.TrimSpace(ce.log), "\n") {
			if l = strings.TrimSpace(l); l != "" && len(log) < logLines {
				log = append(log, "    "+l)
			}
		}
		if len(log) == 0 {
			log = []string{"    (empty compiler log)"}
		}
		return fmt.Sprintf("rocm: prepare step %d (%s): compiling kernel %s for %s with %s failed:\n%s\n(LOOM_DUMP=<dir> writes the source and the whole log)",
			e.step, e.kernel, ce.name, ce.arch, ce.compiler, strings.Join(log, "\n"))
	}
	return fmt.Sprintf("rocm: prepare step %d (%s): %v", e.step, e.kernel, e.err)
}

func (e *prepareError) Unwrap() error { return e.err }

package rocm

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/kernels"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/quant"
)

// Fused quantized matmul kernels (plan.QMatmulAt: a qmatmul with the
// elementwise chain applied to its output; fuse gives it no prologue). A
// one-row product on the one-launch mat-vec (qmvfFor: a decode step with
// one sequence) runs as that launch with the epilogue applied to every
// element it stores (kernels.QMVFFused): a quantized model's output and
// down projections add the residual as they store, 32 launches fewer a 1B
// decode step, and its gate/up product stores silu(gate)·up of each pair
// of rows (a pair epilogue, where the launch's path gives a lane or a
// group's step both rows of a pair: qmvPairs), 16 fewer. Anything else — more rows, the other mat-vecs, a prefill's
// dequantize-and-GEMM — runs the parts (exec.RunFusedParts): the product,
// then the epilogue's kernel, as unfused.

// fusedQMVKey keys a fused quantized mat-vec's compiled form in
// plan.Kernel.Cache.
type fusedQMVKey struct{ entry string }

// fusedQMV returns fused kernel k's one-launch mat-vec for entry (a
// QMVFEntry name), compiled on first use.
func (e *Executor) fusedQMV(k *plan.Kernel, parts *plan.FusedParts, entry string) (*fusedMatmul, error) {
	return e.fusedUnit(k, fusedQMVKey{entry}, func() (string, string, error) {
		return kernels.QMVFFused(e.target, entry, k, parts)
	})
}

// fusedMemory returns a fused kernel's output and the base of each of its
// operands (operandBases), the arguments a one-launch fused kernel takes.
func (e *Executor) fusedMemory(k *plan.Kernel, mem []exec.Memory) (out hip.DevPtr, ops []hip.DevPtr, err error) {
	if out, err = e.span(mem, k.Out, k.Out.DType.Size(), 0, k.Out.Numel()); err != nil {
		return 0, nil, fmt.Errorf("rocm: %s output: %w", k.Name, err)
	}
	if ops, err = e.operandBases(k, mem); err != nil {
		return 0, nil, fmt.Errorf("rocm: %s %w", k.Name, err)
	}
	return out, ops, nil
}

// qmvPairs reports whether fused kernel k's epilogue can run inside the
// one-row mat-vec for weight pointer wp: always, but for a pair epilogue
// (plan.Kernel.PairEpilogue) only where the path the launch takes gives a
// lane or a group's step both rows of each pair (kernels.QMVFRowsPerGroup
// even) and the rows come in pairs.
func (e *Executor) qmvPairs(k *plan.Kernel, n *ir.Node, wp hip.DevPtr) bool {
	if !k.PairEpilogue {
		return true
	}
	f, K := n.QuantFormat()
	rows := kernels.QMVFRowsPerGroup(f, int64(K), e.qmvfPathFor(f, int64(K), wp))
	return rows >= 2 && rows%2 == 0 && n.Args[1].Shape[0]%2 == 0
}

// fusedQMatmulRows returns the qmatmul of a fused kernel's core part and
// its activation rows.
func fusedQMatmulRows(core *plan.Kernel) (*ir.Node, int64) {
	n := core.Instrs[0].Node
	_, K := n.QuantFormat()
	if K <= 0 {
		return n, 0
	}
	return n, int64(n.Args[0].Numel() / K)
}

// prepareFusedQMatmul readies a fused quantized matmul: the quantized
// kernels and the epilogue's kernel (the parts' path), and the fused
// mat-vec where a run may take it (one row; compiled for the aligned
// weight rows the allocator gives), so that a first run compiles nothing.
func (e *Executor) prepareFusedQMatmul(k *plan.Kernel, buffers int) error {
	parts, err := exec.FusedParts(k, buffers)
	if err != nil {
		return err
	}
	if err := e.prepareQuant(parts.Core); err != nil {
		return err
	}
	if parts.Post != nil {
		if _, err := e.prepare(parts.Post); err != nil {
			return err
		}
	}
	n, M := fusedQMatmulRows(parts.Core)
	if fname, ok := qmvfFor(n, M, 0); ok && parts.Pre == nil && parts.Post != nil && e.qmvPairs(k, n, 0) {
		_, err = e.fusedQMV(k, parts, fname)
	}
	return err
}

// runFusedQMatmul queues a fused quantized matmul: one mat-vec launch with
// the epilogue inside, or the parts.
func (e *Executor) runFusedQMatmul(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	parts, err := exec.FusedParts(k, len(mem))
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	core := parts.Core
	n, M := fusedQMatmulRows(core)
	if M != 1 || n.Numel() == 0 || parts.Pre != nil || parts.Post == nil || len(core.Ins) != 2 {
		return exec.RunFusedParts(ctx, partRunner{e}, k, mem)
	}
	if err := e.prepareQuant(core); err != nil {
		return err
	}
	f, K := n.QuantFormat()
	rb, err := ir.QuantRowBytes(f, K)
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	N := int64(n.Args[1].Shape[0])
	wp, err := e.span(mem, core.Ins[1].Buf, 1, core.Ins[1].Layout.Offset, int(N)*rb)
	if err != nil {
		return fmt.Errorf("rocm: %s weight: %w", k.Name, err)
	}
	fname, ok := qmvfFor(n, M, wp)
	if !ok || !e.qmvPairs(k, n, wp) {
		return exec.RunFusedParts(ctx, partRunner{e}, k, mem)
	}
	xp, err := e.span(mem, core.Ins[0].Buf, n.DType.Size(), core.Ins[0].Layout.Offset, K)
	if err != nil {
		return fmt.Errorf("rocm: %s activations: %w", k.Name, err)
	}
	out, ops, err := e.fusedMemory(k, mem)
	if err != nil {
		return err
	}
	fm, err := e.fusedQMV(k, parts, fname)
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	return e.qmvF(k.Name, fm.name, f, fm.fn, wp, xp, out, int64(K), N, int64(rb), ops)
}

// Fused dequantize kernels (plan.DequantAt: a dequantization with the
// elementwise chain that reads its values as its epilogue) run as one
// launch (kernels.DequantFused): the quantized bytes read once, the
// epilogue's output written once, the dequantized tensor never stored.
// An empty output, or an epilogue the kernel cannot take, runs the parts.

// fusedDequantKey keys a fused dequantization's compiled form (word-load
// body or byte-wise) in plan.Kernel.Cache.
type fusedDequantKey struct{ word bool }

// fusedDequant returns fused kernel k's one-launch dequantization with the
// word-load body or the byte-wise one (kernels.DequantFused), compiled on
// first use.
func (e *Executor) fusedDequant(k *plan.Kernel, parts *plan.FusedParts, word bool) (*fusedMatmul, error) {
	return e.fusedUnit(k, fusedDequantKey{word}, func() (string, string, error) {
		return kernels.DequantFused(e.target, k, parts, word)
	})
}

// dequantWord says whether a dequantization of count elements of f to d,
// from raw into out, takes the word-load kernel (exec/rocm/quant.go's
// dequant) or, fused, the word-load body.
func dequantWord(f quant.Type, d dtype.DType, raw, out hip.DevPtr, count int64) bool {
	return kernels.DequantFusedWord(f, d) && raw%16 == 0 && out%16 == 0 && count%256 == 0 && !dequantBytewise
}

// dequantOneLaunch says whether fused dequantization k with parts runs as
// one launch (kernels.DequantFused takes an epilogue, no prologue and no
// pairs; fuse gives it no other) rather than as its parts.
func dequantOneLaunch(k *plan.Kernel, parts *plan.FusedParts) bool {
	return parts.Pre == nil && parts.Post != nil && !k.PairEpilogue
}

// prepareFusedDequant readies a fused dequantization: its parts (the
// path an empty output takes) and the one launch.
func (e *Executor) prepareFusedDequant(k *plan.Kernel, buffers int) error {
	parts, err := exec.FusedParts(k, buffers)
	if err != nil {
		return err
	}
	if err := e.prepareQuant(parts.Core); err != nil {
		return err
	}
	if !dequantOneLaunch(k, parts) {
		return nil
	}
	if _, err := e.prepare(parts.Post); err != nil {
		return err
	}
	// The body a first run takes: buffers are 16-byte aligned, so the
	// word-load one wherever the format and the count allow it.
	n := parts.Core.Instrs[0].Node
	f, _ := n.QuantFormat()
	_, err = e.fusedDequant(k, parts, dequantWord(f, n.DType, 0, 0, int64(n.Numel())))
	return err
}

// runFusedDequant queues a fused dequantization: one launch with the
// epilogue inside, or the parts.
func (e *Executor) runFusedDequant(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	parts, err := exec.FusedParts(k, len(mem))
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	n := parts.Core.Instrs[0].Node
	if n.Numel() == 0 || !dequantOneLaunch(k, parts) {
		return exec.RunFusedParts(ctx, partRunner{e}, k, mem)
	}
	f, K := n.QuantFormat()
	rb, err := ir.QuantRowBytes(f, K)
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	count := int64(n.Numel())
	rows := count / int64(K)
	raw := parts.Core.Ins[0]
	src, err := e.span(mem, raw.Buf, 1, raw.Layout.Offset, int(rows)*rb)
	if err != nil {
		return fmt.Errorf("rocm: %s blocks: %w", k.Name, err)
	}
	out, ops, err := e.fusedMemory(k, mem)
	if err != nil {
		return err
	}
	word, per := dequantWord(f, n.DType, src, out, count), int64(4)
	if word {
		per = 32
	}
	fm, err := e.fusedDequant(k, parts, word)
	if err != nil {
		return fmt.Errorf("rocm: %s: %w", k.Name, err)
	}
	var a hip.Args
	a.Ptr(src).Ptr(out).I64(count)
	for _, p := range ops {
		a.Ptr(p)
	}
	grid, blk := kernels.FlatLaunch(int(count / per))
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	if err := e.launchDep(fm.fn, grid, blk, 0, &a); err != nil {
		return fmt.Errorf("rocm: %s: launch %s: %w", k.Name, fm.name, err)
	}
	e.launches.Add(1)
	fusedDequantLaunches.Add(1)
	if word {
		fusedDequantWordLaunches.Add(1)
	}
	return nil
}

// fusedDequantLaunches counts fused dequantizations run as one launch,
// fusedDequantWordLaunches those with the word-load body (tests check the
// path was taken).
var fusedDequantLaunches, fusedDequantWordLaunches atomic.Int64

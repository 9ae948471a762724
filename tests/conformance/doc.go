// Package conformance is Loom's executor conformance suite: exported test
// groups that every exec.Executor runs (the pattern of gonum's testblas).
//
// Every case builds a graph, compiles it with the IR verifier on after each
// pass, verifies the builder graph and the compiled graph once more with
// ir.Verify, runs the program on two executors whose fresh memory is
// poisoned with different bytes (0xFF, then 0x00: an element that a kernel
// never writes is NaN or 0xFF… in one run and 0 in the other, so it cannot
// match the reference in both), and compares every output with a reference
// computed here in float64 (floats) or exact int64 (integers). The reference
// does not call exec/cpu: it is written from the op semantics documented in
// ir/ops.go, graph/ops.go and shared/candle-kernels.md.
//
// Groups (each takes the executor factory and the compile options):
//
//	Elementwise  every op × every dtype its row in the op table claims × layouts
//	Chains       random multi-op graphs over exactly rounded ops (what fusion
//	             must keep bit for bit)
//	Views        reshape/permute/narrow/broadcast/squeeze chains, copies
//	Graph        hash-consing, verifier, compile snapshots, concurrent runs
//	Errors       every builder, compile and run error: message content, no panics
//	Formulas     known points of gelu, normcdf, round, casts …
//	Large        300k-element cases: many tiles, all workers
//	Matmul       matmul/mv/dot/linear × float dtypes × batch broadcasts ×
//	             operand views (in place and copied), empty dims, K = 16384;
//	             RMSNorm then linear (a decode step's chain), float and
//	             quantized (the Quant group's QNormMatmul)
//	Conv         conv1d/2d, conv_transpose1d/2d × stride, padding, dilation,
//	             groups, output padding × float dtypes × operand views,
//	             empty and degenerate shapes, the fused epilogue, Candle's
//	             expected values, builder errors
//
// Indexing and Pools (max/avg pools, nearest and bilinear upsampling:
// every parameter kind, dtype and input view, Candle's expected values,
// the builder errors) take only the executor factory: each runs every case
// fused and unfused itself.
//
// and, outside All (each runs from its own test in package tests):
//
//	Reductions   sum/max/min/arg*, mean, var, softmax, norms, rope …
//	Indexing     index ops, cat, slice_assign, argsort, fills
//	TensorAPI    issue 15: flip, pads, roll, repeat, stack, chunk/split,
//	             broadcast helpers, *_like, const_set, tril/triu/eye,
//	             log_sum_exp, norms, pow, round_to, topk, var, nll,
//	             cross_entropy, integer dot; also against the literal
//	             values of Candle's own tests
//	Scan         cumsum × every dtype × lengths around its chunks, groups and
//	             tiles × dims and layouts, bit for bit against ir/scan.go's
//	             order (run by tests/scan_test.go, not by All)
//
// Tolerances are in tolerance.go. Random inputs are drawn from a seed taken
// from the clock (or LOOM_SEED), logged when a group fails; each case derives
// its own generator from the seed and its test name, so `go test -run` with
// the same LOOM_SEED reproduces one case alone. (go test caches passing
// results: use -count=1 for fresh inputs.)
//
// An executor's test calls All, or the groups one by one:
//
//	func TestMine(t *testing.T) {
//		newExec := func(p byte) exec.Executor { return mine.New().Poison(p) }
//		conformance.All(t, newExec, graph.Options{})
//		conformance.All(t, newExec, graph.Options{NoFusion: true})
//	}
package conformance

import (
	"testing"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
)

// All runs every group as a subtest.
func All(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	t.Run("Elementwise", func(t *testing.T) { Elementwise(t, newExec, opts) })
	t.Run("Chains", func(t *testing.T) { Chains(t, newExec, opts) })
	t.Run("Views", func(t *testing.T) { Views(t, newExec, opts) })
	t.Run("Graph", func(t *testing.T) { Graph(t, newExec, opts) })
	t.Run("Errors", func(t *testing.T) { Errors(t, newExec) })
	t.Run("Formulas", func(t *testing.T) { Formulas(t, newExec, opts) })
	t.Run("Large", func(t *testing.T) { Large(t, newExec, opts) })
	t.Run("Matmul", func(t *testing.T) { Matmul(t, newExec, opts) })
	t.Run("Quant", func(t *testing.T) { Quant(t, newExec, opts) })
	t.Run("Conv", func(t *testing.T) { Conv(t, newExec, opts) })
	t.Run("Attention", func(t *testing.T) { Attention(t, newExec, opts) })
}

package graph

import (
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/ir"
)

// Losses, as candle-nn's loss module defines them.

// Nll is the negative log-likelihood loss (candle-nn's loss::nll):
// logProbs [N, C] holds log probabilities, targets [N] class ids (u8, u32
// or i64), and the result is the 0-d mean over the batch,
// −(1/N) Σ_i logProbs[i, targets[i]]. It gathers one element per row, so
// it costs a gather step and a sum. An id outside [0, C) makes the run
// fail with the gather's error (naming the id and its position); an id
// equal to its dtype's maximum is the index ops' sentinel, which reads 0:
// that row adds nothing but still counts in N. An empty batch gives NaN
// (0/0), as in Candle and PyTorch. f16/bf16 sum in float32 and round once.
func Nll(logProbs, targets *Tensor) *Tensor { return nll("nll", logProbs, targets, false) }

// CrossEntropy is the cross-entropy loss on raw logits [N, C] (candle-nn's
// loss::cross_entropy): Nll(LogSoftmax(logits, 1), targets), with targets
// and the result as in Nll. f16/bf16 logits are computed in float32 from
// the log-softmax to the mean (Candle computes in half), so the [N, C]
// log-probabilities are materialised in float32 (the gather is a barrier to
// fusion): twice the memory of half logits.
func CrossEntropy(logits, targets *Tensor) *Tensor {
	return nll("cross_entropy", logits, targets, true)
}

func nll(op string, x, targets *Tensor, logits bool) *Tensor {
	g, err := sameGraph(op, x, targets)
	if err != nil {
		return failOr(g, err)
	}
	what := "log probabilities"
	if logits {
		what = "logits"
	}
	dt := x.n.DType
	switch {
	case !dt.IsFloat():
		return g.fail(opErr(op, "%s must be a float tensor, got %v%v (targets %v%v)", what, dt, x.n.Shape, targets.n.DType, targets.n.Shape))
	case !ir.IDDTypes.Has(targets.n.DType):
		return g.fail(opErr(op, "targets dtype %v must be one of %v (%s %v%v, targets %v%v)", targets.n.DType, ir.IDDTypes, what, dt, x.n.Shape, targets.n.DType, targets.n.Shape))
	case x.Rank() != 2 || targets.Rank() != 1 || x.n.Shape[0] != targets.n.Shape[0]:
		return g.fail(opErr(op, "want %s [N, C] and targets [N], got %v%v and %v%v", what, dt, x.n.Shape, targets.n.DType, targets.n.Shape))
	case logits && x.n.Shape[1] == 0:
		return g.fail(opErr(op, "no classes: logits %v%v", dt, x.n.Shape))
	}
	half := narrowFloat(dt)
	if logits {
		if half {
			x = x.Cast(dtype.F32)
		}
		x = x.LogSoftmax(1)
	}
	picked := x.Gather(targets.Unsqueeze(1), 1) // [N, 1]
	if half && !logits {
		picked = picked.Cast(dtype.F32)
	}
	// −1/0 = −Inf for an empty batch: 0·(−Inf) is NaN.
	loss := picked.Sum(0, 1).Affine(-1/float64(x.n.Shape[0]), 0)
	if half {
		loss = loss.Cast(dt)
	}
	return loss
}

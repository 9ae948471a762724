package cpu

import (
	"context"
	"math"
	"sync"
	"sync/atomic"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// attention runs ir.OpAttention over whole operand tiles (runIndex loads
// them through their layouts; attentionDirect reads f32 and f64 keys and
// values in place): one output row (b, h, t) at a time on up to
// workers goroutines, in float64 (f64 is exact to the definition's
// tolerance; f32, f16 and bf16 round once on store). This is the Go twin
// of kernels/attention.hip, which computes the same sums in float32 in
// blocks of keys.
func attention(ctx context.Context, n *ir.Node, out, q, k, v, start tile, workers int) error {
	kr, vr := packedRows(n.Args[1].Shape), packedRows(n.Args[2].Shape)
	if out.f32 != nil {
		return attentionRows(ctx, n, out.f32, q.f32, k.f32, v.f32, kr, vr, start.i64, workers)
	}
	return attentionRows(ctx, n, out.f64, q.f64, k.f64, v.f64, kr, vr, start.i64, workers)
}

// rows4 addresses the rows of a [B, KV, S, D] operand whose last dim is
// contiguous: row (b, h, s) starts at off + b·sb + h·sh + s·ss (strides of
// 0 for broadcast dims).
type rows4 struct{ off, sb, sh, ss int }

func (r rows4) at(b, h, s int) int { return r.off + b*r.sb + h*r.sh + s*r.ss }

// packedRows is rows4 of a row-major array of shape.
func packedRows(shape []int) rows4 {
	return rows4{0, shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3]}
}

// attentionDirect runs an attention step whose keys and values are f32 (or
// f64) buffers of the compute type with a contiguous last dim (a decode
// step's window of the KV cache: a view with the cache's strides) straight
// from their buffers: each row reads only the keys it sees, where loading
// the operands whole copied every layer's window of the cache at every
// decode step. Queries, starts and the output go through tiles as in
// runIndex. It reports false (doing nothing) for other steps.
func attentionDirect(ctx context.Context, k *plan.Kernel, mem []exec.Memory, workers int) (bool, error) {
	n := k.Instrs[0].Node
	args := k.Instrs[0].Args
	for _, a := range args {
		if !a.Operand {
			return false, nil
		}
	}
	kind := n.DType.Kind()
	direct := func(op plan.Operand) (rows4, bool) {
		l := op.Layout
		if len(l.Dims) != 4 || l.Strides[3] != 1 || op.Buf.DType.Kind() != kind ||
			(op.Buf.DType != dtype.F32 && op.Buf.DType != dtype.F64) {
			return rows4{}, false
		}
		return rows4{l.Offset, l.Strides[0], l.Strides[1], l.Strides[2]}, true
	}
	kop, vop := k.Ins[args[1].Index], k.Ins[args[2].Index]
	kr, okK := direct(kop)
	vr, okV := direct(vop)
	if !okK || !okV {
		return false, nil
	}
	q := loadOperand(k.Ins[args[0].Index], mem)
	start := loadOperand(k.Ins[args[3].Index], mem)
	kb := asBuf(mem[kop.Buf.ID].(*memory).b, kop.Buf.DType)
	vb := asBuf(mem[vop.Buf.ID].(*memory).b, vop.Buf.DType)
	out := newTile(kind, n.Numel())
	var err error
	if out.f32 != nil {
		err = attentionRows(ctx, n, out.f32, q.f32, kb.f32, vb.f32, kr, vr, start.i64, workers)
	} else {
		err = attentionRows(ctx, n, out.f64, q.f64, kb.f64, vb.f64, kr, vr, start.i64, workers)
	}
	if err != nil {
		return true, err
	}
	store(asBuf(mem[k.Out.ID].(*memory).b, k.Out.DType), 0, out)
	return true, nil
}

// attentionRows is attention on one compute type's slices, the keys' and
// values' rows at kr and vr.
func attentionRows[F float32 | float64](ctx context.Context, n *ir.Node, out, q, k, v []F, kr, vr rows4, start []int64, workers int) error {
	qs, ks, vs := n.Args[0].Shape, n.Args[1].Shape, n.Args[2].Shape
	B, H, T, D := qs[0], qs[1], qs[2], qs[3]
	KV, S, Dv := ks[1], ks[2], vs[3]
	G := H / KV
	scale := n.Params[0]
	rows := B * H * T
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(workers, rows)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := make([]float64, S)
			acc := make([]float64, Dv)
			for {
				row := int(next.Add(1) - 1)
				if row >= rows || ctx.Err() != nil {
					return
				}
				b, h, t := row/(H*T), row/T%H, row%T
				kh := h / G
				// Keys s ≤ start + t (and s < S) are visible; start is
				// u32, so the bound is at least t ≥ 0: key 0 always is.
				vis := int(min(int64(S), start[b]+int64(t)+1))
				m := math.Inf(-1)
				qr := q[((b*H+h)*T+t)*D:][:D]
				for s := range vis {
					krow := k[kr.at(b, kh, s):][:D]
					dot := 0.0
					for d, qv := range qr {
						dot += float64(qv) * float64(krow[d])
					}
					x[s] = scale * dot
					m = math.Max(m, x[s])
				}
				clear(acc)
				sum := 0.0
				for s := range vis {
					p := math.Exp(x[s] - m) // NaN for every s when m is NaN or ±Inf
					sum += p
					for d, vv := range v[vr.at(b, kh, s):][:Dv] {
						acc[d] += p * float64(vv)
					}
				}
				o := out[((b*H+h)*T+t)*Dv:][:Dv]
				for d := range o {
					o[d] = F(acc[d] / sum)
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

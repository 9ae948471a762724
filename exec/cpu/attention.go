package cpu

import (
	"context"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// attention runs ir.OpAttention over whole operand tiles (runIndex loads
// them through their layouts; attentionDirect reads f32 and f64 keys and
// values in place): up to four query heads of a key head at one (b, t) at
// a time on up to workers goroutines, in float64 (f64 is exact to the
// definition's tolerance; f32, f16 and bf16 round once on store). This is
// the Go twin of kernels/attention.hip, which computes the same sums in
// float32 in blocks of keys.
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
// values' rows at kr and vr. A unit of work is up to four query heads of
// one key head (GQA's group) at one (b, t): each key and value row is read
// once for them, and their four sums are independent chains, where a head
// at a time read every row G times and waited on one float64 add after
// another (a 1B llama's CPU decode step spent more time here than in the
// products past a few hundred positions). Each head's arithmetic is the
// same as alone, in the same order (the results bit for bit those of one
// head at a time), except on float32 operands with AVX2 and FMA, where
// assembly sums four lanes of the head dim at a time with fused
// multiply-adds (float64 still, in another order) and the exponentials
// are float32's (vmath).
func attentionRows[F float32 | float64](ctx context.Context, n *ir.Node, out, q, k, v []F, kr, vr rows4, start []int64, workers int) error {
	qs, ks, vs := n.Args[0].Shape, n.Args[1].Shape, n.Args[2].Shape
	B, H, T, D := qs[0], qs[1], qs[2], qs[3]
	KV, S, Dv := ks[1], ks[2], vs[3]
	G := H / KV
	chunks := (G + attentionHeads - 1) / attentionHeads // units of a group
	scale := n.Params[0]
	units := B * KV * T * chunks
	// float32 operands on AVX2 and FMA: the four heads' dots and weighted
	// sums in assembly (dot4F64, axpy4F64: four lanes of d at a time, so
	// each head's sums are added in another order than one by one).
	_, isF32 := any(q).([]float32)
	simd := hasAttn4 && isF32 && D >= 4 && Dv >= 4
	var next atomic.Int64
	parallel(max(1, min(workers, units)), func(int) {
		var x [attentionHeads][]float64
		var acc [attentionHeads][]float64
		for i := range attentionHeads {
			x[i], acc[i] = make([]float64, S), make([]float64, Dv)
		}
		var x32, e32 []float32 // the simd path's exponentials
		if simd {
			x32, e32 = make([]float32, S), make([]float32, S)
		}
		for {
			u := int(next.Add(1) - 1)
			if u >= units || ctx.Err() != nil {
				return
			}
			// u = ((b·KV + kh)·T + t)·chunks + c
			c, t, kh, b := u%chunks, u/chunks%T, u/(chunks*T)%KV, u/(chunks*T*KV)
			h0 := kh*G + c*attentionHeads
			nh := min(attentionHeads, kh*G+G-h0)
			// Keys s ≤ start + t (and s < S) are visible; start is
			// u32, so the bound is at least t ≥ 0: key 0 always is.
			vis := int(min(int64(S), start[b]+int64(t)+1))
			var qr [attentionHeads][]F
			for i := range nh {
				qr[i] = q[((b*H+h0+i)*T+t)*D:][:D]
			}
			var m [attentionHeads]float64
			for i := range m {
				m[i] = math.Inf(-1)
			}
			// A unit of fewer heads (a group of 3, 7, 1, …: SmolLM's,
			// Qwen2-0.5B's, multi-head attention) takes the assembly
			// too, its missing heads repeating its first, whose results
			// are not kept: the scalar loop it took before was the
			// slower even for one head (BenchmarkAttentionDecode).
			for i := nh; i < attentionHeads; i++ {
				qr[i] = qr[0]
			}
			for s := range vis {
				krow := k[kr.at(b, kh, s):][:D]
				if simd {
					var o [4]float64
					n4 := D &^ 3
					dot4F64(rowF32(qr[0]), rowF32(qr[1]), rowF32(qr[2]), rowF32(qr[3]), rowF32(krow), n4, &o)
					for d := n4; d < D; d++ {
						for i := range o {
							o[i] += float64(qr[i][d]) * float64(krow[d])
						}
					}
					for i := range nh {
						x[i][s] = scale * o[i]
					}
				} else if nh == attentionHeads {
					q0, q1, q2, q3 := qr[0], qr[1], qr[2], qr[3]
					var d0, d1, d2, d3 float64
					for d, kv := range krow {
						kd := float64(kv)
						d0 += float64(q0[d]) * kd
						d1 += float64(q1[d]) * kd
						d2 += float64(q2[d]) * kd
						d3 += float64(q3[d]) * kd
					}
					x[0][s], x[1][s], x[2][s], x[3][s] = scale*d0, scale*d1, scale*d2, scale*d3
				} else {
					for i := range nh {
						dot := 0.0
						for d, qv := range qr[i] {
							dot += float64(qv) * float64(krow[d])
						}
						x[i][s] = scale * dot
					}
				}
				for i := range nh {
					m[i] = math.Max(m[i], x[i][s])
				}
			}
			// The weights e^(x − m), in x: NaN for every s when m is NaN
			// or ±Inf. The simd path takes them in float32 (vmath's exp,
			// within 2 ulps; the GPU's kernel takes expf), the others
			// in float64.
			for i := range nh {
				xi := x[i][:vis]
				if simd {
					for s, xv := range xi {
						x32[s] = float32(xv - m[i])
					}
					vmath(e32[:vis], x32[:vis], vExp)
					for s := range xi {
						xi[s] = float64(e32[s])
					}
					continue
				}
				for s, xv := range xi {
					xi[s] = math.Exp(xv - m[i])
				}
			}
			var sum [attentionHeads]float64
			for i := range nh {
				clear(acc[i])
			}
			for s := range vis {
				vrow := v[vr.at(b, kh, s):][:Dv]
				var p [attentionHeads]float64 // 0 for a unit's missing heads: their acc stays 0
				for i := range nh {
					p[i] = x[i][s]
					sum[i] += p[i]
				}
				if simd {
					n4 := Dv &^ 3
					axpy4F64(&acc[0][0], &acc[1][0], &acc[2][0], &acc[3][0], &p, rowF32(vrow), n4)
					for d := n4; d < Dv; d++ {
						for i := range p {
							acc[i][d] += p[i] * float64(vrow[d])
						}
					}
				} else if nh == attentionHeads {
					a0, a1, a2, a3 := acc[0][:Dv], acc[1][:Dv], acc[2][:Dv], acc[3][:Dv]
					for d, vv := range vrow {
						vd := float64(vv)
						a0[d] += p[0] * vd
						a1[d] += p[1] * vd
						a2[d] += p[2] * vd
						a3[d] += p[3] * vd
					}
				} else {
					for i := range nh {
						a := acc[i][:Dv]
						for d, vv := range vrow {
							a[d] += p[i] * float64(vv)
						}
					}
				}
			}
			for i := range nh {
				o := out[((b*H+h0+i)*T+t)*Dv:][:Dv]
				for d := range o {
					o[d] = F(acc[i][d] / sum[i])
				}
			}
		}
	})
	return ctx.Err()
}

// attentionHeads is how many query heads of a group a unit of attentionRows
// takes together.
const attentionHeads = 4

// rowF32 is the first element of a row of float32 operands, for the
// assembly (attentionRows' simd path, taken only when F is float32).
func rowF32[F float32 | float64](r []F) *float32 {
	return (*float32)(unsafe.Pointer(unsafe.SliceData(r)))
}

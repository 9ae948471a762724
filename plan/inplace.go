package plan

import (
	"slices"

	"github.com/loomgraph/loom/ir"
)

// InPlace lists the outputs that a run may write in the memory of an input
// (exec.Donate): output buffer ID → input buffer. An output qualifies when
// the step computing it is one scatter, scatter_add, index_add or
// slice_assign whose destination operand is an input buffer read whole
// (identity layout: offset 0, contiguous, the output's shape and dtype),
// and no step reads that input anywhere else — not the same step through
// another operand, not a later step, not as an output itself. Earlier
// steps may read it: executors run a plan's steps in order, each step's
// reads done before a later step writes (one stream on the GPU, where a
// programmatic launch's blocks wait for the kernel ahead to finish before
// any access), so a decode step's attention layers read the cache that one
// scatter after them updates (model's stacked cache). The step's
// kernel then reads each destination element before writing it, in the
// same thread, so the memory can be both: that is how the executors'
// index kernels are written (an executor that cannot do it simply does
// not implement exec.Donor). A model's decode step updates its KV cache
// this way: one new position written in place, not the whole cache copied.
// The map is computed once per plan and shared: callers must not change it.
func (p *Plan) InPlace() map[int]*Buffer {
	if m := p.inPlace.Load(); m != nil {
		return *m
	}
	m := p.inPlaceOf()
	p.inPlace.Store(&m)
	return m
}

func (p *Plan) inPlaceOf() map[int]*Buffer {
	// reads counts each buffer's operand reads; last is the last step
	// that reads it.
	reads, last := map[*Buffer]int{}, map[*Buffer]int{}
	for i, s := range p.Steps {
		for _, op := range s.Kernel.Ins {
			reads[op.Buf]++
			last[op.Buf] = i
		}
	}
	out := map[int]*Buffer{}
	for i, s := range p.Steps {
		k := s.Kernel
		if len(k.Instrs) != 1 || k.Out == nil || k.Out.Kind != BufOutput {
			continue
		}
		in := k.Instrs[0]
		switch in.Node.Op {
		case ir.OpScatter, ir.OpScatterAdd, ir.OpIndexAdd, ir.OpSliceAssign:
		default:
			continue
		}
		if len(in.Args) == 0 || !in.Args[0].Operand || in.Args[0].Broadcast {
			continue
		}
		dst := k.Ins[in.Args[0].Index]
		b := dst.Buf
		own := 0 // the step's own reads of b
		for _, op := range k.Ins {
			if op.Buf == b {
				own++
			}
		}
		if b.Kind != BufInput || own != 1 || last[b] != i || b.DType != k.Out.DType || !slices.Equal(b.Shape, k.Out.Shape) ||
			!dst.Layout.IsIdentity() || !slices.Equal(dst.Layout.Dims, k.Out.Shape) {
			continue
		}
		shared := false
		for _, a := range in.Args[1:] {
			if a.Operand && a.Index == in.Args[0].Index {
				shared = true
			}
		}
		if shared || slices.Contains(p.Outputs, b) {
			continue
		}
		out[k.Out.ID] = b
	}
	return out
}

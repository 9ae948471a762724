package plan

// MarkAhead sets every step's Kernel.Ahead: operand j of step i is marked
// when step i − 1 cannot write its memory — its buffer is not that step's
// output, shares no memory slot with it, and is not the input that output
// may be written into (InPlace). Step 0 marks nothing: the work queued
// ahead of a run (an earlier run's last step, which may have written
// anything the caller passes back in) is not known here. Executors run the
// steps in order, each after the one before has finished writing (on the
// GPU: a kernel launched with programmatic dependence starts once every
// block of the kernel ahead has passed its own wait, so everything before
// that kernel has finished; only the kernel ahead may still run). Call it
// once the steps are in their final order and the buffers have their
// slots.
func (p *Plan) MarkAhead() {
	inPlace := p.InPlace()
	for i, s := range p.Steps {
		k := s.Kernel
		k.Ahead = make([]bool, len(k.Ins))
		if i == 0 {
			continue
		}
		prev := p.Steps[i-1].Kernel.Out
		if prev == nil {
			continue // a step that writes nothing known here: mark nothing
		}
		for j, op := range k.Ins {
			b := op.Buf
			k.Ahead[j] = b != prev && !(b.Slot >= 0 && b.Slot == prev.Slot) && inPlace[prev.ID] != b
		}
	}
}

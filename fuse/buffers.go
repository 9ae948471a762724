package fuse

import "github.com/loomgraph/loom/plan"

// buffers assigns temporaries to memory slots. A temporary lives from the
// step that writes it to the last step that reads it; after that step it is
// free for any later step. (Not for the reading step's own output: a kernel
// may read its operands through arbitrary layouts, so writing over one would
// corrupt reads still to come.) Slots are reused best-fit: the smallest free
// slot that is large enough, else the largest free slot grown to fit, else a
// new slot. Inputs and outputs are not slotted: callers own them.
func buffers(s *State) error {
	p := s.Plan
	last := make([]int, len(p.Buffers))
	first := make([]int, len(p.Buffers))
	for i := range last {
		last[i], first[i] = -1, -1
	}
	for i, st := range p.Steps {
		first[st.Kernel.Out.ID] = i
		for _, in := range st.Kernel.Ins {
			last[in.Buf.ID] = i
		}
	}
	var free []int // slot indices
	release := map[int][]int{}
	for i, st := range p.Steps {
		b := st.Kernel.Out
		if b.Kind == plan.BufTemp {
			need := b.Bytes()
			pick := -1
			for j, sl := range free {
				if p.SlotBytes[sl] >= need && (pick < 0 || p.SlotBytes[sl] < p.SlotBytes[free[pick]]) {
					pick = j
				}
			}
			if pick < 0 {
				for j, sl := range free {
					if pick < 0 || p.SlotBytes[sl] > p.SlotBytes[free[pick]] {
						pick = j
					}
				}
			}
			if pick >= 0 {
				b.Slot = free[pick]
				free = append(free[:pick], free[pick+1:]...)
				p.SlotBytes[b.Slot] = max(p.SlotBytes[b.Slot], need)
			} else {
				b.Slot = len(p.SlotBytes)
				p.SlotBytes = append(p.SlotBytes, need)
			}
			end := max(last[b.ID], i) // an unread temporary frees right away
			release[end] = append(release[end], b.Slot)
		}
		free = append(free, release[i]...)
	}
	return nil
}

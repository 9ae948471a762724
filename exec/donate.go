package exec

import (
	"reflect"

	"github.com/loomgraph/loom/plan"
)

// Donation: a run may write an output in the memory of an input the caller
// gives up. A model's decode step is the case it exists for: the step
// reads each layer's KV cache and returns the cache with one new position
// written; without donation every step copies every cache whole (64 MB a
// step for a 1B llama at 2048 positions, more than its attention reads)
// into newly allocated outputs.

// Donate marks v, an input of one RunValues call, as given to that run.
// Where the plan can write an output in v's memory (plan.Plan.InPlace: a
// scatter or slice assignment whose destination is v, read by nothing
// else), the executor is a Donor, v is resident on it and the outputs are
// kept (keep), the output comes back in v's memory and v is emptied: it
// reads as freed and freeing it does nothing. Otherwise v is an ordinary
// input. Either way the caller should not read v after the run; if the
// run fails, v keeps its memory but the elements the step would have
// written are unspecified.
func Donate(v Value) Value { return donated{v} }

// donated is a Value marked by Donate.
type donated struct{ Value }

// Donor is a Resident executor whose tensors can hand their memory to a
// run's output.
type Donor interface {
	Resident
	// Disown empties v, a tensor of this executor whose memory an output
	// now owns: v reads as freed, and freeing it does nothing.
	Disown(v Value) error
}

// undonate returns the inputs with Donate's marks removed, and the names
// of the marked ones.
func undonate(inputs map[string]Value) (map[string]Value, map[string]bool) {
	var names map[string]bool
	for name, v := range inputs {
		if _, ok := v.(donated); ok {
			if names == nil {
				names = map[string]bool{}
			}
			names[name] = true
		}
	}
	if names == nil {
		return inputs, nil
	}
	out := make(map[string]Value, len(inputs))
	for name, v := range inputs {
		if d, ok := v.(donated); ok {
			v = d.Value
		}
		out[name] = v
	}
	return out, names
}

// donations picks the outputs a run writes in donated inputs' memory:
// output buffer ID → input buffer. It needs kept outputs (ok), a Donor
// executor, the plan's consent (InPlace) and an input value resident on e
// (of a comparable type, as resident tensors are: pointers) that no other
// input name also passes (its memory would change under the other name's
// reads).
func donations(e Executor, p *plan.Plan, inputs map[string]Value, names map[string]bool, ok bool) map[int]*plan.Buffer {
	d, isDonor := e.(Donor)
	if !ok || !isDonor || len(names) == 0 {
		return nil
	}
	var out map[int]*plan.Buffer
	for id, in := range p.InPlace() {
		if !names[in.Name] {
			continue
		}
		v := inputs[in.Name]
		if t := reflect.TypeOf(v); t == nil || !t.Comparable() {
			continue
		}
		if _, resident, err := d.Adopt(v); !resident || err != nil || passedTwice(inputs, in.Name, v) {
			continue
		}
		if out == nil {
			out = map[int]*plan.Buffer{}
		}
		out[id] = in
	}
	return out
}

// passedTwice reports whether v, of a comparable type, is also the value of
// an input other than name. (Comparing interfaces panics only when both
// hold one non-comparable type, which v's is not.)
func passedTwice(inputs map[string]Value, name string, v Value) bool {
	for n, w := range inputs {
		if n != name && w == v {
			return true
		}
	}
	return false
}

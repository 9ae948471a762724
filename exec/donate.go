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

// donatedNames returns the names of the inputs marked by Donate (nil if
// none). The inputs map is left as it is, marks and all: a model's step
// passes hundreds of weights beside its few donated caches, and every
// reader takes a value through plain.
func donatedNames(inputs map[string]Value) map[string]bool {
	var names map[string]bool
	for name, v := range inputs {
		if _, ok := v.(donated); ok {
			if names == nil {
				names = map[string]bool{}
			}
			names[name] = true
		}
	}
	return names
}

// plain returns v without Donate's mark.
func plain(v Value) Value {
	if d, ok := v.(donated); ok {
		return d.Value
	}
	return v
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
	var given map[Value]bool // the donated values that may take an output
	for id, in := range p.InPlace() {
		if !names[in.Name] {
			continue
		}
		v := plain(inputs[in.Name])
		if t := reflect.TypeOf(v); t == nil || !t.Comparable() {
			continue
		}
		if _, resident, err := d.Adopt(v); !resident || err != nil {
			continue
		}
		if out == nil {
			out, given = map[int]*plan.Buffer{}, map[Value]bool{}
		}
		out[id] = in
		given[v] = true
	}
	if out == nil {
		return nil
	}
	// A donated value that another input name also passes keeps its
	// memory: one pass over the inputs for all of them.
	shared := passedTwice(inputs, given)
	for id, in := range out {
		if shared[plain(inputs[in.Name])] {
			delete(out, id)
		}
	}
	return out
}

// passedTwice returns the values of given that more than one input name
// passes. (Only values of given are hashed: comparable dynamic types, so
// the map lookups of other values, which compare against those alone,
// cannot panic.)
func passedTwice(inputs map[string]Value, given map[Value]bool) map[Value]bool {
	seen := make(map[Value]int, len(given))
	var twice map[Value]bool
	for _, w := range inputs {
		w = plain(w)
		if t := reflect.TypeOf(w); t == nil || !t.Comparable() || !given[w] {
			continue
		}
		if seen[w]++; seen[w] == 2 {
			if twice == nil {
				twice = map[Value]bool{}
			}
			twice[w] = true
		}
	}
	return twice
}

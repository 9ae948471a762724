package exec

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
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
// else), the output comes back in v's memory:
//   - on a Donor, for v resident on it and the outputs kept (keep); v is
//     emptied: it reads as freed and freeing it does nothing;
//   - on an executor whose memory is host memory (an OutputBinder: the
//     CPU, whose uploads alias the host tensor), for a host tensor v; the
//     output tensor shares v's bytes, so a CPU decode step writes its new
//     position into the cache it was given instead of allocating, zeroing
//     and filling a copy of every layer's cache.
//
// Otherwise v is an ordinary input. Either way the caller should not read
// v after the run; if the run fails, v keeps its memory but the elements
// the step would have written are unspecified. On the CPU the run writes
// into v's own bytes, so donate only tensors whose memory may be written:
// not a read-only mapping of a file, as the tensors that gguf.Open and
// safetensors.Open hand out without copying are (writing there faults).
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
// output buffer ID → input buffer. It needs outputs that are not bound
// into the caller's tensors (free), the plan's consent (InPlace) and either
// a Donor executor, kept outputs (keep) and an input value resident on e,
// or an OutputBinder executor and a host tensor; the value of a comparable
// type (as resident tensors and *tensor.Tensor are: pointers) that no
// other input name also passes (its memory would change under the other
// name's reads).
func donations(e Executor, p *plan.Plan, inputs map[string]Value, names map[string]bool, keep, free bool) map[int]*plan.Buffer {
	d, isDonor := e.(Donor)
	isDonor = isDonor && keep
	_, isHost := e.(OutputBinder)
	if !free || !(isDonor || isHost) || len(names) == 0 {
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
		if _, host := v.(*tensor.Tensor); host && isHost {
			// The upload aliases v's bytes: the output can be them.
		} else if !isDonor {
			continue
		} else if _, resident, err := d.Adopt(v); !resident || err != nil {
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

// WithOutputs returns a context under which a run writes the named outputs
// into the memory of the given values instead of new memory: the values
// are given up as Donate gives up an input. It is for a loop of runs whose
// outputs should keep their addresses from one run to the next, so that
// a recorded run replays (WithReplay binds a recording to every buffer's
// address): a model's decode steps hand their token and position on in
// two pairs of buffers that the model keeps from one Generate to the next.
//
// On a Donor with the outputs kept, a value resident on the executor that
// is not also an input of the run (nor given for two outputs) is written
// in place: the output comes back in its memory and the value is emptied
// (it reads as freed; freeing it does nothing). Elsewhere the output gets
// new memory and the value is left as it was: either way the caller frees
// the value and reads the run's outputs. A name that is not an output of
// the plan, or a value of another dtype or shape than the output, is an
// error of the run. The values apply to every run started with the
// context: give each run its own.
func WithOutputs(ctx context.Context, outs map[string]Value) context.Context {
	return context.WithValue(ctx, outputsKey{}, outs)
}

type outputsKey struct{}

// givenOutputs checks the values WithOutputs put in ctx against p's
// outputs and returns those the run can write in place: output buffer ID →
// value (nil if none).
func givenOutputs(ctx context.Context, e Executor, p *plan.Plan, inputs map[string]Value, keep, free bool) (map[int]Value, error) {
	outs, _ := ctx.Value(outputsKey{}).(map[string]Value)
	if len(outs) == 0 {
		return nil, nil
	}
	byName := map[string]*plan.Buffer{}
	for _, b := range p.Outputs {
		byName[b.Name] = b
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(outs)) {
		b, v := byName[name], outs[name]
		switch {
		case b == nil:
			errs = append(errs, fmt.Errorf("loom: run: WithOutputs names %q, not an output of the plan", name))
		case v == nil:
			errs = append(errs, fmt.Errorf("loom: run: WithOutputs gives output %q a nil value", name))
		case v.DType() != b.DType || !slices.Equal(v.Shape(), b.Shape):
			errs = append(errs, fmt.Errorf("loom: run: WithOutputs gives output %q a %v%v value, the graph produces %v%v", name, v.DType(), v.Shape(), b.DType, b.Shape))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	d, isDonor := e.(Donor)
	if !isDonor || !keep || !free {
		return nil, nil
	}
	taken := map[Value]bool{}
	for _, in := range inputs {
		if v := plain(in); v != nil && reflect.TypeOf(v).Comparable() {
			taken[v] = true
		}
	}
	var bound map[int]Value
	for _, name := range slices.Sorted(maps.Keys(outs)) {
		v := outs[name]
		if t := reflect.TypeOf(v); !t.Comparable() || taken[v] {
			continue
		}
		if _, resident, err := d.Adopt(v); !resident || err != nil {
			continue
		}
		taken[v] = true
		if bound == nil {
			bound = map[int]Value{}
		}
		bound[byName[name].ID] = v
	}
	return bound, nil
}

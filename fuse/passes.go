package fuse

import (
	"fmt"
	"os"

	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// Options control compilation.
type Options struct {
	// Fusion merges elementwise ops into one kernel per group. When false
	// every op is its own step.
	Fusion bool
	// Check runs the verifier after every pass (also set by LOOM_CHECK=1).
	Check bool
	// AllowTF32 is recorded in the plan for executors (plan.Plan.AllowTF32).
	AllowTF32 bool
}

// State is what passes work on: the graph, the plan being built, and the log.
type State struct {
	Opts  Options
	Graph *ir.Graph
	// Before is the graph as handed to Compile, for dumps.
	Before *ir.Graph
	// Groups are the kernels to be: each computes its members and stores its
	// root. Ordered by root ID, which is a valid execution order. Set by
	// group.
	Groups []*Group
	Plan   *plan.Plan
	Log    Log
}

// Pass is one named step of the pipeline.
type Pass struct {
	Name string
	Fn   func(*State) error
	// Fusion marks passes that only run with fusion on.
	Fusion bool
}

// Passes is the pipeline, in order. Ordering constraints:
//   - dce before grouping, so dead nodes never keep a producer materialised;
//   - fold before cse, so folded chains that become identical are merged;
//   - broadcast-fills (fusion only) before group, so constants fuse;
//   - matmul-operands after broadcast-fills (a filled constant is a
//     contiguous value, no copy needed) and before group, which must see
//     the copies it inserts;
//   - core-fusion after group: it merges the groups group made;
//   - grouping before plan, which turns groups into kernels and buffers;
//   - buffers after plan: it needs the final step order for lifetimes;
//   - ahead last: it needs the steps' order, the buffers' slots and the
//     plan's in-place outputs.
var Passes = []Pass{
	{Name: "verify", Fn: verifyPass},
	{Name: "dce", Fn: dce},
	{Name: "fold", Fn: fold},
	{Name: "cse", Fn: cse},
	{Name: "broadcast-fills", Fn: broadcastFills, Fusion: true},
	{Name: "matmul-operands", Fn: matmulOperands},
	{Name: "group", Fn: group},
	{Name: "core-fusion", Fn: fuseCores, Fusion: true},
	{Name: "plan", Fn: makePlan},
	{Name: "buffers", Fn: buffers},
	{Name: "ahead", Fn: markAhead},
}

// markAhead (the "ahead" pass) marks the operands each step may read before
// the step ahead of it has finished (plan.Plan.MarkAhead), and the
// attention steps that may read their new key and value from the scatter
// ahead of them (plan.Plan.MarkNewKV).
func markAhead(s *State) error {
	s.Plan.MarkAhead()
	s.Plan.MarkNewKV()
	return nil
}

// Compile runs the pipeline over g and returns the final state.
func Compile(g *ir.Graph, opts Options) (*State, error) {
	if os.Getenv("LOOM_CHECK") == "1" {
		opts.Check = true
	}
	s := &State{Opts: opts, Graph: g, Before: g}
	for _, p := range Passes {
		if p.Fusion && !opts.Fusion {
			continue
		}
		if err := p.Fn(s); err != nil {
			return nil, fmt.Errorf("loom: compile: pass %s: %w", p.Name, err)
		}
		if opts.Check {
			if err := ir.Verify(s.Graph); err != nil {
				return nil, fmt.Errorf("loom: compile: after pass %s: %w", p.Name, err)
			}
		}
	}
	return s, nil
}

func verifyPass(s *State) error { return ir.Verify(s.Graph) }

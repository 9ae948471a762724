package exec

import (
	"context"
	"fmt"
)

// Communicators. A program with collectives (ir.ClassCollective) is run
// by every rank of a group, each on its own executor, and each run is
// given its rank's communicator for the group by context (WithComms): the
// executor's collective steps call it. A communicator belongs to one
// executor kind — the GPU's wraps NCCL or RCCL (package rocm), the CPU's
// is an in-process group of CPU executors (package cpu) — and an executor
// refuses a communicator of another kind, naming both.

// Comm is one rank's communicator of a named group.
type Comm interface {
	Group() string // the group's name, as the graph's collectives name it
	Rank() int
	Size() int
}

type commsKey struct{}

// WithComms returns ctx binding each communicator's group to it for the
// runs under ctx (adding to, or replacing, those ctx already binds).
func WithComms(ctx context.Context, comms ...Comm) context.Context {
	m := map[string]Comm{}
	if old, ok := ctx.Value(commsKey{}).(map[string]Comm); ok {
		for k, v := range old {
			m[k] = v
		}
	}
	for _, c := range comms {
		if c != nil {
			m[c.Group()] = c
		}
	}
	return context.WithValue(ctx, commsKey{}, m)
}

// CommOf returns the communicator ctx binds to group, checked against the
// size the graph's op was built for; op names the collective for the
// error.
func CommOf(ctx context.Context, op, group string, size int) (Comm, error) {
	m, _ := ctx.Value(commsKey{}).(map[string]Comm)
	c, ok := m[group]
	if !ok {
		return nil, fmt.Errorf("%s over group %q: no communicator for the group in the run's context (exec.WithComms)", op, group)
	}
	if c.Size() != size {
		return nil, fmt.Errorf("%s over group %q: the graph was built for %d ranks, the communicator has %d", op, group, size, c.Size())
	}
	return c, nil
}

// Comms returns the communicators ctx binds, by group.
func Comms(ctx context.Context) map[string]Comm {
	m, _ := ctx.Value(commsKey{}).(map[string]Comm)
	return m
}

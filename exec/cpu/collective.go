package cpu

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// Collectives on the CPU: the ranks of a group are CPU executors in one
// process, each running its program in its own goroutine, and a
// collective step meets the other ranks' at a rendezvous (NewGroup's
// communicators share it): every rank hands in its input, waits for all,
// computes its own output from all the inputs, and waits again until
// every rank has read them (so that no rank's runner reuses an input
// another still reads). Reductions go in rank order: f16 and bf16 sum in
// float32 and round once, f32 in float32, f64 in float64, integers wrap;
// max and min propagate NaN and order +0 above −0 (ir/collective.go).
//
// A rank that gives up (its run's context ends) breaks the group: the
// others' pending and later collectives fail at once, naming the group,
// instead of waiting for it. Ranks calling different collectives (or the
// same with other shapes) in one round all fail, naming both.

// Comm is one rank's communicator of an in-process group of CPU
// executors (exec.Comm).
type Comm struct {
	g    *cpuGroup
	rank int
}

// NewGroup returns the size communicators of a new group, rank i's at i.
func NewGroup(name string, size int) ([]*Comm, error) {
	if size < 1 {
		return nil, fmt.Errorf("cpu: group %q of %d ranks", name, size)
	}
	g := &cpuGroup{name: name, size: size, broken: make(chan struct{})}
	out := make([]*Comm, size)
	for i := range out {
		out[i] = &Comm{g: g, rank: i}
	}
	return out, nil
}

func (c *Comm) Group() string { return c.g.name }
func (c *Comm) Rank() int     { return c.rank }
func (c *Comm) Size() int     { return c.g.size }

type cpuGroup struct {
	name string
	size int

	mu     sync.Mutex
	cur    *round        // the round ranks are arriving at (nil: none yet)
	broken chan struct{} // closed when a rank gave up
	why    error
}

// round is one collective call of every rank.
type round struct {
	what    string // op, dtype and shape of the first arrival
	in      [][]byte
	arrived int
	full    chan struct{} // closed when every rank has arrived
	left    int
	done    chan struct{} // closed when every rank has read the inputs
	err     error         // ranks called different collectives
}

func (g *cpuGroup) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.why == nil {
		g.why = err
		close(g.broken)
	}
}

func (g *cpuGroup) brokenErr() error {
	return fmt.Errorf("group %q is broken: %w", g.name, g.why)
}

// meet hands in rank's input for a collective described by what and
// returns every rank's input once all have arrived; release must be
// called after reading them.
func (g *cpuGroup) meet(ctx context.Context, rank int, what string, in []byte) (all [][]byte, release func() error, err error) {
	g.mu.Lock()
	if g.why != nil {
		g.mu.Unlock()
		return nil, nil, g.brokenErr()
	}
	r := g.cur
	if r == nil {
		r = &round{what: what, in: make([][]byte, g.size), full: make(chan struct{}), done: make(chan struct{})}
		g.cur = r
	}
	if r.what != what && r.err == nil {
		r.err = fmt.Errorf("ranks disagree: %s, and rank %d %s", r.what, rank, what)
	}
	r.in[rank] = in
	r.arrived++
	if r.arrived == g.size {
		close(r.full)
		g.cur = nil // the next call starts the next round
	}
	g.mu.Unlock()
	wait := func(ch chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-g.broken:
			return g.brokenErr()
		case <-ctx.Done():
			err := fmt.Errorf("rank %d gave up waiting for the group %q: %w", rank, g.name, ctx.Err())
			g.fail(err)
			return err
		}
	}
	if err := wait(r.full); err != nil {
		return nil, nil, err
	}
	release = func() error {
		g.mu.Lock()
		r.left++
		if r.left == g.size {
			close(r.done)
		}
		g.mu.Unlock()
		return wait(r.done)
	}
	if r.err != nil {
		release()
		return nil, nil, r.err
	}
	return r.in, release, nil
}

// runCollective executes a collective step with the run's communicator.
func (e *Executor) runCollective(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	n := k.Instrs[0].Node
	p := n.Coll()
	c, err := exec.CommOf(ctx, n.Op.String(), n.Name, p.Size)
	if err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	cc, ok := c.(*Comm)
	if !ok {
		return fmt.Errorf("cpu: %s over group %q: the communicator is a %T, the CPU executor takes its own (cpu.NewGroup)", n.Op, n.Name, c)
	}
	x := n.Args[0]
	sz := n.DType.Size()
	op := k.Ins[0]
	b := mem[op.Buf.ID].(*memory).b
	in := b[op.Layout.Offset*sz : (op.Layout.Offset+x.Numel())*sz]
	out := mem[k.Out.ID].(*memory).b[:n.Numel()*sz]
	what := fmt.Sprintf("%s(%s) %v%v", n.Op, p.Reduce, x.DType, x.Shape)
	if n.Op == ir.OpBroadcast {
		what = fmt.Sprintf("%s(root %d) %v%v", n.Op, p.Root, x.DType, x.Shape)
	}
	all, release, err := cc.g.meet(ctx, cc.rank, what, in)
	if err != nil {
		return fmt.Errorf("cpu: %s over group %q (rank %d of %d): %w", n.Op, n.Name, cc.rank, p.Size, err)
	}
	switch n.Op {
	case ir.OpAllReduce:
		err = reduceRanks(n.DType, p.Reduce, all, out)
	case ir.OpBroadcast:
		copy(out, all[p.Root])
	case ir.OpAllGather:
		for r, v := range all {
			copy(out[r*len(in):], v)
		}
	case ir.OpReduceScatter:
		blk := len(out)
		parts := make([][]byte, len(all))
		for r, v := range all {
			parts[r] = v[cc.rank*blk : (cc.rank+1)*blk]
		}
		err = reduceRanks(n.DType, p.Reduce, parts, out)
	default:
		err = fmt.Errorf("not a collective")
	}
	if rerr := release(); err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("cpu: %s over group %q (rank %d of %d): %w", n.Op, n.Name, cc.rank, p.Size, err)
	}
	return nil
}

// reduceRanks writes op over parts (one byte slice per rank, in rank
// order) into out.
func reduceRanks(dt dtype.DType, op ir.Reduce, parts [][]byte, out []byte) error {
	sz := dt.Size()
	n := len(out) / sz
	le := binary.LittleEndian
	switch dt {
	case dtype.U8, dtype.U32, dtype.I64:
		get := func(b []byte, i int) uint64 {
			switch dt {
			case dtype.U8:
				return uint64(b[i])
			case dtype.U32:
				return uint64(le.Uint32(b[4*i:]))
			}
			return le.Uint64(b[8*i:])
		}
		less := func(a, b uint64) bool {
			if dt == dtype.I64 {
				return int64(a) < int64(b)
			}
			return a < b
		}
		for i := range n {
			acc := get(parts[0], i)
			for _, p := range parts[1:] {
				v := get(p, i)
				switch op {
				case ir.ReduceSum:
					acc += v // wraps in the dtype when stored
				case ir.ReduceMax:
					if less(acc, v) {
						acc = v
					}
				case ir.ReduceMin:
					if less(v, acc) {
						acc = v
					}
				}
			}
			switch dt {
			case dtype.U8:
				out[i] = byte(acc)
			case dtype.U32:
				le.PutUint32(out[4*i:], uint32(acc))
			default:
				le.PutUint64(out[8*i:], acc)
			}
		}
		return nil
	case dtype.F32, dtype.F16, dtype.BF16, dtype.F64:
		for i := range n {
			acc := loadFloat(dt, parts[0], i)
			for _, p := range parts[1:] {
				v := loadFloat(dt, p, i)
				switch op {
				case ir.ReduceSum:
					acc += v
					if dt != dtype.F64 {
						acc = float64(float32(acc)) // f32 arithmetic
					}
				case ir.ReduceMax:
					acc = maxNaN(acc, v)
				case ir.ReduceMin:
					acc = -maxNaN(-acc, -v)
				}
			}
			storeFloat(dt, out, i, acc)
		}
		return nil
	}
	return errors.New("dtype " + dt.String() + " has no collective")
}

// maxNaN is the larger of a and b, NaN if either is, +0 over −0.
func maxNaN(a, b float64) float64 {
	switch {
	case a != a:
		return a
	case b != b:
		return b
	case a == b && a == 0:
		if math.Signbit(a) {
			return b
		}
		return a
	case b > a:
		return b
	}
	return a
}

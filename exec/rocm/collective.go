package rocm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// Collective steps (ir.ClassCollective) on the GPU: the platform's
// collective library (NCCL on NVIDIA, RCCL on AMD: hip.Collectives), its
// calls queued on the executor's stream like kernels. A run is given its
// rank's communicator by context (exec.WithComms); make them once:
//
//   - NewGroup: one process driving several GPUs, one executor each
//     (ncclCommInitAll);
//   - NewCommID + JoinGroup: one process (or goroutine) per GPU, the id
//     handed to every rank by the caller's own means (ncclGetUniqueId,
//     ncclCommInitRank).
//
// Errors: a call's status fails the step; the library's asynchronous
// errors are read after the run's work is done (exec.DeferCheck); and
// while a run with collectives waits for the device, Wait polls the
// communicators and, when the run's context ends or one reports an error,
// aborts them (ncclCommAbort), so a peer that died costs the caller its
// context's deadline, not a hang. An aborted communicator is unusable:
// make the group again.
//
// Runs with collectives are replayed (exec.WithReplay) like any other:
// the library's operations are captured into the graph with the kernels
// (NCCL and RCCL support stream capture), which takes a tensor-parallel
// decode step from hundreds of launches per rank to one. A recording
// belongs to the communicators it captured: the binding it is replayed
// for includes their serial numbers, a run with an aborted or destroyed
// communicator runs step by step (and fails there, naming it), and
// Comm.Close drops the recordings that used the communicator before
// destroying it. A replay registers the recorded collectives with the run
// like the steps would, so Wait still polls their communicators and the
// run's end still reads their asynchronous errors.

// Comm is one rank's communicator on a GPU executor (exec.Comm).
type Comm struct {
	e      *Executor
	name   string
	c      *hip.Comm
	serial uint64 // unique in the process: recordings made with it say so
}

// commSerial numbers the communicators made in this process.
var commSerial atomic.Uint64

func newComm(e *Executor, name string, c *hip.Comm) *Comm {
	return &Comm{e: e, name: name, c: c, serial: commSerial.Add(1)}
}

func (c *Comm) Group() string { return c.name }
func (c *Comm) Rank() int     { return c.c.Rank() }
func (c *Comm) Size() int     { return c.c.Size() }

// Close drops the executor's recordings that use the communicator and
// destroys it (after the work queued on it).
func (c *Comm) Close() error {
	c.e.forgetComm(c)
	return c.c.Destroy()
}

// collectives loads the platform's collective library.
func (e *Executor) collectives() (*hip.Collectives, error) {
	return hip.LoadCollectives(e.info.Platform)
}

// supportsCollective says whether collective steps run here (else they
// fall back to the CPU, which refuses a GPU communicator).
func (e *Executor) supportsCollective() error {
	_, err := e.collectives()
	return err
}

// NewCommID creates the id of a new group (one rank calls it and hands it
// to every rank's JoinGroup).
func (e *Executor) NewCommID() (hip.CommID, error) {
	c, err := e.collectives()
	if err != nil {
		return hip.CommID{}, fmt.Errorf("rocm: %w", err)
	}
	return c.UniqueID()
}

// JoinGroup makes e rank of the size ranks of group name, whose id one
// rank made with NewCommID. Every rank must call it; it returns when all
// have.
func (e *Executor) JoinGroup(name string, id hip.CommID, size, rank int) (*Comm, error) {
	c, err := e.collectives()
	if err != nil {
		return nil, fmt.Errorf("rocm: %w", err)
	}
	hc, err := c.InitRank(e.dev, id, size, rank)
	if err != nil {
		return nil, fmt.Errorf("rocm: group %q: %w", name, err)
	}
	return newComm(e, name, hc), nil
}

// NewGroup makes the communicators of group name over es (rank i on
// es[i]), each executor on its own GPU, from one process.
func NewGroup(name string, es []*Executor) ([]*Comm, error) {
	if len(es) == 0 {
		return nil, fmt.Errorf("rocm: group %q of no executors", name)
	}
	c, err := es[0].collectives()
	if err != nil {
		return nil, fmt.Errorf("rocm: %w", err)
	}
	devs := make([]*hip.Device, len(es))
	for i, e := range es {
		devs[i] = e.dev
	}
	hcs, err := c.InitAll(devs)
	if err != nil {
		return nil, fmt.Errorf("rocm: group %q: %w", name, err)
	}
	out := make([]*Comm, len(es))
	for i, hc := range hcs {
		out[i] = newComm(es[i], name, hc)
	}
	return out, nil
}

func collType(d dtype.DType) (hip.CollType, bool) {
	switch d {
	case dtype.F32:
		return hip.CollF32, true
	case dtype.F64:
		return hip.CollF64, true
	case dtype.F16:
		return hip.CollF16, true
	case dtype.BF16:
		return hip.CollBF16, true
	case dtype.U8:
		return hip.CollU8, true
	case dtype.U32:
		return hip.CollU32, true
	case dtype.I64:
		return hip.CollI64, true
	}
	return 0, false
}

func redOp(r ir.Reduce) hip.RedOp {
	switch r {
	case ir.ReduceMax:
		return hip.RedMax
	case ir.ReduceMin:
		return hip.RedMin
	}
	return hip.RedSum
}

// runComms are the communicators a run's collective steps used, for Wait
// and the final check.
type runComms struct {
	mu    sync.Mutex
	comms []*Comm
	steps map[*Comm][]string // the steps that used each, for errors
}

type runCommsKey struct{ e *Executor }

// runCollective queues a collective step.
func (e *Executor) runCollective(ctx context.Context, k *plan.Kernel, mem []exec.Memory) error {
	n := k.Instrs[0].Node
	p := n.Coll()
	c, err := exec.CommOf(ctx, n.Op.String(), n.Name, p.Size)
	if err != nil {
		return fmt.Errorf("rocm: %w", err)
	}
	rc, ok := c.(*Comm)
	if !ok || rc.e != e {
		return fmt.Errorf("rocm: %s over group %q: the communicator (%T) is not one of this executor's (rocm.NewGroup, JoinGroup)", n.Op, n.Name, c)
	}
	t, ok := collType(n.DType)
	if !ok {
		return fmt.Errorf("rocm: %s over group %q: dtype %v", n.Op, n.Name, n.DType)
	}
	x := n.Args[0]
	sz := n.DType.Size()
	in, err := e.span(mem, k.Ins[0].Buf, sz, k.Ins[0].Layout.Offset, x.Numel())
	if err != nil {
		return fmt.Errorf("rocm: %s input: %w", k.Name, err)
	}
	out, err := e.span(mem, k.Out, sz, 0, n.Numel())
	if err != nil {
		return fmt.Errorf("rocm: %s output: %w", k.Name, err)
	}
	step := k.Name
	if st := exec.RunStateOf(ctx); st != nil {
		step = fmt.Sprintf("step %d (%s)", st.Step(), k.Name)
	}
	if rec := e.capturing.Load(); rec != nil && ctx.Value(captureKey{}) == e {
		rec.colls = append(rec.colls, commUse{rc, step}) // the replay registers it
	} else {
		e.useComm(ctx, rc, step)
	}
	e.launchMu.Lock()
	defer e.launchMu.Unlock()
	switch n.Op {
	case ir.OpAllReduce:
		err = rc.c.AllReduce(in, out, x.Numel(), t, redOp(p.Reduce), e.stream)
	case ir.OpBroadcast:
		err = rc.c.Broadcast(in, out, x.Numel(), t, p.Root, e.stream)
	case ir.OpAllGather:
		err = rc.c.AllGather(in, out, x.Numel(), t, e.stream)
	case ir.OpReduceScatter:
		err = rc.c.ReduceScatter(in, out, n.Numel(), t, redOp(p.Reduce), e.stream)
	default:
		err = errors.New("not a collective")
	}
	if err != nil {
		return fmt.Errorf("rocm: %s over group %q: %w", n.Op, n.Name, err)
	}
	return nil
}

// commUse is a collective step's communicator, and the step, for errors.
type commUse struct {
	c    *Comm
	step string
}

// useComm notes that the run ctx belongs to used c in step, so that Wait
// polls c and the run's end reads its asynchronous errors.
func (e *Executor) useComm(ctx context.Context, c *Comm, step string) {
	st := exec.RunStateOf(ctx)
	if st == nil {
		return
	}
	fresh := false
	used := st.Local(runCommsKey{e}, func() any { fresh = true; return &runComms{} }).(*runComms)
	if fresh {
		exec.DeferCheck(ctx, used.asyncErrors, nil)
	}
	used.add(c, step)
}

// commKey is the part of a replay's binding that names the communicators
// ctx binds to p's collective groups (their serials, in step order); ok is
// false when one is missing, not this executor's, or no longer live: the
// steps then run one by one and say what is wrong.
func (e *Executor) commKey(ctx context.Context, p *plan.Plan) (key []byte, ok bool) {
	var groups []string
	for _, s := range p.Steps {
		if !s.Kernel.IsCollective() {
			continue
		}
		n := s.Kernel.Instrs[0].Node
		if slices.Contains(groups, n.Name) {
			continue
		}
		groups = append(groups, n.Name)
		c, err := exec.CommOf(ctx, n.Op.String(), n.Name, n.Coll().Size)
		rc, isGPU := c.(*Comm)
		if err != nil || !isGPU || rc.e != e || !rc.c.Live() {
			return nil, false
		}
		key = binary.LittleEndian.AppendUint64(key, rc.serial)
	}
	return key, true
}

func (u *runComms) add(c *Comm, step string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.steps == nil {
		u.steps = map[*Comm][]string{}
	}
	if _, ok := u.steps[c]; !ok {
		u.comms = append(u.comms, c)
	}
	u.steps[c] = append(u.steps[c], step)
}

// stepsOf names the steps of the run that used c.
func (u *runComms) stepsOf(c *Comm) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.steps[c]
	if len(s) > 3 {
		return fmt.Sprintf("%s, … %d more", strings.Join(s[:3], ", "), len(s)-3)
	}
	return strings.Join(s, ", ")
}

func (u *runComms) list() []*Comm {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*Comm(nil), u.comms...)
}

func (u *runComms) asyncErrors() error {
	var errs []error
	for _, c := range u.list() {
		if err := c.c.AsyncError(); err != nil {
			errs = append(errs, fmt.Errorf("group %q, used by %s: %w", c.name, u.stepsOf(c), err))
		}
	}
	return errors.Join(errs...)
}

// waitCollectives is Wait for a run whose steps used communicators: it
// waits for the stream's work, reads the communicators' asynchronous
// errors every millisecond meanwhile, and aborts them when the run's
// context ends or one reports an error.
//
// The wait itself is a blocking event synchronization in a goroutine, so
// the run ends as soon as its work does. (Polling the event with pauses
// that grow to a millisecond, as this did at first, overslept a
// tensor-parallel decode step of ~1.5 ms by up to 1 ms.) An abort ends the
// library's pending kernels, which ends that synchronization too; the
// goroutine owns the event and destroys it.
func (e *Executor) waitCollectives(ctx context.Context, u *runComms) error {
	ev, err := e.dev.NewEvent()
	if err != nil {
		return fmt.Errorf("rocm: %w", err)
	}
	leave := e.enter(ctx)
	err = e.dev.Record(ev, e.stream)
	leave()
	if err != nil {
		e.dev.DestroyEvent(ev)
		return fmt.Errorf("rocm: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		err := e.dev.EventSynchronize(ev)
		e.dev.DestroyEvent(ev)
		done <- err
	}()
	abort := func(why error) error {
		for _, c := range u.list() {
			c.c.Abort()
		}
		return fmt.Errorf("rocm: %w (the run's communicators are aborted: make the group again)", why)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("rocm: %w", err)
			}
			return e.Sync() // the timing event, if any; everything is done
		case <-tick.C:
			if err := u.asyncErrors(); err != nil {
				return abort(err)
			}
		case <-ctx.Done():
			return abort(fmt.Errorf("cancelled while waiting for collectives: %w", ctx.Err()))
		}
	}
}

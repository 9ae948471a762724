package rocm

import (
	"context"
	"fmt"
	"sync"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm/hip"
	"github.com/loomgraph/loom/tensor"
)

// Runs in flight (exec.Start): a run's end is an event recorded on the
// stream after its work, and waiting for the run waits for that event, not
// for the stream, where the next run may already be queued. Its error flags
// and its outputs are then read on the side stream (doneToHost).

// events is a pool of the marks' events.
type events struct {
	mu   sync.Mutex
	free []hip.Event
	all  []hip.Event
}

var (
	_ exec.Marker     = (*Executor)(nil)
	_ exec.DoneReader = (*Executor)(nil)
)

// Mark implements exec.Marker. A run with collectives is waited for at
// once (Wait waits for its peers' too).
func (e *Executor) Mark(ctx context.Context) (func() error, bool) {
	if st := exec.RunStateOf(ctx); st != nil {
		if u, _ := st.Value(runCommsKey{e}).(*runComms); u != nil {
			return nil, false
		}
	}
	ev, err := e.takeEvent()
	if err != nil {
		return nil, false
	}
	leave := e.enter(nil)
	err = e.dev.Record(ev, e.stream)
	leave()
	if err != nil {
		e.putEvent(ev)
		return nil, false
	}
	return func() error {
		defer e.putEvent(ev)
		if err := e.dev.EventSynchronize(ev); err != nil {
			return fmt.Errorf("rocm: wait for a run: %w", err)
		}
		return nil
	}, true
}

// ReadDone implements exec.DoneReader: v's memory is copied on the side
// stream, not behind the work queued since.
func (e *Executor) ReadDone(v exec.Value) (*tensor.Tensor, error) {
	t, ok := v.(*Tensor)
	if !ok || t == nil || t.e != e {
		return nil, fmt.Errorf("rocm: read %T: not a tensor of this executor", v)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.blk == nil {
		return nil, fmt.Errorf("rocm: read %v: the tensor was freed", t)
	}
	return e.download(t.blk, t.dt, t.shape, true)
}

func (e *Executor) takeEvent() (hip.Event, error) {
	p := &e.events
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		ev := p.free[n-1]
		p.free = p.free[:n-1]
		return ev, nil
	}
	ev, err := e.dev.NewEvent()
	if err != nil {
		return 0, err
	}
	p.all = append(p.all, ev)
	return ev, nil
}

func (e *Executor) putEvent(ev hip.Event) {
	p := &e.events
	p.mu.Lock()
	p.free = append(p.free, ev)
	p.mu.Unlock()
}

// closeEvents destroys the pool's events (Close).
func (e *Executor) closeEvents() error {
	p := &e.events
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	for _, ev := range p.all {
		if derr := e.dev.DestroyEvent(ev); derr != nil && err == nil {
			err = derr
		}
	}
	p.all, p.free = nil, nil
	return err
}

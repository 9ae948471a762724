package hip

import (
	"errors"
	"fmt"
)

// Graphs: the work queued on a stream between BeginCapture and EndCapture is
// recorded, not run, into a graph; Instantiate makes it launchable and
// LaunchGraph queues all of it again with one call (CUDA graphs,
// cuStreamBeginCapture_v2 …; HIP graphs, hipStreamBeginCapture …). A
// replay costs the host one call where the recorded work cost one per
// kernel, and the device starts each kernel sooner.
//
// The graph entry points are optional: a runtime without them still runs
// everything else, and Device.CanCapture says why graphs are unavailable.

// Graph is a recorded graph (CUgraph, hipGraph_t).
type Graph uintptr

// GraphExec is an instantiated, launchable graph (CUgraphExec,
// hipGraphExec_t).
type GraphExec uintptr

// captureModeRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED and
// hipStreamCaptureModeRelaxed (both 2): other threads may make calls the
// stricter modes forbid while a capture is open (allocating memory, say).
// Loom itself keeps every other user off the captured stream.
const captureModeRelaxed = 2

// graphAPI is the graph part of the runtime, bound apart from runtimeAPI
// so that a runtime lacking it only loses graphs.
type graphAPI struct {
	err          error // why graphs are unavailable (nil: bound)
	beginCapture cfunc[func(s Stream, mode int32) int32]
	endCapture   cfunc[func(s Stream, g *Graph) int32]
	instantiate  cfunc[func(x *GraphExec, g Graph, flags uint64) int32]
	launch       cfunc[func(x GraphExec, s Stream) int32]
	execDestroy  cfunc[func(x GraphExec) int32]
	destroy      cfunc[func(g Graph) int32]
}

// graphNames are the symbols behind graphAPI on one platform.
type graphNames struct {
	beginCapture, endCapture, instantiate, launch, execDestroy, destroy string
}

var cudaGraphNames = graphNames{
	beginCapture: "cuStreamBeginCapture_v2", endCapture: "cuStreamEndCapture",
	instantiate: "cuGraphInstantiateWithFlags", launch: "cuGraphLaunch",
	execDestroy: "cuGraphExecDestroy", destroy: "cuGraphDestroy",
}

var hipGraphNames = graphNames{
	beginCapture: "hipStreamBeginCapture", endCapture: "hipStreamEndCapture",
	instantiate: "hipGraphInstantiateWithFlags", launch: "hipGraphLaunch",
	execDestroy: "hipGraphExecDestroy", destroy: "hipGraphDestroy",
}

func (g *graphAPI) bind(lib uintptr, path string, n graphNames) {
	b := &binder{lib: lib, path: path}
	bind(b, &g.beginCapture, n.beginCapture)
	bind(b, &g.endCapture, n.endCapture)
	bind(b, &g.instantiate, n.instantiate)
	bind(b, &g.launch, n.launch)
	bind(b, &g.execDestroy, n.execDestroy)
	bind(b, &g.destroy, n.destroy)
	if err := b.err(); err != nil {
		g.err = fmt.Errorf("hip: no graphs: %w", err)
	}
}

// CanCapture returns nil when the runtime records and replays graphs, or
// why it does not.
func (d *Device) CanCapture() error { return d.api.graph.err }

// BeginCapture starts recording the work queued on s (relaxed mode). Until
// EndCapture, work queued on s is recorded, not run; the caller must keep
// every other user off s, and must not wait on s.
func (d *Device) BeginCapture(s Stream) error {
	if err := d.api.graph.err; err != nil {
		return err
	}
	if s == 0 {
		return errors.New("hip: BeginCapture: the default stream cannot be captured")
	}
	return d.do(func(a *runtimeAPI) error {
		g := &a.graph
		return a.status(g.beginCapture.name, g.beginCapture.fn(s, captureModeRelaxed))
	})
}

// EndCapture ends the capture BeginCapture started on s and returns the
// recorded graph. A capture invalidated by an operation it cannot record
// ends with an error (and no graph); s is usable again either way.
func (d *Device) EndCapture(s Stream) (Graph, error) {
	var g Graph
	err := d.do(func(a *runtimeAPI) error {
		ga := &a.graph
		return a.status(ga.endCapture.name, ga.endCapture.fn(s, &g))
	})
	if err != nil && g != 0 {
		_ = d.DestroyGraph(g)
		g = 0
	}
	return g, err
}

// Instantiate makes g launchable. g may be destroyed afterwards.
func (d *Device) Instantiate(g Graph) (GraphExec, error) {
	var x GraphExec
	err := d.do(func(a *runtimeAPI) error {
		ga := &a.graph
		return a.status(ga.instantiate.name, ga.instantiate.fn(&x, g, 0))
	})
	return x, err
}

// LaunchGraph queues x's work on s; it does not wait.
func (d *Device) LaunchGraph(x GraphExec, s Stream) error {
	return d.do(func(a *runtimeAPI) error {
		ga := &a.graph
		return a.status(ga.launch.name, ga.launch.fn(x, s))
	})
}

// DestroyGraphExec destroys x (after the work it queued, which the runtime
// lets finish).
func (d *Device) DestroyGraphExec(x GraphExec) error {
	return d.do(func(a *runtimeAPI) error {
		ga := &a.graph
		return a.status(ga.execDestroy.name, ga.execDestroy.fn(x))
	})
}

// DestroyGraph destroys a recorded graph.
func (d *Device) DestroyGraph(g Graph) error {
	return d.do(func(a *runtimeAPI) error {
		ga := &a.graph
		return a.status(ga.destroy.name, ga.destroy.fn(g))
	})
}

// Package exec holds compiled plans, the executor interface and the plan
// runner.
//
// A plan.Plan (package plan) is a list of steps over buffers. A step is a
// plan.Kernel: a group of
// elementwise IR nodes that reads external operands (a buffer seen through a
// strided layout) and writes one contiguous output buffer. Without fusion
// every compute node is its own kernel; with fusion (package fuse) a kernel
// holds a whole DAG of elementwise ops.
//
// Executors (exec/cpu, exec/rocm) own memory and run kernels; Run is the one
// runner every executor shares: it validates inputs against the plan,
// allocates buffers (temporaries share memory when their lifetimes do not
// overlap), runs the steps in order, checks the context between steps, and
// returns the named outputs. Every allocation is released on every path, so a
// failing run leaks nothing. RunInto writes the outputs into tensors the
// caller holds instead (the CPU writes into them directly), so that with an
// executor that keeps its temporaries (SlotAllocator, the CPU's arenas) a
// loop of runs allocates no tensor memory. RunValues keeps the outputs
// resident on an executor that can (Resident), to chain runs; Start is
// RunValues that returns once the run is queued (on a Marker: the GPU),
// its wait, deferred checks and releases left to Pending.Wait, so that the
// host can queue the next run, reading this one's outputs, while the
// device works (pending.go).
package exec

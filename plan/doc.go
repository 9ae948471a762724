// Package plan holds the compiled form of a graph that executors run: a
// Plan is a list of Steps over Buffers; a Step is a Kernel, a group of IR
// nodes that reads external Operands (a buffer seen through a strided
// layout) and writes one contiguous output buffer.
//
// The package sits below everything that produces or consumes plans: fuse
// builds them, codegen and kernels render their kernels to HIP source, exec
// runs them and exec/cpu, exec/rocm execute their steps. It depends only on
// ir and dtype, so every import arrow points down the layers:
//
//	graph → fuse → plan ← codegen, kernels ← exec/rocm
//	                  ↖ exec ← exec/cpu
//
// A kernel is elementwise (or a row kernel, which also reduces), or one
// step of another class (a matmul, an indexing op, a window op, a
// quantized op, a collective), or a fused kernel: a pool, an upsampling, a
// matmul, a quantized matmul, a dequantization or a convolution with the
// elementwise chains around it (Kernel.CoreAt), which an
// executor renders as one kernel or runs in the parts SplitFused gives.
//
// Kernel.Cache holds executor-private compiled forms, keyed by executor, so
// a compiled kernel lives exactly as long as the plan that owns it.
package plan

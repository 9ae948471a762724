// Package graph is Loom's build-and-run API.
//
// A Graph is built lazily: Input, Full, Arange, Rand, Randn and the Tensor
// methods record nodes (shape and dtype inference, numpy broadcasting,
// zero-cost views) and compute nothing. Compile turns the graph into a Program (verified,
// optimised, planned) once; Program.Run executes it any number of times on
// an executor with a context.
//
// Errors never panic. A builder call with bad arguments returns a Tensor that
// carries the error (naming the op, shapes and dtypes); every later op on it
// carries it on, and Compile reports all of them. A graph with an error
// cannot be compiled, so it cannot be run.
//
// Composites: much of the API (the reductions' mean, var, softmax and
// norms; rope; and Candle's shape ops, creation helpers, math composites
// and losses in shape_ops.go, math_ops.go and losses.go) is built from
// other ops rather than IR ops of its own, so every executor runs it and
// fusion sees its parts. A composite checks its arguments before building
// anything and reports bad input under its own name, never a part's; its
// doc comment says which steps it costs where that is more than one pass.
//
// Ops of their own beyond the elementwise, reduction and view families:
// Matmul and Linear, the indexing and sorting ops, Cumsum, CausalAttention
// (attention.go), the convolutions, pools and upsampling, the quantized
// ops (quant.go) and the collectives (collective.go), each a step of its
// own.
//
// Several ranks: a program with collectives runs on every rank of a Group
// (SPMD; parallel.go has Megatron's tensor-parallel layers); or
// CompileSharded (shard.go) takes a single-device graph and the inputs to
// split, and places the collectives itself.
//
// Scalars: Scalar(v) is an untyped constant that takes the dtype of the
// tensor it meets, as in x.Gt(Scalar(0)). Arithmetic with scalars on integer
// tensors converts the scalar with Rust `as` semantics (truncation toward
// zero, saturation).
package graph

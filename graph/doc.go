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
// Scalars: Scalar(v) is an untyped constant that takes the dtype of the
// tensor it meets, as in x.Gt(Scalar(0)). Arithmetic with scalars on integer
// tensors converts the scalar with Rust `as` semantics (truncation toward
// zero, saturation).
package graph

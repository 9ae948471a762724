// Package ir is Loom's intermediate representation: an op table, immutable
// hash-consed nodes, strided layouts, a verifier and printers.
//
// Ops are data. Every op has one row in the table (ops.go) giving its name,
// arity, class, dtype rule and parameter names; the verifier, the printers,
// the CPU executor, fusion and code generation all read that row rather than
// switching on op kinds of their own.
//
// Nodes are values: a Graph interns every node by (op, dtype, shape, args,
// params, layout, name), so building the same op on the same inputs twice
// returns the same *Node, node identity is equality, and common
// subexpression elimination is free.
//
// Views cost nothing. A View node reads its single argument (never itself a
// view) through a Layout: dims, strides in elements and an offset. Every other
// node writes a fresh contiguous row-major buffer, so a view's layout always
// addresses a contiguous base buffer. The graph builder composes chains of
// views into one View node.
//
// Elementwise nodes have arguments whose shape equals the node's shape: any
// broadcasting has already been expressed as a View with stride 0. This keeps
// the meaning of an elementwise node simple (out[i] = f(arg_k[i]…)) for every
// executor and for code generation.
package ir

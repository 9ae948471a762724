// Package fuse turns a verified IR graph into an executable plan through an
// ordered list of named passes (passes.go). Each pass is a function in its
// own file; the verifier runs after every pass in tests and when LOOM_CHECK=1.
//
// A pass either rewrites the graph (nodes are immutable, so a rewrite builds
// a new graph with ir.Graph.Rebuild) or adds to the plan being built. The
// pipeline records what each pass did, and why anything was not fused, in a
// Log that dumps show.
package fuse

// Package fuzz holds Loom's robustness tests (issue 12): FuzzBuilder, which
// turns fuzz bytes into arbitrary builder calls (valid or not) and checks
// that nothing panics and every error names its op; a seeded differential
// test of random graphs, fused and unfused, against a float64 reference;
// and long-run tests for memory and goroutine leaks on the CPU executor.
//
// FuzzFusedUnfused lives in package fuse beside the random-graph generator
// it reuses (fuse/fuzz_test.go).
package fuzz

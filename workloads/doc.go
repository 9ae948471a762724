// Package workloads builds the benchmark graphs of shared/workloads.md (W1–W8,
// the dense ones) and W-cumsum (a scan over the last dim, measured against
// copy bandwidth like W1–W7), and their random inputs, for `loom bench` and
// the go test benchmarks.
//
// Bytes per workload count each input read once and each output written
// once: the traffic a perfectly fused kernel must move, so that GB/s figures
// compare directly with copy bandwidth.
package workloads

// Package workloads builds the benchmark graphs of shared/workloads.md (W1–W8;
// W-cumsum; the dense W9–W11 and W13 in dense.go; the convolutions W12–W12c
// in conv.go; the pools W12d, W12e) and their random inputs, for `loom bench`
// and the go test benchmarks.
//
// Bytes per workload count each input read once and each output written
// once: the traffic a perfectly fused kernel must move, so that GB/s figures
// compare directly with copy bandwidth.
package workloads

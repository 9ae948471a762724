// Package catalog enumerates every GPU kernel Loom can produce — one
// unfused kernel per op × dtype (casts: every pair; where: every condition ×
// value dtype; the indexing ops; pools and upsampling of every dtype they
// take), and the fused kernels of the benchmark workloads — and
// renders each for a target. `loom kernels` compiles the whole catalog for
// AMD archs through hiprtc (CI does it without an AMD GPU) and for NVIDIA
// through NVRTC; the GPU test suites run parts of it.
package catalog

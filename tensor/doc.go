// Package tensor holds host tensors: contiguous, row-major Go slices with a
// dtype and a shape. They are what a caller passes into a run and gets back.
//
// A Tensor owns one typed slice ([]float32, []float64, []dtype.Float16,
// []dtype.BFloat16, []dtype.Float8E4M3, []uint8, []uint32 or []int64). Views
// and strides live in the graph, not here: a host tensor is always
// contiguous.
package tensor

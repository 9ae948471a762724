package workloads

import (
	"fmt"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// The convolution workloads (shared/workloads.md W12 and the issue 13
// table): a ResNet 3×3 conv (pad 1, C → C channels, NCHW) in f32 and bf16,
// alone and with its bias and ReLU (the epilogue fused after the conv
// step), and the fixed-shape conv1d and conv_transpose2d of the GPU peers.
// They are executor-agnostic graphs; their size comes from Size.Conv (the
// bench picks N 8, C 64, 56×56 on the CPU and N 32, C 256, 56×56 on a
// GPU), except W12b and W12c, whose shapes are part of their definition.
// Figure of merit: FLOP/s (2 per multiply-add of the convolution).

// ConvSize is the size of the W12 convolutions: N images of C channels,
// HW × HW pixels, to C channels.
type ConvSize struct{ N, C, HW int }

// CPUConv and GPUConv are the W12 sizes of issue 13: a ResNet stage on 2
// CPU cores, and the cuDNN comparison on a GPU.
var (
	CPUConv = ConvSize{N: 8, C: 64, HW: 56}
	GPUConv = ConvSize{N: 32, C: 256, HW: 56}
)

// Conv lists the convolution workloads; ByID finds them too.
var Conv = []Workload{
	{ID: "W12", Desc: "conv2d 3×3 pad 1 f32 NCHW, N×C×HW² → C (Size.Conv; CPU 8×64×56², GPU 32×256×56²)", Build: w12(dtype.F32, false), Flops: w12Flops},
	{ID: "W12-bf16", Desc: "W12 in bf16 (f32 accumulation)", Build: w12(dtype.BF16, false), Flops: w12Flops},
	{ID: "W12-crb", Desc: "W12 + bias + relu, f32: one kernel, the conv with its epilogue (on the GPU's channels-last path the epilogue runs in the output's transpose)", Build: w12(dtype.F32, true), Flops: w12Flops},
	{ID: "W12-crb-bf16", Desc: "W12-crb in bf16", Build: w12(dtype.BF16, true), Flops: w12Flops},
	{ID: "W12b", Desc: "conv1d 16×384×3000 → 384, k 3, pad 1, f32 (a fixed shape)", Build: w12b, Flops: func(Size) float64 { return 2 * 16 * 384 * 3000 * 384 * 3 }},
	{ID: "W12c", Desc: "conv_transpose2d 16×128×64² → 64, k 4, stride 2, pad 1, f32 (a fixed shape)", Build: w12c, Flops: func(Size) float64 { return 2 * 16 * 128 * 64 * 64 * 64 * 16 }},
}

// w12Flops counts the multiply-adds of the 3×3 conv: N·C·C·9·HW².
func w12Flops(sz Size) float64 {
	c := sz.Conv
	return 2 * float64(c.N) * float64(c.C) * float64(c.C) * 9 * float64(c.HW) * float64(c.HW)
}

func w12(dt dtype.DType, biasRelu bool) func(Size) (*graph.Graph, error) {
	return func(sz Size) (*graph.Graph, error) {
		c := sz.Conv
		if c.N < 1 || c.C < 1 || c.HW < 1 {
			return nil, fmt.Errorf("workloads: W12 size %+v: want positive N, C and HW", c)
		}
		g := graph.New()
		x := g.Input("x", dt, c.N, c.C, c.HW, c.HW)
		w := g.Input("w", dt, c.C, c.C, 3, 3)
		y := graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}})
		if biasRelu {
			y = y.Add(g.Input("b", dt, c.C).Reshape(1, c.C, 1, 1)).Relu()
		}
		g.Output("y", y)
		return g, g.Err()
	}
}

func w12b(Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 16, 384, 3000)
	w := g.Input("w", dtype.F32, 384, 384, 3)
	g.Output("y", graph.Conv1d(x, w, graph.ConvOptions{Padding: []int{1}}))
	return g, g.Err()
}

func w12c(Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 16, 128, 64, 64)
	w := g.Input("w", dtype.F32, 128, 64, 4, 4)
	g.Output("y", graph.ConvTranspose2d(x, w, graph.ConvOptions{Stride: []int{2}, Padding: []int{1}}))
	return g, g.Err()
}

package workloads

import (
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// Pools are issue 13's pool and upsampling workloads, under the names the
// PyTorch peer gives them (shared/peers/peers_dense.py: W12d, W12e; on an
// H200, PyTorch 2.11 takes 0.402 ms and 0.878 ms). Their shapes are fixed
// (Size does not apply) and they are memory-bound: `loom bench` reports
// GB/s, input read once plus output written once, as the peer counts it.
var Pools = []Workload{
	{ID: "W12d", Desc: "max_pool2d 3×3 stride 2 pad 1, f32 [32, 256, 112, 112] (a fixed shape)", Build: w12d},
	{ID: "W12e", Desc: "upsample bilinear ×2 (align_corners off), f32 [8, 256, 112, 112] (a fixed shape)", Build: w12e},
	{ID: "W12f", Desc: "max_pool2d 3×3 stride 2 pad 1 of relu(x + bias[C]) + a residual, f32 x [32, 256, 112, 112] (a fixed shape; fused: one kernel)", Build: w12f},
}

// w12f is a CNN stage's tail after its conv: bias, ReLU, max pool, then a
// residual of the pooled size. Fused, the pool computes bias + relu at
// every element it reads and adds the residual as it writes (fuse's
// core-fusion), so the feature map is read once; unfused it is three
// steps. The peer is scripts/peer_pool.py (PyTorch eager and
// torch.compile).
func w12f(Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 32, 256, 112, 112)
	b := g.Input("b", dtype.F32, 1, 256, 1, 1)
	r := g.Input("r", dtype.F32, 32, 256, 56, 56)
	y := x.Add(b).Relu().MaxPool2d(3, 3, graph.PoolStride(2), graph.PoolPadding(1)).Add(r)
	g.Output("y", y)
	return g, g.Err()
}

func w12d(Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 32, 256, 112, 112)
	g.Output("y", x.MaxPool2d(3, 3, graph.PoolStride(2), graph.PoolPadding(1)))
	return g, g.Err()
}

func w12e(Size) (*graph.Graph, error) {
	g := graph.New()
	x := g.Input("x", dtype.F32, 8, 256, 112, 112)
	g.Output("y", x.UpsampleBilinear2dScale(2, 2, false))
	return g, g.Err()
}

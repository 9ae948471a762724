package graph

// Tensor-parallel layers (Megatron-LM's): every rank of a group runs the
// same program on its own executor with its own shard of the weights, fed
// as inputs, and the collectives these helpers add combine the shards'
// work. The program is built once for all ranks (SPMD); only the weight
// values differ between them. Norms and other small weights are simply
// replicated (every rank gets the whole tensor).
//
// A two-layer block in the usual arrangement, ColumnParallelLinear then
// RowParallelLinear (an MLP: gate/up column-split, down row-split;
// attention: heads split, the output projection row-split), costs one
// AllReduce and keeps the activations between the two layers sharded.

// ColumnParallelLinear is Linear over a column shard: x [..., K] (the same
// on every rank) times wShard [N/Size, K] — rows rank·N/Size … of the
// whole w [N, K] — plus bShard (the same rows of b, or nil). Without
// gather the result is this rank's columns [..., N/Size]; with gather the
// ranks' columns are concatenated (AllGather) into [..., N], equal on
// every rank.
func ColumnParallelLinear(x, wShard, bShard *Tensor, g Group, gather bool) *Tensor {
	y := Linear(x, wShard, bShard)
	if !gather {
		return y
	}
	if y.err != nil {
		return y
	}
	return y.AllGather(g, -1)
}

// RowParallelLinear is Linear over a row shard of the input features:
// xShard [..., K/Size] (this rank's slice of x's last dim, as a
// ColumnParallelLinear without gather leaves it) times wShard [N, K/Size]
// — columns rank·K/Size … of the whole w [N, K] — summed over the ranks
// (AllReduce), plus b [N] (whole, added once after the sum; or nil):
// [..., N], equal on every rank. The sum over ranks is ordered
// differently from one product's, so the result matches the unsharded
// Linear within the reduction order's rounding.
func RowParallelLinear(xShard, wShard, b *Tensor, g Group) *Tensor {
	y := Linear(xShard, wShard, nil)
	if y.err != nil {
		return y
	}
	y = y.AllReduce(g, ReduceSum)
	if b != nil {
		y = y.Add(b)
	}
	return y
}

// ParallelEmbedding is IndexSelect(ids, 0) over a vocabulary sharded by
// rows: tableShard [V/Size, C] holds the rows start … start+V/Size−1 of
// the whole table, start (u32 [1]: an input, since it differs between
// ranks) says where. Each rank picks the rows of the ids it holds and
// zeros for the others; the AllReduce sums them, so every rank gets every
// id's row exactly (one non-zero term each). ids must be u32 and below
// the whole vocabulary (an id no rank holds gives zeros, where IndexSelect
// fails: check ids first when that matters).
func ParallelEmbedding(ids, tableShard, start *Tensor, g Group) *Tensor {
	const op = "parallel_embedding"
	gr, err := sameGraph(op, ids, tableShard, start)
	if err != nil {
		return failOr(gr, err)
	}
	rows := tableShard.Shape()
	if len(rows) != 2 || len(ids.Shape()) != 1 || len(start.Shape()) != 1 || start.Shape()[0] != 1 {
		return gr.fail(opErr(op, "ids %v%v, table shard %v%v, start %v%v: want 1-D ids, a 2-D table and a start of one element",
			ids.DType(), ids.Shape(), tableShard.DType(), rows, start.DType(), start.Shape()))
	}
	// local = ids − start, wrapping below 0 to ≥ 2³¹ for u32: one compare
	// tells whether this rank holds the id.
	local := ids.Sub(start.BroadcastTo(ids.Shape()...))
	mine := local.Lt(Scalar(float64(rows[0])))
	picked := tableShard.IndexSelect(Where(mine, local, Scalar(0)), 0)
	keep := mine.Reshape(ids.Shape()[0], 1)
	return Where(keep, picked, Scalar(0)).AllReduce(g, ReduceSum)
}

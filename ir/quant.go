package ir

import (
	"fmt"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/quant"
)

// Quantized ops. A quantized matrix of R rows of k elements in a GGML block
// format is a plain u8 node of shape [..., R, rowBytes], each row the
// format's blocks back to back (rowBytes = k / block elements × block
// bytes), exactly as GGUF stores it; the format and k ride in the op's
// params, so the dumps and errors name them. Indexing rows (IndexSelect,
// Narrow on the row dim) therefore works on quantized tables unchanged:
// an embedding lookup is IndexSelect of rows, then Dequantize.
//
//   - Dequantize: raw [..., R, rowBytes] → [..., R, k] in f32, f16 or bf16
//     (GGML's dequantize_row_<format> values, rounded once to halves).
//   - QMatmul: x [..., M, k] (f32, f16 or bf16) · Wᵀ, W raw [N, rowBytes]
//     → [..., M, N] in x's dtype, Candle's QMatMul (a Linear without
//     bias). How the product is computed is the executor's (documented
//     there): the CPU follows GGML's CPU path (activations quantized to
//     the format's activation type, integer block dots), the GPU
//     dequantizes weights and multiplies in f32.

// QuantActDTypes are the activation (and dequantization output) dtypes.
var QuantActDTypes = SetOf(dtype.F32, dtype.F16, dtype.BF16)

// QuantFormat returns a quantized op's format and row length k.
func (n *Node) QuantFormat() (quant.Type, int) {
	return quant.Type(n.Params[0]), int(n.Params[1])
}

// QuantRowBytes checks that format t can hold rows of k elements and
// returns the bytes of one row.
func QuantRowBytes(t quant.Type, k int) (int, error) {
	tr, ok := t.Traits()
	if !ok || !tr.Supported || tr.Block == 1 {
		return 0, fmt.Errorf("format %v is not a GGML block format Loom computes with", t)
	}
	if k <= 0 || k%tr.Block != 0 {
		return 0, fmt.Errorf("row length %d is not a positive multiple of %v's block of %d elements", k, t, tr.Block)
	}
	return k / tr.Block * tr.Size, nil
}

func verifyQuant(n *Node, bad func(*Node, string, ...any)) {
	info := n.Info()
	if len(n.Args) != info.Arity || len(n.Params) != 2 {
		bad(n, "has %d args and %d params, want %d and 2", len(n.Args), len(n.Params), info.Arity)
		return
	}
	t, k := n.QuantFormat()
	rb, err := QuantRowBytes(t, k)
	if err != nil {
		bad(n, "%v", err)
		return
	}
	raw := n.Args[len(n.Args)-1]
	if raw.DType != dtype.U8 || len(raw.Shape) < 1 || raw.Shape[len(raw.Shape)-1] != rb {
		bad(n, "quantized operand %v: want u8 rows of %d bytes (%d × %v)", raw, rb, k, t)
		return
	}
	if !QuantActDTypes.Has(n.DType) {
		bad(n, "dtype %v not in {%v}", n.DType, QuantActDTypes)
		return
	}
	switch n.Op {
	case OpDequantize:
		want := append(append([]int{}, raw.Shape[:len(raw.Shape)-1]...), k)
		if !slices.Equal(want, n.Shape) {
			bad(n, "shape %v, want %v", n.Shape, want)
		}
	case OpQMatmul:
		x := n.Args[0]
		if len(raw.Shape) != 2 {
			bad(n, "weight %v: want [N, rowBytes]", raw)
			return
		}
		if x.DType != n.DType || len(x.Shape) < 1 || x.Shape[len(x.Shape)-1] != k {
			bad(n, "activation %v: want %v rows of %d", x, n.DType, k)
			return
		}
		want := append(append([]int{}, x.Shape[:len(x.Shape)-1]...), raw.Shape[0])
		if !slices.Equal(want, n.Shape) {
			bad(n, "shape %v, want %v", n.Shape, want)
		}
	}
}

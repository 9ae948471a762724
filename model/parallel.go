package model

import (
	"fmt"
	"strings"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// Tensor parallelism (Options.Comm): every rank of a group loads the same
// checkpoint with its own executor and communicator, keeps its shard of
// each layer and runs the same programs (SPMD), as Megatron-LM splits a
// transformer:
//
//   - attention: the query heads and the key/value heads are split into
//     Size equal parts (attn_q, attn_k, attn_v rows, and their biases);
//     each rank attends with its heads over its own KV cache (Size times
//     smaller); the output projection takes the rank's slice of its input
//     columns (attn_output columns) and the ranks' products are summed by
//     one AllReduce, then the bias is added once;
//   - MLP: gate and up rows split (intermediate columns), down's input
//     columns split, one AllReduce after down;
//   - the LM head is split by vocabulary rows where the vocabulary divides
//     by Size (headSplit): each rank computes its slice of the logits and
//     one AllGather joins them, so every rank has the same logits and
//     samples the same token. An untied output weight is sharded by rows;
//     tied embeddings stay whole (the embedding reads every row) and the
//     head reads the rank's rows as a view. A quantized tied table, or a
//     vocabulary that does not divide, keeps the head replicated. (A 1B
//     model's head reads 525 MB of bf16 a step: 0.31 ms of a 2.8 ms batch-8
//     step on an H200, which every rank had spent whole.)
//   - the embedding and the norms are replicated: every rank computes the
//     same hidden state after each all-reduce.
//
// Generation is every rank calling Generate (or its sessions) with the
// same prompt and options, each in its own goroutine or process: their
// collectives meet step by step. Heads, key/value heads and the
// intermediate size must divide by Size; a quantized attn_output or
// ffn_down must split into whole blocks per rank.

// tpGroup is the graph group of the model's collectives.
func (m *Model) tpGroup() graph.Group {
	return graph.Group{Name: m.comm.Group(), Size: m.comm.Size()}
}

// parallel reports whether the model is split over several ranks.
func (m *Model) parallel() bool { return m.comm != nil && m.comm.Size() > 1 }

// headSplit reports whether the LM head is split over the ranks by
// vocabulary rows (see above); it is asked once the weights are loaded.
func (m *Model) headSplit() bool {
	if !m.parallel() || m.cfg.Vocab%m.comm.Size() != 0 {
		return false
	}
	if m.cfg.TieEmbeddings {
		_, q := m.quant["token_embd.weight"]
		return !q
	}
	return true
}

// setParallel makes m rank c.Rank() of c.Size(): lc becomes the rank's
// share of the config.
func (m *Model) setParallel(c exec.Comm) error {
	m.lc = m.cfg
	if c == nil {
		return nil
	}
	m.comm = c
	n := c.Size()
	if c.Rank() < 0 || c.Rank() >= n {
		return fmt.Errorf("tensor parallel: rank %d of %d", c.Rank(), n)
	}
	var bad []string
	for _, d := range []struct {
		what string
		v    int
	}{{"attention heads", m.cfg.Heads}, {"key/value heads", m.cfg.KVHeads}, {"intermediate size", m.cfg.Intermediate}} {
		if d.v%n != 0 {
			bad = append(bad, fmt.Sprintf("%d %s", d.v, d.what))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("tensor parallel over %d ranks (group %q): %s do not split into %d equal parts", n, c.Group(), strings.Join(bad, ", "), n)
	}
	m.lc.Heads /= n
	m.lc.KVHeads /= n
	m.lc.Intermediate /= n
	return nil
}

// Which weights are split, and how.
const (
	shardNone = iota
	shardRows // output features: attn_q/k/v, ffn_gate/up (weights and biases)
	shardCols // input features: attn_output, ffn_down weights
)

func shardOf(name string) int {
	for _, s := range []string{"attn_q.", "attn_k.", "attn_v.", "ffn_gate.", "ffn_up."} {
		if strings.Contains(name, "."+s) {
			return shardRows
		}
	}
	for _, s := range []string{"attn_output.weight", "ffn_down.weight"} {
		if strings.HasSuffix(name, "."+s) {
			return shardCols
		}
	}
	return shardNone
}

// shard returns the rank's part of weight name (logical shape shape, rows
// × columns, or a vector) held in t: a float tensor, or raw block-format
// rows of format f (u8 [rows, rowBytes]) when quantized. It also returns
// the part's logical shape.
func (m *Model) shard(name string, t *tensor.Tensor, shape []int, f quant.Type, quantized bool) (*tensor.Tensor, []int, error) {
	kind := shardOf(name)
	if (name == "output.weight" || name == "output.bias") && m.parallel() && m.cfg.Vocab%m.comm.Size() == 0 {
		kind = shardRows // the untied LM head, split by vocabulary rows (headSplit)
	}
	if !m.parallel() || kind == shardNone {
		return t, shape, nil
	}
	n, r := m.comm.Size(), m.comm.Rank()
	b := t.Bytes()
	rows := t.Shape()[0]
	rowBytes := len(b) / max(rows, 1)
	switch kind {
	case shardRows:
		per := rows / n
		out, err := fromBytes(t, b[r*per*rowBytes:(r+1)*per*rowBytes], append([]int{per}, t.Shape()[1:]...))
		return out, append([]int{shape[0] / n}, shape[1:]...), err
	}
	// Columns: a float row is elements, a block-format row whole blocks.
	cols := shape[1]
	per := cols / n
	lo, hi := r*per*t.DType().Size(), (r+1)*per*t.DType().Size()
	if quantized {
		tr, _ := f.Traits()
		if per%tr.Block != 0 {
			return nil, nil, fmt.Errorf("tensor %q: %d columns a rank is not a whole number of %v blocks of %d", name, per, f, tr.Block)
		}
		bytesPer := rowBytes / (cols / tr.Block)
		lo, hi = r*per/tr.Block*bytesPer, (r+1)*per/tr.Block*bytesPer
	}
	buf := make([]byte, 0, rows*(hi-lo))
	for i := range rows {
		buf = append(buf, b[i*rowBytes+lo:i*rowBytes+hi]...)
	}
	tshape := []int{rows, per}
	if quantized {
		tshape = []int{rows, hi - lo}
	}
	out, err := fromBytes(t, buf, tshape)
	return out, []int{shape[0], per}, err
}

// fromBytes is a new tensor of like's dtype and the given shape holding b.
func fromBytes(like *tensor.Tensor, b []byte, shape []int) (*tensor.Tensor, error) {
	out, err := tensor.Zeros(like.DType(), shape...)
	if err != nil {
		return nil, err
	}
	if len(out.Bytes()) != len(b) {
		return nil, fmt.Errorf("internal error: %d bytes for %v%v", len(b), like.DType(), shape)
	}
	copy(out.Bytes(), b)
	return out, nil
}

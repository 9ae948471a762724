package model

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// TestTensorParallel: the tiny model split over 2 CPU ranks (heads, key/
// value heads and the MLP halved; two all-reduces a layer) gives every
// position's logits of a prefill and decode steps within f32 rounding of
// the float64 reference, on both ranks alike, and 24 greedy tokens equal
// to the whole model's; a Q8_0 GGUF splits too. A group that does not
// divide the heads is refused, naming them.
func TestTensorParallel(t *testing.T) {
	dir, w, ref := tiny(t)
	whole := load(t, dir, Options{})
	prompt, more := randomIDs(71, 12, 1024), randomIDs(72, 4, 1024)
	want := ref.forward(append(slices.Clone(prompt), more...))
	wantGen, err := whole.Generate(context.Background(), prompt, GenerateOptions{MaxTokens: 24, StopTokens: []int{}})
	if err != nil {
		t.Fatal(err)
	}
	q8 := filepath.Join(t.TempDir(), "tiny-q8.gguf")
	if err := WriteGGUF(q8, TinyConfig(), w, quant.Q8_0); err != nil {
		t.Fatal(err)
	}
	// Layers 1 and 3's values in Q6_K, the rest Q8_0: those layers' queries
	// and keys one product (attn_qk), sharded by heads as attn_qkv is.
	mixed, _ := writeMixedTiny(t, w, quant.Q8_0, quant.Q6_K)
	// Every matrix Q5_0 but layers 1 and 3's values, Q8_0: those layers'
	// queries and keys widened to Q8_0 and the three one product
	// (attn_qkv), sharded by heads.
	widened, widenedOf := writeMixedTiny(t, w, quant.Q5_0, quant.Q8_0)
	// Q5_0's own error is larger than the others' tolerance: the widened
	// file is compared with the float64 reference over its dequantized
	// weights.
	wantWidened := newRef(TinyConfig(), dequantizedFunc(t, w, widenedOf)).forward(append(slices.Clone(prompt), more...))
	for _, c := range []struct {
		name, path string
		tol        float64
	}{{"f32", dir, tolF32}, {"q8_0", q8, 3e-2}, {"mixed", mixed, 4e-2}, {"widened", widened, 4e-2}} {
		t.Run(c.name, func(t *testing.T) {
			comms, err := cpu.NewGroup("tp", 2)
			if err != nil {
				t.Fatal(err)
			}
			ms := make([]*Model, 2)
			for r := range ms {
				ms[r] = load(t, c.path, Options{Comm: comms[r]})
				if got := ms[r].lc; got.Heads != 4 || got.KVHeads != 1 || got.Intermediate != 344 {
					t.Fatalf("rank %d: local config %+v", r, got)
				}
				if _, ok := ms[r].fused["blk.1.attn_qk.weight"]; ok != (c.name == "mixed" && !noQKFusion) {
					t.Errorf("rank %d: blk.1.attn_qk fused %v", r, ok)
				}
				if f, ok := ms[r].quant["blk.1.attn_qkv.weight"]; c.name == "widened" && !noWidenFusion && (!ok || f != quant.Q8_0) {
					t.Errorf("rank %d: blk.1.attn_qkv fused %v in %v, want Q8_0", r, ok, f)
				}
			}
			rows := make([][][]float32, 2)
			gens := make([]*Generation, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for r := range ms {
				wg.Go(func() {
					rows[r], errs[r] = prefillDecodeRows(ms[r], prompt, more)
					if errs[r] == nil {
						gens[r], errs[r] = ms[r].Generate(context.Background(), prompt, GenerateOptions{MaxTokens: 24, StopTokens: []int{}})
					}
				})
			}
			wg.Wait()
			for r := range ms {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				want := want
				if c.name == "widened" {
					want = wantWidened
				}
				for p := range want {
					if e := relErr(rows[r][p], want[p]); e > c.tol {
						t.Errorf("rank %d position %d: error %.3g, want ≤ %g", r, p, e, c.tol)
					}
				}
				if !slices.Equal(rows[r][len(rows[r])-1], rows[0][len(rows[0])-1]) {
					t.Errorf("rank %d's logits differ from rank 0's", r)
				}
				if c.name == "f32" && !slices.Equal(gens[r].Tokens, wantGen.Tokens) {
					t.Errorf("rank %d greedy tokens %v, the whole model's %v", r, gens[r].Tokens, wantGen.Tokens)
				}
			}
		})
	}
	three, _ := cpu.NewGroup("tp", 3)
	if _, err := Load(dir, Options{Comm: three[0]}); err == nil || !strings.Contains(err.Error(), "8 attention heads, 2 key/value heads, 688 intermediate size do not split into 3") {
		t.Errorf("3 ranks: %v", err)
	}
}

// TestTensorParallelVariant: the variant config (biases on every
// projection, so attn_output's and ffn_down's are added once after the
// all-reduce; 4 key/value heads; tied embeddings) over 2 and 4 CPU ranks
// against its float64 reference.
func TestTensorParallelVariant(t *testing.T) {
	cfg := variantConfig()
	w, err := RandomWeights(cfg, 3, dtype.F32)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteHF(dir, cfg, w); err != nil {
		t.Fatal(err)
	}
	prompt, more := randomIDs(33, 10, 1024), randomIDs(34, 3, 1024)
	want := newRef(cfg, w).forward(append(slices.Clone(prompt), more...))
	for _, size := range []int{2, 4} {
		comms, _ := cpu.NewGroup("tp", size)
		ms := make([]*Model, size)
		for r := range ms {
			ms[r] = load(t, dir, Options{Comm: comms[r]})
		}
		rows := make([][][]float32, size)
		errs := make([]error, size)
		var wg sync.WaitGroup
		for r := range ms {
			wg.Go(func() { rows[r], errs[r] = prefillDecodeRows(ms[r], prompt, more) })
		}
		wg.Wait()
		for r := range ms {
			if errs[r] != nil {
				t.Fatalf("%d ranks, rank %d: %v", size, r, errs[r])
			}
			for p := range want {
				if e := relErr(rows[r][p], want[p]); e > tolF32 {
					t.Errorf("%d ranks, rank %d, position %d: error %.3g", size, r, p, e)
				}
			}
		}
	}
}

// TestShardQuantizedColumns: a block-format matrix split by columns keeps
// whole blocks: each rank's part dequantizes to exactly its columns of the
// whole matrix; a split that would cut a block is refused.
func TestShardQuantizedColumns(t *testing.T) {
	const R, K = 6, 1024
	v := make([]float32, R*K)
	for i := range v {
		v[i] = float32(i%97) / 13
	}
	ft, _ := tensor.New(v, R, K)
	raw, err := graph.QuantizeValue(quant.Q4_K, ft)
	if err != nil {
		t.Fatal(err)
	}
	whole := make([]float32, R*K)
	if err := quant.Dequantize(quant.Q4_K, raw.Bytes(), whole); err != nil {
		t.Fatal(err)
	}
	raw2, _ := tensor.New(slices.Clone(raw.Bytes()), R, len(raw.Bytes())/R)
	comms, _ := cpu.NewGroup("tp", 4)
	for r, c := range comms {
		m := &Model{comm: c}
		part, shape, err := m.shard("blk.0.ffn_down.weight", raw2, []int{R, K}, quant.Q4_K, true)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shape, []int{R, K / 4}) {
			t.Fatalf("rank %d: shape %v", r, shape)
		}
		got := make([]float32, R*K/4)
		if err := quant.Dequantize(quant.Q4_K, part.Bytes(), got); err != nil {
			t.Fatal(err)
		}
		for i := range R {
			if !slices.Equal(got[i*K/4:(i+1)*K/4], whole[i*K+r*K/4:i*K+(r+1)*K/4]) {
				t.Fatalf("rank %d row %d: the part is not the whole's columns", r, i)
			}
		}
	}
	eight, _ := cpu.NewGroup("tp", 8)
	if _, _, err := (&Model{comm: eight[0]}).shard("blk.0.ffn_down.weight", raw2, []int{R, K}, quant.Q4_K, true); err == nil || !strings.Contains(err.Error(), "not a whole number of q4_k blocks") {
		t.Errorf("a split inside a block: %v", err)
	}
}

// TestTensorParallelResidual: a rank's decode program is the whole model's
// plus one all-reduce after each attention and each MLP and one all-gather
// of the logits, and nothing else — rank 0 adds the residual to its
// partial product before the all-reduce (in the product's kernel), so no
// rank has an add of its own after one; and the LM head's product and
// cast are one kernel over the rank's vocabulary rows (the tiny model's
// untied output weight, sharded by rows: [V/2, C] a rank).
func TestTensorParallelResidual(t *testing.T) {
	dir, _, _ := tiny(t)
	whole := load(t, dir, Options{})
	comms, err := cpu.NewGroup("tp", 2)
	if err != nil {
		t.Fatal(err)
	}
	steps := func(m *Model) (all, collectives int) {
		p, err := m.buildDecode(decodeKey{batch: 1, window: minDecodeWindow})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Plan().Steps {
			all++
			if s.Kernel.IsCollective() {
				collectives++
			}
		}
		return all, collectives
	}
	n0, c0 := steps(whole)
	if c0 != 0 {
		t.Fatalf("the whole model has %d collectives", c0)
	}
	cfg := TinyConfig()
	want := 2*cfg.Layers + 1
	for r := range 2 {
		m := load(t, dir, Options{Comm: comms[r]})
		if !m.headSplit() {
			t.Fatalf("rank %d: the LM head is not split", r)
		}
		for _, w := range m.weights {
			if w.name == "output.weight" && !slices.Equal(w.shape, []int{cfg.Vocab / 2, cfg.Hidden}) {
				t.Errorf("rank %d: output.weight %v, want [%d %d]", r, w.shape, cfg.Vocab/2, cfg.Hidden)
			}
		}
		n, c := steps(m)
		if c != want || n != n0+want {
			t.Errorf("rank %d: %d steps with %d collectives; want %d + %d collectives", r, n, c, n0, want)
		}
	}
}

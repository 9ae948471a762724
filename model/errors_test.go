package model

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/safetensors"
)

// loadErr expects Load to fail with an error containing every want.
func loadErr(t *testing.T, path string, opts Options, want ...string) {
	t.Helper()
	m, err := Load(path, opts)
	if err == nil {
		m.Close()
		t.Fatalf("Load(%s) succeeded, want an error naming %q", path, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Load(%s): %v\nwant it to name %q", path, err, w)
		}
	}
}

func without(w []NamedTensor, names ...string) []NamedTensor {
	var out []NamedTensor
	for _, nt := range w {
		drop := false
		for _, n := range names {
			drop = drop || nt.Name == n
		}
		if !drop {
			out = append(out, nt)
		}
	}
	return out
}

// editConfig rewrites a key of dir's config.json.
func editConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ = json.Marshal(m)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadErrorsSafetensors(t *testing.T) {
	_, w, _ := tiny(t)
	cfg := TinyConfig()
	write := func(t *testing.T, ws []NamedTensor, c Config) string {
		dir := t.TempDir()
		if err := WriteHF(dir, c, ws); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("missing tensors", func(t *testing.T) {
		dir := write(t, without(w, "model.layers.1.mlp.up_proj.weight", "model.norm.weight"), cfg)
		loadErr(t, dir, Options{}, `missing tensor "model.layers.1.mlp.up_proj.weight" (blk.1.ffn_up.weight)`, `missing tensor "model.norm.weight"`)
	})
	t.Run("shape mismatch", func(t *testing.T) {
		dir := write(t, w, cfg)
		editConfig(t, dir, func(m map[string]any) { m["intermediate_size"] = 700 })
		// Every tensor at fault is named, with both shapes.
		loadErr(t, dir, Options{}, `tensor "model.layers.0.mlp.gate_proj.weight" has shape [688 256]`, "the config wants [700 256]",
			`"model.layers.3.mlp.down_proj.weight" has shape [256 688]`, "the config wants [256 700]", "intermediate 700")
	})
	t.Run("vocabulary", func(t *testing.T) {
		dir := write(t, w, cfg)
		editConfig(t, dir, func(m map[string]any) { m["vocab_size"] = 1000 })
		loadErr(t, dir, Options{}, `"model.embed_tokens.weight" has shape [1024 256]`, "vocabulary 1000")
	})
	t.Run("dtype", func(t *testing.T) {
		dir := write(t, w, cfg)
		// Rewrite the checkpoint with one tensor in F64.
		var ts []safetensors.WriteTensor
		for _, nt := range w {
			st := safetensors.WriteTensor{Name: nt.Name, DType: safetensors.F32, Shape: nt.T.Shape(), Data: nt.T.Bytes()}
			if nt.Name == "model.norm.weight" {
				st.DType, st.Data = safetensors.F64, make([]byte, 8*256)
			}
			ts = append(ts, st)
		}
		if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
			t.Fatal(err)
		}
		loadErr(t, dir, Options{}, `tensor "model.norm.weight" has dtype F64: only F32, F16 and BF16 are supported`)
	})
	for _, c := range []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"model type", func(m map[string]any) { m["model_type"] = "gpt2" }, `model_type "gpt2" is not a llama-architecture model`},
		{"activation", func(m map[string]any) { m["hidden_act"] = "gelu" }, `hidden_act "gelu"`},
		{"rope type", func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4} }, `rope scaling type "yarn" is not supported`},
		{"partial rotary", func(m map[string]any) { m["partial_rotary_factor"] = 0.5 }, "partial_rotary_factor 0.5"},
		{"sliding window", func(m map[string]any) { m["model_type"] = "mistral"; m["sliding_window"] = 512 }, "sliding window of 512 positions, which Loom does not implement; it computes the same with Options.MaxSeqLen ≤ 512 (asked for 2048)"},
		{"qwen2 sliding window", func(m map[string]any) {
			m["model_type"] = "qwen2"
			m["sliding_window"] = 256
			m["use_sliding_window"] = true
		}, "sliding window of 256 positions"},
		{"missing key", func(m map[string]any) { delete(m, "hidden_size"); delete(m, "vocab_size") }, "missing keys: hidden_size, vocab_size"},
		{"heads", func(m map[string]any) { m["num_key_value_heads"] = 3 }, "8 attention heads are not a multiple of 3 key/value heads"},
		{"llama3 fields", func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8} }, "llama3 rope scaling needs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := write(t, w, cfg)
			editConfig(t, dir, c.edit)
			loadErr(t, dir, Options{}, c.want)
		})
	}
	t.Run("paths", func(t *testing.T) {
		loadErr(t, filepath.Join(t.TempDir(), "nothing"), Options{}, "no such file")
		loadErr(t, t.TempDir(), Options{}, "has no config.json")
	})
	t.Run("options", func(t *testing.T) {
		dir, _, _ := tiny(t)
		loadErr(t, dir, Options{DType: dtype.U8}, "Options.DType u8: want f32, f16 or bf16")
		loadErr(t, dir, Options{MaxSeqLen: -1}, "Options.MaxSeqLen is -1")
	})
}

func TestLoadErrorsGGUF(t *testing.T) {
	_, w, _ := tiny(t)
	cfg := TinyConfig()
	t.Run("architecture", func(t *testing.T) {
		g := gguf.NewWriter()
		g.Set("general.architecture", gguf.String("gpt2"))
		p := filepath.Join(t.TempDir(), "gpt2.gguf")
		if err := g.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		loadErr(t, p, Options{}, `general.architecture is "gpt2": only "llama" is supported`)
	})
	t.Run("metadata", func(t *testing.T) {
		g := gguf.NewWriter()
		g.Set("general.architecture", gguf.String("llama"))
		g.Set("llama.embedding_length", gguf.Uint32(256))
		p := filepath.Join(t.TempDir(), "bare.gguf")
		if err := g.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		loadErr(t, p, Options{}, `"llama.block_count"`, `"llama.feed_forward_length"`, `"llama.attention.head_count"`)
	})
	t.Run("experts", func(t *testing.T) {
		g, err := NewGGUFWriter(cfg, w, quant.F32)
		if err != nil {
			t.Fatal(err)
		}
		g.Set("llama.expert_count", gguf.Uint32(8))
		p := filepath.Join(t.TempDir(), "moe.gguf")
		if err := g.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		loadErr(t, p, Options{}, "llama.expert_count is 8: mixture-of-experts models (Mixtral) are not supported")
	})
	t.Run("missing tensor", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "missing.gguf")
		if err := WriteGGUF(p, cfg, without(w, "model.layers.2.self_attn.v_proj.weight"), quant.F32); err != nil {
			t.Fatal(err)
		}
		loadErr(t, p, Options{}, `missing tensor "blk.2.attn_v.weight"`)
	})
	t.Run("formats", func(t *testing.T) {
		// A quantized norm and a matrix in a format Loom does not compute
		// with, reported together.
		g, err := NewGGUFWriter(cfg, without(w, "model.layers.0.input_layernorm.weight", "model.layers.1.mlp.gate_proj.weight"), quant.F32)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.AddTensor("blk.0.attn_norm.weight", quant.Q8_0, []int{256}, make([]byte, 8*34)); err != nil {
			t.Fatal(err)
		}
		if err := g.AddTensor("blk.1.ffn_gate.weight", quant.IQ4_NL, []int{688, 256}, make([]byte, 688*8*18)); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "formats.gguf")
		if err := g.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		loadErr(t, p, Options{}, `"blk.0.attn_norm.weight" is stored as q8_0; a 1-D weight must be f32, f16 or bf16`,
			`"blk.1.ffn_gate.weight" is stored as iq4_nl, a format Loom does not compute with`)
	})
}

func TestRunErrors(t *testing.T) {
	dir, _, _ := tiny(t)
	m := load(t, dir, Options{MaxSeqLen: 8})
	s, _ := m.NewSession(1)
	defer s.Close()
	expect := func(err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error naming %q", err, want)
		}
	}
	_, err := s.Decode(ctx, []int{1})
	expect(err, "decode: the session has no prompt yet")
	_, err = s.Prefill(ctx, [][]int{make([]int, 9)})
	expect(err, "prefill: a prompt of 9 tokens does not fit the context of 8 positions")
	_, err = s.Prefill(ctx, [][]int{{1, 1024}})
	expect(err, "prefill: token id 1024 is outside the vocabulary [0, 1024) (prompt 0, position 1)")
	_, err = s.Prefill(ctx, [][]int{{-1}})
	expect(err, "token id -1 is outside")
	_, err = s.Prefill(ctx, [][]int{{}})
	expect(err, "prefill: empty prompt")
	_, err = s.Prefill(ctx, [][]int{{1}, {2}})
	expect(err, "2 prompts for a session of 1 sequences")
	s2, _ := m.NewSession(2)
	_, err = s2.Prefill(ctx, [][]int{{1, 2}, {3}})
	expect(err, "prompt 1 has 1 tokens, prompt 0 has 2")
	_, err = m.NewSession(0)
	expect(err, "session of 0 sequences")

	if _, err := s.Prefill(ctx, [][]int{{1, 2, 3, 4, 5, 6, 7}}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Decode(ctx, []int{2000})
	expect(err, "decode: token id 2000 is outside the vocabulary")
	_, err = s.Decode(ctx, []int{1, 2})
	expect(err, "decode: 2 tokens for a session of 1 sequences")
	if _, err := s.Decode(ctx, []int{8}); err != nil { // position 7, the last
		t.Fatal(err)
	}
	_, err = s.Decode(ctx, []int{9})
	expect(err, "decode: the context is full: every sequence holds 8 positions")

	_, err = m.Generate(ctx, make([]int, 9), GenerateOptions{MaxTokens: 1})
	expect(err, "a prompt of 9 tokens does not fit the context of 8")
	_, err = m.Generate(ctx, nil, GenerateOptions{MaxTokens: 1})
	expect(err, "empty prompt")
	_, err = m.Generate(ctx, []int{1}, GenerateOptions{MaxTokens: -1})
	expect(err, "MaxTokens -1")
	_, err = m.Generate(ctx, []int{1}, GenerateOptions{MaxTokens: 1, TopP: 2})
	expect(err, "top-p 2")

	cancelled, cancel := contextWithCancel()
	cancel()
	_, err = m.Generate(cancelled, []int{1, 2}, GenerateOptions{MaxTokens: 3})
	expect(err, "context canceled")

	m.Close()
	_, err = s.Prefill(ctx, [][]int{{1}})
	expect(err, "the model is closed")
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

// TestSlidingWindow: a Mistral config with a sliding window loads when the
// cache is no longer than the window (attention over the whole sequence is
// then the same), as does Qwen2's window when not in use.
func TestSlidingWindow(t *testing.T) {
	dir := copyModel(t)
	editConfig(t, dir, func(m map[string]any) { m["model_type"] = "mistral"; m["sliding_window"] = 4096 })
	if m := load(t, dir, Options{}); m.Config().SlidingWindow != 4096 {
		t.Errorf("sliding window %d", m.Config().SlidingWindow)
	}
	editConfig(t, dir, func(m map[string]any) { m["sliding_window"] = 100 })
	if m := load(t, dir, Options{MaxSeqLen: 100}); m.MaxSeqLen() != 100 {
		t.Errorf("max seq %d", m.MaxSeqLen())
	}
	editConfig(t, dir, func(m map[string]any) { m["model_type"] = "qwen2"; m["use_sliding_window"] = false })
	if m := load(t, dir, Options{}); m.Config().SlidingWindow != 0 {
		t.Errorf("qwen2 without use_sliding_window: window %d", m.Config().SlidingWindow)
	}
}

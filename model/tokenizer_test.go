package model

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tokenizer"
)

// copyModel copies the tiny checkpoint into a fresh directory.
func copyModel(t *testing.T) string {
	t.Helper()
	src, _, _ := tiny(t)
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestTokenizerJSON: tokenizer.json beside the safetensors is the model's
// tokenizer, generation_config.json's eos_token_id its stop tokens, and
// Generate stops at them by default.
func TestTokenizerJSON(t *testing.T) {
	dir := copyModel(t)
	m := load(t, dir, Options{})
	if _, err := m.Tokenizer(); err == nil || !strings.Contains(err.Error(), "has no tokenizer.json") {
		t.Errorf("no tokenizer: %v", err)
	}
	b, err := os.ReadFile("../tokenizer/testdata/llama2_spm.tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644)
	want, err := tokenizer.ParseJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	prompt := want.Encode("The quick brown fox", true)
	free, err := m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 10, StopTokens: []int{}})
	if err != nil {
		t.Fatal(err)
	}
	stop := free.Tokens[3]
	os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(fmt.Sprintf(`{"eos_token_id": [2, %d]}`, stop)), 0o644)
	m = load(t, dir, Options{})
	tok, err := m.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("The quick brown fox", true); !slices.Equal(got, prompt) {
		t.Errorf("Encode: %v, want %v", got, prompt)
	}
	if !slices.Equal(tok.StopTokens(), []int{2, stop}) {
		t.Errorf("stop tokens %v, want [2 %d]", tok.StopTokens(), stop)
	}
	g, err := m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	first := slices.Index(free.Tokens, stop)
	if g.StopReason != StopToken || !slices.Equal(g.Tokens, free.Tokens[:first+1]) {
		t.Errorf("default stop tokens: %v (%s), want %v", g.Tokens, g.StopReason, free.Tokens[:first+1])
	}
}

// TestTokenizerGGUF: the tokenizer.ggml.* metadata of a GGUF file, read
// through the adapter, builds the tokenizer NewFromGGUF builds from the
// same values.
func TestTokenizerGGUF(t *testing.T) {
	_, w, _ := tiny(t)
	toks := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3} // unknown, control, control
	scores := []float32{0, 0, 0}
	for b := range 256 {
		toks = append(toks, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6) // byte
		scores = append(scores, 0)
	}
	for i, p := range []string{"▁", "h", "e", "l", "o", "▁h", "el", "lo", "▁hel", "▁hello", "w", "r", "d", "▁w", "▁wor", "▁world"} {
		toks = append(toks, p)
		types = append(types, 1)
		scores = append(scores, -float32(i))
	}
	md := tokenizer.MapMetadata{tokenizer.KeyModel: "llama", tokenizer.KeyTokens: toks, tokenizer.KeyScores: scores,
		tokenizer.KeyTokenType: types, tokenizer.KeyBOS: uint32(1), tokenizer.KeyEOS: uint32(2)}
	want, err := tokenizer.NewFromGGUF(md)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGGUFWriter(TinyConfig(), w, quant.F32)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []struct {
		k string
		v gguf.Value
	}{
		{tokenizer.KeyModel, gguf.String("llama")},
		{tokenizer.KeyTokens, gguf.ArrayValue(gguf.NewArray(toks))},
		{tokenizer.KeyScores, gguf.ArrayValue(gguf.NewArray(scores))},
		{tokenizer.KeyTokenType, gguf.ArrayValue(gguf.NewArray(types))},
		{tokenizer.KeyBOS, gguf.Uint32(1)},
		{tokenizer.KeyEOS, gguf.Uint32(2)},
	} {
		if err := g.Set(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "tok.gguf")
	if err := g.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m := load(t, path, Options{})
	tok, err := m.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"hello world", "hello, wörld!"} {
		if got, w := tok.Encode(text, true), want.Encode(text, true); !slices.Equal(got, w) || len(got) < 3 {
			t.Errorf("Encode(%q): %v, want %v", text, got, w)
		}
	}
	if tok.BOS() != 1 || !slices.Equal(tok.StopTokens(), []int{2}) {
		t.Errorf("BOS %d, stop tokens %v", tok.BOS(), tok.StopTokens())
	}
	// A GGUF without tokenizer metadata has no tokenizer, and says so.
	bare := filepath.Join(t.TempDir(), "bare.gguf")
	if err := WriteGGUF(bare, TinyConfig(), w, quant.F32); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, bare, Options{}).Tokenizer(); err == nil || !strings.Contains(err.Error(), "no tokenizer metadata") {
		t.Errorf("no tokenizer: %v", err)
	}
}

package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEncode encodes arbitrary bytes with a SentencePiece and a byte-level
// vocabulary: nothing may panic, every id must be a token, valid UTF-8
// must round-trip through the byte-level tokenizer, and the stream decoder
// must agree with Decode.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "hello world", "a\xffb", "<s>x</s>", "日本 😀\t\n  x", "'S 'll 123456", "\xe2\x82", "<|endoftext|>"} {
		f.Add(s)
	}
	smd, _ := spmVocab(map[string]float32{"▁": -1, "a": -2, "b": -2, "▁a": -0.5, "ab": -1}, true)
	spm, err := NewFromGGUF(smd)
	if err != nil {
		f.Fatal(err)
	}
	bmd, _ := byteVocab([]string{"Ġ t", "h e", "Ġt he"}, "<|endoftext|>")
	bl, err := NewFromGGUF(bmd)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tk := range []*Tokenizer{spm, bl} {
			ids := tk.Encode(s, true)
			for _, id := range ids {
				if _, ok := tk.Token(id); !ok {
					t.Fatalf("%v: Encode(%q) gave id %d", tk.Kind(), s, id)
				}
			}
			checkStream(t, tk, ids)
		}
		if utf8.ValidString(s) {
			if got := bl.Decode(bl.Encode(s, false)); got != s {
				t.Fatalf("byte-level round trip of %q gave %q", s, got)
			}
			if !strings.Contains(s, "<") {
				if got := spm.Decode(spm.Encode(s, false)); got != s {
					t.Fatalf("sentencepiece round trip of %q gave %q", s, got)
				}
			}
		}
	})
}

// FuzzParseJSON feeds arbitrary bytes to ParseJSON: errors are fine,
// panics are not, and an accepted tokenizer must encode and decode.
func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`))
	f.Add([]byte(`{"added_tokens":[{"id":5,"content":"<s>","special":true}],"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>"}},{"Sequence":{"id":"A"}}],"special_tokens":{"<s>":{"ids":[5]}}},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}`))
	files, _ := filepath.Glob(filepath.Join("testdata", "*.tokenizer.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := ParseJSON(b)
		if err != nil {
			return
		}
		ids := tk.Encode("Hello <s> wörld 123 😀", true)
		checkStream(t, tk, ids)
	})
}

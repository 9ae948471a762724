package tokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

// ggufFromJSON converts a reference byte-level tokenizer.json into the
// metadata a GGUF converter writes for it (tokens by id, merges as "a b",
// special added tokens as control tokens).
func ggufFromJSON(t *testing.T, file, pre string) (MapMetadata, []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		AddedTokens []jsonAdded `json:"added_tokens"`
		Model       struct {
			Vocab  map[string]int
			Merges [][2]string
		}
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	n := len(j.Model.Vocab) + len(j.AddedTokens)
	toks := make([]string, n)
	types := make([]int32, n)
	for s, id := range j.Model.Vocab {
		toks[id], types[id] = s, int32(TypeNormal)
	}
	var userDefined []string
	for _, a := range j.AddedTokens {
		toks[a.ID], types[a.ID] = a.Content, int32(TypeControl)
		if !a.Special {
			types[a.ID] = int32(TypeUserDefined)
			userDefined = append(userDefined, a.Content)
		}
	}
	merges := make([]string, len(j.Model.Merges))
	for i, m := range j.Model.Merges {
		merges[i] = m[0] + " " + m[1]
	}
	return MapMetadata{KeyModel: "gpt2", KeyPre: pre, KeyTokens: toks, KeyTokenType: types, KeyMerges: merges}, userDefined
}

// TestGGUFMatchesReference builds the byte-level reference tokenizers
// through NewFromGGUF, as llama.cpp would read their GGUF conversion, and
// checks the ids against the reference.
func TestGGUFMatchesReference(t *testing.T) {
	refs := loadRefs(t)
	for name, pre := range map[string]string{"llama3_bpe": "llama-bpe", "gpt2_bpe": "gpt-2"} {
		ref, ok := refs.Tokenizers[name]
		if !ok {
			t.Fatalf("reference has no %s", name)
		}
		t.Run(name, func(t *testing.T) {
			md, userDefined := ggufFromJSON(t, ref.File, pre)
			for id, s := range md[KeyTokens].([]string) {
				if s == ref.Config["bos_token"] {
					md[KeyBOS] = uint32(id)
				}
			}
			tk := mustGGUF(t, md)
			for _, c := range ref.Cases {
				skip := false
				for _, u := range userDefined {
					// GGUF keeps no lstrip/rstrip flags.
					skip = skip || strings.Contains(c.Text, u)
				}
				if skip {
					continue
				}
				if got := tk.Encode(c.Text, false); !slices.Equal(got, c.IDsPlain) && len(got)+len(c.IDsPlain) > 0 {
					t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDsPlain)
				}
				if name == "llama3_bpe" {
					// llama-bpe adds BOS by default, as the template does.
					if got := tk.Encode(c.Text, true); !slices.Equal(got, c.IDs) {
						t.Errorf("Encode(%q, true)\n got %v\nwant %v", c.Text, got, c.IDs)
					}
				}
				if got := tk.Decode(c.IDsPlain); got != c.Decoded {
					t.Errorf("Decode(%v) = %q, want %q", c.IDsPlain, got, c.Decoded)
				}
			}
		})
	}
}

// randomText mixes scripts, emoji, digits, whitespace runs, punctuation
// and, with specials, special-token text.
func randomText(rng *rand.Rand, specials []string) string {
	pools := []string{
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
		"éèêëàâäôöûüçñßøåÉÀ", "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔ", "абвгдежзийклмнопрстуфхцчшщъыьэюяЖЩ",
		"日本語中文字漢字かなカナ한국어", "😀😃👍🏽🇫🇷❤️✨🔥🤖", "0123456789٣٤½²",
		" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", ".,;:!?'\"()[]{}<>/\\|@#$%^&*-_=+~`",
		"'s", "'T", "ſ", "e\u0301", "\u200d",
	}
	var b strings.Builder
	for n := rng.IntN(40); n > 0; n-- {
		if len(specials) > 0 && rng.IntN(12) == 0 {
			b.WriteString(specials[rng.IntN(len(specials))])
			continue
		}
		if rng.IntN(10) == 0 {
			// any code point, surrogates excluded
			r := rune(rng.IntN(0x10FFFF))
			if utf8.ValidRune(r) {
				b.WriteRune(r)
			}
			continue
		}
		p := []rune(pools[rng.IntN(len(pools))])
		for k := 1 + rng.IntN(4); k > 0; k-- {
			b.WriteRune(p[rng.IntN(len(p))])
		}
	}
	return b.String()
}

// TestRoundTrip checks Decode(Encode(s)) == s on random UTF-8 for the
// reference tokenizers (all bytes are reachable: byte fallback or byte
// mapping), and that the stream decoder agrees with Decode.
func TestRoundTrip(t *testing.T) {
	refs := loadRefs(t)
	names := make([]string, 0, len(refs.Tokenizers))
	for n := range refs.Tokenizers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		ref := refs.Tokenizers[name]
		t.Run(name, func(t *testing.T) {
			tk := loadRefTokenizer(t, ref.File, ref.Config)
			var specials []string
			for id := range tk.VocabSize() {
				if tk.Kind() == SentencePiece {
					// A piece after a special token gets its own "▁", so
					// text with special tokens does not round-trip (the
					// reference behaves the same; see TestReferenceIDs).
					break
				}
				if tk.IsSpecial(id) {
					s, _ := tk.Token(id)
					specials = append(specials, s)
				}
			}
			rng := rand.New(rand.NewPCG(11, uint64(len(name))))
			for range 400 {
				s := randomText(rng, specials)
				ids := tk.Encode(s, false)
				got := tk.Decode(ids)
				if got != s && !(name == "llama3_bpe" && strings.Contains(s, "<|tool|>")) {
					t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, got, ids)
				}
				checkStream(t, tk, ids)
				for _, id := range ids {
					if _, ok := tk.Token(id); !ok {
						t.Fatalf("Encode(%q) gave id %d, no token", s, id)
					}
				}
			}
			// Random ids, byte tokens and partial characters included.
			for range 400 {
				ids := make([]int, rng.IntN(20))
				for i := range ids {
					ids[i] = rng.IntN(tk.VocabSize() + 3)
					if rng.IntN(3) == 0 && name == "llama2_spm" {
						ids[i] = 3 + 0x80 + rng.IntN(0x80) // byte tokens of non-ASCII bytes
					}
				}
				checkStream(t, tk, ids)
				sd := tk.Stream()
				for _, id := range ids {
					if c := sd.Add(id); !utf8.ValidString(c) {
						t.Fatalf("stream chunk %q is not valid UTF-8", c)
					}
				}
			}
		})
	}
}

// TestInvalidUTF8 checks that text which is not UTF-8 encodes without
// failing, into tokens whose bytes are the input's.
func TestInvalidUTF8(t *testing.T) {
	md, ids := spmVocab(map[string]float32{"▁": -1, "a": -1}, true)
	tk := mustGGUF(t, md)
	got := tk.Encode("a\xffa\xe2\x82", false)
	// As llama.cpp, a character's length comes from its lead byte: 0xFF
	// claims four bytes, so the following "a" travels as a byte token.
	want := pieces(ids, "▁", "a", "<0xFF>", "<0x61>", "<0xE2>", "<0x82>")
	if !slices.Equal(got, want) {
		t.Errorf("spm: %v, want %v", got, want)
	}
	bmd, bids := byteVocab(nil)
	btk := mustGGUF(t, bmd)
	got = btk.Encode("a\xff\xe2\x82b", false)
	want = pieces(bids, "a", "ÿ", "â", "Ĥ", "b")
	if !slices.Equal(got, want) {
		t.Errorf("byte-level: %v, want %v", got, want)
	}
	if d := btk.Decode(got); d != "a\uFFFD\uFFFDb" {
		t.Errorf("byte-level decode %q", d)
	}
}

// jsonTok builds a tokenizer.json around a byte-level vocabulary of
// single characters plus extra tokens.
func jsonTok(t *testing.T, pre, decoder string, extra []string, added string, post string) (*Tokenizer, map[string]int) {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	for _, e := range extra {
		if _, ok := vocab[e]; !ok {
			vocab[e] = len(vocab)
		}
	}
	vb, _ := json.Marshal(vocab)
	if post == "" {
		post = "null"
	}
	src := `{"added_tokens":[` + added + `],"normalizer":null,"pre_tokenizer":` + pre + `,"post_processor":` + post +
		`,"decoder":` + decoder + `,"model":{"type":"BPE","vocab":` + string(vb) + `,"merges":[]}}`
	tk, err := ParseJSON([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for i := range tk.VocabSize() {
		if s, ok := tk.Token(i); ok {
			ids[s] = i
		}
	}
	return tk, ids
}

func TestAddedTokenOptions(t *testing.T) {
	bl := `{"type":"ByteLevel","add_prefix_space":false,"use_regex":true}`
	added := `{"id":300,"content":"<L>","lstrip":true,"normalized":false,"special":false},
		{"id":301,"content":"<R>","rstrip":true,"normalized":false,"special":false},
		{"id":302,"content":"cat","single_word":true,"normalized":false,"special":false},
		{"id":303,"content":"<sp>","normalized":false,"special":true},
		{"id":304,"content":"<sp>x","normalized":false,"special":true}`
	tk, ids := jsonTok(t, bl, `{"type":"ByteLevel"}`, nil, added, "")
	cases := []struct {
		text string
		want []string
	}{
		{"a  <L>  b", []string{"a", "<L>", "Ġ", "Ġ", "b"}},
		{"a  <R>  b", []string{"a", "Ġ", "Ġ", "<R>", "b"}},
		{"a cat b", []string{"a", "Ġ", "cat", "Ġ", "b"}},
		{"concat", []string{"c", "o", "n", "c", "a", "t"}},
		{"cats", []string{"c", "a", "t", "s"}},
		{"cat", []string{"cat"}},
		// Leftmost, then longest: "<sp>x" beats "<sp>".
		{"<sp>xy<sp>", []string{"<sp>x", "y", "<sp>"}},
	}
	for _, c := range cases {
		if got := tk.Encode(c.text, false); !slices.Equal(got, pieces(ids, c.want...)) {
			t.Errorf("Encode(%q) = %v, want %q", c.text, got, c.want)
		}
	}
	if !tk.IsSpecial(303) || tk.IsSpecial(300) {
		t.Error("special flags")
	}
	// A normalized added token is matched after normalization.
	src := `{"added_tokens":[{"id":3,"content":"▁hi","normalized":true,"special":false}],
		"normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]},
		"pre_tokenizer":null,"post_processor":null,"decoder":null,
		"model":{"type":"BPE","vocab":{"▁":0,"h":1,"i":2},"merges":[]}}`
	ntk, err := ParseJSON([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	// The token "▁hi" is looked for as "▁▁hi" (Prepend applies to it too),
	// so "hi hi" does not contain it (confirmed with tokenizers 0.23.2).
	if got := ntk.Encode("hi hi", false); !slices.Equal(got, []int{0, 1, 2, 0, 1, 2}) {
		t.Errorf("normalized added token: %v", got)
	}
	// Its normalized form is what is matched: with Prepend("▁"), "hi"
	// becomes "▁hi", found only at the start or after a space.
	src2 := strings.Replace(src, `"content":"▁hi"`, `"content":"hi"`, 1)
	ntk2, err := ParseJSON([]byte(src2))
	if err != nil {
		t.Fatal(err)
	}
	if got := ntk2.Encode("hi hihi", false); !slices.Equal(got, []int{3, 3, 1, 2}) {
		t.Errorf("normalized added token in normalized form: %v", got)
	}
	// No decoder: tokens joined with spaces, as the reference does.
	// Decoding uses the normalized form of a normalized added token.
	if got := ntk.Decode([]int{3, 1, 2}); got != "▁▁hi h i" {
		t.Errorf("null decoder: %q", got)
	}
	if got := ntk2.Decode([]int{3, 1, 2}); got != "▁hi h i" {
		t.Errorf("null decoder: %q", got)
	}
	checkStream(t, ntk, []int{3, 1, 2})
}

func TestMetaspaceAndTemplates(t *testing.T) {
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "▁": 2, "a": 3, "b": 4, "▁a": 5, "▁b": 6}
	vb, _ := json.Marshal(vocab)
	mk := func(scheme string, split bool) *Tokenizer {
		src := `{"added_tokens":[{"id":1,"content":"<s>","special":true}],"normalizer":null,
			"pre_tokenizer":{"type":"Metaspace","replacement":"▁","prepend_scheme":"` + scheme + `","split":` + map[bool]string{true: "true", false: "false"}[split] + `},
			"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[1],"tokens":["<s>"]}}},
			"decoder":{"type":"Metaspace","replacement":"▁","prepend_scheme":"` + scheme + `","split":true},
			"model":{"type":"BPE","unk_token":"<unk>","vocab":` + string(vb) + `,"merges":[["▁","a"],["▁","b"]]}}`
		tk, err := ParseJSON([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	cases := []struct {
		scheme string
		split  bool
		text   string
		want   []int
	}{
		{"always", true, "ab a", []int{5, 4, 5}},
		{"always", true, "<s>b", []int{1, 6}},
		{"first", true, "<s>b", []int{1, 4}}, // "b" does not start the input
		{"first", true, "b<s>b", []int{6, 1, 4}},
		{"never", true, "ab", []int{3, 4}},
		{"always", false, "a b", []int{5, 6}},
		{"always", true, " a", []int{5}}, // already starts with ▁
		{"always", true, "c", []int{2, 0}},
	}
	for _, c := range cases {
		tk := mk(c.scheme, c.split)
		if got := tk.Encode(c.text, false); !slices.Equal(got, c.want) {
			t.Errorf("%s split=%v Encode(%q) = %v, want %v", c.scheme, c.split, c.text, got, c.want)
		}
	}
	tk := mk("always", true)
	if got := tk.Encode("a", true); !slices.Equal(got, []int{1, 5}) || tk.BOS() != 1 {
		t.Errorf("template BOS: %v (BOS %d)", got, tk.BOS())
	}
	// The Metaspace decoder drops "▁" in the first token only.
	if got := tk.Decode([]int{5, 6, 2}); got != "a b " {
		t.Errorf("metaspace decode %q", got)
	}
	if got := tk.Decode([]int{1, 5}); got != "<s> a" {
		t.Errorf("metaspace decode after <s>: %q", got)
	}
	checkStream(t, tk, []int{5, 6, 2})
}

func TestJSONErrors(t *testing.T) {
	model := `"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}`
	cases := []struct {
		src, want string
	}{
		{`{`, "invalid tokenizer.json"},
		{`{}`, "has no model"},
		{`{"model":{"type":"Unigram","vocab":[]}}`, `model type "Unigram" is not supported`},
		{`{"model":{"type":"BPE","dropout":0.1,"vocab":{},"merges":[]}}`, "dropout"},
		{`{"model":{"type":"BPE","continuing_subword_prefix":"##","vocab":{},"merges":[]}}`, "continuing_subword_prefix"},
		{`{"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}}`, `merges[0] ("a", "b")`},
		{`{"model":{"type":"BPE","vocab":{"a":0},"merges":["a"]}}`, "not two tokens"},
		{`{"model":{"type":"BPE","unk_token":"<unk>","vocab":{"a":0},"merges":[]}}`, `unk_token "<unk>"`},
		{`{"model":{"type":"BPE","vocab":{"a":0,"b":0},"merges":[]}}`, "share id 0"},
		{`{"normalizer":{"type":"NFKC"},` + model + `}`, `normalizer "NFKC" is not supported`},
		{`{"pre_tokenizer":{"type":"Whitespace"},` + model + `}`, `pre-tokenizer "Whitespace" is not supported`},
		{`{"pre_tokenizer":{"type":"Split","pattern":{"Regex":"\\s+(?!\\S)"},"behavior":"Isolated"},` + model + `}`, "Go's regexp lacks"},
		{`{"pre_tokenizer":{"type":"Split","pattern":{"Regex":"a"},"behavior":"MergedWithNext"},` + model + `}`, "behavior"},
		{`{"decoder":{"type":"WordPiece"},` + model + `}`, `decoder "WordPiece" is not supported`},
		{`{"decoder":{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"ByteFallback"}]},` + model + `}`, "after Fuse"},
		{`{"post_processor":{"type":"BertProcessing"},` + model + `}`, `post-processor "BertProcessing"`},
		{`{"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>"}}],"special_tokens":{}},` + model + `}`, `special token "<s>"`},
	}
	for _, c := range cases {
		_, err := ParseJSON([]byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "tokenizer: ParseJSON: ") {
			t.Errorf("ParseJSON(%s): %v, want an error containing %q", c.src, err, c.want)
		}
	}
	if _, err := LoadJSON(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("LoadJSON of a missing file succeeded")
	}
	// A bad tokenizer_config.json names itself.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{`+model+`}`), 0o644)
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"eos_token":"</s>"}`), 0o644)
	if _, err := LoadJSON(filepath.Join(dir, "tokenizer.json")); err == nil || !strings.Contains(err.Error(), `eos_token "</s>" is not a token`) {
		t.Errorf("bad config: %v", err)
	}
}

func TestGGUFErrors(t *testing.T) {
	md, _ := spmVocab(map[string]float32{"a": 0}, false)
	with := func(k string, v any) MapMetadata {
		m := MapMetadata{}
		for kk, vv := range md {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	bmd, _ := byteVocab([]string{"a b"})
	bwith := func(k string, v any) MapMetadata {
		m := MapMetadata{}
		for kk, vv := range bmd {
			m[kk] = vv
		}
		m[k] = v
		return m
	}
	cases := []struct {
		md   MapMetadata
		want string
	}{
		{with(KeyModel, nil), "no key tokenizer.ggml.model"},
		{with(KeyModel, "bert"), `"bert" is not supported`},
		{with(KeyTokens, nil), "no key tokenizer.ggml.tokens"},
		{with(KeyTokens, []string{}), "is empty"},
		{with(KeyTokens, []int{1}), "holds []int, not []string"},
		{with(KeyScores, []float32{1}), "scores has 1 entries for 4 tokens"},
		{with(KeyTokenType, []int32{1}), "token_type has 1 entries"},
		{with(KeyTokens, []string{"a", "b", "a", "c"}), `duplicate token "a" at ids 0 and 2`},
		{with(KeyBOS, uint32(99)), "bos_token_id = 99 is outside the vocabulary of 4 tokens"},
		{with(KeyEOS, -1), "does not fit in uint32"},
		{with(KeyAddBOS, "yes"), "not bool"},
		{bwith(KeyPre, "tekken"), `tokenizer.ggml.pre "tekken" is not supported`},
		{bwith(KeyMerges, []string{"ab"}), `merges[0] = "ab" is not two tokens`},
		{bwith(KeyMerges, []string{"a z"}), "is not a token"},
		{MapMetadata{KeyModel: "llama", KeyTokens: []string{"a"}}, "no BOS token"},
	}
	for _, c := range cases {
		_, err := NewFromGGUF(c.md)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "tokenizer: NewFromGGUF: ") {
			t.Errorf("%v", err)
			t.Errorf("  want an error containing %q", c.want)
		}
	}
}

func TestStopTokens(t *testing.T) {
	md, ids := byteVocab(nil, "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>")
	md[KeyPre] = "llama-bpe"
	md[KeyBOS] = uint32(ids["<|begin_of_text|>"])
	md[KeyEOS] = uint32(ids["<|end_of_text|>"])
	tk := mustGGUF(t, md)
	if !tk.AddsBOS() || tk.BOS() != ids["<|begin_of_text|>"] {
		t.Errorf("llama-bpe should add BOS %d", tk.BOS())
	}
	want := []int{ids["<|end_of_text|>"], ids["<|eot_id|>"]}
	if got := tk.StopTokens(); !slices.Equal(got, want) {
		t.Errorf("stop tokens %v, want %v", got, want)
	}
	if !tk.IsStop(ids["<|eot_id|>"]) || tk.IsStop(ids["a"]) {
		t.Error("IsStop")
	}
	if err := tk.SetStopTokens(5, 7); err != nil || !slices.Equal(tk.StopTokens(), []int{5, 7}) {
		t.Errorf("SetStopTokens: %v %v", err, tk.StopTokens())
	}
	if err := tk.SetStopTokens(1 << 20); err == nil {
		t.Error("SetStopTokens accepted an id outside the vocabulary")
	}
	if tk.TokenType(ids["<|eot_id|>"]) != TypeControl || tk.TokenType(-1) != TypeUndefined {
		t.Error("TokenType")
	}
}

// TestConcurrentUse encodes and decodes from several goroutines (run with
// -race to check the claim that a Tokenizer is safe for concurrent use).
func TestConcurrentUse(t *testing.T) {
	md, _ := byteVocab([]string{"Ġ t", "h e", "Ġt he"}, "<|endoftext|>")
	tk := mustGGUF(t, md)
	want := tk.Encode("the cat<|endoftext|> the dog", true)
	done := make(chan bool)
	for range 8 {
		go func() {
			ok := true
			for range 200 {
				got := tk.Encode("the cat<|endoftext|> the dog", true)
				ok = ok && slices.Equal(got, want) && tk.Decode(got) == "the cat<|endoftext|> the dog"
			}
			done <- ok
		}()
	}
	for range 8 {
		if !<-done {
			t.Error("concurrent Encode/Decode disagreed")
		}
	}
}

// TestRegexSplits covers llama.cpp's default pre-tokenizer (four regexes
// in turn) and Split with a plain Go regex, through merges that cross the
// split points: "3 4" is the best merge, so "12345" unsplit is 12 34 5,
// while split at three digits it is 123 4 5.
func TestRegexSplits(t *testing.T) {
	md, ids := byteVocab([]string{"3 4", "1 2", "12 3"})
	md[KeyPre] = "default"
	tk := mustGGUF(t, md)
	if got, want := tk.Encode("12345", false), pieces(ids, "123", "4", "5"); !slices.Equal(got, want) {
		t.Errorf("default pre: %v, want %v", got, want)
	}
	md[KeyPre] = "gpt-2"
	if got, want := mustGGUF(t, md).Encode("12345", false), pieces(ids, "12", "34", "5"); !slices.Equal(got, want) {
		t.Errorf("gpt-2 pre: %v, want %v", got, want)
	}
	md[KeyPre] = "qwen2"
	if got, want := mustGGUF(t, md).Encode("12345", false), pieces(ids, "1", "2", "3", "4", "5"); !slices.Equal(got, want) {
		t.Errorf("qwen2 pre: %v, want %v", got, want)
	}
	md[KeyPre] = "smollm"
	if got, want := mustGGUF(t, md).Encode("a12", false), pieces(ids, "a", "1", "2"); !slices.Equal(got, want) {
		t.Errorf("smollm pre: %v, want %v", got, want)
	}

	isolated := `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"[0-9]{3}"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]}`
	tk2, ids2 := jsonTok(t, isolated, `{"type":"ByteLevel"}`, []string{"123", "45"}, "", "")
	if got, want := tk2.Encode("12345", false), pieces(ids2, "1", "2", "3", "4", "5"); !slices.Equal(got, want) {
		t.Errorf("Split isolated (no merges): %v, want %v", got, want)
	}
	removed := `{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"String":"-"},"behavior":"Removed","invert":false},{"type":"ByteLevel","add_prefix_space":true,"use_regex":false}]}`
	tk3, ids3 := jsonTok(t, removed, `{"type":"ByteLevel"}`, nil, "", "")
	if got, want := tk3.Encode("a-b", false), pieces(ids3, "Ġ", "a", "Ġ", "b"); !slices.Equal(got, want) {
		t.Errorf("Split removed with prefix space: %v, want %v", got, want)
	}
	// A Replace normalizer with a regex, and a Strip decoder on both ends
	// before any Fuse.
	src := `{"normalizer":{"type":"Replace","pattern":{"Regex":"[0-9]+"},"content":"#"},"pre_tokenizer":null,
		"decoder":{"type":"Sequence","decoders":[{"type":"Strip","content":"x","start":1,"stop":2},{"type":"Fuse"}]},
		"post_processor":null,"model":{"type":"BPE","vocab":{"#":0,"a":1,"x":2,"xax":3,"xxaxx":4},"merges":[]}}`
	tk4, err := ParseJSON([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := tk4.Encode("a123a", false); !slices.Equal(got, []int{1, 0, 1}) {
		t.Errorf("regex Replace: %v", got)
	}
	if got := tk4.Decode([]int{3, 4, 1}); got != "axaa" {
		t.Errorf("Strip before Fuse: %q", got)
	}
	checkStream(t, tk4, []int{3, 4, 1, 2, 2})
}

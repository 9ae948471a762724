package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The expected values in this file are worked out by hand from the
// algorithms' definitions (llama.cpp's SPM, Hugging Face's BPE, the GPT-2
// and Llama-3 regexes); the pre-tokenizer tables were also confirmed with
// Hugging Face tokenizers 0.23.2.

func TestSplitters(t *testing.T) {
	cases := []struct {
		in           string
		gpt2, llama3 []string
	}{
		{"Hello world", []string{"Hello", " world"}, []string{"Hello", " world"}},
		{"  hi", []string{" ", " hi"}, []string{" ", " hi"}},
		{"a  \n\nb", []string{"a", "  \n", "\n", "b"}, []string{"a", "  \n\n", "b"}},
		{"it's", []string{"it", "'s"}, []string{"it", "'s"}},
		{"IT'S", []string{"IT", "'", "S"}, []string{"IT", "'S"}},
		{"x=1;y=22", []string{"x", "=", "1", ";", "y", "=", "22"}, []string{"x", "=", "1", ";y", "=", "22"}},
		{"1234567", []string{"1234567"}, []string{"123", "456", "7"}},
		{"Hello  world", []string{"Hello", " ", " world"}, []string{"Hello", " ", " world"}},
		{"\n\nhello\n\n", []string{"\n", "\n", "hello", "\n\n"}, []string{"\n\n", "hello", "\n\n"}},
		{"a\r\n b", []string{"a", "\r\n", " b"}, []string{"a", "\r\n", " b"}},
		{"foo!!!\n\nbar", []string{"foo", "!!!", "\n", "\n", "bar"}, []string{"foo", "!!!\n\n", "bar"}},
		{"?!  \tx", []string{"?!", "  ", "\t", "x"}, []string{"?!", "  ", "\tx"}},
		{"it'ſ", []string{"it", "'", "ſ"}, []string{"it", "'ſ"}},
		{"\u00a0\u00a0x", []string{"\u00a0", "\u00a0", "x"}, []string{"\u00a0", "\u00a0x"}},
		{"a \u3000b", []string{"a", " ", "\u3000", "b"}, []string{"a", " ", "\u3000b"}},
		{"", nil, nil},
	}
	for _, c := range cases {
		if got := splitGPT2(c.in); !slices.Equal(got, c.gpt2) {
			t.Errorf("gpt2 %q: %q, want %q", c.in, got, c.gpt2)
		}
		if got := splitLlama3(c.in); !slices.Equal(got, c.llama3) {
			t.Errorf("llama3 %q: %q, want %q", c.in, got, c.llama3)
		}
	}
	if got := splitQwen2("ab1234'S"); !slices.Equal(got, []string{"ab", "1", "2", "3", "4", "'S"}) {
		t.Errorf("qwen2: %q", got)
	}
	if got := splitDigits(true)("ab12 3"); !slices.Equal(got, []string{"ab", "1", "2", " ", "3"}) {
		t.Errorf("digits individual: %q", got)
	}
	if got := splitDigits(false)("ab12 3"); !slices.Equal(got, []string{"ab", "12", " ", "3"}) {
		t.Errorf("digits: %q", got)
	}
}

// spmVocab is a small SentencePiece vocabulary in GGUF form: <unk> <s>
// </s>, 256 byte tokens (ids 3..258), then pieces with scores.
func spmVocab(pieces map[string]float32, withBytes bool) (MapMetadata, map[string]int) {
	toks := []string{"<unk>", "<s>", "</s>"}
	types := []int32{int32(TypeUnknown), int32(TypeControl), int32(TypeControl)}
	scores := []float32{0, 0, 0}
	if withBytes {
		for b := 0; b < 256; b++ {
			toks = append(toks, fmt.Sprintf("<0x%02X>", b))
			types = append(types, int32(TypeByte))
			scores = append(scores, 0)
		}
	}
	names := make([]string, 0, len(pieces))
	for p := range pieces {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		toks = append(toks, p)
		types = append(types, int32(TypeNormal))
		scores = append(scores, pieces[p])
	}
	ids := map[string]int{}
	for i, s := range toks {
		ids[s] = i
	}
	return MapMetadata{KeyModel: "llama", KeyTokens: toks, KeyScores: scores, KeyTokenType: types}, ids
}

func mustGGUF(t *testing.T, md MapMetadata) *Tokenizer {
	t.Helper()
	tk, err := NewFromGGUF(md)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func pieces(ids map[string]int, names ...string) []int {
	out := make([]int, len(names))
	for i, n := range names {
		id, ok := ids[n]
		if !ok {
			panic("test vocabulary lacks " + n)
		}
		out[i] = id
	}
	return out
}

func TestSentencePieceByHand(t *testing.T) {
	base := map[string]float32{"▁": -5, "a": -5, "b": -5, "c": -5, "▁a": -1, "ab": -2, "bc": -0.5, "abc": -3, "▁ab": -4, "x": -5, "é": -6}
	md, ids := spmVocab(base, true)
	tk := mustGGUF(t, md)
	if tk.Kind() != SentencePiece || tk.BOS() != 1 || tk.EOS() != 2 || tk.UNK() != 0 || !tk.AddsBOS() {
		t.Fatalf("kind %v bos %d eos %d unk %d", tk.Kind(), tk.BOS(), tk.EOS(), tk.UNK())
	}
	check := func(tk *Tokenizer, ids map[string]int, text string, bos bool, want ...string) {
		t.Helper()
		w := pieces(ids, want...)
		if got := tk.Encode(text, bos); !slices.Equal(got, w) {
			t.Errorf("Encode(%q): %v, want %v %q", text, got, w, want)
		}
	}
	// "▁abc": bc (-0.5) first, then ▁a (-1); "abc" = a+bc is stale once ▁a
	// forms, and "▁abc" is no token.
	check(tk, ids, "abc", false, "▁a", "bc")
	check(tk, ids, "abc", true, "<s>", "▁a", "bc")
	// Whitespace: every space is "▁", one "▁" is prepended.
	check(tk, ids, " abc", false, "▁", "▁a", "bc")
	check(tk, ids, "a  b", false, "▁a", "▁", "▁", "b")
	// Byte fallback: "ü" (C3 BC) is no token; "é" is.
	check(tk, ids, "aüé", false, "▁a", "<0xC3>", "<0xBC>", "é")
	check(tk, ids, "😀", false, "▁", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>")
	// Special tokens split the text; each piece after one gets its "▁".
	check(tk, ids, "x<s>ab</s>c", false, "▁", "x", "<s>", "▁ab", "</s>", "▁", "c")
	check(tk, ids, "<unk>", false, "<unk>")
	check(tk, ids, "", true, "<s>")
	check(tk, ids, "", false)

	// Scores, not ranks, decide: make ab the best pair.
	alt := map[string]float32{}
	for k, v := range base {
		alt[k] = v
	}
	alt["ab"] = -0.1
	md2, ids2 := spmVocab(alt, true)
	check(mustGGUF(t, md2), ids2, "abc", false, "▁", "abc")
	// Ties go to the leftmost pair: "aaaa" with only "aa".
	md3, ids3 := spmVocab(map[string]float32{"▁": -5, "a": -5, "aa": -1}, true)
	check(mustGGUF(t, md3), ids3, "aaa", false, "▁", "aa", "a")

	// Without byte tokens an unknown character is <unk>.
	md4, ids4 := spmVocab(map[string]float32{"▁": -1, "a": -1}, false)
	check(mustGGUF(t, md4), ids4, "aüa", false, "▁", "a", "<unk>", "a")

	// add_space_prefix false, add_bos false.
	md5, ids5 := spmVocab(base, true)
	md5[KeyAddSpacePrefix] = false
	md5[KeyAddBOS] = false
	tk5 := mustGGUF(t, md5)
	check(tk5, ids5, "abc", true, "abc")
	if tk5.AddsBOS() {
		t.Error("add_bos_token false ignored")
	}

	// Decoding: "▁" → " ", one leading space stripped, byte runs decoded
	// as UTF-8, special tokens as their text.
	dec := []struct {
		toks []string
		want string
	}{
		{[]string{"▁a", "bc"}, "abc"},
		{[]string{"<s>", "▁a", "bc"}, "<s> abc"},
		{[]string{"▁", "▁a"}, " a"},
		{[]string{"▁a", "<0xC3>", "<0xBC>", "é"}, "aüé"},
		{[]string{"<0xE2>", "<0x82>", "<0xAC>"}, "€"},
		{[]string{"▁a", "<0xE2>", "<0x82>", "x"}, "a\uFFFD\uFFFDx"},
		{[]string{"<0xC3>"}, "\uFFFD"},
		{[]string{"<0x20>", "a"}, "a"},
		{[]string{"</s>", "▁", "c"}, "</s> c"},
	}
	for _, d := range dec {
		if got := tk.Decode(pieces(ids, d.toks...)); got != d.want {
			t.Errorf("Decode(%q) = %q, want %q", d.toks, got, d.want)
		}
	}
	if got := tk5.Decode(pieces(ids5, "▁a", "bc")); got != " abc" {
		t.Errorf("without add_space_prefix: %q", got)
	}
	if got := tk.Decode([]int{-1, 1 << 30, ids["▁a"]}); got != "a" {
		t.Errorf("ids outside the vocabulary: %q", got)
	}
}

// byteVocab is a byte-level vocabulary in GGUF form: the 256 byte
// characters, then merge results, then special tokens.
func byteVocab(merges []string, special ...string) (MapMetadata, map[string]int) {
	var toks []string
	for b := 0; b < 256; b++ {
		toks = append(toks, string(byteToRune[b]))
	}
	for _, m := range merges {
		toks = append(toks, strings.Replace(m, " ", "", 1))
	}
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = int32(TypeNormal)
	}
	for _, s := range special {
		toks = append(toks, s)
		types = append(types, int32(TypeControl))
	}
	ids := map[string]int{}
	for i, s := range toks {
		ids[s] = i
	}
	return MapMetadata{KeyModel: "gpt2", KeyPre: "gpt-2", KeyTokens: toks, KeyMerges: merges, KeyTokenType: types}, ids
}

func TestByteLevelByHand(t *testing.T) {
	// Ranks: "h e" first, then "Ġ t", then "Ġt he"; "t h" is last.
	md, ids := byteVocab([]string{"h e", "Ġ t", "Ġt he", "t h", "th e"}, "<|endoftext|>")
	md[KeyEOS] = uint32(ids["<|endoftext|>"])
	tk := mustGGUF(t, md)
	if tk.Kind() != ByteLevel || tk.AddsBOS() || tk.EOS() != ids["<|endoftext|>"] {
		t.Fatalf("kind %v adds BOS %v eos %d", tk.Kind(), tk.AddsBOS(), tk.EOS())
	}
	check := func(text string, want ...string) {
		t.Helper()
		w := pieces(ids, want...)
		if got := tk.Encode(text, true); !slices.Equal(got, w) {
			t.Errorf("Encode(%q): %v, want %v %q", text, got, w, want)
		}
	}
	// " the": h+e (rank 0) before t+h (rank 3): Ġ t he → Ġt he → Ġthe.
	check(" the", "Ġthe")
	// "the": t+h is not reachable once h+e formed; no "t he" merge.
	check("the", "t", "he")
	check("the<|endoftext|>\n", "t", "he", "<|endoftext|>", "Ċ")
	check("é", "Ã", "©")
	// Lower rank wins whatever the order in the word: with "t h" ranked
	// before "h e", "the" becomes th+e.
	md2, ids2 := byteVocab([]string{"t h", "h e", "th e"})
	if got, want := mustGGUF(t, md2).Encode("the", false), pieces(ids2, "the"); !slices.Equal(got, want) {
		t.Errorf("th e: %v, want %v", got, want)
	}
	// Decoding maps characters back to bytes; invalid UTF-8 becomes one
	// U+FFFD per maximal invalid subsequence.
	dec := []struct {
		toks []string
		want string
	}{
		{[]string{"Ġthe", "Ċ"}, " the\n"},
		{[]string{"â", "Ĥ", "¬"}, "€"},       // E2 82 AC
		{[]string{"â", "Ĥ", "a"}, "\uFFFDa"}, // E2 82 then 'a': one subpart
		{[]string{"à", "Ĥ"}, "\uFFFD\uFFFD"}, // E0 82: 82 cannot follow E0
		{[]string{"<|endoftext|>", "Ġthe"}, "<|endoftext|> the"},
	}
	for _, d := range dec {
		if got := tk.Decode(pieces(ids, d.toks...)); got != d.want {
			t.Errorf("Decode(%q) = %q, want %q", d.toks, got, d.want)
		}
	}
}

func TestStreamHoldsIncompleteText(t *testing.T) {
	md, ids := byteVocab(nil)
	tk := mustGGUF(t, md)
	sd := tk.Stream()
	var got []string
	for _, s := range []string{"a", "â", "Ĥ", "¬", "b", "ð", "Ł"} {
		got = append(got, sd.Add(ids[s]))
	}
	got = append(got, sd.Flush())
	want := []string{"a", "", "", "€", "b", "", "", "\uFFFD"}
	if !slices.Equal(got, want) {
		t.Errorf("byte-level stream chunks %q, want %q", got, want)
	}

	smd, sids := spmVocab(map[string]float32{"▁": -1, "a": -1, "▁a": -0.5}, true)
	stk := mustGGUF(t, smd)
	sd = stk.Stream()
	got = nil
	for _, s := range []string{"<s>", "▁a", "<0xE2>", "<0x82>", "<0xAC>", "▁a", "<0xC3>"} {
		got = append(got, sd.Add(sids[s]))
	}
	got = append(got, sd.Flush())
	// A byte run waits for its end: it is decoded as a whole.
	want = []string{"<s>", " a", "", "", "", "€ a", "", "\uFFFD"}
	if !slices.Equal(got, want) {
		t.Errorf("sentencepiece stream chunks %q, want %q", got, want)
	}
	// The leading space of the first token is stripped even after a Flush.
	got = []string{sd.Add(sids["▁a"]), sd.Add(sids["▁a"]), sd.Flush()}
	if !slices.Equal(got, []string{"a", " a", ""}) {
		t.Errorf("after Flush: %q", got)
	}
}

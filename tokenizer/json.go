package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// LoadJSON reads a Hugging Face tokenizer.json. When tokenizer_config.json
// sits beside it, its bos_token and eos_token name BOS and EOS.
func LoadJSON(path string) (*Tokenizer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parseJSON(b)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: LoadJSON %s: %w", path, err)
	}
	cfgPath := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	cb, err := os.ReadFile(cfgPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("tokenizer: %w", err)
	default:
		if err := t.applyConfig(cb); err != nil {
			return nil, fmt.Errorf("tokenizer: LoadJSON %s: %w", cfgPath, err)
		}
	}
	return t, nil
}

// ParseJSON builds a tokenizer from the contents of a tokenizer.json.
func ParseJSON(data []byte) (*Tokenizer, error) {
	t, err := parseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: ParseJSON: %w", err)
	}
	return t, nil
}

// jsonFile is the part of tokenizer.json Loom reads.
type jsonFile struct {
	AddedTokens   []jsonAdded     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

type jsonAdded struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type jsonBPE struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   map[string]int  `json:"vocab"`
	Merges                  json.RawMessage `json:"merges"`
}

// jsonComponent is any normalizer, pre-tokenizer, post-processor or
// decoder: a "type" and the fields of each type.
type jsonComponent struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Processors     []json.RawMessage `json:"processors"`
	Decoders       []json.RawMessage `json:"decoders"`
	Prepend        string            `json:"prepend"`
	Pattern        *jsonPattern      `json:"pattern"`
	Content        json.RawMessage   `json:"content"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace *bool             `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Replacement    string            `json:"replacement"`
	PrependScheme  string            `json:"prepend_scheme"`
	Split          *bool             `json:"split"`
	Individual     bool              `json:"individual_digits"`
	Start          int               `json:"start"`
	Stop           int               `json:"stop"`
	Single         []json.RawMessage `json:"single"`
	SpecialTokens  map[string]struct {
		IDs []int `json:"ids"`
	} `json:"special_tokens"`
}

type jsonPattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

func isNull(r json.RawMessage) bool {
	return len(r) == 0 || string(r) == "null"
}

func parseJSON(data []byte) (*Tokenizer, error) {
	var f jsonFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("invalid tokenizer.json: %v", err)
	}
	if isNull(f.Model) {
		return nil, errors.New("tokenizer.json has no model")
	}
	var m jsonBPE
	var kind struct{ Type string }
	if err := json.Unmarshal(f.Model, &kind); err != nil {
		return nil, fmt.Errorf("model: %v", err)
	}
	if kind.Type != "BPE" && kind.Type != "" {
		return nil, fmt.Errorf("model type %q is not supported (only BPE)", kind.Type)
	}
	if err := json.Unmarshal(f.Model, &m); err != nil {
		return nil, fmt.Errorf("model: %v", err)
	}
	if m.Type == "" && (m.Vocab == nil || m.Merges == nil) {
		return nil, errors.New("model has no type and is not a BPE model (vocab and merges)")
	}
	switch {
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("model: BPE dropout %g is not supported (encoding would be random)", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("model: continuing_subword_prefix is not supported")
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("model: end_of_word_suffix is not supported")
	}

	// The vocabulary: model tokens, then added tokens (which win for
	// decoding, as the reference looks them up first).
	size := 0
	for tok, id := range m.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("model vocab: token %q has negative id %d", tok, id)
		}
		size = max(size, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("added token %q has negative id %d", a.Content, a.ID)
		}
		size = max(size, a.ID+1)
	}
	if size > 1<<24 {
		return nil, fmt.Errorf("vocabulary of %d ids is implausibly large", size)
	}
	t := &Tokenizer{vocab: make([]string, size), has: make([]bool, size), types: make([]TokenType, size), special: make([]bool, size), bos: -1, eos: -1, unk: -1}
	for tok, id := range m.Vocab {
		if t.has[id] {
			return nil, fmt.Errorf("model vocab: tokens %q and %q share id %d", t.vocab[id], tok, id)
		}
		t.vocab[id], t.has[id], t.types[id] = tok, true, TypeNormal
	}
	var raw, norm []addedToken
	for _, a := range f.AddedTokens {
		t.vocab[a.ID], t.has[a.ID] = a.Content, true
		t.types[a.ID] = TypeUserDefined
		if a.Special {
			t.types[a.ID] = TypeControl
			t.special[a.ID] = true
		}
		at := addedToken{content: a.Content, id: a.ID, singleWord: a.SingleWord, lstrip: a.LStrip, rstrip: a.RStrip}
		if a.Normalized {
			norm = append(norm, at)
		} else {
			raw = append(raw, at)
		}
	}

	bpe := &bpeModel{ids: m.Vocab, unk: -1, fuseUnk: m.FuseUnk, byteFallback: m.ByteFallback, ignoreMerges: m.IgnoreMerges}
	if bpe.ids == nil {
		bpe.ids = map[string]int{}
	}
	bpe.bytes = byteTokens(bpe.ids)
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model: unk_token %q is not in the vocabulary", *m.UnkToken)
		}
		bpe.unk, t.unk = id, id
		t.types[id] = TypeUnknown
	}
	for i := range t.types {
		if _, ok := byteToken(t.vocab[i]); ok && t.has[i] && t.types[i] == TypeNormal {
			t.types[i] = TypeByte
		}
	}
	var err error
	if bpe.merges, err = jsonMerges(m.Merges, bpe.ids); err != nil {
		return nil, err
	}
	t.model = bpe

	if !isNull(f.Normalizer) {
		if t.normalizer, err = parseNormalizer(f.Normalizer); err != nil {
			return nil, fmt.Errorf("normalizer: %w", err)
		}
	}
	t.kind = SentencePiece
	if !isNull(f.PreTokenizer) {
		if t.pretok, err = parsePreTokenizer(f.PreTokenizer); err != nil {
			return nil, fmt.Errorf("pre_tokenizer: %w", err)
		}
		for _, p := range t.pretok {
			if p.kind == preByteLevel {
				t.kind = ByteLevel
			}
		}
	}
	if isNull(f.Decoder) {
		t.decoder = []decStep{{kind: decJoinSpace}}
	} else if t.decoder, err = parseDecoder(f.Decoder); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	if err := checkStreamable(t.decoder); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	if !isNull(f.PostProcessor) {
		if t.bosPrefix, err = parsePostProcessor(f.PostProcessor); err != nil {
			return nil, fmt.Errorf("post_processor: %w", err)
		}
		for _, id := range t.bosPrefix {
			if id < 0 || id >= size || !t.has[id] {
				return nil, fmt.Errorf("post_processor: special token id %d is not in the vocabulary", id)
			}
		}
		if len(t.bosPrefix) > 0 {
			t.bos = t.bosPrefix[0]
		}
	}
	// EOS by the names the common families give it, until a
	// tokenizer_config.json says otherwise.
	for _, s := range []string{"</s>", "<|end_of_text|>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>"} {
		if id := t.addedID(f.AddedTokens, s); id >= 0 {
			t.eos = id
			break
		}
	}
	if t.eos >= 0 {
		t.stop = []int{t.eos}
	}
	// A normalized added token is looked for in normalized text in its
	// normalized form (with a Prepend("▁") normalizer, "</s>" is matched
	// as "▁</s>"), as the reference does.
	// Decoding uses that form too (the reference's simple_id_to_token).
	for i := range norm {
		if c := normalize(t.normalizer, norm[i].content); c != norm[i].content {
			norm[i].content = c
			if t.decodeAs == nil {
				t.decodeAs = map[int]string{}
			}
			t.decodeAs[norm[i].id] = c
		}
	}
	t.raw, t.norm = newAddedMatcher(raw), newAddedMatcher(norm)
	return t, nil
}

func (t *Tokenizer) addedID(added []jsonAdded, content string) int {
	for _, a := range added {
		if a.Content == content && a.Special {
			return a.ID
		}
	}
	return -1
}

// applyConfig reads bos_token and eos_token from tokenizer_config.json;
// each is a string or an object with "content".
func (t *Tokenizer) applyConfig(b []byte) error {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	for _, k := range []struct {
		key string
		id  *int
	}{{"bos_token", &t.bos}, {"eos_token", &t.eos}} {
		r, ok := cfg[k.key]
		if !ok || isNull(r) {
			continue
		}
		var name string
		if err := json.Unmarshal(r, &name); err != nil {
			var obj struct {
				Content string `json:"content"`
			}
			if err := json.Unmarshal(r, &obj); err != nil {
				return fmt.Errorf("%s is neither a string nor an object with content", k.key)
			}
			name = obj.Content
		}
		id := slices.Index(t.vocab, name)
		if id < 0 || !t.has[id] {
			return fmt.Errorf("%s %q is not a token", k.key, name)
		}
		*k.id = id
	}
	if t.eos >= 0 {
		t.stop = []int{t.eos}
	}
	return nil
}

// jsonMerges reads merges as ["a b", ...] (split on the single space) or
// [["a", "b"], ...]; rank = position. As in the reference, a later copy of
// a merge overrides an earlier one, and every merge's tokens and their
// concatenation must be in the vocabulary.
func jsonMerges(r json.RawMessage, ids map[string]int) (map[[2]int]merge, error) {
	var pairs [][2]string
	if !isNull(r) {
		var legacy []string
		if err := json.Unmarshal(r, &legacy); err == nil {
			for i, l := range legacy {
				p := strings.Split(l, " ")
				if len(p) != 2 {
					return nil, fmt.Errorf("model: merges[%d] = %q is not two tokens separated by one space", i, l)
				}
				pairs = append(pairs, [2]string{p[0], p[1]})
			}
		} else if err := json.Unmarshal(r, &pairs); err != nil {
			return nil, fmt.Errorf("model: merges are neither strings nor pairs: %v", err)
		}
	}
	merges := make(map[[2]int]merge, len(pairs))
	for rank, p := range pairs {
		a, oka := ids[p[0]]
		b, okb := ids[p[1]]
		c, okc := ids[p[0]+p[1]]
		if !oka || !okb || !okc {
			return nil, fmt.Errorf("model: merges[%d] (%q, %q): a token or their concatenation is not in the vocabulary", rank, p[0], p[1])
		}
		merges[[2]int{a, b}] = merge{rank: rank, id: c}
	}
	return merges, nil
}

func parseComponent(r json.RawMessage) (jsonComponent, error) {
	var c jsonComponent
	if err := json.Unmarshal(r, &c); err != nil {
		return c, fmt.Errorf("invalid JSON: %v", err)
	}
	return c, nil
}

func parseNormalizer(r json.RawMessage) ([]normStep, error) {
	c, err := parseComponent(r)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var out []normStep
		for _, sub := range c.Normalizers {
			s, err := parseNormalizer(sub)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	case "Prepend":
		return []normStep{{prepend: c.Prepend}}, nil
	case "Replace":
		content, err := stringField(c.Content, "content")
		if err != nil {
			return nil, err
		}
		if c.Pattern == nil {
			return nil, errors.New("Replace has no pattern")
		}
		if c.Pattern.String != nil {
			if *c.Pattern.String == "" {
				return nil, errors.New("Replace with an empty pattern")
			}
			return []normStep{{from: *c.Pattern.String, to: content}}, nil
		}
		if c.Pattern.Regex != nil {
			re, err := goRegexp(*c.Pattern.Regex)
			if err != nil {
				return nil, err
			}
			return []normStep{{re: re, to: content}}, nil
		}
		return nil, errors.New("Replace pattern is neither String nor Regex")
	}
	return nil, fmt.Errorf("normalizer %q is not supported (supported: Sequence, Prepend, Replace)", c.Type)
}

func stringField(r json.RawMessage, name string) (string, error) {
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		return "", fmt.Errorf("%s is not a string", name)
	}
	return s, nil
}

// The split regexes of GPT-2, Llama 3 and Qwen2 as tokenizer.json writes
// them; they need lookahead, so they run as the hand-written matchers.
const (
	regexGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	regexLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// goRegexp compiles a pattern Go's regexp runs as Oniguruma would: no
// lookaround and none of the shorthand classes whose meaning differs
// (Go's \s, \d, \w and \b are ASCII-only).
func goRegexp(p string) (*regexp.Regexp, error) {
	for _, bad := range []string{`(?=`, `(?!`, `(?<=`, `(?<!`, `\s`, `\S`, `\d`, `\D`, `\w`, `\W`, `\b`, `\B`} {
		if strings.Contains(p, bad) {
			return nil, fmt.Errorf("regex %q is not supported (it uses %s, which Go's regexp lacks or reads differently)", p, bad)
		}
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, fmt.Errorf("regex %q is not supported: %v", p, err)
	}
	return re, nil
}

func parsePreTokenizer(r json.RawMessage) ([]preStep, error) {
	c, err := parseComponent(r)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var out []preStep
		for _, sub := range c.Pretokenizers {
			s, err := parsePreTokenizer(sub)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	case "ByteLevel":
		p := preStep{kind: preByteLevel, prefixSpace: c.AddPrefixSpace == nil || *c.AddPrefixSpace}
		if c.UseRegex == nil || *c.UseRegex {
			p.split = splitGPT2
		}
		return []preStep{p}, nil
	case "Split":
		if c.Invert {
			return nil, errors.New("Split with invert is not supported")
		}
		if c.Behavior != "Isolated" && c.Behavior != "Removed" {
			return nil, fmt.Errorf("Split behavior %q is not supported (supported: Isolated, Removed)", c.Behavior)
		}
		if c.Pattern == nil {
			return nil, errors.New("Split has no pattern")
		}
		remove := c.Behavior == "Removed"
		switch {
		case c.Pattern.String != nil:
			if *c.Pattern.String == "" {
				return nil, errors.New("Split with an empty pattern")
			}
			return []preStep{{kind: preSplit, split: regexSplitter(regexp.MustCompile(regexp.QuoteMeta(*c.Pattern.String)), remove)}}, nil
		case c.Pattern.Regex != nil:
			known := map[string]splitter{regexGPT2: splitGPT2, regexLlama3: splitLlama3, regexQwen2: splitQwen2}
			if s, ok := known[*c.Pattern.Regex]; ok && !remove {
				return []preStep{{kind: preSplit, split: s}}, nil
			}
			re, err := goRegexp(*c.Pattern.Regex)
			if err != nil {
				return nil, err
			}
			return []preStep{{kind: preSplit, split: regexSplitter(re, remove)}}, nil
		}
		return nil, errors.New("Split pattern is neither String nor Regex")
	case "Metaspace":
		p, err := metaspaceStep(c)
		if err != nil {
			return nil, err
		}
		return []preStep{p}, nil
	case "Digits":
		return []preStep{{kind: preSplit, split: splitDigits(c.Individual)}}, nil
	}
	return nil, fmt.Errorf("pre-tokenizer %q is not supported (supported: Sequence, ByteLevel, Split, Metaspace, Digits)", c.Type)
}

func metaspaceStep(c jsonComponent) (preStep, error) {
	if utf8.RuneCountInString(c.Replacement) != 1 {
		return preStep{}, fmt.Errorf("Metaspace replacement %q is not one character", c.Replacement)
	}
	p := preStep{kind: preMetaspace, replacement: c.Replacement, metaSplit: c.Split == nil || *c.Split}
	switch c.PrependScheme {
	case "always":
		p.scheme = prependAlways
	case "first":
		p.scheme = prependFirst
	case "never":
		p.scheme = prependNever
	case "":
		// Files older than prepend_scheme say add_prefix_space.
		p.scheme = prependNever
		if c.AddPrefixSpace == nil || *c.AddPrefixSpace {
			p.scheme = prependAlways
		}
	default:
		return p, fmt.Errorf("Metaspace prepend_scheme %q is not one of always, first, never", c.PrependScheme)
	}
	return p, nil
}

func parseDecoder(r json.RawMessage) ([]decStep, error) {
	c, err := parseComponent(r)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var out []decStep
		for _, sub := range c.Decoders {
			s, err := parseDecoder(sub)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	case "ByteLevel":
		return []decStep{{kind: decByteLevel}}, nil
	case "ByteFallback":
		return []decStep{{kind: decByteFallback}}, nil
	case "Fuse":
		return []decStep{{kind: decFuse}}, nil
	case "Replace":
		content, err := stringField(c.Content, "content")
		if err != nil {
			return nil, err
		}
		if c.Pattern == nil || c.Pattern.String == nil || *c.Pattern.String == "" {
			return nil, errors.New("Replace decoder: only a non-empty String pattern is supported")
		}
		return []decStep{{kind: decReplace, from: *c.Pattern.String, to: content}}, nil
	case "Strip":
		content, err := stringField(c.Content, "content")
		if err != nil {
			return nil, err
		}
		r, n := utf8.DecodeRuneInString(content)
		if n == 0 || n != len(content) || c.Start < 0 || c.Stop < 0 {
			return nil, fmt.Errorf("Strip content %q, start %d, stop %d: need one character and counts ≥ 0", content, c.Start, c.Stop)
		}
		return []decStep{{kind: decStrip, content: r, start: c.Start, stop: c.Stop}}, nil
	case "Metaspace":
		p, err := metaspaceStep(c)
		if err != nil {
			return nil, err
		}
		return []decStep{{kind: decMetaspace, rep: p.replacement, dropFirst: p.scheme != prependNever}}, nil
	}
	return nil, fmt.Errorf("decoder %q is not supported (supported: Sequence, ByteLevel, ByteFallback, Fuse, Replace, Strip, Metaspace)", c.Type)
}

// checkStreamable refuses decoder chains the stream decoder could not
// follow exactly: after a step that joins tokens (Fuse, ByteLevel), token
// boundaries are gone, so byte fallback, a second byte-level step, a
// multi-character Replace or a trailing Strip there would need the whole
// text.
func checkStreamable(steps []decStep) error {
	joined := false
	for _, s := range steps {
		if joined {
			switch {
			case s.kind == decByteFallback || s.kind == decByteLevel:
				return errors.New("ByteFallback or ByteLevel after Fuse or ByteLevel is not supported")
			case s.kind == decReplace && utf8.RuneCountInString(s.from) > 1:
				return fmt.Errorf("Replace of %q after Fuse or ByteLevel is not supported", s.from)
			case s.kind == decStrip && s.stop > 0:
				return errors.New("Strip with stop > 0 after Fuse or ByteLevel is not supported")
			}
		}
		if s.kind == decFuse || s.kind == decByteLevel || s.kind == decJoinSpace {
			joined = true
		}
	}
	return nil
}

// parsePostProcessor returns the ids a template puts before the sequence
// ($A); ByteLevel processors add none.
func parsePostProcessor(r json.RawMessage) ([]int, error) {
	c, err := parseComponent(r)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var out []int
		for _, sub := range c.Processors {
			ids, err := parsePostProcessor(sub)
			if err != nil {
				return nil, err
			}
			out = append(out, ids...)
		}
		return out, nil
	case "ByteLevel":
		return nil, nil
	case "TemplateProcessing":
		var out []int
		for _, item := range c.Single {
			var it struct {
				SpecialToken *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
				Sequence *struct {
					ID string `json:"id"`
				} `json:"Sequence"`
			}
			if err := json.Unmarshal(item, &it); err != nil {
				return nil, fmt.Errorf("template item: %v", err)
			}
			if it.Sequence != nil {
				return out, nil // what follows $A is not added (see Encode)
			}
			if it.SpecialToken == nil {
				return nil, fmt.Errorf("template item %s is neither SpecialToken nor Sequence", item)
			}
			st, ok := c.SpecialTokens[it.SpecialToken.ID]
			if !ok {
				return nil, fmt.Errorf("template names special token %q that special_tokens does not define", it.SpecialToken.ID)
			}
			out = append(out, st.IDs...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("post-processor %q is not supported (supported: TemplateProcessing, ByteLevel, Sequence)", c.Type)
}

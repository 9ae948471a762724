package tokenizer

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Metadata is read access to a GGUF file's key-value metadata, the part of
// it a tokenizer needs. Package gguf implements it; MapMetadata implements
// it over plain Go values. Each getter fails when the key is absent or its
// value has another type.
type Metadata interface {
	Has(key string) bool
	String(key string) (string, error)
	Strings(key string) ([]string, error)
	Float32s(key string) ([]float32, error)
	Int32s(key string) ([]int32, error)
	Uint32(key string) (uint32, error)
	Bool(key string) (bool, error)
}

// The GGUF keys NewFromGGUF reads (llama.cpp's names).
const (
	KeyModel          = "tokenizer.ggml.model"
	KeyPre            = "tokenizer.ggml.pre"
	KeyTokens         = "tokenizer.ggml.tokens"
	KeyScores         = "tokenizer.ggml.scores"
	KeyTokenType      = "tokenizer.ggml.token_type"
	KeyMerges         = "tokenizer.ggml.merges"
	KeyBOS            = "tokenizer.ggml.bos_token_id"
	KeyEOS            = "tokenizer.ggml.eos_token_id"
	KeyUNK            = "tokenizer.ggml.unknown_token_id"
	KeyEOT            = "tokenizer.ggml.eot_token_id"
	KeyEOM            = "tokenizer.ggml.eom_token_id"
	KeyAddBOS         = "tokenizer.ggml.add_bos_token"
	KeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
)

// MapMetadata is Metadata over plain Go values: string, []string,
// []float32, []int32 (or []int), uint32 (or any integer type in range), and
// bool.
type MapMetadata map[string]any

func (m MapMetadata) Has(key string) bool { _, ok := m[key]; return ok }

func mdGet[T any](m MapMetadata, key string) (T, error) {
	var zero T
	v, ok := m[key]
	if !ok {
		return zero, fmt.Errorf("metadata has no key %s", key)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("metadata key %s holds %T, not %T", key, v, zero)
	}
	return t, nil
}

func (m MapMetadata) String(key string) (string, error)      { return mdGet[string](m, key) }
func (m MapMetadata) Strings(key string) ([]string, error)   { return mdGet[[]string](m, key) }
func (m MapMetadata) Float32s(key string) ([]float32, error) { return mdGet[[]float32](m, key) }
func (m MapMetadata) Bool(key string) (bool, error)          { return mdGet[bool](m, key) }

func (m MapMetadata) Int32s(key string) ([]int32, error) {
	if v, ok := m[key].([]int); ok {
		out := make([]int32, len(v))
		for i, x := range v {
			if int(int32(x)) != x {
				return nil, fmt.Errorf("metadata key %s: element %d (%d) does not fit in int32", key, i, x)
			}
			out[i] = int32(x)
		}
		return out, nil
	}
	return mdGet[[]int32](m, key)
}

func (m MapMetadata) Uint32(key string) (uint32, error) {
	v, ok := m[key]
	if !ok {
		return 0, fmt.Errorf("metadata has no key %s", key)
	}
	var n int64
	switch x := v.(type) {
	case uint32:
		return x, nil
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > 1<<32-1 {
			return 0, fmt.Errorf("metadata key %s: %d does not fit in uint32", key, x)
		}
		return uint32(x), nil
	default:
		return 0, fmt.Errorf("metadata key %s holds %T, not an integer", key, v)
	}
	if n < 0 || n > 1<<32-1 {
		return 0, fmt.Errorf("metadata key %s: %d does not fit in uint32", key, n)
	}
	return uint32(n), nil
}

// NewFromGGUF builds the tokenizer a GGUF file describes, as llama.cpp
// reads it (llama_vocab::impl::load): tokenizer.ggml.model "llama"
// (SentencePiece BPE: tokens, scores, token types) or "gpt2" (byte-level
// BPE: tokens, merges, the pre-tokenizer tokenizer.ggml.pre), special token
// ids with llama.cpp's defaults where the file names none.
func NewFromGGUF(md Metadata) (*Tokenizer, error) {
	t, err := newFromGGUF(md)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: NewFromGGUF: %w", err)
	}
	return t, nil
}

func newFromGGUF(md Metadata) (*Tokenizer, error) {
	modelName, err := md.String(KeyModel)
	if err != nil {
		return nil, err
	}
	tokens, err := md.Strings(KeyTokens)
	if err != nil {
		return nil, err
	}
	n := len(tokens)
	if n == 0 {
		return nil, fmt.Errorf("%s is empty", KeyTokens)
	}
	var scores []float32
	if md.Has(KeyScores) {
		if scores, err = md.Float32s(KeyScores); err != nil {
			return nil, err
		}
		if len(scores) < n {
			return nil, fmt.Errorf("%s has %d entries for %d tokens", KeyScores, len(scores), n)
		}
	}
	types := make([]TokenType, n)
	for i := range types {
		types[i] = TypeNormal
	}
	if md.Has(KeyTokenType) {
		tt, err := md.Int32s(KeyTokenType)
		if err != nil {
			return nil, err
		}
		if len(tt) < n {
			return nil, fmt.Errorf("%s has %d entries for %d tokens", KeyTokenType, len(tt), n)
		}
		for i := range types {
			types[i] = TokenType(tt[i])
			if types[i] < TypeUndefined || types[i] > TypeByte {
				types[i] = TypeUndefined // llama.cpp's reading of unknown types
			}
		}
	}
	vocab := slices.Clone(tokens)
	ids := make(map[string]int, n)
	for i, s := range vocab {
		if s == "" {
			s = "[EMPTY_" + strconv.Itoa(i) + "]" // llama.cpp's name for empty tokens
			vocab[i] = s
		}
		if j, dup := ids[s]; dup {
			return nil, fmt.Errorf("duplicate token %q at ids %d and %d", s, j, i)
		}
		ids[s] = i
	}

	t := &Tokenizer{vocab: vocab, has: make([]bool, n), types: types, special: make([]bool, n), bos: -1, eos: -1, unk: -1}
	for i := range t.has {
		t.has[i] = true
	}
	var addBOS bool
	switch modelName {
	case "llama":
		t.kind = SentencePiece
		t.bos, t.eos, t.unk = 1, 2, 0
		addBOS = true
		addSpacePrefix := true
		if md.Has(KeyAddSpacePrefix) {
			if addSpacePrefix, err = md.Bool(KeyAddSpacePrefix); err != nil {
				return nil, err
			}
		}
		if scores == nil {
			scores = make([]float32, n)
		}
		sp := &spmModel{ids: ids, scores: scores[:n], bytes: byteTokens(ids), unk: -1}
		for b := range sp.raw {
			sp.raw[b] = -1
			if id, ok := ids[string([]byte{byte(b)})]; ok {
				sp.raw[b] = id
			}
		}
		t.model = sp
		t.normalizer = []normStep{{from: " ", to: "▁"}}
		t.decoder = []decStep{{kind: decReplace, from: "▁", to: " "}, {kind: decByteFallback}, {kind: decFuse}}
		if addSpacePrefix {
			t.normalizer = append(t.normalizer, normStep{prepend: "▁"})
			t.decoder = append(t.decoder, decStep{kind: decStrip, content: ' ', start: 1})
		}
	case "gpt2":
		t.kind = ByteLevel
		t.bos, t.eos = 11, 11 // llama.cpp's defaults for "gpt2"
		pre := ""
		if md.Has(KeyPre) {
			if pre, err = md.String(KeyPre); err != nil {
				return nil, err
			}
		}
		steps, ignoreMerges, preAddsBOS, err := ggufPre(pre)
		if err != nil {
			return nil, err
		}
		addBOS = preAddsBOS
		mergeList, err := md.Strings(KeyMerges)
		if err != nil {
			return nil, err
		}
		merges, err := ggufMerges(mergeList, ids)
		if err != nil {
			return nil, err
		}
		t.pretok = steps
		t.model = &bpeModel{ids: ids, merges: merges, unk: -1, ignoreMerges: ignoreMerges}
		t.decoder = []decStep{{kind: decByteLevel}}
	default:
		return nil, fmt.Errorf("%s %q is not supported (supported: \"llama\", \"gpt2\")", KeyModel, modelName)
	}
	for _, p := range []struct {
		key string
		id  *int
	}{{KeyBOS, &t.bos}, {KeyEOS, &t.eos}, {KeyUNK, &t.unk}} {
		if *p.id >= n {
			*p.id = -1 // a default outside the vocabulary: none (as llama.cpp)
		}
		if !md.Has(p.key) {
			continue
		}
		v, err := md.Uint32(p.key)
		if err != nil {
			return nil, err
		}
		if int64(v) >= int64(n) {
			return nil, fmt.Errorf("%s = %d is outside the vocabulary of %d tokens", p.key, v, n)
		}
		*p.id = int(v)
	}
	if md.Has(KeyAddBOS) {
		if addBOS, err = md.Bool(KeyAddBOS); err != nil {
			return nil, err
		}
	}
	if addBOS {
		if t.bos < 0 {
			return nil, fmt.Errorf("%s is true but there is no BOS token (%s)", KeyAddBOS, KeyBOS)
		}
		t.bosPrefix = []int{t.bos}
	}
	if sp, ok := t.model.(*spmModel); ok {
		sp.unk = t.unk
	}

	// Control, user-defined and unknown tokens are matched in the text
	// before the model (llama.cpp's special-token partition with
	// parse_special).
	var added []addedToken
	for i, ty := range types {
		switch ty {
		case TypeControl, TypeUnknown:
			t.special[i] = true
			added = append(added, addedToken{content: vocab[i], id: i})
		case TypeUserDefined:
			added = append(added, addedToken{content: vocab[i], id: i})
		}
	}
	t.raw = newAddedMatcher(added)

	// Stop tokens: EOS, eot, eom, and tokens llama.cpp recognizes by their
	// text as ending generation.
	addStop := func(id int) {
		if id >= 0 && !slices.Contains(t.stop, id) {
			t.stop = append(t.stop, id)
		}
	}
	addStop(t.eos)
	for _, key := range []string{KeyEOT, KeyEOM} {
		if md.Has(key) {
			v, err := md.Uint32(key)
			if err != nil {
				return nil, err
			}
			if int64(v) >= int64(n) {
				return nil, fmt.Errorf("%s = %d is outside the vocabulary of %d tokens", key, v, n)
			}
			addStop(int(v))
		}
	}
	for _, s := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<|eom_id|>", "<EOT>"} {
		if id, ok := ids[s]; ok && types[id] == TypeControl {
			addStop(id)
		}
	}
	return t, nil
}

// ggufMerges reads "left right" merges, rank = position; the first of two
// identical merges wins, as in llama.cpp.
func ggufMerges(list []string, ids map[string]int) (map[[2]int]merge, error) {
	merges := make(map[[2]int]merge, len(list))
	for rank, m := range list {
		k := strings.IndexByte(m[min(1, len(m)):], ' ')
		if k < 0 {
			return nil, fmt.Errorf("%s[%d] = %q is not two tokens separated by a space", KeyMerges, rank, m)
		}
		k += min(1, len(m))
		a, b := m[:k], m[k+1:]
		ia, oka := ids[a]
		ib, okb := ids[b]
		ic, okc := ids[a+b]
		if !oka || !okb || !okc {
			return nil, fmt.Errorf("%s[%d] = %q: %q, %q or their concatenation is not a token", KeyMerges, rank, m, a, b)
		}
		if _, dup := merges[[2]int{ia, ib}]; !dup {
			merges[[2]int{ia, ib}] = merge{rank: rank, id: ic}
		}
	}
	return merges, nil
}

// ggufPre maps tokenizer.ggml.pre to pre-tokenizer steps, following the
// names llama.cpp gives each regex family. It also returns whether whole
// words that are tokens skip the merges, and the default of add_bos.
func ggufPre(pre string) ([]preStep, bool, bool, error) {
	bl := preStep{kind: preByteLevel} // byte mapping after the split
	split := func(s splitter) preStep { return preStep{kind: preSplit, split: s} }
	switch pre {
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2":
		return []preStep{split(splitLlama3), bl}, true, true, nil
	case "qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "solar-open", "kormo", "f2llmv2":
		return []preStep{split(splitQwen2), bl}, false, false, nil
	case "gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert":
		return []preStep{split(splitGPT2), bl}, false, false, nil
	case "smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2":
		return []preStep{split(splitDigits(true)), split(splitGPT2), bl}, false, false, nil
	case "", "default":
		// llama.cpp's fallback: four regexes, each splitting the pieces
		// of the one before.
		return []preStep{
			split(regexSplitter(regexp.MustCompile(`[\p{P}\$\+<=>\^~\|]+`), false)),
			split(splitGPT2),
			split(regexSplitter(regexp.MustCompile(`\p{N}+`), false)),
			split(regexSplitter(regexp.MustCompile(`[0-9][0-9][0-9]`), false)),
			bl,
		}, false, false, nil
	}
	return nil, false, false, fmt.Errorf("%s %q is not supported (supported: the llama3, qwen2, gpt-2, smollm families and default)", KeyPre, pre)
}

// regexSplitter splits around the matches of re; with remove the matches
// are dropped (behavior "Removed"), else kept as pieces ("Isolated").
func regexSplitter(re *regexp.Regexp, remove bool) splitter {
	return func(s string) []string {
		var out []string
		prev := 0
		for _, m := range re.FindAllStringIndex(s, -1) {
			if m[0] == m[1] {
				continue
			}
			if m[0] > prev {
				out = append(out, s[prev:m[0]])
			}
			if !remove {
				out = append(out, s[m[0]:m[1]])
			}
			prev = m[1]
		}
		if prev < len(s) {
			out = append(out, s[prev:])
		}
		return out
	}
}

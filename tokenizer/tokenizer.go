package tokenizer

import (
	"fmt"
	"slices"
)

// TokenType is a token's role, with GGUF's numbering
// (tokenizer.ggml.token_type).
type TokenType int32

const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// Kind names the two tokenizer families.
type Kind int

const (
	// SentencePiece is SentencePiece-style BPE: "▁" for spaces, <0xXX> byte
	// tokens for byte fallback (GGUF "llama", Llama-2 tokenizer.json).
	SentencePiece Kind = iota + 1
	// ByteLevel is GPT-2 byte-level BPE: every byte mapped to a printable
	// character, a regex pre-tokenizer, merges by rank (GGUF "gpt2", GPT-2
	// and Llama-3 tokenizer.json).
	ByteLevel
)

func (k Kind) String() string {
	switch k {
	case SentencePiece:
		return "sentencepiece"
	case ByteLevel:
		return "byte-level"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Tokenizer turns text into token ids and back. It is immutable after
// construction (SetStopTokens aside) and safe for concurrent use.
type Tokenizer struct {
	kind    Kind
	vocab   []string // id → text
	has     []bool   // false for ids no token has (holes in a JSON vocabulary)
	types   []TokenType
	special []bool // added tokens marked special, GGUF control/unknown tokens

	// Encoding: added tokens are split off the raw text (raw) and, after
	// normalization, off the normalized text (norm); the rest is
	// normalized, pre-tokenized into words, and each word encoded by the
	// model.
	raw, norm  *addedMatcher
	normalizer []normStep
	pretok     []preStep
	model      model
	bosPrefix  []int // ids Encode prepends when asked to add BOS

	decoder  []decStep
	decodeAs map[int]string // decode text of normalized added tokens

	bos, eos, unk int // -1 when absent
	stop          []int
}

// segment is a piece of the input on its way through the pipeline.
type segment struct {
	text  string
	id    int  // ≥ 0: the piece is this added token
	start bool // the piece begins at the start of the input
}

// Kind is the tokenizer family.
func (t *Tokenizer) Kind() Kind { return t.kind }

// VocabSize is one more than the largest token id.
func (t *Tokenizer) VocabSize() int { return len(t.vocab) }

// Token is the text of token id as the vocabulary stores it ("▁the",
// "Ġthe", "<0x0A>", "<s>"); ok is false for ids no token has.
func (t *Tokenizer) Token(id int) (text string, ok bool) {
	if id < 0 || id >= len(t.vocab) || !t.has[id] {
		return "", false
	}
	return t.vocab[id], true
}

// TokenType is the role of token id (TypeUndefined for unknown ids).
func (t *Tokenizer) TokenType(id int) TokenType {
	if id < 0 || id >= len(t.types) {
		return TypeUndefined
	}
	return t.types[id]
}

// IsSpecial reports whether id is a special token: an added token marked
// special in tokenizer.json, or a control or unknown token in GGUF.
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}

// BOS, EOS and UNK are the beginning-of-sequence, end-of-sequence and
// unknown token ids, -1 where the tokenizer has none.
func (t *Tokenizer) BOS() int { return t.bos }
func (t *Tokenizer) EOS() int { return t.eos }
func (t *Tokenizer) UNK() int { return t.unk }

// AddsBOS reports whether Encode(text, true) prepends anything.
func (t *Tokenizer) AddsBOS() bool { return len(t.bosPrefix) > 0 }

// StopTokens are the ids that end generation: EOS and, from GGUF, the
// end-of-turn and end-of-message tokens (eot, eom) when the file names
// them; SetStopTokens replaces them.
func (t *Tokenizer) StopTokens() []int { return slices.Clone(t.stop) }

// IsStop reports whether id is one of StopTokens.
func (t *Tokenizer) IsStop(id int) bool { return slices.Contains(t.stop, id) }

// SetStopTokens replaces the stop tokens (a model's generation_config.json
// often lists several). Every id must be a token of the vocabulary.
func (t *Tokenizer) SetStopTokens(ids ...int) error {
	for _, id := range ids {
		if _, ok := t.Token(id); !ok {
			return fmt.Errorf("tokenizer: SetStopTokens: id %d is not a token (vocabulary size %d)", id, len(t.vocab))
		}
	}
	t.stop = slices.Clone(ids)
	return nil
}

// Encode returns the token ids of text. With addBOS, the tokens the
// tokenizer's configuration puts before a sequence are prepended (BOS for
// Llama; nothing for GPT-2); tokens a configuration appends after a
// sequence (EOS) are never added, since Encode is for prompts.
//
// Added and special tokens written in the text ("<s>", "<|eot_id|>") are
// recognized and become their ids, as Hugging Face tokenizers and
// llama.cpp's parse_special do. Text that is not valid UTF-8 is encoded
// byte by byte where it is invalid (byte-level models map each byte;
// SentencePiece models use byte fallback tokens).
func (t *Tokenizer) Encode(text string, addBOS bool) []int {
	var out []int
	if addBOS {
		out = append(out, t.bosPrefix...)
	}
	for _, seg := range t.raw.split(segment{text: text, id: -1, start: true}) {
		if seg.id >= 0 {
			out = append(out, seg.id)
			continue
		}
		seg.text = normalize(t.normalizer, seg.text)
		for _, sub := range t.norm.split(seg) {
			if sub.id >= 0 {
				out = append(out, sub.id)
				continue
			}
			for _, w := range pretokenize(t.pretok, []segment{sub}) {
				out = t.model.encode(w.text, out)
			}
		}
	}
	return out
}

// Decode returns the text of ids, as Hugging Face's decode with
// skip_special_tokens=False and clean_up_tokenization_spaces=False: special
// tokens appear as their text, and ids no token has are skipped (a model's
// output layer may be wider than its vocabulary). Byte tokens that do not
// form valid UTF-8 become U+FFFD, as the reference does.
func (t *Tokenizer) Decode(ids []int) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if s, ok := t.decodeText(id); ok {
			toks = append(toks, s)
		}
	}
	return decodeChain(t.decoder, toks)
}

// Stream returns a decoder for ids that arrive one at a time.
func (t *Tokenizer) Stream() *StreamDecoder { return newStream(t) }

// decodeText is the text Decode starts from for id: the token's text, or
// for an added token matched in normalized form, that form.
func (t *Tokenizer) decodeText(id int) (string, bool) {
	if s, ok := t.decodeAs[id]; ok {
		return s, true
	}
	return t.Token(id)
}

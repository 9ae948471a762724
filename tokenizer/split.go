package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The pre-tokenizer regexes of GPT-2 and Llama 3 use a lookahead,
// \s+(?!\S), which Go's regexp (RE2) lacks, so they are written here by
// hand as matchers: at each position the alternatives are tried in the
// regex's order, each as a backtracking engine (Oniguruma in Hugging Face
// tokenizers, llama.cpp's hand-written twins) would match it. \s is
// Unicode White_Space (unicode.IsSpace), \p{L} letters, \p{N} numbers.
//
// GPT-2 (tokenizers' ByteLevel pre-tokenizer, llama.cpp "gpt-2"):
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// Llama 3 (llama.cpp "llama-bpe"; with \p{N} instead of \p{N}{1,3} it is
// Qwen2's):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+

// splitter cuts text into pre-tokens; the pieces concatenate to the text.
type splitter func(s string) []string

// runMatcher returns the byte length (≥ 1) of the match at i.
func splitWith(match func(s string, i int) int) splitter {
	return func(s string) []string {
		var out []string
		for i := 0; i < len(s); {
			n := match(s, i)
			out = append(out, s[i:i+n])
			i += n
		}
		return out
	}
}

var (
	splitGPT2   = splitWith(matchGPT2)
	splitLlama3 = splitWith(func(s string, i int) int { return matchLlama3(s, i, 3) })
	splitQwen2  = splitWith(func(s string, i int) int { return matchLlama3(s, i, 1) })
)

func at(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	return utf8.DecodeRuneInString(s[i:])
}

func isL(r rune) bool     { return r >= 0 && unicode.IsLetter(r) }
func isN(r rune) bool     { return r >= 0 && unicode.IsNumber(r) }
func isS(r rune) bool     { return r >= 0 && unicode.IsSpace(r) }
func isOther(r rune) bool { return r >= 0 && !isS(r) && !isL(r) && !isN(r) }
func isCRLF(r rune) bool  { return r == '\r' || r == '\n' }

// run is the end of the run of runes of class c starting at i (i if none),
// at most max runes when max > 0.
func run(s string, i int, c func(rune) bool, max int) int {
	for n := 0; i < len(s) && (max <= 0 || n < max); n++ {
		r, w := at(s, i)
		if !c(r) {
			break
		}
		i += w
	}
	return i
}

var contractions = []string{"s", "t", "re", "ve", "m", "ll", "d"}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i (case-insensitively
// with fold), returning the length or 0.
func contraction(s string, i int, fold bool) int {
	if i >= len(s) || s[i] != '\'' {
		return 0
	}
	for _, c := range contractions {
		j := i + 1
		ok := true
		for _, want := range c {
			r, w := at(s, j)
			if r != want && !(fold && sameFold(r, want)) {
				ok = false
				break
			}
			j += w
		}
		if ok {
			return j - i
		}
	}
	return 0
}

// sameFold reports whether r and c are equal under simple case folding,
// as (?i) matches them (so 'S' and 'ſ' match 's').
func sameFold(r, c rune) bool {
	if r < 0 {
		return false
	}
	for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
		if f == r {
			return true
		}
	}
	return false
}

// spaceTail matches \s+(?!\S)|\s+ at i, where s[i] is whitespace: the
// whitespace run, less its last character when a non-space follows and the
// run is longer than one character.
func spaceTail(s string, i int) int {
	j := run(s, i, isS, 0)
	if j == len(s) {
		return j - i
	}
	_, w := utf8.DecodeLastRuneInString(s[:j])
	if j-w > i {
		return j - w - i
	}
	return j - i
}

func matchGPT2(s string, i int) int {
	if n := contraction(s, i, false); n > 0 {
		return n
	}
	r0, w0 := at(s, i)
	r1, _ := at(s, i+w0)
	for _, c := range []func(rune) bool{isL, isN, isOther} {
		// ` ?X+`: the optional space is taken when X follows it.
		if r0 == ' ' && c(r1) {
			return run(s, i+w0, c, 0) - i
		}
		if c(r0) {
			return run(s, i, c, 0) - i
		}
	}
	if isS(r0) {
		return spaceTail(s, i)
	}
	return w0 // unreachable: every rune is in one class
}

func matchLlama3(s string, i int, maxDigits int) int {
	if n := contraction(s, i, true); n > 0 {
		return n
	}
	r0, w0 := at(s, i)
	r1, _ := at(s, i+w0)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if !isCRLF(r0) && !isL(r0) && !isN(r0) && isL(r1) {
		return run(s, i+w0, isL, 0) - i
	}
	if isL(r0) {
		return run(s, i, isL, 0) - i
	}
	// \p{N}{1,3}
	if isN(r0) {
		return run(s, i, isN, maxDigits) - i
	}
	//  ?[^\s\p{L}\p{N}]+[\r\n]*
	if r0 == ' ' && isOther(r1) {
		return run(s, run(s, i+w0, isOther, 0), isCRLF, 0) - i
	}
	if isOther(r0) {
		return run(s, run(s, i, isOther, 0), isCRLF, 0) - i
	}
	// \s*[\r\n]+: the whitespace run up to and including its last \r or \n.
	j := run(s, i, isS, 0)
	for k := j; k > i; {
		r, w := utf8.DecodeLastRuneInString(s[:k])
		if isCRLF(r) {
			return k - i
		}
		k -= w
	}
	if isS(r0) {
		return spaceTail(s, i)
	}
	return w0
}

// splitDigits isolates numbers: each digit alone, or runs of digits.
func splitDigits(individual bool) splitter {
	return func(s string) []string {
		var out []string
		for i := 0; i < len(s); {
			r, w := at(s, i)
			var j int
			switch {
			case isN(r) && individual:
				j = i + w
			case isN(r):
				j = run(s, i, isN, 0)
			default:
				j = run(s, i, func(r rune) bool { return !isN(r) }, 0)
			}
			out = append(out, s[i:j])
			i = j
		}
		return out
	}
}

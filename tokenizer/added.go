package tokenizer

import (
	"sort"
	"unicode"
	"unicode/utf8"
)

// addedToken is a token matched in the text before the model sees it.
type addedToken struct {
	content    string
	id         int
	singleWord bool // only matched when not inside a word
	lstrip     bool // swallows the whitespace to its left
	rstrip     bool // swallows the whitespace to its right
}

// addedMatcher finds added tokens in text: non-overlapping matches, scanned
// left to right, the longest token at the leftmost position winning
// (Hugging Face's Aho-Corasick in LeftmostLongest mode; llama.cpp instead
// splits on the longest token first, which differs only when one special
// token's text overlaps another's).
type addedMatcher struct {
	byFirst map[byte][]addedToken // candidates by first byte, longest first
}

func newAddedMatcher(toks []addedToken) *addedMatcher {
	m := &addedMatcher{byFirst: map[byte][]addedToken{}}
	for _, t := range toks {
		if t.content == "" {
			continue
		}
		m.byFirst[t.content[0]] = append(m.byFirst[t.content[0]], t)
	}
	for _, c := range m.byFirst {
		sort.SliceStable(c, func(i, j int) bool { return len(c[i].content) > len(c[j].content) })
	}
	return m
}

// next finds the leftmost-longest match at or after from.
func (m *addedMatcher) next(s string, from int) (addedToken, int, bool) {
	for i := from; i < len(s); i++ {
		for _, t := range m.byFirst[s[i]] {
			if len(s)-i >= len(t.content) && s[i:i+len(t.content)] == t.content {
				return t, i, true
			}
		}
	}
	return addedToken{}, 0, false
}

// split cuts seg into added tokens and the text between them. Empty text
// pieces are dropped; the first piece keeps seg.start when it begins where
// seg does.
func (m *addedMatcher) split(seg segment) []segment {
	if m == nil || len(m.byFirst) == 0 || seg.text == "" {
		if seg.text == "" {
			return nil
		}
		return []segment{seg}
	}
	s := seg.text
	var out []segment
	emit := func(b, e int, id int) {
		if e > b || id >= 0 {
			out = append(out, segment{text: s[b:e], id: id, start: seg.start && b == 0})
		}
	}
	done := 0 // text before done is emitted
	for pos := 0; pos < len(s); {
		t, at, ok := m.next(s, pos)
		if !ok {
			break
		}
		start, stop := at, at+len(t.content)
		pos = stop // the scan resumes after the match, kept or not
		if t.singleWord {
			if (start > 0 && endsWithWord(s[:start])) || (stop < len(s) && startsWithWord(s[stop:])) {
				continue
			}
		}
		if t.lstrip {
			start = max(trailingSpaceStart(s[:start]), done)
		}
		if t.rstrip {
			stop += leadingSpaceLen(s[stop:])
		}
		emit(done, start, -1)
		emit(start, stop, t.id)
		done, pos = stop, stop
	}
	emit(done, len(s), -1)
	return out
}

// isWordRune approximates the regex class \w (alphanumeric, marks,
// connector punctuation) used by single_word tokens.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) || unicode.Is(unicode.Pc, r)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWordRune(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordRune(r)
}

// trailingSpaceStart is where the run of whitespace ending s begins.
func trailingSpaceStart(s string) int {
	i := len(s)
	for i > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= w
	}
	return i
}

// leadingSpaceLen is the byte length of the whitespace run starting s.
func leadingSpaceLen(s string) int {
	i := 0
	for i < len(s) {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += w
	}
	return i
}

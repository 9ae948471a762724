package tokenizer

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// GPT-2's byte-to-character map: the printable bytes '!'..'~', '¡'..'¬' and
// '®'..'ÿ' stand for themselves; the other 68 bytes map, in order, to
// U+0100, U+0101, ... so every byte is a visible character.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := make(map[rune]byte, 256)
	n := rune(0)
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = 256 + n
			n++
		}
		b2r[b] = r
		r2b[r] = byte(b)
	}
	return b2r, r2b
}()

// byteEncode maps every byte of s to its character.
func byteEncode(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteToRune[s[i]])
	}
	return b.String()
}

// normStep is one normalizer. Normalizers see each piece of text between
// added tokens separately.
type normStep struct {
	prepend string         // Prepend: added before a non-empty piece
	from    string         // Replace with a literal pattern
	re      *regexp.Regexp // Replace with a regex pattern
	to      string
}

func normalize(steps []normStep, s string) string {
	for _, n := range steps {
		switch {
		case n.prepend != "":
			if s != "" {
				s = n.prepend + s
			}
		case n.re != nil:
			s = n.re.ReplaceAllLiteralString(s, n.to)
		case n.from != "":
			s = strings.ReplaceAll(s, n.from, n.to)
		}
	}
	return s
}

// preKind is a pre-tokenizer.
type preKind int

const (
	preSplit     preKind = iota + 1 // split with a splitter, every piece kept
	preByteLevel                    // optional prefix space, GPT-2 split, byte mapping
	preMetaspace                    // spaces → replacement, prepend, optional split
)

type preStep struct {
	kind preKind
	// preSplit; preByteLevel uses it when it splits (use_regex)
	split splitter
	// preByteLevel
	prefixSpace bool
	// preMetaspace
	replacement string
	scheme      prependScheme
	metaSplit   bool
}

type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst                // only for the piece at the start of the input
	prependNever
)

// pretokenize runs the steps over the pieces; empty pieces are dropped.
func pretokenize(steps []preStep, segs []segment) []segment {
	for _, p := range steps {
		var next []segment
		for _, sg := range segs {
			next = p.apply(sg, next)
		}
		segs = next
	}
	return segs
}

func (p preStep) apply(sg segment, out []segment) []segment {
	add := func(pieces []string) {
		for i, s := range pieces {
			if s != "" {
				out = append(out, segment{text: s, id: -1, start: sg.start && i == 0})
			}
		}
	}
	switch p.kind {
	case preSplit:
		add(p.split(sg.text))
	case preByteLevel:
		s := sg.text
		if p.prefixSpace && !strings.HasPrefix(s, " ") {
			s = " " + s
		}
		pieces := []string{s}
		if p.split != nil {
			pieces = p.split(s)
		}
		for i := range pieces {
			pieces[i] = byteEncode(pieces[i])
		}
		add(pieces)
	case preMetaspace:
		s := strings.ReplaceAll(sg.text, " ", p.replacement)
		if !strings.HasPrefix(s, p.replacement) && (p.scheme == prependAlways || p.scheme == prependFirst && sg.start) {
			s = p.replacement + s
		}
		if !p.metaSplit {
			add([]string{s})
			break
		}
		// Split before each replacement character (MergedWithNext).
		var pieces []string
		for {
			from := 0
			if strings.HasPrefix(s, p.replacement) {
				from = len(p.replacement)
			}
			k := strings.Index(s[from:], p.replacement)
			if k < 0 {
				pieces = append(pieces, s)
				break
			}
			pieces = append(pieces, s[:from+k])
			s = s[from+k:]
		}
		add(pieces)
	}
	return out
}

// charLen is the length of the character starting with byte b, by its high
// bits as llama.cpp's unicode_len_utf8 reads it; invalid UTF-8 thus splits
// into short pieces that byte fallback or byte mapping then carry.
func charLen(b byte) int {
	return [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[b>>4]
}

// chars cuts s into characters (see charLen).
func chars(s string) []string {
	out := make([]string, 0, utf8.RuneCountInString(s))
	for i := 0; i < len(s); {
		n := min(charLen(s[i]), len(s)-i)
		out = append(out, s[i:i+n])
		i += n
	}
	return out
}

package tokenizer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// decKind is a decoder step, as Hugging Face tokenizers names them.
type decKind int

const (
	decReplace      decKind = iota + 1 // replace a literal in each token
	decByteFallback                    // runs of <0xXX> tokens become their bytes
	decFuse                            // join all tokens into one
	decStrip                           // strip leading/trailing copies of a character
	decMetaspace                       // "▁" → " ", none in the first token
	decByteLevel                       // map characters back to bytes, decode UTF-8
	decJoinSpace                       // no decoder: tokens joined with spaces
)

type decStep struct {
	kind       decKind
	from, to   string // decReplace
	content    rune   // decStrip
	start      int    // decStrip: at most this many leading copies
	stop       int    // decStrip: at most this many trailing copies
	rep        string // decMetaspace replacement
	dropFirst  bool   // decMetaspace: prepend scheme is not "never"
	fusedAfter bool   // set by validation: a Fuse or ByteLevel step precedes
}

// decodeChain applies the steps to the tokens, each step seeing the
// previous one's output, and joins what is left: Hugging Face's
// Decoder::decode, step for step.
func decodeChain(steps []decStep, toks []string) string {
	for _, st := range steps {
		switch st.kind {
		case decReplace:
			for i, t := range toks {
				toks[i] = strings.ReplaceAll(t, st.from, st.to)
			}
		case decMetaspace:
			for i, t := range toks {
				toks[i] = metaspaceToken(t, st, i == 0)
			}
		case decByteFallback:
			var out []string
			var run []byte
			flush := func() {
				out = appendByteRun(out, run)
				run = run[:0]
			}
			for _, t := range toks {
				if b, ok := byteToken(t); ok {
					run = append(run, b)
					continue
				}
				flush()
				out = append(out, t)
			}
			flush()
			toks = out
		case decFuse:
			toks = []string{strings.Join(toks, "")}
		case decStrip:
			for i, t := range toks {
				toks[i] = stripToken(t, st)
			}
		case decByteLevel:
			var b []byte
			for _, t := range toks {
				b = appendTokenBytes(b, t)
			}
			s, _ := lossy(b, true)
			toks = []string{s}
		case decJoinSpace:
			toks = []string{strings.Join(toks, " ")}
		}
	}
	return strings.Join(toks, "")
}

func metaspaceToken(t string, st decStep, first bool) string {
	if first && st.dropFirst {
		return strings.ReplaceAll(t, st.rep, "")
	}
	return strings.ReplaceAll(t, st.rep, " ")
}

// byteToken reads a "<0xXX>" token (either case of hex digits).
func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(t[3:5], 16, 8)
	return byte(v), err == nil
}

// appendByteRun appends a run of byte tokens' bytes: one string when they
// are valid UTF-8, else one U+FFFD per byte (the reference's rule).
func appendByteRun(out []string, run []byte) []string {
	if len(run) == 0 {
		return out
	}
	if utf8.Valid(run) {
		return append(out, string(run))
	}
	for range run {
		out = append(out, "\uFFFD")
	}
	return out
}

func stripToken(t string, st decStep) string {
	for n := 0; n < st.start && t != ""; n++ {
		r, w := utf8.DecodeRuneInString(t)
		if r != st.content {
			break
		}
		t = t[w:]
	}
	for n := 0; n < st.stop && t != ""; n++ {
		r, w := utf8.DecodeLastRuneInString(t)
		if r != st.content {
			break
		}
		t = t[:len(t)-w]
	}
	return t
}

// appendTokenBytes appends the bytes a byte-level token stands for; a token
// with a character outside the byte map (an added token such as one with a
// space) stands for its own UTF-8 bytes.
func appendTokenBytes(b []byte, t string) []byte {
	n := len(b)
	for _, r := range t {
		c, ok := runeToByte[r]
		if !ok {
			return append(b[:n], t...)
		}
		b = append(b, c)
	}
	return b
}

// lossy decodes b as UTF-8, replacing each maximal invalid subsequence by
// one U+FFFD (Unicode's "maximal subpart" practice, which Rust's
// String::from_utf8_lossy follows). Unless final, an incomplete sequence at
// the end is left undecoded and its length returned as rest, since more
// bytes may complete it.
func lossy(b []byte, final bool) (s string, rest int) {
	var sb strings.Builder
	i := 0
	for i < len(b) {
		if b[i] < utf8.RuneSelf {
			sb.WriteByte(b[i])
			i++
			continue
		}
		n, complete := utf8Prefix(b[i:])
		switch {
		case complete:
			sb.Write(b[i : i+n])
		case i+n == len(b) && !final && n > 0:
			return sb.String(), len(b) - i
		default:
			sb.WriteString("\uFFFD")
		}
		i += max(n, 1)
	}
	return sb.String(), 0
}

// utf8Prefix returns how many bytes of b, from a non-ASCII lead byte, form
// the longest valid prefix of a UTF-8 sequence, and whether that prefix is a
// whole character. n is 0 for a byte that cannot start a sequence.
func utf8Prefix(b []byte) (n int, complete bool) {
	lo, hi := byte(0x80), byte(0xBF)
	var need int
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 0, false
	}
	n = 1
	for k := 0; k < need; k++ {
		if n >= len(b) || b[n] < lo || b[n] > hi {
			return n, false
		}
		n++
		lo, hi = 0x80, 0xBF
	}
	return n, true
}

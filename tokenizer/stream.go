package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// StreamDecoder decodes ids that arrive one at a time (a model generating),
// returning text as soon as it is final: the concatenation of everything
// Add and Flush return equals Decode of all the ids. Text is held back
// while it may still change: the bytes of a character split across tokens,
// and a run of byte-fallback tokens (the reference decodes a run as a whole
// and turns every byte of an invalid run into U+FFFD, so the run waits for
// its end). A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t      *Tokenizer
	stages []stage
	out    strings.Builder
}

// event is one token's text travelling down the decoder steps; cont marks
// text that continues the previous token (after a Fuse step everything is
// one token).
type event struct {
	text string
	cont bool
}

type stage interface {
	push(e event, emit func(event))
	flush(emit func(event))
}

func newStream(t *Tokenizer) *StreamDecoder {
	d := &StreamDecoder{t: t}
	for _, st := range t.decoder {
		switch st.kind {
		case decReplace:
			d.stages = append(d.stages, &replaceStage{st: st})
		case decMetaspace:
			d.stages = append(d.stages, &metaspaceStage{st: st, index: -1})
		case decByteFallback:
			d.stages = append(d.stages, &byteFallbackStage{})
		case decFuse:
			d.stages = append(d.stages, &fuseStage{})
		case decStrip:
			d.stages = append(d.stages, &stripStage{st: st})
		case decByteLevel:
			d.stages = append(d.stages, &byteLevelStage{})
		case decJoinSpace:
			d.stages = append(d.stages, &joinSpaceStage{})
		}
	}
	return d
}

// run sends e through stages[i:] into the output.
func (d *StreamDecoder) run(i int, e event) {
	if i == len(d.stages) {
		d.out.WriteString(e.text)
		return
	}
	d.stages[i].push(e, func(e event) { d.run(i+1, e) })
}

// Add decodes one more id and returns the text that became final. Ids no
// token has are skipped, as Decode skips them.
func (d *StreamDecoder) Add(id int) string {
	s, ok := d.t.decodeText(id)
	if !ok {
		return ""
	}
	d.out.Reset()
	d.run(0, event{text: s})
	return d.out.String()
}

// Flush ends the stream and returns the text still held back (an
// incomplete character becomes U+FFFD). The decoder starts afresh after it.
func (d *StreamDecoder) Flush() string {
	d.out.Reset()
	for i := range d.stages {
		d.stages[i].flush(func(e event) { d.run(i+1, e) })
	}
	s := d.out.String()
	*d = *newStream(d.t)
	return s
}

type replaceStage struct{ st decStep }

func (s *replaceStage) push(e event, emit func(event)) {
	emit(event{strings.ReplaceAll(e.text, s.st.from, s.st.to), e.cont})
}
func (s *replaceStage) flush(func(event)) {}

type metaspaceStage struct {
	st    decStep
	index int // of the current token
}

func (s *metaspaceStage) push(e event, emit func(event)) {
	if !e.cont {
		s.index++
	}
	emit(event{metaspaceToken(e.text, s.st, s.index == 0), e.cont})
}
func (s *metaspaceStage) flush(func(event)) {}

type byteFallbackStage struct{ run []byte }

func (s *byteFallbackStage) push(e event, emit func(event)) {
	if b, ok := byteToken(e.text); ok && !e.cont {
		s.run = append(s.run, b)
		return
	}
	s.flush(emit)
	emit(e)
}

func (s *byteFallbackStage) flush(emit func(event)) {
	for _, t := range appendByteRun(nil, s.run) {
		emit(event{text: t})
	}
	s.run = s.run[:0]
}

type fuseStage struct{ started bool }

func (s *fuseStage) push(e event, emit func(event)) {
	emit(event{e.text, s.started})
	s.started = true
}
func (s *fuseStage) flush(func(event)) {}

type joinSpaceStage struct{ started bool }

func (s *joinSpaceStage) push(e event, emit func(event)) {
	if s.started && !e.cont {
		e.text = " " + e.text
	}
	emit(event{e.text, s.started})
	s.started = true
}
func (s *joinSpaceStage) flush(func(event)) {}

type stripStage struct {
	st       decStep
	stripped int  // leading copies removed from the current token
	done     bool // a non-content character of the current token was seen
}

func (s *stripStage) push(e event, emit func(event)) {
	if !e.cont {
		s.stripped, s.done = 0, false
	}
	t := e.text
	for !s.done && s.stripped < s.st.start && t != "" {
		r, w := utf8.DecodeRuneInString(t)
		if r != s.st.content {
			s.done = true
			break
		}
		t = t[w:]
		s.stripped++
	}
	if t != "" {
		s.done = true
	}
	if s.st.stop > 0 {
		// Only before any joining step (checkStreamable): e is a whole token.
		t = stripToken(t, decStep{content: s.st.content, stop: s.st.stop})
	}
	emit(event{t, e.cont})
}
func (s *stripStage) flush(func(event)) {}

type byteLevelStage struct {
	pending []byte
	started bool
}

func (s *byteLevelStage) push(e event, emit func(event)) {
	s.pending = appendTokenBytes(s.pending, e.text)
	text, rest := lossy(s.pending, false)
	s.pending = append(s.pending[:0], s.pending[len(s.pending)-rest:]...)
	emit(event{text, s.started})
	s.started = true
}

func (s *byteLevelStage) flush(emit func(event)) {
	if len(s.pending) == 0 {
		return
	}
	text, _ := lossy(s.pending, true)
	s.pending = s.pending[:0]
	emit(event{text, s.started})
	s.started = true
}

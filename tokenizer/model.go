package tokenizer

import (
	"container/heap"
	"fmt"
)

// model encodes one pre-tokenized word, appending ids to out.
type model interface {
	encode(word string, out []int) []int
}

// byteTokens finds the byte fallback token of every byte: "<0xXX>" (upper
// case hex, as SentencePiece writes them), -1 where the vocabulary has
// none.
func byteTokens(ids map[string]int) [256]int {
	var b [256]int
	for i := range b {
		id, ok := ids[fmt.Sprintf("<0x%02X>", i)]
		if !ok {
			id = -1
		}
		b[i] = id
	}
	return b
}

// spmModel is llama.cpp's SentencePiece BPE (llm_tokenizer_spm): start from
// the characters of the text, repeatedly merge the adjacent pair whose
// concatenation is the highest-scoring token (ties: leftmost), and write
// each final piece as its token, or as byte tokens when it is none.
type spmModel struct {
	ids    map[string]int
	scores []float32
	bytes  [256]int // <0xXX> tokens
	raw    [256]int // single-byte tokens, llama.cpp's second choice
	unk    int
}

type spmBigram struct {
	left, right int
	score       float32
	size        int
}

type spmQueue []spmBigram

func (q spmQueue) Len() int { return len(q) }
func (q spmQueue) Less(i, j int) bool {
	if q[i].score != q[j].score {
		return q[i].score > q[j].score
	}
	return q[i].left < q[j].left
}
func (q spmQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *spmQueue) Push(x any)   { *q = append(*q, x.(spmBigram)) }
func (q *spmQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (m *spmModel) encode(text string, out []int) []int {
	cs := chars(text)
	if len(cs) == 0 {
		return out
	}
	// Symbols alias text: a merged symbol is the substring spanning both.
	type sym struct {
		start, n   int
		prev, next int
	}
	syms := make([]sym, len(cs))
	off := 0
	for i, c := range cs {
		syms[i] = sym{start: off, n: len(c), prev: i - 1, next: i + 1}
		off += len(c)
	}
	syms[len(syms)-1].next = -1
	q := &spmQueue{}
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		s := text[syms[l].start : syms[l].start+syms[l].n+syms[r].n]
		id, ok := m.ids[s]
		if !ok {
			return
		}
		heap.Push(q, spmBigram{left: l, right: r, score: m.scores[id], size: len(s)})
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for q.Len() > 0 {
		b := heap.Pop(q).(spmBigram)
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue // one side was merged since: the bigram is stale
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		try(l.prev, b.left)
		try(b.left, l.next)
	}
	for i := 0; i != -1; i = syms[i].next {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := m.ids[s]; ok {
			out = append(out, id)
			continue
		}
		// Only single characters can fail to be tokens (merges make
		// tokens): write their bytes, as <0xXX> tokens or, llama.cpp's
		// second choice, single-byte tokens; a character some byte of
		// which has neither is one <unk> (where llama.cpp would abort).
		ok := true
		for j := 0; j < len(s); j++ {
			ok = ok && (m.bytes[s[j]] >= 0 || m.raw[s[j]] >= 0)
		}
		switch {
		case ok:
			for j := 0; j < len(s); j++ {
				if m.bytes[s[j]] >= 0 {
					out = append(out, m.bytes[s[j]])
				} else {
					out = append(out, m.raw[s[j]])
				}
			}
		case m.unk >= 0:
			out = append(out, m.unk)
		}
	}
	return out
}

// bpeModel is rank-based BPE, Hugging Face's BPE model (and llama.cpp's
// llm_tokenizer_bpe): start from the characters of the word, each its token
// (or byte fallback tokens, or unk), and repeatedly apply the merge of
// lowest rank among adjacent pairs (ties: leftmost).
type bpeModel struct {
	ids          map[string]int
	merges       map[[2]int]merge
	byteFallback bool
	bytes        [256]int
	unk          int
	fuseUnk      bool
	ignoreMerges bool // a word that is a token is that token (Llama 3)
}

type merge struct{ rank, id int }

type bpeCand struct{ pos, rank, id int }

type bpeQueue []bpeCand

func (q bpeQueue) Len() int { return len(q) }
func (q bpeQueue) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q bpeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *bpeQueue) Push(x any)   { *q = append(*q, x.(bpeCand)) }
func (q *bpeQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (m *bpeModel) encode(word string, out []int) []int {
	if word == "" {
		return out
	}
	if m.ignoreMerges {
		if id, ok := m.ids[word]; ok {
			return append(out, id)
		}
	}
	type sym struct {
		id         int
		prev, next int
		gone       bool
	}
	var syms []sym
	add := func(id int) {
		syms = append(syms, sym{id: id, prev: len(syms) - 1, next: len(syms) + 1})
	}
	unkPending := false
	for _, c := range chars(word) {
		if id, ok := m.ids[c]; ok {
			if unkPending {
				add(m.unk)
				unkPending = false
			}
			add(id)
			continue
		}
		if m.byteFallback {
			ok := true
			for j := 0; j < len(c); j++ {
				ok = ok && m.bytes[c[j]] >= 0
			}
			if ok {
				// As the reference does, a pending unk is not flushed
				// before byte tokens.
				for j := 0; j < len(c); j++ {
					add(m.bytes[c[j]])
				}
				continue
			}
		}
		if m.unk >= 0 {
			if unkPending && !m.fuseUnk {
				add(m.unk)
			}
			unkPending = true
		}
	}
	if unkPending {
		add(m.unk)
	}
	if len(syms) == 0 {
		return out
	}
	syms[len(syms)-1].next = -1
	q := &bpeQueue{}
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[[2]int{syms[i].id, syms[i+1].id}]; ok {
			heap.Push(q, bpeCand{pos: i, rank: mg.rank, id: mg.id})
		}
	}
	for q.Len() > 0 {
		c := heap.Pop(q).(bpeCand)
		s := &syms[c.pos]
		if s.gone || s.next < 0 {
			continue
		}
		r := &syms[s.next]
		if mg, ok := m.merges[[2]int{s.id, r.id}]; !ok || mg.id != c.id {
			continue // stale: a side changed since the candidate was queued
		}
		s.id = c.id
		r.gone = true
		s.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.pos
		}
		if s.prev >= 0 {
			if mg, ok := m.merges[[2]int{syms[s.prev].id, s.id}]; ok {
				heap.Push(q, bpeCand{pos: s.prev, rank: mg.rank, id: mg.id})
			}
		}
		if s.next >= 0 {
			if mg, ok := m.merges[[2]int{s.id, syms[s.next].id}]; ok {
				heap.Push(q, bpeCand{pos: c.pos, rank: mg.rank, id: mg.id})
			}
		}
	}
	for i := 0; i >= 0; i = syms[i].next {
		out = append(out, syms[i].id)
	}
	return out
}

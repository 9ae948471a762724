package model

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
)

// Sampler picks the next token from a position's logits: the largest at
// temperature 0 (greedy; the first on ties), otherwise a draw from the
// softmax of logits/temperature restricted by top-k then top-p, Hugging
// Face's order (TemperatureLogitsWarper, TopKLogitsWarper,
// TopPLogitsWarper), from a seeded PCG generator. Everything is computed in
// float64 from the float32 logits, so a seed gives the same tokens on
// every machine for the same logits.
//
// A sampled token costs the host a pass over the vocabulary, split over
// GOMAXPROCS goroutines for a large one (scan: the NaN check, the largest
// logit and each part's k largest, whose union gives top-k's k-th): then
// the softmax terms of top-k's candidates only, or of every token, split
// the same way (each term computed alone: no bit changes), and top-p
// sorts only the prefix of the candidates its sum needs. On a 2-core
// machine, one draw from 128256 logits (BenchmarkSampler, which runs the
// first version beside it): top-k 50 0.23 ms against 1.53–1.66, top-k 50
// with top-p 0.9 0.18–0.22 against 1.53, a temperature alone 1.08–1.33
// against 1.65–1.72; a flat distribution's top-p 0.9 still sorts most of
// the vocabulary: 3.9–4.3 against 6.4–6.8. TestSamplerMatchesReference
// checks, at GOMAXPROCS 1, 2 and 8, that the draws are that version's,
// draw for draw.
type Sampler struct {
	temperature float64
	topK        int
	topP        float64
	rng         *rand.Rand

	probs []float64 // scratch, vocabulary-sized
	cand  []int
	pairs []probPair
	// scan's scratch: the parts, and the union of their k largest
	scanParts     []scanPart
	union, merged []float32
}

// seedStream is the PCG generator's second word: any fixed value, so that
// a Seed alone decides the stream.
const seedStream = 0x6c6f6f6d2d67656e // "loom-gen"

// NewSampler returns a sampler for the sampling fields of opts
// (Temperature ≥ 0, TopK ≥ 0 where 0 keeps every token, 0 < TopP ≤ 1 where
// 0 means 1, Seed).
func NewSampler(opts GenerateOptions) (*Sampler, error) {
	switch {
	case !(opts.Temperature >= 0) || math.IsInf(opts.Temperature, 0):
		return nil, fmt.Errorf("model: sampler: temperature %g, want a finite number ≥ 0 (0: greedy)", opts.Temperature)
	case opts.TopK < 0:
		return nil, fmt.Errorf("model: sampler: top-k %d, want ≥ 0 (0: no limit)", opts.TopK)
	case !(opts.TopP >= 0 && opts.TopP <= 1):
		return nil, fmt.Errorf("model: sampler: top-p %g, want 0 < p ≤ 1 (0: no limit)", opts.TopP)
	}
	p := opts.TopP
	if p == 0 {
		p = 1
	}
	return &Sampler{temperature: opts.Temperature, topK: opts.TopK, topP: p,
		rng: rand.New(rand.NewPCG(opts.Seed, seedStream))}, nil
}

// Sample picks a token from logits (one position, the vocabulary wide). NaN
// logits are an error: a model producing them is broken, and no choice
// among them would mean anything.
func (s *Sampler) Sample(logits []float32) (int, error) {
	if len(logits) == 0 {
		return 0, fmt.Errorf("model: sample: no logits")
	}
	k := 0 // top-k's k where it limits the candidates
	if s.temperature > 0 && s.topK > 0 && s.topK < len(logits) {
		k = s.topK
	}
	best, kth, err := s.scan(logits, k)
	if err != nil {
		return 0, err
	}
	if s.temperature == 0 {
		return best, nil
	}
	// Softmax of logits/temperature, relative to the largest, of the
	// candidates only (top-k's, or every token).
	if cap(s.probs) < len(logits) {
		s.probs = make([]float64, len(logits))
	}
	probs := s.probs[:len(logits)]
	top := float64(logits[best])
	if math.IsInf(top, 0) {
		return best, nil // +Inf dominates; all −Inf leaves only this choice
	}
	cand := s.candidates(logits, probs, top, k, kth)
	if s.topP < 1 {
		cand = s.nucleus(cand, probs)
	}
	total := 0.0
	for _, i := range cand {
		total += probs[i]
	}
	r := s.rng.Float64() * total
	for _, i := range cand {
		r -= probs[i]
		if r < 0 {
			return i, nil
		}
	}
	return cand[len(cand)-1], nil // r within rounding of total
}

// expChunk is the fewest softmax terms a goroutine takes: a vocabulary of
// 128256 is 31 chunks, so all 16 cores of the GPU machine take part. The
// exponentials are most of a sampled token's host time (~3 ms for 128256
// on one core of a slow machine); each is computed alone, so splitting
// them changes no bit. With chunks of 1 << 15 (4 parts at most) a
// temperature alone took 1.43 ms on the GPU machine's 16 cores, more than
// the 1.05 ms of the 2-core CI machine (BenchmarkSampler, session 31).
const expChunk = 1 << 12

// scanChunk is the fewest logits a goroutine of a comparison pass takes.
const scanChunk = 1 << 14

// partsOf is the number of parts a pass over n items splits into:
// GOMAXPROCS at most, none shorter than chunk, at least one.
func partsOf(n, chunk int) int {
	return max(1, min(runtime.GOMAXPROCS(0), n/chunk))
}

// parallel calls f(w, lo, hi) for the parts w = 0 … parts−1 of [0, n), each
// on a goroutine of its own (one part: on the caller's).
func parallel(n, parts int, f func(w, lo, hi int)) {
	if parts < 2 {
		f(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range parts {
		wg.Go(func() { f(w, w*n/parts, (w+1)*n/parts) })
	}
	wg.Wait()
}

// scanPart is one part's share of scan.
type scanPart struct {
	nan  int       // the part's first NaN, −1 for none
	best int       // the part's first largest logit
	top  []float32 // k > 0: the part's k largest (all of them if fewer)
	cand []int     // candidates' share (candidates)
}

// scan is the one pass every draw makes over the logits, in parts over
// goroutines for a large vocabulary: the first NaN (an error), the first
// largest logit, and with k > 0 (k < len(logits)) the k-th largest, from
// the union of the parts' k largest.
func (s *Sampler) scan(logits []float32, k int) (best int, kth float32, err error) {
	parts := s.parts(partsOf(len(logits), scanChunk))
	parallel(len(logits), len(parts), func(w, lo, hi int) {
		p := &parts[w]
		p.nan, p.best = -1, lo
		bv := logits[lo]
		for i := lo; i < hi; i++ {
			v := logits[i]
			if v != v {
				p.nan = i
				return
			}
			if v > bv {
				p.best, bv = i, v
			}
		}
		if k > 0 {
			p.top = largest(logits[lo:hi], k, p.top)
		}
	})
	best = parts[0].best
	for _, p := range parts {
		if p.nan >= 0 {
			return 0, 0, fmt.Errorf("model: sample: the logit of token %d is NaN", p.nan)
		}
		if logits[p.best] > logits[best] {
			best = p.best
		}
	}
	if k == 0 {
		return best, 0, nil
	}
	u := parts[0].top
	if len(parts) > 1 {
		u = s.union[:0]
		for _, p := range parts {
			u = append(u, p.top...)
		}
		s.union = u
		u = largest(u, k, s.merged)
		s.merged = u
	}
	// u holds the k largest logits: the least of them is the k-th.
	return best, slices.Min(u), nil
}

// parts returns n parts' scratch.
func (s *Sampler) parts(n int) []scanPart {
	if len(s.scanParts) < n {
		s.scanParts = make([]scanPart, n)
	}
	return s.scanParts[:n]
}

// softmax sets probs[i] = exp((logits[i] − top)/temperature) for i in ids
// (nil: every index), in parallel when there are many.
func (s *Sampler) softmax(logits []float32, probs []float64, top float64, ids []int) {
	n := len(logits)
	if ids != nil {
		n = len(ids)
	}
	parallel(n, partsOf(n, expChunk), func(_, lo, hi int) {
		if ids == nil {
			for i := lo; i < hi; i++ {
				probs[i] = math.Exp((float64(logits[i]) - top) / s.temperature)
			}
			return
		}
		for _, i := range ids[lo:hi] {
			probs[i] = math.Exp((float64(logits[i]) - top) / s.temperature)
		}
	})
}

// candidates returns the tokens top-k keeps, in id order: with k > 0
// those whose logit is at least kth, the k-th largest (ties at the
// boundary all stay, as in Hugging Face), else every token; those of
// probability 0 (underflow) are dropped. It fills probs for the tokens it
// returns.
func (s *Sampler) candidates(logits []float32, probs []float64, top float64, k int, kth float32) []int {
	cand := s.cand[:0]
	if k > 0 {
		parts := s.parts(partsOf(len(logits), scanChunk))
		parallel(len(logits), len(parts), func(w, lo, hi int) {
			c := parts[w].cand[:0]
			for i, v := range logits[lo:hi] {
				if v >= kth {
					c = append(c, lo+i)
				}
			}
			parts[w].cand = c
		})
		for _, p := range parts {
			cand = append(cand, p.cand...)
		}
		s.softmax(logits, probs, top, cand)
		kept := cand[:0]
		for _, i := range cand {
			if probs[i] > 0 {
				kept = append(kept, i)
			}
		}
		cand = kept
	} else {
		s.softmax(logits, probs, top, nil)
		for i, p := range probs {
			if p > 0 {
				cand = append(cand, i)
			}
		}
	}
	s.cand = cand
	return cand
}

// nucleus keeps the fewest most probable candidates whose probabilities
// (renormalised over the candidates) sum to at least topP, ordered from the
// most probable (ties: lower id first), the sums taken in that order; all
// of them where rounding keeps the sum short. Only a prefix of that order
// is sorted: the first m candidates are selected (a partial quickselect)
// and sorted, and m grows eightfold until their sum reaches topP, so a
// peaked distribution sorts a few hundred candidates of a vocabulary of
// 128256 and a flat one no more than the whole.
func (s *Sampler) nucleus(cand []int, probs []float64) []int {
	total := 0.0
	for _, i := range cand {
		total += probs[i]
	}
	need := s.topP * total
	ps := s.pairs[:0]
	for _, i := range cand {
		ps = append(ps, probPair{probs[i], i})
	}
	s.pairs = ps
	for m := 256; ; m *= 8 {
		m = min(m, len(ps))
		if m < len(ps) {
			selectFirst(ps, m)
		}
		slices.SortFunc(ps[:m], comparePairs)
		sum := 0.0
		for n, q := range ps[:m] {
			sum += q.p
			if sum >= need {
				return pairIDs(cand, ps[:n+1])
			}
		}
		if m == len(ps) {
			return pairIDs(cand, ps)
		}
	}
}

// probPair is a candidate's probability and id.
type probPair struct {
	p  float64
	id int
}

// comparePairs orders pairs from the most probable, ties by lower id: a
// total order (ids differ).
func comparePairs(a, b probPair) int {
	if c := cmp.Compare(b.p, a.p); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// selectFirst reorders ps so that ps[:m] holds the m first pairs of
// comparePairs' order, in no particular order (0 < m < len(ps)):
// quickselect, the pivot a median of three.
func selectFirst(ps []probPair, m int) {
	lo, hi := 0, len(ps)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if comparePairs(ps[mid], ps[lo]) < 0 {
			ps[mid], ps[lo] = ps[lo], ps[mid]
		}
		if comparePairs(ps[hi], ps[lo]) < 0 {
			ps[hi], ps[lo] = ps[lo], ps[hi]
		}
		if comparePairs(ps[hi], ps[mid]) < 0 {
			ps[hi], ps[mid] = ps[mid], ps[hi]
		}
		pivot := ps[mid]
		i, j := lo, hi
		for i <= j {
			for comparePairs(ps[i], pivot) < 0 {
				i++
			}
			for comparePairs(pivot, ps[j]) < 0 {
				j--
			}
			if i <= j {
				ps[i], ps[j] = ps[j], ps[i]
				i++
				j--
			}
		}
		// ps[lo..j] come before the pivot or are it, ps[i..hi] after.
		switch {
		case m-1 <= j:
			hi = j
		case m-1 >= i:
			lo = i
		default:
			return
		}
	}
}

// pairIDs writes the pairs' ids into cand's memory and returns them.
func pairIDs(cand []int, ps []probPair) []int {
	out := cand[:len(ps)]
	for n, q := range ps {
		out[n] = q.id
	}
	return out
}

// largest returns, in buf's memory, the k largest of xs as a min-heap (its
// least first), or all of xs when there are at most k: the first k
// heapified, then each later logit against the heap's least (kept in a
// local: most logits of a vocabulary fail that one comparison).
func largest(xs []float32, k int, buf []float32) []float32 {
	h := append(buf[:0], xs[:min(k, len(xs))]...)
	if len(xs) <= k {
		return h
	}
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	least := h[0]
	for _, v := range xs[k:] {
		if v > least {
			h[0] = v
			siftDown(h, 0)
			least = h[0]
		}
	}
	return h
}

// siftDown restores the min-heap order of h below i.
func siftDown(h []float32, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && h[r] < h[l] {
			l = r
		}
		if h[i] <= h[l] {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}

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
// A sampled token costs the host a pass over the vocabulary: the softmax
// terms of top-k's candidates only, or of every token split over
// GOMAXPROCS goroutines; top-p sorts only the prefix of the candidates
// its sum needs; top-k's k-th largest logit comes from a heap of k. On a
// 2-core machine, one draw from 128256 logits (BenchmarkSampler, which
// runs the first version beside it): top-k 50 0.25 ms against 1.70, top-k
// 50 with top-p 0.9 0.32 against 1.77, a temperature alone 1.33 against
// 1.68; a flat distribution's top-p 0.9 still sorts most of the
// vocabulary: 4.5 against 6.9. TestSamplerMatchesReference checks that
// the draws are that version's, draw for draw.
type Sampler struct {
	temperature float64
	topK        int
	topP        float64
	rng         *rand.Rand

	probs []float64 // scratch, vocabulary-sized
	cand  []int
	pairs []probPair
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
	best, bv := 0, logits[0]
	for i, v := range logits {
		if v != v {
			return 0, fmt.Errorf("model: sample: the logit of token %d is NaN", i)
		}
		if v > bv {
			best, bv = i, v
		}
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
	cand := s.candidates(logits, probs, top)
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

// expChunk is the fewest logits a goroutine of softmax takes: a vocabulary
// of 128256 is 4 chunks. The exponentials are most of a sampled token's
// host time (~3 ms for 128256 on one core of a slow machine); each is
// computed alone, so splitting them changes no bit.
const expChunk = 1 << 15

// softmax sets probs[i] = exp((logits[i] − top)/temperature) for i in ids
// (nil: every index), in parallel over GOMAXPROCS goroutines when there
// are many.
func (s *Sampler) softmax(logits []float32, probs []float64, top float64, ids []int) {
	n := len(logits)
	if ids != nil {
		n = len(ids)
	}
	one := func(lo, hi int) {
		if ids == nil {
			for i := lo; i < hi; i++ {
				probs[i] = math.Exp((float64(logits[i]) - top) / s.temperature)
			}
			return
		}
		for _, i := range ids[lo:hi] {
			probs[i] = math.Exp((float64(logits[i]) - top) / s.temperature)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), n/expChunk)
	if workers < 2 {
		one(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { one(w*n/workers, (w+1)*n/workers) })
	}
	wg.Wait()
}

// candidates returns the tokens top-k keeps, in id order: those whose
// logit is at least the k-th largest (ties at the boundary all stay, as in
// Hugging Face), or every token; those of probability 0 (underflow) are
// dropped. It fills probs for the tokens it returns.
func (s *Sampler) candidates(logits []float32, probs []float64, top float64) []int {
	cand := s.cand[:0]
	if s.topK > 0 && s.topK < len(logits) {
		kth := kthLargest(logits, s.topK)
		for i, v := range logits {
			if v >= kth {
				cand = append(cand, i)
			}
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

// kthLargest returns the k-th largest logit (1 ≤ k < len), with a min-heap
// of the k largest seen: the first k heapified, then each later logit
// against the heap's least (kept in a local: most logits of a vocabulary
// fail that one comparison).
func kthLargest(xs []float32, k int) float32 {
	h := slices.Clone(xs[:k])
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
	return least
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

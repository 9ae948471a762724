package model

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Sampler picks the next token from a position's logits: the largest at
// temperature 0 (greedy; the first on ties), otherwise a draw from the
// softmax of logits/temperature restricted by top-k then top-p, Hugging
// Face's order (TemperatureLogitsWarper, TopKLogitsWarper,
// TopPLogitsWarper), from a seeded PCG generator. Everything is computed in
// float64 from the float32 logits, so a seed gives the same tokens on
// every machine for the same logits.
type Sampler struct {
	temperature float64
	topK        int
	topP        float64
	rng         *rand.Rand

	probs []float64 // scratch, vocabulary-sized
	cand  []int
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
	best := 0
	for i, v := range logits {
		if v != v {
			return 0, fmt.Errorf("model: sample: the logit of token %d is NaN", i)
		}
		if v > logits[best] {
			best = i
		}
	}
	if s.temperature == 0 {
		return best, nil
	}
	// Softmax of logits/temperature, relative to the largest.
	if cap(s.probs) < len(logits) {
		s.probs = make([]float64, len(logits))
	}
	probs := s.probs[:len(logits)]
	top := float64(logits[best])
	if math.IsInf(top, 0) {
		return best, nil // +Inf dominates; all −Inf leaves only this choice
	}
	for i, v := range logits {
		probs[i] = math.Exp((float64(v) - top) / s.temperature)
	}
	cand := s.candidates(logits, probs)
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

// candidates returns the tokens top-k keeps, in id order: those whose
// logit is at least the k-th largest (ties at the boundary all stay, as in
// Hugging Face), or every token with a non-zero probability.
func (s *Sampler) candidates(logits []float32, probs []float64) []int {
	cand := s.cand[:0]
	if s.topK > 0 && s.topK < len(logits) {
		kth := kthLargest(logits, s.topK)
		for i, v := range logits {
			if v >= kth && probs[i] > 0 {
				cand = append(cand, i)
			}
		}
	} else {
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
// most probable (ties: lower id first). Only the candidates above a
// threshold are sorted: if those already reach topP, the nucleus is among
// them; the threshold drops until they do.
func (s *Sampler) nucleus(cand []int, probs []float64) []int {
	total := 0.0
	pmax := 0.0
	for _, i := range cand {
		total += probs[i]
		pmax = max(pmax, probs[i])
	}
	need := s.topP * total
	var top []int
	for tau := pmax * 1e-3; ; tau *= 1e-3 {
		top = top[:0]
		sum := 0.0
		for _, i := range cand {
			if probs[i] >= tau {
				top = append(top, i)
				sum += probs[i]
			}
		}
		if sum >= need || len(top) == len(cand) || tau == 0 {
			break
		}
	}
	slices.SortFunc(top, func(a, b int) int {
		if c := cmp.Compare(probs[b], probs[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	sum := 0.0
	for n, i := range top {
		sum += probs[i]
		if sum >= need {
			return top[:n+1]
		}
	}
	return top
}

// kthLargest returns the k-th largest logit (1 ≤ k < len), with a min-heap
// of the k largest seen.
func kthLargest(xs []float32, k int) float32 {
	h := make(minHeap, 0, k)
	for _, v := range xs {
		switch {
		case len(h) < k:
			heap.Push(&h, v)
		case v > h[0]:
			h[0] = v
			heap.Fix(&h, 0)
		}
	}
	return h[0]
}

type minHeap []float32

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)        { *h = append(*h, x.(float32)) }
func (h *minHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

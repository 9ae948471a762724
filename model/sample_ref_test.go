package model

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// refSampler is the sampler as first written (every softmax term on one
// core, the nucleus sorted from a coarse threshold): the spec the faster
// Sampler must draw identically to.
type refSampler struct {
	temperature float64
	topK        int
	topP        float64
	rng         *rand.Rand

	probs []float64 // scratch, vocabulary-sized
	cand  []int
}

func (s *refSampler) Sample(logits []float32) (int, error) {
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
	cand := s.refCandidates(logits, probs)
	if s.topP < 1 {
		cand = s.refNucleus(cand, probs)
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
func (s *refSampler) refCandidates(logits []float32, probs []float64) []int {
	cand := s.cand[:0]
	if s.topK > 0 && s.topK < len(logits) {
		kth := refKthLargest(logits, s.topK)
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
func (s *refSampler) refNucleus(cand []int, probs []float64) []int {
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

// TestSamplerMatchesReference: Sampler draws the reference's tokens, draw
// for draw, on vocabularies of 1 to 128256 with flat and peaked logits,
// for greedy, temperature alone, top-k, top-p and both, from one seed
// each.
func TestSamplerMatchesReference(t *testing.T) {
	for _, procs := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("GOMAXPROCS=%d", procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			matchReference(t)
		})
	}
}

// matchReference is TestSamplerMatchesReference at one GOMAXPROCS (the
// parts the scans and the softmax split into), with NaNs in two parts:
// the first is the one named.
func matchReference(t *testing.T) {
	nans := make([]float32, 128256)
	nans[100000], nans[70000] = float32(math.NaN()), float32(math.NaN())
	if _, err := mustSampler(t, GenerateOptions{Temperature: 1, TopK: 5}).Sample(nans); err == nil || !strings.Contains(err.Error(), "token 70000 is NaN") {
		t.Errorf("NaNs at 70000 and 100000: %v, want the error naming 70000", err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, v := range []int{1, 7, 1000, 40000, 128256} {
		for _, spread := range []float64{0.5, 3, 12} {
			logits := make([]float32, v)
			for i := range logits {
				logits[i] = float32(rng.NormFloat64() * spread)
			}
			for ci, o := range []GenerateOptions{
				{}, {Temperature: 0.8}, {Temperature: 1.3, TopK: 40}, {Temperature: 0.7, TopP: 0.9},
				{Temperature: 1, TopK: 50, TopP: 0.95}, {Temperature: 0.6, TopK: v + 5, TopP: 0.5}, {Temperature: 2, TopP: 0.999},
			} {
				o.Seed = uint64(ci + 1)
				s := mustSampler(t, o)
				p := o.TopP
				if p == 0 {
					p = 1
				}
				ref := &refSampler{temperature: o.Temperature, topK: o.TopK, topP: p, rng: rand.New(rand.NewPCG(o.Seed, seedStream))}
				draws := 6
				if v > 50000 {
					draws = 2
				}
				for d := range draws {
					got, err := s.Sample(logits)
					want, rerr := ref.Sample(logits)
					if err != nil || rerr != nil || got != want {
						t.Fatalf("vocabulary %d, spread %g, %+v, draw %d: %d (%v), the reference draws %d (%v)", v, spread, o, d, got, err, want, rerr)
					}
				}
			}
		}
	}
}

// BenchmarkSampler: one draw from 128256 logits (Llama 3's vocabulary),
// and the reference's.
func BenchmarkSampler(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 128256)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	for _, c := range []struct {
		name string
		o    GenerateOptions
	}{
		{"temperature", GenerateOptions{Temperature: 0.8}},
		{"top-k", GenerateOptions{Temperature: 0.8, TopK: 50}},
		{"top-p", GenerateOptions{Temperature: 0.8, TopP: 0.9}},
		{"top-k+top-p", GenerateOptions{Temperature: 0.8, TopK: 50, TopP: 0.9}},
	} {
		s, err := NewSampler(c.o)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Sample(logits); err != nil {
					b.Fatal(err)
				}
			}
		})
		p := c.o.TopP
		if p == 0 {
			p = 1
		}
		ref := &refSampler{temperature: c.o.Temperature, topK: c.o.TopK, topP: p, rng: rand.New(rand.NewPCG(0, seedStream))}
		b.Run(c.name+"/reference", func(b *testing.B) {
			for b.Loop() {
				if _, err := ref.Sample(logits); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// refKthLargest returns the k-th largest logit (1 ≤ k < len), with a min-heap
// of the k largest seen.
func refKthLargest(xs []float32, k int) float32 {
	h := make(refMinHeap, 0, k)
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

type refMinHeap []float32

func (h refMinHeap) Len() int           { return len(h) }
func (h refMinHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h refMinHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *refMinHeap) Push(x any)        { *h = append(*h, x.(float32)) }
func (h *refMinHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}

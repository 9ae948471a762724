package model

import (
	"context"
	"fmt"
	"time"

	"github.com/loomgraph/loom/tensor"
)

// GenerateOptions control Generate.
type GenerateOptions struct {
	// MaxTokens is how many tokens to generate at most (≥ 0).
	MaxTokens int
	// Temperature 0 is greedy decoding; above 0 the next token is drawn
	// from softmax(logits/Temperature), limited by TopK and TopP.
	Temperature float64
	// TopK keeps the K most likely tokens (0: all).
	TopK int
	// TopP keeps the most likely tokens whose probabilities sum to at
	// least P (0 or 1: all).
	TopP float64
	// Seed seeds the sampler's PCG generator: one seed, one sequence.
	Seed uint64
	// StopTokens end generation when generated (the stop token is the last
	// of Generation.Tokens). nil means the tokenizer's stop tokens (EOS and
	// the like) when the model has a tokenizer; an empty non-nil slice
	// means none.
	StopTokens []int
	// OnToken, when set, is called with each token as it is generated
	// (stop tokens included); returning false ends generation after it.
	OnToken func(id int) bool
}

// Stop reasons.
const (
	StopMaxTokens   = "max tokens"
	StopToken       = "stop token"
	StopCallback    = "callback"
	StopContextFull = "context full"
)

// Generation is what Generate produced and how long it took.
type Generation struct {
	Tokens     []int  // the generated tokens, after the prompt
	StopReason string // one of the Stop* constants

	PromptTokens int
	// Compile is the time spent compiling and preparing the programs
	// (nothing once a model has run this prompt length before).
	Compile time.Duration
	// Prefill is the time of the prompt's run, which also gives the first
	// token; Decode the time of the DecodeSteps runs after it, each giving
	// one more token (sampling included in both).
	Prefill     time.Duration
	Decode      time.Duration
	DecodeSteps int
}

// PromptTokensPerSecond is the prefill rate.
func (g *Generation) PromptTokensPerSecond() float64 {
	return rate(g.PromptTokens, g.Prefill)
}

// DecodeTokensPerSecond is the rate of the decode steps.
func (g *Generation) DecodeTokensPerSecond() float64 {
	return rate(g.DecodeSteps, g.Decode)
}

func rate(n int, d time.Duration) float64 {
	if n == 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// Generate continues prompt (token ids, at least one) by up to
// opts.MaxTokens tokens: one prefill of the prompt, then one decode step
// per further token, stopping early at a stop token, when OnToken returns
// false, or when the sequence fills MaxSeqLen positions. A prompt that
// does not fit MaxSeqLen is an error.
func (m *Model) Generate(ctx context.Context, prompt []int, opts GenerateOptions) (*Generation, error) {
	if opts.MaxTokens < 0 {
		return nil, fmt.Errorf("model: generate: MaxTokens %d, want ≥ 0", opts.MaxTokens)
	}
	sampler, err := NewSampler(opts)
	if err != nil {
		return nil, err
	}
	stops := opts.StopTokens
	if stops == nil && m.tok != nil {
		stops = m.tok.StopTokens()
	}
	isStop := map[int]bool{}
	for _, id := range stops {
		isStop[id] = true
	}
	gen := &Generation{PromptTokens: len(prompt), StopReason: StopMaxTokens}
	if opts.MaxTokens == 0 {
		return gen, nil
	}
	s, err := m.NewSession(1)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	// Compile both programs before the clock starts.
	if len(prompt) > 0 && len(prompt) <= m.maxSeq {
		if _, took, err := m.prefillProgram(ctx, prefillKey{batch: 1, tokens: len(prompt)}); err != nil {
			return nil, err
		} else {
			gen.Compile += took
		}
		// The decode steps hold len(prompt)+1 … len(prompt)+MaxTokens−1
		// positions: every attention window among them.
		last := min(len(prompt)+opts.MaxTokens-1, m.maxSeq)
		for n := len(prompt) + 1; n <= last; n = m.decodeWindow(n) + 1 {
			_, took, err := m.decodeProgram(ctx, decodeKey{1, m.decodeWindow(n)})
			if err != nil {
				return nil, err
			}
			gen.Compile += took
			if m.decodeWindow(n) == m.maxSeq {
				break
			}
		}
	}
	start := time.Now()
	logits, err := s.Prefill(ctx, [][]int{prompt})
	if err != nil {
		return nil, err
	}
	id, err := sample(sampler, logits)
	gen.Prefill = time.Since(start)
	if err != nil {
		return nil, err
	}
	start = time.Now()
	defer func() { gen.Decode = time.Since(start) }()
	if sampler.temperature == 0 && m.pipeline {
		return gen, m.greedyPipelined(ctx, s, id, opts, isStop, gen)
	}
	for {
		gen.Tokens = append(gen.Tokens, id)
		switch {
		case opts.OnToken != nil && !opts.OnToken(id):
			gen.StopReason = StopCallback
			return gen, nil
		case isStop[id]:
			gen.StopReason = StopToken
			return gen, nil
		case len(gen.Tokens) == opts.MaxTokens:
			return gen, nil
		case s.Pos() == m.maxSeq:
			gen.StopReason = StopContextFull
			return gen, nil
		}
		if sampler.temperature == 0 {
			// Greedy: the executor picks the token (Session.decodeGreedy).
			next, err := s.decodeGreedy(ctx, []int{id})
			if err != nil {
				return nil, err
			}
			gen.DecodeSteps++
			id = next[0]
			continue
		}
		if logits, err = s.Decode(ctx, []int{id}); err != nil {
			return nil, err
		}
		gen.DecodeSteps++
		if id, err = sample(sampler, logits); err != nil {
			return nil, err
		}
	}
}

// sample picks from the first row of logits [1, V].
func sample(s *Sampler, logits *tensor.Tensor) (int, error) {
	v, err := tensor.Values[float32](logits)
	if err != nil {
		return 0, err
	}
	return s.Sample(v)
}

// greedyPipelined is Generate's greedy loop with each step queued before
// the previous step's token is read (Session.startGreedy): the token and
// position go from step to step on the executor, and the host reads each
// token, runs the callback and checks the stops while the device computes
// the next one. It yields the tokens of the step-by-step loop, stopping
// at the same token for the same reason; where a stop token or the
// callback ends it, the step queued after was computed for nothing.
func (m *Model) greedyPipelined(ctx context.Context, s *Session, id int, opts GenerateOptions, isStop map[int]bool, gen *Generation) error {
	var cur, ahead *greedyStep
	defer func() {
		for _, g := range []*greedyStep{cur, ahead} {
			if g != nil {
				g.free()
			}
		}
	}()
	for {
		gen.Tokens = append(gen.Tokens, id)
		switch {
		case opts.OnToken != nil && !opts.OnToken(id):
			gen.StopReason = StopCallback
			return nil
		case isStop[id]:
			gen.StopReason = StopToken
			return nil
		case len(gen.Tokens) == opts.MaxTokens:
			return nil
		case s.Pos()-queued(ahead) == m.maxSeq: // the positions before the step ahead
			gen.StopReason = StopContextFull
			return nil
		}
		if ahead != nil {
			cur, ahead = ahead, nil
		} else {
			var err error
			if cur, err = s.startGreedy(ctx, []int{id}, nil); err != nil {
				return err
			}
		}
		// Queue the step after cur unless cur's token is the last there
		// can be (MaxTokens, or a full context after it).
		var aheadErr error
		if len(gen.Tokens)+1 < opts.MaxTokens && s.Pos() < m.maxSeq {
			ahead, aheadErr = s.startGreedy(ctx, nil, cur)
		}
		// cur's error first: an executor that runs a step to its end at
		// Start (the CPU) fails the step ahead on the bad id a NaN token
		// becomes.
		next, err := cur.tokens()
		if err != nil {
			return err
		}
		if aheadErr != nil {
			return aheadErr
		}
		gen.DecodeSteps++
		id = next[0]
		cur.free()
		cur = nil
	}
}

// queued is 1 for a step in flight, 0 for none.
func queued(g *greedyStep) int {
	if g == nil {
		return 0
	}
	return 1
}

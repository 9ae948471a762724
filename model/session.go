package model

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// Session is a batch of sequences being generated and their KV cache,
// which lives on the model's executor between runs: each run takes the
// cache as input and returns the updated cache, which the session keeps
// and frees the old one. Every sequence of a session has the same length
// (prompts of one length; one token each per Decode). A Session is not
// safe for concurrent use; sessions of one model may run concurrently.
type Session struct {
	m     *Model
	batch int
	pos   int                   // positions filled in every sequence
	cache map[string]exec.Value // inCache names → values; empty before Prefill
	ins   map[*graph.Program]*stepInputs
	// pairs are the token and position buffers of a pipelined greedy loop
	// (chainPairs): step k writes its outputs into pairs[k%2]. greedy
	// counts the steps started.
	pairs  *[2]chainPair
	greedy int
	// Compile is the time spent compiling and preparing programs for this
	// session's runs (first use of a prompt length or batch size).
	Compile time.Duration
}

// NewSession starts a session of batch sequences.
func (m *Model) NewSession(batch int) (*Session, error) {
	if batch < 1 {
		return nil, fmt.Errorf("model: session of %d sequences, want ≥ 1", batch)
	}
	return &Session{m: m, batch: batch, cache: map[string]exec.Value{}}, nil
}

// Pos is the number of positions each sequence holds: the prompt's tokens
// and every token decoded since.
func (s *Session) Pos() int { return s.pos }

// CacheBytes is the size of the KV cache on the executor (0 before
// Prefill).
func (s *Session) CacheBytes() int64 {
	if len(s.cache) == 0 {
		return 0
	}
	c := s.m.lc
	return int64(2*c.Layers*s.batch*c.KVHeads*s.m.maxSeq*c.HeadDim) * int64(s.m.dt.Size())
}

// Close frees the KV cache. The session can start again with Prefill.
func (s *Session) Close() {
	// In the reverse of the layers' order, not the map's (random) one, so
	// that what the next session's runs get from the executor's caching
	// allocator (last in, first out) does not depend on map order: the
	// next session's cache then has this one's addresses, which its decode
	// steps' recordings were made with (with the slot sets of the GPU's
	// allocator and the kept token buffers, chainPairs).
	for _, kv := range slices.Backward(s.m.kvNames) {
		if v, ok := s.cache[kv.in]; ok {
			freeValue(v)
			delete(s.cache, kv.in)
		}
	}
	for k, v := range s.cache {
		freeValue(v)
		delete(s.cache, k)
	}
	s.pos = 0
	s.greedy = 0
	if s.pairs != nil {
		s.m.putPairs(s.batch, s.pairs)
		s.pairs = nil
	}
}

// Prefill runs the prompts (one per sequence, all of one length T ≥ 1,
// T ≤ MaxSeqLen) from position 0, replacing whatever the session held,
// and returns the logits of each prompt's last position: f32 [B, Vocab].
func (s *Session) Prefill(ctx context.Context, prompts [][]int) (*tensor.Tensor, error) {
	return s.prefill(ctx, prompts, false)
}

// PrefillAll is Prefill returning the logits of every position:
// f32 [B, T, Vocab].
func (s *Session) PrefillAll(ctx context.Context, prompts [][]int) (*tensor.Tensor, error) {
	return s.prefill(ctx, prompts, true)
}

func (s *Session) prefill(ctx context.Context, prompts [][]int, all bool) (*tensor.Tensor, error) {
	op := "prefill"
	if len(prompts) != s.batch {
		return nil, fmt.Errorf("model: %s: %d prompts for a session of %d sequences", op, len(prompts), s.batch)
	}
	t := len(prompts[0])
	flat := make([]uint32, 0, s.batch*t)
	for i, p := range prompts {
		if len(p) != t {
			return nil, fmt.Errorf("model: %s: prompt %d has %d tokens, prompt 0 has %d: the prompts of a batch must have one length", op, i, len(p), t)
		}
		for j, id := range p {
			if err := s.m.checkID(op, id); err != nil {
				return nil, fmt.Errorf("%w (prompt %d, position %d)", err, i, j)
			}
			flat = append(flat, uint32(id))
		}
	}
	switch {
	case t == 0:
		return nil, fmt.Errorf("model: %s: empty prompt", op)
	case t > s.m.maxSeq:
		return nil, fmt.Errorf("model: %s: a prompt of %d tokens does not fit the context of %d positions (Options.MaxSeqLen)", op, t, s.m.maxSeq)
	}
	prog, took, err := s.m.prefillProgram(ctx, prefillKey{batch: s.batch, tokens: t, all: all})
	s.Compile += took
	if err != nil {
		return nil, err
	}
	ids, _ := tensor.New(flat, s.batch*t)
	out, err := s.run(ctx, prog, map[string]exec.Value{inIDs: ids}, outLogits)
	if err != nil {
		return nil, err
	}
	s.pos = t
	return out[outLogits], nil
}

// Decode appends one token to each sequence (ids[b] to sequence b) and
// returns the logits of the new position: f32 [B, Vocab]. The session must
// have been prefilled and hold fewer than MaxSeqLen positions. On error the
// session is unchanged.
func (s *Session) Decode(ctx context.Context, ids []int) (*tensor.Tensor, error) {
	out, err := s.decode(ctx, ids, outLogits)
	if err != nil {
		return nil, err
	}
	return out[outLogits], nil
}

// decodeGreedy is Decode that returns each sequence's greedy token (the
// first id of the largest logit), picked on the executor: only the ids
// come to the host. A NaN logit is an error, as in Sampler.
func (s *Session) decodeGreedy(ctx context.Context, ids []int) ([]int, error) {
	out, err := s.decode(ctx, ids, outNext)
	if err != nil {
		return nil, err
	}
	return s.m.nextTokens(out[outNext])
}

// nextTokens reads a decode program's outNext: each sequence's greedy
// token, or Vocab plus the token whose logit is NaN, an error as in
// Sampler.
func (m *Model) nextTokens(t *tensor.Tensor) ([]int, error) {
	nx, err := tensor.Values[uint32](t)
	if err != nil {
		return nil, err
	}
	next := make([]int, len(nx))
	for i, a := range nx {
		if v := uint32(m.cfg.Vocab); a >= v {
			return nil, fmt.Errorf("model: sample: the logit of token %d is NaN", a-v)
		}
		next[i] = int(a)
	}
	return next, nil
}

// decode runs a decode step and returns the outputs named in want on the
// host.
func (s *Session) decode(ctx context.Context, ids []int, want ...string) (map[string]*tensor.Tensor, error) {
	if err := s.checkStep(len(ids)); err != nil {
		return nil, err
	}
	extra, err := s.hostStep(ids)
	if err != nil {
		return nil, err
	}
	prog, err := s.decodeProgram(ctx)
	if err != nil {
		return nil, err
	}
	out, err := s.run(exec.WithReplay(ctx, s.m.replay), prog, extra, want...)
	if err != nil {
		return nil, err
	}
	s.pos++
	return out, nil
}

// decodeOp names decode steps in errors.
const decodeOp = "decode"

// checkStep checks that the session can take a decode step of n tokens,
// one a sequence.
func (s *Session) checkStep(n int) error {
	switch {
	case len(s.cache) == 0:
		return fmt.Errorf("model: %s: the session has no prompt yet (call Prefill first)", decodeOp)
	case n != s.batch:
		return fmt.Errorf("model: %s: %d tokens for a session of %d sequences", decodeOp, n, s.batch)
	case s.pos >= s.m.maxSeq:
		return fmt.Errorf("model: %s: the context is full: every sequence holds %d positions (Options.MaxSeqLen)", decodeOp, s.pos)
	}
	return nil
}

// hostStep checks ids and returns them with the session's position as a
// decode step's inputs.
func (s *Session) hostStep(ids []int) (map[string]exec.Value, error) {
	idv := make([]uint32, s.batch)
	posv := make([]uint32, s.batch)
	for i, id := range ids {
		if err := s.m.checkID(decodeOp, id); err != nil {
			return nil, fmt.Errorf("%w (sequence %d)", err, i)
		}
		idv[i], posv[i] = uint32(id), uint32(s.pos)
	}
	idt, _ := tensor.New(idv, s.batch)
	post, _ := tensor.New(posv, s.batch)
	return map[string]exec.Value{inIDs: idt, inPos: post}, nil
}

// decodeProgram returns the decode program of the session's next position's
// window, compiled on first use.
func (s *Session) decodeProgram(ctx context.Context) (*graph.Program, error) {
	prog, took, err := s.m.decodeProgram(ctx, decodeKey{s.batch, s.m.decodeWindow(s.pos + 1)})
	s.Compile += took
	return prog, err
}

// run executes prog with the model's resident inputs, the session's cache
// and extra, then swaps in the new cache and returns the outputs named in
// want on the host. The other outputs are freed in the reverse of the
// order the runner allocated them, so that the next step's run gets the
// same memory and can be replayed (exec.WithReplay).
func (s *Session) run(ctx context.Context, prog *graph.Program, extra map[string]exec.Value, want ...string) (map[string]*tensor.Tensor, error) {
	m := s.m
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	in, err := s.inputs(prog, extra)
	if err != nil {
		return nil, err
	}
	if m.comm != nil {
		ctx = exec.WithComms(ctx, m.comm)
	}
	out, err := prog.RunValues(ctx, m.e, in, true)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	host := map[string]*tensor.Tensor{}
	for _, name := range want {
		if host[name], err = hostValue(out[name]); err != nil {
			break
		}
	}
	for _, b := range slices.Backward(prog.Plan().Buffers) {
		if b.Kind == plan.BufOutput && (!m.cacheOut[b.Name] || err != nil) {
			freeValue(out[b.Name])
		}
	}
	if err != nil {
		return nil, err
	}
	s.swapCache(out)
	return host, nil
}

// swapCache makes a run's cache outputs the session's cache, freeing the
// values they replace (nothing where the run wrote in their memory: a
// donated cache reads as freed).
func (s *Session) swapCache(out map[string]exec.Value) {
	for _, kv := range s.m.kvNames {
		if old, ok := s.cache[kv.in]; ok {
			freeValue(old)
		}
		s.cache[kv.in] = out[kv.out]
	}
}

// checkOpen fails once the model is closed.
func (m *Model) checkOpen() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("model: the model is closed")
	}
	return nil
}

// stepInputs is a program's input map in a session: the model's resident
// values entered once, the per-run values (extra) and the cache rewritten
// on every run. A decode step has hundreds of weight inputs and runs
// hundreds of times a second: building the map afresh each time was a
// measurable part of the host's time per token.
type stepInputs struct {
	in    map[string]exec.Value
	extra []string // names taken from the run's extra values
	cache []string // names taken from the session's cache, donated
}

// inputs returns prog's inputs for a run: extra's values first, then the
// model's resident values, then the session's cache, given to the run
// (exec.Donate): the decode step writes its new position in place and
// returns the same memory as the next cache, instead of copying every
// layer's cache.
func (s *Session) inputs(prog *graph.Program, extra map[string]exec.Value) (map[string]exec.Value, error) {
	si := s.ins[prog]
	if si == nil {
		si = &stepInputs{in: map[string]exec.Value{}}
		for _, b := range prog.Plan().Inputs {
			if _, ok := extra[b.Name]; ok {
				si.extra = append(si.extra, b.Name)
			} else if v, ok := s.m.values[b.Name]; ok {
				si.in[b.Name] = v
			} else {
				si.cache = append(si.cache, b.Name)
			}
		}
		if s.ins == nil {
			s.ins = map[*graph.Program]*stepInputs{}
		}
		s.ins[prog] = si
	}
	for _, name := range si.extra {
		v, ok := extra[name]
		if !ok {
			return nil, fmt.Errorf("model: internal error: no value for program input %q", name)
		}
		si.in[name] = v
	}
	for _, name := range si.cache {
		v, ok := s.cache[name]
		if !ok {
			return nil, fmt.Errorf("model: internal error: no value for program input %q", name)
		}
		si.in[name] = exec.Donate(v)
	}
	return si.in, nil
}

func (m *Model) checkID(op string, id int) error {
	if id < 0 || id >= m.cfg.Vocab {
		return fmt.Errorf("model: %s: token id %d is outside the vocabulary [0, %d)", op, id, m.cfg.Vocab)
	}
	return nil
}

// prefillProgram returns the compiled prefill program for k, compiling and
// preparing it on first use; took is the time that took (0 when cached).
func (m *Model) prefillProgram(ctx context.Context, k prefillKey) (*graph.Program, time.Duration, error) {
	return m.program(ctx, func() (*graph.Program, bool) { p, ok := m.prefills[k]; return p, ok },
		func() (*graph.Program, error) { return m.buildPrefill(k) },
		func(p *graph.Program) { m.prefills[k] = p })
}

// decodeProgram is prefillProgram for the decode program of batch b.
func (m *Model) decodeProgram(ctx context.Context, k decodeKey) (*graph.Program, time.Duration, error) {
	return m.program(ctx, func() (*graph.Program, bool) { p, ok := m.decodes[k]; return p, ok },
		func() (*graph.Program, error) { return m.buildDecode(k) },
		func(p *graph.Program) { m.decodes[k] = p })
}

// program compiles under the model's lock, so that two sessions needing
// one program compile it once.
func (m *Model) program(ctx context.Context, get func() (*graph.Program, bool), build func() (*graph.Program, error), put func(*graph.Program)) (*graph.Program, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, 0, errors.New("model: the model is closed")
	}
	if p, ok := get(); ok {
		return p, 0, nil
	}
	start := time.Now()
	p, err := build()
	if err != nil {
		return nil, 0, fmt.Errorf("model: compile: %w", err)
	}
	if err := p.Prepare(ctx, m.e); err != nil {
		return nil, 0, fmt.Errorf("model: prepare: %w", err)
	}
	put(p)
	return p, time.Since(start), nil
}

// Programs returns the compiled programs the model holds, for dumps:
// "prefill BxT" (with "/all" for all-position logits) and "decode B/window
// W" (attention over the cache's first W positions).
func (m *Model) Programs() map[string]*graph.Program {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]*graph.Program{}
	for k, p := range m.prefills {
		name := fmt.Sprintf("prefill %dx%d", k.batch, k.tokens)
		if k.all {
			name += "/all"
		}
		out[name] = p
	}
	for k, p := range m.decodes {
		out[fmt.Sprintf("decode %d/window %d", k.batch, k.window)] = p
	}
	return out
}

// greedyStep is a greedy decode step in flight (exec.Start): its token and
// the position after it stay on the executor, where the next step reads
// them.
type greedyStep struct {
	s    *Session
	run  *exec.Pending
	next exec.Value // outNext
	pos  exec.Value // outNextPos
	pair int        // the session's pair its outputs are in (chainPairs)
}

// chainPair is a token buffer and a position buffer, u32 [B] each, on the
// executor.
type chainPair struct{ next, pos exec.Value }

// Why a greedy loop writes its tokens into kept buffers (chainPairs): a
// recorded decode step replays only with every buffer at the address it
// was recorded with (exec.WithReplay). The token and position a step hands
// to the next are outputs; left to the allocator, the two alternating
// pairs of them (two steps in flight) came from the 256-byte class's free
// list in another order each Generate, and with the steps' temporaries
// (now slot sets on the GPU) that made three new decode bindings a
// Generate, each run step by step before it was recorded again. So step k
// of a session writes into pair k % 2 (exec.WithOutputs), the pairs go
// back to the model when the session closes, and the next Generate's steps
// take them again: its steps after the first (whose token and position
// come from the host) replay recordings of the Generate before.

// chainPairs returns the pairs of s, taking the model's kept ones on first
// use (empty pairs, filled by the first two steps' outputs, if another
// session holds them or none are kept yet). Only on an exec.Donor, which
// can write an output into a given buffer.
func (s *Session) chainPairs() *[2]chainPair {
	if s.pairs != nil {
		return s.pairs
	}
	if _, ok := s.m.e.(exec.Donor); !ok {
		return nil
	}
	m := s.m
	m.mu.Lock()
	s.pairs = m.chain[s.batch]
	delete(m.chain, s.batch)
	m.mu.Unlock()
	if s.pairs == nil {
		s.pairs = &[2]chainPair{}
	}
	return s.pairs
}

// hostIntoPair writes a first step's token and position (hostStep's host
// tensors) into the pair the step after it writes, where the executor can
// (an exec.HostWriter) and the pair is there: the step then reads the
// buffers the loop's later steps of its parity read, and its binding is
// theirs (with the kept pairs, from the second Generate on it replays
// their recording). Otherwise the host tensors are the inputs, uploaded
// by the run.
func (s *Session) hostIntoPair(extra map[string]exec.Value) (map[string]exec.Value, error) {
	pairs := s.chainPairs()
	o := (s.greedy + 1) % 2
	hw, ok := s.m.e.(exec.HostWriter)
	if !ok || pairs == nil || pairs[o].next == nil {
		return extra, nil
	}
	p := pairs[o]
	if err := hw.WriteHost(p.next, extra[inIDs].(*tensor.Tensor)); err != nil {
		return nil, fmt.Errorf("model: decode: %w", err)
	}
	if err := hw.WriteHost(p.pos, extra[inPos].(*tensor.Tensor)); err != nil {
		return nil, fmt.Errorf("model: decode: %w", err)
	}
	return map[string]exec.Value{inIDs: p.next, inPos: p.pos}, nil
}

// putPairs keeps a session's pairs for the next session of batch, or frees
// them if the model has some kept already or is closed.
func (m *Model) putPairs(batch int, pairs *[2]chainPair) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.chain[batch] != nil {
		freePairs(pairs)
		return
	}
	if m.chain == nil {
		m.chain = map[int]*[2]chainPair{}
	}
	m.chain[batch] = pairs
}

// freePairs frees the buffers of pairs.
func freePairs(pairs *[2]chainPair) {
	for i := range pairs {
		if pairs[i].next != nil {
			freeValue(pairs[i].next)
			freeValue(pairs[i].pos)
		}
		pairs[i] = chainPair{}
	}
}

// startGreedy queues a greedy decode step and returns without waiting for
// it: of ids at the session's position (prev nil), or chained to prev, a
// step queued before it, whose token and position it reads on the
// executor. The session's caches become the step's outputs at once: the
// next step may be queued behind it.
func (s *Session) startGreedy(ctx context.Context, ids []int, prev *greedyStep) (*greedyStep, error) {
	m := s.m
	n := len(ids)
	if prev != nil {
		n = s.batch // the previous step's tokens, one a sequence
	}
	if err := s.checkStep(n); err != nil {
		return nil, err
	}
	if err := m.checkOpen(); err != nil {
		return nil, err
	}
	var extra map[string]exec.Value
	if prev != nil {
		extra = map[string]exec.Value{inIDs: prev.next, inPos: prev.pos}
	} else {
		var err error
		if extra, err = s.hostStep(ids); err != nil {
			return nil, err
		}
		if extra, err = s.hostIntoPair(extra); err != nil {
			return nil, err
		}
	}
	prog, err := s.decodeProgram(ctx)
	if err != nil {
		return nil, err
	}
	in, err := s.inputs(prog, extra)
	if err != nil {
		return nil, err
	}
	ctx = exec.WithReplay(ctx, m.replay)
	if m.comm != nil {
		ctx = exec.WithComms(ctx, m.comm)
	}
	k := s.greedy % 2
	pairs := s.chainPairs()
	var given chainPair
	if pairs != nil && pairs[k].next != nil {
		given, pairs[k] = pairs[k], chainPair{}
		ctx = exec.WithOutputs(ctx, map[string]exec.Value{outNext: given.next, outNextPos: given.pos})
	}
	run, err := prog.Start(ctx, m.e, in)
	if err != nil {
		if given.next != nil {
			pairs[k] = given // a failed run leaves them as they were
		}
		return nil, fmt.Errorf("model: %w", err)
	}
	s.greedy++
	out := run.Outputs()
	// The outputs no step reads are freed at once, in the reverse of the
	// order the runner allocated them (the executor orders their reuse
	// after this step's work); the token and position when the step after
	// has read them (free).
	for _, b := range slices.Backward(prog.Plan().Buffers) {
		if b.Kind == plan.BufOutput && !m.cacheOut[b.Name] && b.Name != outNext && b.Name != outNextPos {
			freeValue(out[b.Name])
		}
	}
	s.swapCache(out)
	s.pos++
	return &greedyStep{s: s, run: run, next: out[outNext], pos: out[outNextPos], pair: k}, nil
}

// tokens waits for the step and returns each sequence's greedy token; a
// NaN logit is an error, as in Sampler.
func (g *greedyStep) tokens() ([]int, error) {
	t, err := g.run.Host(outNext)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return g.s.m.nextTokens(t)
}

// free waits for the step and frees its token and position (the step
// after it, if any, was queued before: the executor orders the memory's
// reuse after it).
func (g *greedyStep) free() {
	g.run.Wait()
	// The buffers go back to the session's pair (chainPairs) for the step
	// after the next, which writes into them.
	if p := g.s.pairs; p != nil && p[g.pair].next == nil {
		p[g.pair] = chainPair{g.next, g.pos}
		return
	}
	freeValue(g.pos)
	freeValue(g.next)
}

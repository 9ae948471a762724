package model

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/exec"
)

// checkPipeline checks that Generate's pipelined greedy loop (the default)
// yields the tokens and the stop reason of the step-by-step loop
// (Options.NoPipeline) on executor e (nil: the CPU), for every way a
// generation ends: MaxTokens (1, 2 and 24), a stop token, the callback,
// and a full context.
func checkPipeline(t *testing.T, e exec.Executor) {
	dir, _, _ := tiny(t)
	prompt := randomIDs(70, 8, 1024)
	piped := load(t, dir, Options{Executor: e})
	plain := load(t, dir, Options{Executor: e, NoPipeline: true})
	if !piped.pipeline || plain.pipeline {
		t.Fatalf("pipeline settings: %v and %v (LOOM_PIPELINE=0 in the environment?)", piped.pipeline, plain.pipeline)
	}
	full, err := plain.Generate(ctx, prompt, GenerateOptions{MaxTokens: 24})
	if err != nil {
		t.Fatal(err)
	}
	stop := full.Tokens[6]
	var seen []int
	for _, c := range []struct {
		name string
		m    func(*Model) *Model
		opts GenerateOptions
	}{
		{"24 tokens", nil, GenerateOptions{MaxTokens: 24}},
		{"1 token", nil, GenerateOptions{MaxTokens: 1}},
		{"2 tokens", nil, GenerateOptions{MaxTokens: 2}},
		{"stop token", nil, GenerateOptions{MaxTokens: 24, StopTokens: []int{stop}}},
		{"callback", nil, GenerateOptions{MaxTokens: 24, OnToken: func(id int) bool { seen = append(seen, id); return len(seen) < 4 }}},
		{"context of 12", func(m *Model) *Model {
			return load(t, dir, Options{Executor: e, MaxSeqLen: 12, NoPipeline: !m.pipeline})
		}, GenerateOptions{MaxTokens: 24}},
	} {
		var got [2]*Generation
		for i, m := range []*Model{plain, piped} {
			if c.m != nil {
				m = c.m(m)
			}
			seen = nil
			g, err := m.Generate(ctx, prompt, c.opts)
			if err != nil {
				t.Fatalf("%s (pipelined %v): %v", c.name, i == 1, err)
			}
			got[i] = g
		}
		if !slices.Equal(got[0].Tokens, got[1].Tokens) || got[0].StopReason != got[1].StopReason || got[0].DecodeSteps != got[1].DecodeSteps {
			t.Errorf("%s: step by step %v (%s, %d steps), pipelined %v (%s, %d steps)", c.name,
				got[0].Tokens, got[0].StopReason, got[0].DecodeSteps, got[1].Tokens, got[1].StopReason, got[1].DecodeSteps)
		}
		if n := min(len(full.Tokens), len(got[1].Tokens)); !slices.Equal(got[1].Tokens[:n], full.Tokens[:n]) {
			t.Errorf("%s: %v is not a prefix of %v", c.name, got[1].Tokens, full.Tokens)
		}
		t.Logf("%s: %d tokens, %s", c.name, len(got[1].Tokens), got[1].StopReason)
	}
}

func TestPipelinedGreedy(t *testing.T) { checkPipeline(t, nil) }

// checkPipelineNaN: a pipelined step whose token comes from NaN logits
// reports the NaN, not the bad id the step queued after it reads.
func checkPipelineNaN(t *testing.T, e exec.Executor) {
	dir := nanModel(t)
	m := load(t, dir, Options{Executor: e})
	s, err := m.NewSession(1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Prefill(ctx, [][]int{{1, 2, 3, 4, 5}}); err != nil {
		t.Fatal(err)
	}
	cur, err := s.startGreedy(ctx, []int{9}, nil)
	if err != nil {
		t.Fatal(err)
	}
	next, err := cur.tokens()
	cur.free()
	if err != nil || next[0] < 0 || next[0] >= m.cfg.Vocab {
		t.Fatalf("a finite step: %v, %v", next, err)
	}
	cur, err = s.startGreedy(ctx, []int{7}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ahead, aheadErr := s.startGreedy(ctx, nil, cur)
	next, err = cur.tokens()
	cur.free()
	if err == nil || !strings.Contains(err.Error(), "the logit of token 0 is NaN") {
		t.Fatalf("a step with NaN logits gave %v, %v; want the NaN error naming token 0", next, err)
	}
	// The step after read the NaN token (Vocab + 0): its bad id is an
	// error at its start (the CPU) or its wait (the GPU).
	if aheadErr == nil {
		aheadErr = ahead.run.Wait()
		ahead.free()
	}
	if aheadErr == nil || !strings.Contains(aheadErr.Error(), "1024") {
		t.Errorf("the step after the NaN token: %v; want an error about id 1024", aheadErr)
	}
}

func TestPipelinedGreedyNaN(t *testing.T) { checkPipelineNaN(t, nil) }

// nanModel writes the tiny model with token 7's embedding NaN.
var nan = math.NaN()

func nanModel(t *testing.T) string {
	_, w, _ := tiny(t)
	cfg := TinyConfig()
	var nw []NamedTensor
	for _, nt := range w {
		if nt.Name == "model.embed_tokens.weight" {
			c := nt.T.Clone()
			for j := range cfg.Hidden {
				c.SetFloat64(7*cfg.Hidden+j, nan)
			}
			nt = NamedTensor{nt.Name, c}
		}
		nw = append(nw, nt)
	}
	dir := filepath.Join(t.TempDir(), "nan")
	if err := WriteHF(dir, cfg, nw); err != nil {
		t.Fatal(err)
	}
	return dir
}

package model

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/rocm"
)

// TestGPUTensorParallel: the 1B-shaped model (bf16, random weights) over
// 1, 2, 4 and 8 GPUs of this machine (as many as it has), one executor
// and one NCCL/RCCL rank per GPU (rocm.NewGroup): the same 32 greedy
// tokens as on one GPU, and the decode rate at batch 8 (64 steps after a
// 128-token prompt per sequence) against one GPU. Needs LOOM_LLAMA_TP=1
// and at least two GPUs.
func TestGPUTensorParallel(t *testing.T) {
	if os.Getenv("LOOM_LLAMA_TP") != "1" {
		t.Skip("set LOOM_LLAMA_TP=1 to measure the tensor-parallel 1B-shaped model")
	}
	n, err := rocm.DeviceCount()
	if err != nil || n < 2 {
		t.Skipf("needs at least two GPUs (found %d: %v)", n, err)
	}
	cfg := Llama1BConfig()
	w, err := RandomWeights(cfg, 1, dtype.BF16)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "llama1b")
	if err := WriteHF(dir, cfg, w); err != nil {
		t.Fatal(err)
	}
	w = nil
	prompt := randomIDs(80, 128, cfg.Vocab)
	var base []int
	var baseRate float64
	for _, size := range []int{1, 2, 4, 8} {
		if size > n {
			break
		}
		tokens, rate, stats, err := runTP(dir, size, prompt)
		if err != nil {
			t.Fatalf("%d GPUs: %v", size, err)
		}
		if size == 1 {
			base, baseRate = tokens, rate
		} else if !slices.Equal(tokens, base) {
			t.Errorf("%d GPUs: greedy tokens %v, one GPU's %v", size, tokens, base)
		}
		t.Logf("%d GPUs: batch-8 decode %.0f tokens/s, %.2f× one GPU's (rank 0's replays: %+v)", size, rate, rate/baseRate, stats)
	}
}

// runTP loads the model over size GPUs and returns rank 0's 32 greedy
// tokens after prompt, the decode rate of 8 sequences (tokens/s) and rank
// 0's replay counters.
func runTP(dir string, size int, prompt []int) ([]int, float64, rocm.ReplayStats, error) {
	es := make([]*rocm.Executor, size)
	for i := range es {
		e, err := rocm.OpenDevice(i)
		if err != nil {
			return nil, 0, rocm.ReplayStats{}, err
		}
		defer e.Close()
		es[i] = e
	}
	opts := make([]Options, size)
	for i := range opts {
		opts[i] = Options{Executor: es[i], DType: dtype.BF16}
	}
	if size > 1 {
		comms, err := rocm.NewGroup("tp", es)
		if err != nil {
			return nil, 0, rocm.ReplayStats{}, err
		}
		for i, c := range comms {
			defer c.Close()
			opts[i].Comm = c
		}
	}
	ms := make([]*Model, size)
	for i := range ms {
		m, err := Load(dir, opts[i])
		if err != nil {
			return nil, 0, rocm.ReplayStats{}, err
		}
		defer m.Close()
		ms[i] = m
	}
	ctx := context.Background()
	tokens := make([][]int, size)
	rates := make([]float64, size)
	errs := make([]error, size)
	profs := make([]string, size)
	var wg sync.WaitGroup
	for r, m := range ms {
		wg.Go(func() {
			g, err := m.Generate(ctx, prompt, GenerateOptions{MaxTokens: 32, StopTokens: []int{}})
			if err != nil {
				errs[r] = err
				return
			}
			tokens[r] = g.Tokens
			// Batch 8: a warm-up pass, then 64 timed steps.
			s, err := m.NewSession(8)
			if err != nil {
				errs[r] = err
				return
			}
			defer s.Close()
			prompts := make([][]int, 8)
			for i := range prompts {
				prompts[i] = prompt
			}
			ids := make([]int, 8)
			for pass := range 2 {
				if _, err := s.Prefill(ctx, prompts); err != nil {
					errs[r] = err
					return
				}
				start := time.Now()
				for range 64 {
					next, err := s.decodeGreedy(ctx, ids)
					if err != nil {
						errs[r] = err
						return
					}
					ids = next
				}
				if pass == 1 {
					rates[r] = 8 * 64 / time.Since(start).Seconds()
				}
			}
			// LOOM_LLAMA_TP_PROFILE=1: where rank r's decode step goes,
			// step by step (no replays: each step between device events,
			// a collective's time including its wait for the other ranks).
			if os.Getenv("LOOM_LLAMA_TP_PROFILE") == "1" {
				profs[r], errs[r] = profileTP(es[r], func() error {
					next, err := s.decodeGreedy(ctx, ids)
					ids = next
					return err
				})
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			return nil, 0, rocm.ReplayStats{}, fmt.Errorf("rank %d: %w", r, err)
		}
	}
	for r, p := range profs {
		if p != "" {
			fmt.Printf("rank %d of %d, a batch-8 decode step:\n%s", r, size, p)
		}
	}
	return tokens[0], rates[0], es[0].ReplayStats(), nil
}

// profileTP profiles 5 steps of step on e (rocm.Executor.ProfileSteps) and
// returns the 16 costliest kinds of step (profileTable).
func profileTP(e *rocm.Executor, step func() error) (string, error) {
	if err := e.ProfileSteps(true); err != nil {
		return "", err
	}
	const n = 5
	for range n {
		if err := step(); err != nil {
			return "", err
		}
	}
	prof, err := e.Profile()
	if err := errors.Join(err, e.ProfileSteps(false)); err != nil {
		return "", err
	}
	return profileTable(prof, n, 16), nil
}

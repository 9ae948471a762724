package model

import (
	"context"
	"math"
	"strings"
	"testing"
)

func mustSampler(t *testing.T, o GenerateOptions) *Sampler {
	t.Helper()
	s, err := NewSampler(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// draw samples n times and returns the frequency of each token.
func draw(t *testing.T, s *Sampler, logits []float32, n int) []float64 {
	t.Helper()
	f := make([]float64, len(logits))
	for range n {
		id, err := s.Sample(logits)
		if err != nil {
			t.Fatal(err)
		}
		f[id]++
	}
	for i := range f {
		f[i] /= float64(n)
	}
	return f
}

func logs(ps ...float64) []float32 {
	out := make([]float32, len(ps))
	for i, p := range ps {
		out[i] = float32(math.Log(p))
	}
	return out
}

func near(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol {
			t.Errorf("%s: frequencies %.3f, want %.3f (±%g)", what, got, want, tol)
			return
		}
	}
}

// The frequency tolerances are 5 standard deviations of a frequency
// estimated from 20000 draws (√(p(1−p)/n) ≤ 0.0036).
const freqTol = 0.018

func TestSamplerGreedy(t *testing.T) {
	s := mustSampler(t, GenerateOptions{})
	for _, c := range []struct {
		logits []float32
		want   int
	}{
		{[]float32{1, 3, 2}, 1},
		{[]float32{5, 5, 1}, 0}, // ties: the first
		{[]float32{float32(math.Inf(-1)), -1e30, -2e30}, 1},
		{[]float32{0}, 0},
	} {
		if got, err := s.Sample(c.logits); err != nil || got != c.want {
			t.Errorf("greedy %v: %d, %v; want %d", c.logits, got, err, c.want)
		}
	}
	// Top-k 1 is greedy at any temperature.
	k1 := mustSampler(t, GenerateOptions{Temperature: 5, TopK: 1, Seed: 3})
	for range 100 {
		if got, _ := k1.Sample([]float32{0.1, 0.3, 0.2}); got != 1 {
			t.Fatalf("top-k 1 drew %d", got)
		}
	}
}

func TestSamplerDistribution(t *testing.T) {
	p := []float64{0.5, 0.3, 0.15, 0.05}
	l := logs(p...)
	near(t, "temperature 1", draw(t, mustSampler(t, GenerateOptions{Temperature: 1, Seed: 1}), l, 20000), p, freqTol)
	// Temperature 2 flattens: p^(1/2), renormalised.
	var flat []float64
	sum := 0.0
	for _, q := range p {
		flat = append(flat, math.Sqrt(q))
		sum += math.Sqrt(q)
	}
	for i := range flat {
		flat[i] /= sum
	}
	near(t, "temperature 2", draw(t, mustSampler(t, GenerateOptions{Temperature: 2, Seed: 2}), l, 20000), flat, freqTol)
	// Top-k 2 keeps 0.5 and 0.3: 5/8, 3/8.
	near(t, "top-k 2", draw(t, mustSampler(t, GenerateOptions{Temperature: 1, TopK: 2, Seed: 3}), l, 20000), []float64{0.625, 0.375, 0, 0}, freqTol)
	// Top-p 0.6: 0.5 alone is short of 0.6, 0.5+0.3 reaches it.
	near(t, "top-p 0.6", draw(t, mustSampler(t, GenerateOptions{Temperature: 1, TopP: 0.6, Seed: 4}), l, 20000), []float64{0.625, 0.375, 0, 0}, freqTol)
	// Top-p 0.5: the first token reaches it alone.
	near(t, "top-p 0.5", draw(t, mustSampler(t, GenerateOptions{Temperature: 1, TopP: 0.5, Seed: 5}), l, 2000), []float64{1, 0, 0, 0}, 0)
	// Top-k then top-p: top-k 3 renormalises 0.5, 0.3, 0.15 (sum 0.95);
	// top-p 0.8 of that needs 0.5+0.3 = 0.842 of it.
	near(t, "top-k 3, top-p 0.8", draw(t, mustSampler(t, GenerateOptions{Temperature: 1, TopK: 3, TopP: 0.8, Seed: 6}), l, 20000), []float64{0.625, 0.375, 0, 0}, freqTol)
	// Ties at the top-k boundary all stay (Hugging Face keeps every logit
	// ≥ the k-th largest).
	near(t, "top-k 2 with ties", draw(t, mustSampler(t, GenerateOptions{Temperature: 1, TopK: 2, Seed: 7}), []float32{1, 1, 1, 0}, 20000), []float64{1.0 / 3, 1.0 / 3, 1.0 / 3, 0}, freqTol)
}

// TestSamplerNucleusLong: a long flat tail makes the nucleus reach below
// the first threshold (1e-3 of the largest probability), so the threshold
// must drop.
func TestSamplerNucleusLong(t *testing.T) {
	logits := make([]float32, 2001)
	logits[0] = float32(math.Log(2000)) // p₀ = 1/2; 2000 tokens of 1/4000 share the other half
	// Top-p 0.75005 keeps token 0 and the first 1001 tail tokens (ties:
	// lower id first): 0.5 + 1000/4000 falls short by 0.00005.
	got := draw(t, mustSampler(t, GenerateOptions{Temperature: 1, TopP: 0.75005, Seed: 8}), logits, 5000)
	tail, rest := 0.0, 0.0
	for i := 1; i < len(got); i++ {
		if i <= 1001 {
			tail += got[i]
		} else {
			rest += got[i]
		}
	}
	// 5000 draws: 5 standard deviations are 0.034.
	if math.Abs(got[0]-0.5/0.75025) > 0.034 || math.Abs(tail-0.25025/0.75025) > 0.034 || rest != 0 {
		t.Errorf("p0 %.3f (want 0.666), kept tail %.3f (want 0.334), beyond the nucleus %g (want 0)", got[0], tail, rest)
	}
}

func TestSamplerSeeds(t *testing.T) {
	l := logs(0.25, 0.25, 0.25, 0.25)
	seq := func(seed uint64) []int {
		s := mustSampler(t, GenerateOptions{Temperature: 1, Seed: seed})
		var out []int
		for range 64 {
			id, _ := s.Sample(l)
			out = append(out, id)
		}
		return out
	}
	a, b, c := seq(1), seq(1), seq(2)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 1 twice differs at %d", i)
		}
	}
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same == len(a) {
		t.Error("seeds 1 and 2 give the same draws")
	}
}

func TestSamplerErrors(t *testing.T) {
	for _, c := range []struct {
		o    GenerateOptions
		want string
	}{
		{GenerateOptions{Temperature: -1}, "temperature -1"},
		{GenerateOptions{Temperature: math.NaN()}, "temperature NaN"},
		{GenerateOptions{Temperature: math.Inf(1)}, "temperature +Inf"},
		{GenerateOptions{TopK: -2}, "top-k -2"},
		{GenerateOptions{TopP: 1.5}, "top-p 1.5"},
		{GenerateOptions{TopP: -0.1}, "top-p -0.1"},
	} {
		if _, err := NewSampler(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %q", c.o, err, c.want)
		}
	}
	s := mustSampler(t, GenerateOptions{Temperature: 1})
	if _, err := s.Sample([]float32{1, float32(math.NaN())}); err == nil || !strings.Contains(err.Error(), "token 1 is NaN") {
		t.Errorf("NaN logit: %v", err)
	}
	if _, err := s.Sample(nil); err == nil {
		t.Error("no logits accepted")
	}
}

// TestDecodeGreedy: the greedy token a decode step picks on the executor
// (decodeGreedy: the program's argmax and max outputs) is the host
// sampler's pick from the same step's logits, over several steps of two
// sessions fed alike.
func TestDecodeGreedy(t *testing.T) {
	dir, _, _ := tiny(t)
	m := load(t, dir, Options{})
	ctx := context.Background()
	a, err := m.NewSession(1)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := m.NewSession(1)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	prompt := randomIDs(5, 7, m.Config().Vocab)
	if _, err := a.Prefill(ctx, [][]int{prompt}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Prefill(ctx, [][]int{prompt}); err != nil {
		t.Fatal(err)
	}
	greedy, err := NewSampler(GenerateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	id := prompt[len(prompt)-1]
	for step := range 6 {
		logits, err := a.Decode(ctx, []int{id})
		if err != nil {
			t.Fatal(err)
		}
		want, err := sample(greedy, logits)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.decodeGreedy(ctx, []int{id})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("step %d: decodeGreedy %v, host argmax %d", step, got, want)
		}
		id = want
	}
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/model"
	"github.com/loomgraph/loom/tokenizer"
)

// tinyModel writes the tiny test model, with the llama2-style tokenizer
// of package tokenizer's tests beside it when tok is set.
func tinyModel(t *testing.T, tok bool) string {
	t.Helper()
	dir := t.TempDir()
	if err := model.WriteTestModel(dir, model.TinyConfig(), 1, dtype.F32); err != nil {
		t.Fatal(err)
	}
	if tok {
		b, err := os.ReadFile("../../tokenizer/testdata/llama2_spm.tokenizer.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestGenerateIDs(t *testing.T) {
	dir := tinyModel(t, false)
	m, err := model.Load(dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want, err := m.Generate(context.Background(), []int{1, 17, 42}, model.GenerateOptions{MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	status, out, errs := loom(t, "generate", "-model", dir, "-ids", "1,17,42", "-n", "8", "-print-ids", "-device", "cpu")
	if status != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", status, errs)
	}
	var got []int
	for _, f := range strings.Fields(out) {
		id, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("stdout %q is not ids", out)
		}
		got = append(got, id)
	}
	if !slices.Equal(got, want.Tokens) || strings.Count(out, "\n") != 1 {
		t.Errorf("stdout %q, want the ids %v on one line", out, want.Tokens)
	}
	for _, w := range []string{"executor: cpu", "model: 4 layers, hidden 256", "prompt: 3 tokens", "decode: 7 tokens", "tokens/s"} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errs)
		}
	}
	// Sampling with a seed is reproducible through the command too.
	args := []string{"generate", "-model", dir, "-ids", "5,6", "-n", "6", "-print-ids", "-device", "cpu", "-temp", "0.9", "-top-k", "40", "-top-p", "0.95", "-seed", "3"}
	_, a, _ := loom(t, args...)
	_, b, _ := loom(t, args...)
	if a != b || len(strings.Fields(a)) != 6 {
		t.Errorf("seeded runs: %q and %q", a, b)
	}
}

func TestGenerateText(t *testing.T) {
	dir := tinyModel(t, true)
	status, out, errs := loom(t, "generate", "-model", dir, "-prompt", "The quick brown fox", "-n", "12", "-device", "cpu")
	if status != exitOK {
		t.Fatalf("exit %d\nstderr:\n%s", status, errs)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	tok, err := tokenizer.ParseJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	g, err := m.Generate(context.Background(), tok.Encode("The quick brown fox", true), model.GenerateOptions{MaxTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	ids := g.Tokens
	if g.StopReason == model.StopToken {
		ids = ids[:len(ids)-1]
	}
	text, last, _ := strings.Cut(strings.TrimSuffix(out, "\n"), "\nprompt: ")
	if text != strings.TrimSuffix(tok.Decode(ids), "\n") {
		t.Errorf("streamed text %q, want %q", text, tok.Decode(ids))
	}
	if !strings.Contains(last, "tokens/s") || !strings.Contains(last, "decode: ") {
		t.Errorf("no rates line in %q", out)
	}
}

func TestGenerateErrors(t *testing.T) {
	dir := tinyModel(t, false)
	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"-ids", "1"}, exitUsage, "-model is required"},
		{[]string{"-model", dir}, exitUsage, "one of -prompt TEXT or -ids"},
		{[]string{"-model", dir, "-ids", "1", "-prompt", "x"}, exitUsage, "one of -prompt TEXT or -ids"},
		{[]string{"-model", dir, "-ids", "1,x"}, exitUsage, `-ids: "x" is not a token id`},
		{[]string{"-model", dir, "-ids", "1", "-dtype", "u8"}, exitUsage, `-dtype "u8"`},
		{[]string{"-model", dir, "-ids", "1", "-temp", "-1"}, exitUsage, "temperature -1"},
		{[]string{"-model", dir, "-ids", "1", "-n", "-2"}, exitUsage, "-n -2"},
		{[]string{"-model", dir, "-ids", "1", "-device", "cpu", "-profile"}, exitUsage, "-profile needs the GPU executor (this run is on cpu)"},
		{[]string{"-model", dir, "-ids", "1", "-device", "tpu"}, exitFail, `unknown device "tpu"`},
		{[]string{"-model", dir, "-prompt", "hello", "-device", "cpu"}, exitFail, "-prompt needs the model's tokenizer"},
		{[]string{"-model", dir, "-ids", "1,5000", "-device", "cpu"}, exitFail, "token id 5000 is outside the vocabulary"},
		{[]string{"-model", filepath.Join(dir, "missing"), "-ids", "1", "-device", "cpu"}, exitFail, "no such file"},
	} {
		status, _, errs := loom(t, append([]string{"generate"}, c.args...)...)
		if status != c.status || !strings.Contains(errs, c.want) {
			t.Errorf("loom generate %s: exit %d, stderr:\n%s\nwant exit %d naming %q", strings.Join(c.args, " "), status, errs, c.status, c.want)
		}
	}
}

// TestGenerateTensorParallel: -tp 2 on the CPU (two CPU executors, the
// tiny model's heads and MLP split between them) prints the ids the whole
// model does, greedy and sampled with a seed; -tp 3 (8 heads and 2 key/
// value heads do not split into 3) fails naming why; -tp 0 and -tp with
// -profile are usage errors.
func TestGenerateTensorParallel(t *testing.T) {
	dir := tinyModel(t, false)
	for _, extra := range [][]string{nil, {"-temp", "0.8", "-seed", "9"}} {
		base := append([]string{"generate", "-model", dir, "-ids", "1,17,42", "-n", "12", "-print-ids", "-device", "cpu"}, extra...)
		status, want, errs := loom(t, base...)
		if status != exitOK {
			t.Fatalf("exit %d\nstderr:\n%s", status, errs)
		}
		status, got, errs := loom(t, append(base, "-tp", "2")...)
		if status != exitOK {
			t.Fatalf("-tp 2: exit %d\nstderr:\n%s", status, errs)
		}
		if got != want {
			t.Errorf("-tp 2 %v: ids %q, the whole model's %q", extra, got, want)
		}
		if !strings.Contains(errs, "2 ranks on CPU executors") {
			t.Errorf("-tp 2: stderr lacks the executors:\n%s", errs)
		}
	}
	if status, _, errs := loom(t, "generate", "-model", dir, "-ids", "1", "-device", "cpu", "-tp", "3"); status != exitFail || !strings.Contains(errs, "do not split into 3") {
		t.Errorf("-tp 3: exit %d, stderr:\n%s", status, errs)
	}
	for _, args := range [][]string{{"-tp", "0"}, {"-tp", "2", "-profile"}} {
		if status, _, _ := loom(t, append([]string{"generate", "-model", dir, "-ids", "1", "-device", "cpu"}, args...)...); status != exitUsage {
			t.Errorf("%v: exit %d, want a usage error", args, status)
		}
	}
}

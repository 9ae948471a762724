package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
)

// References from Hugging Face transformers' LlamaForCausalLM (eager
// attention), computed on the GPU machine by scripts/llama_refs.py from the
// checkpoints TestWriteReferenceModels writes; the JSON it writes is
// checked in under testdata/. The weights are never stored: they are a
// function of (config, seed, dtype), and the JSON records the SHA-256 of
// the model.safetensors the reference read, which the tests check they
// regenerate byte for byte before comparing anything.
//
// To regenerate (see the script's docstring), on the GPU machine:
//
//	LOOM_LLAMA_REFS_OUT=/tmp/llama-refs .gpu/model.test -test.run TestWriteReferenceModels
//	python3 scripts/llama_refs.py /tmp/llama-refs      # writes model/testdata/llama_*_ref.json

// refCase is one reference model.
type refCase struct {
	name string
	cfg  Config
	seed uint64
	dt   dtype.DType // the dtype the checkpoint is stored in
	gpu  bool        // too large for the CPU test budget
}

var refCases = []refCase{
	{name: "tiny", cfg: TinyConfig(), seed: tinySeed, dt: dtype.F32},
	// Llama 3.2 1B's shape in bf16: 2.5 GB of weights.
	{name: "llama1b", cfg: Llama1BConfig(), seed: 1, dt: dtype.BF16, gpu: true},
}

// refFile is the JSON llama_refs.py writes.
type refFile struct {
	Name         string    `json:"name"`
	SHA256       string    `json:"sha256"`
	Torch        string    `json:"torch"`
	Transformers string    `json:"transformers"`
	Device       string    `json:"device"`
	Prompt       []int     `json:"prompt"`
	InvFreq      []float64 `json:"inv_freq"`
	Runs         []refRun  `json:"runs"`
}

// refRun is one forward of the reference in one dtype: the logits of some
// prompt positions, 64 greedy tokens, and the logits of some decode steps
// (step s: after feeding greedy[s] at position len(prompt)+s).
type refRun struct {
	DType        string   `json:"dtype"` // "float32" or "bfloat16"
	PromptLogits []refRow `json:"prompt_logits"`
	Greedy       []int    `json:"greedy"`
	StepLogits   []refRow `json:"step_logits"`
}

// refRow is the logits of one prompt position (or, in StepLogits, of one
// decode step) at some token ids (all of them when IDs is empty).
type refRow struct {
	Pos    int       `json:"pos"`
	IDs    []int     `json:"ids"`
	Values []float64 `json:"values"`
}

func (r refRow) at(logits []float32) ([]float32, []float64) {
	if len(r.IDs) == 0 {
		return logits, r.Values
	}
	got := make([]float32, len(r.IDs))
	for i, id := range r.IDs {
		got[i] = logits[id]
	}
	return got, r.Values
}

func sha256File(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestWriteReferenceModels writes every reference model for
// scripts/llama_refs.py into $LOOM_LLAMA_REFS_OUT/<name>/: config.json,
// model.safetensors and loom.json (name, seed, dtype, the SHA-256 of
// model.safetensors). It does nothing unless that variable is set.
func TestWriteReferenceModels(t *testing.T) {
	out := os.Getenv("LOOM_LLAMA_REFS_OUT")
	if out == "" {
		t.Skip("set LOOM_LLAMA_REFS_OUT=DIR to write the reference models scripts/llama_refs.py reads")
	}
	for _, c := range refCases {
		dir := filepath.Join(out, c.name)
		if err := WriteTestModel(dir, c.cfg, c.seed, c.dt); err != nil {
			t.Fatal(err)
		}
		info := map[string]any{"name": c.name, "seed": c.seed, "dtype": torchNames[c.dt],
			"sha256": sha256File(t, filepath.Join(dir, "model.safetensors"))}
		b, _ := json.MarshalIndent(info, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "loom.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%s)", dir, info["sha256"])
	}
}

// readRef reads testdata/llama_<name>_ref.json, skipping when it is absent.
func readRef(t *testing.T, name string) *refFile {
	t.Helper()
	path := filepath.Join("testdata", "llama_"+name+"_ref.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("no %s: run scripts/llama_refs.py on the GPU machine to create it (see hfref_test.go)", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	var r refFile
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &r
}

// refTolerance is the brief's bound on the logits' error relative to the
// largest of them: 1e-3 in float32, 2e-2 in bfloat16 (whose 8-bit
// significand rounds every op).
var refTolerance = map[string]float64{"float32": 1e-3, "bfloat16": 2e-2}

// checkAgainstRef compares a checkpoint (dir) loaded on e with every run of
// the reference r.
func checkAgainstRef(t *testing.T, c refCase, r *refFile, dir string, e exec.Executor) {
	if got := sha256File(t, filepath.Join(dir, "model.safetensors")); got != r.SHA256 {
		t.Fatalf("the regenerated %s weights have SHA-256 %s, the reference was computed from %s: RandomWeights or WriteHF changed; regenerate the reference", c.name, got, r.SHA256)
	}
	inv, err := invFreq(c.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.InvFreq) > 0 {
		for i, want := range r.InvFreq {
			if math.Abs(float64(inv[i])-want) > 1e-6*want {
				t.Errorf("inv_freq[%d] = %g, transformers has %g", i, inv[i], want)
			}
		}
	}
	for _, run := range r.Runs {
		t.Run(run.DType, func(t *testing.T) {
			dt := map[string]dtype.DType{"float32": dtype.F32, "bfloat16": dtype.BF16}[run.DType]
			tol := refTolerance[run.DType]
			m := load(t, dir, Options{Executor: e, DType: dt})
			s, _ := m.NewSession(1)
			defer s.Close()
			all, err := s.PrefillAll(ctx, [][]int{r.Prompt})
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for _, pr := range run.PromptLogits {
				got, want := pr.at(row(t, all, pr.Pos))
				e := relErr(got, want)
				worst = math.Max(worst, e)
				if e > tol {
					t.Errorf("prompt position %d: error %.3g relative to the largest logit, want ≤ %g", pr.Pos, e, tol)
				}
			}
			// Decode with the reference's greedy tokens (teacher forcing),
			// so the steps compare like with like even if greedy differs.
			steps := map[int]refRow{}
			last := 0
			for _, sr := range run.StepLogits {
				steps[sr.Pos] = sr
				last = max(last, sr.Pos)
			}
			for st := 0; st <= last && st < len(run.Greedy); st++ {
				logits, err := s.Decode(ctx, []int{run.Greedy[st]})
				if err != nil {
					t.Fatal(err)
				}
				if sr, ok := steps[st]; ok {
					got, want := sr.at(row(t, logits, 0))
					e := relErr(got, want)
					worst = math.Max(worst, e)
					if e > tol {
						t.Errorf("decode step %d (position %d): error %.3g, want ≤ %g", st, len(r.Prompt)+st, e, tol)
					}
				}
			}
			t.Logf("%s %s: largest error %.3g against transformers %s (%s)", c.name, run.DType, worst, r.Transformers, r.Device)
			// Greedy tokens must be identical in float32; in bfloat16 an
			// early near-tie may go either way, so they are only logged.
			g, err := m.Generate(ctx, r.Prompt, GenerateOptions{MaxTokens: len(run.Greedy), StopTokens: []int{}})
			if err != nil {
				t.Fatal(err)
			}
			same := 0
			for same < len(g.Tokens) && same < len(run.Greedy) && g.Tokens[same] == run.Greedy[same] {
				same++
			}
			if dt == dtype.F32 && !slices.Equal(g.Tokens, run.Greedy) {
				t.Errorf("greedy tokens differ from token %d:\n got %v\nwant %v", same, g.Tokens, run.Greedy)
			}
			t.Logf("greedy: %d of %d tokens agree with transformers", same, len(run.Greedy))
		})
	}
}

// TestHFReferenceTiny compares the tiny model on the CPU with transformers.
func TestHFReferenceTiny(t *testing.T) {
	r := readRef(t, "tiny")
	dir, _, _ := tiny(t)
	checkAgainstRef(t, refCases[0], r, dir, nil)
}

// TestRefHarness runs checkAgainstRef on a reference built from the
// float64 reference in the JSON's form, so the comparison (positions,
// teacher-forced steps, vocabulary subsets, greedy) is itself tested before
// a transformers reference exists.
func TestRefHarness(t *testing.T) {
	dir, _, ref := tiny(t)
	prompt := randomIDs(40, 8, 1024)
	seq := slices.Clone(prompt)
	var greedy []int
	var logits [][]float64
	for range 6 {
		logits = ref.forward(seq)
		next := argmax64(logits[len(seq)-1])
		greedy = append(greedy, next)
		seq = append(seq, next)
	}
	full := ref.forward(seq)
	subset := []int{3, 500, 1023}
	pick := func(row []float64, ids []int) []float64 {
		var out []float64
		for _, id := range ids {
			out = append(out, row[id])
		}
		return out
	}
	run := refRun{DType: "float32", Greedy: greedy,
		PromptLogits: []refRow{{Pos: 0, IDs: subset, Values: pick(full[0], subset)}, {Pos: 7, Values: full[7]}},
		// Step s: after feeding greedy[s] at position 8+s.
		StepLogits: []refRow{{Pos: 0, Values: full[8]}, {Pos: 4, IDs: subset, Values: pick(full[12], subset)}}}
	r := &refFile{Name: "tiny", SHA256: sha256File(t, filepath.Join(dir, "model.safetensors")), Prompt: prompt, Runs: []refRun{run},
		Transformers: "none: the float64 reference", Device: "cpu"}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back refFile
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	inv, _ := invFreq(TinyConfig(), nil)
	for _, f := range inv {
		back.InvFreq = append(back.InvFreq, float64(f))
	}
	checkAgainstRef(t, refCases[0], &back, dir, nil)
}

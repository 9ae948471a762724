package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/rocm"
	"github.com/loomgraph/loom/model"
	"github.com/loomgraph/loom/quant"
)

// Model workloads (issue 16's speed figures as `loom bench` measures them):
// a llama-family model generating greedily from a prompt of random ids,
// on the bench's executor, timed as a user's Generate call is — one call
// to warm up (compile, record replays), then one measured.
//
//   - llama-tiny[-FORMAT]: the tiny test config (4 layers, hidden 256;
//     f32, or its matrices in a block format such as q4_k);
//   - llama1b-bf16, llama1b-FORMAT: the Llama-3.2-1B shape in bf16, or
//     with its matrices in a block format (bf16 activations), or in
//     one of llama.cpp's mixtures, q4_k_m, q5_k_m, q3_k_m, … (the
//     weights written as a bf16 GGUF file, then converted as `loom gguf
//     quantize` does);
//   - smol135m-bf16, smol135m-FORMAT: SmolLM-135M's shape likewise (rows
//     of 576 values: a k-quant mixture stores most matrices in its
//     fallbacks, Q5_0, Q5_1, Q8_0, as llama.cpp's files of it do);
//   - -model PATH: a checkpoint of the user's (GGUF, or a directory with
//     config.json and safetensors), in the dtype it declares or -dtype.
//
// The generated models have random weights (seed 1), written to a
// temporary directory and removed after the run: the 1B shape's bf16
// weights are 2.47 GB, so llama1b-* take a minute or two and are run only
// on request. Reported per model: its weight bytes, the prefill's time and
// rate, the decode rate and its share of the bound that the weight bytes
// and the measured copy bandwidth set (a step reads every weight once:
// copy GB/s ÷ weight GB tokens/s), the decode steps' median and 90th
// percentile (token to token), and on the GPU the kernel launches a token
// and the device memory in use after the run.

// modelResult is one model row of the bench output and of its JSON.
type modelResult struct {
	Model        string  `json:"model"`
	Device       string  `json:"device"`
	WeightBytes  int64   `json:"weight_bytes"`
	PromptTokens int     `json:"prompt_tokens"`
	PrefillMS    float64 `json:"prefill_ms"`
	PromptTokS   float64 `json:"prompt_tokens_per_s"`
	DecodeSteps  int     `json:"decode_steps"`
	DecodeTokS   float64 `json:"decode_tokens_per_s"`
	BoundTokS    float64 `json:"copy_bound_tokens_per_s"`
	BoundPct     float64 `json:"copy_bound_pct"`
	MedianStepUS float64 `json:"median_step_us"`
	P90StepUS    float64 `json:"p90_step_us"`
	LaunchesTok  float64 `json:"launches_per_token,omitempty"`
	DeviceBytes  int64   `json:"device_bytes_in_use,omitempty"`
}

// isModelWorkload says whether id names a model workload (parseModelWorkload
// says whether it is a valid one).
func isModelWorkload(id string) bool {
	return strings.HasPrefix(id, "llama") || strings.HasPrefix(id, "smol")
}

// modelSpec is what a model workload id asks for: a config, the dtype of
// its float weights and of the computation, and the block format of its
// matrices where quantized.
type modelSpec struct {
	cfg       model.Config
	dt        dtype.DType
	quantized bool
	format    quant.Type
	mix       *kMixture // a llama.cpp mixture (q4_k_m, q5_k_m, …): format is its base type
}

func parseModelWorkload(id string) (modelSpec, error) {
	var s modelSpec
	var rest string
	// id is a config's name, then nothing or "-" and the weights' form.
	named := func(name string) bool {
		r, ok := strings.CutPrefix(id, name)
		if !ok || (r != "" && r[0] != '-') {
			return false
		}
		rest = strings.TrimPrefix(r, "-")
		return true
	}
	switch {
	case named("llama-tiny"):
		s = modelSpec{cfg: model.TinyConfig(), dt: dtype.F32}
	case named("llama1b"):
		s = modelSpec{cfg: model.Llama1BConfig(), dt: dtype.BF16}
	case named("smol135m"):
		s = modelSpec{cfg: model.SmolLM135MConfig(), dt: dtype.BF16}
	default:
		return s, fmt.Errorf("unknown model workload %q (want llama-tiny[-FORMAT], llama1b-bf16, llama1b-FORMAT, smol135m-bf16 or smol135m-FORMAT)", id)
	}
	switch {
	case rest == "" && s.dt == dtype.BF16:
		return s, fmt.Errorf("model workload %q: name its weights (%s-bf16, %s-q4_k, …)", id, id, id)
	case rest == "bf16" && s.dt != dtype.BF16:
		return s, fmt.Errorf("model workload %q: the tiny config is f32 (or a block format)", id)
	case rest == "" || rest == "bf16":
		return s, nil
	}
	if m, ok := kMixtures[strings.ToLower(rest)]; ok {
		s.quantized, s.format, s.mix = true, m.base, m
		return s, nil
	}
	f, err := quant.ParseType(rest)
	if err != nil {
		return s, fmt.Errorf("model workload %q: %w", id, err)
	}
	// Q8_1 and Q8_K are activation formats: no weight is stored in them.
	if tr, ok := f.Traits(); !ok || !tr.Supported || tr.Block == 1 || f == quant.Q8_1 || f == quant.Q8_K {
		return s, fmt.Errorf("model workload %q: %q is not a block format for weights", id, rest)
	}
	s.quantized, s.format = true, f
	return s, nil
}

// modelPath is where writeModel puts spec's model under dir.
func modelPath(dir string, s modelSpec) string {
	if !s.quantized {
		return filepath.Join(dir, "model")
	}
	return filepath.Join(dir, "model.gguf")
}

// writeModel writes spec's model with random weights under dir and
// returns its path (modelPath): safetensors and config.json for float
// weights, a GGUF file for a block format.
func writeModel(dir string, s modelSpec) (string, error) {
	w, err := model.RandomWeights(s.cfg, 1, s.dt)
	if err != nil {
		return "", err
	}
	path := modelPath(dir, s)
	if !s.quantized {
		return path, model.WriteHF(path, s.cfg, w)
	}
	if s.mix == nil {
		return path, model.WriteGGUF(path, s.cfg, w, s.format)
	}
	// A mixture: the weights as a float GGUF file, then `loom gguf
	// quantize -type q4_k_m`'s conversion of it (each tensor's type as
	// llama.cpp's quantizer chooses it).
	float := filepath.Join(dir, "model-float.gguf")
	ft := quant.F32
	if s.dt == dtype.BF16 {
		ft = quant.BF16
	}
	if err := model.WriteGGUF(float, s.cfg, w, ft); err != nil {
		return "", err
	}
	defer os.Remove(float)
	in, err := openQuantInput(float)
	if err != nil {
		return "", err
	}
	defer in.close()
	return path, quantizeTo(io.Discard, in, float, path, qtarget{typ: s.mix.base, mix: s.mix})
}

// benchModel loads the model at path (dt: the compute dtype, or
// dtype.Invalid for the checkpoint's) onto e and times two greedy generations of decode
// tokens after a prompt of promptLen random ids; the second is reported.
func benchModel(e exec.Executor, name, path string, dt dtype.DType, promptLen, decode int, copyGBps float64) (modelResult, error) {
	r := modelResult{Model: name, Device: e.Name()}
	if promptLen < 1 || decode < 0 {
		return r, fmt.Errorf("a prompt of %d tokens and %d decode steps: want at least 1 and 0", promptLen, decode)
	}
	m, err := model.Load(path, model.Options{Executor: e, DType: dt})
	if err != nil {
		return r, err
	}
	defer m.Close()
	if promptLen+decode > m.MaxSeqLen() {
		return r, fmt.Errorf("a prompt of %d tokens and %d more do not fit the model's %d positions", promptLen, decode, m.MaxSeqLen())
	}
	rng := rand.New(rand.NewPCG(7, 11))
	prompt := make([]int, promptLen)
	for i := range prompt {
		prompt[i] = rng.IntN(m.Config().Vocab)
	}
	g, ok := e.(*rocm.Executor)
	var at []time.Time
	opts := model.GenerateOptions{MaxTokens: decode + 1, StopTokens: []int{},
		OnToken: func(int) bool { at = append(at, time.Now()); return true }}
	ctx := context.Background()
	var gen *model.Generation
	var launches int64
	for i := range 2 { // the first compiles, warms up and records
		at = at[:0]
		if ok {
			launches = g.Stats().Kernels.Launches
		}
		if gen, err = m.Generate(ctx, prompt, opts); err != nil {
			return r, err
		}
		if ok && i == 1 {
			st := g.Stats()
			r.LaunchesTok = float64(st.Kernels.Launches-launches) / float64(len(gen.Tokens))
			r.DeviceBytes = st.Memory.InUse
		}
	}
	r.WeightBytes = m.WeightBytes()
	r.PromptTokens = gen.PromptTokens
	r.PrefillMS = float64(gen.Prefill) / float64(time.Millisecond)
	r.PromptTokS = gen.PromptTokensPerSecond()
	r.DecodeSteps = gen.DecodeSteps
	r.DecodeTokS = gen.DecodeTokensPerSecond()
	if r.WeightBytes > 0 && copyGBps > 0 {
		r.BoundTokS = copyGBps * 1e9 / float64(r.WeightBytes)
		r.BoundPct = 100 * r.DecodeTokS / r.BoundTokS
	}
	var steps []time.Duration
	for j := 1; j < len(at); j++ {
		steps = append(steps, at[j].Sub(at[j-1]))
	}
	slices.Sort(steps)
	if n := len(steps); n > 0 {
		r.MedianStepUS = float64(steps[n/2]) / float64(time.Microsecond)
		r.P90StepUS = float64(steps[n*9/10]) / float64(time.Microsecond)
	}
	return r, nil
}

// runModelWorkload writes the model id names to a temporary directory,
// benches it and removes it; with keep (bench's -model-dir) the model is
// written to keep/id instead and left there, and a model already there is
// benched as it is (the weights are random from a fixed seed, so it is the
// one that would be written: writing the 1B shape takes a minute or more).
func runModelWorkload(e exec.Executor, id, keep string, promptLen, decode int, copyGBps float64) (modelResult, error) {
	s, err := parseModelWorkload(id)
	if err != nil {
		return modelResult{}, err
	}
	path, err := modelFor(id, keep, s)
	if err != nil {
		return modelResult{}, fmt.Errorf("%s: write the model: %w", id, err)
	}
	if keep == "" {
		defer os.RemoveAll(filepath.Dir(path))
	}
	return benchModel(e, id, path, s.dt, promptLen, decode, copyGBps)
}

// modelFor returns the path of model id (spec s): written to a new
// temporary folder where keep is empty; else keep/id's, written there
// first where it is not (into a temporary folder beside it, renamed into
// place when whole, so that an interrupted write is not taken for a
// model later).
func modelFor(id, keep string, s modelSpec) (string, error) {
	if keep == "" {
		dir, err := os.MkdirTemp("", "loom-bench-model-")
		if err != nil {
			return "", err
		}
		path, err := writeModel(dir, s)
		if err != nil {
			os.RemoveAll(dir)
		}
		return path, err
	}
	final := filepath.Join(keep, id)
	if _, err := os.Stat(final); err == nil {
		return modelPath(final, s), nil
	}
	if err := os.MkdirAll(keep, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(keep, "."+id+"-")
	if err != nil {
		return "", err
	}
	if _, err := writeModel(tmp, s); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return modelPath(final, s), nil
}

func printModels(w io.Writer, rs []modelResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "%-18s %-6s %9s %6s %10s %9s %9s %9s %7s %9s %8s %9s %10s\n", "model", "device", "weight_GB", "prompt", "prefill_ms", "prompt/s", "decode/s", "bound/s", "%bound", "median_us", "p90_us", "launches", "device_MB")
	for _, r := range rs {
		launches, mem := "-", "-"
		if r.LaunchesTok > 0 {
			launches = fmt.Sprintf("%.1f", r.LaunchesTok)
		}
		if r.DeviceBytes > 0 {
			mem = fmt.Sprintf("%.0f", float64(r.DeviceBytes)/(1<<20))
		}
		fmt.Fprintf(w, "%-18s %-6s %9.3f %6d %10.2f %9.0f %9.1f %9.1f %6.1f%% %9.1f %8.1f %9s %10s\n", r.Model, r.Device, float64(r.WeightBytes)/1e9, r.PromptTokens, r.PrefillMS, r.PromptTokS, r.DecodeTokS, r.BoundTokS, r.BoundPct, r.MedianStepUS, r.P90StepUS, launches, mem)
	}
	fmt.Fprintln(w, "models: greedy generation from random prompt ids, the second of two calls; bound/s = copy GB/s ÷ weight GB (a decode step reads every weight once); median/p90: decode steps token to token; launches: kernel launches a token, prefill included")
}

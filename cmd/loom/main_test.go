package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/model"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
)

// loom runs the command in-process and returns its exit status and output.
func loom(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	status = run(args, &out, &errb)
	return status, out.String(), errb.String()
}

// hasGPU reports whether a GPU executor opens here (then auto picks it).
func hasGPU() bool {
	_, _, err := openExecutor("rocm")
	return err == nil
}

func TestDemo(t *testing.T) {
	gpu := hasGPU()
	for _, device := range []string{"auto", "cpu"} {
		t.Run(device, func(t *testing.T) {
			// 64×33: not a multiple of any tile or vector width.
			status, out, errs := loom(t, "demo", "-n", "64", "-m", "33", "-device", device)
			if status != exitOK || !strings.Contains(out, "\nOK\n") {
				t.Fatalf("loom demo: exit %d\nstdout:\n%s\nstderr:\n%s", status, out, errs)
			}
			executor := "executor: cpu"
			if device == "auto" && gpu {
				executor = "executor: rocm"
			}
			for _, want := range []string{"seed:", executor, "step 0: kernel ", "compile:", "median of 5", "elements/s", "max abs error"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			switch {
			case device == "auto" && !gpu && !strings.Contains(out, "no GPU executor could open"):
				t.Errorf("auto does not say why it chose the CPU:\n%s", out)
			case device == "auto" && gpu && !strings.Contains(out, "a GPU was found"):
				t.Errorf("auto does not say why it chose the GPU:\n%s", out)
			}
		})
	}
}

func TestDemoSeed(t *testing.T) {
	status, out, errs := loom(t, "demo", "-n", "3", "-m", "5", "-seed", "42")
	if status != exitOK || !strings.Contains(out, "seed:     42 ") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", status, out, errs)
	}
}

func TestDumpDOT(t *testing.T) {
	status, out, errs := loom(t, "dump", "-format", "dot")
	if status != exitOK || !strings.HasPrefix(out, "digraph") {
		t.Fatalf("exit %d, want output starting with digraph\nstdout:\n%s\nstderr:\n%s", status, out, errs)
	}
}

func TestDumpFormats(t *testing.T) {
	for _, format := range dumpFormats {
		for _, fusion := range []string{"true", "false"} {
			status, out, errs := loom(t, "dump", "-format", format, "-fusion="+fusion)
			if status != exitOK || errs != "" {
				t.Errorf("dump -format %s -fusion=%s: exit %d, stderr:\n%s", format, fusion, status, errs)
			}
			// The log may legitimately be empty; the others never are.
			if format != "log" && out == "" {
				t.Errorf("dump -format %s -fusion=%s wrote nothing", format, fusion)
			}
		}
	}
}

// TestDumpCNN: the cnn graph's plan shows the conv step and the two fused
// window kernels, and its log says what each pool and upsampling took in.
func TestDumpCNN(t *testing.T) {
	status, out, errs := loom(t, "dump", "-graph", "cnn", "-format", "plan")
	if status != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", status, errs)
	}
	for _, want := range []string{"plan: 3 steps", "step 0: W_conv_", "step 1: W_add_relu_max_pool_", "step 2: W_add_upsample_nearest_cast_"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	_, log, _ := loom(t, "dump", "-graph", "cnn", "-format", "log")
	if !strings.Contains(log, "core-fusion: %8: max_pool computes its input (add → relu) at every element it reads") {
		t.Errorf("log:\n%s", log)
	}
}

func TestDumpFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.txt")
	if status, out, errs := loom(t, "dump", "-o", path); status != exitOK || out != "" {
		t.Fatalf("dump -o: exit %d, stdout %q, stderr:\n%s", status, out, errs)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, want, _ := loom(t, "dump")
	if string(got) != want {
		t.Errorf("dump -o wrote\n%s\nstdout gets\n%s", got, want)
	}
	if status, _, errs := loom(t, "dump", "-o", filepath.Join(path, "not-a-dir", "x")); status != exitFail || errs == "" {
		t.Errorf("dump -o into a missing directory: exit %d, stderr %q; want %d and a message", status, errs, exitFail)
	}
}

func TestUsage(t *testing.T) {
	status, out, errs := loom(t, "frobnicate")
	if status != exitUsage || out != "" || !strings.Contains(errs, `unknown subcommand "frobnicate"`) || !strings.Contains(errs, "demo") {
		t.Errorf("unknown subcommand: exit %d, stdout %q, stderr:\n%s", status, out, errs)
	}
	if status, _, errs := loom(t); status != exitUsage || !strings.Contains(errs, "Subcommands:") {
		t.Errorf("no subcommand: exit %d, stderr:\n%s", status, errs)
	}
	status, out, _ = loom(t, "help")
	if status != exitOK {
		t.Errorf("help: exit %d", status)
	}
	for _, c := range commands {
		if !strings.Contains(out, "\t"+c.name+" ") {
			t.Errorf("help does not list %s:\n%s", c.name, out)
		}
	}
	if status, out, _ := loom(t, "help", "dump"); status != exitOK || !strings.Contains(out, "-format") {
		t.Errorf("help dump: exit %d:\n%s", status, out)
	}
	if status, _, _ := loom(t, "demo", "-h"); status != exitOK {
		t.Errorf("demo -h: exit %d, want %d", status, exitOK)
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"demo", "-n", "0"},
		{"demo", "-m", "-3"},
		{"demo", "-n", "1000000", "-m", "1000000"},
		{"demo", "-device", "tpu"},
		{"demo", "-bogus"},
		{"demo", "stray"},
		{"dump", "-format", "svg"},
		{"dump", "-graph", "resnet"},
		{"help", "nosuch"},
	} {
		status, out, errs := loom(t, args...)
		if status != exitUsage || out != "" || !strings.Contains(strings.ToLower(errs), "usage:") {
			t.Errorf("loom %s: exit %d, stdout %q, stderr:\n%s\nwant exit %d and usage on stderr", strings.Join(args, " "), status, out, errs, exitUsage)
		}
	}
}

func TestOpenExecutor(t *testing.T) {
	e, why, err := openExecutor("auto")
	if hasGPU() {
		// With a GPU, auto takes it and says so.
		if err != nil || e.Name() != "rocm" || !strings.Contains(why, "a GPU was found") {
			t.Errorf("openExecutor(auto) on a GPU machine = %v, %q, %v", e, why, err)
		}
		return
	}
	// Without a GPU, auto must fall back to the CPU and say why, and asking
	// for rocm by name must fail rather than fall back.
	if err != nil || e.Name() != "cpu" || !strings.Contains(why, "no GPU executor could open") {
		t.Errorf("openExecutor(auto) = %v, %q, %v", e, why, err)
	}
	if _, _, err := openExecutor("rocm"); err == nil {
		t.Error(`openExecutor("rocm") succeeded where auto found no GPU`)
	}
}

// TestCheckDemo makes sure the reference check can fail: a demo whose check
// never fires would print OK for any output.
func TestCheckDemo(t *testing.T) {
	const n, m = 7, 9
	x, y := demoInputs(rand.New(rand.NewPCG(1, 2)), n, m)
	vals := make([]float32, n*m)
	for i := range vals {
		vals[i] = float32(demoWant(x.Float64(i), y.Float64(i)))
	}
	out, err := tensor.New(vals, n, m)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := checkDemo(x, y, out); err != nil || r.bad != 0 {
		t.Fatalf("exact output: %+v, %v", r, err)
	}
	for _, c := range []struct {
		name string
		set  func(v float32) float32
	}{
		{"off by 1e-4 relative", func(v float32) float32 { return v * (1 + 1e-4) }},
		{"sign flipped", func(v float32) float32 { return -v }},
		{"NaN", func(float32) float32 { return float32(math.NaN()) }},
	} {
		saved := vals[10]
		vals[10] = c.set(saved)
		r, err := checkDemo(x, y, out)
		vals[10] = saved
		if err != nil || r.bad != 1 || len(r.report) != 1 || !strings.Contains(r.report[0], "element 10:") {
			t.Errorf("%s: %+v, %v; want one mismatch at element 10", c.name, r, err)
		}
	}
	wrong, _ := tensor.Zeros(dtype.F32, m, n)
	if _, err := checkDemo(x, y, wrong); err == nil {
		t.Error("an output of the wrong shape passed the check")
	}
}

func TestDemoInputsNonZero(t *testing.T) {
	x, y := demoInputs(rand.New(rand.NewPCG(3, 4)), 100, 100)
	for i := range x.Numel() {
		if x.Float64(i) == 0 || y.Float64(i) == 0 {
			t.Fatalf("element %d: x=%g y=%g, want both non-zero", i, x.Float64(i), y.Float64(i))
		}
	}
}

func TestBenchReruns(t *testing.T) {
	status, out, errs := loom(t, "bench", "-device", "cpu", "-workloads", "W1,W3", "-elems", "4096", "-rows", "8", "-cols", "64", "-reruns", "3")
	if status != exitOK {
		t.Fatalf("loom bench -reruns: exit %d\nstdout:\n%s\nstderr:\n%s", status, out, errs)
	}
	for _, id := range []string{"W1", "W3"} {
		for _, mode := range []string{"Run    ", "RunInto"} {
			for _, want := range []string{id + " " + mode + " run 0:", id + " " + mode + " run 2:", id + " " + mode + " slowest/fastest:"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		}
	}
	if !strings.Contains(out, "page faults") {
		t.Errorf("output lacks page faults:\n%s", out)
	}
}

// TestBenchConv runs the convolution workloads at a small size on the
// CPU: each prints a row per fusion mode with a FLOP rate, and conv + bias
// + relu is one step fused (the conv with its epilogue).
func TestBenchConv(t *testing.T) {
	status, out, errs := loom(t, "bench", "-device", "cpu", "-workloads", "W12,W12-bf16,W12-crb", "-conv-n", "2", "-conv-c", "4", "-conv-hw", "9", "-reps", "1", "-elems", "4096")
	if status != exitOK {
		t.Fatalf("loom bench W12: exit %d\nstdout:\n%s\nstderr:\n%s", status, out, errs)
	}
	if !strings.Contains(out, "conv=2x4x9²") {
		t.Errorf("header lacks the conv size:\n%s", out)
	}
	for _, want := range []string{"W12         cpu    on           1", "W12-bf16    cpu    on           1", "W12-crb     cpu    on           1", "W12-crb     cpu    off          3"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchReadPaired: on the CPU a W13 mat-vec's runs are each paired
// with a read, and the bench reports the median ratio (read_pct) for both
// fusion modes, in the table's notes and the JSON; other workloads have
// none.
func TestBenchReadPaired(t *testing.T) {
	js := filepath.Join(t.TempDir(), "b.json")
	status, out, errs := loom(t, "bench", "-device", "cpu", "-workloads", "W13-q8_0,W1", "-reps", "3", "-elems", "4096", "-json", js)
	if status != exitOK {
		t.Fatalf("loom bench W13: exit %d\nstdout:\n%s\nstderr:\n%s", status, out, errs)
	}
	raw, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Workloads []benchResult }
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	paired := 0
	for _, r := range got.Workloads {
		switch {
		case r.Workload == "W13-q8_0":
			if r.ReadPct < 1 || r.ReadPct > 400 { // a mat-vec streams its weights at about a read's speed
				t.Errorf("W13-q8_0 fusion %v: read_pct %v", r.Fusion, r.ReadPct)
			}
			paired++
		case r.ReadPct != 0:
			t.Errorf("%s: read_pct %v, want none", r.Workload, r.ReadPct)
		}
	}
	if paired != 2 {
		t.Errorf("%d W13-q8_0 results, want 2 (fused and not):\n%s", paired, raw)
	}
	for _, mode := range []string{"on", "off"} {
		if want := "W13-q8_0 (fusion " + mode + "): "; !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchModels: the model workloads on the CPU write the tiny model
// (f32, and its matrices in Q4_K), generate greedily from a prompt of
// -prompt-len ids for -decode-steps tokens, and report the run in the
// table and the JSON: the weight bytes, the prompt's and the decode's
// rates and the copy bound those bytes set, the decode steps' median; a
// -model checkpoint is benched the same way under its file name (in bf16
// with -dtype bf16; -dtype f64 is a usage error). An id
// that names no model, or a format weights are not stored in, is an error
// naming it.
func TestBenchModels(t *testing.T) {
	tmp := t.TempDir()
	js := filepath.Join(tmp, "b.json")
	ck := filepath.Join(tmp, "tiny-q8_0.gguf")
	w, err := model.RandomWeights(model.TinyConfig(), 3, dtype.F32)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.WriteGGUF(ck, model.TinyConfig(), w, quant.Q8_0); err != nil {
		t.Fatal(err)
	}
	status, out, errs := loom(t, "bench", "-device", "cpu", "-workloads", "llama-tiny,llama-tiny-q4_k,llama-tiny-q4_k_m", "-model", ck, "-dtype", "bf16",
		"-prompt-len", "12", "-decode-steps", "5", "-reps", "1", "-elems", "4096", "-json", js)
	if status != exitOK {
		t.Fatalf("loom bench models: exit %d\nstdout:\n%s\nstderr:\n%s", status, out, errs)
	}
	raw, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Models []modelResult }
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	c := model.TinyConfig()
	// The tiny config's f32 weights (Model.WeightBytes): embeddings and LM
	// head, per layer q, k, v, o, gate, up, down and two norms, the final
	// norm, and the rope tables (cos and sin, 2,048 positions × HeadDim/2).
	floatBytes := 4 * int64(2*c.Vocab*c.Hidden+c.Layers*(c.Hidden*(c.Heads+2*c.KVHeads)*c.HeadDim+c.Heads*c.HeadDim*c.Hidden+3*c.Hidden*c.Intermediate+2*c.Hidden)+c.Hidden+2*2048*c.HeadDim/2)
	names := []string{"llama-tiny", "llama-tiny-q4_k", "llama-tiny-q4_k_m", "tiny-q8_0.gguf"}
	if len(got.Models) != len(names) {
		t.Fatalf("%d models in the JSON, want %d:\n%s", len(got.Models), len(names), raw)
	}
	for i, r := range got.Models {
		if r.Model != names[i] || r.Device != "cpu" || r.PromptTokens != 12 || r.DecodeSteps != 5 {
			t.Errorf("model %d: %+v, want %s on cpu, 12 prompt tokens, 5 decode steps", i, r, names[i])
		}
		if r.PrefillMS <= 0 || r.PromptTokS <= 0 || r.DecodeTokS <= 0 || r.MedianStepUS <= 0 || r.P90StepUS < r.MedianStepUS {
			t.Errorf("%s: times %+v", r.Model, r)
		}
		if want := r.DecodeTokS / r.BoundTokS * 100; r.BoundTokS <= 0 || math.Abs(r.BoundPct-want) > 1e-9*want {
			t.Errorf("%s: bound %v tokens/s, %v%% (want %v%%)", r.Model, r.BoundTokS, r.BoundPct, want)
		}
		if !strings.Contains(out, r.Model) {
			t.Errorf("the table lacks %s:\n%s", r.Model, out)
		}
	}
	if got.Models[0].WeightBytes != floatBytes {
		t.Errorf("llama-tiny: %d weight bytes, want %d", got.Models[0].WeightBytes, floatBytes)
	}
	// Q4_K and Q8_0 matrices are smaller than f32 (the embeddings and norms
	// stay float where they are not whole blocks).
	for _, r := range got.Models[1:] {
		if r.WeightBytes <= 0 || r.WeightBytes >= floatBytes/2 {
			t.Errorf("%s: %d weight bytes, want fewer than half of f32's %d", r.Model, r.WeightBytes, floatBytes)
		}
	}
	// Q4_K_M gives the output and some layers' attn_v and ffn_down more
	// bits than Q4_K (gguf_mixture.go): more bytes.
	if q4, q4m := got.Models[1].WeightBytes, got.Models[2].WeightBytes; q4m <= q4 {
		t.Errorf("llama-tiny-q4_k_m: %d weight bytes, want more than llama-tiny-q4_k's %d", q4m, q4)
	}
	if status, _, errs := loom(t, "bench", "-device", "cpu", "-model", ck, "-dtype", "f64"); status != exitUsage || !strings.Contains(errs, `-dtype "f64"`) {
		t.Errorf("-dtype f64: exit %d, stderr %q", status, errs)
	}
	for _, c := range []struct{ id, want string }{
		{"llama-huge", `unknown model workload "llama-huge"`},
		{"llama-tiny-q8_k", `"q8_k" is not a block format for weights`},
		{"llama1b", "name its weights"},
		{"smol135m", "name its weights"},
		{"smol135m-q9_k", `"smol135m-q9_k"`},
	} {
		status, out, errs := loom(t, "bench", "-device", "cpu", "-workloads", c.id, "-reps", "1", "-elems", "4096")
		if status == exitOK || !strings.Contains(errs, c.id) || !strings.Contains(errs, c.want) {
			t.Errorf("loom bench -workloads %s: exit %d, stderr %q, want an error naming it and %q\nstdout:\n%s", c.id, status, errs, c.want, out)
		}
	}
}

// TestBenchModelDir: with -model-dir, a model workload is written to
// DIR/ID and left there, and a later run benches that file as it is
// (not rewritten: its modification time is kept) with the same weight
// bytes; the temporary folder it was written in is gone.
func TestBenchModelDir(t *testing.T) {
	dir := t.TempDir()
	run := func() modelResult {
		t.Helper()
		js := filepath.Join(t.TempDir(), "b.json")
		status, out, errs := loom(t, "bench", "-device", "cpu", "-workloads", "llama-tiny-q4_k", "-model-dir", dir,
			"-prompt-len", "4", "-decode-steps", "2", "-reps", "1", "-elems", "4096", "-json", js)
		if status != exitOK {
			t.Fatalf("loom bench -model-dir: exit %d\nstdout:\n%s\nstderr:\n%s", status, out, errs)
		}
		raw, err := os.ReadFile(js)
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Models []modelResult }
		if err := json.Unmarshal(raw, &got); err != nil || len(got.Models) != 1 {
			t.Fatalf("JSON %s: %v", raw, err)
		}
		return got.Models[0]
	}
	first := run()
	path := filepath.Join(dir, "llama-tiny-q4_k", "model.gguf")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("the model was not kept: %v", err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	second := run()
	st2, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !st2.ModTime().Equal(old) || st2.Size() != st.Size() {
		t.Errorf("the kept model was rewritten: %v, %d bytes (was %v, %d)", st2.ModTime(), st2.Size(), old, st.Size())
	}
	if first.WeightBytes <= 0 || second.WeightBytes != first.WeightBytes {
		t.Errorf("weight bytes %d, then %d from the kept file", first.WeightBytes, second.WeightBytes)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "llama-tiny-q4_k" {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the folder holds %v, want only llama-tiny-q4_k", names)
	}
}

// TestSmolLMWorkload: smol135m-FORMAT is SmolLM-135M's shape, and under
// llama.cpp's Q4_K_M its 576-value rows fall back (Q4_K → Q5_0, Q6_K →
// Q8_0) as llama.cpp's files of it do; only its ffn_down rows (1,536
// values) keep k-quants.
func TestSmolLMWorkload(t *testing.T) {
	s, err := parseModelWorkload("smol135m-q4_k_m")
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Hidden != 576 || s.cfg.Heads != 9 || s.cfg.KVHeads != 3 || s.cfg.Layers != 30 || s.dt != dtype.BF16 || s.mix == nil {
		t.Fatalf("smol135m-q4_k_m: %+v", s)
	}
	if _, err := parseModelWorkload("smol135m-bf16"); err != nil {
		t.Error(err)
	}
}

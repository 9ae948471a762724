package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/rocm"
	"github.com/loomgraph/loom/model"
)

type generateFlags struct {
	fs       *flag.FlagSet
	model    *string
	prompt   *string
	ids      *string
	n        *int
	temp     *float64
	topK     *int
	topP     *float64
	seed     *uint64
	device   *string
	printIDs *bool
	maxSeq   *int
	dtype    *string
	profile  *bool
	tp       *int
}

func newGenerateFlags(w io.Writer) *generateFlags {
	fs := newFlagSet("generate", w)
	return &generateFlags{
		fs:       fs,
		model:    fs.String("model", "", "the model: a GGUF file, or a directory with config.json and *.safetensors (required)"),
		prompt:   fs.String("prompt", "", "the prompt text, encoded with the model's tokenizer (BOS added as the tokenizer says)"),
		ids:      fs.String("ids", "", "the prompt as token ids, comma-separated (instead of -prompt)"),
		n:        fs.Int("n", 64, "the most tokens to generate"),
		temp:     fs.Float64("temp", 0, "sampling temperature; 0 is greedy"),
		topK:     fs.Int("top-k", 0, "sample among the K most likely tokens (0: all)"),
		topP:     fs.Float64("top-p", 1, "sample among the most likely tokens whose probabilities reach P (1: all)"),
		seed:     fs.Uint64("seed", 0, "the sampler's seed"),
		device:   fs.String("device", "auto", "where to run: "+devices),
		printIDs: fs.Bool("print-ids", false, "print the generated token ids space-separated on one line instead of the text"),
		maxSeq:   fs.Int("max-seq", 0, fmt.Sprintf("the KV cache's length in positions (0: the model's context, at most %d)", model.DefaultMaxSeqLen)),
		dtype:    fs.String("dtype", "", "the compute dtype: f32, f16 or bf16 (default: the weights')"),
		profile:  fs.Bool("profile", false, "GPU: after the rates, print the device time of the run's steps by kind (ops and shapes), the slowest first; the timing events slow the rates a little"),
		tp:       fs.Int("tp", 1, "split the model over N ranks (tensor parallel: attention heads and MLP columns): N GPUs with -device rocm (one per rank, NCCL or RCCL), or N CPU executors with -device cpu"),
	}
}

// runGenerate runs "loom generate": load a model, encode the prompt (or
// take ids), generate, and stream the text (or print the ids), then the
// prompt and decode rates.
func runGenerate(args []string, stdout, stderr io.Writer) int {
	f := newGenerateFlags(stderr)
	if status, ok := parseFlags(f.fs, args); !ok {
		return status
	}
	switch {
	case *f.model == "":
		return usageErr(f.fs, "-model is required")
	case (*f.prompt == "") == (*f.ids == ""):
		return usageErr(f.fs, "give the prompt as one of -prompt TEXT or -ids 1,17,42")
	case *f.n < 0:
		return usageErr(f.fs, "-n %d: want ≥ 0", *f.n)
	case *f.tp < 1:
		return usageErr(f.fs, "-tp %d: want ≥ 1", *f.tp)
	case *f.tp > 1 && *f.profile:
		return usageErr(f.fs, "-profile profiles one GPU: it does not go with -tp %d", *f.tp)
	}
	var ids []int
	if *f.ids != "" {
		for _, s := range strings.Split(*f.ids, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return usageErr(f.fs, "-ids: %q is not a token id", s)
			}
			ids = append(ids, id)
		}
	}
	dt, ok := parseComputeDType(*f.dtype)
	if !ok {
		return usageErr(f.fs, "-dtype %q: want f32, f16 or bf16", *f.dtype)
	}
	opts := model.GenerateOptions{MaxTokens: *f.n, Temperature: *f.temp, TopK: *f.topK, TopP: *f.topP, Seed: *f.seed}
	if _, err := model.NewSampler(opts); err != nil {
		return usageErr(f.fs, "%v", err)
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "loom generate:", err)
		return exitFail
	}

	es, why, err := openExecutors(*f.device, *f.tp)
	if err != nil {
		return fail(err)
	}
	defer closeExecutors(es)
	e := es[0]
	fmt.Fprintf(stderr, "executor: %s\n", why)
	prof, canProfile := e.(*rocm.Executor)
	if *f.profile && !canProfile {
		return usageErr(f.fs, "-profile needs the GPU executor (this run is on %s)", e.Name())
	}
	start := time.Now()
	ms, err := loadRanks(*f.model, es, model.Options{MaxSeqLen: *f.maxSeq, DType: dt})
	if err != nil {
		return fail(err)
	}
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	m := ms[0]
	c := m.Config()
	fmt.Fprintf(stderr, "model: %d layers, hidden %d, %d heads (%d key/value), vocabulary %d; %v, %d quantized weights; %.1f MiB on %s; loaded in %s\n",
		c.Layers, c.Hidden, c.Heads, c.KVHeads, c.Vocab, m.DType(), len(m.Quantized()), float64(m.WeightBytes())/(1<<20), e.Name(), time.Since(start).Round(time.Millisecond))
	tok, tokErr := m.Tokenizer()
	if *f.prompt != "" {
		if tok == nil {
			return fail(fmt.Errorf("-prompt needs the model's tokenizer, and there is none (%v); give -ids instead", tokErr))
		}
		ids = tok.Encode(*f.prompt, true)
	}
	text := !*f.printIDs && tok != nil
	if !*f.printIDs && tok == nil {
		fmt.Fprintf(stderr, "no tokenizer (%v): printing token ids\n", tokErr)
	}
	if text {
		sd := tok.Stream()
		ends := true // the text so far is empty or ends a line
		write := func(s string) {
			if s != "" {
				io.WriteString(stdout, s)
				ends = strings.HasSuffix(s, "\n")
			}
		}
		opts.OnToken = func(id int) bool {
			if !tok.IsStop(id) {
				write(sd.Add(id))
			}
			return true
		}
		g, err := generate(ms, ids, opts, *f.profile, prof, stderr)
		if err != nil {
			return fail(err)
		}
		write(sd.Flush())
		if !ends {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintln(stdout, stats(g))
		return exitOK
	}
	g, err := generate(ms, ids, opts, *f.profile, prof, stderr)
	if err != nil {
		return fail(err)
	}
	strs := make([]string, len(g.Tokens))
	for i, id := range g.Tokens {
		strs[i] = strconv.Itoa(id)
	}
	fmt.Fprintln(stdout, strings.Join(strs, " "))
	fmt.Fprintln(stderr, stats(g))
	return exitOK
}

// generate runs Generate on every rank (ms[r] in its own goroutine, the
// ranks of a tensor-parallel group; one model otherwise) and returns rank
// 0's generation, which alone calls opts.OnToken; with profile (one
// model), under step profiling on e (rocm.Executor.ProfileSteps), and
// writes the device time by kind of step to w as soon as the generation
// ends.
func generate(ms []*model.Model, ids []int, opts model.GenerateOptions, profile bool, e *rocm.Executor, w io.Writer) (*model.Generation, error) {
	m := ms[0]
	if len(ms) > 1 {
		gens := make([]*model.Generation, len(ms))
		errs := make([]error, len(ms))
		var wg sync.WaitGroup
		for r, m := range ms {
			o := opts
			if r > 0 {
				o.OnToken = nil
			}
			wg.Go(func() { gens[r], errs[r] = m.Generate(context.Background(), ids, o) })
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("rank %d: %w", r, err)
			}
		}
		return gens[0], nil
	}
	if !profile {
		return m.Generate(context.Background(), ids, opts)
	}
	if err := e.ProfileSteps(true); err != nil {
		return nil, err
	}
	defer e.ProfileSteps(false)
	g, err := m.Generate(context.Background(), ids, opts)
	if err != nil {
		return nil, err
	}
	steps, err := e.Profile()
	if err != nil {
		return nil, err
	}
	var total float64
	for _, st := range steps {
		total += st.Ms
	}
	fmt.Fprintf(w, "device time of the run's steps: %.3f ms (prefill and %d decode steps)\n", total, g.DecodeSteps)
	for i, st := range steps {
		if i == 40 {
			fmt.Fprintf(w, "  … %d more kinds of step\n", len(steps)-i)
			break
		}
		fmt.Fprintf(w, "  %10.3f ms %5.1f%% %7d×  %s\n", st.Ms, 100*st.Ms/total, st.Count, st.Label)
	}
	return g, nil
}

// stats is the rates line: prompt and decode tokens per second, with the
// counts and times they come from.
func stats(g *model.Generation) string {
	return fmt.Sprintf("prompt: %d tokens, %.1f tokens/s (%s); decode: %d tokens, %.1f tokens/s (%s); stop: %s; compile %s",
		g.PromptTokens, g.PromptTokensPerSecond(), g.Prefill.Round(time.Microsecond),
		g.DecodeSteps, g.DecodeTokensPerSecond(), g.Decode.Round(time.Microsecond), g.StopReason, g.Compile.Round(time.Microsecond))
}

// parseComputeDType reads a -dtype flag: f32, f16 or bf16, or "" for
// dtype.Invalid (the weights' dtype); ok is false for anything else.
func parseComputeDType(s string) (dt dtype.DType, ok bool) {
	if s == "" {
		return dtype.Invalid, true
	}
	d, err := dtype.Parse(s)
	if err != nil || !d.IsFloat() || d == dtype.F64 {
		return dtype.Invalid, false
	}
	return d, true
}

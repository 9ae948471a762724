package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/tensor"
	"github.com/loomgraph/loom/tokenizer"
)

// DefaultMaxSeqLen caps the KV cache length when Options.MaxSeqLen is 0:
// the cache is allocated whole (per layer 2·KVHeads·MaxSeqLen·HeadDim
// elements) and decode attends over all of it, so a 128k context would cost
// memory and time that short generations never use.
const DefaultMaxSeqLen = 2048

// Options control Load.
type Options struct {
	// Executor runs the model; nil means a CPU executor (cpu.New()). On an
	// executor that keeps tensors (exec.Resident, the GPU) the weights are
	// uploaded once and stay there; the KV cache stays there between runs.
	Executor exec.Executor
	// MaxSeqLen is the KV cache's length, the most positions a sequence
	// can have (prompt and generated tokens). 0: the model's context length,
	// at most DefaultMaxSeqLen.
	MaxSeqLen int
	// DType is the compute dtype: f32, f16 or bf16. Invalid (the zero
	// value): the checkpoint's float dtype (config.json's torch_dtype, or
	// the dtype most of its float matrices are stored in); f32 when every
	// matrix is quantized. Float weights are converted to it when loaded;
	// quantized weights stay quantized.
	DType dtype.DType
	// NoReplay runs every decode step kernel by kernel. By default decode
	// steps run under exec.WithReplay: on an executor that records runs
	// (the GPU's CUDA/HIP graphs) a step whose program and memory repeat
	// the previous step's is replayed with one call (exec/replay.go). The
	// results are the same; NoReplay (or LOOM_REPLAY=0 in the environment)
	// is there to measure the difference and to debug.
	NoReplay bool
	// NoPipeline runs greedy decode steps one after the other. By default
	// Generate's greedy steps are pipelined: each step's token and position
	// stay on the executor as the next step's inputs, and the next step is
	// queued before the token is read (exec.Start), so the host's time per
	// token overlaps the device's. Tokens and stop conditions are the same;
	// a step queued past a stop token is computed and dropped.
	// NoPipeline (or LOOM_PIPELINE=0 in the environment) is there to
	// measure the difference and to debug.
	NoPipeline bool
	// Comm makes the model one rank of a tensor-parallel group (see
	// parallel.go): it keeps its shard of the attention heads and the MLP,
	// and its runs all-reduce through Comm, which must be of Executor's
	// kind (cpu.NewGroup, rocm.NewGroup or JoinGroup). Every rank loads
	// the same checkpoint and runs the same calls. nil: the whole model.
	Comm exec.Comm
	// probe, set only by this package's tests (TestGPUSpeed1B's
	// LOOM_LLAMA_PROBE), changes the decode graph to measure one of its
	// parts by difference: probeTinyStep puts one tiny step of its own
	// between each layer's cache scatter and its attention (the position
	// recomputed as (pos + l) − l: the same tokens; the difference is
	// what a one-position scatter's launch costs where it sits in the
	// replayed step), probeNoOutProj adds the attention to the residual
	// without the output projection (wrong tokens, the same shapes: the
	// difference is that product's cost), probeNoAttention passes the
	// queries on in place of the attention's output (wrong tokens, the
	// same shapes: the difference is the attention's cost in the chain),
	// probeNoNorm passes each layer's residual stream to its products
	// without the two RMSNorms (wrong tokens, the same shapes: the
	// difference is what the norm steps cost between the products;
	// random weights overflow to NaN without them, so under a probe the
	// greedy step takes the argmax as it is, NaN or not).
	// H200, session 50, Q4_K, each against the plain step in the same
	// call (median 521.7 / 521.8 µs): tiny-step 532.5 µs (0.7 µs a step
	// of its own there: folding the scatter into a neighbour would save
	// ~11 µs), no-attn-output 491.5 (1.9 µs a 2.4 MB product, of which
	// 0.6 is its bytes at copy speed). Session 51, the same way (plain
	// 521.9 / 522.2 and 520.0 / 519.6 µs in two calls): no-attention
	// 463.6 (the attention 58 µs a step, as in session 50), no-norm 502.0
	// (111.0 launches a token against 142.7: the 32 layer norms cost 18
	// µs a step, 0.56 µs each, so folding them into the products — the
	// consumer's prologue, measured slower in session 48, or the
	// producer's last block — could save at most 3.5% of the step: not
	// built).
	//
	// probeOneLayer gives every layer layer 0's weights (wrong tokens,
	// the same steps; each layer keeps its own cache): a Q4_K layer's
	// weights (34 MB for the 1B shape) then stay in the H200's L2 from
	// layer to layer, so the step shows what its products cost when they
	// need not wait for memory — the most that prefetching the next
	// layer's weights into L2 (while the attention, the norms and the
	// products' ramps leave the memory idle) could give. H200, session
	// 52, against the plain step in the same call (518.6 / 517.7 µs):
	// one-layer 483.7 µs (fastest 468.7 against 490.5–492.3) — 35 µs, 7%
	// of the step. The products are not waiting for memory: a second
	// stream prefetching the next layer into L2 could win at most that
	// (and would contend with the products it overlaps), so it was not
	// built; issue 16's Q4_K 2.5× (~333 µs a step) is out of its reach.
	//
	// (A first probe, "scatter2", wrote each layer's new key and value
	// twice. Measured once (H200, session 50: Q4_K median step 865.8 µs
	// against 519.7–520.2, 190.3 launches a token against 142.7) it timed
	// whole-cache copies, not a scatter: the first scatter's destination
	// was then no longer the donated input, so neither wrote in place
	// (plan.InPlace). Replaced by probeTinyStep.)
	probe string
}

// The decode graph's measurement probes (Options.probe).
const (
	probeTinyStep    = "tiny-step"
	probeNoOutProj   = "no-attn-output"
	probeNoAttention = "no-attention"
	probeNoNorm      = "no-norm"
	probeOneLayer    = "one-layer"
)

// kvName is a layer's cache input and output names.
type kvName struct{ in, out string }

// Model is a loaded llama-architecture decoder: its weights resident on an
// executor, and the programs that run it, compiled on first use. It is safe
// for concurrent use; each Session (a sequence and its KV cache) is not.
type Model struct {
	cfg    Config
	dt     dtype.DType
	e      exec.Executor
	maxSeq int
	replay bool // decode steps run under exec.WithReplay
	// pipeline: Generate's greedy steps chain on the executor (Options.NoPipeline)
	pipeline bool
	probe    string    // Options.probe
	comm     exec.Comm // tensor parallel: this rank's communicator (nil: none)
	lc       Config    // the rank's share of cfg: heads and intermediate divided by the group's size
	// cacheOut marks the programs' cache outputs (outCache), which a run
	// hands to the session rather than freeing.
	cacheOut map[string]bool
	// kvNames are each layer's cache input and output names,
	// made once (a session swaps the caches after every run).
	kvNames []kvName

	weights []wspec               // the graph's weight inputs, in load order
	quant   map[string]quant.Type // block format of each quantized weight input
	stored  map[string]quant.Type // block format of each quantized checkpoint tensor
	fused   map[string][]part     // fused weight input → the matrices it stacks
	// ropePaired holds the fused query/key/value weights whose query and
	// key rows interleave each head's halves (interleaveHalves): the
	// forward pass rotates them with RopeIThdHeads.
	ropePaired map[string]bool
	values     map[string]exec.Value // graph input name → value: weights, rope tables
	wbytes     int64                 // bytes of the weights as placed

	tok    *tokenizer.Tokenizer
	tokErr error

	mu       sync.Mutex
	prefills map[prefillKey]*graph.Program
	decodes  map[decodeKey]*graph.Program
	closed   bool
	// chain holds, per batch size, the two pairs of token and position
	// buffers a pipelined greedy loop writes its steps' outNext and
	// outNextPos into (session.go, chainPairs), kept from one Generate to
	// the next while no session holds them. Guarded by mu.
	chain map[int]*[2]chainPair
}

// part is one matrix of a fused weight: its name and rows.
type part struct {
	name string
	rows int
}

// Fused projections. The products that read one activation — a layer's
// query, key and value projections, and its gate and up projections — are
// stacked into one weight at load time ("blk.N.attn_qkv.weight",
// "blk.N.ffn_gate_up.weight"): one product instead of three or two, whose
// result the forward pass splits with views (Narrow, no copy). A decode
// step then launches 48 fewer mat-vecs for a 16-layer model, and the small
// key/value products (which alone could not fill the GPU) ride with the
// query's. Each output element is the same dot product as before. The
// matrices are stacked only when they are stored alike (all float, or all
// in one block format); biases stay separate and are added per part.
// pairedFusion is the fusion whose parts are interleaved row by row rather
// than stacked: a layer's gate and up projections, so that the product's
// neighbouring outputs are a (gate, up) pair and SwiGLU joins it as a pair
// epilogue (fuse's core-fusion, plan.Kernel.PairEpilogue) — stored as each
// pair is computed, not by a kernel of its own (16 launches a 1B decode
// step). paired reports whether a fused weight's name is such a fusion's.
const pairedFusion = "ffn_gate_up"

func paired(name string) bool { return strings.HasSuffix(name, "."+pairedFusion+".weight") }

// noQKFusion (LOOM_QK_FUSION=0) leaves a layer's queries and keys two
// products where its values are stored otherwise, to compare.
var noQKFusion = os.Getenv("LOOM_QK_FUSION") == "0"

// noWidenFusion (LOOM_WIDEN_FUSION=0) keeps apart, to compare, what is
// otherwise fused: parts stored in different formats where every part is
// Q4_0, Q5_0 or Q8_0 and one is Q8_0, the others re-encoded as Q8_0 at
// load (quant.WidenToQ8_0: the same values, so the same products up to the
// order of their float sums). llama.cpp's k-quant files of models whose
// rows are not whole 256-value super-blocks (SmolLM's 576, Qwen2-0.5B's
// 896) store the queries and keys in Q5_0 and half the layers' values in
// Q8_0: unfused, those layers take the values' product and a
// concatenation of the keys and values as two launches more a decode
// step. The widened queries and keys are 1.55× the bytes (34 a block
// against 22).
var noWidenFusion = os.Getenv("LOOM_WIDEN_FUSION") == "0"

var fusions = []struct {
	name  string
	parts []string
}{
	{"attn_qkv", []string{"attn_q", "attn_k", "attn_v"}},
	// attn_qk: the query and key projections where the values' are stored
	// otherwise (llama.cpp's Q4_K_M and Q5_K_M files give some layers'
	// attn_v Q6_K and the rest Q4_K or Q5_K), tried only when attn_qkv was
	// not formed: one product and one rotation for the two, the values a
	// product of their own.
	{"attn_qk", []string{"attn_q", "attn_k"}},
	{"ffn_gate_up", []string{"ffn_gate", "ffn_up"}},
}

// wspec is one weight of the model: its GGUF-style name (the graph input's
// name) and logical row-major shape.
type wspec struct {
	name     string
	shape    []int
	matrix   bool // a 2-D weight: may be stored in a GGML block format
	optional bool // a bias: used when the checkpoint holds it
}

// weightSpecs lists every weight the config implies.
func weightSpecs(c Config) []wspec {
	C, V, I := c.Hidden, c.Vocab, c.Intermediate
	specs := []wspec{{name: "token_embd.weight", shape: []int{V, C}, matrix: true}}
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add := func(name string, out, in int) {
			specs = append(specs, wspec{name: p + name + ".weight", shape: []int{out, in}, matrix: true},
				wspec{name: p + name + ".bias", shape: []int{out}, optional: true})
		}
		specs = append(specs, wspec{name: p + "attn_norm.weight", shape: []int{C}})
		add("attn_q", c.qDim(), C)
		add("attn_k", c.kvDim(), C)
		add("attn_v", c.kvDim(), C)
		add("attn_output", C, c.qDim())
		specs = append(specs, wspec{name: p + "ffn_norm.weight", shape: []int{C}})
		add("ffn_gate", I, C)
		add("ffn_up", I, C)
		add("ffn_down", C, I)
	}
	specs = append(specs, wspec{name: "output_norm.weight", shape: []int{C}})
	if !c.TieEmbeddings {
		specs = append(specs, wspec{name: "output.weight", shape: []int{V, C}, matrix: true})
	}
	return specs
}

// Load reads a model: a GGUF file (general.architecture "llama"; float or
// GGML block-format weights) or a directory with config.json and
// *.safetensors (model_type llama, mistral or qwen2; f32, f16 or bf16). It
// checks every tensor against the config before converting or uploading
// anything, so a bad checkpoint is refused whole, naming the tensors at
// fault; the weights then go to opts.Executor once. The tokenizer comes
// from the GGUF metadata or from tokenizer.json beside the safetensors
// (Tokenizer reports why there is none).
func Load(path string, opts Options) (*Model, error) {
	o, err := openCheckpoint(path)
	if err != nil {
		return nil, err
	}
	defer o.ck.close()
	ck, cfg := o.ck, o.cfg
	fail := func(err error) (*Model, error) { return nil, fmt.Errorf("model: load %s: %w", path, err) }
	if err := cfg.Validate(); err != nil {
		return fail(err)
	}
	specs, found, err := checkWeights(ck, cfg)
	if err != nil {
		return fail(err)
	}
	dt, err := computeDType(opts.DType, o.declared, specs, found)
	if err != nil {
		return fail(err)
	}
	maxSeq := opts.MaxSeqLen
	switch {
	case maxSeq < 0:
		return fail(fmt.Errorf("Options.MaxSeqLen is %d, want ≥ 0", maxSeq))
	case maxSeq == 0 && cfg.ContextLength > 0:
		maxSeq = min(cfg.ContextLength, DefaultMaxSeqLen)
	case maxSeq == 0:
		maxSeq = DefaultMaxSeqLen
	}
	if w := cfg.SlidingWindow; w > 0 && maxSeq > w {
		return fail(fmt.Errorf("the model attends over a sliding window of %d positions, which Loom does not implement; it computes the same with Options.MaxSeqLen ≤ %d (asked for %d)", w, w, maxSeq))
	}
	inv, err := invFreq(cfg, o.ropeFactors)
	if err != nil {
		return fail(err)
	}
	e := opts.Executor
	if e == nil {
		e = cpu.New()
	}
	m := &Model{cfg: cfg, dt: dt, e: e, maxSeq: maxSeq, weights: specs,
		quant: map[string]quant.Type{}, stored: map[string]quant.Type{}, fused: map[string][]part{}, values: map[string]exec.Value{},
		ropePaired: map[string]bool{},
		prefills:   map[prefillKey]*graph.Program{}, decodes: map[decodeKey]*graph.Program{},
		replay:   !opts.NoReplay && os.Getenv("LOOM_REPLAY") != "0",
		pipeline: !opts.NoPipeline && os.Getenv("LOOM_PIPELINE") != "0", probe: opts.probe}
	m.cacheOut = map[string]bool{}
	for l := range cfg.Layers {
		m.cacheOut[outCache(l)] = true
		m.kvNames = append(m.kvNames, kvName{in: inCache(l), out: outCache(l)})
	}
	if err := m.setParallel(opts.Comm); err != nil {
		return fail(err)
	}
	if err := m.place(found, inv); err != nil {
		m.free()
		return fail(err)
	}
	m.tok, m.tokErr = loadTokenizer(path, ck)
	return m, nil
}

// checkWeights finds every weight of the config in the checkpoint and
// checks its shape and format, reporting every problem at once. It returns
// the weights present (biases only where stored) and their stored form.
func checkWeights(ck checkpoint, cfg Config) ([]wspec, map[string]stored, error) {
	var errs []error
	var specs []wspec
	shapes := false
	found := map[string]stored{}
	for _, w := range weightSpecs(cfg) {
		s, ok := ck.lookup(w.name)
		switch {
		case !ok && w.optional:
			continue
		case !ok:
			name := w.name
			if _, isHF := ck.(*stDir); isHF {
				name = fmt.Sprintf("%q (%s)", hfName(w.name), w.name)
			} else {
				name = fmt.Sprintf("%q", name)
			}
			errs = append(errs, fmt.Errorf("missing tensor %s", name))
			continue
		case !slices.Equal(s.shape, w.shape):
			errs = append(errs, fmt.Errorf("tensor %q has shape %v, the config wants %v", s.name, s.shape, w.shape))
			shapes = true
			continue
		}
		if err := checkFormat(s, w); err != nil {
			errs = append(errs, err)
			continue
		}
		specs = append(specs, w)
		found[w.name] = s
	}
	if shapes {
		errs = append(errs, fmt.Errorf("(the config: %d layers, hidden %d, %d heads of %d over %d key/value heads, intermediate %d, vocabulary %d)",
			cfg.Layers, cfg.Hidden, cfg.Heads, cfg.HeadDim, cfg.KVHeads, cfg.Intermediate, cfg.Vocab))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return specs, found, nil
}

// checkFormat accepts f32/f16/bf16 for every weight and the GGML block
// formats Loom computes with for matrices.
func checkFormat(s stored, w wspec) error {
	if s.unsupported != "" {
		return fmt.Errorf("tensor %q has %s: only F32, F16 and BF16 are supported", s.name, s.unsupported)
	}
	if isFloatFormat(s.format) {
		return nil
	}
	tr, known := s.format.Traits()
	switch {
	case !w.matrix:
		return fmt.Errorf("tensor %q is stored as %v; a %d-D weight must be f32, f16 or bf16", s.name, s.format, len(w.shape))
	case !known || !tr.Supported:
		return fmt.Errorf("tensor %q is stored as %v, a format Loom does not compute with", s.name, s.format)
	}
	if _, err := ir.QuantRowBytes(s.format, w.shape[1]); err != nil {
		return fmt.Errorf("tensor %q: %v", s.name, err)
	}
	return nil
}

// computeDType picks the compute dtype: the caller's, the checkpoint's
// declared one, or the float format most matrices are stored in.
func computeDType(want, declared dtype.DType, specs []wspec, found map[string]stored) (dtype.DType, error) {
	switch want {
	case dtype.F32, dtype.F16, dtype.BF16:
		return want, nil
	case dtype.Invalid:
	default:
		return 0, fmt.Errorf("Options.DType %v: want f32, f16 or bf16", want)
	}
	if declared != dtype.Invalid {
		return declared, nil
	}
	of := map[quant.Type]dtype.DType{quant.F32: dtype.F32, quant.F16: dtype.F16, quant.BF16: dtype.BF16}
	count := map[dtype.DType]int{}
	for _, w := range specs {
		if d, ok := of[found[w.name].format]; ok && w.matrix {
			count[d]++
		}
	}
	best := dtype.F32
	for _, d := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16} {
		if count[d] > count[best] {
			best = d
		}
	}
	return best, nil
}

// place converts every weight and puts it on the executor (stacking the
// fused projections: see fusions); the rope tables too. On error the caller
// frees what was placed.
func (m *Model) place(found map[string]stored, inv []float32) error {
	// The fusable groups: every part present and stored alike, or in
	// formats that widen to Q8_0 without loss beside a Q8_0 part (see
	// noWidenFusion).
	groupOf := map[string]string{} // part weight name → fused weight name
	widen := map[string]bool{}     // part weight name → re-encoded as Q8_0
	for l := range m.cfg.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		for _, fu := range fusions {
			var formats []quant.Type
			var parts []part
			for _, n := range fu.parts {
				s, ok := found[p+n+".weight"]
				if _, taken := groupOf[p+n+".weight"]; !ok || taken {
					break // missing, or a part of an earlier fusion
				}
				f := s.format
				if isFloatFormat(f) {
					f = quant.F32 // every float format is converted to the compute dtype
				}
				formats = append(formats, f)
				rows := s.shape[0]
				if m.parallel() && shardOf(p+n+".weight") == shardRows {
					rows /= m.comm.Size()
				}
				parts = append(parts, part{p + n + ".weight", rows})
			}
			if len(parts) != len(fu.parts) {
				continue
			}
			mixed := slices.ContainsFunc(formats, func(f quant.Type) bool { return f != formats[0] })
			if mixed && (noWidenFusion || !slices.ContainsFunc(formats, func(f quant.Type) bool { return f == quant.Q8_0 }) ||
				slices.ContainsFunc(formats, func(f quant.Type) bool { return !quant.WidensToQ8_0(f) })) {
				continue
			}
			if fu.name == "attn_qk" && noQKFusion {
				continue
			}
			if mixed {
				for i, pt := range parts {
					if formats[i] != quant.Q8_0 {
						widen[pt.name] = true
					}
				}
			}
			name := p + fu.name + ".weight"
			m.fused[name] = parts
			// The queries' and keys' rotation joins the product as its pair
			// epilogue where no bias comes between (see ropePaired).
			if (fu.name == "attn_qkv" || fu.name == "attn_qk") && !slices.ContainsFunc(fu.parts, func(n string) bool {
				_, ok := found[p+n+".bias"]
				return ok
			}) {
				m.ropePaired[name] = true
			}
			for _, pt := range parts {
				groupOf[pt.name] = name
			}
		}
	}
	pending := map[string][]*tensor.Tensor{} // fused name → its parts' tensors so far
	// On an executor that keeps tensors (exec.Resident: the GPU), Upload
	// has copied the host tensor's bytes when it returns (hip's
	// MemcpyHtoD waits for its stream), and the model keeps only the
	// device copy: every weight is read from the checkpoint's mapping in
	// place and uploaded from there, not copied on the host first. On the
	// CPU the host tensor is the weight the runs read, so it is a copy
	// that outlives the mapping (except a fused weight's parts, which
	// combine copies).
	_, resident := m.e.(exec.Resident)
	var weights []wspec
	for _, w := range m.weights {
		s := found[w.name]
		var t *tensor.Tensor
		var err error
		quantized := !isFloatFormat(s.format)
		// A fused weight's parts are copied into the fused tensor below
		// (combine), so they are read from the mapping in place rather
		// than copied twice.
		_, part := groupOf[w.name]
		view := part || resident
		format := s.format
		if quantized {
			t, err = s.rawTensor(view)
			m.stored[w.name] = s.format
			if err == nil && widen[w.name] {
				var b []byte
				if b, err = quant.WidenToQ8_0(s.format, t.Bytes()); err == nil {
					format = quant.Q8_0
					t, err = tensor.New(b, t.Shape()[0], len(b)/max(t.Shape()[0], 1))
				}
			}
		} else {
			t, err = s.floatTensor(m.dt, view)
		}
		if err != nil {
			return fmt.Errorf("tensor %q: %w", s.name, err)
		}
		if t, w.shape, err = m.shard(w.name, t, w.shape, format, quantized); err != nil {
			return err
		}
		name := w.name
		if fu, ok := groupOf[w.name]; ok {
			pending[fu] = append(pending[fu], t)
			if len(pending[fu]) < len(m.fused[fu]) {
				continue
			}
			combine := stackRows
			if paired(fu) {
				combine = interleaveRows
			}
			if m.ropePaired[fu] {
				// The queries' and keys' rows, each head's halves
				// interleaved (the values' stay).
				for i := range 2 {
					if pending[fu][i], err = interleaveHalves(pending[fu][i], m.cfg.HeadDim); err != nil {
						return fmt.Errorf("tensor %q: %w", m.fused[fu][i].name, err)
					}
				}
			}
			if t, err = combine(pending[fu]); err != nil {
				return fmt.Errorf("tensor %q: %w", fu, err)
			}
			delete(pending, fu)
			name, w = fu, wspec{name: fu, shape: []int{t.Shape()[0], w.shape[1]}, matrix: true}
		}
		if quantized {
			m.quant[name] = format
		}
		v, err := placeTensor(m.e, t)
		if err != nil {
			return fmt.Errorf("tensor %q: upload to %s: %w", name, exec.DescribeExecutor(m.e), err)
		}
		m.values[name] = v
		m.wbytes += int64(len(t.Bytes()))
		weights = append(weights, w)
	}
	m.weights = weights
	cos, sin, err := ropeTables(inv, m.maxSeq, m.dt)
	if err != nil {
		return err
	}
	for name, t := range map[string]*tensor.Tensor{inRopeCos: cos, inRopeSin: sin} {
		v, err := placeTensor(m.e, t)
		if err != nil {
			return fmt.Errorf("rope table: upload to %s: %w", exec.DescribeExecutor(m.e), err)
		}
		m.values[name] = v
	}
	return nil
}

// placeTensor makes t an input value that stays on e: on an executor that
// keeps tensors (exec.Resident) it is uploaded once and wrapped as a
// resident tensor, which runs then read without a copy; elsewhere (the
// CPU, whose uploads alias host memory) the host tensor is the value.
func placeTensor(e exec.Executor, t *tensor.Tensor) (exec.Value, error) {
	r, ok := e.(exec.Resident)
	if !ok {
		return t, nil
	}
	mem, err := e.Upload(t)
	if err != nil {
		return nil, err
	}
	v, err := r.Wrap(mem, &plan.Buffer{DType: t.DType(), Shape: t.Shape(), Kind: plan.BufInput, Slot: -1})
	if err != nil {
		e.Release(mem)
		return nil, err
	}
	return v, nil
}

// freeValue releases a resident value (a no-op for host tensors).
func freeValue(v exec.Value) {
	if f, ok := v.(interface{ Free() }); ok {
		f.Free()
	}
}

// hostValue returns v as a host tensor: itself, or a copy of a resident
// tensor.
func hostValue(v exec.Value) (*tensor.Tensor, error) {
	switch t := v.(type) {
	case *tensor.Tensor:
		return t, nil
	case interface {
		ToHost() (*tensor.Tensor, error)
	}:
		return t.ToHost()
	}
	return nil, fmt.Errorf("model: cannot copy %T to the host", v)
}

func (m *Model) free() {
	for _, v := range m.values {
		freeValue(v)
	}
	m.values = nil
}

// Close frees the weights on the executor. Sessions of the model must not
// be used afterwards. Closing twice is not an error.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		m.free()
		for _, pairs := range m.chain {
			freePairs(pairs)
		}
		clear(m.chain)
		// The executor's recordings of the decode programs (exec.Replayer)
		// hold scratch memory until they are forgotten.
		if r, ok := m.e.(exec.Replayer); ok {
			for _, p := range m.decodes {
				r.Forget(p.Plan())
			}
		}
	}
	return nil
}

// Config returns the model's configuration.
func (m *Model) Config() Config { return m.cfg }

// DType is the compute dtype.
func (m *Model) DType() dtype.DType { return m.dt }

// MaxSeqLen is the KV cache's length: the most positions a sequence can
// hold.
func (m *Model) MaxSeqLen() int { return m.maxSeq }

// Executor is the executor the model runs on.
func (m *Model) Executor() exec.Executor { return m.e }

// WeightBytes is the size of the weights as placed on the executor (float
// weights in the compute dtype, quantized ones as stored), plus the rope
// tables.
func (m *Model) WeightBytes() int64 {
	return m.wbytes + 2*int64(m.maxSeq*m.cfg.HeadDim/2*m.dt.Size())
}

// Quantized reports the block format of each weight stored quantized, by
// its name in the checkpoint's (GGUF-style) naming.
func (m *Model) Quantized() map[string]quant.Type {
	out := make(map[string]quant.Type, len(m.stored))
	for k, v := range m.stored {
		out[k] = v
	}
	return out
}

// Tokenizer returns the model's tokenizer, or an error saying why there is
// none (no tokenizer metadata or tokenizer.json, or one Loom cannot read).
func (m *Model) Tokenizer() (*tokenizer.Tokenizer, error) {
	if m.tok == nil {
		return nil, m.tokErr
	}
	return m.tok, nil
}

// loadTokenizer builds the tokenizer of a checkpoint: from the GGUF
// tokenizer.ggml.* metadata, or from tokenizer.json (with
// tokenizer_config.json, and generation_config.json's eos_token_id as the
// stop tokens) in a safetensors directory.
func loadTokenizer(path string, ck checkpoint) (*tokenizer.Tokenizer, error) {
	if g, ok := ck.(*ggufFile); ok {
		md := ggufMetadata{&g.f.Metadata}
		if !md.Has(tokenizer.KeyModel) {
			return nil, fmt.Errorf("model: %s has no tokenizer metadata (%s)", path, tokenizer.KeyModel)
		}
		return tokenizer.NewFromGGUF(md)
	}
	tj := filepath.Join(path, "tokenizer.json")
	if _, err := os.Stat(tj); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model: %s has no tokenizer.json", path)
	}
	tok, err := tokenizer.LoadJSON(tj)
	if err != nil {
		return nil, err
	}
	if stop, err := generationStops(filepath.Join(path, "generation_config.json")); err != nil {
		return nil, err
	} else if len(stop) > 0 {
		if err := tok.SetStopTokens(stop...); err != nil {
			return nil, err
		}
	}
	return tok, nil
}

// generationStops reads eos_token_id (one id or a list) from a
// generation_config.json; none when the file is absent.
func generationStops(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var g struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	if len(g.EOS) == 0 || string(g.EOS) == "null" {
		return nil, nil
	}
	var one int
	if json.Unmarshal(g.EOS, &one) == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(g.EOS, &many); err != nil {
		return nil, fmt.Errorf("model: %s: eos_token_id: %w", path, err)
	}
	return many, nil
}

// ggufMetadata adapts gguf.Metadata to tokenizer.Metadata.
type ggufMetadata struct{ md *gguf.Metadata }

func (g ggufMetadata) Has(key string) bool                  { _, ok := g.md.Get(key); return ok }
func (g ggufMetadata) String(key string) (string, error)    { return g.md.String(key) }
func (g ggufMetadata) Strings(key string) ([]string, error) { return g.md.Strings(key) }
func (g ggufMetadata) Bool(key string) (bool, error)        { return g.md.Bool(key) }

func (g ggufMetadata) Float32s(key string) ([]float32, error) {
	a, err := g.md.Array(key)
	if err != nil {
		return nil, err
	}
	return gguf.Elems[float32](a)
}

func (g ggufMetadata) Int32s(key string) ([]int32, error) {
	a, err := g.md.Array(key)
	if err != nil {
		return nil, err
	}
	xs, err := a.Ints()
	if err != nil {
		return nil, err
	}
	out := make([]int32, len(xs))
	for i, x := range xs {
		if int64(int32(x)) != x {
			return nil, fmt.Errorf("gguf: metadata key %q: element %d (%d) does not fit in int32", key, i, x)
		}
		out[i] = int32(x)
	}
	return out, nil
}

func (g ggufMetadata) Uint32(key string) (uint32, error) {
	v, err := g.md.Uint(key)
	if err != nil {
		return 0, err
	}
	if v > 1<<32-1 {
		return 0, fmt.Errorf("gguf: metadata key %q: %d does not fit in uint32", key, v)
	}
	return uint32(v), nil
}

// interleaveRows is the rows of two matrices alike in shape and dtype taken
// in turn: a's row i at 2i, b's at 2i+1. A layer's gate and up projections
// are stacked so (see pairedFusion), the row bytes moved whole, so a block
// format's rows interleave as its values would.
func interleaveRows(ts []*tensor.Tensor) (*tensor.Tensor, error) {
	if len(ts) != 2 || !slices.Equal(ts[0].Shape(), ts[1].Shape()) || len(ts[0].Shape()) != 2 || ts[0].DType() != ts[1].DType() {
		return nil, fmt.Errorf("cannot interleave %d matrices of shapes %v", len(ts), func() [][]int {
			var s [][]int
			for _, t := range ts {
				s = append(s, t.Shape())
			}
			return s
		}())
	}
	rows, cols := ts[0].Shape()[0], ts[0].Shape()[1]
	out, err := tensor.Zeros(ts[0].DType(), 2*rows, cols)
	if err != nil {
		return nil, err
	}
	rb := len(ts[0].Bytes()) / max(rows, 1)
	dst, a, b := out.Bytes(), ts[0].Bytes(), ts[1].Bytes()
	for i := range rows {
		copy(dst[(2*i)*rb:(2*i+1)*rb], a[i*rb:(i+1)*rb])
		copy(dst[(2*i+1)*rb:(2*i+2)*rb], b[i*rb:(i+1)*rb])
	}
	return out, nil
}

// interleaveHalves returns t [rows, …] with each head's rows (d of them)
// reordered so that row i of the first half and row i of the second
// (Hugging Face's rotate_half pairs, i and i + d/2) become rows 2i and
// 2i+1: llama.cpp's converter does the same to Q and K (undoPermute undoes
// it). A rotation of interleaved pairs (RopeIThdHeads) of the product's
// output then equals the half-split rotation of the original's, permuted
// the same way for queries and keys, which leaves every query·key product
// as it was; and the product's neighbouring outputs are the pairs, so the
// rotation joins it as its pair epilogue (plan.Kernel.PairKeep: a kernel
// less a layer in a decode step). Rows move whole, quantized rows too.
func interleaveHalves(t *tensor.Tensor, d int) (*tensor.Tensor, error) {
	s := t.Shape()
	if len(s) != 2 || d < 2 || d%2 != 0 || s[0]%d != 0 {
		return nil, fmt.Errorf("cannot interleave the halves of heads of %d rows in a tensor of shape %v", d, s)
	}
	out, err := tensor.Zeros(t.DType(), s...)
	if err != nil {
		return nil, err
	}
	copy(out.Bytes(), permuteHalves(t.Bytes(), s[0], s[0]/d, true))
	return out, nil
}

// stackRows concatenates row-major 2-D tensors of one dtype and row length
// along their rows.
func stackRows(ts []*tensor.Tensor) (*tensor.Tensor, error) {
	rows, cols := 0, ts[0].Shape()[1]
	for _, t := range ts {
		if sh := t.Shape(); len(sh) != 2 || sh[1] != cols || t.DType() != ts[0].DType() {
			return nil, fmt.Errorf("cannot stack %v%v under %v%v", t.DType(), sh, ts[0].DType(), ts[0].Shape())
		}
		rows += t.Shape()[0]
	}
	out, err := tensor.Zeros(ts[0].DType(), rows, cols)
	if err != nil {
		return nil, err
	}
	dst := out.Bytes()
	for _, t := range ts {
		dst = dst[copy(dst, t.Bytes()):]
	}
	return out, nil
}

package model

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/quant"
	"github.com/loomgraph/loom/safetensors"
	"github.com/loomgraph/loom/tensor"
)

// Test models: seeded random weights in Hugging Face's layout, written as
// a transformers checkpoint (config.json + model.safetensors) or as GGUF
// the way llama.cpp's converter writes it. The weights are a function of
// (config, seed, dtype) alone, so tests and the reference script
// (scripts/llama_refs.py) can agree on a model without anyone storing it.

// TinyConfig is the small test model: 4 layers, hidden 256, 8 heads over
// 2 key/value heads (head dim 32), intermediate 688, vocabulary 1024.
func TinyConfig() Config {
	return Config{Layers: 4, Hidden: 256, Heads: 8, KVHeads: 2, HeadDim: 32, Intermediate: 688, Vocab: 1024,
		ContextLength: 2048, RopeTheta: 10000, RMSEps: 1e-5}
}

// SmolLM135MConfig has SmolLM-135M's shape (a llama; Hugging Face's
// HuggingFaceTB/SmolLM-135M config): 30 layers, hidden 576, 9 heads over 3
// key/value heads (head dim 64), intermediate 1536, vocabulary 49152, rope
// theta 10000, tied embeddings. Its rows of 576 values are not whole
// k-quant super-blocks, so llama.cpp's k-quant mixtures store most of its
// matrices in their fallbacks (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0).
func SmolLM135MConfig() Config {
	return Config{Layers: 30, Hidden: 576, Heads: 9, KVHeads: 3, HeadDim: 64, Intermediate: 1536, Vocab: 49152,
		ContextLength: 2048, RopeTheta: 10000, RMSEps: 1e-5, TieEmbeddings: true}
}

// Llama1BConfig has Llama 3.2 1B's shape: 16 layers, hidden 2048, 32 heads
// over 8 key/value heads (head dim 64), intermediate 8192, vocabulary
// 128256, rope theta 500000 with llama3 scaling (factor 32, low/high 1/4,
// original context 8192), tied embeddings.
func Llama1BConfig() Config {
	return Config{Layers: 16, Hidden: 2048, Heads: 32, KVHeads: 8, HeadDim: 64, Intermediate: 8192, Vocab: 128256,
		ContextLength: 131072, RopeTheta: 500000, RMSEps: 1e-5, TieEmbeddings: true,
		RopeScaling: RopeScaling{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}}
}

// NamedTensor is a weight with its Hugging Face name.
type NamedTensor struct {
	Name string
	T    *tensor.Tensor
}

// RandomWeights returns seeded random weights for cfg in Hugging Face's
// names, in dtype dt (f32, f16 or bf16), sorted by name. Each tensor draws
// from its own PCG stream (seed, FNV-1a of its name), so the weights do not
// depend on the order or parallelism of the drawing. Scales keep the
// activations of order one: matrices N(0, 1/fan_in), the embedding N(0, 1),
// norm weights 1 + 0.1·N(0, 1), biases 0.1·N(0, 1).
func RandomWeights(cfg Config, seed uint64, dt dtype.DType) ([]NamedTensor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dt != dtype.F32 && dt != dtype.F16 && dt != dtype.BF16 {
		return nil, fmt.Errorf("model: random weights: dtype %v, want f32, f16 or bf16", dt)
	}
	var want []wspec
	for _, w := range weightSpecs(cfg) {
		if w.optional {
			attn := strings.Contains(w.name, ".attn_")
			if attn && !cfg.AttentionBias || !attn && !cfg.MLPBias {
				continue
			}
		}
		want = append(want, w)
	}
	out := make([]NamedTensor, len(want))
	errs := make([]error, len(want))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, w := range want {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i].Name = hfName(w.name)
			out[i].T, errs[i] = randomTensor(w, seed, dt)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func randomTensor(w wspec, seed uint64, dt dtype.DType) (*tensor.Tensor, error) {
	h := fnv.New64a()
	h.Write([]byte(hfName(w.name)))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	mean, std := 0.0, 0.1
	switch {
	case w.name == "token_embd.weight":
		std = 1
	case w.matrix:
		std = 1 / math.Sqrt(float64(w.shape[1]))
	case strings.HasSuffix(w.name, "norm.weight"):
		mean = 1
	}
	t, err := tensor.Zeros(dt, w.shape...)
	if err != nil {
		return nil, err
	}
	n := t.Numel()
	switch d := t.Data().(type) {
	case []float32:
		for i := range n {
			d[i] = float32(mean + std*rng.NormFloat64())
		}
	case []dtype.Float16:
		for i := range n {
			d[i] = dtype.ToF16From64(mean + std*rng.NormFloat64())
		}
	case []dtype.BFloat16:
		for i := range n {
			d[i] = dtype.ToBF16From64(mean + std*rng.NormFloat64())
		}
	}
	return t, nil
}

// WriteTestModel writes RandomWeights(cfg, seed, dt) as a Hugging Face
// checkpoint in dir (created if needed): config.json and model.safetensors.
func WriteTestModel(dir string, cfg Config, seed uint64, dt dtype.DType) error {
	ws, err := RandomWeights(cfg, seed, dt)
	if err != nil {
		return err
	}
	return WriteHF(dir, cfg, ws)
}

// hfConfigOut is the config.json WriteHF writes: what transformers'
// LlamaConfig reads (4.x and 5.x: 5 moves rope_theta and rope_scaling into
// rope_parameters when it loads them).
type hfConfigOut struct {
	Architectures         []string       `json:"architectures"`
	ModelType             string         `json:"model_type"`
	HiddenAct             string         `json:"hidden_act"`
	HiddenSize            int            `json:"hidden_size"`
	IntermediateSize      int            `json:"intermediate_size"`
	NumHiddenLayers       int            `json:"num_hidden_layers"`
	NumAttentionHeads     int            `json:"num_attention_heads"`
	NumKeyValueHeads      int            `json:"num_key_value_heads"`
	HeadDim               int            `json:"head_dim"`
	VocabSize             int            `json:"vocab_size"`
	MaxPositionEmbeddings int            `json:"max_position_embeddings"`
	RMSNormEps            pyFloat        `json:"rms_norm_eps"`
	RopeTheta             pyFloat        `json:"rope_theta"`
	RopeScaling           map[string]any `json:"rope_scaling"`
	TieWordEmbeddings     bool           `json:"tie_word_embeddings"`
	AttentionBias         bool           `json:"attention_bias"`
	MLPBias               bool           `json:"mlp_bias"`
	TorchDType            string         `json:"torch_dtype"`
}

// pyFloat is a float that JSON-encodes with a decimal point or exponent
// even when integral (32.0, not 32), as Python writes floats: transformers
// checks that rope scaling factors are floats.
type pyFloat float64

func (f pyFloat) MarshalJSON() ([]byte, error) {
	s := strconv.FormatFloat(float64(f), 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") { // n: NaN, Inf (refused by encoding/json anyway)
		s += ".0"
	}
	return []byte(s), nil
}

var torchNames = map[dtype.DType]string{dtype.F32: "float32", dtype.F16: "float16", dtype.BF16: "bfloat16"}

// WriteHF writes weights (Hugging Face names, one float dtype) as a
// transformers checkpoint in dir: config.json for cfg and one
// model.safetensors.
func WriteHF(dir string, cfg Config, weights []NamedTensor) error {
	if len(weights) == 0 {
		return fmt.Errorf("model: write %s: no weights", dir)
	}
	dt := weights[0].T.DType()
	sdt := map[dtype.DType]safetensors.DType{dtype.F32: safetensors.F32, dtype.F16: safetensors.F16, dtype.BF16: safetensors.BF16}
	var ts []safetensors.WriteTensor
	for _, w := range weights {
		d, ok := sdt[w.T.DType()]
		if !ok || w.T.DType() != dt {
			return fmt.Errorf("model: write %s: tensor %q is %v; every weight must be one of f32, f16, bf16, and all the same (%v)", dir, w.Name, w.T.DType(), dt)
		}
		ts = append(ts, safetensors.WriteTensor{Name: w.Name, DType: d, Shape: w.T.Shape(), Data: w.T.Bytes()})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	out := hfConfigOut{Architectures: []string{"LlamaForCausalLM"}, ModelType: "llama", HiddenAct: "silu",
		HiddenSize: cfg.Hidden, IntermediateSize: cfg.Intermediate, NumHiddenLayers: cfg.Layers,
		NumAttentionHeads: cfg.Heads, NumKeyValueHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, VocabSize: cfg.Vocab,
		MaxPositionEmbeddings: cfg.ContextLength, RMSNormEps: pyFloat(cfg.RMSEps), RopeTheta: pyFloat(cfg.RopeTheta),
		TieWordEmbeddings: cfg.TieEmbeddings, AttentionBias: cfg.AttentionBias, MLPBias: cfg.MLPBias, TorchDType: torchNames[dt]}
	switch s := cfg.RopeScaling; s.Type {
	case "linear":
		out.RopeScaling = map[string]any{"rope_type": "linear", "factor": pyFloat(s.Factor)}
	case "llama3":
		out.RopeScaling = map[string]any{"rope_type": "llama3", "factor": pyFloat(s.Factor), "low_freq_factor": pyFloat(s.LowFreqFactor),
			"high_freq_factor": pyFloat(s.HighFreqFactor), "original_max_position_embeddings": s.OriginalContext}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"})
}

// ggufName maps a Hugging Face name to llama.cpp's.
func ggufName(hf string) string {
	for _, w := range []string{"token_embd.weight", "output_norm.weight", "output.weight"} {
		if hfName(w) == hf {
			return w
		}
	}
	var layer int
	var rest string
	if n, _ := fmt.Sscanf(hf, "model.layers.%d.%s", &layer, &rest); n != 2 {
		return ""
	}
	for _, part := range []string{"attn_norm", "ffn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"} {
		for _, suffix := range []string{"weight", "bias"} {
			g := fmt.Sprintf("blk.%d.%s.%s", layer, part, suffix)
			if hfName(g) == hf {
				return g
			}
		}
	}
	return ""
}

// WriteGGUF writes weights (Hugging Face names) as a GGUF file the way
// llama.cpp's convert_hf_to_gguf.py lays out a llama model: llama.*
// metadata, GGUF tensor names, the rows of Q and K permuted for
// llama.cpp's interleaved rope (LlamaModel.permute), rope_freqs.weight for
// llama3 rope scaling, and no output.weight when the embeddings are tied.
// 1-D weights are stored f32; matrices in format: f32, f16, bf16, or a GGML
// block format (quantized here, bit-exact with GGML's reference quantizer)
// when their rows are whole blocks of it, else f32 (llama.cpp's quantizer
// also falls back for such rows). No tokenizer metadata is written.
func WriteGGUF(path string, cfg Config, weights []NamedTensor, format quant.Type) error {
	w, err := NewGGUFWriter(cfg, weights, format)
	if err != nil {
		return fmt.Errorf("model: write %s: %w", path, err)
	}
	return w.WriteFile(path)
}

// NewGGUFWriter is WriteGGUF up to the writing: it returns the filled
// writer, to which a caller can add metadata (a tokenizer's, say) before
// writing it.
func NewGGUFWriter(cfg Config, weights []NamedTensor, format quant.Type) (*gguf.Writer, error) {
	return NewGGUFWriterFunc(cfg, weights, func(string) quant.Type { return format })
}

// NewGGUFWriterFunc is NewGGUFWriter with each matrix's format chosen by
// its GGUF name (blk.3.attn_v.weight, …): a mixture such as llama.cpp's
// Q4_K_M, where some layers' value and down projections take more bits
// than the rest. As there, a matrix whose rows are not whole blocks of its
// format stays f32.
func NewGGUFWriterFunc(cfg Config, weights []NamedTensor, formatOf func(name string) quant.Type) (*gguf.Writer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	set := func(key string, v gguf.Value) error { return w.Set(key, v) }
	u32 := func(v int) gguf.Value { return gguf.Uint32(uint32(v)) }
	kvs := []struct {
		k string
		v gguf.Value
	}{
		{"general.architecture", gguf.String("llama")},
		{"general.name", gguf.String("loom test model")},
		{"llama.block_count", u32(cfg.Layers)},
		{"llama.context_length", u32(cfg.ContextLength)},
		{"llama.embedding_length", u32(cfg.Hidden)},
		{"llama.feed_forward_length", u32(cfg.Intermediate)},
		{"llama.attention.head_count", u32(cfg.Heads)},
		{"llama.attention.head_count_kv", u32(cfg.KVHeads)},
		{"llama.attention.key_length", u32(cfg.HeadDim)},
		{"llama.attention.value_length", u32(cfg.HeadDim)},
		{"llama.rope.dimension_count", u32(cfg.HeadDim)},
		{"llama.rope.freq_base", gguf.Float32(float32(cfg.RopeTheta))},
		{"llama.attention.layer_norm_rms_epsilon", gguf.Float32(float32(cfg.RMSEps))},
		{"llama.vocab_size", u32(cfg.Vocab)},
	}
	if cfg.RopeScaling.Type == "linear" {
		kvs = append(kvs, struct {
			k string
			v gguf.Value
		}{"llama.rope.scaling.type", gguf.String("linear")}, struct {
			k string
			v gguf.Value
		}{"llama.rope.scaling.factor", gguf.Float32(float32(cfg.RopeScaling.Factor))})
	}
	for _, kv := range kvs {
		if err := set(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	for _, nt := range weights {
		name := ggufName(nt.Name)
		if name == "" {
			return nil, fmt.Errorf("tensor %q is not a llama weight", nt.Name)
		}
		if name == "output.weight" && cfg.TieEmbeddings {
			continue
		}
		shape := nt.T.Shape()
		vals := make([]float32, nt.T.Numel())
		for i := range vals {
			vals[i] = float32(nt.T.Float64(i))
		}
		switch {
		case strings.Contains(name, ".attn_q."):
			vals = permuteRows(vals, shape, cfg.Heads)
		case strings.Contains(name, ".attn_k."):
			vals = permuteRows(vals, shape, cfg.KVHeads)
		}
		t := quant.F32
		if len(shape) == 2 {
			t = formatOf(name)
			tr, ok := t.Traits()
			if !ok || !tr.Supported {
				return nil, fmt.Errorf("tensor %q: format %v is not one Loom writes", name, t)
			}
			if shape[1]%tr.Block != 0 {
				t = quant.F32
			}
		}
		data, err := encode(t, vals, shape[len(shape)-1])
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		if err := w.AddTensor(name, t, shape, data); err != nil {
			return nil, err
		}
	}
	if cfg.RopeScaling.Type == "llama3" {
		factors := llama3Factors(cfg)
		data, _ := encode(quant.F32, factors, len(factors))
		if err := w.AddTensor("rope_freqs.weight", quant.F32, []int{len(factors)}, data); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// permuteRows applies llama.cpp's LlamaModel.permute to a matrix (or bias)
// of heads·D rows: within each head, rows (half, i) become (i, half).
func permuteRows(vals []float32, shape []int, heads int) []float32 {
	rows := shape[0]
	cols := len(vals) / rows
	d := rows / heads
	out := make([]float32, len(vals))
	for h := range heads {
		for half := range 2 {
			for i := range d / 2 {
				src := h*d + half*d/2 + i
				dst := h*d + 2*i + half
				copy(out[dst*cols:(dst+1)*cols], vals[src*cols:(src+1)*cols])
			}
		}
	}
	return out
}

// llama3Factors is convert_hf_to_gguf.py's rope_freqs for llama3 scaling
// (LlamaModel.generate_extra_tensors), in float32: per frequency, the
// number llama.cpp divides it by — 1 for wavelengths below
// OriginalContext/HighFreqFactor, Factor above OriginalContext/LowFreqFactor,
// 1/((1−s)/Factor + s) in between, s the smoothing ramp.
func llama3Factors(cfg Config) []float32 {
	s := cfg.RopeScaling
	plain := cfg
	plain.RopeScaling = RopeScaling{}
	inv, _ := invFreq(plain, nil)
	lowWave := float32(float64(s.OriginalContext) / s.LowFreqFactor)
	highWave := float32(float64(s.OriginalContext) / s.HighFreqFactor)
	out := make([]float32, len(inv))
	for i, f := range inv {
		wave := float32(2*math.Pi) / f
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = float32(s.Factor)
		default:
			smooth := (float32(s.OriginalContext)/wave - float32(s.LowFreqFactor)) / float32(s.HighFreqFactor-s.LowFreqFactor)
			out[i] = 1 / ((1-smooth)/float32(s.Factor) + smooth)
		}
	}
	return out
}

// encode stores vals, rows of k values, in GGML type t.
func encode(t quant.Type, vals []float32, k int) ([]byte, error) {
	switch t {
	case quant.F32:
		b := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b, nil
	case quant.F16:
		b := make([]byte, 2*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(dtype.ToF16(v)))
		}
		return b, nil
	case quant.BF16:
		b := make([]byte, 2*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(dtype.ToBF16(v)))
		}
		return b, nil
	}
	if k <= 0 || len(vals)%k != 0 {
		return nil, fmt.Errorf("%d values are not rows of %d", len(vals), k)
	}
	rb, err := t.RowBytes(int64(k))
	if err != nil {
		return nil, err
	}
	// Rows quantize independently: split them over the cores (the k-quant
	// scale searches make a 1B-parameter model minutes of work on one).
	rows := len(vals) / k
	b := make([]byte, rows*int(rb))
	workers := min(runtime.GOMAXPROCS(0), max(rows/64, 1))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		r0, r1 := rows*w/workers, rows*(w+1)/workers
		wg.Go(func() {
			errs[w] = quant.Quantize(t, vals[r0*k:r1*k], b[r0*int(rb):r1*int(rb)])
		})
	}
	wg.Wait()
	return b, errors.Join(errs...)
}

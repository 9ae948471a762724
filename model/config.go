package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/loomgraph/loom/gguf"
)

// Config is the shape of a llama-architecture decoder: what config.json
// (Hugging Face) or the llama.* GGUF metadata say. The JSON names are the
// Hugging Face ones, so that WriteTestModel's config.json loads in
// transformers.
type Config struct {
	Layers        int // num_hidden_layers; llama.block_count
	Hidden        int // hidden_size; llama.embedding_length
	Heads         int // num_attention_heads; llama.attention.head_count
	KVHeads       int // num_key_value_heads; llama.attention.head_count_kv
	HeadDim       int // head_dim (default Hidden/Heads); llama.attention.key_length
	Intermediate  int // intermediate_size; llama.feed_forward_length
	Vocab         int // vocab_size; llama.vocab_size or the embedding's rows
	ContextLength int // max_position_embeddings; llama.context_length

	RopeTheta   float64 // rope_theta; llama.rope.freq_base
	RopeScaling RopeScaling
	RMSEps      float64 // rms_norm_eps; llama.attention.layer_norm_rms_epsilon

	// SlidingWindow, when > 0, limits attention to that many positions
	// (Mistral's sliding_window). Loom attends over the whole sequence, so
	// Load accepts it only when MaxSeqLen ≤ SlidingWindow, where the two
	// agree.
	SlidingWindow int

	// TieEmbeddings: the LM head is the token embedding (tie_word_embeddings;
	// in GGUF, no output.weight).
	TieEmbeddings bool
	// AttentionBias and MLPBias say whether q/k/v/o and gate/up/down carry
	// biases (Llama's attention_bias and mlp_bias). Load takes any bias the
	// checkpoint holds (Qwen2 has q/k/v biases only); these two matter for
	// WriteTestModel, which writes them.
	AttentionBias bool
	MLPBias       bool
}

// RopeScaling is the rotary embedding's frequency scaling. Type "" is none;
// "linear" divides every frequency by Factor; "llama3" is Llama 3.1's
// smooth interpolation (Hugging Face's _compute_llama3_parameters): the
// frequencies of wavelength above OriginalContext/LowFreqFactor are divided
// by Factor, those below OriginalContext/HighFreqFactor kept, and those in
// between interpolated.
type RopeScaling struct {
	Type            string
	Factor          float64
	LowFreqFactor   float64
	HighFreqFactor  float64
	OriginalContext int
}

// Validate checks that the dims describe a model Load can build.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", c.Layers}, {"hidden size", c.Hidden}, {"attention heads", c.Heads}, {"key/value heads", c.KVHeads},
		{"head dim", c.HeadDim}, {"intermediate size", c.Intermediate}, {"vocabulary size", c.Vocab}} {
		if f.v <= 0 {
			bad("%s is %d, want > 0", f.name, f.v)
		}
	}
	if c.Heads > 0 && c.KVHeads > 0 && c.Heads%c.KVHeads != 0 {
		bad("%d attention heads are not a multiple of %d key/value heads", c.Heads, c.KVHeads)
	}
	if c.HeadDim%2 != 0 {
		bad("head dim %d is odd: rotary embeddings rotate pairs", c.HeadDim)
	}
	if c.SlidingWindow < 0 {
		bad("sliding window %d is negative", c.SlidingWindow)
	}
	if c.ContextLength < 0 {
		bad("context length %d is negative", c.ContextLength)
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		bad("rope theta %g, want a finite number > 0", c.RopeTheta)
	}
	if !(c.RMSEps >= 0) || math.IsInf(c.RMSEps, 0) {
		bad("rms norm epsilon %g, want a finite number ≥ 0", c.RMSEps)
	}
	if err := c.RopeScaling.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("model: config: %w", err)
	}
	return nil
}

func (r RopeScaling) validate() error {
	switch r.Type {
	case "":
		return nil
	case "linear":
		if !(r.Factor > 0) || math.IsInf(r.Factor, 0) {
			return fmt.Errorf("linear rope scaling factor %g, want > 0", r.Factor)
		}
		return nil
	case "llama3":
		if !(r.Factor > 0) || !(r.LowFreqFactor > 0) || !(r.HighFreqFactor > r.LowFreqFactor) || r.OriginalContext <= 0 {
			return fmt.Errorf("llama3 rope scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0; got %+v", r)
		}
		return nil
	}
	return fmt.Errorf("rope scaling %q is not supported (supported: none, linear, llama3)", r.Type)
}

// qDim, kvDim and group are the attention's derived sizes.
func (c Config) qDim() int  { return c.Heads * c.HeadDim }
func (c Config) kvDim() int { return c.KVHeads * c.HeadDim }
func (c Config) group() int { return c.Heads / c.KVHeads }

// hfConfig is the part of a Hugging Face config.json Load reads. Pointers
// tell a missing key from a zero.
type hfConfig struct {
	ModelType             string          `json:"model_type"`
	Architectures         []string        `json:"architectures"`
	HiddenSize            *int            `json:"hidden_size"`
	IntermediateSize      *int            `json:"intermediate_size"`
	NumHiddenLayers       *int            `json:"num_hidden_layers"`
	NumAttentionHeads     *int            `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	VocabSize             *int            `json:"vocab_size"`
	MaxPositionEmbeddings *int            `json:"max_position_embeddings"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	RopeTheta             *float64        `json:"rope_theta"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
	RopeParameters        json.RawMessage `json:"rope_parameters"` // transformers 5
	PartialRotaryFactor   *float64        `json:"partial_rotary_factor"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	HiddenAct             string          `json:"hidden_act"`
	AttentionBias         bool            `json:"attention_bias"`
	MLPBias               bool            `json:"mlp_bias"`
	SlidingWindow         *int            `json:"sliding_window"`
	UseSlidingWindow      *bool           `json:"use_sliding_window"`
	TorchDType            string          `json:"torch_dtype"`
	DType                 string          `json:"dtype"` // transformers 5's name for torch_dtype
}

// hfRope is rope_scaling (transformers 4) or rope_parameters (5).
type hfRope struct {
	Type                  string   `json:"type"`
	RopeType              string   `json:"rope_type"`
	RopeTheta             *float64 `json:"rope_theta"`
	Factor                *float64 `json:"factor"`
	LowFreqFactor         *float64 `json:"low_freq_factor"`
	HighFreqFactor        *float64 `json:"high_freq_factor"`
	OriginalMaxPosition   *int     `json:"original_max_position_embeddings"`
	PartialRotaryFactor   *float64 `json:"partial_rotary_factor"`
	AttentionFactorIgnore *float64 `json:"attention_factor"`
}

// llamaModelTypes are the Hugging Face model types whose checkpoints are
// this architecture with only the config differing: Mistral (GQA, no
// sliding window in use) and Qwen2 (q/k/v biases, tied embeddings in the
// small models).
var llamaModelTypes = map[string]bool{"llama": true, "mistral": true, "qwen2": true}

// readHFConfig parses path (a config.json) into a Config, and returns the
// checkpoint's declared dtype name ("bfloat16", ...) if it names one.
func readHFConfig(path string) (Config, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, "", fmt.Errorf("model: %w", err)
	}
	var h hfConfig
	if err := json.Unmarshal(b, &h); err != nil {
		return Config{}, "", fmt.Errorf("model: %s: %w", path, err)
	}
	c, err := h.config()
	if err != nil {
		return Config{}, "", fmt.Errorf("model: %s: %w", path, err)
	}
	dt := h.TorchDType
	if h.DType != "" {
		dt = h.DType
	}
	return c, dt, nil
}

func (h *hfConfig) config() (Config, error) {
	if !llamaModelTypes[h.ModelType] {
		return Config{}, fmt.Errorf("model_type %q is not a llama-architecture model (supported: llama, mistral, qwen2)", h.ModelType)
	}
	var missing []string
	need := func(name string, p *int) int {
		if p == nil {
			missing = append(missing, name)
			return 0
		}
		return *p
	}
	c := Config{
		Hidden:        need("hidden_size", h.HiddenSize),
		Intermediate:  need("intermediate_size", h.IntermediateSize),
		Layers:        need("num_hidden_layers", h.NumHiddenLayers),
		Heads:         need("num_attention_heads", h.NumAttentionHeads),
		Vocab:         need("vocab_size", h.VocabSize),
		AttentionBias: h.AttentionBias,
		MLPBias:       h.MLPBias,
		RopeTheta:     10000,
		RMSEps:        1e-6,
	}
	if len(missing) > 0 {
		return Config{}, fmt.Errorf("missing keys: %s", strings.Join(missing, ", "))
	}
	c.KVHeads = c.Heads
	if h.NumKeyValueHeads != nil {
		c.KVHeads = *h.NumKeyValueHeads
	}
	if c.Heads > 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	if h.HeadDim != nil {
		c.HeadDim = *h.HeadDim
	}
	if h.MaxPositionEmbeddings != nil {
		c.ContextLength = *h.MaxPositionEmbeddings
	}
	if h.RMSNormEps != nil {
		c.RMSEps = *h.RMSNormEps
	}
	if h.RopeTheta != nil {
		c.RopeTheta = *h.RopeTheta
	}
	if h.TieWordEmbeddings != nil {
		c.TieEmbeddings = *h.TieWordEmbeddings
	}
	if h.HiddenAct != "" && h.HiddenAct != "silu" {
		return Config{}, fmt.Errorf("hidden_act %q is not supported (llama uses silu)", h.HiddenAct)
	}
	if h.PartialRotaryFactor != nil && *h.PartialRotaryFactor != 1 {
		return Config{}, fmt.Errorf("partial_rotary_factor %g is not supported (only 1)", *h.PartialRotaryFactor)
	}
	// Mistral's sliding_window is in force when set; Qwen2's only with
	// use_sliding_window.
	if h.SlidingWindow != nil && (h.ModelType == "mistral" || h.UseSlidingWindow != nil && *h.UseSlidingWindow) {
		c.SlidingWindow = *h.SlidingWindow
	}
	for _, raw := range []json.RawMessage{h.RopeScaling, h.RopeParameters} {
		if err := c.readRope(raw); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// readRope applies a rope_scaling or rope_parameters object (null or
// absent: nothing).
func (c *Config) readRope(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var r hfRope
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("rope parameters: %w", err)
	}
	if r.RopeTheta != nil {
		c.RopeTheta = *r.RopeTheta
	}
	if r.PartialRotaryFactor != nil && *r.PartialRotaryFactor != 1 {
		return fmt.Errorf("partial_rotary_factor %g is not supported (only 1)", *r.PartialRotaryFactor)
	}
	typ := r.RopeType
	if typ == "" {
		typ = r.Type
	}
	get := func(p *float64, def float64) float64 {
		if p == nil {
			return def
		}
		return *p
	}
	switch typ {
	case "", "default":
	case "linear":
		c.RopeScaling = RopeScaling{Type: "linear", Factor: get(r.Factor, 0)}
	case "llama3":
		orig := 0
		if r.OriginalMaxPosition != nil {
			orig = *r.OriginalMaxPosition
		}
		c.RopeScaling = RopeScaling{Type: "llama3", Factor: get(r.Factor, 0), LowFreqFactor: get(r.LowFreqFactor, 0),
			HighFreqFactor: get(r.HighFreqFactor, 0), OriginalContext: orig}
	default:
		return fmt.Errorf("rope scaling type %q is not supported (supported: default, linear, llama3)", typ)
	}
	return nil
}

// ggufConfig reads the llama.* metadata of a GGUF file. The vocabulary size
// falls back to the embedding's rows (vocabRows), as llama.cpp does.
func ggufConfig(md *gguf.Metadata, vocabRows int) (Config, error) {
	arch, err := md.String("general.architecture")
	if err != nil {
		return Config{}, err
	}
	if arch != "llama" {
		return Config{}, fmt.Errorf("general.architecture is %q: only \"llama\" is supported", arch)
	}
	var errs []error
	num := func(key string, def int, required bool) int {
		v, err := md.Uint("llama." + key)
		switch {
		case errors.Is(err, gguf.ErrNotFound) && !required:
			return def
		case err != nil:
			errs = append(errs, err)
			return 0
		case v > math.MaxInt32:
			errs = append(errs, fmt.Errorf("llama.%s = %d is too large", key, v))
			return 0
		}
		return int(v)
	}
	flt := func(key string, def float64, required bool) float64 {
		v, err := md.Float("llama." + key)
		switch {
		case errors.Is(err, gguf.ErrNotFound) && !required:
			return def
		case err != nil:
			errs = append(errs, err)
		}
		return v
	}
	c := Config{
		Layers:        num("block_count", 0, true),
		Hidden:        num("embedding_length", 0, true),
		Intermediate:  num("feed_forward_length", 0, true),
		Heads:         num("attention.head_count", 0, true),
		ContextLength: num("context_length", 0, false),
		RopeTheta:     flt("rope.freq_base", 10000, false),
		RMSEps:        flt("attention.layer_norm_rms_epsilon", 0, true),
	}
	c.KVHeads = num("attention.head_count_kv", c.Heads, false)
	if c.Heads > 0 {
		c.HeadDim = num("attention.key_length", c.Hidden/c.Heads, false)
	}
	if vd := num("attention.value_length", c.HeadDim, false); vd != c.HeadDim {
		errs = append(errs, fmt.Errorf("llama.attention.value_length %d differs from the key length %d: not supported", vd, c.HeadDim))
	}
	if rd := num("rope.dimension_count", c.HeadDim, false); rd != c.HeadDim {
		errs = append(errs, fmt.Errorf("llama.rope.dimension_count %d differs from the head dim %d: partial rotary embeddings are not supported", rd, c.HeadDim))
	}
	if n := num("expert_count", 0, false); n > 0 {
		errs = append(errs, fmt.Errorf("llama.expert_count is %d: mixture-of-experts models (Mixtral) are not supported", n))
	}
	c.Vocab = num("vocab_size", vocabRows, false)
	scaling, err := md.String("llama.rope.scaling.type")
	switch {
	case errors.Is(err, gguf.ErrNotFound):
		// llama.cpp's older key: a linear factor.
		if f := flt("rope.scale_linear", 1, false); f != 1 {
			c.RopeScaling = RopeScaling{Type: "linear", Factor: f}
		}
	case err != nil:
		errs = append(errs, err)
	case scaling == "none":
	case scaling == "linear":
		c.RopeScaling = RopeScaling{Type: "linear", Factor: flt("rope.scaling.factor", 0, true)}
	default:
		errs = append(errs, fmt.Errorf("llama.rope.scaling.type %q is not supported (supported: none, linear; llama3 scaling comes as rope_freqs.weight)", scaling))
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return c, nil
}

package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/quant"
)

// This file chooses each tensor's type for -type q4_k_m and q5_k_m as
// llama.cpp's quantizer does for LLAMA_FTYPE_MOSTLY_Q4_K_M (15) and
// LLAMA_FTYPE_MOSTLY_Q5_K_M (17), the mixtures of the usual downloads, and
// likewise for q3_k_s (11), q3_k_m (12), q3_k_l (13), q4_k_s (14) and
// q5_k_s (16). (llama.cpp's Q2_K mixture, 10, has no name here: -type
// q2_k is Q2_K for every tensor, as every plain type name is.) It
// follows src/llama-quant.cpp of ggml-org/llama.cpp (read at commit
// 007dbbf3fd17eefe9b47fee45f48f7ba5e62b714): llama_tensor_get_type,
// llama_tensor_get_type_impl (with its use_more_bits), tensor_get_category,
// init_quantize_state_counters and tensor_type_fallback; the order in
// which tensors are visited is that of llama_model_loader::weights_map
// (src/llama-model-loader.h, weight_name_comparer); LLM_TYPE_70B is
// llama_model_llama::load_arch_hparams (src/models/llama.cpp).
//
// Only general.architecture "llama" without experts is implemented: the
// rules that differ for Falcon (ffn_down, attn_output, the output tensor),
// for mixtures of experts (llama.expert_count > 1: attn_v, attn_k and
// attn_output by the expert count, ffn_down's layer from the tensor name),
// for MXFP4_MOE and BailingMoE3, the IQ mixtures, Q2_K and Q2_K_S, an
// importance matrix (no rule of the mixtures here reads it), and the
// options --pure, --output-tensor-type, --token-embedding-type and
// --tensor-type are left out, and a file of another architecture, or with
// experts, is refused rather than quantized by rules that may not be its
// own. Which tensors stay as they are is keepReason's name rules
// (keepByName): they leave out llama.cpp's rules for tensor names of
// other architectures (RWKV's time_mix_*, Gemma-3n's altup and laurel,
// multimodal patch embeddings, …), which llama GGUF files do not have;
// and they keep position_embd.weight and token_types.weight, which
// llama.cpp keeps only for architectures that have them (BERT), so a
// llama file holding one would differ.

// kMixture is a llama.cpp k-quant mixture: a base type for most tensors,
// Q6_K for the output, and for some mixtures other types for some
// layers' attn_v, ffn_down and attn_output (attnV, ffnDown, attnOutput).
type kMixture struct {
	name  string     // the -type name
	base  quant.Type // llama_ftype_get_default_type
	id    uint32     // enum llama_ftype
	ftype string     // its name after LLAMA_FTYPE_
}

// kMixtures are the -type values that are mixtures, by name.
var kMixtures = map[string]*kMixture{
	"q3_k_s": {"q3_k_s", quant.Q3_K, 11, "MOSTLY_Q3_K_S"},
	"q3_k_m": {"q3_k_m", quant.Q3_K, 12, "MOSTLY_Q3_K_M"},
	"q3_k_l": {"q3_k_l", quant.Q3_K, 13, "MOSTLY_Q3_K_L"},
	"q4_k_s": {"q4_k_s", quant.Q4_K, 14, "MOSTLY_Q4_K_S"},
	"q4_k_m": {"q4_k_m", quant.Q4_K, 15, "MOSTLY_Q4_K_M"},
	"q5_k_s": {"q5_k_s", quant.Q5_K, 16, "MOSTLY_Q5_K_S"},
	"q5_k_m": {"q5_k_m", quant.Q5_K, 17, "MOSTLY_Q5_K_M"},
}

// attnV is the mixture's type for the i-th of n attn_v-like tensors
// (llama_tensor_get_type_impl's attn_v branch for a dense llama), with
// the reason, or the base type and "".
func (m *kMixture) attnV(i, n int, hp llamaHparams) (quant.Type, string) {
	at := fmt.Sprintf("attn_v %d of %d", i, n)
	to, why := m.base, ""
	switch m.name {
	case "q3_k_m":
		to, why = quant.Q4_K, "attn_v"
		if i < 2 {
			to, why = quant.Q5_K, at+", one of the first two"
		}
	case "q3_k_l":
		to, why = quant.Q5_K, "attn_v"
	case "q4_k_m", "q5_k_m":
		if useMoreBits(i, n) {
			to, why = quant.Q6_K, at+", use_more_bits"
		}
	case "q4_k_s":
		if i < 4 {
			to, why = quant.Q5_K, at+", one of the first four"
		}
	}
	// LLM_TYPE_70B: 8 heads share each attn_v, an eighth of attn_q's
	// size, so Q3_K and Q4_K take Q5_K there.
	if hp.is70B && (to == quant.Q3_K || to == quant.Q4_K) {
		to, why = quant.Q5_K, "attn_v of a 70B llama"
	}
	return to, why
}

// ffnDown is the mixture's type for the ffn_down of layer i of n
// (llama.block_count), with the reason, or the base type and "".
func (m *kMixture) ffnDown(i, n int) (quant.Type, string) {
	at := fmt.Sprintf("ffn_down %d of %d", i, n)
	switch m.name {
	case "q3_k_m":
		if i < n/16 {
			return quant.Q5_K, at + ", in the first sixteenth"
		}
		return quant.Q4_K, "ffn_down" // Falcon's rule aside: Q4_K for a llama
	case "q3_k_l":
		return quant.Q5_K, "ffn_down"
	case "q4_k_m", "q5_k_m":
		if useMoreBits(i, n) {
			return quant.Q6_K, at + ", use_more_bits"
		}
	case "q4_k_s":
		if i < n/8 {
			return quant.Q5_K, at + ", in the first eighth"
		}
	}
	return m.base, ""
}

// attnOutput is the mixture's type for attn_output (a dense llama's).
func (m *kMixture) attnOutput() (quant.Type, string) {
	switch m.name {
	case "q3_k_m":
		return quant.Q4_K, "attn_output"
	case "q3_k_l":
		return quant.Q5_K, "attn_output"
	}
	return m.base, ""
}

// qtarget is what -type asked for: one type for every converted tensor
// (mix is nil), or a mixture choosing each tensor's type.
type qtarget struct {
	typ quant.Type // the one type, or the mixture's base type
	mix *kMixture
}

func (q qtarget) String() string {
	if q.mix != nil {
		return q.mix.name
	}
	return q.typ.String()
}

// fileType is the general.file_type the output records and its name.
func (q qtarget) fileType() (uint32, string) {
	if q.mix != nil {
		return q.mix.id, q.mix.ftype
	}
	ft := llamaFileTypes[q.typ]
	return ft.id, ft.name
}

// tensorCategory is llama.cpp's tensor_category: what a tensor is, from
// its GGUF name, tested in this order (so attn_qkv before attn_v, and an
// exact output.weight before attn_output).
type tensorCategory int

const (
	catOther tensorCategory = iota
	catTokenEmbd
	catAttnQ
	catAttnV
	catAttnK
	catAttnQKV
	catAttnKVB
	catAttnOutput
	catFFNUp
	catFFNGate
	catFFNDown
	catOutput
)

func categoryOf(name string) tensorCategory {
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight" || name == "per_layer_token_embd.weight":
		return catTokenEmbd
	}
	for _, c := range []struct {
		sub string
		cat tensorCategory
	}{
		{"attn_qkv.weight", catAttnQKV},
		{"attn_kv_b.weight", catAttnKVB},
		{"attn_v.weight", catAttnV},
		{"attn_k.weight", catAttnK},
		{"attn_q.weight", catAttnQ},
		{"attn_output.weight", catAttnOutput},
		{"ffn_up", catFFNUp},
		{"ffn_gate", catFFNGate},
		{"ffn_down", catFFNDown},
	} {
		if strings.Contains(name, c.sub) {
			return c.cat
		}
	}
	return catOther
}

// attnVLike is category_is_attn_v: the tensors the attn_v rule and its
// counter (n_attention_wv, i_attention_wv) cover. attn_qkv is one of them:
// llama.cpp's separate attn_qkv rule (q5_k for Q4_K_M, q6_k for Q5_K_M in
// every layer, what older versions did) comes after this one in the same
// else-if chain and so is never reached.
func (c tensorCategory) attnVLike() bool {
	return c == catAttnV || c == catAttnQKV || c == catAttnKVB
}

// useMoreBits is use_more_bits: the first and last eighth of the layers
// and every third one between (n = 32: layers 0–3, 6, 9, …, 27, 28–31).
// The divisions truncate as C's int division does (i ≥ n/8 where the
// remainder is taken, so it is never negative).
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// blkLayer is what sscanf(name, "blk.%d.", &layer) leaves in a layer
// initialised to -1: the number after "blk." (%d skips white space and
// takes a sign), whether or not a dot follows; -1 for other names.
func blkLayer(name string) int {
	s, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	j := 0
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(s[:j], 10, 32)
	if err != nil {
		return -1 // no digits (or beyond a C int, where sscanf is undefined)
	}
	return int(n)
}

// llamaHparams is what the mixture rules read from the metadata.
type llamaHparams struct {
	nLayer int  // llama.block_count: hparams.n_layer_all, the n of ffn_down's use_more_bits
	is70B  bool // LLM_TYPE_70B: 80 layers and fewer key/value heads than heads
}

// metaValue finds key among kvs.
func metaValue(kvs []gguf.KV, key string) (gguf.Value, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return gguf.Value{}, false
}

// metaFirstInt reads an integer key that llama.cpp reads with
// get_key_or_arr (a number, or one per layer): the number, or the first
// layer's (hparams.n_head() is layer 0's).
func metaFirstInt(kvs []gguf.KV, key string) (int64, bool, error) {
	v, ok := metaValue(kvs, key)
	if !ok {
		return 0, false, nil
	}
	if a, err := v.AsArray(); err == nil {
		if a.Len() == 0 {
			return 0, true, fmt.Errorf("%s is an empty array", key)
		}
		v = a.Index(0)
	}
	n, err := v.AsInt()
	if err != nil {
		return 0, true, fmt.Errorf("%s: %w", key, err)
	}
	return n, true, nil
}

// mixtureHparams checks that in is a file the mixture's rules are
// implemented for (a GGUF file of general.architecture "llama" without
// experts) and reads the hyperparameters they use.
func mixtureHparams(in *qinput, m *kMixture) (llamaHparams, error) {
	var hp llamaHparams
	if in.kind != "gguf" {
		return hp, fmt.Errorf("-type %s chooses each tensor's type as llama.cpp does, by its GGUF name (blk.N.attn_v.weight, …) and the llama.* metadata; a %s input has neither (convert it to GGUF first, or use -type %v, one type for every tensor)", m.name, in.kind, m.base)
	}
	arch := "(none)"
	if v, ok := metaValue(in.kvs, "general.architecture"); ok {
		arch = v.String()
	}
	if arch != `"llama"` {
		return hp, fmt.Errorf("general.architecture is %s: -type %s follows llama.cpp's rules for \"llama\" only (other architectures have rules of their own that are not implemented here); use -type %v for one type everywhere", arch, m.name, m.base)
	}
	if n, ok, err := metaFirstInt(in.kvs, "llama.expert_count"); err != nil {
		return hp, err
	} else if ok && n > 1 {
		return hp, fmt.Errorf("llama.expert_count is %d: -type %s does not implement llama.cpp's rules for mixtures of experts (attn_v, attn_k and attn_output by the expert count, ffn_down's layer from the tensor name); use -type %v for one type everywhere", n, m.name, m.base)
	}
	n, ok, err := metaFirstInt(in.kvs, "llama.block_count")
	if err != nil {
		return hp, err
	}
	if !ok || n <= 0 {
		return hp, fmt.Errorf("-type %s needs llama.block_count (> 0), the layer count llama.cpp's rules divide into eighths; the file has none", m.name)
	}
	hp.nLayer = int(n)
	if hp.nLayer == 80 {
		heads, ok, err := metaFirstInt(in.kvs, "llama.attention.head_count")
		if err != nil {
			return hp, err
		}
		if !ok {
			return hp, fmt.Errorf("-type %s needs llama.attention.head_count for an 80-layer model (llama.cpp tells 70B from 65B by it); the file has none", m.name)
		}
		kvHeads, ok, err := metaFirstInt(in.kvs, "llama.attention.head_count_kv")
		if err != nil {
			return hp, err
		}
		if !ok {
			kvHeads = heads // llama.cpp's default
		}
		hp.is70B = heads != kvHeads
	}
	return hp, nil
}

// mixChoice is the mixture's decision for one tensor.
type mixChoice struct {
	to   quant.Type
	why  string // why llama.cpp leaves it as it is (name or rank); "" otherwise
	note string // why to is not the base type, for the report; "" when it is
}

// chooseMixture decides every tensor's type as llama.cpp's quantizer
// would for m: the counters are set up over all tensors
// (init_quantize_state_counters: n_attention_wv counts the attn_v-like
// tensors, the embeddings are tied when no tensor is named
// output.weight, and the ffn_down rule divides llama.block_count), and
// the tensors are visited in llama.cpp's order, by the layer number of
// their "blk.N." prefix (-1 for the others, so those come first), then
// by name, byte by byte, which is not always the file's order. The
// counters advance only for tensors llama.cpp would quantize. The input
// types play no part (llama.cpp decides before it reads the data).
func chooseMixture(in *qinput, m *kMixture, hp llamaHparams) ([]mixChoice, error) {
	choices := make([]mixChoice, len(in.tensors))
	nAttnV, tied := 0, true
	order := make([]int, len(in.tensors))
	for i, t := range in.tensors {
		order[i] = i
		c := categoryOf(t.name)
		if c.attnVLike() {
			nAttnV++
		}
		if c == catOutput {
			tied = false
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		na, nb := in.tensors[a].name, in.tensors[b].name
		return cmp.Or(cmp.Compare(blkLayer(na), blkLayer(nb)), strings.Compare(na, nb))
	})
	iAttnV, iFFNDown := 0, 0
	for _, i := range order {
		t := in.tensors[i]
		if why := nameKeepReason(t); why != "" {
			choices[i] = mixChoice{to: t.from, why: why}
			continue
		}
		ch := mixChoice{to: m.base}
		row := t.shape[len(t.shape)-1] // ne[0]
		// For a dense llama model these mixtures have rules for these
		// categories only; attn_q, attn_k, ffn_gate, ffn_up and an untied
		// token_embd keep the base type (their rules are for Falcon,
		// experts, or the IQ mixtures).
		switch c := categoryOf(t.name); {
		case c == catOutput || tied && c == catTokenEmbd:
			what := "the output"
			if c == catTokenEmbd {
				what = "the output (tied: no output.weight)"
			}
			// The block size is the base type's (256), and Q6_K's too.
			if row%256 != 0 {
				ch.to, ch.note = quant.Q8_0, fmt.Sprintf("%s, rows of %d values not a whole number of 256", what, row)
			} else {
				ch.to, ch.note = quant.Q6_K, what
			}
		case c.attnVLike():
			ch.to, ch.note = m.attnV(iAttnV, nAttnV, hp)
			iAttnV++
		case c == catFFNDown:
			ch.to, ch.note = m.ffnDown(iFFNDown, hp.nLayer)
			iFFNDown++
		case c == catAttnOutput:
			ch.to, ch.note = m.attnOutput()
		}
		// tensor_type_fallback: rows that are not whole blocks of the
		// chosen type take a 32-value type instead, and F16 where those
		// do not fit either. Q8_0 has no fallback: llama.cpp stops.
		tr, _ := ch.to.Traits()
		if row%tr.Block != 0 {
			var fb quant.Type
			switch ch.to {
			case quant.Q3_K:
				fb = quant.Q4_0
			case quant.Q4_K:
				fb = quant.Q5_0
			case quant.Q5_K:
				fb = quant.Q5_1
			case quant.Q6_K:
				fb = quant.Q8_0
			default:
				return nil, fmt.Errorf("tensor %q (shape %v): %s gives it %v, whose %d-value blocks do not divide its rows of %d values, and llama.cpp's quantizer has no fallback from %v (\"no tensor type fallback is defined\"): it fails on this file, and so does -type %s", t.name, t.shape, m.name, ch.to, tr.Block, row, ch.to, m.name)
			}
			note := fmt.Sprintf("rows of %d values are not whole %v blocks", row, ch.to)
			if fbt, _ := fb.Traits(); row%fbt.Block != 0 {
				note += fmt.Sprintf(", nor %v ones", fb)
				fb = quant.F16
			}
			if ch.note != "" {
				note = ch.note + "; " + note
			}
			ch.to, ch.note = fb, note
		}
		choices[i] = ch
	}
	return choices, nil
}

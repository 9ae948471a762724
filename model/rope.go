package model

import (
	"fmt"
	"math"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/tensor"
)

// Rotary embedding tables. Both programs take cos and sin as inputs of
// shape [maxSeq, headDim/2], computed here once: prefill reads rows
// 0..T−1 (Rope narrows the table), decode picks the rows of its positions
// with IndexSelect, so one decode program serves every position.
//
// The arithmetic is Hugging Face's, in float32 (LlamaRotaryEmbedding):
// inv_freq[i] = 1 / base^(2i/d) with the exponent and the power in
// float32, the angle float32(t)·inv_freq[i] rounded to float32, then cos
// and sin of that float32 angle. An angle computed in float64 would differ
// from the reference by up to an ulp of the angle (1e-4 radians at
// position 2000), which is above the 1e-3 relative logit tolerance's
// budget for long prompts; doing what the reference does costs nothing.
// llama.cpp also computes the angle in float32.

// invFreq returns the inverse frequencies of the rotary embedding: the
// default ones, then scaled per cfg.RopeScaling, then divided by the
// per-dimension factors of a GGUF rope_freqs tensor when there is one
// (llama.cpp's form of llama3 scaling).
func invFreq(cfg Config, factors []float32) ([]float32, error) {
	half := cfg.HeadDim / 2
	if factors != nil && len(factors) != half {
		return nil, fmt.Errorf("model: rope_freqs.weight has %d factors, want head_dim/2 = %d", len(factors), half)
	}
	inv := make([]float32, half)
	for i := range inv {
		e := float32(2*i) / float32(cfg.HeadDim)
		inv[i] = 1 / float32(math.Pow(cfg.RopeTheta, float64(e)))
	}
	switch s := cfg.RopeScaling; s.Type {
	case "linear":
		for i := range inv {
			inv[i] /= float32(s.Factor)
		}
	case "llama3":
		// Hugging Face's _compute_llama3_parameters, in its float32 order.
		lowWave := float32(float64(s.OriginalContext) / s.LowFreqFactor)
		highWave := float32(float64(s.OriginalContext) / s.HighFreqFactor)
		for i, f := range inv {
			wave := float32(2*math.Pi) / f
			scaled := f
			if wave > lowWave {
				scaled = f / float32(s.Factor)
			}
			if !(wave < highWave) && !(wave > lowWave) {
				smooth := (float32(s.OriginalContext)/wave - float32(s.LowFreqFactor)) / float32(s.HighFreqFactor-s.LowFreqFactor)
				scaled = (1-smooth)*scaled/float32(s.Factor) + smooth*scaled
			}
			inv[i] = scaled
		}
	}
	for i, f := range factors {
		if !(f > 0) || math.IsInf(float64(f), 0) {
			return nil, fmt.Errorf("model: rope_freqs.weight[%d] = %g, want a finite number > 0", i, f)
		}
		inv[i] /= f
	}
	return inv, nil
}

// ropeTables returns cos and sin [rows, len(inv)] in dt.
func ropeTables(inv []float32, rows int, dt dtype.DType) (cos, sin *tensor.Tensor, err error) {
	half := len(inv)
	c := make([]float32, rows*half)
	s := make([]float32, rows*half)
	for t := range rows {
		for i, f := range inv {
			a := float64(float32(t) * f)
			c[t*half+i] = float32(math.Cos(a))
			s[t*half+i] = float32(math.Sin(a))
		}
	}
	if cos, err = tensor.FromFloat32s(dt, c, rows, half); err != nil {
		return nil, nil, err
	}
	if sin, err = tensor.FromFloat32s(dt, s, rows, half); err != nil {
		return nil, nil, err
	}
	return cos, sin, nil
}

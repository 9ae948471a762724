package model

import (
	"fmt"
	"math"
	"testing"

	"github.com/loomgraph/loom/tensor"
)

// refModel is a float64 llama forward pass in plain loops, written from the
// architecture's definition (Hugging Face's modeling_llama), not from the
// graph code: the executable reference the model's logits are checked
// against. Weights are Hugging Face named and row-major ([out, in]).
type refModel struct {
	cfg Config
	w   map[string][]float64
	inv []float64 // rope inverse frequencies, in float64
}

func newRef(cfg Config, weights []NamedTensor) *refModel {
	r := &refModel{cfg: cfg, w: map[string][]float64{}}
	for _, nt := range weights {
		r.w[nt.Name] = nt.T.Float64s()
	}
	if cfg.TieEmbeddings {
		r.w["lm_head.weight"] = r.w["model.embed_tokens.weight"]
	}
	half := cfg.HeadDim / 2
	r.inv = make([]float64, half)
	for i := range r.inv {
		r.inv[i] = math.Pow(cfg.RopeTheta, -float64(2*i)/float64(cfg.HeadDim))
	}
	switch sc := cfg.RopeScaling; sc.Type {
	case "linear":
		for i := range r.inv {
			r.inv[i] /= sc.Factor
		}
	case "llama3":
		// Llama 3.1's scaling (the reference implementation's
		// apply_scaling): wavelengths below old/high kept, above old/low
		// divided by the factor, linear in old/wavelength between.
		old := float64(sc.OriginalContext)
		for i, f := range r.inv {
			wave := 2 * math.Pi / f
			switch {
			case wave < old/sc.HighFreqFactor:
			case wave > old/sc.LowFreqFactor:
				r.inv[i] = f / sc.Factor
			default:
				smooth := (old/wave - sc.LowFreqFactor) / (sc.HighFreqFactor - sc.LowFreqFactor)
				r.inv[i] = (1-smooth)*f/sc.Factor + smooth*f
			}
		}
	}
	return r
}

// linear returns W·x (+ b) for W [out, in].
func (r *refModel) linear(name string, x []float64) []float64 {
	w := r.w[name+".weight"]
	in := len(x)
	out := make([]float64, len(w)/in)
	for o := range out {
		row := w[o*in : (o+1)*in]
		s := 0.0
		for i, v := range x {
			s += row[i] * v
		}
		out[o] = s
	}
	if b, ok := r.w[name+".bias"]; ok {
		for o := range out {
			out[o] += b[o]
		}
	}
	return out
}

func (r *refModel) rmsNorm(name string, x []float64) []float64 {
	w := r.w[name]
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+r.cfg.RMSEps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * inv * w[i]
	}
	return out
}

// rope rotates each head of x (heads·D values) for position pos: Hugging
// Face's rotate_half pairing, x[i] with x[i + D/2].
func (r *refModel) rope(x []float64, heads, pos int) {
	d := r.cfg.HeadDim
	for h := range heads {
		v := x[h*d : (h+1)*d]
		for i, f := range r.inv {
			c, s := math.Cos(float64(pos)*f), math.Sin(float64(pos)*f)
			a, b := v[i], v[i+d/2]
			v[i], v[i+d/2] = a*c-b*s, b*c+a*s
		}
	}
}

// forward returns the logits of every position of ids.
func (r *refModel) forward(ids []int) [][]float64 {
	c := r.cfg
	T, C, D := len(ids), c.Hidden, c.HeadDim
	emb := r.w["model.embed_tokens.weight"]
	x := make([][]float64, T)
	for t, id := range ids {
		x[t] = append([]float64(nil), emb[id*C:(id+1)*C]...)
	}
	for l := range c.Layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		qs, ks, vs := make([][]float64, T), make([][]float64, T), make([][]float64, T)
		for t := range T {
			h := r.rmsNorm(p+"input_layernorm.weight", x[t])
			qs[t] = r.linear(p+"self_attn.q_proj", h)
			ks[t] = r.linear(p+"self_attn.k_proj", h)
			vs[t] = r.linear(p+"self_attn.v_proj", h)
			r.rope(qs[t], c.Heads, t)
			r.rope(ks[t], c.KVHeads, t)
		}
		for t := range T {
			o := make([]float64, c.Heads*D)
			for h := range c.Heads {
				kv := h / c.group()
				q := qs[t][h*D : (h+1)*D]
				scores := make([]float64, t+1)
				mx := math.Inf(-1)
				for s := 0; s <= t; s++ {
					k := ks[s][kv*D : (kv+1)*D]
					dot := 0.0
					for i := range D {
						dot += q[i] * k[i]
					}
					scores[s] = dot / math.Sqrt(float64(D))
					mx = math.Max(mx, scores[s])
				}
				sum := 0.0
				for s := range scores {
					scores[s] = math.Exp(scores[s] - mx)
					sum += scores[s]
				}
				for s := range scores {
					v := vs[s][kv*D : (kv+1)*D]
					for i := range D {
						o[h*D+i] += scores[s] / sum * v[i]
					}
				}
			}
			a := r.linear(p+"self_attn.o_proj", o)
			for i := range C {
				x[t][i] += a[i]
			}
			h := r.rmsNorm(p+"post_attention_layernorm.weight", x[t])
			gate, up := r.linear(p+"mlp.gate_proj", h), r.linear(p+"mlp.up_proj", h)
			for i, g := range gate {
				gate[i] = g / (1 + math.Exp(-g)) * up[i]
			}
			dn := r.linear(p+"mlp.down_proj", gate)
			for i := range C {
				x[t][i] += dn[i]
			}
		}
	}
	out := make([][]float64, T)
	for t := range T {
		out[t] = r.linear("lm_head", r.rmsNorm("model.norm.weight", x[t]))
	}
	return out
}

// relErr is max|got − want| / max|want| over one position's logits: the
// error relative to the logits' scale (an elementwise relative error is
// meaningless for logits near zero).
func relErr(got []float32, want []float64) float64 {
	num, den := 0.0, 0.0
	for i, w := range want {
		num = math.Max(num, math.Abs(float64(got[i])-w))
		den = math.Max(den, math.Abs(w))
	}
	if den == 0 {
		return num
	}
	return num / den
}

// row returns row i of a [..., V] f32 tensor.
func row(t *testing.T, x *tensor.Tensor, i int) []float32 {
	t.Helper()
	v, err := tensor.Values[float32](x)
	if err != nil {
		t.Fatal(err)
	}
	s := x.Shape()
	n := s[len(s)-1]
	return v[i*n : (i+1)*n]
}

func argmax64(xs []float64) int {
	best := 0
	for i, v := range xs {
		if v > xs[best] {
			best = i
		}
	}
	return best
}

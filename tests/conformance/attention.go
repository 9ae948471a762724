package conformance

// CausalAttention (graph.CausalAttention, ir.OpAttention): causal scaled
// dot-product attention with per-sequence offsets, against a float64
// reference written from ir/attention.go's definition: decode steps over a
// cache (T = 1, start = the position), a prompt's causal attention (start
// 0, S = T), chunks continuing a cache, grouped and multi-query heads,
// starts past the last key, long key ranges (many blocks of keys on the
// GPU), every wide float dtype, operands read through transposed, narrowed
// and offset views, empty batches and one-element heads, NaN scores, and
// the builder's errors.

import (
	"fmt"
	"math"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
)

// Attention runs the attention group.
func Attention(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	s := newSuite(t, newExec, opts)
	t.Run("Shapes", s.attnShapes)
	t.Run("Views", s.attnViews)
	t.Run("NaN", s.attnNaN)
	t.Run("Errors", attnErrors)
}

// attnSpec is one attention: q [B, H, T, D], k [B, KV, S, D], v [B, KV, S,
// Dv], start per sequence.
type attnSpec struct {
	B, H, KV, T, S, D, Dv int
	start                 []int64
	scale                 float64
}

func (a attnSpec) String() string {
	return fmt.Sprintf("B%d_H%d_KV%d_T%d_S%d_D%d_Dv%d_start%v", a.B, a.H, a.KV, a.T, a.S, a.D, a.Dv, a.start)
}

// attnRef is the attention of the logical values q, k, v in float64, and
// each output element's scale: the largest |v| its row sees (the result
// is a weighted mean of those values).
func attnRef(a attnSpec, dt dtype.DType, q, k, v vals) (vals, []float64) {
	out := newVals(dt, []int{a.B, a.H, a.T, a.Dv})
	scale := make([]float64, out.n())
	G := a.H / a.KV
	for b := range a.B {
		for h := range a.H {
			kh := h / G
			for t := range a.T {
				vis := min(int64(a.S), a.start[b]+int64(t)+1)
				x := make([]float64, vis)
				m := math.Inf(-1)
				for s := range int(vis) {
					dot := 0.0
					for d := range a.D {
						dot += q.f[((b*a.H+h)*a.T+t)*a.D+d] * k.f[((b*a.KV+kh)*a.S+s)*a.D+d]
					}
					x[s] = a.scale * dot
					m = math.Max(m, x[s])
				}
				for d := range a.Dv {
					num, den, big := 0.0, 0.0, 0.0
					for s := range int(vis) {
						p := math.Exp(x[s] - m)
						vv := v.f[((b*a.KV+kh)*a.S+s)*a.Dv+d]
						num += p * vv
						den += p
						big = math.Max(big, math.Abs(vv))
					}
					o := ((b*a.H+h)*a.T+t)*a.Dv + d
					out.f[o], scale[o] = num/den, big
				}
			}
		}
	}
	return out, scale
}

// attnTol: the kernels compute in float32 (float64 for f64) from S + D
// terms a row; relative to the largest value a row sees.
func attnTol(a attnSpec) tolerance {
	r := math.Sqrt(float64(a.S + a.D))
	return tolerance{name: fmt.Sprintf("attention S=%d D=%d", a.S, a.D), ulps: 1, rel16: 2e-6 * r, rel32: 2e-6 * r, rel64: 1e-14 * r}
}

// attnStart declares the start input.
func (tc *tcase) attnStart(a attnSpec) *graph.Tensor {
	sv := newVals(dtype.U32, []int{a.B})
	copy(sv.i, a.start)
	return tc.inputVals("start", sv)
}

// runAttn runs a on fresh contiguous inputs in dt.
func (s *suite) runAttn(t *testing.T, a attnSpec, dt dtype.DType) {
	tc := s.newCase(t)
	q, qv := tc.input("q", dt, []int{a.B, a.H, a.T, a.D}, mmGen)
	k, kv := tc.input("k", dt, []int{a.B, a.KV, a.S, a.D}, mmGen)
	v, vv := tc.input("v", dt, []int{a.B, a.KV, a.S, a.Dv}, mmGen)
	ref, sc := attnRef(a, dt, qv, kv, vv)
	tc.expect("y", graph.CausalAttention(q, k, v, tc.attnStart(a), a.scale), want{v: ref, tol: attnTol(a), scale: sc})
	tc.run()
}

func (s *suite) attnShapes(t *testing.T) {
	specs := []attnSpec{
		{B: 2, H: 8, KV: 2, T: 1, S: 37, D: 16, Dv: 16, start: []int64{36, 5}, scale: 0.25},     // decode steps, GQA
		{B: 1, H: 4, KV: 4, T: 9, S: 9, D: 8, Dv: 8, start: []int64{0}, scale: 0.35},            // a prompt
		{B: 2, H: 4, KV: 2, T: 5, S: 20, D: 8, Dv: 12, start: []int64{10, 0}, scale: 0.3},       // chunks over a cache
		{B: 1, H: 6, KV: 1, T: 3, S: 50, D: 4, Dv: 5, start: []int64{47}, scale: 0.5},           // multi-query
		{B: 2, H: 9, KV: 3, T: 1, S: 70, D: 64, Dv: 64, start: []int64{69, 12}, scale: 0.125},   // groups of 3 (SmolLM's decode)
		{B: 2, H: 2, KV: 2, T: 2, S: 7, D: 3, Dv: 2, start: []int64{100, 4000000000}, scale: 1}, // starts past the keys
		{B: 1, H: 2, KV: 1, T: 1, S: 3000, D: 64, Dv: 64, start: []int64{2999}, scale: 0.125},   // many key blocks
		{B: 1, H: 4, KV: 2, T: 1, S: 2048, D: 64, Dv: 64, start: []int64{700}, scale: 0.125},    // masked blocks
		{B: 1, H: 1, KV: 1, T: 1, S: 1, D: 1, Dv: 1, start: []int64{0}, scale: 1},               // one element
		{B: 1, H: 16, KV: 1, T: 1, S: 5000, D: 8, Dv: 8, start: []int64{4990}, scale: 0.3},      // too many blocks for the merge's shared weights
		{B: 1, H: 16, KV: 2, T: 2, S: 300, D: 128, Dv: 128, start: []int64{290}, scale: 0.09},   // wide heads
		{B: 0, H: 4, KV: 2, T: 1, S: 5, D: 8, Dv: 8, start: []int64{}, scale: 1},                // empty batch
		{B: 2, H: 2, KV: 1, T: 0, S: 5, D: 8, Dv: 8, start: []int64{1, 2}, scale: 1},            // no queries
		// The GPU kernel's paths (kernels/attention.go): blocks of 64 keys,
		// two passes with every load issued at once; value rows wider
		// than a block (loads after the softmax); more splits than the
		// merge holds in registers.
		{B: 1, H: 16, KV: 8, T: 1, S: 2100, D: 64, Dv: 64, start: []int64{2050}, scale: 0.125},
		{B: 1, H: 2, KV: 1, T: 1, S: 50, D: 8, Dv: 260, start: []int64{45}, scale: 0.3},
		{B: 1, H: 1, KV: 1, T: 1, S: 9000, D: 4, Dv: 4, start: []int64{8999}, scale: 0.5},
		// The cluster form (NVIDIA sm_90+; the first with
		// LOOM_ATTENTION_WARPS=0, the warp form's otherwise): a 1B llama's
		// decode step, a cluster of 8 blocks of 128 keys, every key
		// visible in one row and the last blocks masked in the other; a
		// cluster of 7 blocks of 32 keys over two query positions.
		{B: 2, H: 32, KV: 8, T: 1, S: 1024, D: 64, Dv: 64, start: []int64{1023, 600}, scale: 0.125},
		{B: 1, H: 8, KV: 2, T: 2, S: 200, D: 32, Dv: 32, start: []int64{150}, scale: 0.2},
		// The warp form (NVIDIA sm_90+; 8 keys a warp, 4 lanes a key, a
		// cluster of up to 8 blocks of up to 32 warps): wide heads with 8
		// query heads a key head (16 keys a warp), a window ending inside
		// a warp; 2,048 keys (32 warps a block), a row seeing a block and
		// a half; a cache of 33 keys (a warp past S reads key 0, never
		// visible).
		{B: 1, H: 16, KV: 2, T: 1, S: 1000, D: 128, Dv: 128, start: []int64{977}, scale: 0.09},
		{B: 2, H: 4, KV: 1, T: 2, S: 2048, D: 64, Dv: 64, start: []int64{2046, 380}, scale: 0.125},
		{B: 3, H: 6, KV: 3, T: 1, S: 33, D: 64, Dv: 64, start: []int64{32, 0, 17}, scale: 0.125},
	}
	for i, a := range specs {
		dt := wideFloats[i%len(wideFloats)]
		t.Run(a.String()+"/"+dt.String(), func(t *testing.T) { s.runAttn(t, a, dt) })
	}
	// Every dtype on the decode shapes (the second: a 1B llama's step,
	// which the warp form takes in f32, f16 and bf16).
	for _, dt := range wideFloats {
		t.Run("dtypes/"+dt.String(), func(t *testing.T) { s.runAttn(t, specs[0], dt) })
		t.Run("dtypes1B/"+dt.String(), func(t *testing.T) { s.runAttn(t, specs[15], dt) })
	}
}

// attnViews reads the operands through views: queries transposed from the
// projections' [B, T, H, D] layout, keys and values a window of a longer
// cache at an offset, start a narrowed vector.
func (s *suite) attnViews(t *testing.T) {
	a := attnSpec{B: 2, H: 4, KV: 2, T: 3, S: 40, D: 8, Dv: 6, start: []int64{37, 2}, scale: 0.3}
	for _, dt := range wideFloats {
		t.Run(dt.String(), func(t *testing.T) {
			tc := s.newCase(t)
			q, qv := tc.input("q", dt, []int{a.B, a.T, a.H, a.D}, mmGen)
			k, kv := tc.input("k", dt, []int{a.B + 1, a.KV, a.S + 9, a.D}, mmGen)
			v, vv := tc.input("v", dt, []int{a.B, a.S, a.KV, a.Dv}, mmGen)
			sv := newVals(dtype.U32, []int{a.B + 2})
			copy(sv.i[1:], a.start)
			st := tc.inputVals("start", sv).Narrow(0, 1, a.B)
			qq, qqv := q.Transpose(1, 2), qv.transpose(1, 2)
			kk, kkv := k.Narrow(0, 1, a.B).Narrow(2, 5, a.S), kv.narrow(0, 1, a.B).narrow(2, 5, a.S)
			vw, vwv := v.Transpose(1, 2), vv.transpose(1, 2)
			ref, sc := attnRef(a, dt, qqv, kkv, vwv)
			tc.expect("y", graph.CausalAttention(qq, kk, vw, st, a.scale), want{v: ref, tol: attnTol(a), scale: sc})
			tc.run()
		})
	}
}

// attnNaN: a NaN query element makes its head's row NaN (every score of
// the row is NaN), and only that row; the second shape is the warp
// form's (NVIDIA sm_90+).
func (s *suite) attnNaN(t *testing.T) {
	for i, a := range []attnSpec{{B: 1, H: 2, KV: 1, T: 2, S: 70, D: 4, Dv: 3, start: []int64{60}, scale: 0.5},
		{B: 1, H: 2, KV: 1, T: 2, S: 70, D: 64, Dv: 64, start: []int64{60}, scale: 0.5}} {
		s.attnNaNOf(t, a, i)
	}
}

func (s *suite) attnNaNOf(t *testing.T, a attnSpec, i int) {
	for _, dt := range wideFloats {
		t.Run(fmt.Sprintf("%d/%v", i, dt), func(t *testing.T) {
			tc := s.newCase(t)
			qv := mmGen.draw(tc.r, dt, []int{a.B, a.H, a.T, a.D})
			qv.f[((0*a.H+1)*a.T+1)*a.D+2] = math.NaN() // head 1, query 1
			q := tc.inputVals("q", qv)
			k, kv := tc.input("k", dt, []int{a.B, a.KV, a.S, a.D}, mmGen)
			v, vv := tc.input("v", dt, []int{a.B, a.KV, a.S, a.Dv}, mmGen)
			ref, sc := attnRef(a, dt, qv, kv, vv)
			for d := range a.Dv {
				if !math.IsNaN(ref.f[(1*a.T+1)*a.Dv+d]) || math.IsNaN(ref.f[d]) {
					t.Fatalf("reference: want NaN in head 1 query 1 only")
				}
			}
			tc.expect("y", graph.CausalAttention(q, k, v, tc.attnStart(a), a.scale), want{v: ref, tol: attnTol(a), scale: sc})
			tc.run()
		})
	}
}

func attnErrors(t *testing.T) {
	f32, u32 := dtype.F32, dtype.U32
	cases := []struct {
		name           string
		q, k, v, start []int
		dt, sdt        dtype.DType
		scale          float64
		frags          []string
	}{
		{"heads", []int{1, 6, 1, 8}, []int{1, 4, 5, 8}, []int{1, 4, 5, 8}, []int{1}, f32, u32, 1, []string{"multiple of KV", "[1 6 1 8]", "[1 4 5 8]"}},
		{"head dim", []int{1, 4, 1, 8}, []int{1, 2, 5, 7}, []int{1, 2, 5, 8}, []int{1}, f32, u32, 1, []string{"head dim", "[1 2 5 7]"}},
		{"keys", []int{1, 4, 1, 8}, []int{1, 2, 5, 8}, []int{1, 2, 6, 8}, []int{1}, f32, u32, 1, []string{"number of keys", "[1 2 6 8]"}},
		{"no keys", []int{1, 4, 1, 8}, []int{1, 2, 0, 8}, []int{1, 2, 0, 8}, []int{1}, f32, u32, 1, []string{"S ≥ 1"}},
		{"batch", []int{2, 4, 1, 8}, []int{1, 2, 5, 8}, []int{1, 2, 5, 8}, []int{2}, f32, u32, 1, []string{"same batch"}},
		{"start shape", []int{2, 4, 1, 8}, []int{2, 2, 5, 8}, []int{2, 2, 5, 8}, []int{1}, f32, u32, 1, []string{"start", "u32[1]"}},
		{"start dtype", []int{1, 4, 1, 8}, []int{1, 2, 5, 8}, []int{1, 2, 5, 8}, []int{1}, f32, dtype.I64, 1, []string{"start must be u32", "i64"}},
		{"rank", []int{4, 1, 8}, []int{2, 5, 8}, []int{2, 5, 8}, []int{1}, f32, u32, 1, []string{"4-D"}},
		{"dtype", []int{1, 4, 1, 8}, []int{1, 2, 5, 8}, []int{1, 2, 5, 8}, []int{1}, dtype.U8, u32, 1, []string{"dtype u8 not supported"}},
		{"scale", []int{1, 4, 1, 8}, []int{1, 2, 5, 8}, []int{1, 2, 5, 8}, []int{1}, f32, u32, math.Inf(1), []string{"scale +Inf"}},
	}
	for _, c := range cases {
		noPanic(t, c.name, func() {
			g := graph.New()
			y := graph.CausalAttention(g.Input("q", c.dt, c.q...), g.Input("k", c.dt, c.k...), g.Input("v", c.dt, c.v...), g.Input("start", c.sdt, c.start...), c.scale)
			wantErr(t, "attention "+c.name, y.Err(), append([]string{"attention"}, c.frags...)...)
		})
	}
	// Mixed dtypes name both.
	g := graph.New()
	y := graph.CausalAttention(g.Input("q", dtype.F32, 1, 2, 1, 4), g.Input("k", dtype.BF16, 1, 2, 3, 4), g.Input("v", dtype.F32, 1, 2, 3, 4), g.Input("s", u32, 1), 1)
	wantErr(t, "attention dtypes", y.Err(), "attention", "share one dtype", "bf16[1 2 3 4]")
}

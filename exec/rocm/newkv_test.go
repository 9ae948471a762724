package rocm

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/loomgraph/loom/catalog"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestGPUAttentionNewKV: a decode step's attention right behind the
// scatter of its position into the cache (plan.Kernel.NewKV), run with
// the cache donated — the scatter in place, the attention issuing its
// loads before it waits and taking the new key and value from the q/k/v
// buffer — and not donated (a copy of the cache first; the attention
// waits before any load). The cache holds NaN at each sequence's
// position before the step, so an attention that used the stale cache
// there would give NaN. Both runs give the same bits (the attention and
// the updated cache), within f32 rounding of the CPU's, and each took the
// path it should (the launch counters). The 1B llama's shape (32 heads,
// 8 key heads, a 768-key window at position 517) is among the cases.
func TestGPUAttentionNewKV(t *testing.T) {
	e := openGPU(t)
	ctx := context.Background()
	cases := []struct {
		dt                  dtype.DType
		b, h, kv, s, d, win int
		pos                 []uint32
	}{
		{dtype.BF16, 1, 32, 8, 1024, 64, 768, []uint32{517}},
		{dtype.BF16, 2, 8, 2, 512, 64, 300, []uint32{0, 299}},
		{dtype.F16, 2, 8, 2, 512, 64, 300, []uint32{63, 64}},
		{dtype.F32, 3, 4, 4, 256, 64, 256, []uint32{7, 128, 255}},
		{dtype.BF16, 1, 8, 2, 2048, 64, 48, []uint32{40}},
		{dtype.BF16, 1, 4, 1, 256, 64, 200, []uint32{150}}, // one key head
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v_B%d_H%d_KV%d_S%d_W%d", c.dt, c.b, c.h, c.kv, c.s, c.win), func(t *testing.T) {
			g := graph.New()
			g.Output("o", catalog.DecodeAttention(g, c.dt, c.b, c.h, c.kv, c.s, c.d, c.win))
			p, err := g.Compile(graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			marked := 0
			for _, st := range p.Plan().Steps {
				if st.Kernel.NewKV != nil {
					marked++
				}
			}
			if marked != 1 {
				t.Fatalf("%d steps marked NewKV, want 1 (the attention)", marked)
			}
			r := rand.New(rand.NewPCG(uint64(c.b*c.s), 7))
			rnd := func(n int) []float64 {
				v := make([]float64, n)
				for i := range v {
					v[i] = r.NormFloat64()
				}
				return v
			}
			cv := rnd(2 * c.b * c.kv * c.s * c.d)
			for i := range 2 {
				for b, ps := range c.pos {
					for h := range c.kv {
						at := (((i*c.b+b)*c.kv+h)*c.s + int(ps)) * c.d
						for x := range c.d {
							cv[at+x] = math.NaN() // the stale entry the scatter overwrites
						}
					}
				}
			}
			cache, _ := tensor.FromFloat64s(c.dt, cv, 2, c.b, c.kv, c.s, c.d)
			y, _ := tensor.FromFloat64s(c.dt, rnd(c.b*(c.h+2*c.kv)*c.d), c.b, 1, c.h+2*c.kv, c.d)
			pos, _ := tensor.New(slices.Clone(c.pos), c.b)
			in := map[string]*tensor.Tensor{"cache": cache, "y": y, "pos": pos}
			want, err := p.Run(ctx, cpu.New(), in)
			if err != nil {
				t.Fatal(err)
			}
			// Not donated: the attention waits for the scatter (and its copy).
			copied, inPlace := aheadCopied.Load(), aheadInPlaceLaunches.Load()
			plain, err := p.Run(ctx, e, in)
			if err != nil {
				t.Fatal(err)
			}
			if aheadCopied.Load() != copied+1 || aheadInPlaceLaunches.Load() != inPlace {
				t.Errorf("not donated: %d waited, %d read ahead, want 1 and 0",
					aheadCopied.Load()-copied, aheadInPlaceLaunches.Load()-inPlace)
			}
			// Donated: the scatter in place, the attention reading ahead.
			dc, err := e.FromHost(cache)
			if err != nil {
				t.Fatal(err)
			}
			copied, inPlace = aheadCopied.Load(), aheadInPlaceLaunches.Load()
			out, err := p.RunValues(ctx, e, map[string]exec.Value{"cache": exec.Donate(dc), "y": y, "pos": pos}, true)
			if err != nil {
				dc.Free()
				t.Fatal(err)
			}
			if aheadInPlaceLaunches.Load() != inPlace+1 || aheadCopied.Load() != copied {
				t.Errorf("donated: %d read ahead, %d waited, want 1 and 0",
					aheadInPlaceLaunches.Load()-inPlace, aheadCopied.Load()-copied)
			}
			got := map[string]*tensor.Tensor{}
			for name, v := range out {
				gt, err := v.(*Tensor).ToHost()
				v.(*Tensor).Free()
				if err != nil {
					t.Fatal(err)
				}
				got[name] = gt
			}
			for _, name := range []string{"o", "cache.out"} {
				if !slices.Equal(got[name].Float64s(), plain[name].Float64s()) {
					t.Errorf("%s: donated and plain runs differ", name)
				}
			}
			// The updated cache (no NaN left) is the CPU's bit for bit; the
			// attention within f32 rounding of its float64 arithmetic and
			// the output's rounding.
			if !slices.Equal(plain["cache.out"].Float64s(), want["cache.out"].Float64s()) {
				t.Errorf("cache.out differs from the CPU's")
			}
			tol := map[dtype.DType]float64{dtype.F32: 1e-5, dtype.F16: 2e-3, dtype.BF16: 1.6e-2}[c.dt]
			gv, wv := got["o"].Float64s(), want["o"].Float64s()
			for i := range wv {
				if math.IsNaN(gv[i]) || math.Abs(gv[i]-wv[i]) > tol*(1+math.Abs(wv[i])) {
					t.Fatalf("o[%d] = %v, want %v (CPU)", i, gv[i], wv[i])
				}
			}
		})
	}
}

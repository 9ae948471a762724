package cpu_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
	"github.com/loomgraph/loom/tests/conformance"
)

// TestConvTiles runs the conformance convolution group with the smallest
// tiles: one output row at a time through the row bands of convs with
// vertical stride 1, one pixel at a time through im2col and col2im (and,
// with the row bands off, through im2col for every conv). Every step then loops over
// many tiles that split output rows, images and channel chunks, on every
// path (f16/bf16 staging too), against the same float64 references.
func TestConvTiles(t *testing.T) {
	defer cpu.SetConvTileTarget(1)()
	newExec := func(p byte) exec.Executor { return cpu.New().Poison(p) }
	t.Run("rows", func(t *testing.T) { conformance.Conv(t, newExec, graph.Options{}) })
	defer cpu.SetConvRows(false)()
	t.Run("im2col", func(t *testing.T) { conformance.Conv(t, newExec, graph.Options{}) })
}

// TestConvHostBLAS runs the conformance convolution group with the float32
// GEMMs on the host BLAS (as on CPUs without AVX-512), so that both paths
// pass the same tests on a CPU that has it.
func TestConvHostBLAS(t *testing.T) {
	defer cpu.SetConvOwnGemm(false)()
	newExec := func(p byte) exec.Executor { return cpu.New().Poison(p) }
	conformance.Conv(t, newExec, graph.Options{})
}

// randTensor returns a tensor of dt and shape with values in [−1, 1).
func randTensor(t *testing.T, r *rand.Rand, dt dtype.DType, shape ...int) *tensor.Tensor {
	t.Helper()
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32()*2 - 1
	}
	x, err := tensor.FromFloat32s(dt, v, shape...)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestConvScratchFitsTheLimit: under a memory limit that leaves less room
// than the scratch a conv step would take unbounded, the step takes
// smaller tiles and gives the same values; under a limit that leaves no
// room for even one pixel's column, the run returns an error naming the
// scratch, and the executor stays usable.
func TestConvScratchFitsTheLimit(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// im2col of one image: 64·9 rows × 32·32 pixels of f64 = 4.5 MiB.
	const N, C, H, W, O = 2, 64, 32, 32, 8
	g := graph.New()
	x := g.Input("x", dtype.F64, N, C, H, W)
	w := g.Input("w", dtype.F64, O, C, 3, 3)
	g.Output("y", graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}}))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensor.Tensor{"x": randTensor(t, r, dtype.F64, N, C, H, W), "w": randTensor(t, r, dtype.F64, O, C, 3, 3)}
	ctx := context.Background()
	want, err := p.Run(ctx, cpu.New(), in)
	if err != nil {
		t.Fatal(err)
	}
	out := N * O * H * W * 8
	// Room for about 100 pixels' columns (64·9·8 bytes each) beside the
	// output: many tiles.
	e := cpu.New().SetMemLimit(int64(out + 100*C*9*8))
	got, err := p.Run(ctx, e, in)
	if err != nil {
		t.Fatalf("under a limit leaving room for 100 pixels: %v", err)
	}
	wv, gv := want["y"].Float64s(), got["y"].Float64s()
	for i := range wv {
		if math.Abs(wv[i]-gv[i]) > 1e-12*max(1, math.Abs(wv[i])) {
			t.Fatalf("element %d: %v with small tiles, %v unbounded", i, gv[i], wv[i])
		}
	}
	if s := e.MemStats(); s.LiveBytes > int64(100*C*9*8+4096) {
		t.Errorf("scratch arenas hold %d bytes, more than the room the limit left", s.LiveBytes)
	}
	e = cpu.New().SetMemLimit(int64(out + C*9*8/2))
	_, err = p.Run(ctx, e, in)
	if err == nil || !strings.Contains(err.Error(), "scratch") || !strings.Contains(err.Error(), "conv") {
		t.Fatalf("under a limit leaving half a pixel's column: got %v, want an error naming the conv step's scratch", err)
	}
	e.SetMemLimit(0)
	if _, err := p.Run(ctx, e, in); err != nil {
		t.Fatalf("the executor after the error: %v", err)
	}
}

// TestConvScratchIsBounded: a conv whose column matrix is far larger than
// the bound (one image's im2col is 64·9·128·128 f32 = 36 MiB, eight
// images 288 MiB) holds at most ConvScratchMax of scratch, through im2col
// tiles and through row bands, and reruns reuse it (no new arena).
func TestConvScratchIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("large inputs")
	}
	r := rand.New(rand.NewPCG(3, 4))
	const N, C, H, W, O = 8, 64, 128, 128, 4
	g := graph.New()
	x := g.Input("x", dtype.F32, N, C, H, W)
	w := g.Input("w", dtype.F32, O, C, 3, 3)
	g.Output("y", graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}}))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]*tensor.Tensor{"x": randTensor(t, r, dtype.F32, N, C, H, W), "w": randTensor(t, r, dtype.F32, O, C, 3, 3)}
	for _, rows := range []bool{true, false} {
		restore := cpu.SetConvRows(rows)
		e := cpu.New()
		for range 2 {
			if _, err := p.Run(context.Background(), e, in); err != nil {
				t.Fatal(err)
			}
		}
		restore()
		s := e.MemStats()
		if s.LiveBytes > cpu.ConvScratchMax+4096 {
			t.Errorf("rows=%v: conv scratch: %d bytes live, bound %d", rows, s.LiveBytes, cpu.ConvScratchMax)
		}
		if s.ArenasMade != 1 {
			t.Errorf("rows=%v: two runs made %d arenas, want 1 (the scratch, reused)", rows, s.ArenasMade)
		}
	}
}

// TestConvCancel: a long conv (and a long transposed conv) cancelled
// shortly after it starts returns context.Canceled promptly: the context
// is checked between tiles.
func TestConvCancel(t *testing.T) {
	if testing.Short() {
		t.Skip("large inputs")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, transposed := range []bool{false, true} {
		g := graph.New()
		const N, C, H, W = 16, 64, 64, 64
		x := g.Input("x", dtype.F32, N, C, H, W)
		w := g.Input("w", dtype.F32, C, C, 3, 3)
		var y *graph.Tensor
		if transposed {
			y = graph.ConvTranspose2d(x, w, graph.ConvOptions{Padding: []int{1}})
		} else {
			y = graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}})
		}
		g.Output("y", y)
		p, err := g.Compile(graph.Options{})
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]*tensor.Tensor{"x": randTensor(t, r, dtype.F32, N, C, H, W), "w": randTensor(t, r, dtype.F32, C, C, 3, 3)}
		e := cpu.New()
		if _, err := p.Run(context.Background(), e, in); err != nil { // warm: arenas made
			t.Fatal(err)
		}
		// Timing on a shared machine is noisy (CI compiles kernels for AMD
		// in the background while this runs): each attempt times a whole
		// run just before its cancelled one, and the test fails only if
		// every attempt returns late. A run that never looks at its
		// context returns late every time.
		var report []string
		ok := false
		for attempt := range 4 {
			start := time.Now()
			if _, err := p.Run(context.Background(), e, in); err != nil {
				t.Fatal(err)
			}
			full := time.Since(start)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(full/10, cancel)
			start = time.Now()
			_, err = p.Run(ctx, e, in)
			took := time.Since(start)
			cancel()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("transposed=%v: cancelled run returned %v", transposed, err)
			}
			report = append(report, fmt.Sprintf("attempt %d: run %v, cancelled at %v, returned after %v", attempt, full, full/10, took))
			if took <= full/2 {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("transposed=%v: every cancelled run returned after more than half a whole run:\n%s", transposed, strings.Join(report, "\n"))
		}
		t.Logf("transposed=%v: %s", transposed, strings.Join(report, "; "))
	}
}

package kernels

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomgraph/loom/codegen"
	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/tensor"
)

// cumsumInput fills a tensor for a cumsum: floats normal-ish with a few
// ±0, −0 and integers mixed in, and (special) one ±Inf or NaN in some rows
// so that propagation is compared too; integers over their whole range,
// so that sums wrap.
func cumsumInput(r *rand.Rand, dt dtype.DType, special bool, shape ...int) *tensor.Tensor {
	n := ir.Numel(shape)
	vals := make([]float64, n)
	for i := range vals {
		switch {
		case !dt.IsFloat():
		case r.IntN(64) == 0:
			vals[i] = math.Copysign(0, -1)
		case r.IntN(8) == 0:
			vals[i] = float64(r.IntN(9) - 4)
		default:
			vals[i] = r.NormFloat64() * math.Ldexp(1, r.IntN(12)-6)
		}
	}
	if special && dt.IsFloat() && n > 0 {
		for k := range 3 {
			vals[r.IntN(n)] = []float64{math.Inf(1), math.Inf(-1), math.NaN()}[k]
		}
	}
	t, err := tensor.FromFloat64s(dt, vals, shape...)
	if err != nil {
		panic(err)
	}
	switch d := t.Data().(type) {
	case []uint8:
		for i := range d {
			d[i] = uint8(r.Uint32())
		}
	case []uint32:
		for i := range d {
			d[i] = r.Uint32()
		}
	case []int64:
		for i := range d {
			d[i] = int64(r.Uint64())
		}
	}
	return t
}

// cumsumCase scans a [rows, n] input (or, strided, its transpose read as
// [n, rows] along dim 0; or offset, a narrowed view) along its long dim.
// Without data, no inputs are drawn (the case is only planned).
func cumsumCase(t testing.TB, dt dtype.DType, rows, n int, layout string, seed uint64, data bool) testCase {
	t.Helper()
	b := newBuilder(seed)
	var out *graph.Tensor
	add := func(name string, shape ...int) *graph.Tensor {
		if data {
			b.inputs[name] = cumsumInput(b.rng, dt, seed%2 == 0, shape...)
		}
		return b.g.Input(name, dt, shape...)
	}
	switch layout {
	case "contiguous":
		out = add("x", rows, n).Cumsum(-1)
	case "offset": // rows start one element in: no vector loads
		out = add("x", rows, n+1).Narrow(1, 1, n).Cumsum(1)
	case "transposed": // the scanned dim is strided, read as a view
		out = add("x", n, rows).T().Cumsum(1)
	case "dim0": // a non-last dim of a contiguous input
		out = add("x", n, rows).Cumsum(0)
	default:
		t.Fatalf("layout %q", layout)
	}
	return testCase{
		name:   fmt.Sprintf("cumsum/%v/%dx%d/%s", dt, rows, n, layout),
		prog:   b.compile(t, out),
		inputs: b.inputs,
		addOp:  dt.IsFloat(),
	}
}

// cumsumShapes cover every kernel: one thread per sequence (short rows;
// many strided columns), the tile kernel with 16 … 256 threads per row,
// whole rows per block, and the look-back.
var cumsumShapes = []struct {
	rows, n int
	layout  string
	kernel  string
}{
	{37, 5, "contiguous", "seq"},
	{9000, 40, "dim0", "seq"},
	{5, 31, "contiguous", "tile"},
	{9, 1000, "offset", "tile"},
	{3, 4096, "contiguous", "tile"},
	{40, 300, "dim0", "tile"},
	{1024, 4097, "contiguous", "rows"},
	{1100, 5000, "transposed", "rows"},
	{2, 10000, "contiguous", "lookback"},
	{3, 9000, "dim0", "lookback"},
	{1, 100000, "offset", "lookback"},
}

// cumsumCases lists one case per dtype × shape, with data (the GPU test),
// or without (the compile tests plan them): then only what changes the
// source, each kernel in every dtype on contiguous rows, and every shape in
// f32 (strides and alignment change the same lines in every dtype), to keep
// the compile tests short.
func cumsumCases(t testing.TB, data bool) []testCase {
	var cases []testCase
	seed := uint64(500)
	for _, dt := range ir.ScanDTypes.List() {
		seen := map[string]bool{}
		for _, sc := range cumsumShapes {
			if !data && dt != dtype.F32 && (sc.layout != "contiguous" || seen[sc.kernel]) {
				continue
			}
			seen[sc.kernel] = true
			cases = append(cases, cumsumCase(t, dt, sc.rows, sc.n, sc.layout, seed, data))
			seed++
		}
	}
	return cases
}

// TestCumsumPlan: the kernel each shape gets, its launches and scratch,
// vector I/O only where rows are contiguous and aligned.
func TestCumsumPlan(t *testing.T) {
	amd := codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"}
	for _, sc := range cumsumShapes {
		tc := cumsumCase(t, dtype.F32, sc.rows, sc.n, sc.layout, 1, false)
		ks := indexKernels(t, tc.prog.Plan())
		if len(ks) != 1 {
			t.Fatalf("%s: %d indexing kernels", tc.name, len(ks))
		}
		ls, ss, err := Plan(ks[0], amd)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wantL, wantS := 1, 0
		if sc.kernel == "lookback" {
			wantL, wantS = 2, 1
		}
		if len(ls) != wantL || len(ss) != wantS || !strings.HasSuffix(ls[len(ls)-1].Name, "_"+sc.kernel) {
			t.Errorf("%s: launches %d (last %s), scratch %d; want %d launches ending in _%s, %d scratch", tc.name, len(ls), ls[len(ls)-1].Name, len(ss), wantL, sc.kernel, wantS)
		}
		vec := strings.Contains(ls[0].Code, "#define CS_VIN 1")
		if want := sc.layout == "contiguous" && sc.kernel != "seq" && sc.n%4 == 0; vec != want {
			t.Errorf("%s: vector loads %v, want %v", tc.name, vec, want)
		}
		if sc.kernel == "lookback" {
			tiles := int64(sc.rows * ((sc.n + 4095) / 4096))
			if want := (tiles+1)*4 + 15; ss[0].Bytes != want/16*16+2*tiles*4 {
				t.Errorf("%s: scratch %d bytes for %d tiles", tc.name, ss[0].Bytes, tiles)
			}
		}
	}
	if got, err := CumsumKernel([]int{8192, 8192}, 1, dtype.F32); got != "rows" || err != nil {
		t.Errorf("W-cumsum (8192×8192 f32, last dim) uses %q (%v), want rows", got, err)
	}
	// LOOM_GPU_CUMSUM forces a kernel where it applies.
	for _, c := range []struct {
		env   string
		shape []int
		want  string
	}{{"lookback", []int{8192, 8192}, "lookback"}, {"seq", []int{2, 10000}, "seq"}, {"tile", []int{2, 10000}, "lookback"}, {"tile", []int{8, 5}, "tile"}, {"rows", []int{3, 100}, "rows"}} {
		t.Setenv(cumsumEnv, c.env)
		if got, err := CumsumKernel(c.shape, 1, dtype.F32); got != c.want || err != nil {
			t.Errorf("%s=%s on %v: %q (%v), want %q", cumsumEnv, c.env, c.shape, got, err, c.want)
		}
	}
	t.Setenv(cumsumEnv, "fast")
	if _, err := CumsumKernel([]int{4, 4}, 1, dtype.F32); err == nil || !strings.Contains(err.Error(), cumsumEnv) {
		t.Errorf("%s=fast: error %v", cumsumEnv, err)
	}
	t.Setenv(cumsumEnv, "")
	for _, dt := range []dtype.DType{dtype.F64, dtype.I64} {
		tc := cumsumCase(t, dt, 2, 10000, "contiguous", 1, false)
		ls, ss, err := Plan(indexKernels(t, tc.prog.Plan())[0], amd)
		if err != nil || ss[0].Bytes != (7*4+15)/16*16+2*6*8 || strings.Contains(ls[0].Code, "typedef unsigned long long CS_C;") != (dt == dtype.I64) {
			t.Errorf("%v look-back: err %v, scratch %v", dt, err, ss)
		}
	}
	// Empty: no launch.
	g := graph.New()
	g.Output("o", g.Input("x", dtype.F32, 3, 0).Cumsum(1))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ks := indexKernels(t, p.Plan()); len(ks) == 1 {
		if ls, _, err := Plan(ks[0], amd); err != nil || len(ls) != 0 {
			t.Errorf("empty cumsum: %d launches, %v", len(ls), err)
		}
	}
}

// TestCumsumWide: a cumsum over 2^31 elements plans 64-bit index math.
func TestCumsumWide(t *testing.T) {
	g := graph.New()
	g.Output("o", g.Input("x", dtype.U8, 4, 1<<30).Cumsum(1))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ls, _, err := Plan(indexKernels(t, p.Plan())[0], codegen.Target{Platform: codegen.AMD, Arch: "gfx90a"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ls[0].Code, "typedef unsigned long long loom_idx;") {
		t.Errorf("2^32-element cumsum without 64-bit indices")
	}
}

// twinOut runs CumsumTwin on one sequence of a host tensor's values (in the
// compute type of dt) and returns the outputs: floats as float64 (f16/bf16
// rounded once, like the kernel's store), integers wrapped to dt as int64.
func twinOut(dt dtype.DType, x *tensor.Tensor, lookback func(int) int) ([]float64, []int64) {
	n := x.Numel()
	f, i64 := make([]float64, n), make([]int64, n)
	switch dt {
	case dtype.F64:
		v := make([]float64, n)
		for i := range v {
			v[i] = x.Float64(i)
		}
		copy(f, CumsumTwin(v, lookback))
	case dtype.F32, dtype.F16, dtype.BF16:
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(x.Float64(i))
		}
		for i, r := range CumsumTwin(v, lookback) {
			switch dt {
			case dtype.F16:
				f[i] = float64(dtype.ToF16(r).Float32())
			case dtype.BF16:
				f[i] = float64(dtype.ToBF16(r).Float32())
			default:
				f[i] = float64(r)
			}
		}
	case dtype.U8, dtype.U32:
		v := make([]uint32, n)
		for i := range v {
			v[i] = uint32(x.Float64(i))
		}
		for i, r := range CumsumTwin(v, lookback) {
			if dt == dtype.U8 {
				r &= 0xff
			}
			i64[i] = int64(r)
		}
	case dtype.I64:
		d := x.Data().([]int64)
		v := make([]uint64, n)
		for i := range v {
			v[i] = uint64(d[i])
		}
		for i, r := range CumsumTwin(v, lookback) {
			i64[i] = int64(r)
		}
	}
	return f, i64
}

// intsOf reads an integer tensor as int64 values.
func intsOf(t *tensor.Tensor) []int64 {
	out := make([]int64, t.Numel())
	switch d := t.Data().(type) {
	case []uint8:
		for i, v := range d {
			out[i] = int64(v)
		}
	case []uint32:
		for i, v := range d {
			out[i] = int64(v)
		}
	case []int64:
		copy(out, d)
	}
	return out
}

// TestCumsumTwin: the kernel's structure in Go (CumsumTwin) gives the CPU
// executor's bits for every dtype and the lengths around chunk, group and
// tile boundaries, whatever tile the look-back finds; and for floats both
// are within the order's error bound of the float64 prefix sums.
func TestCumsumTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range ir.ScanDTypes.List() {
		for _, n := range []int{1, 15, 16, 17, 31, 32, 33, 255, 256, 257, 1000, 4095, 4096, 4097, 8193, 40000, 100000} {
			x := cumsumInput(r, dt, n == 4097, n)
			g := graph.New()
			g.Output("o", g.Input("x", dt, n).Cumsum(0))
			p, err := g.Compile(graph.Options{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Run(context.Background(), cpu.New(), map[string]*tensor.Tensor{"x": x})
			if err != nil {
				t.Fatal(err)
			}
			cpuOut := res["o"]
			// Look-back patterns: the predecessor (as CS_M_ROWS), tile 0
			// (every total folded), and a random earlier tile.
			patterns := map[string]func(int) int{
				"carry":  nil,
				"pred":   func(k int) int { return k - 1 },
				"first":  func(int) int { return 0 },
				"random": func(k int) int { return r.IntN(k) },
			}
			var ints []int64
			if !dt.IsFloat() {
				ints = intsOf(cpuOut)
			}
			for name, lb := range patterns {
				gf, gi := twinOut(dt, x, lb)
				for i := range n {
					if !dt.IsFloat() {
						if gi[i] != ints[i] {
							t.Fatalf("%v n=%d look-back %s: twin[%d] = %d, CPU %d", dt, n, name, i, gi[i], ints[i])
						}
						continue
					}
					w := cpuOut.Float64(i)
					if !(gf[i] == w && math.Signbit(gf[i]) == math.Signbit(w)) && !(math.IsNaN(gf[i]) && math.IsNaN(w)) {
						t.Fatalf("%v n=%d look-back %s: twin[%d] = %v, CPU %v", dt, n, name, i, gf[i], w)
					}
				}
			}
			if dt.IsFloat() && n != 4097 {
				checkBound(t, dt, x, "CPU", cpuOut.Float64)
				twin, _ := twinOut(dt, x, patterns["random"])
				checkBound(t, dt, x, "twin", func(i int) float64 { return twin[i] })
			}
		}
	}
}

// checkBound checks a float cumsum (got(i), from who) against the float64
// prefix sums within ir/scan.go's bound, γ(48 + k)·Σ|x| in the compute
// type, plus half an ulp of the output dtype for f16/bf16.
func checkBound(t *testing.T, dt dtype.DType, x *tensor.Tensor, who string, got func(int) float64) {
	t.Helper()
	u := math.Ldexp(1, -24)
	if dt == dtype.F64 {
		u = math.Ldexp(1, -53)
	}
	var s, abs float64
	for i := range x.Numel() {
		s += x.Float64(i)
		abs += math.Abs(x.Float64(i))
		h := float64(48 + i/ir.ScanTile)
		tol := h * u / (1 - h*u) * abs
		switch dt {
		case dtype.F16:
			tol += math.Abs(s)*math.Ldexp(1, -11) + math.Ldexp(1, -25)
		case dtype.BF16:
			tol += math.Abs(s)*math.Ldexp(1, -8) + math.Ldexp(1, -134)
		}
		if d := math.Abs(got(i) - s); !(d <= tol) {
			t.Fatalf("%s %v n=%d: out[%d] = %v, float64 sum %v (|diff| %g > bound %g)", who, dt, x.Numel(), i, got(i), s, d, tol)
		}
	}
}

// TestGPUCumsum compares every kernel, dtype and layout with the CPU, bit
// for bit (NaN payloads aside), on the device.
func TestGPUCumsum(t *testing.T) {
	r := gpu(t)
	cases := cumsumCases(t, true)
	r.precompile(cases)
	for _, tc := range cases {
		check(t, r, tc)
	}
	t.Logf("%d cumsum cases compared", len(cases))
	// Every kernel forced on shapes another would take (same bits).
	for _, k := range csModeNames {
		t.Setenv(cumsumEnv, k)
		for _, tc := range forcedCumsumCases(t, k) {
			check(t, r, tc)
		}
	}
}

// forcedCumsumCases are the shapes every scan kernel is forced on (with
// cumsumEnv set to kernel k): f32, bf16 and i64, offset, contiguous and
// along dim 0, on shapes another kernel would take.
func forcedCumsumCases(t testing.TB, k string) []testCase {
	var cases []testCase
	for i, dt := range []dtype.DType{dtype.F32, dtype.BF16, dtype.I64} {
		for j, sc := range []struct {
			rows, n int
			layout  string
		}{{7, 3000, "offset"}, {2, 20000, "contiguous"}, {500, 40, "dim0"}} {
			tc := cumsumCase(t, dt, sc.rows, sc.n, sc.layout, uint64(700+10*i+j), true)
			tc.name += "/forced-" + k
			cases = append(cases, tc)
		}
	}
	return cases
}

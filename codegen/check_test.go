package codegen

// Running plans on a kernel runner (the host emulation or a GPU) and
// comparing with the CPU twin.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	lexec "github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

// runner runs one rendered kernel on host buffers (inputs in Params order,
// then the output's size) and returns the output's bytes.
type runner interface {
	run(src *Source, ins [][]byte, outBytes int) ([]byte, error)
}

// class of a plan for comparison: exact, or tolerant when any instruction
// is transcendental.
func exactPlan(p *plan.Plan) bool {
	for _, s := range p.Steps {
		for _, in := range s.Kernel.Instrs {
			switch in.Node.Op {
			case ir.OpExp, ir.OpLog, ir.OpSin, ir.OpCos, ir.OpTanh, ir.OpErf, ir.OpGelu, ir.OpGeluErf,
				ir.OpSilu, ir.OpSigmoid, ir.OpNormcdf, ir.OpElu, ir.OpPowf:
				return false
			}
		}
	}
	return true
}

// randomInput fills a tensor of dt with a mix of ordinary values, special
// values (zeros, infinities, NaN, ties, subnormals, range edges) and
// values across a wide exponent range.
func randomInput(rng *rand.Rand, dt dtype.DType, shape []int) *tensor.Tensor {
	n := ir.Numel(shape)
	switch dt {
	case dtype.U8:
		v := make([]uint8, n)
		for i := range v {
			v[i] = uint8(rng.IntN(256))
			if rng.IntN(5) == 0 {
				v[i] = []uint8{0, 1, 255, 128}[rng.IntN(4)]
			}
		}
		t, _ := tensor.New(v, shape...)
		return t
	case dtype.U32:
		v := make([]uint32, n)
		for i := range v {
			v[i] = rng.Uint32() >> uint(rng.IntN(32))
			if rng.IntN(5) == 0 {
				v[i] = []uint32{0, 1, math.MaxUint32, 1 << 31}[rng.IntN(4)]
			}
		}
		t, _ := tensor.New(v, shape...)
		return t
	case dtype.I64:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(rng.Uint64()) >> uint(rng.IntN(64))
			if rng.IntN(5) == 0 {
				// 2^60 + 2^52 + 1: a bf16 tie that an f64 detour would make exact.
				v[i] = []int64{0, 1, -1, math.MinInt64, math.MaxInt64, -7, 1<<60 + 1<<52 + 1, -(1<<60 + 1<<52 + 1)}[rng.IntN(8)]
			}
		}
		t, _ := tensor.New(v, shape...)
		return t
	}
	specials := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1, -1, 0.5, -0.5, 2.5, -3.5,
		1e-40, -1e-45, 65504, 65520, -65536, 1e10, -3e38, 300, -300, 1e-7, 88.5, -88.5, -100, 127.5}
	v := make([]float64, n)
	for i := range v {
		switch r := rng.IntN(10); {
		case r < 6:
			v[i] = rng.Float64()*16 - 8
		case r < 8:
			v[i] = (rng.Float64() + 0.5) * math.Ldexp(1, rng.IntN(60)-30)
			if rng.IntN(2) == 0 {
				v[i] = -v[i]
			}
		default:
			v[i] = specials[rng.IntN(len(specials))]
		}
	}
	t, err := tensor.FromFloat64s(dt, v, shape...)
	if err != nil {
		panic(err)
	}
	return t
}

// runPlan runs a plan's steps on r and returns its outputs'
// bytes by name.
func runPlan(t *testing.T, r runner, tg Target, opt options, p *plan.Plan, inputs map[string]*tensor.Tensor) map[string][]byte {
	t.Helper()
	bufs := make([][]byte, len(p.Buffers))
	written := make([]bool, len(p.Buffers))
	for _, b := range p.Inputs {
		bufs[b.ID], written[b.ID] = inputs[b.Name].Bytes(), true
	}
	for i, s := range p.Steps {
		k := s.Kernel
		src, err := render(k, tg, opt)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		var ins [][]byte
		for _, o := range k.Ins {
			if !written[o.Buf.ID] {
				t.Fatalf("step %d reads b%d before it is written", i, o.Buf.ID)
			}
			ins = append(ins, bufs[o.Buf.ID])
		}
		out, err := r.run(src, ins, k.Out.Bytes())
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, src.Name, err)
		}
		bufs[k.Out.ID], written[k.Out.ID] = out, true
	}
	outs := map[string][]byte{}
	for _, b := range p.Outputs {
		outs[b.Name] = bufs[b.ID]
	}
	return outs
}

// render renders a kernel for the tests: a row kernel with the row
// options rowOpts (default: defaultRowOptions), any other with
// elementwise options opt.
func render(k *plan.Kernel, tg Target, opt options, rowOpts ...rowOptions) (*Source, error) {
	if k.RowAxes > 0 {
		ro := defaultRowOptions
		if len(rowOpts) > 0 {
			ro = rowOpts[0]
		}
		return rows(k, tg, ro)
	}
	return elementwise(k, tg, opt)
}

// elems splits raw little-endian bytes of dt into per-element bit patterns.
func elems(dt dtype.DType, b []byte) []uint64 {
	sz := dt.Size()
	out := make([]uint64, len(b)/sz)
	for i := range out {
		var v uint64
		for k := sz - 1; k >= 0; k-- {
			v = v<<8 | uint64(b[i*sz+k])
		}
		out[i] = v
	}
	return out
}

// value widens one element's bits to float64 (floats) for tolerance checks.
func value(dt dtype.DType, bits uint64) float64 {
	switch dt {
	case dtype.F32:
		return float64(math.Float32frombits(uint32(bits)))
	case dtype.F64:
		return math.Float64frombits(bits)
	case dtype.F16:
		return dtype.Float16(bits).Float64()
	case dtype.BF16:
		return dtype.BFloat16(bits).Float64()
	case dtype.F8E4M3:
		return dtype.Float8E4M3(bits).Float64()
	}
	return float64(bits)
}

// ordered maps a sign-magnitude float bit pattern of size bytes to an
// integer whose order is the values' order (adjacent floats differ by 1).
func ordered(bits uint64, size int) int64 {
	sign := uint64(1) << (8*size - 1)
	if bits&sign != 0 {
		return -int64(bits &^ sign)
	}
	return int64(bits)
}

// compareOutputs checks got against want element by element.
func compareOutputs(t *testing.T, name string, dt dtype.DType, want, got []byte, exact bool, atol float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("%s: %d bytes, want %d", name, len(got), len(want))
		return
	}
	w, g := elems(dt, want), elems(dt, got)
	bad := 0
	for i := range w {
		if w[i] == g[i] {
			continue
		}
		wv, gv := value(dt, w[i]), value(dt, g[i])
		if dt.IsFloat() && wv != wv && gv != gv && dt != dtype.F8E4M3 {
			continue // NaN payloads differ between libms; both are NaN (f8e4m3 NaNs are always stored as 0x7f)
		}
		ok := false
		if !exact && dt.IsFloat() {
			switch dt {
			case dtype.F16, dtype.BF16, dtype.F8E4M3:
				d := ordered(w[i], dt.Size()) - ordered(g[i], dt.Size())
				ok = d >= -1 && d <= 1
			case dtype.F32:
				ok = math.Abs(wv-gv) <= 4e-6*math.Max(math.Abs(wv), math.Abs(gv))+atol
			case dtype.F64:
				ok = math.Abs(wv-gv) <= 1e-12*math.Max(math.Abs(wv), math.Abs(gv))+atol
			}
		}
		if !ok {
			if bad < 8 {
				t.Errorf("%s[%d]: got %#x (%g), want %#x (%g)", name, i, g[i], gv, w[i], wv)
			}
			bad++
		}
	}
	if bad > 8 {
		t.Errorf("%s: %d of %d elements differ", name, bad, len(w))
	}
}

// checkCases runs every case's plan on r (kernels rendered for tg) and
// compares the outputs with the CPU twin's: bit for bit for exact plans,
// within the accuracy targets otherwise. Fused cases must also agree bit for
// bit with their unfused plans on r.
func checkCases(t *testing.T, r runner, tg Target, cases []graphCase) {
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := c.plan(t)
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			inputs := map[string]*tensor.Tensor{}
			for _, b := range p.Inputs {
				if c.inputs != nil {
					inputs[b.Name] = c.inputs(b.Name)
					continue
				}
				inputs[b.Name] = randomInput(rng, b.DType, b.Shape)
			}
			want, err := lexec.Run(context.Background(), cpu.New(), p, inputs)
			if err != nil {
				t.Fatalf("CPU twin: %v", err)
			}
			got := runPlan(t, r, tg, defaultOptions, p, inputs)
			exact := exactPlan(p)
			atol := 1e-37 // subnormal results of transcendentals: libms differ in the last subnormal bits
			if len(p.Steps) > 1 || c.fused {
				atol = 1e-6 // chains of transcendentals can cancel
			}
			for _, b := range p.Outputs {
				compareOutputs(t, b.Name, b.DType, want[b.Name].Bytes(), got[b.Name], exact, atol)
			}
			if c.fused {
				up := c.unfused().plan(t)
				ug := runPlan(t, r, tg, defaultOptions, up, inputs)
				for _, b := range p.Outputs {
					if !bytes.Equal(ug[b.Name], got[b.Name]) {
						compareOutputs(t, b.Name+" (fused vs unfused)", b.DType, ug[b.Name], got[b.Name], true, 0)
					}
				}
			}
		})
	}
}

// runnableCases are the cases small enough to run.
func runnableCases() []graphCase {
	var cs []graphCase
	for _, c := range slices.Concat(allCases(false), fusionCases(), f8Cases()) {
		if !c.big {
			cs = append(cs, c)
		}
	}
	return cs
}

// sourcesOf renders the runnable cases, fused and unfused, for tg, and
// the option cases with every alternative option set.
func sourcesOf(t testing.TB, tg Target) []*Source {
	var cs []graphCase
	for _, c := range runnableCases() {
		cs = append(cs, c, c.unfused())
	}
	srcs := renderAll(t, append(cs, mathCases()...), tg, defaultOptions)
	for _, opt := range altOptions {
		srcs = append(srcs, renderAll(t, optionCases(), tg, opt)...)
	}
	seen := map[string]bool{}
	out := srcs[:0]
	for _, s := range srcs {
		if !seen[s.Name] {
			seen[s.Name] = true
			out = append(out, s)
		}
	}
	return out
}

// altOptions are the non-default tuning choices the tests exercise: 32
// bytes per thread, and grid-stride loops over few blocks.
var altOptions = []options{
	{threadBytes: 32, maxThreadBytes: 128},
	{threadBytes: 16, maxThreadBytes: 64, gridBlocks: 3},
	{threadBytes: 32, maxThreadBytes: 128, gridBlocks: 2},
}

// optionCases are run with every alternative option set.
func optionCases() []graphCase {
	var cs []graphCase
	for _, c := range slices.Concat(variantCases(), workloadCases(1000, 37, false), workloadCases(64, 96, false), fusionCases(), randomCases()) {
		if !c.big {
			cs = append(cs, c)
		}
	}
	return cs
}

// checkOptions runs the option cases with every alternative option set and
// requires the same bits as with the default options.
func checkOptions(t *testing.T, r runner, tg Target) {
	for ci, c := range optionCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := c.plan(t)
			rng := rand.New(rand.NewPCG(uint64(ci), 9))
			inputs := map[string]*tensor.Tensor{}
			for _, b := range p.Inputs {
				inputs[b.Name] = randomInput(rng, b.DType, b.Shape)
			}
			want := runPlan(t, r, tg, defaultOptions, p, inputs)
			for _, opt := range altOptions {
				got := runPlan(t, r, tg, opt, p, inputs)
				for _, b := range p.Outputs {
					if !bytes.Equal(want[b.Name], got[b.Name]) {
						compareOutputs(t, fmt.Sprintf("%s with %+v", b.Name, opt), b.DType, want[b.Name], got[b.Name], true, 0)
					}
				}
			}
		})
	}
}

// mathRef is the float64 definition of a float op (the twin's scalar
// formulas), for a dense accuracy sweep independent of the twin's fast
// paths.
var mathRef = map[ir.Op]func(x float64) float64{
	ir.OpExp:     math.Exp,
	ir.OpLog:     math.Log,
	ir.OpSin:     math.Sin,
	ir.OpCos:     math.Cos,
	ir.OpTanh:    math.Tanh,
	ir.OpErf:     math.Erf,
	ir.OpGelu:    func(x float64) float64 { return x / (1 + math.Exp(-2*0.7978845608028654*(x+0.044715*x*x*x))) },
	ir.OpGeluErf: func(x float64) float64 { return x * 0.5 * math.Erfc(-x/math.Sqrt2) },
	ir.OpSilu:    func(x float64) float64 { return x / (1 + math.Exp(-x)) },
	ir.OpSigmoid: func(x float64) float64 { return 1 / (1 + math.Exp(-x)) },
	ir.OpNormcdf: func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) },
	ir.OpElu: func(x float64) float64 {
		if x > 0 {
			return x
		}
		return 1.5 * math.Expm1(x)
	},
	ir.OpPowf: func(x float64) float64 { return math.Pow(x, 2.5) },
}

// sweep is a dense set of f32 inputs: a fine grid over [-20, 20], random
// magnitudes from 1e-6 to 1e4 of both signs, and the special values.
func sweep() []float64 {
	var v []float64
	for i := -200000; i <= 200000; i++ {
		v = append(v, float64(float32(float64(i)*1e-4)))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		m := math.Pow(10, rng.Float64()*10-6)
		if rng.IntN(2) == 0 {
			m = -m
		}
		v = append(v, float64(float32(m)))
	}
	for _, x := range []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1e-40, -1e-40, 3e38, -3e38,
		-79.9, -80, -80.1, -88.7, -103, -104, -110, -150, 88.7, 89, -3, -3.0001, -2.9999, -10.1, -10.05} {
		v = append(v, float64(float32(x)))
	}
	return v
}

// mathCases are the sweep's one-op graphs.
func mathCases() []graphCase {
	n := len(sweep())
	var cs []graphCase
	for op := range mathRef {
		cs = append(cs, graphCase{name: "math/" + op.String(), op: op, in: dtype.F32, build: func(g *graph.Graph) {
			g.Output("out", unaryFn(op, g.Input("x", dtype.F32, n), dtype.F32))
		}})
	}
	slices.SortFunc(cs, func(a, b graphCase) int { return strings.Compare(a.name, b.name) })
	return cs
}

// checkMath runs every float32 transcendental over the sweep on r and
// compares with the float64 definition rounded to f32: relative error at
// most 4e-6, or an absolute error below 1e-37 (subnormal results).
func checkMath(t *testing.T, r runner, tg Target) {
	xs := sweep()
	x, err := tensor.FromFloat64s(dtype.F32, xs, len(xs))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range mathCases() {
		op, ref := c.op, mathRef[c.op]
		t.Run(op.String(), func(t *testing.T) {
			t.Parallel()
			got := elems(dtype.F32, runPlan(t, r, tg, defaultOptions, c.plan(t), map[string]*tensor.Tensor{"x": x})["out"])
			bad, worst, worstX := 0, 0.0, 0.0
			for i, xv := range xs {
				w := float64(float32(ref(xv)))
				g := float64(math.Float32frombits(uint32(got[i])))
				if w == g || (w != w && g != g) {
					continue
				}
				rel := math.Abs(w-g) / math.Max(math.Abs(w), math.Abs(g))
				if rel > worst && !math.IsInf(rel, 0) {
					worst, worstX = rel, xv
				}
				if !(math.Abs(w-g) <= 4e-6*math.Max(math.Abs(w), math.Abs(g))+1e-37) {
					if bad < 5 {
						t.Errorf("%s(%g) = %g, want %g", op, xv, g, w)
					}
					bad++
				}
			}
			if bad > 5 {
				t.Errorf("%s: %d of %d inputs out of tolerance", op, bad, len(xs))
			}
			t.Logf("%s: worst relative error %.2g (%.1f ulp-ish) at x = %g", op, worst, worst/math.Ldexp(1, -24), worstX)
		})
	}
}

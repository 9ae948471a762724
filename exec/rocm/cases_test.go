package rocm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
	"github.com/loomgraph/loom/workloads"
)

// tolerance says how a GPU result must match the CPU executor's.
type tolerance int

const (
	// exact: bit for bit (any NaN matches any NaN, except the poison
	// pattern): integer, comparison, where, cast, copy, affine, arithmetic,
	// rounding and IEEE-exact ops (sqrt, recip).
	exact tolerance = iota
	// approx: transcendentals. f32 within relative 4e-6 (or both below the
	// smallest normal), f64 within relative 1e-13, f16/bf16 within 1 ulp.
	approx
	// chain: fused chains of transcendentals and arithmetic, where a
	// subtraction can cancel: the approx bounds relative to max(|want|, 1).
	chain
)

func (t tolerance) String() string { return [...]string{"exact", "approx", "chain"}[t] }

// opCase is one test graph.
type opCase struct {
	name  string
	tol   tolerance
	modes bool // run fused and unfused (else fused only: single-op graphs are the same either way)
	build func(g *graph.Graph)
	// workload, when set, builds the graph instead of build, and the inputs
	// are the workload's (normal values) instead of special values.
	workload func() (*graph.Graph, error)
	// ref64, when set, builds the same graph computing in float64 (inputs
	// cast up): a second reference for float transcendentals.
	ref64 func(g *graph.Graph)
}

type unaryFn = func(*graph.Tensor) *graph.Tensor

var (
	floatDTypes = []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16, dtype.F8E4M3}
	exactUnary  = map[string]unaryFn{
		"recip": (*graph.Tensor).Recip, "sqrt": (*graph.Tensor).Sqrt, "ceil": (*graph.Tensor).Ceil,
		"floor": (*graph.Tensor).Floor, "round": (*graph.Tensor).Round, "neg": (*graph.Tensor).Neg,
		"sqr": (*graph.Tensor).Sqr, "abs": (*graph.Tensor).Abs, "sign": (*graph.Tensor).Sign, "relu": (*graph.Tensor).Relu,
	}
	signedUnary = []string{"neg", "sqr", "abs", "sign", "relu"}
	approxUnary = map[string]unaryFn{
		"exp": (*graph.Tensor).Exp, "log": (*graph.Tensor).Log, "sin": (*graph.Tensor).Sin, "cos": (*graph.Tensor).Cos,
		"tanh": (*graph.Tensor).Tanh, "erf": (*graph.Tensor).Erf, "gelu": (*graph.Tensor).Gelu, "gelu_erf": (*graph.Tensor).GeluErf,
		"silu": (*graph.Tensor).Silu, "sigmoid": (*graph.Tensor).Sigmoid, "normcdf": (*graph.Tensor).Normcdf,
		"elu":  func(t *graph.Tensor) *graph.Tensor { return t.Elu(0.7) },
		"powf": func(t *graph.Tensor) *graph.Tensor { return t.Powf(2.5) },
		"powi": func(t *graph.Tensor) *graph.Tensor { return t.Powf(3) },
	}
	binaryOps = map[string]func(a, b *graph.Tensor) *graph.Tensor{
		"add": (*graph.Tensor).Add, "sub": (*graph.Tensor).Sub, "mul": (*graph.Tensor).Mul, "div": (*graph.Tensor).Div,
		"maximum": (*graph.Tensor).Maximum, "minimum": (*graph.Tensor).Minimum,
		"eq": (*graph.Tensor).Eq, "ne": (*graph.Tensor).Ne, "lt": (*graph.Tensor).Lt,
		"le": (*graph.Tensor).Le, "gt": (*graph.Tensor).Gt, "ge": (*graph.Tensor).Ge,
	}
)

// sortedKeys keeps the case list deterministic.
func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// opCases lists the comparison graphs: every op family over its dtypes,
// strided, broadcast and offset reads, empty and one-element tensors, fused
// chains and the workloads W1, W2, W6.
func opCases() []opCase {
	var cs []opCase
	add := func(name string, tol tolerance, modes bool, build func(g *graph.Graph)) {
		cs = append(cs, opCase{name: name, tol: tol, modes: modes, build: build})
	}
	const n = 4099
	for _, dt := range floatDTypes {
		for _, op := range sortedKeys(exactUnary) {
			f := exactUnary[op]
			add(fmt.Sprintf("%s/%v", op, dt), exact, false, func(g *graph.Graph) { g.Output("y", f(g.Input("x", dt, n))) })
		}
		for _, op := range sortedKeys(approxUnary) {
			f := approxUnary[op]
			add(fmt.Sprintf("%s/%v", op, dt), approx, false, func(g *graph.Graph) { g.Output("y", f(g.Input("x", dt, n))) })
			if dt != dtype.F64 {
				cs[len(cs)-1].ref64 = func(g *graph.Graph) { g.Output("y", f(g.Input("x", dt, n).Cast(dtype.F64))) }
			}
		}
	}
	for _, op := range signedUnary {
		f := exactUnary[op]
		add(op+"/i64", exact, false, func(g *graph.Graph) { g.Output("y", f(g.Input("x", dtype.I64, n))) })
	}
	for _, dt := range dtype.All {
		for _, op := range sortedKeys(binaryOps) {
			f := binaryOps[op]
			// y broadcast along rows.
			add(fmt.Sprintf("%s/%v", op, dt), exact, false, func(g *graph.Graph) {
				g.Output("z", f(g.Input("x", dt, 37, 113), g.Input("y", dt, 113)))
			})
		}
		for _, to := range dtype.All {
			if to != dt {
				add(fmt.Sprintf("cast/%v-%v", dt, to), exact, false, func(g *graph.Graph) { g.Output("y", g.Input("x", dt, n).Cast(to)) })
			}
		}
		mul, off := 2.5, -1.25
		if dt.IsInt() {
			mul, off = 3, 7
		}
		add(fmt.Sprintf("affine/%v", dt), exact, false, func(g *graph.Graph) { g.Output("y", g.Input("x", dt, n).Affine(mul, off)) })
	}
	add("affine/u8-half", exact, false, func(g *graph.Graph) { g.Output("y", g.Input("x", dtype.U8, n).Affine(0.5, 3)) })
	for _, cdt := range []dtype.DType{dtype.U8, dtype.U32, dtype.I64} {
		for _, vdt := range dtype.All {
			if cdt != dtype.U8 && vdt != dtype.F32 {
				continue
			}
			add(fmt.Sprintf("where/%v-%v", cdt, vdt), exact, false, func(g *graph.Graph) {
				c := g.Input("c", cdt, 37, 1)
				g.Output("y", graph.Where(c, g.Input("a", vdt, 37, 113), g.Input("b", vdt, 113)))
				g.Output("s", graph.Where(g.Input("c2", cdt, 37, 113), g.Input("a2", vdt, 37, 113), graph.Scalar(-7)))
			})
		}
	}
	// Views: transposed, narrowed (offset), broadcast and permuted reads.
	for _, dt := range []dtype.DType{dtype.F32, dtype.F16, dtype.BF16, dtype.F8E4M3, dtype.U8, dtype.I64, dtype.F64, dtype.U32} {
		add(fmt.Sprintf("copy/transpose/%v", dt), exact, false, func(g *graph.Graph) { g.Output("y", g.Input("x", dt, 37, 53).T()) })
		add(fmt.Sprintf("copy/narrow/%v", dt), exact, false, func(g *graph.Graph) {
			g.Output("y", g.Input("x", dt, 37, 53).Narrow(0, 3, 20).Narrow(1, 5, 40))
		})
		add(fmt.Sprintf("copy/broadcast/%v", dt), exact, false, func(g *graph.Graph) { g.Output("y", g.Input("x", dt, 53).BroadcastTo(37, 53)) })
		add(fmt.Sprintf("copy/permute/%v", dt), exact, false, func(g *graph.Graph) { g.Output("y", g.Input("x", dt, 5, 7, 11).Permute(2, 0, 1)) })
		add(fmt.Sprintf("strided-add/%v", dt), exact, true, func(g *graph.Graph) {
			x := g.Input("x", dt, 37, 53)
			y := g.Input("y", dt, 53, 37)
			g.Output("z", x.T().Add(y).Narrow(1, 1, 30).Mul(x.Narrow(0, 2, 30).T()))
		})
	}
	// Sources.
	add("full/f32", exact, false, func(g *graph.Graph) { g.Output("y", g.Full(dtype.F32, 3.5, 17, 5)) })
	add("full/u8-sat", exact, false, func(g *graph.Graph) { g.Output("y", g.Full(dtype.U8, 300, 17, 5)) })
	add("full/i64", exact, false, func(g *graph.Graph) { g.Output("y", g.Full(dtype.I64, -5, 1000)) })
	add("full/bf16", exact, false, func(g *graph.Graph) { g.Output("y", g.Full(dtype.BF16, 1.0/3, 1000)) })
	add("arange/f32", exact, false, func(g *graph.Graph) { g.Output("y", g.Arange(dtype.F32, 0, 100, 0.37)) })
	add("arange/i64", exact, false, func(g *graph.Graph) { g.Output("y", g.Arange(dtype.I64, -50, 5000, 3)) })
	add("arange/f16", exact, false, func(g *graph.Graph) { g.Output("y", g.Arange(dtype.F16, 0, 3000, 0.7)) })
	add("arange/u8", exact, false, func(g *graph.Graph) { g.Output("y", g.Arange(dtype.U8, 0, 400, 1)) })
	// Empty and one-element tensors.
	add("empty/add", exact, true, func(g *graph.Graph) { g.Output("y", g.Input("x", dtype.F32, 0).Add(g.Input("y", dtype.F32, 0))) })
	add("empty/exp-2d", approx, true, func(g *graph.Graph) { g.Output("y", g.Input("x", dtype.F16, 3, 0).Exp().Add(graph.Scalar(1))) })
	add("one/add", exact, true, func(g *graph.Graph) {
		g.Output("y", g.Input("x", dtype.I64, 1).Add(g.Input("y", dtype.I64, 1)).Mul(graph.Scalar(3)))
	})
	add("one/scalar", approx, true, func(g *graph.Graph) { g.Output("y", g.Input("x", dtype.F32).Exp().Add(g.Input("y", dtype.F32))) })
	add("one/broadcast", exact, true, func(g *graph.Graph) {
		g.Output("y", g.Input("x", dtype.BF16, 1).BroadcastTo(9, 7).Mul(g.Input("y", dtype.BF16, 9, 7)))
	})
	// Fused chains, run fused and unfused.
	add("chain/i64", exact, true, func(g *graph.Graph) {
		x, y := g.Input("x", dtype.I64, 61, 67), g.Input("y", dtype.I64, 67)
		g.Output("z", x.Mul(graph.Scalar(3)).Add(y).Div(graph.Scalar(7)).Sub(x).Abs().Maximum(y.Neg()))
	})
	add("chain/u8", exact, true, func(g *graph.Graph) {
		x, y := g.Input("x", dtype.U8, 4097), g.Input("y", dtype.U8, 4097)
		s := x.Add(y).Mul(graph.Scalar(3)).Sub(x)
		g.Output("z", graph.Where(s.Gt(y), s, y.Affine(2, 1)))
		g.Output("c", s.Cast(dtype.F32).Mul(graph.Scalar(0.5)))
	})
	for _, dt := range []dtype.DType{dtype.F16, dtype.BF16, dtype.F8E4M3, dtype.F32, dtype.F64} {
		add(fmt.Sprintf("chain/arith/%v", dt), exact, true, func(g *graph.Graph) {
			x, y := g.Input("x", dt, 4099), g.Input("y", dt, 4099)
			a := x.Add(y).Mul(x).Sub(y.Sqr()).Maximum(x.Neg()).Affine(1.5, 0.25)
			g.Output("z", graph.Where(a.Lt(graph.Scalar(0)), a.Div(y), a.Cast(dtype.F32).Cast(dt)))
		})
		add(fmt.Sprintf("chain/math/%v", dt), chain, true, func(g *graph.Graph) {
			x, y := g.Input("x", dt, 4099), g.Input("y", dt, 4099)
			g.Output("z", x.Silu().Mul(y.Sigmoid()).Add(x.Tanh()).Affine(0.5, 1))
		})
	}
	for _, w := range []string{"W1", "W2", "W6"} {
		wl, _ := workloads.ByID(w)
		cs = append(cs, opCase{name: w, tol: chain, modes: true, workload: func() (*graph.Graph, error) {
			return wl.Build(workloads.Size{Elems: 100003, Rows: 67, Cols: 1031})
		}})
	}
	return cs
}

// buildCase builds and compiles a case.
func buildCase(c opCase, fused bool) (*graph.Graph, *graph.Program, error) {
	g := graph.New()
	if c.workload != nil {
		var err error
		if g, err = c.workload(); err != nil {
			return nil, nil, err
		}
	} else {
		c.build(g)
	}
	p, err := g.Compile(graph.Options{NoFusion: !fused})
	return g, p, err
}

// Special values lead every input (the same in every input of a dtype, so
// comparisons see equal elements); random values follow.
var (
	floatSpecials = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 1.5, 2.5, -2.5, 3, 1e-3, -1e-3, 100, -100,
		1e-40, -1e-40, math.Inf(1), math.Inf(-1), math.NaN(), 65504, 70000, -70000, 1e30, -1e30, 88.5, -88.5, 0.25, 1e-8, 7.5, -0.75}
	u8Specials  = []uint8{0, 1, 2, 255, 128, 127, 254}
	u32Specials = []uint32{0, 1, 2, math.MaxUint32, 1 << 31, 7, 1<<31 - 1}
	i64Specials = []int64{0, 1, -1, 2, -2, math.MaxInt64, math.MinInt64, 1 << 40, -(1 << 40), 7, -7}
)

// genInputs returns inputs for every input of g: special values first, then
// random ones (or, for workloads, workloads.Inputs).
func genInputs(g *graph.Graph, seed uint64, workload bool) (map[string]*tensor.Tensor, error) {
	if workload {
		return workloads.Inputs(g, seed)
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	in := map[string]*tensor.Tensor{}
	for _, n := range g.IR().Inputs() {
		t, err := tensor.Zeros(n.DType, n.Shape...)
		if err != nil {
			return nil, err
		}
		fillRandom(t, r)
		in[n.Name] = t
	}
	return in, nil
}

func floatVal(i int, r *rand.Rand) float64 {
	if i < len(floatSpecials) {
		return floatSpecials[i]
	}
	switch i % 4 {
	case 0:
		return r.NormFloat64() * 3
	case 1:
		return r.Float64()*20 - 10
	case 2:
		return r.NormFloat64() * 0.5
	}
	return math.Round(r.NormFloat64()*8) / 2 // halves: ties for round
}

func fillRandom(t *tensor.Tensor, r *rand.Rand) {
	switch d := t.Data().(type) {
	case []float32:
		for i := range d {
			d[i] = float32(floatVal(i, r))
		}
	case []float64:
		for i := range d {
			d[i] = floatVal(i, r)
		}
	case []dtype.Float16:
		for i := range d {
			d[i] = dtype.ToF16From64(floatVal(i, r))
		}
	case []dtype.BFloat16:
		for i := range d {
			d[i] = dtype.ToBF16From64(floatVal(i, r))
		}
	case []dtype.Float8E4M3:
		for i := range d {
			d[i] = dtype.ToF8E4M3From64(floatVal(i, r))
		}
	case []uint8:
		for i := range d {
			if i < len(u8Specials) {
				d[i] = u8Specials[i]
			} else if i%3 == 0 {
				d[i] = uint8(r.IntN(4)) // zeros (where, div), small values
			} else {
				d[i] = uint8(r.IntN(256))
			}
		}
	case []uint32:
		for i := range d {
			switch {
			case i < len(u32Specials):
				d[i] = u32Specials[i]
			case i%3 == 0:
				d[i] = uint32(r.IntN(4))
			case i%3 == 1:
				d[i] = uint32(r.IntN(1000))
			default:
				d[i] = r.Uint32()
			}
		}
	case []int64:
		for i := range d {
			switch {
			case i < len(i64Specials):
				d[i] = i64Specials[i]
			case i%3 == 0:
				d[i] = int64(r.IntN(7) - 3)
			case i%3 == 1:
				d[i] = int64(r.IntN(2001) - 1000)
			default:
				d[i] = int64(r.Uint64())
			}
		}
	}
}

// mismatch is one differing element.
type mismatch struct {
	i         int
	got, want string
}

// compareTensors checks every element of got against want. When alt is
// given (the op computed in float64 and rounded to got's dtype), an element
// that misses want but matches alt passes: the CPU twin's fast float32 math
// (its AVX2 exp family) is then the side that is off, which is counted and
// logged, not failed.
func compareTensors(t testing.TB, what string, got, want *tensor.Tensor, tol tolerance, alt ...*tensor.Tensor) {
	t.Helper()
	if got == nil || want == nil {
		t.Errorf("%s: got %v, want %v", what, got, want)
		return
	}
	if got.DType() != want.DType() || fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) {
		t.Errorf("%s: got %v%v, want %v%v", what, got.DType(), got.Shape(), want.DType(), want.Shape())
		return
	}
	var ref *tensor.Tensor
	if len(alt) > 0 {
		ref = alt[0]
	}
	var bad, cpuOff []mismatch
	count, cpuCount := 0, 0
	check := func(i int, match func(w *tensor.Tensor) bool, show func(t *tensor.Tensor) string) {
		if match(want) {
			return
		}
		if ref != nil && match(ref) {
			cpuCount++
			if len(cpuOff) < 3 {
				cpuOff = append(cpuOff, mismatch{i, show(want), show(ref)})
			}
			return
		}
		count++
		if len(bad) < 8 {
			m := mismatch{i, show(got), show(want)}
			if ref != nil {
				m.want += ", float64 reference " + show(ref)
			}
			bad = append(bad, m)
		}
	}
	n := got.Numel()
	switch got.DType() {
	case dtype.F32:
		g := got.Data().([]float32)
		for i := range n {
			check(i, func(w *tensor.Tensor) bool { return matchF32(g[i], w.Data().([]float32)[i], tol) },
				func(t *tensor.Tensor) string {
					v := t.Data().([]float32)[i]
					return fmt.Sprintf("%g (%#08x)", v, math.Float32bits(v))
				})
		}
	case dtype.F64:
		g := got.Data().([]float64)
		for i := range n {
			check(i, func(w *tensor.Tensor) bool { return matchF64(g[i], w.Data().([]float64)[i], tol) },
				func(t *tensor.Tensor) string {
					v := t.Data().([]float64)[i]
					return fmt.Sprintf("%g (%#016x)", v, math.Float64bits(v))
				})
		}
	case dtype.F16:
		g := got.Data().([]dtype.Float16)
		for i := range n {
			check(i, func(w *tensor.Tensor) bool {
				return matchHalf(uint16(g[i]), uint16(w.Data().([]dtype.Float16)[i]), 0x7c00, tol)
			},
				func(t *tensor.Tensor) string {
					v := t.Data().([]dtype.Float16)[i]
					return fmt.Sprintf("%g (%#04x)", v.Float64(), uint16(v))
				})
		}
	case dtype.BF16:
		g := got.Data().([]dtype.BFloat16)
		for i := range n {
			check(i, func(w *tensor.Tensor) bool {
				return matchHalf(uint16(g[i]), uint16(w.Data().([]dtype.BFloat16)[i]), 0x7f80, tol)
			},
				func(t *tensor.Tensor) string {
					v := t.Data().([]dtype.BFloat16)[i]
					return fmt.Sprintf("%g (%#04x)", v.Float64(), uint16(v))
				})
		}
	case dtype.F8E4M3:
		g := got.Data().([]dtype.Float8E4M3)
		for i := range n {
			check(i, func(w *tensor.Tensor) bool { return matchF8(g[i], w.Data().([]dtype.Float8E4M3)[i], tol) },
				func(t *tensor.Tensor) string {
					v := t.Data().([]dtype.Float8E4M3)[i]
					return fmt.Sprintf("%g (%#02x)", v.Float64(), uint8(v))
				})
		}
	default: // integers: exact
		gb, wb := got.Bytes(), want.Bytes()
		sz := got.DType().Size()
		for i := range n {
			if string(gb[i*sz:(i+1)*sz]) != string(wb[i*sz:(i+1)*sz]) {
				count++
				if len(bad) < 8 {
					bad = append(bad, mismatch{i, fmt.Sprint(got.Float64(i)), fmt.Sprint(want.Float64(i))})
				}
			}
		}
	}
	if cpuCount > 0 {
		var b strings.Builder
		for _, m := range cpuOff {
			fmt.Fprintf(&b, "\n  [%d] cpu %s, float64 reference %s", m.i, m.got, m.want)
		}
		t.Logf("%s: NOTE the CPU twin is off the float64 reference (and the GPU is not) at %d of %d elements:%s", what, cpuCount, n, b.String())
	}
	if count > 0 {
		var b strings.Builder
		for _, m := range bad {
			fmt.Fprintf(&b, "\n  [%d] got %s, want %s", m.i, m.got, m.want)
		}
		t.Errorf("%s (%v, %s): %d of %d elements differ:%s", what, got.DType(), tol, count, n, b.String())
	}
}

// toDType rounds a float64 reference to dt (nearest even, in one step).
func toDType(ref *tensor.Tensor, dt dtype.DType) *tensor.Tensor {
	out, _ := tensor.Zeros(dt, ref.Shape()...)
	for i := range ref.Numel() {
		out.SetFloat64(i, ref.Float64(i))
	}
	return out
}

const minNormal32 = 0x1p-126

func matchF32(g, w float32, tol tolerance) bool {
	gb, wb := math.Float32bits(g), math.Float32bits(w)
	switch {
	case gb == wb:
		return true
	case gb == 0xFFFFFFFF: // poison: never written
		return false
	case g != g || w != w:
		return g != g && w != w
	case tol == exact || math.IsInf(float64(g), 0) || math.IsInf(float64(w), 0):
		return false
	}
	d, a := math.Abs(float64(g)-float64(w)), math.Abs(float64(w))
	if tol == chain {
		a = max(a, 1)
	}
	return d <= 4e-6*a || d < minNormal32
}

func matchF64(g, w float64, tol tolerance) bool {
	gb, wb := math.Float64bits(g), math.Float64bits(w)
	switch {
	case gb == wb:
		return true
	case gb == math.MaxUint64:
		return false
	case g != g || w != w:
		return g != g && w != w
	case tol == exact || math.IsInf(g, 0) || math.IsInf(w, 0):
		return false
	}
	d, a := math.Abs(g-w), math.Abs(w)
	if tol == chain {
		a = max(a, 1)
	}
	return d <= 1e-13*a || d < 0x1p-1022
}

// matchHalf compares f16 (inf 0x7c00) or bf16 (inf 0x7f80) bit patterns.
// matchF8 compares f8e4m3 bits: exact, or within one step of the value
// order for approx and chain. Both executors store every NaN as 0x7f, so
// 0xff (the poison byte) is never a result.
func matchF8(g, w dtype.Float8E4M3, tol tolerance) bool {
	switch {
	case g == w:
		return true
	case g == 0xff || g.IsNaN() || w.IsNaN() || tol == exact:
		return false
	}
	ord := func(b dtype.Float8E4M3) int {
		if b&0x80 != 0 {
			return -int(b & 0x7f)
		}
		return int(b)
	}
	d := ord(g) - ord(w)
	return d >= -1 && d <= 1
}

func matchHalf(g, w, inf uint16, tol tolerance) bool {
	isNaN := func(b uint16) bool { return b&0x7fff > inf }
	switch {
	case g == w:
		return true
	case g == 0xFFFF:
		return false
	case isNaN(g) || isNaN(w):
		return isNaN(g) && isNaN(w)
	case tol == exact || g&0x7fff == inf || w&0x7fff == inf:
		return false
	}
	ord := func(b uint16) int {
		if b&0x8000 != 0 {
			return -int(b & 0x7fff)
		}
		return int(b)
	}
	d := ord(g) - ord(w)
	return d >= -1 && d <= 1
}

package codegen

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

var amd90a = Target{Platform: AMD, Arch: "gfx90a"}

// only renders the single kernel of a one-step (or the last step of a)
// case's plan.
func only(t *testing.T, c graphCase, tg Target) (*plan.Kernel, *Source) {
	t.Helper()
	p := c.plan(t)
	k := p.Steps[len(p.Steps)-1].Kernel
	src, err := Elementwise(k, tg)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return k, src
}

func caseNamed(t *testing.T, name string, cs []graphCase) graphCase {
	t.Helper()
	for _, c := range cs {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no case %q", name)
	return graphCase{}
}

// TestHeavyElems: a large kernel whose body calls a transcendental takes
// 8 values a thread where its operands keep their vector path (W6's
// shape: gelu(x + bias[C])), and otherwise the bytes rule's count: a
// plain body, a small kernel, an operand whose rows of 4 would lose their
// 16-byte loads, f16 (8 already) and f64 (8 is 64 bytes, the cap).
func TestHeavyElems(t *testing.T) {
	f32, f16, f64 := dtype.F32, dtype.F16, dtype.F64
	for _, tc := range []struct {
		name  string
		build func(g *graph.Graph)
		elems int
	}{
		{"gelu(x+bias) f32 8192²", func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 8192, 8192).Add(g.Input("b", f32, 8192)).Gelu())
		}, 8},
		{"exp f32 2^20", func(g *graph.Graph) { g.Output("out", g.Input("x", f32, 1<<20).Exp()) }, 8},
		{"x+bias f32 8192²", func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 8192, 8192).Add(g.Input("b", f32, 8192)))
		}, 4},
		{"exp f32 2^20-1", func(g *graph.Graph) { g.Output("out", g.Input("x", f32, 1<<20-1).Exp()) }, 4},
		{"exp f32 rows of 4", func(g *graph.Graph) {
			g.Output("out", g.Input("x", f32, 1<<18, 4).Add(g.Input("b", f32, 4)).Exp())
		}, 4},
		{"silu f16 2^20", func(g *graph.Graph) { g.Output("out", g.Input("x", f16, 1<<20).Silu()) }, 8},
		{"sigmoid f64 2^20", func(g *graph.Graph) { g.Output("out", g.Input("x", f64, 1<<20).Sigmoid()) }, 8},
	} {
		_, src := only(t, graphCase{name: tc.name, fused: true, big: true, build: tc.build}, amd90a)
		if src.Elems != tc.elems {
			t.Errorf("%s: %d values a thread, want %d", tc.name, src.Elems, tc.elems)
		}
	}
}

func TestTargetAndPrelude(t *testing.T) {
	for _, tc := range []struct {
		tg   Target
		wave string
	}{
		{Target{Platform: AMD, Arch: "gfx90a"}, "64"},
		{Target{Platform: AMD, Arch: "gfx1030"}, "32"},
		{Target{Platform: AMD, Arch: "gfx1030", WaveSize: 64}, "64"},
		{Target{Platform: NVIDIA, Arch: "sm_90"}, "32"},
	} {
		p := Prelude(tc.tg)
		if !strings.Contains(p, "#define LOOM_WAVE "+tc.wave+"\n") {
			t.Errorf("%v: prelude lacks LOOM_WAVE %s", tc.tg, tc.wave)
		}
		amd := tc.tg.Platform == AMD
		if strings.Contains(p, "#pragma clang fp contract(off)") != amd || strings.Contains(p, "__fadd_rn") == amd {
			t.Errorf("%v: wrong arithmetic flavour in the prelude", tc.tg)
		}
		if strings.Contains(p, "#include") || strings.Contains(p, "uint16_t") {
			t.Errorf("%v: the prelude must not include headers or use stdint names (hiprtc 5.2)", tc.tg)
		}
	}
	for _, bad := range []Target{{Platform: "intel", Arch: "x"}, {Platform: AMD, Arch: "gfx90a", WaveSize: 16}} {
		if _, err := Elementwise(&plan.Kernel{}, bad); err == nil {
			t.Errorf("Elementwise accepted target %+v", bad)
		}
		if !strings.HasPrefix(Prelude(bad), "// codegen:") {
			t.Errorf("Prelude(%+v) does not report the error", bad)
		}
	}
}

func TestSourceShape(t *testing.T) {
	c := caseNamed(t, "broadcast/bias-row-col-scalar", variantCases())
	k, src := only(t, c, amd90a)
	if !regexp.MustCompile(`^E_[a-z_]+_2112_[0-9a-f]{8}$`).MatchString(src.Name) {
		t.Errorf("name %q is not the kernel name plus a hash", src.Name)
	}
	if !strings.Contains(src.Code, `extern "C" __global__ void __launch_bounds__(256) `+src.Name+"(") {
		t.Errorf("no extern \"C\" entry %s in the code", src.Name)
	}
	if src.Code != PreludeFor(amd90a, src.Body)+src.Body {
		t.Error("Code is not PreludeFor(Body) + Body")
	}
	if len(src.Params) != len(k.Ins)+1 || !src.Params[len(src.Params)-1].Out || src.Params[len(src.Params)-1].Buf != k.Out {
		t.Fatalf("params %+v: want one per operand, then the output", src.Params)
	}
	for i, p := range src.Params[:len(k.Ins)] {
		if p.Buf != k.Ins[i].Buf || p.Name != "in"+strconv.Itoa(i) || p.CType != "const float* __restrict__" || p.Out {
			t.Errorf("param %d = %+v", i, p)
		}
	}
	if src.Block != [3]uint32{256, 1, 1} || src.Elems != 4 || src.Index64 || src.Loop {
		t.Errorf("block %v, elems %d, index64 %v, loop %v", src.Block, src.Elems, src.Index64, src.Loop)
	}
	// 2112 elements, 4 per thread: 528 vectors, no tail, 3 blocks.
	if src.Grid != [3]uint32{3, 1, 1} {
		t.Errorf("grid %v, want [3 1 1]", src.Grid)
	}
	// The same kernel renders to the same source; another target to another.
	if _, again := only(t, c, amd90a); again.Name != src.Name || again.Code != src.Code {
		t.Error("rendering is not deterministic")
	}
	if _, nv := only(t, c, Target{Platform: NVIDIA, Arch: "sm_90"}); nv.Name == src.Name {
		t.Error("NVIDIA and AMD sources share a name")
	}
}

// TestLayoutModes checks how each variant's operands are read.
func TestLayoutModes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		elems   int
		wide    bool
		loop    bool
		want    []string // substrings of the body, in any order
		notWant []string
	}{
		{"contiguous/f32", 4, false, false, []string{"contiguous, 4 consecutive per thread, 16-byte loads", "loom_ld16_f32(x0 + 0, in0 + a)", "loom_st16_f32(out + i, y + 0)", "} else if (v == 536u) {"}, nil},
		{"contiguous/f16-to-f32", 8, false, false, []string{"loom_ld16_f16(x0 + 0, in0 + a)", "loom_st16_f32(out + (i + 4u), y + 4)"}, []string{"else if"}},
		{"transposed/rows-not-multiple", 4, false, false, []string{"strided, address per element", "in0[at0(i + j)]", "a += (i % 37u) * 41u;"}, nil},
		{"transposed/rows-multiple", 8, false, false, []string{"8 per thread at stride 48", "in0[a + j * 48u]"}, nil},
		{"broadcast/bias-row-col-scalar", 4, false, false, []string{"broadcast, one load per thread", "16-byte loads"}, nil},
		{"broadcast/odd-bias", 8, false, false, []string{"strided, address per element"}, nil},
		{"offset/rows-aligned", 4, false, false, []string{"return (i + 192u);", "16-byte loads"}, nil},
		{"offset/cols-aligned", 4, false, false, []string{"4 consecutive per thread, 16-byte loads", "unsigned int a = 4u;"}, nil},
		{"offset/cols-unaligned", 4, false, false, []string{"strided, address per element"}, nil},
		{"offset/contiguous-unaligned", 4, false, false, []string{"unaligned, scalar loads", "in0[a + j * 1u]"}, []string{"loom_ld16"}},
		{"mixed/f64-compare-u8", 8, false, false, []string{"loom_ld16_f64(x0 + 6, in0 + (a + 6u))", "loom_st8_u8(out + i, y + 0)"}, nil},
		{"scalar/shape-[]", 4, false, false, []string{"if (v == 0u) {", "return 0u;"}, nil},
		{"empty/0-elements", 4, false, false, []string{"// No elements."}, nil},
		{"big/2^31+2^16-f32", 4, true, false, []string{"unsigned long long", "(unsigned long long)blockIdx.x * 256ull"}, []string{"unsigned int v"}},
		{"big/transposed-2^31", 4, true, false, []string{"a += (i % 65536ull) * 32768ull;"}, nil},
		{"big/2^33-f64-loop", 2, true, true, []string{"for (unsigned long long v = (unsigned long long)blockIdx.x * 256ull + threadIdx.x; v < 4294967296ull; v += 1073741824ull) {"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, src := only(t, caseNamed(t, tc.name, variantCases()), amd90a)
			if src.Elems != tc.elems || src.Index64 != tc.wide || src.Loop != tc.loop {
				t.Errorf("elems %d, index64 %v, loop %v; want %d, %v, %v", src.Elems, src.Index64, src.Loop, tc.elems, tc.wide, tc.loop)
			}
			for _, w := range tc.want {
				if !strings.Contains(src.Body, w) {
					t.Errorf("body lacks %q", w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(src.Body, w) {
					t.Errorf("body has %q", w)
				}
			}
			if t.Failed() {
				t.Logf("body:\n%s", src.Body)
			}
		})
	}
}

// TestReadable checks the body's form: one statement per instruction,
// named temporaries, node ids and ops in comments.
func TestReadable(t *testing.T) {
	c := workloadCases(1000, 37, false)[0] // W1
	k, src := only(t, c, amd90a)
	for j, in := range k.Instrs {
		re := regexp.MustCompile(`(?m)^  const [a-z ]+ t` + strconv.Itoa(j) + ` = .*; // %` + strconv.Itoa(in.Node.ID) + ` ` + in.Node.Op.String() + `\b`)
		if !re.MatchString(src.Body) {
			t.Errorf("no statement for instruction %d (%%%d %s)", j, in.Node.ID, in.Node.Op)
		}
	}
	if t.Failed() {
		t.Logf("body:\n%s", src.Body)
	}
}

// TestErrors checks that what codegen cannot render is refused with the op
// and dtype named.
func TestErrors(t *testing.T) {
	buf := func(dt dtype.DType, shape ...int) *plan.Buffer {
		return &plan.Buffer{DType: dt, Shape: shape, Slot: -1}
	}
	node := func(op ir.Op, dt dtype.DType, params ...float64) *ir.Node {
		return &ir.Node{ID: 7, Op: op, DType: dt, Shape: []int{4}, Params: params}
	}
	in := func(dt dtype.DType) plan.Operand {
		return plan.Operand{Buf: buf(dt, 4), Layout: ir.Contiguous([]int{4})}
	}
	arg := []plan.Ref{{Operand: true}}
	for _, tc := range []struct {
		name string
		k    *plan.Kernel
		want []string
	}{
		{"exp of i64", &plan.Kernel{Shape: []int{4}, Ins: []plan.Operand{in(dtype.I64)}, Instrs: []plan.Instr{{Node: node(ir.OpExp, dtype.I64), Args: arg}}, Out: buf(dtype.I64, 4)},
			[]string{"exp", "i64"}},
		{"neg of u8", &plan.Kernel{Shape: []int{4}, Ins: []plan.Operand{in(dtype.U8)}, Instrs: []plan.Instr{{Node: node(ir.OpNeg, dtype.U8), Args: arg}}, Out: buf(dtype.U8, 4)},
			[]string{"neg", "u8"}},
		{"sum", &plan.Kernel{Shape: []int{4}, Ins: []plan.Operand{in(dtype.F32)}, Instrs: []plan.Instr{{Node: node(ir.OpSum, dtype.F32, 1), Args: arg}}, Out: buf(dtype.F32, 4)},
			[]string{"sum", "f32", "elementwise kernels only"}},
		{"row kernel", &plan.Kernel{Shape: []int{4}, RowAxes: 1, Ins: []plan.Operand{in(dtype.F32)}, Instrs: []plan.Instr{{Node: node(ir.OpExp, dtype.F32), Args: arg}}, Out: buf(dtype.F32, 4)},
			[]string{"row kernel"}},
		{"view instruction", &plan.Kernel{Shape: []int{4}, Ins: []plan.Operand{in(dtype.F32)}, Instrs: []plan.Instr{{Node: node(ir.OpView, dtype.F32), Args: arg}}, Out: buf(dtype.F32, 4)},
			[]string{"view"}},
		{"where with f32 condition", &plan.Kernel{Shape: []int{4}, Ins: []plan.Operand{in(dtype.F32)}, Instrs: []plan.Instr{{Node: node(ir.OpWhere, dtype.F32), Args: []plan.Ref{{Operand: true}, {Operand: true}, {Operand: true}}}}, Out: buf(dtype.F32, 4)},
			[]string{"where", "condition dtype f32"}},
		{"add of mixed dtypes", &plan.Kernel{Shape: []int{4}, Ins: []plan.Operand{in(dtype.F32), in(dtype.F16)}, Instrs: []plan.Instr{{Node: node(ir.OpAdd, dtype.F32), Args: []plan.Ref{{Operand: true}, {Operand: true, Index: 1}}}}, Out: buf(dtype.F32, 4)},
			[]string{"add", "mixed argument dtypes"}},
		{"output dtype", &plan.Kernel{Shape: []int{4}, Ins: []plan.Operand{in(dtype.F32)}, Instrs: []plan.Instr{{Node: node(ir.OpExp, dtype.F32), Args: arg}}, Out: buf(dtype.F16, 4)},
			[]string{"f32", "f16"}},
		{"layout past the buffer", &plan.Kernel{Shape: []int{4}, Ins: []plan.Operand{{Buf: buf(dtype.F32, 4), Layout: ir.Layout{Dims: []int{4}, Strides: []int{2}}}}, Instrs: []plan.Instr{{Node: node(ir.OpExp, dtype.F32), Args: arg}}, Out: buf(dtype.F32, 4)},
			[]string{"reads past"}},
		{"forward reference", &plan.Kernel{Shape: []int{4}, Instrs: []plan.Instr{{Node: node(ir.OpExp, dtype.F32), Args: []plan.Ref{{Index: 0}}}}, Out: buf(dtype.F32, 4)},
			[]string{"not available"}},
		{"no instructions", &plan.Kernel{Shape: []int{4}, Out: buf(dtype.F32, 4)}, []string{"no instructions"}},
	} {
		_, err := Elementwise(tc.k, amd90a)
		if err == nil {
			t.Errorf("%s: rendered", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, w)
			}
		}
	}
}

func TestLiterals(t *testing.T) {
	for _, v := range []float32{0, 1, -2.5, 0.1, 1e-45, 3.4028235e38, 1.0 / 3, 16777217, -0.0} {
		s := floatLit(v)
		got, err := strconv.ParseFloat(strings.TrimSuffix(s, "f"), 32)
		if err != nil || !strings.HasSuffix(s, "f") || !strings.ContainsAny(s, ".e") || math.Float32bits(float32(got)) != math.Float32bits(v) {
			t.Errorf("floatLit(%g) = %q", v, s)
		}
	}
	for _, v := range []float64{0, 1e300, 1.0 / 3, 5e-324, 0.044715, math.Copysign(0, -1)} {
		s := doubleLit(v)
		got, err := strconv.ParseFloat(s, 64)
		if err != nil || !strings.ContainsAny(s, ".e") || math.Float64bits(got) != math.Float64bits(v) {
			t.Errorf("doubleLit(%g) = %q", v, s)
		}
	}
	if s := floatLit(float32(math.Inf(-1))); s != "__uint_as_float(0xff800000u)" {
		t.Errorf("floatLit(-Inf) = %q", s)
	}
	if s := intLit("long long", math.MinInt64); s != "(-9223372036854775807LL - 1LL)" {
		t.Errorf("intLit(MinInt64) = %q", s)
	}
	// Parameters convert like a cast from f64: saturating for integers,
	// rounded for f16.
	for _, tc := range []struct {
		v    float64
		dt   dtype.DType
		want string
	}{
		{300.7, dtype.U8, "255u"}, {-3, dtype.U32, "0u"}, {1e30, dtype.I64, "9223372036854775807LL"},
		{300.7, dtype.F16, "300.75f"}, {300.7, dtype.BF16, "300.0f"}, {math.NaN(), dtype.U8, "0u"},
	} {
		if got := scalarLit(tc.v, tc.dt); got != tc.want {
			t.Errorf("scalarLit(%g, %v) = %q, want %q", tc.v, tc.dt, got, tc.want)
		}
	}
}

func TestBaseName(t *testing.T) {
	for in, want := range map[string]string{
		"E_cast_silu_16":            "E_cast_silu_16",
		"":                          "E_kernel",
		"7up":                       "E_7up",
		"E_a-b.c":                   "E_a_b_c",
		strings.Repeat("E_exp", 30): strings.Repeat("E_exp", 16),
	} {
		if got := baseName(in); got != want {
			t.Errorf("baseName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOpCoverage checks that every elementwise op and source of the table
// renders for every dtype it accepts (compiling them is TestCompileAMD's
// job), so a new op without a rendering fails here first.
func TestOpCoverage(t *testing.T) {
	n := 0
	for _, c := range opCases() {
		p := c.plan(t)
		for _, s := range p.Steps {
			if _, err := Elementwise(s.Kernel, amd90a); err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			n++
		}
	}
	t.Logf("%d op cases, %d kernels", len(opCases()), n)
}

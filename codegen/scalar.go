package codegen

import (
	"fmt"
	"strings"

	"github.com/loomgraph/loom/plan"
)

// ScalarFunc renders elementwise kernel k as a device function that other
// kernels call: the value k stores at one flat index of its shape, in k's
// output storage type, computed with the instructions, roundings and
// conversions of Elementwise (so the value is the one k would have stored).
// Hand-written kernels use it for the elementwise chains fused around them
// (kernels' fused pools and upsamplings: the prologue at every element a
// window reads, the epilogue at every element it writes).
//
// The function is
//
//	LOOM_DEV <out storage> name(const T0* __restrict__ p0, …, [V v,] I i)
//
// with one pointer parameter per operand of k in order — except operand
// value (≥ 0), whose element at i is passed as the storage value v — and
// the flat index i, of type unsigned int, or unsigned long long when wide
// is set or k needs it (the caller's index converts). Helpers live in
// namespace name_. k.Out is only checked (its dtype and numel), never
// written.
func ScalarFunc(k *plan.Kernel, name string, value int, wide bool) (string, error) {
	g, err := scalarGen(k, name, value, wide)
	if err != nil {
		return "", err
	}
	vals := map[int]string{}
	if value >= 0 {
		vals[value] = "v"
	}
	return renderScalar(g, k, name, "the flat index", vals, []int{value}), nil
}

// ScalarFuncPair renders elementwise kernel k as ScalarFunc does, with two
// value operands: v0 and v1 (either may be -1), whose elements at i are
// passed as storage values, whatever their layouts:
//
//	LOOM_DEV <out storage> name(const T0* __restrict__ p0, …, V0 v0, V1 v1, I i)
//
// A pair epilogue (plan.Kernel.PairEpilogue) takes its product's even and
// odd values so: the product holds both when it stores a pair.
func ScalarFuncPair(k *plan.Kernel, name string, v0, v1 int, wide bool) (string, error) {
	g, err := scalarGen(k, name, -1, wide)
	if err != nil {
		return "", err
	}
	if v0 >= len(k.Ins) || v1 >= len(k.Ins) || v0 >= 0 && v0 == v1 {
		return "", fmt.Errorf("codegen: function %s (kernel %s): value operands %d and %d of %d", name, k.Name, v0, v1, len(k.Ins))
	}
	vals := map[int]string{}
	for j, v := range []int{v0, v1} {
		if v >= 0 {
			vals[v] = fmt.Sprintf("v%d", j)
		}
	}
	return renderScalar(g, k, name, "a pair of values and the flat index", vals, []int{v0, v1}), nil
}

// renderScalar writes ScalarFunc's and ScalarFuncPair's function: the
// pointers of the operands not in vals, then a storage value parameter
// for each of order (named by vals; an absent one, -1, still takes a float
// parameter v<j> that nothing reads, so that callers pass the same
// arguments), then the index.
func renderScalar(g *gen, k *plan.Kernel, name, what string, vals map[int]string, order []int) string {
	I, _ := g.idx()
	var b w
	b.line(0, "")
	b.line(0, "// %s: kernel %s (%s) as a function of %s.", name, k.Name, strings.Join(k.OpNames(), " → "), what)
	g.renderNamespace(&b, name)
	var params []string
	for i, o := range k.Ins {
		if _, ok := vals[i]; !ok {
			params = append(params, fmt.Sprintf("const %s* __restrict__ p%d", storageType(o.Buf.DType), i))
		}
	}
	for j, v := range order {
		switch {
		case v >= 0:
			params = append(params, storageType(k.Ins[v].Buf.DType)+" "+vals[v])
		case len(order) > 1:
			params = append(params, fmt.Sprintf("float v%d", j))
		}
	}
	params = append(params, I+" i")
	args := g.argsAt(func(i int) string {
		if v, ok := vals[i]; ok {
			return v
		}
		return fmt.Sprintf("p%d[%s_::at%d(i)]", i, name, i)
	})
	b.line(0, "LOOM_DEV %s %s(%s) {", storageType(k.Out.DType), name, strings.Join(params, ", "))
	b.line(1, "return %s;", narrow(k.Out.DType, fmt.Sprintf("%s_::body(%s)", name, strings.Join(args, ", "))))
	b.line(0, "}")
	return b.String()
}

// ScalarFunc8 renders elementwise kernel k as ScalarFunc does, for a run of
// eight consecutive flat indices i, i+1, …, i+7 at once:
//
//	LOOM_DEV void name(const T0* __restrict__ p0, …, const V* v, I i, O* r)
//
// with v the value operand's eight elements and r the eight results. The
// caller guarantees that i is a multiple of 8 and that k's innermost dim
// (every operand's, after merging) keeps whole runs: then an operand whose
// merged innermost dim is a multiple of 8 is addressed once a run, element
// e at that address plus e times its innermost stride, and only the
// others per element. A fused epilogue computed element by element spends
// its time on index arithmetic, not memory: the bias + ReLU of W12 in bf16
// inside its output's transpose cost 20 µs over the transpose's 33
// (H200). Kernels whose values depend on the flat index itself (arange,
// random draws) are refused.
func ScalarFunc8(k *plan.Kernel, name string, value int, wide bool) (string, error) {
	g, err := scalarGen(k, name, value, wide)
	if err != nil {
		return "", err
	}
	if g.arange || len(g.randoms()) > 0 {
		return "", fmt.Errorf("codegen: function %s (kernel %s): its values depend on the flat index", name, k.Name)
	}
	I, u := g.idx()
	var b w
	b.line(0, "")
	b.line(0, "// %s: kernel %s (%s) over a run of 8 flat indices.", name, k.Name, strings.Join(k.OpNames(), " → "))
	g.renderNamespace(&b, name)
	params := scalarPointers(k, value)
	if value >= 0 {
		params = append(params, "const "+storageType(k.Ins[value].Buf.DType)+"* v")
	}
	params = append(params, I+" i", storageType(k.Out.DType)+"* r")
	b.line(0, "LOOM_DEV void %s(%s) {", name, strings.Join(params, ", "))
	step := map[int]string{}
	for i := range g.ops {
		if i == value {
			continue
		}
		l := g.ops[i].l
		n := len(l.Dims)
		if n == 0 || l.Dims[n-1]%8 == 0 {
			s := 0
			if n > 0 {
				s = l.Strides[n-1]
			}
			b.line(1, "const %s a%d = %s_::at%d(i);", I, i, name, i)
			step[i] = fmt.Sprintf("%d%s", s, u)
		}
	}
	args := g.argsAt(func(i int) string {
		if i == value {
			return "v[e]"
		}
		if s, ok := step[i]; ok {
			return fmt.Sprintf("p%d[a%d + (%s)e * %s]", i, i, I, s)
		}
		return fmt.Sprintf("p%d[%s_::at%d(i + (%s)e)]", i, name, i, I)
	})
	b.line(1, "#pragma unroll")
	b.line(1, "for (int e = 0; e < 8; ++e) r[e] = %s;", narrow(k.Out.DType, fmt.Sprintf("%s_::body(%s)", name, strings.Join(args, ", "))))
	b.line(0, "}")
	return b.String(), nil
}

// scalarGen checks ScalarFunc's and ScalarFunc8's arguments and returns
// k's generator, its index wide where wide asks.
func scalarGen(k *plan.Kernel, name string, value int, wide bool) (*gen, error) {
	g, err := newGen(k, defaultOptions)
	if err != nil {
		return nil, fmt.Errorf("codegen: function %s (kernel %s): %w", name, k.Name, err)
	}
	if value >= len(k.Ins) {
		return nil, fmt.Errorf("codegen: function %s (kernel %s): value operand %d of %d", name, k.Name, value, len(k.Ins))
	}
	if value >= 0 && !k.Ins[value].Layout.IsIdentity() {
		return nil, fmt.Errorf("codegen: function %s (kernel %s): value operand %d is read through %v, not element for element", name, k.Name, value, k.Ins[value].Layout)
	}
	g.wide = g.wide || wide
	return g, nil
}

// scalarPointers is the pointer parameters of a scalar function of k: one
// per operand but the value operand.
func scalarPointers(k *plan.Kernel, value int) []string {
	var params []string
	for i, o := range k.Ins {
		if i != value {
			params = append(params, fmt.Sprintf("const %s* __restrict__ p%d", storageType(o.Buf.DType), i))
		}
	}
	return params
}

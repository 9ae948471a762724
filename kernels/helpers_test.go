package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
	"github.com/loomgraph/loom/tensor"
)

var (
	valueDTypes = []dtype.DType{dtype.F32, dtype.F64, dtype.F16, dtype.BF16, dtype.F8E4M3, dtype.U8, dtype.U32, dtype.I64}
	idsDTypes   = []dtype.DType{dtype.U8, dtype.U32, dtype.I64}
)

// testCase is a graph with one indexing op and the data to run it on.
type testCase struct {
	name   string
	prog   *graph.Program
	inputs map[string]*tensor.Tensor
	// addOp marks float adds, whose NaN payloads may differ between
	// devices (results are compared with every NaN equal).
	addOp bool
}

// indexKernels returns the plan's kernels that Plan plans: indexing
// kernels (name prefix "I_") and window kernels ("W_").
func indexKernels(t testing.TB, p *plan.Plan) []*plan.Kernel {
	t.Helper()
	var ks []*plan.Kernel
	for _, s := range p.Steps {
		if planned := s.Kernel.Name; strings.HasPrefix(planned, "I_") || strings.HasPrefix(planned, "W_") {
			ks = append(ks, s.Kernel)
		}
	}
	return ks
}

// builder collects inputs while a graph is built.
type builder struct {
	g      *graph.Graph
	rng    *rand.Rand
	inputs map[string]*tensor.Tensor
}

func newBuilder(seed uint64) *builder {
	return &builder{g: graph.New(), rng: rand.New(rand.NewPCG(seed, 7)), inputs: map[string]*tensor.Tensor{}}
}

// input declares an input filled with random values of dt (special values
// included) and returns it.
func (b *builder) input(name string, dt dtype.DType, shape ...int) *graph.Tensor {
	b.inputs[name] = randomTensor(b.rng, dt, shape...)
	return b.g.Input(name, dt, shape...)
}

// ids declares an ids input with values in [0, size), about one in eight
// a sentinel (duplicates come with the draws).
func (b *builder) ids(name string, dt dtype.DType, size int, shape ...int) *graph.Tensor {
	n := ir.Numel(shape)
	vals := make([]float64, n)
	for i := range vals {
		if size == 0 || b.rng.IntN(8) == 0 {
			vals[i] = float64(dt.MaxID())
			continue
		}
		vals[i] = float64(b.rng.IntN(size))
	}
	b.inputs[name] = idsTensor(dt, vals, shape...)
	return b.g.Input(name, dt, shape...)
}

func idsTensor(dt dtype.DType, vals []float64, shape ...int) *tensor.Tensor {
	var t *tensor.Tensor
	var err error
	switch dt {
	case dtype.I64:
		v := make([]int64, len(vals))
		for i, x := range vals {
			v[i] = int64(x)
			if x >= math.MaxInt64 {
				v[i] = math.MaxInt64
			}
		}
		t, err = tensor.New(v, shape...)
	default:
		t, err = tensor.FromFloat64s(dt, vals, shape...)
	}
	if err != nil {
		panic(err)
	}
	return t
}

func (b *builder) compile(t testing.TB, out *graph.Tensor) *graph.Program {
	t.Helper()
	b.g.Output("out", out)
	p, err := b.g.Compile(graph.Options{})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}

// randomTensor fills a tensor with random bits of dt, with special values
// mixed in for floats (NaNs with payloads, ±0, ±inf, subnormals).
func randomTensor(rng *rand.Rand, dt dtype.DType, shape ...int) *tensor.Tensor {
	n := ir.Numel(shape)
	var t *tensor.Tensor
	var err error
	switch dt {
	case dtype.F32:
		special := []uint32{0x7fc00000, 0x7fc00001, 0xffc00000, 0x7f800001, 0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x00000001, 0x807fffff}
		v := make([]float32, n)
		for i := range v {
			switch {
			case rng.IntN(16) == 0:
				v[i] = math.Float32frombits(special[rng.IntN(len(special))])
			case rng.IntN(4) == 0:
				v[i] = float32(rng.IntN(9) - 4) // ties
			default:
				v[i] = float32(rng.NormFloat64() * 100)
			}
		}
		t, err = tensor.New(v, shape...)
	case dtype.F64:
		special := []uint64{0x7ff8000000000000, 0x7ff8000000000001, 0xfff8000000000000, 0x7ff0000000000001, 0, 0x8000000000000000, 0x7ff0000000000000, 0xfff0000000000000, 1}
		v := make([]float64, n)
		for i := range v {
			switch {
			case rng.IntN(16) == 0:
				v[i] = math.Float64frombits(special[rng.IntN(len(special))])
			case rng.IntN(4) == 0:
				v[i] = float64(rng.IntN(9) - 4)
			default:
				v[i] = rng.NormFloat64() * 100
			}
		}
		t, err = tensor.New(v, shape...)
	case dtype.F16:
		v := make([]dtype.Float16, n)
		for i := range v {
			if rng.IntN(4) == 0 {
				v[i] = dtype.ToF16(float32(rng.IntN(9) - 4))
			} else {
				v[i] = dtype.Float16(rng.Uint32())
			}
		}
		t, err = tensor.New(v, shape...)
	case dtype.BF16:
		v := make([]dtype.BFloat16, n)
		for i := range v {
			if rng.IntN(4) == 0 {
				v[i] = dtype.ToBF16(float32(rng.IntN(9) - 4))
			} else {
				v[i] = dtype.BFloat16(rng.Uint32())
			}
		}
		t, err = tensor.New(v, shape...)
	case dtype.F8E4M3: // every code, NaNs (0x7f, 0xff) and ±0 included
		v := make([]dtype.Float8E4M3, n)
		for i := range v {
			if rng.IntN(4) == 0 {
				v[i] = dtype.ToF8E4M3(float32(rng.IntN(9) - 4)) // ties
			} else {
				v[i] = dtype.Float8E4M3(rng.Uint32())
			}
		}
		t, err = tensor.New(v, shape...)
	case dtype.U8:
		v := make([]uint8, n)
		for i := range v {
			v[i] = uint8(rng.Uint32())
			if rng.IntN(4) == 0 {
				v[i] = uint8(rng.IntN(4))
			}
		}
		t, err = tensor.New(v, shape...)
	case dtype.U32:
		v := make([]uint32, n)
		for i := range v {
			v[i] = rng.Uint32()
			if rng.IntN(4) == 0 {
				v[i] = uint32(rng.IntN(4)) + math.MaxUint32 - 3
			}
		}
		t, err = tensor.New(v, shape...)
	case dtype.I64:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(rng.Uint64())
			if rng.IntN(4) == 0 {
				v[i] = int64(rng.IntN(5) - 2)
			}
		}
		t, err = tensor.New(v, shape...)
	}
	if err != nil {
		panic(err)
	}
	return t
}

// Shapes of the test graphs: a source of logical shape [5, 7, 6], read
// through a strided, offset view of a larger input (narrow + transpose),
// indexed along dim 1 (size 7) by 4 ids per (left, right) position.

// view536 declares input name of shape [6, 9, 5] and returns the view
// x.Narrow(1, 1, 7).Transpose(0, 2): shape [5, 7, 6], strides [1, 5, 45],
// offset 5.
func (b *builder) view576(name string, dt dtype.DType) *graph.Tensor {
	return b.input(name, dt, 6, 9, 5).Narrow(1, 1, 7).Transpose(0, 2)
}

// caseFor builds the standard test graph of op for a value and ids dtype.
// variant selects among layouts (0: strided/offset views, 1: contiguous,
// with the indexed dim first or last).
func caseFor(t testing.TB, op ir.Op, vdt, idt dtype.DType, variant int, seed uint64) testCase {
	t.Helper()
	b := newBuilder(seed)
	var out *graph.Tensor
	add := false
	switch op {
	case ir.OpIndexSelect:
		if variant == 0 {
			// ids: a stride-2, offset-1 view.
			ids := b.ids("ids", idt, 7, 10, 2).Narrow(1, 1, 1).Squeeze(1)
			out = b.view576("x", vdt).IndexSelect(ids, 1)
		} else {
			out = b.input("x", vdt, 7, 6).IndexSelect(b.ids("ids", idt, 7, 12), 0)
		}
	case ir.OpGather:
		if variant == 0 {
			ids := b.ids("ids", idt, 7, 6, 4, 5).Permute(2, 1, 0) // [5, 4, 6]
			out = b.view576("x", vdt).Gather(ids, 1)
		} else {
			out = b.input("x", vdt, 6, 7).Gather(b.ids("ids", idt, 7, 6, 11), 1)
		}
	case ir.OpScatter, ir.OpScatterAdd:
		var dst, ids, src *graph.Tensor
		if variant == 0 {
			dst = b.view576("dst", vdt)
			ids = b.ids("ids", idt, 7, 5, 4, 6)
			src = b.input("src", vdt, 6, 4, 5).Permute(2, 1, 0)
		} else {
			dst = b.input("dst", vdt, 7, 3)
			ids = b.ids("ids", idt, 7, 20, 3)
			src = b.input("src", vdt, 20, 3)
		}
		if op == ir.OpScatter {
			out = dst.Scatter(ids, src, map[int]int{0: 1, 1: 0}[variant])
		} else {
			out = dst.ScatterAdd(ids, src, map[int]int{0: 1, 1: 0}[variant])
			add = vdt.IsFloat()
		}
	case ir.OpIndexAdd:
		if variant == 0 {
			out = b.view576("dst", vdt).IndexAdd(b.ids("ids", idt, 7, 9), b.input("src", vdt, 6, 9, 5).Transpose(0, 2), 1)
		} else {
			out = b.input("dst", vdt, 4, 7).IndexAdd(b.ids("ids", idt, 7, 12), b.input("src", vdt, 4, 12), 1)
		}
		add = vdt.IsFloat()
	case ir.OpCat:
		if variant == 0 {
			a := b.view576("a", vdt).Narrow(1, 0, 3)
			c := b.input("c", vdt, 5, 4, 6)
			d := b.input("d", vdt, 6, 2, 5).Transpose(0, 2)
			out = graph.Cat(1, a, c, d)
		} else {
			out = graph.Cat(-1, b.input("a", vdt, 3, 5), b.input("c", vdt, 3, 1), b.input("d", vdt, 3, 8))
		}
	case ir.OpSliceAssign:
		if variant == 0 {
			out = b.view576("dst", vdt).SliceAssign(b.input("src", vdt, 6, 3, 5).Transpose(0, 2), 1, 2)
		} else {
			out = b.input("dst", vdt, 9, 4).SliceAssign(b.input("src", vdt, 2, 4), 0, 7)
		}
	default:
		t.Fatalf("no case for %v", op)
	}
	name := fmt.Sprintf("%v/%v", op, vdt)
	if op.Info().IDArg() >= 0 {
		name += "/" + idt.String()
	}
	return testCase{name: fmt.Sprintf("%s/v%d", name, variant), prog: b.compile(t, out), inputs: b.inputs, addOp: add}
}

// argsortCase sorts rows of length n; strided reads the rows through a
// transpose (last-dim stride = rows).
func argsortCase(t testing.TB, dt dtype.DType, rows, n int, desc, strided bool, seed uint64) testCase {
	t.Helper()
	b := newBuilder(seed)
	var x *graph.Tensor
	if strided {
		x = b.input("x", dt, n, rows).T()
	} else {
		x = b.input("x", dt, rows, n)
	}
	return testCase{
		name:   fmt.Sprintf("argsort/%v/%dx%d/desc=%v/strided=%v", dt, rows, n, desc, strided),
		prog:   b.compile(t, x.Argsort(desc)),
		inputs: b.inputs,
	}
}

// indexOps are the ops taking ids.
var indexOps = []ir.Op{ir.OpIndexSelect, ir.OpGather, ir.OpScatter, ir.OpScatterAdd, ir.OpIndexAdd}

// sameBits compares two byte images of dt values; nanEq makes every NaN
// equal (float adds, whose NaN payloads follow the hardware). f16 NaNs are
// always equal: the CPU twin's own f16 NaN payloads depend on where an
// element falls (its F16C path, in groups of 8 contiguous elements, keeps
// payloads; its scalar path, dtype.ToF16, gives the canonical NaN that the
// GPU kernels and codegen's prelude give). It returns a description of the
// first difference.
func sameBits(dt dtype.DType, got, want []byte, nanEq bool) string {
	nanEq = nanEq || dt == dtype.F16
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes, want %d", len(got), len(want))
	}
	sz := dt.Size()
	bad, first := 0, ""
	for i := 0; i < len(got); i += sz {
		g, w := got[i:i+sz], want[i:i+sz]
		if string(g) == string(w) {
			continue
		}
		if nanEq && isNaN(dt, g) && isNaN(dt, w) {
			continue
		}
		if bad == 0 {
			first = fmt.Sprintf("element %d: got %s, want %s", i/sz, show(dt, g), show(dt, w))
		}
		bad++
	}
	if bad == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d elements differ; first: %s", bad, len(got)/sz, first)
}

func isNaN(dt dtype.DType, b []byte) bool {
	switch dt {
	case dtype.F32:
		return math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(b))))
	case dtype.F64:
		return math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	case dtype.F16:
		return binary.LittleEndian.Uint16(b)&0x7fff > 0x7c00
	case dtype.BF16:
		return binary.LittleEndian.Uint16(b)&0x7fff > 0x7f80
	case dtype.F8E4M3:
		return b[0]&0x7f == 0x7f
	}
	return false
}

func show(dt dtype.DType, b []byte) string {
	switch dt.Size() {
	case 1:
		if dt == dtype.F8E4M3 {
			return fmt.Sprintf("%#x (%g)", b[0], dtype.Float8E4M3(b[0]).Float64())
		}
		return fmt.Sprintf("%#x", b[0])
	case 2:
		return fmt.Sprintf("%#04x", binary.LittleEndian.Uint16(b))
	case 4:
		if dt == dtype.F32 {
			return fmt.Sprintf("%#08x (%g)", binary.LittleEndian.Uint32(b), math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}
		return fmt.Sprint(binary.LittleEndian.Uint32(b))
	}
	if dt == dtype.F64 {
		return fmt.Sprintf("%#016x (%g)", binary.LittleEndian.Uint64(b), math.Float64frombits(binary.LittleEndian.Uint64(b)))
	}
	return fmt.Sprint(int64(binary.LittleEndian.Uint64(b)))
}

package fuzz

import (
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
)

// reader decodes fuzz bytes into small choices; past the end it reads zeros.
type reader struct{ b []byte }

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) n(k int) int     { return int(r.byte()) % k }
func (r *reader) done() bool      { return len(r.b) == 0 }
func (r *reader) small() int      { return r.n(9) - 3 } // -3..5: dims, starts, axes (some invalid)
func (r *reader) dim() int        { return []int{0, 1, 2, 3, 4, 1}[r.n(6)] }
func (r *reader) dt() dtype.DType { return dtype.All[r.n(len(dtype.All))] }

func (r *reader) shape() []int {
	s := make([]int, r.n(5))
	for i := range s {
		s[i] = r.dim()
	}
	return s
}

func (r *reader) ints(k int) []int {
	s := make([]int, r.n(k+1))
	for i := range s {
		s[i] = r.small()
	}
	return s
}

// builder replays fuzz bytes as builder calls on one graph; log records
// them, for the reproducer in a failure message.
type builder struct {
	r    *reader
	g    *graph.Graph
	pool []*graph.Tensor
	log  []string
	nIn  int
}

func (b *builder) pick() *graph.Tensor {
	if len(b.pool) == 0 || b.r.n(16) == 0 {
		return graph.Scalar([]float64{0, 1, -2.5, 3}[b.r.n(4)])
	}
	return b.pool[b.r.n(len(b.pool))]
}

func (b *builder) push(what string, t *graph.Tensor) {
	b.log = append(b.log, fmt.Sprintf("t%d = %s -> %v", len(b.pool), what, t))
	b.pool = append(b.pool, t)
}

// step makes one builder call chosen by the next byte.
func (b *builder) step() {
	r := b.r
	switch op := r.n(60); op {
	case 0:
		name := fmt.Sprintf("in%d", b.nIn)
		b.nIn++
		dt, s := r.dt(), r.shape()
		b.push(fmt.Sprintf("Input(%q, %v, %v)", name, dt, s), b.g.Input(name, dt, s...))
	case 1:
		dt, s := r.dt(), r.shape()
		b.push(fmt.Sprintf("Full(%v, 1.5, %v)", dt, s), b.g.Full(dt, 1.5, s...))
	case 2:
		dt, start, stop, step := r.dt(), float64(r.small()), float64(r.small()), float64(r.small())/2
		b.push(fmt.Sprintf("Arange(%v, %v, %v, %v)", dt, start, stop, step), b.g.Arange(dt, start, stop, step))
	case 3, 4, 5, 6, 7, 8:
		names := []string{"Abs", "Ceil", "Cos", "Erf", "Exp", "Floor", "Gelu", "GeluErf", "Log", "Neg", "Normcdf", "Recip", "Relu", "Round", "Sigmoid", "Sign", "Silu", "Sin", "Sqr", "Sqrt", "Tanh", "Contiguous"}
		k := r.n(len(names))
		t := b.pick()
		fns := []func() *graph.Tensor{t.Abs, t.Ceil, t.Cos, t.Erf, t.Exp, t.Floor, t.Gelu, t.GeluErf, t.Log, t.Neg, t.Normcdf, t.Recip, t.Relu, t.Round, t.Sigmoid, t.Sign, t.Silu, t.Sin, t.Sqr, t.Sqrt, t.Tanh, t.Contiguous}
		b.push(fmt.Sprintf("%v.%s()", t, names[k]), fns[k]())
	case 9, 10, 11, 12, 13, 14:
		names := []string{"Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Matmul", "Mv"}
		k := r.n(len(names))
		x, y := b.pick(), b.pick()
		fns := []func(*graph.Tensor) *graph.Tensor{x.Add, x.Sub, x.Mul, x.Div, x.Maximum, x.Minimum, x.Eq, x.Ne, x.Lt, x.Le, x.Gt, x.Ge, x.Matmul, x.Mv}
		b.push(fmt.Sprintf("%v.%s(%v)", x, names[k], y), fns[k](y))
	case 15, 16:
		c, x, y := b.pick(), b.pick(), b.pick()
		b.push(fmt.Sprintf("Where(%v, %v, %v)", c, x, y), graph.Where(c, x, y))
	case 17, 18:
		t, dt := b.pick(), r.dt()
		b.push(fmt.Sprintf("%v.Cast(%v)", t, dt), t.Cast(dt))
	case 19:
		t, m, a := b.pick(), float64(r.small()), float64(r.small())
		b.push(fmt.Sprintf("%v.Affine(%v, %v)", t, m, a), t.Affine(m, a))
	case 20:
		t, lo, hi := b.pick(), b.pick(), b.pick()
		b.push(fmt.Sprintf("%v.Clamp(%v, %v)", t, lo, hi), t.Clamp(lo, hi))
	case 21:
		t, e := b.pick(), float64(r.small())/2
		if r.n(2) == 0 {
			b.push(fmt.Sprintf("%v.Powf(%v)", t, e), t.Powf(e))
		} else {
			b.push(fmt.Sprintf("%v.Elu(%v)", t, e), t.Elu(e))
		}
	case 22, 23, 24:
		t, dims := b.pick(), r.ints(3)
		switch r.n(6) {
		case 0:
			b.push(fmt.Sprintf("%v.Sum(%v)", t, dims), t.Sum(dims...))
		case 1:
			b.push(fmt.Sprintf("%v.SumKeepDim(%v)", t, dims), t.SumKeepDim(dims...))
		case 2:
			b.push(fmt.Sprintf("%v.Max(true, %v)", t, dims), t.Max(true, dims...))
		case 3:
			b.push(fmt.Sprintf("%v.Min(false, %v)", t, dims), t.Min(false, dims...))
		case 4:
			b.push(fmt.Sprintf("%v.Mean(true, %v)", t, dims), t.Mean(true, dims...))
		default:
			b.push(fmt.Sprintf("%v.Var(false, %v)", t, dims), t.Var(false, dims...))
		}
	case 25, 26:
		t, d := b.pick(), r.small()
		switch r.n(5) {
		case 0:
			b.push(fmt.Sprintf("%v.Argmax(%d, true)", t, d), t.Argmax(d, true))
		case 1:
			b.push(fmt.Sprintf("%v.Argmin(%d, false)", t, d), t.Argmin(d, false))
		case 2:
			b.push(fmt.Sprintf("%v.Softmax(%d)", t, d), t.Softmax(d))
		case 3:
			b.push(fmt.Sprintf("%v.LogSoftmax(%d)", t, d), t.LogSoftmax(d))
		default:
			b.push(fmt.Sprintf("%v.Argsort(%v)", t, d > 0), t.Argsort(d > 0))
		}
	case 27:
		t, w, bb := b.pick(), b.pick(), b.pick()
		if r.n(2) == 0 {
			b.push(fmt.Sprintf("%v.LayerNorm(%v, %v, 1e-5)", t, w, bb), t.LayerNorm(w, bb, 1e-5))
		} else {
			b.push(fmt.Sprintf("%v.RmsNorm(%v, 1e-5)", t, w), t.RmsNorm(w, 1e-5))
		}
	case 28, 29, 30:
		t, s := b.pick(), r.ints(4)
		b.push(fmt.Sprintf("%v.Reshape(%v)", t, s), t.Reshape(s...))
	case 31, 32:
		t, s := b.pick(), r.ints(4)
		b.push(fmt.Sprintf("%v.Permute(%v)", t, s), t.Permute(s...))
	case 33, 34:
		t, i, j := b.pick(), r.small(), r.small()
		if r.n(3) == 0 {
			b.push(fmt.Sprintf("%v.T()", t), t.T())
		} else {
			b.push(fmt.Sprintf("%v.Transpose(%d, %d)", t, i, j), t.Transpose(i, j))
		}
	case 35, 36, 37:
		t, d, s, n := b.pick(), r.small(), r.small(), r.small()
		if r.n(2) == 0 {
			b.push(fmt.Sprintf("%v.Narrow(%d, %d, %d)", t, d, s, n), t.Narrow(d, s, n))
		} else {
			b.push(fmt.Sprintf("%v.Slice(%d, %d, %d)", t, d, s, n), t.Slice(d, s, n))
		}
	case 38, 39:
		t, s := b.pick(), r.shape()
		b.push(fmt.Sprintf("%v.BroadcastTo(%v)", t, s), t.BroadcastTo(s...))
	case 40, 41:
		t, d := b.pick(), r.small()
		if r.n(2) == 0 {
			b.push(fmt.Sprintf("%v.Unsqueeze(%d)", t, d), t.Unsqueeze(d))
		} else {
			b.push(fmt.Sprintf("%v.Squeeze(%d)", t, d), t.Squeeze(d))
		}
	case 42, 43:
		t, ids, d := b.pick(), b.pick(), r.small()
		if r.n(2) == 0 {
			b.push(fmt.Sprintf("%v.IndexSelect(%v, %d)", t, ids, d), t.IndexSelect(ids, d))
		} else {
			b.push(fmt.Sprintf("%v.Gather(%v, %d)", t, ids, d), t.Gather(ids, d))
		}
	case 44, 45:
		t, ids, src, d := b.pick(), b.pick(), b.pick(), r.small()
		switch r.n(3) {
		case 0:
			b.push(fmt.Sprintf("%v.Scatter(%v, %v, %d)", t, ids, src, d), t.Scatter(ids, src, d))
		case 1:
			b.push(fmt.Sprintf("%v.ScatterAdd(%v, %v, %d)", t, ids, src, d), t.ScatterAdd(ids, src, d))
		default:
			b.push(fmt.Sprintf("%v.IndexAdd(%v, %v, %d)", t, ids, src, d), t.IndexAdd(ids, src, d))
		}
	case 46:
		ts, d := []*graph.Tensor{b.pick()}, r.small()
		for range r.n(3) {
			ts = append(ts, b.pick())
		}
		b.push(fmt.Sprintf("Cat(%d, %v)", d, ts), graph.Cat(d, ts...))
	case 47, 48:
		t, src, d, s := b.pick(), b.pick(), r.small(), r.small()
		if t.Node() == nil || src.Node() == nil {
			return
		}
		b.push(fmt.Sprintf("%v.SliceAssign(%v, %d, %d)", t, src, d, s), t.SliceAssign(src, d, s))
	case 49:
		t := b.pick()
		v, i := t.Sort(r.n(2) == 0)
		b.push(fmt.Sprintf("%v.Sort() values", t), v)
		b.push(fmt.Sprintf("%v.Sort() indices", t), i)
	case 50, 51:
		x, y := b.pick(), b.pick()
		b.push(fmt.Sprintf("Dot(%v, %v)", x, y), graph.Dot(x, y))
	case 52, 53:
		x, w := b.pick(), b.pick()
		var bias *graph.Tensor
		if r.n(2) == 0 {
			bias = b.pick()
		}
		b.push(fmt.Sprintf("Linear(%v, %v, %v)", x, w, bias), graph.Linear(x, w, bias))
	case 54:
		x, c, s := b.pick(), b.pick(), b.pick()
		switch r.n(3) {
		case 0:
			b.push(fmt.Sprintf("%v.Rope(%v, %v)", x, c, s), x.Rope(c, s))
		case 1:
			b.push(fmt.Sprintf("%v.RopeI(%v, %v)", x, c, s), x.RopeI(c, s))
		default:
			b.push(fmt.Sprintf("%v.RopeThd(%v, %v)", x, c, s), x.RopeThd(c, s))
		}
	default:
		if len(b.pool) > 0 {
			t := b.pool[r.n(len(b.pool))]
			name := fmt.Sprintf("out%d", len(b.log))
			b.log = append(b.log, fmt.Sprintf("Output(%q, %v)", name, t))
			b.g.Output(name, t)
		}
	}
}

// errLine is what every line of a compile error must look like: Loom's
// prefix and the op the caller called (lower-case name, as in ir's op
// table and the graph methods: "add", "index_select", "layer_norm").
var errLine = regexp.MustCompile(`^loom: [a-z][a-z0-9_]*: `)

// FuzzBuilder decodes the fuzz input into up to 64 builder calls over
// every public op family, with random (often invalid) shapes, dtypes, dims
// and operands, names some results as outputs and compiles the graph fused
// and unfused. Nothing may panic, and every line of a compile error must
// name an op.
func FuzzBuilder(f *testing.F) {
	f.Add([]byte{0, 0, 3, 2, 1, 9, 0, 0, 59, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &builder{r: &reader{b: data}, g: graph.New()}
		stage := "build"
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("panic in %s: %v\ncalls:\n  %s\n%s", stage, p, strings.Join(b.log, "\n  "), debug.Stack())
			}
		}()
		for i := 0; i < 64 && !b.r.done(); i++ {
			b.step()
		}
		for _, opts := range []graph.Options{{Check: true}, {NoFusion: true, Check: true}} {
			stage = fmt.Sprintf("compile (NoFusion=%v)", opts.NoFusion)
			_, err := b.g.Compile(opts)
			if err == nil {
				continue
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !errLine.MatchString(line) {
					t.Fatalf("%s: error line does not name an op: %q\nwhole error: %v\ncalls:\n  %s", stage, line, err, strings.Join(b.log, "\n  "))
				}
			}
		}
	})
}

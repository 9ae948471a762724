package conformance

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
)

// Elementwise runs every elementwise and source op of the op table on every
// dtype its row claims, through every layout family, and finally checks that
// the compiled graphs covered the whole table. newExec returns an executor
// whose fresh memory is filled with the poison byte (executors that cannot
// poison ignore it).
func Elementwise(t *testing.T, newExec func(poison byte) exec.Executor, opts graph.Options) {
	s := newSuite(t, newExec, opts)
	t.Run("unary", s.unary)
	t.Run("binary", s.binary)
	t.Run("compare", s.compare)
	t.Run("where", s.where)
	t.Run("cast", s.cast)
	t.Run("full", s.full)
	t.Run("arange", s.arange)
	t.Run("random", s.random)
	t.Run("copy", s.copy)
	t.Run("coverage", s.coverage)
}

// unaryLayouts are the operands every one-argument op is run on: each
// layout family over the standard shape, then the edge shapes.
var unaryLayouts = []struct {
	name string
	opd  operand
}{
	{"contiguous", opd(contig, stdShape...)},
	{"permuted", opd(permuted, stdShape...)},
	{"transposed", opd(transposed, stdShape...)},
	{"narrowed", opd(narrowed, stdShape...)},
	{"offset", opd(offset, stdShape...)},
	{"broadcast", opd(broadcast, stdShape...)},
	{"lead", opd(lead, stdShape...)},
	{"splat", opd(splat, stdShape...)},
	{"chain", opd(chain, stdShape...)},
	{"empty", opd(contig, 3, 0, 37)},
	{"empty_permuted", opd(permuted, 3, 0, 37)},
	{"one", opd(contig, 1, 1, 1)},
	{"rank0", opd(contig)},
}

func paramName(p []float64) string {
	if p == nil {
		return "default"
	}
	parts := make([]string, len(p))
	for i, v := range p {
		parts[i] = fmt.Sprint(v)
	}
	return "p=" + strings.Join(parts, ",")
}

func (s *suite) unary(t *testing.T) {
	for _, op := range ir.Ops() {
		info := op.Info()
		if info.Class != ir.ClassElementwise || info.Arity != 1 || op == ir.OpCopy || op == ir.OpCast {
			continue
		}
		spec, ok := unarySpecs[op]
		if !ok {
			t.Errorf("op %s has no reference in unarySpecs", op)
			continue
		}
		t.Run(op.String(), func(t *testing.T) {
			t.Parallel()
			for _, dt := range info.In.List() {
				if !dt.IsFloat() && spec.i == nil {
					t.Errorf("op %s claims %v but its spec has no integer reference", op, dt)
					continue
				}
				for _, p := range spec.paramSets(dt) {
					t.Run(dt.String()+"/"+paramName(p), func(t *testing.T) {
						t.Parallel()
						c := s.newCase(t)
						for _, l := range unaryLayouts {
							x, xv := l.opd.build(c, "x_"+l.name, dt, spec.gen)
							c.expect(l.name, spec.call(x, p), spec.want(xv, p))
						}
						c.run()
					})
				}
			}
		})
	}
}

// binaryLayouts pair operand layouts: every family on each side, numpy
// broadcasting of shapes, untyped scalars on either side, edge shapes.
var binaryLayouts = []struct {
	name string
	a, b operand
}{
	{"contiguous", opd(contig, stdShape...), opd(contig, stdShape...)},
	{"permuted_contiguous", opd(permuted, stdShape...), opd(contig, stdShape...)},
	{"contiguous_transposed", opd(contig, stdShape...), opd(transposed, stdShape...)},
	{"narrowed_broadcast", opd(narrowed, stdShape...), opd(broadcast, stdShape...)},
	{"offset_chain", opd(offset, stdShape...), opd(chain, stdShape...)},
	{"lead_permuted", opd(lead, stdShape...), opd(permuted, stdShape...)},
	{"splat_narrowed", opd(splat, stdShape...), opd(narrowed, stdShape...)},
	{"numpy", opd(contig, 3, 1, 5), opd(contig, 4, 5)},
	{"numpy_strided", opd(permuted, 3, 1, 5), opd(transposed, 4, 5)},
	{"rank0_rhs", opd(contig, stdShape...), opd(contig)},
	{"scalar_rhs", opd(contig, stdShape...), scalarOpd(2.5)},
	{"scalar_lhs", scalarOpd(-1.5), opd(permuted, stdShape...)},
	{"scalar_zero", opd(narrowed, stdShape...), scalarOpd(0)},
	{"empty", opd(contig, 3, 0, 5), opd(contig, 5)},
	{"empty_broadcast", opd(contig, 3, 1, 5), opd(contig, 0, 5)},
	{"one", opd(contig, 1), opd(contig, 1, 1)},
	{"rank0", opd(contig), opd(contig)},
}

// pair builds both operands of a binary layout and broadcasts their
// reference values to the result shape.
func (c *tcase) pair(name string, a, b operand, dt dtype.DType, ga, gb gen) (*graph.Tensor, *graph.Tensor, vals, vals) {
	c.t.Helper()
	x, xv := a.build(c, "a_"+name, dt, ga)
	y, yv := b.build(c, "b_"+name, dt, gb)
	shape, ok := broadcastShapes(xv.shape, yv.shape)
	if !ok {
		c.t.Fatalf("test bug: %v and %v do not broadcast", xv.shape, yv.shape)
	}
	return x, y, xv.broadcast(shape), yv.broadcast(shape)
}

func (s *suite) binary(t *testing.T) {
	for _, spec := range binarySpecs {
		t.Run(spec.op.String(), func(t *testing.T) {
			t.Parallel()
			for _, dt := range spec.op.Info().In.List() {
				t.Run(dt.String(), func(t *testing.T) {
					t.Parallel()
					c := s.newCase(t)
					for _, l := range binaryLayouts {
						x, y, xv, yv := c.pair(l.name, l.a, l.b, dt, spec.lhs, spec.rhs)
						out := newVals(dt, xv.shape)
						for k := range out.n() {
							if dt.IsFloat() {
								out.f[k] = spec.f(xv.f[k], yv.f[k])
							} else {
								out.i[k] = wrapInt(dt, spec.i(xv.i[k], yv.i[k]))
							}
						}
						c.expect(l.name, spec.call(x, y), want{v: out, tol: exact, signFree: spec.signFree, args: []vals{xv, yv}})
					}
					c.run()
				})
			}
		})
	}
}

func (s *suite) compare(t *testing.T) {
	for _, spec := range compareSpecs {
		t.Run(spec.op.String(), func(t *testing.T) {
			t.Parallel()
			for _, dt := range spec.op.Info().In.List() {
				t.Run(dt.String(), func(t *testing.T) {
					t.Parallel()
					c := s.newCase(t)
					for _, l := range binaryLayouts {
						x, y, xv, yv := c.pair(l.name, l.a, l.b, dt, discreteMix, discreteMix)
						out := newVals(dtype.U8, xv.shape)
						for k := range out.n() {
							var r bool
							if dt.IsFloat() {
								r = spec.f(xv.f[k], yv.f[k])
							} else {
								r = spec.i(xv.i[k], yv.i[k])
							}
							if r {
								out.i[k] = 1
							}
						}
						c.expect(l.name, spec.call(x, y), want{v: out, tol: exact, args: []vals{xv, yv}})
					}
					c.run()
				})
			}
		})
	}
}

// whereLayouts give the condition and both values their own layouts.
var whereLayouts = []struct {
	name    string
	c, t, f operand
}{
	{"contiguous", opd(contig, stdShape...), opd(contig, stdShape...), opd(contig, stdShape...)},
	{"permuted_broadcast_narrowed", opd(permuted, stdShape...), opd(broadcast, stdShape...), opd(narrowed, stdShape...)},
	{"lead_transposed_scalar", opd(lead, stdShape...), opd(transposed, stdShape...), scalarOpd(-7)},
	{"chain_scalar_offset", opd(chain, stdShape...), scalarOpd(3), opd(offset, stdShape...)},
	{"numpy", opd(contig, 3, 1, 5), opd(contig, 4, 5), opd(contig, 5)},
	{"rank0_values", opd(contig, stdShape...), opd(contig), opd(contig)},
	{"rank0_condition", opd(contig), opd(permuted, stdShape...), opd(contig, stdShape...)},
	{"empty", opd(contig, 0, 5), opd(contig, 0, 5), opd(contig, 5)},
	{"rank0", opd(contig), opd(contig), opd(contig)},
}

func (s *suite) where(t *testing.T) {
	for _, cdt := range ir.IDDTypes.List() {
		for _, dt := range ir.OpWhere.Info().In.List() {
			t.Run(cdt.String()+"/"+dt.String(), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				for _, l := range whereLayouts {
					cond, cv := l.c.build(c, "c_"+l.name, cdt, condGen)
					x, y, xv, yv := c.pair(l.name, l.t, l.f, dt, wideGen, wideGen)
					shape, _ := broadcastShapes(cv.shape, xv.shape)
					cv, xv, yv = cv.broadcast(shape), xv.broadcast(shape), yv.broadcast(shape)
					out := newVals(dt, shape)
					for k := range out.n() {
						if cv.i[k] != 0 {
							out.set(k, xv, k)
						} else {
							out.set(k, yv, k)
						}
					}
					c.expect(l.name, graph.Where(cond, x, y), want{v: out, tol: exact, args: []vals{cv, xv, yv}})
				}
				if cdt == dt {
					// One buffer as both the condition and a value.
					cond, cv := c.input("c_shared", dt, stdShape, condGen)
					y, yv := c.input("f_shared", dt, stdShape, wideGen)
					out := newVals(dt, stdShape)
					for k := range out.n() {
						if cv.i[k] != 0 {
							out.set(k, cv, k)
						} else {
							out.set(k, yv, k)
						}
					}
					c.expect("condition_as_value", graph.Where(cond, cond, y), want{v: out, tol: exact, args: []vals{cv, yv}})
				}
				c.run()
			})
		}
	}
}

// castLayouts are the operand layouts every ordered dtype pair is cast through.
var castLayouts = []struct {
	name string
	opd  operand
}{
	{"contiguous", opd(contig, stdShape...)},
	{"permuted", opd(permuted, stdShape...)},
	{"narrowed", opd(narrowed, stdShape...)},
	{"broadcast", opd(broadcast, stdShape...)},
	{"chain", opd(chain, stdShape...)},
	{"empty", opd(contig, 0, 4)},
	{"rank0", opd(contig)},
}

func (s *suite) cast(t *testing.T) {
	for _, from := range dtype.All {
		for _, to := range dtype.All {
			t.Run(from.String()+"_to_"+to.String(), func(t *testing.T) {
				t.Parallel()
				c := s.newCase(t)
				for _, l := range castLayouts {
					x, xv := l.opd.build(c, "x_"+l.name, from, castSource)
					c.expect(l.name, x.Cast(to), want{v: castVals(xv, to), tol: exact, args: []vals{xv}})
				}
				c.run()
			})
		}
	}
}

// fullValues exercise the conversion of the fill value: rounding to
// f16/bf16 (0.1), overflow (70000, 1e30), saturation and truncation for
// integers (300, −1.5, 1e30), NaN → 0 for integers, and −0.
var fullValues = []float64{0, negZero, 1, 2.5, -1.5, 0.1, 300, 70000, 1e30, -1e30, math.NaN()}

func (s *suite) full(t *testing.T) {
	shapes := [][]int{{2, 3}, {}, {0, 4}, {4100}}
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			fill := func(v float64, shape []int) want {
				out := newVals(dt, shape)
				f, i := scalarTo(dt, v)
				for k := range out.n() {
					if dt.IsFloat() {
						out.f[k] = f
					} else {
						out.i[k] = i
					}
				}
				return want{v: out, tol: exact}
			}
			for vi, v := range fullValues {
				for si, shape := range shapes {
					c.expect(fmt.Sprintf("full_%d_%d", vi, si), c.g.Full(dt, v, shape...), fill(v, shape))
				}
			}
			c.expect("zeros", c.g.Zeros(dt, 3, 5), fill(0, []int{3, 5}))
			c.expect("ones", c.g.Ones(dt, 7), fill(1, []int{7}))
			c.expect("ones_rank0", c.g.Ones(dt), fill(1, nil))
			c.run()
		})
	}
}

// aranges are (start, stop, step) triples; inexact marks steps that are not
// exact in binary, whose elements may differ by an f64 rounding (FMA or not).
var aranges = []struct {
	start, stop, step float64
	inexact           bool
}{
	{0, 10, 1, false},
	{5, -3, -1.5, false},
	{0.5, 3, 0.25, false},
	{-3, 3, 1, false},    // negative values saturate to 0 in u8/u32
	{250, 260, 1, false}, // past 255 saturates in u8
	{0, 5000, 1, false},  // more than one CPU tile: the start index of each tile
	{0, 1, 0.1, true},
	{3, 0, 1, false}, // empty
	{0, 0, 1, false}, // empty
	{1e6, 1e6 + 3e5, 7.5, false},
}

func (s *suite) arange(t *testing.T) {
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			for ai, a := range aranges {
				n := 0
				if q := (a.stop - a.start) / a.step; q > 0 {
					n = int(math.Ceil(q)) // numpy: ceil((stop − start)/step)
				}
				out := newVals(dt, []int{n})
				for k := range n {
					f, i := scalarTo(dt, a.start+float64(k)*a.step)
					if dt.IsFloat() {
						out.f[k] = f
					} else {
						out.i[k] = i
					}
				}
				tol := exact
				if a.inexact {
					tol = arith
				}
				c.expect(fmt.Sprintf("arange_%d", ai), c.g.Arange(dt, a.start, a.stop, a.step), want{v: out, tol: tol})
			}
			// Aranges as operands (fused kernels compute them from the
			// element index): reshaped over two tiles, and broadcast.
			x, xv := c.input("x", dt, []int{50, 100}, wideGen)
			ar := newVals(dt, []int{5000})
			for k := range ar.n() {
				if dt.IsFloat() {
					ar.f[k], _ = scalarTo(dt, float64(k))
				} else {
					_, ar.i[k] = scalarTo(dt, float64(k))
				}
			}
			sp := binarySpecs[0] // add
			sum := func(a, b vals) want {
				out := newVals(dt, a.shape)
				for k := range out.n() {
					if dt.IsFloat() {
						out.f[k] = sp.f(a.f[k], b.f[k])
					} else {
						out.i[k] = wrapInt(dt, sp.i(a.i[k], b.i[k]))
					}
				}
				return want{v: out, tol: exact, args: []vals{a, b}}
			}
			c.expect("arange_reshaped_plus_x", c.g.Arange(dt, 0, 5000, 1).Reshape(50, 100).Add(x), sum(ar.reshape([]int{50, 100}), xv))
			c.expect("arange_broadcast_plus_x", c.g.Arange(dt, 0, 100, 1).Add(x), sum(ar.narrow(0, 0, 100).broadcast([]int{50, 100}), xv))
			c.run()
		})
	}
}

// copy checks contiguous copies: an input as an output, a view as an
// output, Contiguous of a view, the same node under two output names, and
// the edge shapes.
func (s *suite) copy(t *testing.T) {
	for _, dt := range dtype.All {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			c := s.newCase(t)
			g := castSource
			x, xv := c.input("x", dt, stdShape, g)
			c.expect("input", x, want{v: xv, tol: exact})
			p := x.Permute(2, 0, 1)
			pv := xv.permute([]int{2, 0, 1})
			c.expect("view", p, want{v: pv, tol: exact})
			y := p.Contiguous()
			c.expect("contiguous", y, want{v: pv, tol: exact})
			c.expect("contiguous_again", y, want{v: pv, tol: exact})
			c.expect("narrow_of_contiguous", y.Narrow(1, 1, 2), want{v: pv.narrow(1, 1, 2), tol: exact})
			e, ev := c.input("empty", dt, []int{2, 0}, g)
			c.expect("empty", e.T().Contiguous(), want{v: ev.transpose(0, 1), tol: exact})
			r, rv := c.input("rank0", dt, nil, g)
			c.expect("rank0", r, want{v: rv, tol: exact})
			c.expect("rank0_contiguous", r.Contiguous(), want{v: rv, tol: exact})
			c.run()
		})
	}
}

// coverage checks that the group's compiled graphs ran every source, view
// and elementwise op on every dtype its row claims, every ordered pair of distinct dtypes through cast,
// and every condition dtype with every value dtype through where. It is
// skipped when -run selects part of the group.
func (s *suite) coverage(t *testing.T) {
	if t.Failed() || partialRun() {
		t.Skip("part of the group was selected")
	}
	cv := s.cov
	for _, op := range ir.Ops() {
		switch op.Info().Class {
		case ir.ClassSource, ir.ClassView, ir.ClassElementwise:
		default:
			continue // reductions and indexing: other groups' business
		}
		for _, dt := range op.Info().In.List() {
			if !cv.ops[op][dt] {
				t.Errorf("op %s on %v was never run", op, dt)
			}
		}
	}
	for _, a := range dtype.All {
		for _, b := range dtype.All {
			if a != b && !cv.casts[[2]dtype.DType{a, b}] {
				t.Errorf("cast %v → %v was never run", a, b)
			}
		}
	}
	for _, c := range ir.IDDTypes.List() {
		for _, d := range ir.OpWhere.Info().In.List() {
			if !cv.where[[2]dtype.DType{c, d}] {
				t.Errorf("where with a %v condition and %v values was never run", c, d)
			}
		}
	}
}

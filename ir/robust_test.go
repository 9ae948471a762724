package ir

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
)

// TestVerifyRejectsOverflowingShape: the verifier checks every node's shape
// with CheckShape, so a node built around the builder (through the IR) with
// an element count that wraps is reported, naming the node and the shape.
func TestVerifyRejectsOverflowingShape(t *testing.T) {
	g := NewGraph()
	x := g.Intern(OpInput, dtype.F32, []int{1<<62 + 1, 4}, nil, nil, nil, "x")
	g.Outputs = append(g.Outputs, Output{Name: "y", Node: g.Intern(OpExp, dtype.F32, x.Shape, []*Node{x}, nil, nil, "")})
	err := Verify(g)
	if err == nil || !strings.Contains(err.Error(), "ir: node %0 input f32[4611686018427387905 4]: shape [4611686018427387905 4] of f32 is too large") {
		t.Fatalf("Verify: %v", err)
	}
	if err := CheckShape(dtype.U8, []int{0, 1 << 62, 1 << 62}); err == nil {
		t.Errorf("CheckShape: zero dim excused an overflowing product")
	}
	if err := CheckShape(dtype.I64, []int{1 << 20, 1 << 39}); err != nil {
		t.Errorf("CheckShape(i64, 2^59 elements): %v", err)
	}
	if err := CheckShape(dtype.I64, []int{1 << 20, 1 << 40}); err == nil {
		t.Errorf("CheckShape(i64, 2^60 elements = 2^63 bytes): no error")
	}
}

// TestVerifyDetectsCycle: a graph whose node's args are rewired (through
// Graph.IR) to point at a later node forms a cycle; the verifier reports it
// naming the node instead of recursing forever.
func TestVerifyDetectsCycle(t *testing.T) {
	g := NewGraph()
	x := g.Intern(OpInput, dtype.F32, []int{4}, nil, nil, nil, "x")
	a := g.Intern(OpExp, dtype.F32, x.Shape, []*Node{x}, nil, nil, "")
	b := g.Intern(OpSin, dtype.F32, x.Shape, []*Node{a}, nil, nil, "")
	g.Outputs = append(g.Outputs, Output{Name: "y", Node: b})
	a.Args[0] = b // a ← b ← a
	err := Verify(g)
	if err == nil || !strings.Contains(err.Error(), "%1 exp f32[4]") || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("Verify: %v", err)
	}
}

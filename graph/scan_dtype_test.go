package graph

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
)

// TestCumsumRefusesF8: cumsum of an f8e4m3 tensor is a build error naming
// cumsum and the dtype (its scan kernels have no 8-bit float type).
func TestCumsumRefusesF8(t *testing.T) {
	g := New()
	err := g.Input("x", dtype.F8E4M3, 3, 4).Cumsum(1).Err()
	if err == nil || !strings.Contains(err.Error(), "cumsum") || !strings.Contains(err.Error(), "f8e4m3") {
		t.Fatalf("cumsum of f8e4m3: %v", err)
	}
}

package tests

import (
	"context"
	"runtime"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/tensor"
)

// TestIndexSelectReadsOnlySelectedRows (issue 12 B12): selecting one 1 KiB
// row of a 64 MiB u8 table allocates a few KiB, not the table widened to
// int64 (512 MiB); the row, a sentinel row (zeros) and a row of a
// transposed (strided) table come back right.
func TestIndexSelectReadsOnlySelectedRows(t *testing.T) {
	const rows, cols = 65536, 1024
	data := make([]uint8, rows*cols)
	for i := range data {
		data[i] = uint8(i*7 + i/cols)
	}
	table, err := tensor.New(data, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	g := graph.New()
	x := g.Input("x", dtype.U8, rows, cols)
	ids := g.Input("ids", dtype.U32, 2)
	g.Output("y", x.IndexSelect(ids, 0))
	p, err := g.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	idv, _ := tensor.New([]uint32{40000, ^uint32(0)}, 2) // a row, then the sentinel
	e := cpu.New()
	in := map[string]*tensor.Tensor{"x": table, "ids": idv}
	if _, err := p.Run(context.Background(), e, in); err != nil { // warm: arenas, caches
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := p.Run(context.Background(), e, in)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("index_select of one 1 KiB row allocated %d bytes", grew)
	}
	y, _ := tensor.Values[uint8](out["y"])
	for c := range cols {
		if want := data[40000*cols+c]; y[c] != want {
			t.Fatalf("y[0][%d] = %d, want %d", c, y[c], want)
		}
		if y[cols+c] != 0 {
			t.Fatalf("sentinel row: y[1][%d] = %d, want 0", c, y[cols+c])
		}
	}
	// A strided source: rows of the transposed table are its columns.
	g2 := graph.New()
	x2 := g2.Input("x", dtype.U8, rows, cols)
	ids2 := g2.Input("ids", dtype.U32, 1)
	g2.Output("y", x2.T().IndexSelect(ids2, 0))
	p2, err := g2.Compile(graph.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := tensor.New([]uint32{777}, 1)
	out2, err := p2.Run(context.Background(), e, map[string]*tensor.Tensor{"x": table, "ids": id2})
	if err != nil {
		t.Fatal(err)
	}
	y2, _ := tensor.Values[uint8](out2["y"])
	for r := 0; r < rows; r += 997 {
		if want := data[r*cols+777]; y2[r] != want {
			t.Fatalf("transposed: y[0][%d] = %d, want %d", r, y2[r], want)
		}
	}
}

package rocm

import (
	"strings"
	"testing"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/exec"
	"github.com/loomgraph/loom/exec/cpu"
	"github.com/loomgraph/loom/fuse"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/ir"
	"github.com/loomgraph/loom/plan"
)

// windowGraph is elementwise → max pool → + bias → bilinear ×2 → nearest
// → avg pool (count_include_pad off) over f32 [2, 8, 23, 30], fused or not.
func windowGraph(t *testing.T, dt dtype.DType, opts graph.Options) (*graph.Program, *graph.Graph) {
	t.Helper()
	g := graph.New()
	x := g.Input("x", dt, 2, 8, 23, 30)
	b := g.Input("b", dt, 8, 1, 1)
	y := x.Affine(0.5, 0.25).Relu().MaxPool2d(3, 3, graph.PoolStride(2), graph.PoolPadding(1)).Add(b)
	y = y.UpsampleBilinear2dScale(2, 2, false).UpsampleNearest2d(31, 17)
	y = y.AvgPool2d(3, 2, graph.PoolStride(2, 1), graph.PoolPadding(1, 1), graph.CeilMode(true), graph.CountIncludePad(false))
	g.Output("y", y)
	p, err := g.Compile(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, g
}

// TestWindowSupports: pool and upsampling steps are GPU steps; a
// convolution (no GPU kernel yet) is reported unsupported, so the runner
// runs it on the CPU instead of failing.
func TestWindowSupports(t *testing.T) {
	e := compileOnly(t)
	p, _ := windowGraph(t, dtype.F32, graph.Options{})
	windows, fused := 0, 0
	for _, s := range p.Plan().Steps {
		if s.Kernel.WindowNode() != nil {
			windows++
			if err := e.Supports(s.Kernel); err != nil {
				t.Errorf("%s: %v", s.Kernel.Name, err)
			}
		}
		if s.Kernel.IsFusedWindow() {
			fused++
		}
	}
	// The max pool computes affine → relu as its prologue, the bilinear
	// upsampling the bias add (core-fusion); the nearest upsampling and
	// the avg pool read and write memory.
	if windows != 4 || fused != 2 || len(p.Plan().Steps) != 4 {
		t.Errorf("%d window steps (%d fused) of %d, want 4 (2 fused) of 4", windows, fused, len(p.Plan().Steps))
	}
	if pl := p.Placement(e); strings.Contains(pl, "fallback") {
		t.Errorf("a window step falls back:\n%s", pl)
	}

	g := ir.NewGraph()
	x := g.Intern(ir.OpInput, dtype.F32, []int{1, 2, 5, 5}, nil, nil, nil, "x")
	w := g.Intern(ir.OpInput, dtype.F32, []int{3, 2, 3, 3}, nil, nil, nil, "w")
	cp := ir.ConvParams{Rank: 2, Stride: [2]int{1, 1}, Dilation: [2]int{1, 1}, Groups: 1}
	y := g.Intern(ir.OpConv, dtype.F32, []int{1, 3, 3, 3}, []*ir.Node{x, w}, cp.Encode(), nil, "")
	g.Outputs = append(g.Outputs, ir.Output{Name: "y", Node: y})
	st, err := fuse.Compile(g, fuse.Options{Fusion: true})
	if err != nil {
		t.Fatal(err)
	}
	var conv *plan.Kernel
	for _, s := range st.Plan.Steps {
		if s.Kernel.IsWindow() {
			conv = s.Kernel
		}
	}
	if conv == nil {
		t.Fatal("no conv step")
	}
	if err := e.Supports(conv); err != nil {
		t.Errorf("Supports(conv) = %v: convolutions run on the GPU (conv.go)", err)
	}
	if pl := exec.Placement(st.Plan, e); strings.Contains(pl, "fallback") {
		t.Errorf("the conv step falls back:\n%s", pl)
	}
}

// TestGPUWindowSteps runs pools and upsampling between fused elementwise
// kernels on the device, every step on the GPU, and compares with the CPU
// executor bit for bit, fused and unfused, for f32 and bf16.
func TestGPUWindowSteps(t *testing.T) {
	e := openGPU(t)
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		for _, opts := range []graph.Options{{}, {NoFusion: true}} {
			p, g := windowGraph(t, dt, opts)
			if pl := p.Placement(e); strings.Contains(pl, "fallback") {
				t.Errorf("%v: a window step falls back:\n%s", dt, pl)
			}
			in, err := genInputs(g, 11, false)
			if err != nil {
				t.Fatal(err)
			}
			want, err := p.Run(ctx, cpu.New(), in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Run(ctx, e, in)
			if err != nil {
				t.Fatal(err)
			}
			compareTensors(t, dt.String()+" window chain", got["y"], want["y"], exact)
		}
	}
}

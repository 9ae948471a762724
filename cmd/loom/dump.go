package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/graph"
	"github.com/loomgraph/loom/workloads"
)

// The size the dump subcommand compiles the demo graph at: small, since the
// dumps show shapes, not data, and two different dims make a mix-up visible.
const (
	dumpRows = 4
	dumpCols = 8
)

// dumpFormats are the formats graph.Program.Dump accepts, checked before
// compiling so that a typo is a usage error.
var dumpFormats = []string{graph.DumpText, graph.DumpDOT, graph.DumpPlan, graph.DumpLog, graph.DumpBefore, graph.DumpBeforeDOT, "placement"}

// dumpGraphs are the graphs dump can compile, by -graph name.
var dumpGraphs = map[string]func() *graph.Graph{
	"demo": func() *graph.Graph { return demoGraph(dumpRows, dumpCols) },
	// linear: a transformer MLP's first half, gelu(x·wᵀ + b) + x·0.5 over a
	// batch of rows: one fused matmul kernel (the weight read transposed in
	// place, the bias, gelu and residual its epilogue).
	"linear": func() *graph.Graph {
		g := graph.New()
		x := g.Input("x", dtype.F32, 2, dumpRows, dumpCols)
		w := g.Input("w", dtype.F32, dumpCols, dumpCols)
		b := g.Input("b", dtype.F32, dumpCols)
		g.Output("y", graph.Linear(x, w, b).Gelu().Add(x.Affine(0.5, 0)))
		return g
	},
	// conv: a ResNet block's conv → bias → relu → residual add: one
	// kernel, the conv with its epilogue.
	"conv": func() *graph.Graph {
		g := graph.New()
		x := g.Input("x", dtype.F32, 2, 16, dumpRows, dumpRows)
		w := g.Input("w", dtype.F32, 16, 16, 3, 3)
		b := g.Input("b", dtype.F32, 16)
		y := graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}})
		g.Output("y", y.Add(b.Reshape(1, 16, 1, 1)).Relu().Add(x))
		return g
	},
	// cnn: a CNN stage — conv → bias → relu → 3×3/2 max pool → residual →
	// ×2 nearest upsampling → cast: the conv step, one kernel for bias,
	// relu and the pool (the pool computes bias + relu at every element it
	// reads), one for the residual, the upsampling and the cast (the log
	// says why the residual went with the upsampling).
	"cnn": func() *graph.Graph {
		g := graph.New()
		x := g.Input("x", dtype.F32, 2, 8, 2*dumpRows, 2*dumpRows)
		w := g.Input("w", dtype.F32, 8, 8, 3, 3)
		b := g.Input("b", dtype.F32, 1, 8, 1, 1)
		r := g.Input("r", dtype.F32, 2, 8, dumpRows, dumpRows)
		y := graph.Conv2d(x, w, graph.ConvOptions{Padding: []int{1}}).Add(b).Relu()
		y = y.MaxPool2d(3, 3, graph.PoolStride(2), graph.PoolPadding(1)).Add(r)
		g.Output("y", y.UpsampleNearest2dScale(2, 2).Cast(dtype.F16))
		return g
	},
}

func init() {
	// The benchmark workloads that can be built, at a small size.
	for _, w := range workloads.All {
		if w.Build == nil {
			continue
		}
		dumpGraphs[w.ID] = func() *graph.Graph {
			g, _ := w.Build(workloads.Size{Elems: dumpRows * dumpCols, Rows: dumpRows, Cols: dumpCols})
			return g
		}
	}
}

// dumpFlags are the dump subcommand's flags.
type dumpFlags struct {
	fs     *flag.FlagSet
	format *string
	out    *string
	fusion *bool
	graph  *string
	device *string
}

func newDumpFlags(stderr io.Writer) *dumpFlags {
	fs := newFlagSet("dump", stderr)
	return &dumpFlags{
		fs:     fs,
		format: fs.String("format", graph.DumpText, "the dump `format`: text (the compiled graph), dot (Graphviz), plan (steps and buffers) or log (what each compiler pass did)"),
		out:    fs.String("o", "", "write to `FILE` instead of stdout"),
		fusion: fs.Bool("fusion", true, "fuse elementwise chains (false: one step per op; LOOM_FUSION=0 also turns fusion off)"),
		graph:  fs.String("graph", "demo", fmt.Sprintf("the graph to compile, by `name`: demo (the demo graph at %d×%d), linear (a GEMM and its epilogue), conv (a conv and its epilogue), cnn (a conv, a pool and an upsampling with the chains around them) or a workload id (W1, W2, …)", dumpRows, dumpCols)),
		device: fs.String("device", "auto", "for -format placement: the executor whose placement to show ("+devices+")"),
	}
}

// runDump is the dump subcommand.
func runDump(args []string, stdout, stderr io.Writer) int {
	f := newDumpFlags(stderr)
	if status, ok := parseFlags(f.fs, args); !ok {
		return status
	}
	if !slices.Contains(dumpFormats, *f.format) {
		return usageErr(f.fs, "-format %q: want one of %v", *f.format, dumpFormats)
	}
	build, ok := dumpGraphs[*f.graph]
	if !ok {
		return usageErr(f.fs, "-graph %q: want demo or a workload id", *f.graph)
	}
	prog, err := build().Compile(graph.Options{NoFusion: !*f.fusion})
	if err != nil {
		fmt.Fprintf(stderr, "loom dump: %v\n", err)
		return exitFail
	}
	if *f.format == "placement" {
		e, _, err := openExecutor(*f.device)
		if err != nil {
			fmt.Fprintf(stderr, "loom dump: %v\n", err)
			return exitFail
		}
		fmt.Fprint(stdout, prog.Placement(e))
		return exitOK
	}
	if err := writeDump(prog, *f.format, *f.out, stdout); err != nil {
		fmt.Fprintf(stderr, "loom dump: %v\n", err)
		return exitFail
	}
	return exitOK
}

// writeDump writes the dump to path, or to stdout when path is empty. A
// file is written through a buffer and closed before success is reported,
// so that a full disk is an error rather than a truncated file.
func writeDump(prog *graph.Program, format, path string, stdout io.Writer) (err error) {
	if path == "" {
		return prog.Dump(stdout, format)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	w := bufio.NewWriter(f)
	return errors.Join(prog.Dump(w, format), w.Flush())
}

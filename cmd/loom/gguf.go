package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"text/tabwriter"

	"github.com/loomgraph/loom/dtype"
	"github.com/loomgraph/loom/gguf"
	"github.com/loomgraph/loom/quant"
)

type ggufFlags struct {
	fs     *flag.FlagSet
	tensor *string
	typ    *string
}

func newGGUFFlags(w io.Writer) *ggufFlags {
	fs := newFlagSet("gguf", w)
	return &ggufFlags{
		fs:     fs,
		tensor: fs.String("tensor", "", "inspect: print this tensor's values instead of the summary: f32, row-major, one row (the innermost axis) per line"),
		typ:    fs.String("type", "", "quantize: the type to convert f32/f16/bf16 weights to: "+targetNames()+" (case-insensitive)"),
	}
}

// runGGUF runs "loom gguf inspect [-tensor NAME] FILE" and "loom gguf
// quantize -type TYPE IN OUT" (gguf_quantize.go). Flags may come before,
// between or after the file names; each flag belongs to one action.
func runGGUF(args []string, stdout, stderr io.Writer) int {
	f := newGGUFFlags(stderr)
	switch {
	case len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help"):
		f.fs.SetOutput(stdout)
		f.fs.Usage()
		return exitOK
	case len(args) == 0:
		return usageErr(f.fs, "missing action: want inspect or quantize")
	case args[0] != "inspect" && args[0] != "quantize":
		return usageErr(f.fs, "unknown action %q: want inspect or quantize", args[0])
	}
	action := args[0]
	var files []string
	for rest := args[1:]; ; {
		if err := f.fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if f.fs.NArg() == 0 {
			break
		}
		files = append(files, f.fs.Arg(0))
		rest = f.fs.Args()[1:]
	}
	if action == "quantize" {
		switch {
		case *f.tensor != "":
			return usageErr(f.fs, "-tensor is a flag of inspect, not of quantize")
		case *f.typ == "":
			return usageErr(f.fs, "quantize needs -type TYPE")
		case len(files) != 2:
			return usageErr(f.fs, "quantize wants IN and OUT, got %d file names", len(files))
		}
		to, err := parseTarget(*f.typ)
		if err != nil {
			return usageErr(f.fs, "%v", err)
		}
		return runGGUFQuantize(to, files[0], files[1], stdout, stderr)
	}
	if *f.typ != "" {
		return usageErr(f.fs, "-type is a flag of quantize, not of inspect")
	}
	if len(files) != 1 {
		return usageErr(f.fs, "want one FILE, got %d", len(files))
	}
	file, err := gguf.Open(files[0])
	if err != nil {
		fmt.Fprintln(stderr, "loom gguf inspect:", err)
		return exitFail
	}
	defer file.Close()
	out := bufio.NewWriterSize(stdout, 1<<16)
	if *f.tensor != "" {
		err = printTensor(out, file, *f.tensor)
	} else {
		err = printSummary(out, files[0], file)
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintln(stderr, "loom gguf inspect:", err)
		return exitFail
	}
	return exitOK
}

// printSummary prints the header, every metadata entry (key, type, value;
// arrays as their count and first gguf.ArrayPreview elements) and every
// tensor (name, type, dims as stored and row-major, offset in the data
// section and in the file, bytes).
func printSummary(w io.Writer, path string, f *gguf.File) error {
	fmt.Fprintf(w, "file:       %s\nversion:    %d\nsize:       %d bytes\nalignment:  %d\ndata from:  byte %d\n", path, f.Version, f.Size, f.Alignment, f.DataOffset)
	fmt.Fprintf(w, "\nmetadata: %d keys\n", f.Metadata.Len())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  KEY\tTYPE\tVALUE")
	for _, kv := range f.Metadata.KVs() {
		val := kv.Value.String()
		if a, err := kv.Value.AsArray(); err == nil {
			val = fmt.Sprintf("%d elements: %s", a.Len(), val)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", printable(kv.Key), kv.Value.TypeName(), val)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ntensors: %d\n", len(f.Tensors))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tTYPE\tDIMS (STORED)\tSHAPE (ROW-MAJOR)\tOFFSET\tFILE OFFSET\tBYTES")
	for i := range f.Tensors {
		t := &f.Tensors[i]
		fmt.Fprintf(tw, "  %s\t%v\t%v\t%v\t%d\t%d\t%d\n", printable(t.Name), t.Type, t.Dims, t.Shape(), t.Offset, t.FileOffset, t.Size)
	}
	return tw.Flush()
}

// printable returns s as is when it is plain printable ASCII without
// spaces (every real key and tensor name), else quoted.
func printable(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f || s[i] == '"' {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// printTensor prints the named tensor's values as f32, row-major, one row
// of the innermost axis per line, numbers separated by spaces in the
// shortest form that reads back to the same float32.
func printTensor(w io.Writer, f *gguf.File, name string) error {
	t, err := f.Tensor(name)
	if err != nil {
		return err
	}
	b, err := f.TensorData(t)
	if err != nil {
		return err
	}
	vals, err := tensorF32(t.Type, b)
	if err != nil {
		return fmt.Errorf("tensor %q (%v, shape %v): %w", t.Name, t.Type, t.Shape(), err)
	}
	if int64(len(vals)) != t.Elements() {
		return fmt.Errorf("tensor %q (%v, shape %v): %d values for %d elements", t.Name, t.Type, t.Shape(), len(vals), t.Elements())
	}
	row := 1
	if len(t.Dims) > 0 {
		row = int(t.Dims[0])
	}
	var line []byte
	for start := 0; start < len(vals); start += row {
		line = line[:0]
		for i, v := range vals[start : start+row] {
			if i > 0 {
				line = append(line, ' ')
			}
			line = strconv.AppendFloat(line, float64(v), 'g', -1, 32)
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

// tensorF32 widens f32, f16 and bf16 data here (exactly); every other type
// goes to dequantizeF32.
func tensorF32(t quant.Type, b []byte) ([]float32, error) {
	le := binary.LittleEndian
	switch t {
	case quant.F32:
		vals := make([]float32, len(b)/4)
		for i := range vals {
			vals[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return vals, nil
	case quant.F16:
		vals := make([]float32, len(b)/2)
		for i := range vals {
			vals[i] = dtype.Float16(le.Uint16(b[2*i:])).Float32()
		}
		return vals, nil
	case quant.BF16:
		vals := make([]float32, len(b)/2)
		for i := range vals {
			vals[i] = dtype.BFloat16(le.Uint16(b[2*i:])).Float32()
		}
		return vals, nil
	}
	return dequantizeF32(t, b)
}

// dequantizeF32 turns the bytes of a tensor of type t into f32 values,
// row-major, with package quant (GGML's dequantize_row values; an error
// for types Loom has no codec for).
func dequantizeF32(t quant.Type, b []byte) ([]float32, error) {
	tr, ok := t.Traits()
	if !ok || tr.Size == 0 {
		return nil, fmt.Errorf("unknown tensor type %v", t)
	}
	vals := make([]float32, len(b)/tr.Size*tr.Block)
	if err := quant.Dequantize(t, b, vals); err != nil {
		return nil, err
	}
	return vals, nil
}

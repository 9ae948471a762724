package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1 // the command ran and failed (or the demo found a mismatch)
	exitUsage = 2 // bad subcommand, flag or flag value
)

// command is one subcommand. run gets the arguments after the subcommand's
// name; it parses them with its own FlagSet, built by flags so that help can
// print the flags without running anything.
type command struct {
	name    string
	summary string
	args    string // synopsis of the arguments, for usage lines
	flags   func(stderr io.Writer) *flag.FlagSet
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is filled in init: help refers to the table, so it cannot be a
// plain initialised variable (initialisation cycle).
var commands []*command

func init() {
	commands = []*command{
		{name: "demo", summary: "build, compile, run and check the demo graph; print timings", args: "[-n ROWS] [-m COLS] [-device auto|cpu] [-seed N]", flags: func(w io.Writer) *flag.FlagSet { return newDemoFlags(w).fs }, run: runDemo},
		{name: "dump", summary: "compile the demo graph (small size) and write a dump of it", args: "[-format text|dot|plan|log] [-o FILE] [-fusion=true|false] [-graph demo]", flags: func(w io.Writer) *flag.FlagSet { return newDumpFlags(w).fs }, run: runDump},
		{name: "bench", summary: "run the benchmark workloads fused and unfused; print a table (and JSON)", args: "[-device auto|cpu|rocm] [-workloads W1,W2,...] [-elems N] [-rows R -cols C] [-conv-n N -conv-c C -conv-hw HW] [-reps N] [-json FILE] [-reruns N] [-model PATH [-dtype bf16]] [-prompt-len N -decode-steps N]", flags: func(w io.Writer) *flag.FlagSet { return newBenchFlags(w).fs }, run: runBench},
		{name: "kernels", summary: "compile every kernel Loom can produce for GPU targets; print a table and N compiled, M failed", args: "[-arch gfx90a,gfx1030,sm_90] [-v] [-only TEXT]", flags: func(w io.Writer) *flag.FlagSet { return newKernelsFlags(w).fs }, run: runKernels},
		{name: "gguf", summary: "inspect a GGUF file (every metadata key and tensor, or one tensor's values); quantize a GGUF or safetensors model", args: "inspect [-tensor NAME] FILE | quantize -type TYPE IN OUT", flags: func(w io.Writer) *flag.FlagSet { return newGGUFFlags(w).fs }, run: runGGUF},
		{name: "generate", summary: "run a llama-family model (GGUF, or safetensors + config.json): generate from a prompt, print the text or ids and the tokens/s", args: "-model PATH (-prompt TEXT | -ids 1,17,42) [-n N] [-temp 0] [-top-k K] [-top-p P] [-seed S] [-device auto|cpu|rocm] [-print-ids] [-max-seq N] [-dtype f32|f16|bf16] [-tp N]", flags: func(w io.Writer) *flag.FlagSet { return newGenerateFlags(w).fs }, run: runGenerate},
		{name: "help", summary: "list the subcommands, or show one subcommand's flags", args: "[SUBCOMMAND]", run: runHelp},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one loom command line (without the program name) and returns
// the process exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "loom: no subcommand")
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	if name == "-h" || name == "-help" || name == "--help" {
		name = "help"
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "loom: unknown subcommand %q\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return c.run(args[1:], stdout, stderr)
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// usage lists the subcommands.
func usage(w io.Writer) {
	fmt.Fprintln(w, "Loom: lazy tensor graphs compiled into fused elementwise kernels.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "\tloom <subcommand> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Subcommands:")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "loom help <subcommand>" for its flags.`)
}

// runHelp prints the subcommand list to stdout (help was asked for, so it is
// output, not an error), or one subcommand's synopsis and flags.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch len(args) {
	case 0:
		usage(stdout)
		return exitOK
	case 1:
		c := lookup(args[0])
		if c == nil {
			fmt.Fprintf(stderr, "loom help: unknown subcommand %q\n", args[0])
			usage(stderr)
			return exitUsage
		}
		fmt.Fprintf(stdout, "usage: loom %s %s\n\n%s.\n", c.name, c.args, c.summary)
		if c.flags != nil {
			fs := c.flags(stdout)
			fmt.Fprintln(stdout)
			fmt.Fprintln(stdout, "Flags:")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return exitOK
	}
	fmt.Fprintln(stderr, "usage: loom help [SUBCOMMAND]")
	return exitUsage
}

// newFlagSet returns a FlagSet that reports errors instead of exiting and
// prints its usage (synopsis plus flags) to stderr.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("loom "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		c := lookup(name)
		if c != nil {
			fmt.Fprintf(fs.Output(), "usage: loom %s %s\n\n%s.\n\nFlags:\n", c.name, c.args, c.summary)
		}
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and turns the outcome into an exit status: -h is a
// successful request for help (as with flag.ExitOnError), other errors are
// usage errors (the FlagSet has already printed the message and usage), and
// positional arguments are refused since no subcommand takes any.
func parseFlags(fs *flag.FlagSet, args []string) (status int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage, false
	}
	return exitOK, true
}

// usageErr reports a bad flag value: the message, then the subcommand's usage.
func usageErr(fs *flag.FlagSet, format string, a ...any) int {
	fmt.Fprintf(fs.Output(), "%s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
	fs.Usage()
	return exitUsage
}

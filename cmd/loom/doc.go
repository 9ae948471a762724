// Command loom is Loom's command line: it runs a self-checking demo of the
// engine and dumps what the compiler made of a graph.
//
// Usage:
//
//	loom demo [-n ROWS] [-m COLS] [-device auto|cpu] [-seed N]
//	loom dump [-format text|dot|plan|log] [-o FILE] [-fusion=true|false] [-graph demo|linear|W1…]
//	loom gguf inspect [-tensor NAME] FILE
//	loom generate -model PATH (-prompt TEXT | -ids 1,17,42) [-n N] [-temp 0] [-top-k K] [-top-p P] [-seed S] [-device auto|cpu|rocm] [-print-ids]
//	loom help [SUBCOMMAND]
//
// demo builds one elementwise graph,
//
//	out = where(y > 0, a, -a)   with   a = silu(f32(x))·2 + 1,   x f16, y f32,
//
// fills its inputs with random non-zero values, compiles it, runs it on the
// best executor available, and checks every output element against a direct
// float64 computation in plain Go. It prints the plan, compile and run times
// and the largest error, then "OK"; it exits 1 on any mismatch, so CI can
// run it as a test of the whole stack.
//
// dump compiles the same graph at a small size and writes one of the
// program dumps (graph.Program.Dump): the compiled graph as text or Graphviz
// DOT, the execution plan, or the log of what each compiler pass did.
//
// gguf inspect reads a GGUF file (package gguf; the file is memory-mapped)
// and prints its header, every metadata key with its type and value
// (strings quoted; arrays as their length and first 8 elements), and every
// tensor's name, type, dims as stored (innermost first) and row-major,
// offset in the data section and in the file, and size in bytes. With
// -tensor NAME it prints that tensor's values instead, as f32, row-major,
// one row of the innermost axis per line: f32, f16 and bf16 are widened
// exactly; the GGML block formats are dequantized by package quant.
//
// generate loads a llama-family model (package model: a GGUF file, or a
// directory with config.json and *.safetensors; -max-seq and -dtype set
// the KV cache's length and the compute dtype), encodes -prompt with the
// model's tokenizer (or takes -ids), and generates up to -n tokens: greedy
// at -temp 0, else sampled with -top-k, -top-p and -seed. The decoded text
// streams to stdout as it is generated (stop tokens are not printed),
// then a line with the prompt and decode tokens/s; with -print-ids stdout
// gets only the generated ids, space-separated on one line (stop token
// included), and the rates go to stderr. The executor and a summary of
// the model (size on the device, quantized weights, load time) go to
// stderr.
//
// Exit status: 0 on success, 1 when a command fails (including a demo
// mismatch), 2 on a usage error (unknown subcommand, bad flag or value).
//
// Decisions:
//   - Subcommands use only the standard flag package, one FlagSet each, so
//     every subcommand documents its own flags (loom help demo, loom demo -h).
//   - main only wires os.Args and the standard streams into run; everything
//     else writes to the io.Writers it is given, so tests drive the real
//     command in-process.
//   - The executor is chosen in one small function, openExecutor
//     (executor.go). Only the CPU executor exists today; "auto" says so
//     rather than pretending to have looked for a GPU. A GPU executor is
//     added there when it exists.
//   - The demo prints its random seed and takes -seed, so a failing run can
//     be repeated exactly.
package main

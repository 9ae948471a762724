// Command loom is Loom's command line: it runs a self-checking demo of the
// engine and dumps what the compiler made of a graph.
//
// Usage:
//
//	loom demo [-n ROWS] [-m COLS] [-device auto|cpu] [-seed N]
//	loom dump [-format text|dot|plan|log] [-o FILE] [-fusion=true|false] [-graph demo|linear|W1…]
//	loom gguf inspect [-tensor NAME] FILE
//	loom gguf quantize -type TYPE IN OUT
//	loom generate -model PATH (-prompt TEXT | -ids 1,17,42) [-n N] [-temp 0] [-top-k K] [-top-p P] [-seed S] [-device auto|cpu|rocm] [-print-ids] [-profile] [-tp N]
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
// gguf quantize converts a model's weights to one GGML type and writes a
// GGUF file. IN is a GGUF file or a safetensors file, told apart by
// content (GGUF's magic; when a file is neither, a .gguf or .safetensors
// name picks the reader whose error is reported), or a directory of
// safetensors shards (safetensors.OpenDir, checked against
// model.safetensors.index.json when there is one). TYPE
// is q4_0, q4_1, q5_0, q5_1, q8_0, q2_k, q3_k, q4_k, q5_k, q6_k, or f32,
// f16 or bf16 for a plain conversion, in any case; the activation formats
// q8_1 and q8_k are refused. q4_k_m, q5_k_m, q3_k_s, q3_k_m, q3_k_l,
// q4_k_s and q5_k_s are llama.cpp's mixtures
// (gguf_mixture.go): each tensor's type chosen as llama.cpp's quantizer
// chooses it for a dense llama GGUF file (Q6_K for the output and for
// some layers' attn_v and ffn_down, the base type elsewhere, its
// fallbacks for rows that are not whole blocks); other inputs are refused. Following llama.cpp's quantizer
// (src/llama-quant.cpp), an f32, f16 or bf16 tensor is converted when its
// rank (as ggml counts it: outer dims of 1 do not count) is at least 2,
// its name ends in "weight" and is not one llama.cpp keeps by name (norms,
// expert routers ffn_gate_inp, position and token-type embeddings,
// ssm_conv1d, attn_rel_b), and its rows (the innermost dim) are a whole
// number of TYPE's blocks; every other tensor is copied as it is, its
// line saying why: already-quantized, integer and f64 tensors are copied
// unchanged. Bytes are package quant's Quantize of the values widened to
// f32, bit-exact with GGML's reference quantizer. One line per tensor as
// it is written (name, from-type → to-type, shape, bytes before → after,
// and "kept: reason"), then the totals and the compression ratio of the
// tensor data.
//
// Metadata: a GGUF input's entries are copied in order;
// general.quantization_version (uint32 2, GGML_QNT_VERSION) and
// general.file_type (uint32 llama_ftype: 2 Q4_0, 3 Q4_1, 8 Q5_0, 9 Q5_1,
// 7 Q8_0, 10 Q2_K, 11 Q3_K_S, 14 Q4_K_S, 16 Q5_K_S, 18 Q6_K, 0 F32,
// 1 F16, 32 BF16) are overwritten where they are or added at the end;
// general.alignment is kept (written as uint32; one ggml could not load,
// not a power of two, is dropped with a note). Safetensors names and
// row-major shapes go through unchanged; their __metadata__ entries are
// copied as strings under "safetensors.metadata." (the first shard's value
// where shards disagree, with a note); F64 and I8…I64 tensors are copied
// as GGUF's f64 and i8…i64; U8…U64, BOOL and F8 tensors are refused, since
// GGUF has no type holding them. No general.architecture is invented for a
// safetensors input: the names are Hugging Face's, not llama.cpp's, so the
// output is for Loom, not for llama.cpp's loader.
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
// stderr. On the GPU, -profile adds to stderr the device time of the
// run's steps by kind (ops and shapes: the 16 layers' gate products add
// up under one line), the slowest first. -tp N splits the model over N
// ranks (tensor parallel: model.Options.Comm): N GPUs with -device rocm
// (one executor each, NCCL or RCCL), N CPU executors sharing the cores
// with -device cpu, and with auto the GPUs when there are N; every rank
// generates alike and rank 0 prints.
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
//   - gguf quantize with a single type writes every quantized tensor in
//     it, like llama.cpp's quantize --pure, and a tensor whose rows do not
//     fit the blocks is kept in its float type rather than sent to
//     llama.cpp's fallback type (Q4_K → Q5_0, …); the k-quant file types
//     recorded are therefore the _S ones, which llama.cpp describes as one
//     type for all tensors. The mixtures (q4_k_m, q5_k_m, q3_k_s,
//     q3_k_m, q3_k_l, q4_k_s, q5_k_s) follow llama.cpp's per-tensor rules
//     and fallbacks for llama files (Q6_K for the output, more bits for
//     some attn_v/ffn_down/attn_output) and record their own ids.
//   - gguf quantize streams: the input is memory-mapped, tensors are
//     converted one at a time as gguf.Writer writes them
//     (AddTensorFunc), rows shared among GOMAXPROCS goroutines in chunks
//     of 64K values, so the memory held is one tensor's output plus a
//     chunk per goroutine. The file is written beside OUT under a
//     temporary name and renamed when complete; OUT naming the input is
//     refused.
package main

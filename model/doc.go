// Package model runs llama-family decoders (Llama 2 and 3, Mistral-style
// grouped-query attention, SmolLM- and Qwen2-style variants that differ only
// in their config) on Loom's graph API, with a KV cache and generation.
//
//	m, err := model.Load("model.gguf", model.Options{Executor: e}) // or a safetensors directory
//	tok, err := m.Tokenizer()
//	g, err := m.Generate(ctx, tok.Encode("Once upon a time", true), model.GenerateOptions{
//		MaxTokens: 64, Temperature: 0.7, TopP: 0.9, Seed: 1,
//		OnToken: func(id int) bool { fmt.Print(stream.Add(id)); return true },
//	})
//
// # Loading
//
// Load reads a GGUF file (general.architecture "llama": llama.* metadata,
// llama.cpp's tensor names, f32/f16/bf16 or GGML block-format weights) or a
// directory with config.json and *.safetensors (Hugging Face names; f32,
// f16 or bf16; model_type llama, mistral or qwen2). Every tensor is checked
// against the config — present, the right shape, a format Loom computes
// with — before anything is converted or uploaded; all problems are
// reported in one error naming each tensor, and nothing stays loaded.
// Unknown extra tensors are ignored. Biases on the projections (Qwen2,
// Llama's attention_bias and mlp_bias) are used where the checkpoint has
// them.
//
// Float weights are converted to the compute dtype (Options.DType; by
// default the checkpoint's); block-format weights stay as stored, raw GGUF
// rows that graph.QInput declares and QMatmul and Embedding read. Then
// every weight goes to the executor once: on one that keeps tensors
// (exec.Resident, the GPU) each is uploaded and wrapped as a resident
// tensor that every run reads without a copy; on the CPU the converted
// host tensor is the value (its uploads alias host memory).
//
// llama.cpp's converter permutes the rows of Q and K (within each head, the
// two halves that rotate_half pairs become adjacent rows, for its
// interleaved rope). Load undoes the permutation (whole rows, so quantized
// rows move as well), and both checkpoints run the same graph: the same f32
// weights give bit-identical logits from either file. Where a layer's Q, K
// and V stack into one product without biases, load then interleaves each
// query and key head's halves again (interleaveHalves: llama.cpp's order)
// and the graph rotates with the interleaved RopeIThdHeads, which joins
// the product as its pair epilogue (a kernel less a layer in a decode
// step); query·key products are unchanged by the common permutation, and
// the cache holds the keys so permuted. Otherwise the graph uses the
// half-split Rope. Llama 3.1 rope scaling comes from config.json (rope_scaling
// or transformers 5's rope_parameters) or, in GGUF, as the rope_freqs.weight
// factors.
//
// # Programs
//
// Two compiled programs share the weights and the cache (forward.go):
// prefill (B prompts of T tokens from position 0; compiled per (B, T) and
// kept) and decode (one token per sequence; the position is an input, so
// one program serves every position of an attention window: see below).
// The KV cache is per layer one tensor [2, B, KVHeads, MaxSeqLen, HeadDim]
// (keys, then values) in the compute dtype; each run takes it as inputs and returns
// the updated cache as outputs, which the Session keeps on the executor
// for the next run. Decode writes the new key and value with one Scatter at
// the position, picks the rope rows with IndexSelect, and masks t > pos
// with a comparison against the position input. Attention is grouped-query
// without repeating keys or values (the query heads of a group are rows of
// one product), softmax in float32. Numerics follow transformers'
// LlamaForCausalLM (eager attention) op for op; logits are float32.
//
// Cost of the cache update: the Session hands the cache to each decode run
// with exec.Donate, so the Scatter writes its one position in place and
// the output is the input's memory — on the GPU (an exec.Donor) and on the
// CPU (host memory: the output tensor shares the donated tensor's bytes):
// 2·Layers·B·KVHeads·HeadDim elements written a step, where a new buffer
// would copy the whole cache (64 MiB a token for Llama 3.2 1B in bf16 at
// MaxSeqLen 2048, measured at 0.29 ms of a 2.6 ms step on an H200; on the
// CPU the tiny model's decode went from 331–341 to 425–544 tokens/s on 2
// cores when it stopped allocating, zeroing and filling a new cache).
//
// Fused projections: a layer's query, key and value matrices, and its gate
// and up matrices, stored alike (all float, or one block format), are
// stacked into one weight each at load time (load.go, fusions), so a
// decode step runs one product for q/k/v and one for gate/up (the parts
// split off as views) instead of five. Where the values are stored in
// another format, the queries and keys are still one product (attn_qk);
// where the parts are Q4_0/Q5_0 beside a Q8_0 (llama.cpp's k-quant files of
// SmolLM-shaped models, whose 576-value rows are not whole super-blocks),
// the others are widened to Q8_0 without loss (quant.WidenToQ8_0) and
// the three stay one product.
//
// Cost of attention: a decode program attends over the cache's first W
// positions (a narrowed view, no copy), W the smallest of 16, 24, 32, 48,
// 64, 96, … (the powers of two and the sizes halfway between them) that
// holds the positions, capped at MaxSeqLen; each W is a program of its own
// (at most 2·log₂(MaxSeqLen/16) + 1), compiled on first use (Generate
// compiles those it will need before its clock starts).
//
// Cost of launching: a decode step of the 1B shape is ~203 kernels. Each
// decode run is made under exec.WithReplay, so an executor that records
// (the GPU: CUDA/HIP graphs, exec/rocm/replay.go) launches the whole step
// with one call from the second step of a session on; the session frees a
// step's outputs in the reverse of the runner's order so that the next
// step's run gets the same memory and replays. Options.NoReplay (or
// LOOM_REPLAY=0) runs kernel by kernel. On an H200, bf16 1B-shaped decode:
// 329 tokens/s step by step, 493 with replays, 716 with replays and the
// greedy token picked on the device (below), all at batch 1.
//
// # Generation
//
// Generate runs one prefill, then one decode step per token: greedy at
// temperature 0 (decode programs also output the argmax and the largest
// logit, so a greedy step copies 8 bytes to the host instead of the
// logits, and a NaN logit is still an error); otherwise temperature, top-k and top-p sampling (Hugging
// Face's order) in float64 on the host from the float32 logits, with a
// seeded PCG generator (Sampler). It stops at MaxTokens, at a stop token
// (by default the tokenizer's: EOS, GGUF's end-of-turn tokens, or
// generation_config.json's eos_token_id), when OnToken returns false, or
// when the sequence fills MaxSeqLen; a prompt longer than MaxSeqLen is an
// error. Generation reports the prompt and decode rates; compile time is
// kept apart. Session is the lower-level API: Prefill, PrefillAll (logits
// of every position), Decode, for batches of equal-length sequences.
//
// Greedy steps are pipelined (exec.Start): decode programs also output
// pos + 1, so a step's token and position are the next step's inputs on
// the executor, and the next step is queued before the host reads the
// token. The host's time per token (reading the token, the callback, the
// stop checks, binding the next run: ~0.1–0.2 ms on the GPU machine) then
// overlaps the device's instead of leaving it idle; the one step queued
// past a stop token or a callback's stop is computed and dropped.
// Options.NoPipeline (or LOOM_PIPELINE=0) runs them one after the other:
// on an H200, bf16 1B-shaped greedy decode ran at 992 tokens/s pipelined
// and 874 not (median steps 0.954 and 1.119 ms, one run). Sampled steps
// need the logits on the host and are not pipelined.
//
// The tokenizer comes from the GGUF tokenizer.ggml.* metadata or from
// tokenizer.json beside the safetensors (package tokenizer).
//
// # Test models and references
//
// RandomWeights draws seeded weights for a Config; WriteHF writes them as a
// transformers checkpoint and WriteGGUF as llama.cpp's converter would
// (optionally quantized). The tests check every logit against a float64
// forward pass written with plain loops (ref_test.go): prefill, decode
// steps, batches, bf16, GGUF and quantized files; and, where
// scripts/llama_refs.py has produced them on the GPU machine, against
// transformers itself (testdata/llama_*_ref.json, hfref_test.go).
//
// # Not supported
//
// Sliding-window attention (a model with a window loads only with
// MaxSeqLen ≤ the window, where full attention computes the same), partial
// rotary embeddings, rope scaling other
// than linear and llama3 (yarn, dynamic, longrope), other architectures
// (GGUF "qwen2", Gemma, Phi, MoE), prompts of different lengths in one
// batch, continuing a sequence with a second prefill (a Session's Prefill
// starts over), and a flash-attention kernel: decode attends over its
// window of the cache with the generic kernels.
package model

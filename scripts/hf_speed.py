#!/usr/bin/env python3
"""Times Hugging Face transformers' LlamaForCausalLM on the Llama-3.2-1B
shape (the shape of Loom's model.Llama1BConfig), bf16, batch 1, on the GPU:
the peer of issue 16's speed targets, to run in the same device call as
Loom's TestGPUSpeed1B (scripts/gpu-measure decode hf).

  prefill  one forward pass over a 512-token prompt (use_cache=True), the
           median of 5 after 2 warm-ups, synchronised;
  decode   model.generate(greedy, 128 new tokens, eos disabled) after the
           same 512-token prompt, eager attention, minus the prefill time:
           new tokens / (generate time - prefill time).

Weights are random (torch.manual_seed(1)): speed does not depend on them.
No network is used. Usage: python3 scripts/hf_speed.py [OUT.json]
"""
import json
import statistics
import sys
import time

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    torch.manual_seed(1)
    cfg = LlamaConfig(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192,
        num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
        head_dim=64, max_position_embeddings=131072, rms_norm_eps=1e-5,
        rope_theta=500000.0, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
        attn_implementation="eager")
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 512), device="cuda")

    def sync_time(f):
        torch.cuda.synchronize()
        t = time.perf_counter()
        f()
        torch.cuda.synchronize()
        return time.perf_counter() - t

    with torch.no_grad():
        for _ in range(2):
            model(ids, use_cache=True)
        prefill = statistics.median(sync_time(lambda: model(ids, use_cache=True)) for _ in range(5))
        new = 128

        def gen():
            model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                           eos_token_id=None, pad_token_id=0)

        gen()
        total = statistics.median(sync_time(gen) for _ in range(3))
    decode = new / (total - prefill)
    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(), "prefill_512_ms": prefill * 1e3,
           "prefill_tokens_per_s": 512 / prefill, "decode_tokens_per_s": decode,
           "generate_128_s": total}
    print(f"transformers {transformers.__version__} eager bf16 1B-shaped: prefill 512 tokens "
          f"{prefill*1e3:.2f} ms; decode {decode:.1f} tokens/s (generate 128 tokens {total:.3f} s)")
    if len(sys.argv) > 1:
        json.dump(out, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()

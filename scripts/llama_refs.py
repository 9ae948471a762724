#!/usr/bin/env python3
"""Regenerates model/testdata/llama_<name>_ref.json: what Hugging Face
transformers' LlamaForCausalLM (eager attention) computes for Loom's
seeded random test models, which package model's tests compare against.

Run on the GPU machine (PyTorch 2.11, transformers 5.17; no network is
used), from the repository root, in two steps:

    # 1. Write the models: config.json + model.safetensors + loom.json per
    #    model (tiny: 13 MB f32; llama1b: the Llama-3.2-1B shape, 2.5 GB bf16).
    LOOM_LLAMA_REFS_OUT=/tmp/llama-refs .gpu/model.test -test.run TestWriteReferenceModels
    #    (or, where Go is installed: LOOM_LLAMA_REFS_OUT=/tmp/llama-refs go test ./model -run TestWriteReferenceModels)

    # 2. Compute the references into model/testdata/.
    python3 scripts/llama_refs.py /tmp/llama-refs

    # Then check them: .gpu/model.test -test.run 'HFReference' -test.v
    # (the tiny reference also runs in CI, on the CPU).

For each model directory (it holds loom.json: name, seed, dtype and the
SHA-256 of model.safetensors, which this script checks and copies into the
JSON, so the Go test knows it regenerated the very weights used here) the
script runs the model twice: in the dtype it is stored in and in the other
of float32 / bfloat16 (tiny: f32 then the weights rounded to bf16; llama1b:
bf16 then upcast to f32, exactly). Each run records

  prompt_logits  the logits of PROMPT at PROMPT_POSITIONS;
  greedy         64 greedy tokens after PROMPT (argmax, first index on ties),
                 decoded one token at a time with the KV cache;
  step_logits    the logits of decode steps STEP_POSITIONS (step s: after
                 feeding greedy[s] at position len(PROMPT) + s).

Logits are stored at every id for vocabularies up to 4096, else at every
97th id plus the 16 largest of that row (a few hundred KB in all), with 8
significant digits. The JSON also has the rotary inverse frequencies the
model used (inv_freq: the llama3 scaling of the 1B config is checked
against Loom's through them) and the library versions and device.

Float32 runs disable TF32 and reduced-precision reductions so that the
reference is plain float32 (and bf16 GEMMs accumulate in float32).
"""

import argparse
import hashlib
import json
import math
import os
import sys

import torch
import transformers
from transformers import LlamaForCausalLM

# The prompt: 32 fixed ids below 1000 (valid in both vocabularies).
PROMPT = [484, 189, 748, 595, 314, 208, 911, 743, 422, 778, 736, 779, 274, 548, 254, 654,
          835, 755, 513, 365, 428, 542, 748, 633, 989, 226, 319, 559, 723, 341, 534, 79]
GREEDY = 64
PROMPT_POSITIONS = [0, 1, 15, 31]
STEP_POSITIONS = [0, 1, 31, 62]
FULL_VOCAB = 4096   # store every logit up to this vocabulary size
STRIDE = 97         # else every STRIDE-th id
TOP = 16            # plus the TOP largest


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def short(x):
    return float(f"{float(x):.8g}")


def row(pos, logits):
    """One position's logits (a 1-D float32 tensor) in the JSON's form."""
    v = logits.detach().float().cpu()
    n = v.shape[0]
    if n <= FULL_VOCAB:
        return {"pos": pos, "ids": [], "values": [short(x) for x in v.tolist()]}
    ids = set(range(0, n, STRIDE)) | set(torch.topk(v, TOP).indices.tolist())
    ids = sorted(ids)
    return {"pos": pos, "ids": ids, "values": [short(v[i]) for i in ids]}


def expected_inv_freq(cfg):
    """The rotary inverse frequencies config.json asks for, in float64:
    base^(-2i/d), then linear or llama3 scaling (Llama 3.1's definition)."""
    d = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    base = cfg.get("rope_theta", 10000.0)
    inv = [base ** (-(2 * i) / d) for i in range(d // 2)]
    sc = cfg.get("rope_scaling")
    if sc:
        typ = sc.get("rope_type", sc.get("type"))
        if typ == "linear":
            inv = [f / sc["factor"] for f in inv]
        elif typ == "llama3":
            old = sc["original_max_position_embeddings"]
            lo, hi, factor = sc["low_freq_factor"], sc["high_freq_factor"], sc["factor"]
            out = []
            for f in inv:
                wave = 2 * math.pi / f
                if wave < old / hi:
                    out.append(f)
                elif wave > old / lo:
                    out.append(f / factor)
                else:
                    s = (old / wave - lo) / (hi - lo)
                    out.append((1 - s) * f / factor + s * f)
            inv = out
        else:
            sys.exit(f"llama_refs: rope scaling {typ!r} is not one Loom's tests use")
    return inv


def load(path, dtype, device):
    kw = dict(attn_implementation="eager")
    try:
        model = LlamaForCausalLM.from_pretrained(path, dtype=dtype, **kw)
    except TypeError:  # transformers before 4.56 named it torch_dtype
        model = LlamaForCausalLM.from_pretrained(path, torch_dtype=dtype, **kw)
    return model.to(device).eval()


def check_model(model, cfg, name):
    """Fail loudly if transformers read config.json differently from what
    Loom wrote (a renamed key would otherwise give a silently different
    reference)."""
    c = model.config
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "vocab_size"):
        if getattr(c, key) != cfg[key]:
            sys.exit(f"llama_refs: {name}: config {key} is {getattr(c, key)}, config.json says {cfg[key]}")
    if bool(c.tie_word_embeddings) != bool(cfg["tie_word_embeddings"]):
        sys.exit(f"llama_refs: {name}: tie_word_embeddings read as {c.tie_word_embeddings}")
    rot = model.model.rotary_emb
    scaling = float(getattr(rot, "attention_scaling", 1.0))
    if scaling != 1.0:
        sys.exit(f"llama_refs: {name}: attention_scaling {scaling}, want 1")
    if rot.inv_freq.dtype != torch.float32:
        # The frequencies are compared (and recorded) where the buffer kept
        # its float32: a bf16 copy would fail the check by its rounding.
        print(f"{name}: inv_freq is {rot.inv_freq.dtype}; not checked in this run", file=sys.stderr)
        return None
    got = rot.inv_freq.detach().double().cpu().tolist()
    want = expected_inv_freq(cfg)
    for i, (g, w) in enumerate(zip(got, want)):
        if abs(g - w) > 1e-5 * w:
            sys.exit(f"llama_refs: {name}: inv_freq[{i}] is {g}, config.json implies {w}: the rope config was misread")
    return [float(x) for x in got]


@torch.no_grad()
def run(model, device):
    ids = torch.tensor([PROMPT], device=device)
    out = model(input_ids=ids, use_cache=True)
    logits = out.logits[0]
    prompt_rows = [row(p, logits[p]) for p in PROMPT_POSITIONS]
    past = out.past_key_values
    nxt = int(torch.argmax(logits[-1].float()))
    greedy, steps = [nxt], []
    for s in range(GREEDY - 1):
        out = model(input_ids=torch.tensor([[nxt]], device=device), past_key_values=past, use_cache=True)
        past = out.past_key_values
        step = out.logits[0, -1].float()
        if s in STEP_POSITIONS:
            steps.append(row(s, step))
        nxt = int(torch.argmax(step))
        greedy.append(nxt)
    return {"prompt_logits": prompt_rows, "greedy": greedy, "step_logits": steps}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the directory TestWriteReferenceModels wrote")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model", "testdata"))
    ap.add_argument("--only", help="one model name (tiny, llama1b)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.set_float32_matmul_precision("highest")
    device = torch.device(args.device)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"

    os.makedirs(args.out, exist_ok=True)
    names = sorted(n for n in os.listdir(args.dir) if os.path.isfile(os.path.join(args.dir, n, "loom.json")))
    if args.only:
        names = [n for n in names if n == args.only]
    if not names:
        sys.exit(f"llama_refs: no model directories with loom.json under {args.dir}")
    for name in names:
        path = os.path.join(args.dir, name)
        with open(os.path.join(path, "loom.json")) as f:
            info = json.load(f)
        with open(os.path.join(path, "config.json")) as f:
            cfg = json.load(f)
        digest = sha256(os.path.join(path, "model.safetensors"))
        if digest != info["sha256"]:
            sys.exit(f"llama_refs: {name}: model.safetensors has SHA-256 {digest}, loom.json says {info['sha256']}")
        stored = info["dtype"]
        order = [stored, "bfloat16" if stored == "float32" else "float32"]
        result = {"name": info["name"], "sha256": digest, "torch": torch.__version__,
                  "transformers": transformers.__version__, "device": device_name, "prompt": PROMPT, "runs": []}
        for dt in order:
            model = load(path, getattr(torch, dt), device)
            inv = check_model(model, cfg, name)
            if inv is not None:
                result.setdefault("inv_freq", inv)
            r = run(model, device)
            r = {"dtype": dt, **r}
            result["runs"].append(r)
            print(f"{name} {dt}: greedy {r['greedy'][:8]}...", file=sys.stderr)
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()
        out = os.path.join(args.out, f"llama_{info['name']}_ref.json")
        with open(out, "w") as f:
            json.dump(result, f, separators=(",", ":"))
            f.write("\n")
        print(f"wrote {out} ({os.path.getsize(out)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()

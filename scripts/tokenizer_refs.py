#!/usr/bin/env python3
"""Regenerates tokenizer/testdata: reference tokenizers and the ids the
Hugging Face stack gives for a list of texts.

Run on a machine with `tokenizers` and `transformers` (the GPU machine has
transformers 5.17); no network is used. From the repository root:

    python3 scripts/tokenizer_refs.py            # writes tokenizer/testdata/
    python3 scripts/tokenizer_refs.py --inputs   # prints the corpus and texts as JSON

It trains, with the `tokenizers` library on the in-script corpus (mixed
scripts: English, accented Latin, Greek, Cyrillic, CJK, emoji, digits,
whitespace runs, code), three small tokenizers and rebuilds each in the
layout of a real model's tokenizer.json:

  llama2_spm   SentencePiece-style BPE as Llama 2 ships it: <unk> <s> </s>,
               then the 256 <0xXX> byte-fallback tokens, then the learned
               pieces; normalizer Prepend("▁") + Replace(" ", "▁"), no
               pre-tokenizer, decoder Replace/ByteFallback/Fuse/Strip,
               template "<s> $A".
  llama3_bpe   byte-level BPE as Llama 3: Split on the Llama-3 regex then
               ByteLevel without regex, ignore_merges, special tokens
               <|begin_of_text|> <|end_of_text|> <|eot_id|> and a non-special
               added token with lstrip/rstrip, template "<|begin_of_text|> $A".
  gpt2_bpe     byte-level BPE as GPT-2: ByteLevel pre-tokenizer with its
               regex, <|endoftext|>, no BOS.

For each, tokenizer/testdata/<name>.tokenizer.json and, in
tokenizer/testdata/tokenizer_refs.json, for every text: the ids of
transformers' PreTrainedTokenizerFast with and without special tokens, and
its decode of the latter (skip_special_tokens=False,
clean_up_tokenization_spaces=False); plus decodes of random id sequences.
The script checks that transformers and tokenizers agree before writing.
Go's tokenizer tests read these files (TestReferenceIDs).
"""

import json
import os
import random
import sys

# --- inputs -----------------------------------------------------------------

SEED = 1234

BASE_LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "It's a truth universally acknowledged, isn't it? We'll see; they'd know.",
    "I'M SURE YOU'LL LIKE IT, DON'T YOU?",
    "Café déjà vu: naïve façade, coöperate, Ångström, São Paulo, Łódź, Øresund.",
    "Ελληνικά: η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο.",
    "Русский: съешь же ещё этих мягких французских булок да выпей чаю.",
    "日本語のテキストと漢字、ひらがな、カタカナ。中文：快速的棕色狐狸跳过了懒狗。",
    "한국어 문장도 조금 있습니다.",
    "Emoji 😀😃😄 👍🏽 🇫🇷 👨‍👩‍👧 ❤️ ✨🔥",
    "Numbers: 0 7 42 1234567 3.14159 1,000,000 ٣٤٥ ½ ²",
    "Whitespace:  two  spaces,\ttab,\n\nnewlines,   \n  indented  ",
    "def add(a, b):\n    return a + b  # sum\n\nprint(add(2, 3))",
    "for (int i = 0; i < n; ++i) { sum += x[i] * y[i]; }",
    "if x != None and y >= 10: z = {'key': [1, 2, 3]}",
    "<html><body class=\"main\">Hello &amp; welcome!</body></html>",
    "SELECT name, COUNT(*) FROM users WHERE age > 21 GROUP BY name;",
    "Mixed: résumé vs resume, naïve vs naive, Σίσυφος and Сизиф.",
    "   leading spaces and trailing spaces   ",
    "URLs: https://example.com/path?q=1&r=two#frag and user@example.org",
    "Tabs\tand\r\nwindows\r\nline endings",
]

WORDS = (
    "the of and to in is was for on that with as by at from this be are or "
    "model token tensor graph kernel fused program memory device layer attention "
    "über schön straße garçon élève español año corazón "
    "καλημέρα κόσμε λόγος Αθήνα "
    "привет мир язык программа "
    "東京 北京 数据 模型 学习 こんにちは 世界 "
    "🙂 🚀 🎉 "
    "0 1 2 3 4 5 6 7 8 9 10 100 2024 3.5"
).split()


def corpus():
    rng = random.Random(SEED)
    lines = list(BASE_LINES) * 3
    for _ in range(300):
        n = rng.randint(3, 14)
        sep = rng.choice([" ", " ", " ", "  ", "\t", "\n", ", "])
        lines.append(sep.join(rng.choice(WORDS) for _ in range(n)))
    return lines


TEXTS = [
    "",
    " ",
    "   ",
    "Hello world",
    " Hello world",
    "Hello  world",
    "hello\nworld",
    "\n\nhello\n\n",
    "a\r\nb\r\n",
    "tab\tseparated\tvalues",
    "trailing space ",
    "  leading",
    "The quick brown fox jumps over the lazy dog.",
    "It's, I'm, you're, we've, they'll, he'd, don't",
    "IT'S I'M YOU'RE WE'VE THEY'LL HE'D",
    "Long s: it'ſ here",
    "Café déjà vu — naïve façade",
    "Ελληνικά κείμενα με τόνους",
    "Съешь же ещё этих мягких французских булок",
    "日本語のテキスト。中文文本。",
    "한국어 텍스트",
    "Emoji: 😀 👍🏽 🇫🇷 👨‍👩‍👧 ❤️",
    "Rare: ᚠᚢᚦ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ ﷽ ⅷ",
    "Devanagari: नमस्ते दुनिया",
    "Arabic: مرحبا بالعالم ٣٤٥",
    "Numbers 1 12 123 1234 12345 123456 3.14159 -42 1e10",
    "x=1;y=22;z=333;w=4444",
    "def f(x):\n    return x ** 2\n",
    "    indented code\n\tand tab\n",
    "a  b   c    d     e",
    "!!! ??? ... ,,, ;;; :::",
    "(parenthesized) [bracketed] {braced} <angled>",
    "email@example.com http://x.y/z?a=b&c=d",
    "<s>Hello</s>",
    "text<s>inside</s>text",
    "<unk> and <0x41> literally",
    "<|begin_of_text|>Hi<|eot_id|>",
    "A <|tool|> B<|tool|>C",
    "<|endoftext|>The end<|endoftext|>",
    "ﬁ ligature, ㎏ unit, Ⅻ numeral, ℌ fraktur",
    "zero\u200bwidth\u00a0nbsp\u3000ideographic space",
    "\u2028line separator\u2029paragraph",
    "combining: e\u0301 a\u0308 n\u0303",
    "🤖" * 5,
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    " ".join(BASE_LINES[:6]),
]

# --- building ---------------------------------------------------------------

LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def trained_model(tok_setup, vocab_size, special, alphabet=None, limit_alphabet=None):
    """Train a BPE on the corpus and return (vocab dict, merges list)."""
    from tokenizers import Tokenizer, models, trainers

    tok = Tokenizer(models.BPE())
    tok_setup(tok)
    kw = dict(vocab_size=vocab_size, special_tokens=special, show_progress=False)
    if alphabet is not None:
        kw["initial_alphabet"] = alphabet
    if limit_alphabet is not None:
        kw["limit_alphabet"] = limit_alphabet
    tok.train_from_iterator(corpus(), trainers.BpeTrainer(**kw))
    m = json.loads(tok.to_str())["model"]
    merges = [tuple(p) if isinstance(p, list) else tuple(p.split(" ")) for p in m["merges"]]
    return m["vocab"], merges


def build_llama2():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, processors, AddedToken

    def setup(tok):
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)

    learned, merges = trained_model(setup, 700, [], limit_alphabet=120)
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for tokn, _ in sorted(learned.items(), key=lambda kv: kv[1]):
        if tokn not in vocab:
            vocab[tokn] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ["<unk>", "<s>", "</s>"]])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    return tok, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def build_byte_level(llama3):
    from tokenizers import Tokenizer, Regex, models, pre_tokenizers, decoders, processors, AddedToken

    if llama3:
        pre = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
            ]
        )
        special = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    else:
        pre = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
        special = ["<|endoftext|>"]

    def setup(tok):
        tok.pre_tokenizer = pre

    learned, merges = trained_model(setup, 900, [], alphabet=pre_tokenizers.ByteLevel.alphabet())
    vocab = dict(learned)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=llama3))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    if llama3:
        tok.add_tokens([AddedToken("<|tool|>", special=False, normalized=False, lstrip=True, rstrip=True)])
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence(
            [
                processors.ByteLevel(trim_offsets=False),
                processors.TemplateProcessing(
                    single="<|begin_of_text|> $A",
                    pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                    special_tokens=[("<|begin_of_text|>", bos)],
                ),
            ]
        )
        cfg = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
        cfg = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    return tok, cfg


# --- references -------------------------------------------------------------


def references(name, tok, cfg, outdir):
    import tokenizers
    import transformers
    from transformers import PreTrainedTokenizerFast

    path = os.path.join(outdir, name + ".tokenizer.json")
    tok.save(path)
    hf = PreTrainedTokenizerFast(tokenizer_file=path, clean_up_tokenization_spaces=False, **cfg)
    cases = []
    for text in TEXTS:
        with_special = hf(text, add_special_tokens=True)["input_ids"]
        plain = hf(text, add_special_tokens=False)["input_ids"]
        rust = tok.encode(text, add_special_tokens=False).ids
        rust_special = tok.encode(text, add_special_tokens=True).ids
        if plain != rust or with_special != rust_special:
            sys.exit(f"{name}: transformers and tokenizers disagree on {text!r}: {plain} / {with_special} vs {rust} / {rust_special}")
        decoded = hf.decode(plain, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        cases.append({"text": text, "ids": with_special, "ids_plain": plain, "decoded": decoded})
    rng = random.Random(SEED + len(name))
    n = tok.get_vocab_size(with_added_tokens=True)
    decodes = []
    for k in range(40):
        ids = [rng.randrange(n) for _ in range(rng.randint(1, 12))]
        if k % 4 == 0 and name == "llama2_spm":
            # runs of byte tokens, valid and invalid UTF-8
            ids = [3 + rng.choice([0x41, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0xC3, 0xA9, 0x20]) for _ in range(rng.randint(1, 6))]
            ids.insert(rng.randrange(len(ids) + 1), rng.randrange(259, n))
        decodes.append({"ids": ids, "text": hf.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)})
    return {
        "file": name + ".tokenizer.json",
        "config": cfg,
        "cases": cases,
        "decodes": decodes,
        "versions": {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__},
    }


def main():
    if "--inputs" in sys.argv:
        json.dump({"corpus": corpus(), "texts": TEXTS, "llama3_regex": LLAMA3_REGEX, "seed": SEED}, sys.stdout, ensure_ascii=False)
        return
    outdir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizer", "testdata")
    os.makedirs(outdir, exist_ok=True)
    refs = {"generator": "scripts/tokenizer_refs.py (transformers PreTrainedTokenizerFast)", "tokenizers": {}}
    for name, build in [
        ("llama2_spm", build_llama2),
        ("llama3_bpe", lambda: build_byte_level(True)),
        ("gpt2_bpe", lambda: build_byte_level(False)),
    ]:
        tok, cfg = build()
        refs["tokenizers"][name] = references(name, tok, cfg, outdir)
    with open(os.path.join(outdir, "tokenizer_refs.json"), "w", encoding="utf-8") as f:
        json.dump(refs, f, ensure_ascii=False, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(outdir, x)) for x in os.listdir(outdir))
    print(f"wrote {outdir} ({total} bytes)")


if __name__ == "__main__":
    main()

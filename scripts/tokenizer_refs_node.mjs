// Stand-in for scripts/tokenizer_refs.py where Python's tokenizers and
// transformers are not installed: the same three tokenizer layouts, built
// and run with the Node binding of the same Rust library (npm package
// `tokenizers`, the Hugging Face tokenizers crate compiled for Node), so
// the ids are the library's own. transformers' fast tokenizers run this
// library, so the ids agree with what the Python script records; only the
// trained vocabularies differ (the binding trains with the default
// trainer, cut here to the same number of merges).
//
//   npm install --prefix /tmp/tokref tokenizers@0.23.2
//   python3 scripts/tokenizer_refs.py --inputs > /tmp/tokref/inputs.json
//   NODE_PATH=/tmp/tokref/node_modules node scripts/tokenizer_refs_node.mjs /tmp/tokref/inputs.json
//
// It writes tokenizer/testdata/ as the Python script does.

import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { Tokenizer } = require('tokenizers')

const inputs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
const outdir = path.join(path.dirname(new URL(import.meta.url).pathname), '..', 'tokenizer', 'testdata')
fs.mkdirSync(outdir, { recursive: true })
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tokrefs-'))
const corpusFile = path.join(tmp, 'corpus.txt')
fs.writeFileSync(corpusFile, inputs.corpus.join('\n') + '\n')

// GPT-2's byte-to-character alphabet.
function byteAlphabet() {
  const out = []
  let n = 0
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)
    out.push(String.fromCodePoint(printable ? b : 256 + n++))
  }
  return out
}

function skeleton(pre) {
  return {
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: pre, post_processor: null, decoder: null,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab: {}, merges: [] },
  }
}

// train returns the first nMerges merges the library learns on the corpus.
function train(pre, nMerges) {
  const tok = Tokenizer.fromString(JSON.stringify(skeleton(pre)))
  tok.train([corpusFile])
  const file = path.join(tmp, 'trained.json')
  tok.save(file)
  const m = JSON.parse(fs.readFileSync(file, 'utf8')).model
  const merges = m.merges.map((p) => (Array.isArray(p) ? p : p.split(' '))).slice(0, nMerges)
  const produced = new Set(m.merges.map((p) => (Array.isArray(p) ? p.join('') : p.split(' ').join(''))))
  const alphabet = Object.entries(m.vocab).sort((a, b) => a[1] - b[1]).map(([t]) => t).filter((t) => !produced.has(t))
  return { alphabet, merges }
}

function added(id, content, special, extra = {}) {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special, ...extra }
}

function template(token, id) {
  return {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: token, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ SpecialToken: { id: token, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
      { SpecialToken: { id: token, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { [token]: { id: token, ids: [id], tokens: [token] } },
  }
}

function buildLlama2() {
  const { alphabet, merges } = train({ type: 'Metaspace', replacement: '▁', prepend_scheme: 'always', split: true }, 430)
  const vocab = { '<unk>': 0, '<s>': 1, '</s>': 2 }
  const add = (t) => { if (!(t in vocab)) vocab[t] = Object.keys(vocab).length }
  for (let b = 0; b < 256; b++) add('<0x' + b.toString(16).toUpperCase().padStart(2, '0') + '>')
  // A cut alphabet (the Python script's limit_alphabet: the most frequent
  // characters) sends rare characters to byte fallback.
  const freq = new Map()
  for (const line of inputs.corpus) for (const c of ('▁' + line.replaceAll(' ', '▁'))) freq.set(c, (freq.get(c) || 0) + 1)
  const top = new Set([...freq.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 120).map(([c]) => c))
  alphabet.filter((c) => top.has(c)).forEach(add)
  const kept = []
  for (const [a, b] of merges) {
    if (a in vocab && b in vocab) { add(a + b); kept.push([a, b]) }
  }
  const j = skeleton(null)
  j.added_tokens = [added(0, '<unk>', true), added(1, '<s>', true), added(2, '</s>', true)]
  j.normalizer = { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '▁' }, { type: 'Replace', pattern: { String: ' ' }, content: '▁' }] }
  j.decoder = { type: 'Sequence', decoders: [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] }
  j.post_processor = template('<s>', 1)
  Object.assign(j.model, { unk_token: '<unk>', fuse_unk: true, byte_fallback: true, vocab, merges: kept })
  return { json: j, cfg: { bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>' } }
}

function buildByteLevel(llama3) {
  const pre = llama3
    ? { type: 'Sequence', pretokenizers: [
        { type: 'Split', pattern: { Regex: inputs.llama3_regex }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] }
    : { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }
  const { alphabet, merges } = train(pre, 640)
  const vocab = {}
  const add = (t) => { if (!(t in vocab)) vocab[t] = Object.keys(vocab).length }
  byteAlphabet().forEach(add)
  alphabet.forEach(add)
  for (const [a, b] of merges) add(a + b)
  const j = skeleton(pre)
  j.decoder = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true }
  Object.assign(j.model, { ignore_merges: llama3, vocab, merges })
  let next = Object.keys(vocab).length
  if (llama3) {
    const bos = next
    j.added_tokens = [added(next++, '<|begin_of_text|>', true), added(next++, '<|end_of_text|>', true), added(next++, '<|eot_id|>', true),
      added(next++, '<|tool|>', false, { lstrip: true, rstrip: true })]
    j.post_processor = { type: 'Sequence', processors: [{ type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true }, template('<|begin_of_text|>', bos)] }
    return { json: j, cfg: { bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>' } }
  }
  j.added_tokens = [added(next++, '<|endoftext|>', true)]
  j.post_processor = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true }
  return { json: j, cfg: { bos_token: '<|endoftext|>', eos_token: '<|endoftext|>' } }
}

// mulberry32: a small seeded generator for the random decode cases.
function rng(seed) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

async function references(name, built) {
  const file = name + '.tokenizer.json'
  fs.writeFileSync(path.join(outdir, file), JSON.stringify(built.json, null, 1) + '\n')
  const tok = Tokenizer.fromFile(path.join(outdir, file))
  const cases = []
  for (const text of inputs.texts) {
    const withSpecial = (await tok.encode(text, null, { addSpecialTokens: true })).getIds()
    const plain = (await tok.encode(text, null, { addSpecialTokens: false })).getIds()
    cases.push({ text, ids: withSpecial, ids_plain: plain, decoded: await tok.decode(plain, false) })
  }
  const rand = rng(inputs.seed + name.length)
  const n = tok.getVocabSize(true)
  const pick = (k) => Math.floor(rand() * k)
  const decodes = []
  for (let k = 0; k < 40; k++) {
    let ids = Array.from({ length: 1 + pick(12) }, () => pick(n))
    if (k % 4 === 0 && name === 'llama2_spm') {
      const bytes = [0x41, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80, 0xc3, 0xa9, 0x20]
      ids = Array.from({ length: 1 + pick(6) }, () => 3 + bytes[pick(bytes.length)])
      ids.splice(pick(ids.length + 1), 0, 259 + pick(n - 259))
    }
    decodes.push({ ids, text: await tok.decode(ids, false) })
  }
  return { file, config: built.cfg, cases, decodes, versions: { tokenizers: 'npm tokenizers 0.23.2 (Rust crate via Node)' } }
}

const refs = { generator: 'scripts/tokenizer_refs_node.mjs (Hugging Face tokenizers 0.23.2, Node binding)', tokenizers: {} }
refs.tokenizers.llama2_spm = await references('llama2_spm', buildLlama2())
refs.tokenizers.llama3_bpe = await references('llama3_bpe', buildByteLevel(true))
refs.tokenizers.gpt2_bpe = await references('gpt2_bpe', buildByteLevel(false))
fs.writeFileSync(path.join(outdir, 'tokenizer_refs.json'), JSON.stringify(refs, null, 1) + '\n')
let total = 0
for (const f of fs.readdirSync(outdir)) total += fs.statSync(path.join(outdir, f)).size
console.log(`wrote ${outdir} (${total} bytes)`)

// Whole-text goldens for text-probe windows (tests/analysis/probe/text_probe_golden_test.cc),
// made by an independent implementation, transformers.js, from the local tokenizer files:
// WikiText-2's wiki.test.raw read as Python's open(f).read() does ("\r\n" -> "\n") and
// encoded in ONE call (add_special_tokens=false), for GPT-2 and Pythia: the token count, the
// FNV-1a 64 of the ids (each as 8 little-endian bytes) and the first 256 ids. The corpus digests
// in tests/analysis/tokenizer/testdata/*_golden.json differ on purpose: those encode the raw
// file line by line (split on "\n", "\r" kept); this script recomputes them as a check.
// Not run in CI. Usage (outside the repo; package.json of tests/fixtures/tokenizer_goldens):
//   cp ../../../fixtures/tokenizer_goldens/package.json generate_windows_golden.mjs /tmp/g
//   cd /tmp/g && npm install --ignore-scripts
//   node generate_windows_golden.mjs /work/shared/data > wikitext_windows_golden.json
import fs from 'node:fs';
import path from 'node:path';
import { PreTrainedTokenizer, env } from '@huggingface/transformers';
const sharedData = process.argv[2];
env.allowRemoteModels = false;
const tokenizers = path.join(sharedData, 'tokenizers');
function gpt2TokenizerJson(dir) {
  const vocab = JSON.parse(fs.readFileSync(path.join(dir, 'vocab.json'), 'utf8'));
  const merges = fs.readFileSync(path.join(dir, 'merges.txt'), 'utf8').split('\n')
      .filter((line) => line.length > 0 && !line.startsWith('#version'));
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  return { version: '1.0', truncation: null, padding: null,
    added_tokens: [{ id: vocab['<|endoftext|>'], content: '<|endoftext|>', single_word: false,
                     lstrip: false, rstrip: false, normalized: false, special: true }],
    normalizer: null, pre_tokenizer: byteLevel, post_processor: byteLevel, decoder: byteLevel,
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
             end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab, merges } };
}
function digest(ids) {
  const mask = (1n << 64n) - 1n;
  let hash = 14695981039346656037n;
  for (const id of ids) {
    let bits = BigInt(id);
    for (let b = 0; b < 8; ++b) { hash ^= bits & 0xffn; hash = (hash * 1099511628211n) & mask; bits >>= 8n; }
  }
  return hash.toString(16).padStart(16, '0');
}
const rel = path.join('corpora', 'wikitext-2', 'wiki.test.raw');
const raw = fs.readFileSync(path.join(sharedData, rel), 'utf8');
const text = raw.replace(/\r\n/g, '\n');
const toks = {
  gpt2: new PreTrainedTokenizer(gpt2TokenizerJson(path.join(tokenizers, 'gpt2')), {}),
  pythia: new PreTrainedTokenizer(JSON.parse(fs.readFileSync(path.join(tokenizers, 'pythia', 'tokenizer.json'), 'utf8')), {}),
};
const out = { generator: 'tests/analysis/probe/testdata/generate_windows_golden.mjs',
  implementation: '@huggingface/transformers 4.3.1 (PreTrainedTokenizer, add_special_tokens=false)',
  file: rel, text: 'universal newlines (\\r\\n -> \\n), encoded whole' };
for (const [name, tok] of Object.entries(toks)) {
  // Sanity: the line-by-line digest of generate.mjs.
  let lineIds = [];
  for (const line of raw.split('\n')) lineIds.push(...tok.encode(line, { add_special_tokens: false }));
  const ids = tok.encode(text, { add_special_tokens: false });
  out[name] = { tokens: ids.length, fnv1a64: digest(ids), first_ids: ids.slice(0, 256),
                line_by_line: { tokens: lineIds.length, fnv1a64: digest(lineIds) } };
  console.error(name, ids.length, out[name].fnv1a64, 'lines:', lineIds.length, out[name].line_by_line.fnv1a64);
}
console.log(JSON.stringify(out, (k, v) => (k === 'first_ids' ? JSON.stringify(v) : v), 1)
    .replace(/"first_ids": "(\[[^"]*\])"/g, '"first_ids": $1'));

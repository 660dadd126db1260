#!/usr/bin/python3
"""Writes a checkpoint of a real suite's size with random weights and Hugging Face names,
and a token probe (16 x 128 by default), for bench/extract_bench:
  --family bert:     BERT-base (12 layers x 12 heads, d=768, vocab 30522), float32;
                     the probe is [CLS] ... [SEP]; default format safetensors;
  --family gpt_neox: Pythia-160m's shape (12 x 12, d=768, vocab 50304, rotary on a quarter
                     of each head, parallel residual), float16 as Pythia ships it;
  --family gpt2:     GPT-2 small's shape (12 x 12, d=768, vocab 50257), float32 with the
                     CRFM Mistral attention options, no lm_head (tied);
  --family pythia_1b: Pythia-1b's shape (16 layers x 8 heads, d=2048, head 256, vocab
                     50304), float16 (2 GiB), the ~1B model of the GPU benchmark;
  --family llama_7b: LLaMA-7B's shape (32 layers x 32 heads, d=4096, MLP 11008, vocab
                     32000), bfloat16 safetensors in three shards and their index (13.5 GB),
                     written tensor by tensor: the model is never held in memory.
usage: make_bench_checkpoint.py OUT_DIR [--family bert|gpt_neox|gpt2|pythia_1b|llama_7b]
                                [--format safetensors|bin] [--probe-samples N]
                                [--probe-length L] [--probe-only] [--seed N]
The probe goes to OUT_DIR/probe.jsonl; --probe-only writes only the probe, as
OUT_DIR/probe_NxL.jsonl, beside an existing checkpoint."""
import argparse
import json
import os
import random
import sys
from collections import OrderedDict

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "fixtures"))
import hf_io  # noqa: E402

D, INNER, LAYERS, HEADS = 768, 3072, 12, 12


def linear(state, name, out_features, in_features, dtype):
    state[name + ".weight"] = (torch.randn(out_features, in_features) * 0.02).to(dtype)
    state[name + ".bias"] = (torch.randn(out_features) * 0.02).to(dtype)


def norm(state, name, dtype, d=D):
    state[name + ".weight"] = torch.ones(d, dtype=dtype)
    state[name + ".bias"] = torch.zeros(d, dtype=dtype)


def bert_base():
    cfg = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 30522,
           "hidden_size": D, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
           "intermediate_size": INNER, "max_position_embeddings": 512, "type_vocab_size": 2,
           "layer_norm_eps": 1e-12, "hidden_act": "gelu"}
    dtype, state = torch.float32, OrderedDict()
    state["bert.embeddings.word_embeddings.weight"] = torch.randn(cfg["vocab_size"], D) * 0.02
    state["bert.embeddings.position_embeddings.weight"] = torch.randn(512, D) * 0.02
    state["bert.embeddings.token_type_embeddings.weight"] = torch.randn(2, D) * 0.02
    norm(state, "bert.embeddings.LayerNorm", dtype)
    for layer in range(LAYERS):
        p = f"bert.encoder.layer.{layer}."
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense"):
            linear(state, p + name, D, D, dtype)
        linear(state, p + "intermediate.dense", INNER, D, dtype)
        linear(state, p + "output.dense", D, INNER, dtype)
        norm(state, p + "attention.output.LayerNorm", dtype)
        norm(state, p + "output.LayerNorm", dtype)
    return cfg, state


def pythia(d=D, layers=LAYERS, heads=HEADS):
    inner = 4 * d
    cfg = {"model_type": "gpt_neox", "architectures": ["GPTNeoXForCausalLM"],
           "vocab_size": 50304, "hidden_size": d, "num_hidden_layers": layers,
           "num_attention_heads": heads, "intermediate_size": inner,
           "max_position_embeddings": 2048, "rotary_pct": 0.25, "rotary_emb_base": 10000,
           "use_parallel_residual": True, "hidden_act": "gelu", "layer_norm_eps": 1e-5,
           "torch_dtype": "float16"}
    dtype, state = torch.float16, OrderedDict()
    state["gpt_neox.embed_in.weight"] = (torch.randn(cfg["vocab_size"], d) * 0.02).to(dtype)
    for layer in range(layers):
        p = f"gpt_neox.layers.{layer}."
        norm(state, p + "input_layernorm", dtype, d)
        norm(state, p + "post_attention_layernorm", dtype, d)
        linear(state, p + "attention.query_key_value", 3 * d, d, dtype)
        linear(state, p + "attention.dense", d, d, dtype)
        linear(state, p + "mlp.dense_h_to_4h", inner, d, dtype)
        linear(state, p + "mlp.dense_4h_to_h", d, inner, dtype)
    norm(state, "gpt_neox.final_layer_norm", dtype, d)
    state["embed_out.weight"] = (torch.randn(cfg["vocab_size"], d) * 0.02).to(dtype)
    return cfg, state


def gpt2_small():
    cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 50257,
           "n_embd": D, "n_layer": LAYERS, "n_head": HEADS, "n_positions": 1024,
           "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
           "scale_attn_by_inverse_layer_idx": True, "reorder_and_upcast_attn": True}
    dtype, state = torch.float32, OrderedDict()
    state["transformer.wte.weight"] = torch.randn(cfg["vocab_size"], D) * 0.02
    state["transformer.wpe.weight"] = torch.randn(cfg["n_positions"], D) * 0.01
    for layer in range(LAYERS):
        p = f"transformer.h.{layer}."
        norm(state, p + "ln_1", dtype)
        norm(state, p + "ln_2", dtype)
        # Conv1D weights are input-major: [in, out].
        for name, (fan_in, fan_out) in {"attn.c_attn": (D, 3 * D), "attn.c_proj": (D, D),
                                        "mlp.c_fc": (D, INNER), "mlp.c_proj": (INNER, D)}.items():
            state[p + name + ".weight"] = torch.randn(fan_in, fan_out) * 0.02
            state[p + name + ".bias"] = torch.randn(fan_out) * 0.02
    norm(state, "transformer.ln_f", dtype)
    return cfg, state


def llama_entries(d=4096, layers=32, heads=32, inner=11008, vocab=32000):
    """LLaMA's config and its tensors as (name, shape, dtype, make), in Hugging Face's
    order, bfloat16 as Meta's checkpoints ship: made one at a time by the writer."""
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": vocab,
           "hidden_size": d, "num_hidden_layers": layers, "num_attention_heads": heads,
           "num_key_value_heads": heads, "intermediate_size": inner,
           "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
           "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    dtype = torch.bfloat16

    def ones(n):
        return lambda: torch.ones(n, dtype=dtype)

    entries = [("model.embed_tokens.weight", (vocab, d), dtype,
                lambda: (torch.randn(vocab, d) * 0.02).to(dtype))]
    for layer in range(layers):
        p = f"model.layers.{layer}."
        for name, shape in (("self_attn.q_proj", (d, d)), ("self_attn.k_proj", (d, d)),
                            ("self_attn.v_proj", (d, d)), ("self_attn.o_proj", (d, d)),
                            ("mlp.gate_proj", (inner, d)), ("mlp.up_proj", (inner, d)),
                            ("mlp.down_proj", (d, inner))):
            entries.append((p + name + ".weight", shape, dtype,
                            lambda shape=shape: (torch.randn(*shape) * 0.02).to(dtype)))
        entries.append((p + "input_layernorm.weight", (d,), dtype, ones(d)))
        entries.append((p + "post_attention_layernorm.weight", (d,), dtype, ones(d)))
    entries.append(("model.norm.weight", (d,), dtype, ones(d)))
    entries.append(("lm_head.weight", (vocab, d), dtype,
                    lambda: (torch.randn(vocab, d) * 0.02).to(dtype)))
    return cfg, entries


def write_llama_shards(out, cfg, entries, shards=3):
    """`entries` in `shards` safetensors files of about equal size, and their index."""
    sizes = [torch.Size(shape).numel() * 2 for _, shape, _, _ in entries]
    total, parts, filled = sum(sizes), [[]], 0
    for entry, size in zip(entries, sizes):
        if filled + size > total * (len(parts)) / shards and parts[-1] and len(parts) < shards:
            parts.append([])
        parts[-1].append(entry)
        filled += size
    weight_map = {}
    for i, part in enumerate(parts):
        shard = f"model-{i + 1:05d}-of-{len(parts):05d}.safetensors"
        hf_io.write_safetensors_lazily(os.path.join(out, shard), part)
        weight_map.update({name: shard for name, _, _, _ in part})
        print(f"  {shard}: {len(part)} tensors", flush=True)
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


FAMILIES = {"bert": (bert_base, "BERT-base"), "gpt_neox": (pythia, "Pythia-160m"),
            "gpt2": (gpt2_small, "GPT-2 small"),
            "pythia_1b": (lambda: pythia(d=2048, layers=16, heads=8), "Pythia-1b"),
            "llama_7b": (llama_entries, "LLaMA-7B")}

parser = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("out")
parser.add_argument("--family", default="bert", choices=sorted(FAMILIES))
parser.add_argument("--format", choices=["safetensors", "bin"],
                    help="default: safetensors for bert, bin (as the suites ship) otherwise")
parser.add_argument("--probe-samples", type=int, default=16)
parser.add_argument("--probe-length", type=int, default=128,
                    help="tokens per sample, at most the model's maximum (512 for bert)")
parser.add_argument("--probe-only", action="store_true",
                    help="write only the probe, as OUT_DIR/probe_NxL.jsonl")
parser.add_argument("--seed", type=int, default=0,
                    help="the weights' random seed: distinct seeds, distinct files (a series "
                         "whose steps a cache must not take for one another)")
args = parser.parse_args()
torch.manual_seed(args.seed)
make, label = FAMILIES[args.family]
os.makedirs(args.out, exist_ok=True)
probe_name = "probe.jsonl"
if args.probe_only:
    probe_name = f"probe_{args.probe_samples}x{args.probe_length}.jsonl"
elif args.family == "llama_7b":
    cfg, entries = make()
    write_llama_shards(args.out, cfg, entries)
else:
    cfg, state = make()
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if (args.format or ("safetensors" if args.family == "bert" else "bin")) == "safetensors":
        hf_io.write_safetensors(os.path.join(args.out, "model.safetensors"), state)
    else:
        torch.save(state, os.path.join(args.out, "pytorch_model.bin"))
rng = random.Random(0)
with open(os.path.join(args.out, probe_name), "w") as f:
    for _ in range(args.probe_samples):
        if args.family == "bert":  # [CLS] ... [SEP]
            sample = [101] + [rng.randrange(1000, 30000) for _ in range(args.probe_length - 2)] + [102]
        else:
            vocab = 32000 if args.family == "llama_7b" else 50000
            sample = [rng.randrange(0, vocab) for _ in range(args.probe_length)]
        f.write(json.dumps(sample) + "\n")
print(f"{label}-sized {args.family} {'probe' if args.probe_only else 'checkpoint'} written to "
      f"{args.out}")

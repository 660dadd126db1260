#!/usr/bin/python3
"""Writes a BERT-base-sized checkpoint (12 layers x 12 heads, d=768, 30522 words, random
weights with HF names) and a token probe (16 x 128 by default), for bench/extract_bench.
usage: make_bert_base.py OUT_DIR [--format safetensors|bin] [--probe-samples N]
                         [--probe-length L]"""
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

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("out")
parser.add_argument("--format", default="safetensors", choices=["safetensors", "bin"])
parser.add_argument("--probe-samples", type=int, default=16)
parser.add_argument("--probe-length", type=int, default=128, help="tokens per sample, <= 512")
args = parser.parse_args()
torch.manual_seed(0)
cfg = {"model_type": "bert", "architectures": ["BertForMaskedLM"], "vocab_size": 30522,
       "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
       "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2,
       "layer_norm_eps": 1e-12, "hidden_act": "gelu"}
d, inner = cfg["hidden_size"], cfg["intermediate_size"]
state = OrderedDict()
state["bert.embeddings.word_embeddings.weight"] = torch.randn(cfg["vocab_size"], d) * 0.02
state["bert.embeddings.position_embeddings.weight"] = torch.randn(512, d) * 0.02
state["bert.embeddings.token_type_embeddings.weight"] = torch.randn(2, d) * 0.02
state["bert.embeddings.LayerNorm.weight"] = torch.ones(d)
state["bert.embeddings.LayerNorm.bias"] = torch.zeros(d)
for layer in range(cfg["num_hidden_layers"]):
    p = f"bert.encoder.layer.{layer}."
    shapes = {"attention.self.query": (d, d), "attention.self.key": (d, d),
              "attention.self.value": (d, d), "attention.output.dense": (d, d),
              "intermediate.dense": (inner, d), "output.dense": (d, inner)}
    for name, shape in shapes.items():
        state[p + name + ".weight"] = torch.randn(*shape) * 0.02
        state[p + name + ".bias"] = torch.randn(shape[0]) * 0.02
    for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
        state[p + norm + ".weight"] = torch.ones(d)
        state[p + norm + ".bias"] = torch.zeros(d)
os.makedirs(args.out, exist_ok=True)
with open(os.path.join(args.out, "config.json"), "w") as f:
    json.dump(cfg, f, indent=2)
if args.format == "safetensors":
    hf_io.write_safetensors(os.path.join(args.out, "model.safetensors"), state)
else:
    torch.save(state, os.path.join(args.out, "pytorch_model.bin"))
rng = random.Random(0)
with open(os.path.join(args.out, "probe.jsonl"), "w") as f:
    for _ in range(args.probe_samples):
        middle = [rng.randrange(1000, 30000) for _ in range(args.probe_length - 2)]
        f.write(json.dumps([101] + middle + [102]) + "\n")
print(f"BERT-base-sized checkpoint written to {args.out}")

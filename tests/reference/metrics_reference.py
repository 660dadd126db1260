#!/usr/bin/python3
"""Independent float64 reference for ../shared/docs/METRICS.md (python3-torch 1.13).

Written from the metric definitions and Hugging Face's eval-mode behaviour of BertModel
(here), GPTNeoXModel (gpt_neox_reference.py) and GPT2Model (gpt2_reference.py), not from
the C++ engine: a plain forward over the state dict, HF's additive attention masks (causal
for gpt_neox and gpt2), and every statistic computed by its direct definition (anisotropy
from the full matrix of pairwise cosines, entropy row by row over the keys each query may
see). hidden_states are those of HF output_hidden_states (for the causal families the last
one is after the final LayerNorm). Prints JSON:
  {"model_type", "heads": [{"layer", "head", "q_mean_norm", ..., "q_mean": [...],
   "k_mean": [...]}], "hidden_states": [{"index", "anisotropy", "mean_norm"}],
   "num_tokens": N}
where rotary models' heads also carry "q_mean_pre_rotary" and "k_mean_pre_rotary" (the
means of Q and K before the rotary embedding; q_mean/k_mean are after it).
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import hf_io  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference  # noqa: E402
import gpt_neox_reference  # noqa: E402

torch.set_default_dtype(torch.float64)


def param(state, name):
    for candidate in (name, "bert." + name):
        for alias in (candidate, candidate.replace("LayerNorm.weight", "LayerNorm.gamma")
                      .replace("LayerNorm.bias", "LayerNorm.beta")):
            if alias in state:
                return state[alias].to(torch.float64)
    raise KeyError(name)


def layer_norm(x, state, name, eps):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], param(state, name + ".weight"),
                                          param(state, name + ".bias"), eps)


def linear(x, state, name):
    return x @ param(state, name + ".weight").T + param(state, name + ".bias")


def bert_forward(state, cfg, ids, valid):
    """hidden_states (L+1 tensors [B,T,D]) and per layer (Q, K, probs) as HF computes them."""
    b, t = ids.shape
    heads = cfg["num_attention_heads"]
    dh = cfg["hidden_size"] // heads
    eps = cfg.get("layer_norm_eps", 1e-12)
    h = (param(state, "embeddings.word_embeddings.weight")[ids]
         + param(state, "embeddings.position_embeddings.weight")[torch.arange(t)]
         + param(state, "embeddings.token_type_embeddings.weight")[0])
    h = layer_norm(h, state, "embeddings.LayerNorm", eps)
    extended = (1.0 - valid[:, None, None, :].to(torch.float64)) * torch.finfo(torch.float64).min
    hidden, attention = [h], []
    for layer in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        split = lambda x: x.view(b, t, heads, dh).permute(0, 2, 1, 3)  # noqa: E731
        q = split(linear(h, state, p + "attention.self.query"))
        k = split(linear(h, state, p + "attention.self.key"))
        v = split(linear(h, state, p + "attention.self.value"))
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh) + extended, dim=-1)
        attention.append((q, k, probs))
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(b, t, -1)
        h = layer_norm(linear(ctx, state, p + "attention.output.dense") + h, state,
                       p + "attention.output.LayerNorm", eps)
        inner = gpt_neox_reference.activation(linear(h, state, p + "intermediate.dense"),
                                              cfg.get("hidden_act", "gelu"))
        h = layer_norm(linear(inner, state, p + "output.dense") + h, state,
                       p + "output.LayerNorm", eps)
        hidden.append(h)
    return hidden, attention


def bert_forward_dicts(state, cfg, ids, valid):
    hidden, attention = bert_forward(state, cfg, ids, valid)
    return hidden, [{"q": q, "k": k, "probs": probs} for q, k, probs in attention]


# model_type -> (forward, causal): each forward returns (hidden_states, per-block dicts).
FAMILIES = {"bert": (bert_forward_dicts, False),
            "gpt_neox": (gpt_neox_reference.forward, True),
            "gpt2": (gpt2_reference.forward, True)}


def model_type(cfg):
    if "model_type" in cfg:
        return cfg["model_type"]
    architecture = (cfg.get("architectures") or [""])[0]
    for prefix, family in (("GPTNeoX", "gpt_neox"), ("GPT2", "gpt2"), ("Bert", "bert")):
        if architecture.startswith(prefix):
            return family
    return ""


def mean_pairwise_cosine(vectors):
    """Mean of cos(v_s, v_t) over all ordered pairs s != t, from the Gram matrix."""
    n = vectors.shape[0]
    units = vectors / vectors.norm(dim=-1, keepdim=True)
    gram = units @ units.T
    return ((gram.sum() - gram.diagonal().sum()) / (n * (n - 1))).item()


def compute(checkpoint_dir, samples):
    cfg = json.load(open(os.path.join(checkpoint_dir, "config.json")))
    state = hf_io.load_state_dict(checkpoint_dir)
    length = max(len(s) for s in samples)
    ids = torch.zeros((len(samples), length), dtype=torch.long)
    valid = torch.zeros((len(samples), length), dtype=torch.bool)
    for row, sample in enumerate(samples):
        ids[row, :len(sample)] = torch.tensor(sample)
        valid[row, :len(sample)] = True
    family = model_type(cfg)
    if family not in FAMILIES:
        raise ValueError(f"{checkpoint_dir}: model_type {family!r} has no reference")
    forward, causal = FAMILIES[family]
    with torch.no_grad():
        hidden, attention = forward(state, cfg, ids, valid)
    result = {"model_type": family, "num_tokens": int(valid.sum()), "heads": [],
              "hidden_states": []}
    for layer, block in enumerate(attention):
        q, k, probs = block["q"], block["k"], block["probs"]
        for head in range(q.shape[1]):
            qs = q[:, head][valid]  # [N, d_h], valid tokens of every sample
            ks = k[:, head][valid]
            q_mean, k_mean = qs.mean(0), ks.mean(0)
            entropies = []
            for row, sample in enumerate(samples):
                n = len(sample)
                for i in range(n):
                    p = probs[row, head, i, :(i + 1 if causal else n)]
                    p = p[p > 0]
                    entropies.append(-(p * p.log()).sum().item())
            dot = torch.dot(q_mean, k_mean).item()
            result["heads"].append({
                "layer": layer, "head": head,
                "q_mean_norm": q_mean.norm().item(), "k_mean_norm": k_mean.norm().item(),
                "qk_mean_dot": dot,
                "qk_mean_cosine": dot / (q_mean.norm() * k_mean.norm()).item(),
                "attn_entropy": sum(entropies) / len(entropies),
                "q_anisotropy": mean_pairwise_cosine(qs),
                "k_anisotropy": mean_pairwise_cosine(ks),
                "q_mean": q_mean.tolist(), "k_mean": k_mean.tolist()})
            if "q_pre" in block:
                result["heads"][-1]["q_mean_pre_rotary"] = \
                    block["q_pre"][:, head][valid].mean(0).tolist()
                result["heads"][-1]["k_mean_pre_rotary"] = \
                    block["k_pre"][:, head][valid].mean(0).tolist()
    for index, h in enumerate(hidden):
        vectors = h[valid]
        result["hidden_states"].append({"index": index,
                                        "anisotropy": mean_pairwise_cosine(vectors),
                                        "mean_norm": vectors.mean(0).norm().item()})
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="HF checkpoint directory")
    parser.add_argument("probe", help="JSON lines of token ids")
    parser.add_argument("--out", help="write JSON here instead of stdout")
    args = parser.parse_args()
    samples = [json.loads(line) for line in open(args.probe) if line.strip()]
    text = json.dumps(compute(args.checkpoint, samples))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()

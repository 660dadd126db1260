#!/usr/bin/python3
"""Independent float64 reference for ../shared/docs/METRICS.md (python3-torch 1.13).

Written from the metric definitions and Hugging Face BertModel's eval-mode behaviour, not
from the C++ engine: a plain forward over the state dict, HF's additive attention mask,
and every statistic computed by its direct definition (anisotropy from the full matrix of
pairwise cosines, entropy row by row). Prints JSON:
  {"heads": [{"layer", "head", "q_mean_norm", ..., "q_mean": [...], "k_mean": [...]}],
   "hidden_states": [{"index", "anisotropy", "mean_norm"}], "num_tokens": N}
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import hf_io  # noqa: E402

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


def activation(x, name):
    if name == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name == "gelu_new":
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return torch.relu(x)
    raise ValueError(name)


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
        inner = activation(linear(h, state, p + "intermediate.dense"), cfg.get("hidden_act", "gelu"))
        h = layer_norm(linear(inner, state, p + "output.dense") + h, state,
                       p + "output.LayerNorm", eps)
        hidden.append(h)
    return hidden, attention


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
    causal = False
    with torch.no_grad():
        hidden, attention = bert_forward(state, cfg, ids, valid)
    result = {"num_tokens": int(valid.sum()), "heads": [], "hidden_states": []}
    for layer, (q, k, probs) in enumerate(attention):
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

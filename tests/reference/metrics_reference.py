#!/usr/bin/python3
"""Independent float64 reference for ../shared/docs/METRICS.md (python3-torch 1.13).

Written from the metric definitions and Hugging Face's eval-mode behaviour of BertModel
(here), GPTNeoXModel (gpt_neox_reference.py), GPT2Model (gpt2_reference.py) and LlamaModel /
Olmo2Model (llama_reference.py), not from
the C++ engine: a plain forward over the state dict, HF's additive attention masks (causal
for the causal families), and every statistic computed by its direct definition (anisotropy
from the full matrix of pairwise cosines, entropy row by row over the keys each query may
see). hidden_states are those of HF output_hidden_states (for the causal families the last
one is after the final LayerNorm). The second-wave statistics (spectra, isotropy,
sharpness, sinks, token samples) are in second_wave_reference.py. Prints JSON:
  {"model_type", "num_tokens": N, "token_samples": M,
   "heads": [{"layer", "head", "q_mean_norm", "k_mean_norm", "qk_mean_dot",
              "qk_mean_cosine", "attn_entropy", "q_anisotropy", "k_anisotropy",
              "q_mean": [...], "k_mean": [...], "attn_max_prob", "attn_min_prob",
              "attn_median_prob", "attn_first_token_mass",
              "q_sample": [[...] x M], "k_sample": [[...] x M]}],
   "hidden_states": [{"index", "anisotropy", "mean_norm", "spectrum": [...],
                      "sv_skewness", "sv_median", "ev_1", "ev_10", "isoscore",
                      "token_uniformity", "first_token_uniformity", "max_abs",
                      "median_abs"}],
   "layers": [{"layer", "qk_mean_cosine_concat"}],
   "correlation": {"spearman_rho", "spearman_p", "pearson_r", "pearson_p"},
   "isotropic_p95": {"head_dim", "hidden_size"},
   "embed_partition_isotropy", "final_norm_gain": [...]}
where rotary models' heads also carry "q_mean_pre_rotary" and "k_mean_pre_rotary" (the
means of Q and K before the rotary embedding; q_mean/k_mean are after it). The hidden_*
metrics of METRICS.md drop their prefix inside "hidden_states". q_sample/k_sample are Q
and K at the valid positions floor(j N / M), j = 0 … M-1 (sample order, then position
order), M = min(--token-samples, N); with --token-samples 0 (M = 0) they are left out.
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
import llama_reference  # noqa: E402
import second_wave_reference  # noqa: E402

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
            "gpt2": (gpt2_reference.forward, True),
            "llama": (llama_reference.forward, True),
            "olmo2": (llama_reference.forward, True)}
LLAMA_SHAPED = ("llama", "mistral", "qwen2")


def model_type(cfg):
    if "model_type" in cfg:
        return "llama" if cfg["model_type"] in LLAMA_SHAPED else cfg["model_type"]
    architecture = (cfg.get("architectures") or [""])[0]
    for prefix, family in (("GPTNeoX", "gpt_neox"), ("GPT2", "gpt2"), ("Bert", "bert"),
                           ("Olmo2", "olmo2"), ("Llama", "llama"), ("Mistral", "llama"),
                           ("Qwen2", "llama")):
        if architecture.startswith(prefix):
            return family
    return ""


def mean_pairwise_cosine(vectors):
    """Mean of cos(v_s, v_t) over all ordered pairs s != t, from the Gram matrix."""
    n = vectors.shape[0]
    units = vectors / vectors.norm(dim=-1, keepdim=True)
    gram = units @ units.T
    return ((gram.sum() - gram.diagonal().sum()) / (n * (n - 1))).item()


# model_type -> (input embedding matrix, gain of the last LayerNorm before the output);
# {last} is the last block. param() adds BERT's "bert." prefix and gamma alias.
CHECKPOINT_WEIGHTS = {"bert": ("embeddings.word_embeddings.weight",
                               "encoder.layer.{last}.output.LayerNorm.weight"),
                      "gpt_neox": ("gpt_neox.embed_in.weight", "gpt_neox.final_layer_norm.weight"),
                      "gpt2": ("transformer.wte.weight", "transformer.ln_f.weight"),
                      "llama": ("model.embed_tokens.weight", "model.norm.weight"),
                      "olmo2": ("model.embed_tokens.weight", "model.norm.weight")}


def probe_tensors(samples):
    """Right-padded ids [B, T] and the mask of valid positions."""
    length = max(len(s) for s in samples)
    ids = torch.zeros((len(samples), length), dtype=torch.long)
    valid = torch.zeros((len(samples), length), dtype=torch.bool)
    for row, sample in enumerate(samples):
        ids[row, :len(sample)] = torch.tensor(sample)
        valid[row, :len(sample)] = True
    return ids, valid


def head_stats(block, head, valid, lengths, causal, m):
    """Every per-head statistic of one block's head."""
    q, k, probs = block["q"], block["k"], block["probs"]
    qs = q[:, head][valid]  # [N, d_h], valid tokens of every sample
    ks = k[:, head][valid]
    q_mean, k_mean = qs.mean(0), ks.mean(0)
    entropies = []
    for row, n in enumerate(lengths):
        for i in range(n):
            p = probs[row, head, i, :(i + 1 if causal else n)]
            p = p[p > 0]
            entropies.append(-(p * p.log()).sum().item())
    dot = torch.dot(q_mean, k_mean).item()
    stats = {"q_mean_norm": q_mean.norm().item(), "k_mean_norm": k_mean.norm().item(),
             "qk_mean_dot": dot,
             "qk_mean_cosine": dot / (q_mean.norm() * k_mean.norm()).item(),
             "attn_entropy": sum(entropies) / len(entropies),
             "q_anisotropy": mean_pairwise_cosine(qs),
             "k_anisotropy": mean_pairwise_cosine(ks),
             "q_mean": q_mean.tolist(), "k_mean": k_mean.tolist()}
    if "q_pre" in block:
        stats["q_mean_pre_rotary"] = block["q_pre"][:, head][valid].mean(0).tolist()
        stats["k_mean_pre_rotary"] = block["k_pre"][:, head][valid].mean(0).tolist()
    stats.update(second_wave_reference.attention_stats(probs[:, head], lengths, causal))
    if m:
        stats["q_sample"] = second_wave_reference.token_sample(qs, m)
        stats["k_sample"] = second_wave_reference.token_sample(ks, m)
    return stats


def hidden_stats(index, h, valid, lengths):
    vectors = h[valid]
    stats = {"index": index, "anisotropy": mean_pairwise_cosine(vectors),
             "mean_norm": vectors.mean(0).norm().item()}
    stats.update(second_wave_reference.hidden_state_stats(h, valid, lengths))
    return stats


def checkpoint_stats(state, family, num_blocks):
    """The weight-only statistics: embedding partition isotropy and final norm gain."""
    embedding, gain = CHECKPOINT_WEIGHTS[family]
    return {"embed_partition_isotropy":
            second_wave_reference.partition_isotropy(param(state, embedding)),
            "final_norm_gain": param(state, gain.format(last=num_blocks - 1)).tolist()}


def compute(checkpoint_dir, samples, token_samples=128):
    cfg = json.load(open(os.path.join(checkpoint_dir, "config.json")))
    state = hf_io.load_state_dict(checkpoint_dir)
    ids, valid = probe_tensors(samples)
    lengths = [len(s) for s in samples]
    family = model_type(cfg)
    if family not in FAMILIES:
        raise ValueError(f"{checkpoint_dir}: model_type {family!r} has no reference")
    forward, causal = FAMILIES[family]
    with torch.no_grad():
        hidden, attention = forward(state, cfg, ids, valid)
    num_tokens = int(valid.sum())
    m = second_wave_reference.sample_count(token_samples, num_tokens)
    result = {"model_type": family, "num_tokens": num_tokens, "token_samples": m,
              "heads": [], "hidden_states": [], "layers": []}
    for layer, block in enumerate(attention):
        for head in range(block["q"].shape[1]):
            result["heads"].append({"layer": layer, "head": head,
                                    **head_stats(block, head, valid, lengths, causal, m)})
        result["layers"].append({"layer": layer, "qk_mean_cosine_concat":
                                 second_wave_reference.concat_mean_cosine(
                                     block["q"], block["k"], valid)})
    for index, h in enumerate(hidden):
        result["hidden_states"].append(hidden_stats(index, h, valid, lengths))
    result["correlation"] = second_wave_reference.correlation(
        [s["mean_norm"] for s in result["hidden_states"]],
        [s["anisotropy"] for s in result["hidden_states"]])
    result["isotropic_p95"] = {
        "head_dim": second_wave_reference.isotropic_p95(attention[0]["q"].shape[-1]),
        "hidden_size": second_wave_reference.isotropic_p95(hidden[0].shape[-1])}
    result.update(checkpoint_stats(state, family, len(attention)))
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="HF checkpoint directory")
    parser.add_argument("probe", help="JSON lines of token ids")
    parser.add_argument("--out", help="write JSON here instead of stdout")
    parser.add_argument("--token-samples", type=int, default=128, metavar="M",
                        help="Q/K samples per head at M fixed probe positions (0: none)")
    args = parser.parse_args()
    samples = [json.loads(line) for line in open(args.probe) if line.strip()]
    text = json.dumps(compute(args.checkpoint, samples, args.token_samples))
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()

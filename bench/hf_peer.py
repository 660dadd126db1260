#!/usr/bin/env python3
"""The Hugging Face way, as a researcher's notebook does it today: `from_pretrained` per
checkpoint, eager attention with `output_attentions=True` and `output_hidden_states=True`,
forward hooks on the query and key projections, and the metrics of METRICS.md in PyTorch
on the same device (float64 accumulation). Written from METRICS.md and transformers' model
code, never from anisoscope's C++. Uses transformers where it is installed (the GPU
image's PyTorch 2.x); without it (Debian's python3-torch on the CPU), the same eager models
in plain PyTorch from hf_style_models.py beside this file.

usage: hf_peer.py PROBE.jsonl CHECKPOINT_DIR... [--device cuda|cpu] [--batch-size 16]
                  [--threads N] [--metrics-json FILE]
Prints seconds per checkpoint (the first is a warm-up and is not counted when there are
more) and the peak GPU memory on CUDA, the process's peak RSS on the CPU; --metrics-json
writes the first checkpoint's metrics in the reference's JSON layout, for
compare_metrics.py.
"""
import argparse
import json
import os
import resource
import time

import torch

try:
    import transformers
except ImportError:
    transformers = None
    import hf_style_models


def load_probe(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def family_of(config):
    return config.model_type  # bert, gpt_neox, gpt2


def implementation():
    if transformers is None:
        return ("plain PyTorch HF-style models (bench/hf_style_models.py), "
                f"torch {torch.__version__}")
    return f"transformers {transformers.__version__}, torch {torch.__version__}"


def from_pretrained(checkpoint):
    if transformers is None:
        return hf_style_models.from_pretrained(checkpoint, dtype=torch.float32)
    try:
        return transformers.AutoModel.from_pretrained(checkpoint, attn_implementation="eager",
                                                      dtype=torch.float32)
    except TypeError:  # transformers 4.x names it torch_dtype
        return transformers.AutoModel.from_pretrained(checkpoint, attn_implementation="eager",
                                                      torch_dtype=torch.float32)


def load_model(checkpoint, device):
    return from_pretrained(checkpoint).to(device).eval()


def peak_memory(device):
    """Peak GPU memory since the last reset on CUDA; the process's peak RSS on the CPU."""
    if device.startswith("cuda"):
        return f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB"
    return f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB"


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def neox_rotary(x, config):
    """GPT-NeoX rotary on the first rotary_pct of each head, positions 0 … T-1; x [B, T, H, dh]."""
    head_dim = x.shape[-1]
    rot = int(head_dim * getattr(config, "rotary_pct", 0.25))
    base = getattr(config, "rotary_emb_base", None) or getattr(config, "rope_theta", 10000)
    inv_freq = 1.0 / (base ** (torch.arange(0, rot, 2, device=x.device, dtype=torch.float32) / rot))
    t = torch.arange(x.shape[1], device=x.device, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None, :, None, :], emb.sin()[None, :, None, :]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)


class Accumulator:
    """Σx and Σx̂ over valid tokens, per group (head), in float64."""

    def __init__(self, groups, dim, device):
        self.sum = torch.zeros(groups, dim, dtype=torch.float64, device=device)
        self.unit = torch.zeros(groups, dim, dtype=torch.float64, device=device)
        self.count = 0

    def add(self, x, valid):  # x [B, T, G, d], valid [B, T] bool
        v = x[valid].double()  # [N, G, d]
        self.sum += v.sum(0)
        self.unit += (v / v.norm(dim=-1, keepdim=True).clamp_min(1e-300)).sum(0)
        self.count += v.shape[0]

    def mean(self):
        return self.sum / self.count

    def anisotropy(self):
        n = self.count
        return ((self.unit ** 2).sum(-1) - n) / (n * (n - 1))


def split_qk(family, output, config):
    """The query and key vectors [B, T, H, dh] that enter QK^T, from the hooked projection."""
    heads = config.num_attention_heads
    if family == "bert":
        return None  # hooked separately on query and key
    b, t, _ = output.shape
    if family == "gpt_neox":
        qkv = output.view(b, t, heads, -1)
        dh = qkv.shape[-1] // 3
        q, k = qkv[..., :dh], qkv[..., dh:2 * dh]
        return q, k
    d = config.hidden_size
    q, k, _ = output.split(d, dim=-1)
    return q.view(b, t, heads, -1), k.view(b, t, heads, -1)


def analyse(checkpoint, samples, device, batch_size):
    model = load_model(checkpoint, device)
    config = model.config
    family = family_of(config)
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    dh = config.hidden_size // heads
    queries = [Accumulator(heads, dh, device) for _ in range(layers)]
    keys = [Accumulator(heads, dh, device) for _ in range(layers)]
    pre_q = [Accumulator(heads, dh, device) for _ in range(layers)]
    pre_k = [Accumulator(heads, dh, device) for _ in range(layers)]
    hidden = [Accumulator(1, config.hidden_size, device) for _ in range(layers + 1)]
    entropy = torch.zeros(layers, heads, dtype=torch.float64, device=device)
    captured = {}

    def hook(layer, name):
        def record(module, args, output):
            captured[(layer, name)] = output
        return record

    handles = []
    for layer in range(layers):
        if family == "bert":
            attention = model.encoder.layer[layer].attention.self
            handles.append(attention.query.register_forward_hook(hook(layer, "q")))
            handles.append(attention.key.register_forward_hook(hook(layer, "k")))
        elif family == "gpt_neox":
            handles.append(model.layers[layer].attention.query_key_value.register_forward_hook(
                hook(layer, "qkv")))
        else:
            handles.append(model.h[layer].attn.c_attn.register_forward_hook(hook(layer, "qkv")))

    order = sorted(range(len(samples)), key=lambda i: -len(samples[i]))
    with torch.inference_mode():
        for first in range(0, len(order), batch_size):
            batch = [samples[i] for i in order[first:first + batch_size]]
            length = max(len(s) for s in batch)
            ids = torch.zeros(len(batch), length, dtype=torch.long)
            valid = torch.zeros(len(batch), length, dtype=torch.bool)
            for row, sample in enumerate(batch):
                ids[row, :len(sample)] = torch.tensor(sample)
                valid[row, :len(sample)] = True
            ids, valid = ids.to(device), valid.to(device)
            out = model(input_ids=ids, attention_mask=valid.long(), output_attentions=True,
                        output_hidden_states=True)
            for index, state in enumerate(out.hidden_states):
                hidden[index].add(state.unsqueeze(2), valid)
            for layer in range(layers):
                if family == "bert":
                    b, t, _ = captured[(layer, "q")].shape
                    q = captured[(layer, "q")].view(b, t, heads, dh)
                    k = captured[(layer, "k")].view(b, t, heads, dh)
                else:
                    q, k = split_qk(family, captured[(layer, "qkv")], config)
                if family == "gpt_neox":
                    pre_q[layer].add(q, valid)
                    pre_k[layer].add(k, valid)
                    q, k = neox_rotary(q, config), neox_rotary(k, config)
                queries[layer].add(q, valid)
                keys[layer].add(k, valid)
                p = out.attentions[layer].double()  # [B, H, T, T]
                h = -(torch.special.xlogy(p, p)).sum(-1)  # [B, H, T]
                entropy[layer] += (h * valid[:, None, :]).sum((0, 2))
            captured.clear()
    for handle in handles:
        handle.remove()

    tokens = hidden[0].count
    result = {"num_tokens": tokens, "heads": [], "hidden_states": []}
    entropy = (entropy / tokens).cpu()
    for layer in range(layers):
        qm, km = queries[layer].mean().cpu(), keys[layer].mean().cpu()
        qa, ka = queries[layer].anisotropy().cpu(), keys[layer].anisotropy().cpu()
        pq = pre_q[layer].mean().cpu() if family == "gpt_neox" else None
        pk = pre_k[layer].mean().cpu() if family == "gpt_neox" else None
        for head in range(heads):
            q, k = qm[head], km[head]
            dot = float(q @ k)
            record = {"layer": layer, "head": head, "q_mean_norm": float(q.norm()),
                      "k_mean_norm": float(k.norm()), "qk_mean_dot": dot,
                      "qk_mean_cosine": dot / float(q.norm() * k.norm()),
                      "attn_entropy": float(entropy[layer, head]),
                      "q_anisotropy": float(qa[head]), "k_anisotropy": float(ka[head]),
                      "q_mean": q.tolist(), "k_mean": k.tolist()}
            if pq is not None:
                record["q_mean_pre_rotary"] = pq[head].tolist()
                record["k_mean_pre_rotary"] = pk[head].tolist()
            result["heads"].append(record)
    for index, acc in enumerate(hidden):
        result["hidden_states"].append({"index": index, "anisotropy": float(acc.anisotropy()[0]),
                                        "mean_norm": float(acc.mean()[0].norm())})
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("probe")
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                        help="torch.set_num_threads (default: every core, as extract_bench; "
                             "Debian's torch would use 1)")
    parser.add_argument("--metrics-json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"hf_peer: {implementation()}, {args.device}, {torch.get_num_threads()} thread(s)",
          flush=True)
    samples = load_probe(args.probe)
    times = []
    for index, checkpoint in enumerate(args.checkpoints):
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        metrics = analyse(checkpoint, samples, args.device, args.batch_size)
        seconds = time.perf_counter() - start
        times.append(seconds)
        print(f"hf_peer: {checkpoint}: {seconds:.3f} s, {peak_memory(args.device)}", flush=True)
        if index == 0 and args.metrics_json:
            with open(args.metrics_json, "w") as f:
                json.dump(metrics, f)
    counted = times[1:] if len(times) > 1 else times
    print(f"hf_peer: {len(counted)} timed checkpoint(s), {sum(counted) / len(counted):.3f} s per "
          f"checkpoint ({implementation()}, batch {args.batch_size})")


if __name__ == "__main__":
    main()

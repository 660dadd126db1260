"""Float64 forward of Hugging Face GPT2Model (eval mode), for metrics_reference.py.

Written from the behaviour of transformers' modeling_gpt2.py, not from the C++ engine:
  - wte[ids] + wpe[0 … T-1]; pre-LayerNorm blocks (ln_1, attn, ln_2, mlp), ln_f at the end;
  - Conv1D layers compute x @ W + b with W stored [in, out]; c_attn's output columns are
    q | k | v (d each), every one split into heads of d_h;
  - attention logits q . k, divided by sqrt(d_h) when scale_attn_weights (default true) and
    also by (layer_idx + 1) when scale_attn_by_inverse_layer_idx; causal mask, padding
    mask, softmax (reorder_and_upcast_attn changes only the float32 rounding order);
  - activation_function (gelu_new by default);
  - output_hidden_states: the input of every block, then ln_f(last output).
"""
import math

import torch

from gpt_neox_reference import activation, attention_bias, layer_norm, tensor


def conv1d(x, state, name):
    return x @ tensor(state, name + ".weight") + tensor(state, name + ".bias")


def forward(state, cfg, ids, valid):
    """hidden_states (L+1 tensors [B,T,D]) and per block a dict with q, k, probs."""
    b, t = ids.shape
    d = cfg["n_embd"]
    heads = cfg["n_head"]
    dh = d // heads
    eps = cfg.get("layer_norm_epsilon", 1e-5)
    act = cfg.get("activation_function", "gelu_new")
    bias = attention_bias(valid)

    h = (tensor(state, "transformer.wte.weight")[ids]
         + tensor(state, "transformer.wpe.weight")[torch.arange(t)])
    hidden, attention = [], []
    for layer in range(cfg["n_layer"]):
        p = f"transformer.h.{layer}."
        hidden.append(h)
        qkv = conv1d(layer_norm(h, state, p + "ln_1", eps), state, p + "attn.c_attn")
        split = lambda x: x.view(b, t, heads, dh).permute(0, 2, 1, 3)  # noqa: E731
        q, k, v = (split(part) for part in qkv.split(d, dim=-1))
        scores = q @ k.transpose(-1, -2)
        if cfg.get("scale_attn_weights", True):
            scores = scores / math.sqrt(dh)
        if cfg.get("scale_attn_by_inverse_layer_idx", False):
            scores = scores / float(layer + 1)
        probs = torch.softmax(scores + bias, dim=-1)
        attention.append({"q": q, "k": k, "probs": probs})
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(b, t, d)
        h = h + conv1d(ctx, state, p + "attn.c_proj")
        inner = activation(conv1d(layer_norm(h, state, p + "ln_2", eps), state, p + "mlp.c_fc"),
                           act)
        h = h + conv1d(inner, state, p + "mlp.c_proj")
    hidden.append(layer_norm(h, state, "transformer.ln_f", eps))
    return hidden, attention


def logits(state, hidden_last):
    """The tied LM head (wte^T), used by the fixture's training."""
    return hidden_last @ tensor(state, "transformer.wte.weight").T

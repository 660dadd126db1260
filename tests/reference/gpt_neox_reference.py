"""Float64 forward of Hugging Face GPTNeoXModel (eval mode), for metrics_reference.py.

Written from the behaviour of transformers' modeling_gpt_neox.py, not from the C++ engine:
  - embed_in, no position embeddings; rotary on the first int(d_h * rotary_pct) dims of
    every head's query and key (rotate_half convention, base rotary_emb_base);
  - the fused query_key_value output is viewed as [B, T, H, 3 * d_h]: head h's query is
    row h*3*d_h + j of the weight, its key h*3*d_h + d_h + j, its value h*3*d_h + 2*d_h + j;
  - scores (q . k) / sqrt(d_h), causal mask, then the padding mask, softmax;
  - use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x)); else y = x + attn(ln1(x)),
    y + mlp(ln2(y));
  - output_hidden_states: the input of every block, then final_layer_norm(last output).
"""
import math

import torch


def tensor(state, name):
    """Computations run in torch's default dtype: float64 under metrics_reference.py (the
    fixture's training calls these forwards in float32)."""
    return state[name].to(torch.get_default_dtype())


def layer_norm(x, state, name, eps):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], tensor(state, name + ".weight"),
                                          tensor(state, name + ".bias"), eps)


def linear(x, state, name):
    out = x @ tensor(state, name + ".weight").T
    return out + tensor(state, name + ".bias") if name + ".bias" in state else out


def activation(x, name):
    if name == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name in ("gelu_new", "gelu_fast", "gelu_pytorch_tanh"):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return torch.relu(x)
    raise ValueError(f"activation {name}")


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x, rotary_ndims, base):
    """x: [B, H, T, d_h]; positions 0 … T-1 (right padding leaves valid positions as is)."""
    if rotary_ndims == 0:
        return x
    t = x.shape[2]
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_ndims, 2).to(x.dtype) / rotary_ndims))
    freqs = torch.outer(torch.arange(t).to(x.dtype), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)  # [T, rotary_ndims]
    rot, rest = x[..., :rotary_ndims], x[..., rotary_ndims:]
    rot = rot * emb.cos() + rotate_half(rot) * emb.sin()
    return torch.cat((rot, rest), dim=-1)


def attention_bias(valid):
    """Additive mask [B, 1, T, T]: 0 where key j <= query i and j is valid, else -inf-ish."""
    t = valid.shape[1]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
    allowed = causal[None, None] & valid[:, None, None, :]
    dtype = torch.get_default_dtype()
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)


def forward(state, cfg, ids, valid):
    """hidden_states (L+1 tensors [B,T,D]) and per block a dict with q, k (after rotary),
    q_pre, k_pre (before rotary), probs ([B,H,T,T])."""
    b, t = ids.shape
    heads = cfg["num_attention_heads"]
    dh = cfg["hidden_size"] // heads
    eps = cfg.get("layer_norm_eps", 1e-5)
    rotary_ndims = int(dh * cfg.get("rotary_pct", 0.25))
    base = cfg.get("rotary_emb_base", 10000)
    parallel = cfg.get("use_parallel_residual", True)
    act = cfg.get("hidden_act", "gelu")
    bias = attention_bias(valid)

    h = tensor(state, "gpt_neox.embed_in.weight")[ids]
    hidden, attention = [], []
    for layer in range(cfg["num_hidden_layers"]):
        p = f"gpt_neox.layers.{layer}."
        hidden.append(h)
        x = layer_norm(h, state, p + "input_layernorm", eps)
        qkv = linear(x, state, p + "attention.query_key_value").view(b, t, heads, 3 * dh)
        qkv = qkv.permute(0, 2, 1, 3)  # [B, H, T, 3*d_h]
        q_pre, k_pre, v = qkv[..., :dh], qkv[..., dh:2 * dh], qkv[..., 2 * dh:]
        q = apply_rotary(q_pre, rotary_ndims, base)
        k = apply_rotary(k_pre, rotary_ndims, base)
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh) + bias, dim=-1)
        attention.append({"q": q, "k": k, "q_pre": q_pre, "k_pre": k_pre, "probs": probs})
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(b, t, heads * dh)
        attn_out = linear(ctx, state, p + "attention.dense")

        def mlp(y):
            inner = activation(linear(y, state, p + "mlp.dense_h_to_4h"), act)
            return linear(inner, state, p + "mlp.dense_4h_to_h")

        if parallel:
            h = h + attn_out + mlp(layer_norm(h, state, p + "post_attention_layernorm", eps))
        else:
            y = h + attn_out
            h = y + mlp(layer_norm(y, state, p + "post_attention_layernorm", eps))
    hidden.append(layer_norm(h, state, "gpt_neox.final_layer_norm", eps))
    return hidden, attention


def logits(state, hidden_last):
    """The LM head over the final hidden state (used by the fixture's training)."""
    return hidden_last @ tensor(state, "embed_out.weight").T

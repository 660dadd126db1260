"""Float64 forward of Hugging Face LlamaModel and Olmo2Model (eval mode), for
metrics_reference.py and the fixture's training.

Written from the behaviour of transformers' modeling_llama.py, modeling_olmo2.py and
modeling_rope_utils.py, not from the C++ engine:
  - embed_tokens, no position embeddings; rotary over the whole head (rotate_half, base
    rope_theta; rope_scaling "linear" divides inv_freq by factor, "llama3" rescales the
    low frequencies and interpolates the middle ones, "dynamic" changes nothing within
    max_position_embeddings);
  - RMSNorm: x * rsqrt(mean(x^2) + rms_norm_eps), times the weight;
  - q_proj [H*d_h, D], k_proj and v_proj [H_kv*d_h, D] (biases when attention_bias; Qwen2
    always has q/k/v biases), o_proj; key/value head j serves query heads j*n … j*n+n-1,
    n = H / H_kv (repeat_kv);
  - llama: h + attn(norm1(h)), then y + mlp(norm2(y)) with norm1 = input_layernorm and
    norm2 = post_attention_layernorm; olmo2: no input norm, h + post_attention_layernorm(
    attn(h)), then y + post_feedforward_layernorm(mlp(y)), and q_norm/k_norm over the whole
    q/k projections before the head split and the rotary;
  - mlp: down_proj(silu(gate_proj(x)) * up_proj(x));
  - scores (q . k) / sqrt(d_h), causal mask, then the padding mask, softmax;
  - output_hidden_states: the input of every block, then model.norm(last output).
"""
import math

import torch

from gpt_neox_reference import attention_bias, rotate_half


def tensor(state, name):
    for candidate in ("model." + name, name):
        if candidate in state:
            return state[candidate].to(torch.get_default_dtype())
    raise KeyError(name)


def has(state, name):
    return "model." + name in state or name in state


def rms_norm(x, state, name, eps):
    return tensor(state, name + ".weight") * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def linear(x, state, name):
    out = x @ tensor(state, name + ".weight").T
    return out + tensor(state, name + ".bias") if has(state, name + ".bias") else out


def inverse_frequencies(cfg, dim):
    theta = cfg.get("rope_theta", 10000.0)
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2).to(torch.get_default_dtype()) / dim))
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "linear":
        return inv_freq / scaling["factor"]
    if kind == "llama3":
        factor, low, high = (scaling["factor"], scaling["low_freq_factor"],
                             scaling["high_freq_factor"])
        original = scaling["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > original / low, inv_freq / factor, inv_freq)
        smooth = (original / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < original / high) & ~(wavelen > original / low)
        return torch.where(medium, smoothed, scaled)
    if kind in ("default", "dynamic"):
        return inv_freq
    raise ValueError(f"rope type {kind}")


def apply_rotary(x, inv_freq):
    """x: [B, H, T, d_h]; positions 0 … T-1."""
    freqs = torch.outer(torch.arange(x.shape[2]).to(x.dtype), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def forward(state, cfg, ids, valid):
    """hidden_states (L+1 tensors [B,T,D]) and per block a dict with q, k (after rotary; k
    repeated per query head), q_pre, k_pre (before rotary), probs ([B,H,T,T])."""
    b, t = ids.shape
    if cfg.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {cfg['hidden_act']}")
    olmo2 = cfg.get("model_type") == "olmo2"
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads") or heads
    dh = cfg.get("head_dim") or cfg["hidden_size"] // heads
    eps = cfg.get("rms_norm_eps", 1e-5 if olmo2 else 1e-6)
    inv_freq = inverse_frequencies(cfg, dh)
    bias = attention_bias(valid)

    def split(x, n):
        return x.view(b, t, n, dh).permute(0, 2, 1, 3)

    h = tensor(state, "embed_tokens.weight")[ids]
    hidden, attention = [], []
    for layer in range(cfg["num_hidden_layers"]):
        p = f"layers.{layer}."
        hidden.append(h)
        x = h if olmo2 else rms_norm(h, state, p + "input_layernorm", eps)
        q, k = linear(x, state, p + "self_attn.q_proj"), linear(x, state, p + "self_attn.k_proj")
        if olmo2:
            q = rms_norm(q, state, p + "self_attn.q_norm", eps)
            k = rms_norm(k, state, p + "self_attn.k_norm", eps)
        v = linear(x, state, p + "self_attn.v_proj")
        repeat = heads // kv_heads
        q_pre = split(q, heads)
        k_pre = split(k, kv_heads).repeat_interleave(repeat, dim=1)
        v = split(v, kv_heads).repeat_interleave(repeat, dim=1)
        q, k = apply_rotary(q_pre, inv_freq), apply_rotary(k_pre, inv_freq)
        probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(dh) + bias, dim=-1)
        attention.append({"q": q, "k": k, "q_pre": q_pre, "k_pre": k_pre, "probs": probs})
        ctx = (probs @ v).permute(0, 2, 1, 3).reshape(b, t, heads * dh)
        attn_out = linear(ctx, state, p + "self_attn.o_proj")

        def mlp(y):
            gate = linear(y, state, p + "mlp.gate_proj")
            up = linear(y, state, p + "mlp.up_proj")
            return linear(gate * torch.sigmoid(gate) * up, state, p + "mlp.down_proj")

        if olmo2:
            h = h + rms_norm(attn_out, state, p + "post_attention_layernorm", eps)
            h = h + rms_norm(mlp(h), state, p + "post_feedforward_layernorm", eps)
        else:
            h = h + attn_out
            h = h + mlp(rms_norm(h, state, p + "post_attention_layernorm", eps))
    hidden.append(rms_norm(h, state, "norm", eps))
    return hidden, attention


def logits(state, hidden_last):
    """The LM head (lm_head, or the tied input embedding) over the final hidden state."""
    head = "lm_head.weight" if "lm_head.weight" in state else "model.embed_tokens.weight"
    return hidden_last @ state[head].to(torch.get_default_dtype()).T

"""Hugging Face's eager BertModel, GPTNeoXModel and GPT2Model in plain PyTorch, and a
from_pretrained that loads their checkpoints: the peer benchmark (hf_peer.py) on machines
without transformers.

Written from Hugging Face transformers' modeling_bert.py, modeling_gpt_neox.py and
modeling_gpt2.py (eval mode, eager attention) and from_pretrained's loading rules, never
from anisoscope's C++. Modules and parameters carry HF's names, so a checkpoint's state
dict loads under the same keys and forward hooks attach to the same submodules
(encoder.layer.N.attention.self.query, layers.N.attention.query_key_value,
h.N.attn.c_attn). A forward takes input_ids and attention_mask and returns, like HF,
last_hidden_state, hidden_states (the embeddings, then every layer's output; for the causal
families the last one is after the final LayerNorm) and attentions (the softmax
probabilities [B, H, T, T]). Left out, as the peer never uses them: BERT's pooler (its
weights are ignored), past key values, head masks, relative position embeddings, autocast.
Needs only torch (1.13 or 2.x) and numpy.
"""
import contextlib
import json
import math
import os
import re
import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

# ---------------------------------------------------------------------------------------
# Configuration and outputs


# HF's config defaults for the fields these models read (BertConfig, GPTNeoXConfig,
# GPT2Config); config.json's values win.
DEFAULTS = {
    "bert": {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
             "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
             "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
             "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
             "pad_token_id": 0, "position_embedding_type": "absolute"},
    "gpt_neox": {"vocab_size": 50432, "hidden_size": 6144, "num_hidden_layers": 44,
                 "num_attention_heads": 64, "intermediate_size": 24576, "hidden_act": "gelu",
                 "rotary_pct": 0.25, "rotary_emb_base": 10000, "attention_dropout": 0.0,
                 "hidden_dropout": 0.0, "layer_norm_eps": 1e-5, "use_parallel_residual": True},
    "gpt2": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
             "n_head": 12, "n_inner": None, "activation_function": "gelu_new",
             "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1,
             "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
             "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False},
}

# Newer GPTNeoXConfig names, read when config.json lacks the older ones.
RENAMED = {"gpt_neox": {"rope_theta": "rotary_emb_base", "partial_rotary_factor": "rotary_pct"}}

# GPT2Config.attribute_map: the common names resolve to GPT-2's own.
ATTRIBUTE_MAP = {"gpt2": {"hidden_size": "n_embd", "num_attention_heads": "n_head",
                          "num_hidden_layers": "n_layer", "max_position_embeddings": "n_positions"}}


class Config:
    """config.json as attributes, over HF's defaults, with GPT-2's attribute_map."""

    def __init__(self, values):
        model_type = values.get("model_type")
        if model_type not in DEFAULTS:
            raise ValueError(f"model_type {model_type!r} is not one of {', '.join(DEFAULTS)}")
        fields = dict(DEFAULTS[model_type])
        for new, old in RENAMED.get(model_type, {}).items():
            if new in values and old not in values:
                fields[old] = values[new]
        fields.update(values)
        self.__dict__.update(fields)

    def __getattr__(self, name):  # only reached when the attribute itself is absent
        mapped = ATTRIBUTE_MAP.get(self.__dict__.get("model_type"), {}).get(name)
        if mapped is None:
            raise AttributeError(name)
        return getattr(self, mapped)


@dataclass
class BaseModelOutput:
    """HF's BaseModelOutput: hidden_states and attentions are None unless asked for."""
    last_hidden_state: torch.Tensor
    hidden_states: tuple = None
    attentions: tuple = None


# ---------------------------------------------------------------------------------------
# Pieces the three families share


def gelu_new(x):
    """HF's NewGELUActivation (GPT-2's "gelu_new"): the tanh approximation of GELU."""
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
    return 0.5 * x * (1.0 + torch.tanh(inner))


ACT2FN = {"gelu": nn.functional.gelu, "gelu_new": gelu_new, "relu": nn.functional.relu}


def extended_attention_mask(attention_mask, dtype):
    """HF's additive padding mask: [B, T] of 1/0 becomes [B, 1, 1, T] of 0 where a key is
    attended and the dtype's min value where it is padding (None stays None)."""
    if attention_mask is None:
        return None
    mask = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - mask) * torch.finfo(dtype).min


def apply_causal_mask(scores):
    """HF's causal masking of scores [.., T, T]: a query's later keys get the dtype's min."""
    length = scores.shape[-1]
    causal = torch.ones(length, length, dtype=torch.bool, device=scores.device).tril()
    mask_value = torch.full([], torch.finfo(scores.dtype).min, dtype=scores.dtype,
                            device=scores.device)
    return torch.where(causal, scores, mask_value)


def run_layers(layers, hidden_states, attention_mask, output_attentions, output_hidden_states,
               final_layer_norm=None):
    """HF's layer loop: collects each layer's input, then the (final-LayerNorm'd) output."""
    all_hidden_states, all_attentions = (), ()
    for layer in layers:
        all_hidden_states += (hidden_states,)
        hidden_states, attentions = layer(hidden_states, attention_mask)
        all_attentions += (attentions,)
    if final_layer_norm is not None:
        hidden_states = final_layer_norm(hidden_states)
    all_hidden_states += (hidden_states,)
    return BaseModelOutput(last_hidden_state=hidden_states,
                           hidden_states=all_hidden_states if output_hidden_states else None,
                           attentions=all_attentions if output_attentions else None)


# ---------------------------------------------------------------------------------------
# BERT (modeling_bert.py)


class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        if config.position_embedding_type != "absolute":
            raise NotImplementedError(
                f"position_embedding_type {config.position_embedding_type!r} (only absolute)")
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids):
        position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        token_type_ids = torch.zeros_like(input_ids)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def transpose_for_scores(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.num_attention_heads, self.attention_head_size).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(self.dropout(attention_probs), value_layer)
        b, _, t, _ = context_layer.shape
        context_layer = context_layer.permute(0, 2, 1, 3).reshape(b, t, self.all_head_size)
        return context_layer, attention_probs


class BertSelfOutput(nn.Module):
    """dense, dropout, then LayerNorm of the sum with the block's input (BertOutput too)."""

    def __init__(self, config, input_size):
        super().__init__()
        self.dense = nn.Linear(input_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config, config.hidden_size)

    def forward(self, hidden_states, attention_mask):
        context, probs = self.self(hidden_states, attention_mask)
        return self.output(context, hidden_states), probs


class BertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertSelfOutput(config, config.intermediate_size)  # HF's BertOutput

    def forward(self, hidden_states, attention_mask):
        attention_output, probs = self.attention(hidden_states, attention_mask)
        layer_output = self.output(self.intermediate(attention_output), attention_output)
        return layer_output, probs


class BertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))


class BertModel(nn.Module):
    base_model_prefix = "bert"

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)

    def forward(self, input_ids, attention_mask=None, output_attentions=False,
                output_hidden_states=False):
        embedding_output = self.embeddings(input_ids)
        mask = extended_attention_mask(attention_mask, embedding_output.dtype)
        return run_layers(self.encoder.layer, embedding_output, mask, output_attentions,
                          output_hidden_states)


# ---------------------------------------------------------------------------------------
# GPT-NeoX / Pythia (modeling_gpt_neox.py)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary_pos_emb(x, cos, sin):
    """Rotary embedding on the first cos.shape[-1] features of x [B, H, T, dh]."""
    rotary_ndims = cos.shape[-1]
    x_rot, x_pass = x[..., :rotary_ndims], x[..., rotary_ndims:]
    return torch.cat((x_rot * cos + rotate_half(x_rot) * sin, x_pass), dim=-1)


class GPTNeoXRotaryEmbedding(nn.Module):
    """cos and sin [T, dim] at positions 0 … T-1, computed in float32 (no stored buffer)."""

    def __init__(self, dim, base):
        super().__init__()
        self.dim, self.base = dim, base

    def forward(self, x, seq_len):
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2, device=x.device,
                                                     dtype=torch.float32) / self.dim))
        t = torch.arange(seq_len, device=x.device, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class GPTNeoXAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.head_size = config.hidden_size // config.num_attention_heads
        self.rotary_ndims = int(self.head_size * config.rotary_pct)
        self.rotary_emb = GPTNeoXRotaryEmbedding(self.rotary_ndims, config.rotary_emb_base)
        self.norm_factor = math.sqrt(self.head_size)
        self.query_key_value = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.attention_dropout = nn.Dropout(config.attention_dropout)

    def forward(self, hidden_states, attention_mask):
        b, t, _ = hidden_states.shape
        qkv = self.query_key_value(hidden_states).view(b, t, self.num_attention_heads,
                                                       3 * self.head_size)
        query = qkv[..., :self.head_size].permute(0, 2, 1, 3)
        key = qkv[..., self.head_size:2 * self.head_size].permute(0, 2, 1, 3)
        value = qkv[..., 2 * self.head_size:].permute(0, 2, 1, 3)
        cos, sin = self.rotary_emb(value, seq_len=t)
        query, key = apply_rotary_pos_emb(query, cos, sin), apply_rotary_pos_emb(key, cos, sin)
        attn_output, attn_weights = self._attn(query, key, value, attention_mask)
        attn_output = attn_output.permute(0, 2, 1, 3).reshape(b, t, -1)
        return self.dense(attn_output), attn_weights

    def _attn(self, query, key, value, attention_mask):
        b, h, t, d = query.shape
        attn_scores = torch.zeros(b * h, t, t, dtype=query.dtype, device=query.device)
        attn_scores = torch.baddbmm(attn_scores, query.reshape(b * h, t, d),
                                    key.reshape(b * h, t, d).transpose(1, 2),
                                    beta=1.0, alpha=1.0 / self.norm_factor)
        attn_scores = apply_causal_mask(attn_scores.view(b, h, t, t))
        if attention_mask is not None:
            attn_scores = attn_scores + attention_mask
        attn_weights = nn.functional.softmax(attn_scores, dim=-1).to(value.dtype)
        return torch.matmul(self.attention_dropout(attn_weights), value), attn_weights


class GPTNeoXMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense_h_to_4h = nn.Linear(config.hidden_size, config.intermediate_size)
        self.dense_4h_to_h = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = ACT2FN[config.hidden_act]

    def forward(self, hidden_states):
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(hidden_states)))


class GPTNeoXLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.use_parallel_residual = config.use_parallel_residual
        self.input_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.post_attention_dropout = nn.Dropout(config.hidden_dropout)
        self.post_mlp_dropout = nn.Dropout(config.hidden_dropout)
        self.attention = GPTNeoXAttention(config)
        self.mlp = GPTNeoXMLP(config)

    def forward(self, hidden_states, attention_mask):
        attn_output, attn_weights = self.attention(self.input_layernorm(hidden_states),
                                                   attention_mask)
        attn_output = self.post_attention_dropout(attn_output)
        if self.use_parallel_residual:  # x + attn(ln1(x)) + mlp(ln2(x))
            mlp_output = self.mlp(self.post_attention_layernorm(hidden_states))
            hidden_states = self.post_mlp_dropout(mlp_output) + attn_output + hidden_states
        else:  # x = x + attn(ln1(x)); x + mlp(ln2(x))
            attn_output = attn_output + hidden_states
            mlp_output = self.mlp(self.post_attention_layernorm(attn_output))
            hidden_states = self.post_mlp_dropout(mlp_output) + attn_output
        return hidden_states, attn_weights


class GPTNeoXModel(nn.Module):
    base_model_prefix = "gpt_neox"

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_in = nn.Embedding(config.vocab_size, config.hidden_size)
        self.emb_dropout = nn.Dropout(config.hidden_dropout)
        self.layers = nn.ModuleList(GPTNeoXLayer(config) for _ in range(config.num_hidden_layers))
        self.final_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, input_ids, attention_mask=None, output_attentions=False,
                output_hidden_states=False):
        hidden_states = self.emb_dropout(self.embed_in(input_ids))
        mask = extended_attention_mask(attention_mask, hidden_states.dtype)
        return run_layers(self.layers, hidden_states, mask, output_attentions,
                          output_hidden_states, self.final_layer_norm)


# ---------------------------------------------------------------------------------------
# GPT-2, with the CRFM/Mistral options (modeling_gpt2.py)


class Conv1D(nn.Module):
    """HF's Conv1D: a linear layer whose weight is stored [in, out]."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.shape[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight)
        return x.view(size_out)


class GPT2Attention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.embed_dim = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scale_attn_weights = config.scale_attn_weights
        self.scale_attn_by_inverse_layer_idx = config.scale_attn_by_inverse_layer_idx
        self.reorder_and_upcast_attn = config.reorder_and_upcast_attn
        self.layer_idx = layer_idx
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def _split_heads(self, tensor):
        b, t, _ = tensor.shape
        return tensor.view(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def _attn(self, query, key, value, attention_mask):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full([], value.shape[-1] ** 0.5,
                                                     dtype=attn_weights.dtype,
                                                     device=attn_weights.device)
        if self.scale_attn_by_inverse_layer_idx:
            attn_weights = attn_weights / float(self.layer_idx + 1)
        return self._softmax_and_values(attn_weights, value, attention_mask)

    def _upcast_and_reordered_attn(self, query, key, value, attention_mask):
        """Scaling folded into one float32 baddbmm before QK^T is summed (the Mistral option)."""
        b, h, t, d = query.shape
        scale_factor = 1.0
        if self.scale_attn_weights:
            scale_factor /= float(value.shape[-1]) ** 0.5
        if self.scale_attn_by_inverse_layer_idx:
            scale_factor /= float(self.layer_idx + 1)
        attn_weights = torch.empty(b * h, t, t, dtype=torch.float32, device=query.device)
        q = query.reshape(-1, t, d).float()
        k = key.transpose(-1, -2).reshape(-1, d, t).float()
        attn_weights = torch.baddbmm(attn_weights, q, k, beta=0, alpha=scale_factor)
        return self._softmax_and_values(attn_weights.reshape(b, h, t, t), value, attention_mask)

    def _softmax_and_values(self, attn_weights, value, attention_mask):
        attn_weights = apply_causal_mask(attn_weights)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1).type(value.dtype)
        return torch.matmul(self.attn_dropout(attn_weights), value), attn_weights

    def forward(self, hidden_states, attention_mask):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query, key, value = (self._split_heads(x) for x in (query, key, value))
        attend = self._upcast_and_reordered_attn if self.reorder_and_upcast_attn else self._attn
        attn_output, attn_weights = attend(query, key, value, attention_mask)
        b, _, t, _ = attn_output.shape
        attn_output = attn_output.permute(0, 2, 1, 3).reshape(b, t, self.embed_dim)
        return self.resid_dropout(self.c_proj(attn_output)), attn_weights


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, config):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, config.hidden_size)
        self.c_proj = Conv1D(config.hidden_size, intermediate_size)
        self.act = ACT2FN[config.activation_function]
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states):
        return self.dropout(self.c_proj(self.act(self.c_fc(hidden_states))))


class GPT2Block(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        inner_dim = config.n_inner if config.n_inner is not None else 4 * config.hidden_size
        self.ln_1 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config, layer_idx)
        self.ln_2 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(inner_dim, config)

    def forward(self, hidden_states, attention_mask):
        attn_output, attn_weights = self.attn(self.ln_1(hidden_states), attention_mask)
        hidden_states = attn_output + hidden_states
        hidden_states = hidden_states + self.mlp(self.ln_2(hidden_states))
        return hidden_states, attn_weights


class GPT2Model(nn.Module):
    base_model_prefix = "transformer"

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        self.wpe = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList(GPT2Block(config, i) for i in range(config.num_hidden_layers))
        self.ln_f = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)

    def forward(self, input_ids, attention_mask=None, output_attentions=False,
                output_hidden_states=False):
        position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        hidden_states = self.drop(self.wte(input_ids) + self.wpe(position_ids))
        mask = extended_attention_mask(attention_mask, hidden_states.dtype)
        return run_layers(self.h, hidden_states, mask, output_attentions, output_hidden_states,
                          self.ln_f)


MODELS = {"bert": BertModel, "gpt_neox": GPTNeoXModel, "gpt2": GPT2Model}

# ---------------------------------------------------------------------------------------
# Loading (from_pretrained)

# HF's order of preference among a checkpoint directory's weight files.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")

# safetensors dtype: (little-endian numpy dtype it is read as, torch dtype it is viewed as).
SAFETENSORS_DTYPES = {"F64": ("<f8", None), "F32": ("<f4", None), "F16": ("<f2", None),
                      "BF16": ("<i2", torch.bfloat16), "I64": ("<i8", None)}

# Stored keys the models compute themselves, or whose module is left out: dropped quietly.
IGNORED_KEYS = re.compile(r"^pooler\.|^embeddings\.(position_ids|token_type_ids)$"
                          r"|\.(attn|attention)\.(bias|masked_bias)$|\.rotary_emb\.inv_freq$")

# HF's init functions, made no-ops while a model is built for weights that will be loaded.
TORCH_INIT_FUNCTIONS = ("uniform_", "normal_", "trunc_normal_", "constant_", "xavier_uniform_",
                        "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "zeros_", "ones_")


def load_config(directory):
    with open(os.path.join(directory, "config.json")) as f:
        return Config(json.load(f))


def read_safetensors(path):
    """A .safetensors file's tensors: an 8-byte little-endian header length, a JSON header
    {name: {dtype, shape, data_offsets}} (plus __metadata__), then the raw little-endian
    data, the offsets counted from its start."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    header_length = int(raw[:8].view("<u8")[0]) if len(raw) >= 8 else None
    if header_length is None or 8 + header_length > len(raw):
        raise ValueError(f"{path}: its safetensors header runs past the end of the file")
    header = json.loads(bytes(raw[8:8 + header_length]))
    data = raw[8 + header_length:]
    return {name: safetensors_tensor(path, name, entry, data)
            for name, entry in header.items() if name != "__metadata__"}


def safetensors_tensor(path, name, entry, data):
    """One tensor, copied out of the file's data into native byte order."""
    if entry["dtype"] not in SAFETENSORS_DTYPES:
        raise ValueError(f"{path}: {name}: dtype {entry['dtype']} is not supported")
    stored, view_as = SAFETENSORS_DTYPES[entry["dtype"]]
    start, end = entry["data_offsets"]
    if end - start != math.prod(entry["shape"]) * np.dtype(stored).itemsize or end > len(data):
        raise ValueError(f"{path}: {name}: data_offsets {start}..{end} do not fit its shape "
                         f"{entry['shape']} and the file")
    array = np.array(data[start:end].view(stored), dtype=np.dtype(stored).newbyteorder("="))
    tensor = torch.from_numpy(array.reshape(entry["shape"]))
    return tensor.view(view_as) if view_as is not None else tensor


def read_weight_file(path):
    if path.endswith(".safetensors"):
        return read_safetensors(path)
    return torch.load(path, map_location="cpu", weights_only=True)


def read_state_dict(directory):
    """The checkpoint's tensors in their stored dtype, from its first weight file in HF's
    order of preference (every shard of a sharded one)."""
    for name in WEIGHT_FILES:
        path = os.path.join(directory, name)
        if os.path.exists(path):
            break
    else:
        raise FileNotFoundError(f"{directory}: none of {', '.join(WEIGHT_FILES)}")
    if not name.endswith(".index.json"):
        return read_weight_file(path)
    with open(path) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    state = {}
    for shard in shards:
        state.update(read_weight_file(os.path.join(directory, shard)))
    return state


def base_model_state(state, prefix, expected):
    """HF's loading of a checkpoint into the base model. When its keys carry the base model's
    prefix (saved from a *ForMaskedLM / *ForCausalLM / LMHead wrapper), those lose it and
    the head's keys (cls.*, embed_out.*, lm_head.*) are dropped; legacy LayerNorm gamma/beta
    become weight/bias; stored buffers (IGNORED_KEYS) are dropped, and any other key the
    model lacks is dropped with a warning."""
    if any(key.startswith(prefix + ".") for key in state):
        state = {key[len(prefix) + 1:]: value for key, value in state.items()
                 if key.startswith(prefix + ".")}
    state = {re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key)): value
             for key, value in state.items()}
    unexpected = [key for key in state if key not in expected and not IGNORED_KEYS.search(key)]
    if unexpected:
        warnings.warn(f"weights not used by the {prefix} base model: {', '.join(unexpected)}")
    return {key: value for key, value in state.items() if key in expected}


@contextlib.contextmanager
def no_init_weights():
    """HF's no_init_weights: skip random initialisation of weights the checkpoint replaces."""
    saved = {name: getattr(nn.init, name) for name in TORCH_INIT_FUNCTIONS}
    for name in TORCH_INIT_FUNCTIONS:
        setattr(nn.init, name, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(nn.init, name, function)


def from_pretrained(directory, dtype=torch.float32):
    """AutoModel.from_pretrained(directory, torch_dtype=dtype) for bert, gpt_neox and gpt2:
    the base model in dtype, its weights read in their stored dtype and converted as they
    are copied in, in eval mode. A weight the checkpoint lacks is an error (HF would
    initialise it randomly)."""
    config = load_config(directory)
    model_class = MODELS[config.model_type]
    with no_init_weights():
        model = model_class(config)
    model.to(dtype)
    expected = set(model.state_dict())
    model.load_state_dict(base_model_state(read_state_dict(directory),
                                           model_class.base_model_prefix, expected))
    return model.eval()

"""Hugging Face import handlers for the state-space architectures: Mamba (Mamba-1), Mamba-2, Jamba (Mamba-1 and
attention layers, MoE every other layer) and Falcon-H1 (attention and a Mamba-2 mixer side by side in every
layer).

Keys, defaults and semantics from huggingface/transformers: MambaConfig / MambaMixer
(src/transformers/models/mamba/, configuration_mamba.py @ 00328d4e5b22c29e40d28b27c2a99cd7d0c5c14e),
Mamba2Config / Mamba2Mixer (models/mamba2/, configuration_mamba2.py @ f2a39d495c8c365996a33c6ae9506ad9c9339f4b),
JambaConfig / JambaDecoderLayer (models/jamba/, configuration_jamba.py @ 161d2bed0075063d3c6f605e370b87bd097ff2b4),
FalconH1Config / FalconH1DecoderLayer (models/falcon_h1/, configuration_falcon_h1.py @
7abb76c59ed6042dde3b0046841dfa69643e96cd).

Pure Mamba models have no position limit and their configs no max_position_embeddings: the import writes
NO_POSITION_LIMIT (2^20 tokens) so that the planner's context cap does not bind.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from roofline.catalogue.hfconfig import _Config, _core, _full, _shortest_cycle

NO_POSITION_LIMIT = 1 << 20
MAMBA1_BLOCK = 64  # channels per 'head' of a Mamba-1 layer (specs.model.LinearAttention: any blocking is exact)


def _dt_rank(cfg: _Config, key: str, hidden: int) -> int:
    """time_step_rank / mamba_dt_rank: an integer, or 'auto' = ceil(hidden_size / 16) (MambaConfig, JambaConfig)."""
    value = cfg.data.get(key, "auto")
    return math.ceil(hidden / 16) if value == "auto" else cfg.integer(key)


def _mamba1_shape(inner: int, d_state: int, kernel: int, dt_rank: int) -> dict[str, Any]:
    """A Mamba-1 mixer of `inner` channels as LinearAttention (blocks of MAMBA1_BLOCK channels)."""
    block = MAMBA1_BLOCK if inner % MAMBA1_BLOCK == 0 else 1
    return {"kind": "mamba1", "key_heads": 1, "value_heads": inner // block, "key_head_dim": d_state,
            "value_head_dim": block, "conv_kernel": kernel, "dt_rank": dt_rank}


def _pure(cfg: _Config, linear: dict[str, Any], inner: int) -> dict[str, Any]:
    """Fields of a model made of mixers only (norm, mixer, residual): no MLP, one norm per layer; the attention
    fields name the mixer's heads (nothing attends)."""
    return {
        "num_layers": cfg.integer("num_hidden_layers"), "hidden_size": cfg.integer("hidden_size"),
        "num_heads": linear["value_heads"], "num_kv_heads": linear["value_heads"],
        "head_dim": linear["value_head_dim"], "intermediate_size": inner, "vocab_size": cfg.integer("vocab_size"),
        "mlp": "none", "norms_per_layer": 1, "max_position_embeddings": NO_POSITION_LIMIT,
        "attention": [{"kind": "linear"}], "linear_attention": linear,
    }


def _mamba(cfg: _Config) -> dict[str, Any]:
    """Mamba-1 (MambaForCausalLM, e.g. state-spaces/mamba-2.8b-hf): d_inner = intermediate_size (MambaMixer's
    width; MambaConfig saves int(expand x hidden_size) there, and a config may set it apart), else expand (2) x
    hidden_size; state_size (16) per channel, conv_kernel (4), time_step_rank ('auto'); tied embeddings by default
    (PretrainedConfig)."""
    hidden = cfg.integer("hidden_size")
    inner = cfg.integer("intermediate_size") if cfg.has("intermediate_size") else cfg.integer("expand", 2) * hidden
    linear = _mamba1_shape(inner, cfg.integer("state_size", 16), cfg.integer("conv_kernel", 4),
                           _dt_rank(cfg, "time_step_rank", hidden))
    return _pure(cfg, linear, inner) | {"tie_word_embeddings": cfg.flag("tie_word_embeddings", True)}


def _mamba2(cfg: _Config) -> dict[str, Any]:
    """Mamba-2 (Mamba2ForCausalLM, e.g. mistralai/Mamba-Codestral-7B-v0.1): num_heads x head_dim =
    expand x hidden_size, n_groups of B and C of state_size, conv over x, B, C (Mamba2Mixer conv_dim), untied
    embeddings by default (Mamba2Config)."""
    hidden, heads, head_dim = cfg.integer("hidden_size"), cfg.integer("num_heads"), cfg.integer("head_dim")
    inner = cfg.integer("expand", 2) * hidden
    if heads * head_dim != inner:
        raise cfg.error("num_heads", f"{heads} x head_dim {head_dim} != expand x hidden_size {inner}")
    groups = cfg.integer("n_groups", 1)
    if heads % groups:
        raise cfg.error("n_groups", f"{groups} does not divide num_heads {heads}")
    linear = {"kind": "mamba2", "key_heads": groups, "value_heads": heads, "key_head_dim": cfg.integer("state_size"),
              "value_head_dim": head_dim, "conv_kernel": cfg.integer("conv_kernel", 4)}
    return _pure(cfg, linear, inner) | {"tie_word_embeddings": cfg.flag("tie_word_embeddings", False)}


def _layer_flags(cfg: _Config, n: int, period_key: str, offset_key: str, period: int, offset: int) -> list[bool]:
    """Jamba's periodic layer choice: layer i is picked when i % period == offset."""
    every, at = cfg.integer(period_key, period), cfg.integer(offset_key, offset, minimum=0)
    if at >= every:
        raise cfg.error(offset_key, f"{at} must be below {period_key} {every}")
    return [i % every == at for i in range(n)]


def _jamba(cfg: _Config) -> dict[str, Any]:
    """Jamba: layer i is attention when i % attn_layer_period (8) == attn_layer_offset (4), else a Mamba-1
    mixer (mamba_expand 2, mamba_d_state 16, mamba_d_conv 4, mamba_dt_rank 'auto'); its MLP is MoE
    (num_experts of intermediate_size, top num_experts_per_tok) when i % expert_layer_period (2) ==
    expert_layer_offset (1), else dense. Two norms per layer; GQA without bias (JambaConfig defaults). Each Mamba
    mixer also normalises its dt, B and C (JambaMambaMixer dt_layernorm, b_layernorm, c_layernorm: RMSNorms of
    dt_rank, d_state and d_state weights), parameters outside the Model's groups: model_extra_params."""
    fields = _core(cfg, kv_default_heads=True)
    n, hidden = fields["num_layers"], fields["hidden_size"]
    attends = _layer_flags(cfg, n, "attn_layer_period", "attn_layer_offset", 8, 4)
    attention = _shortest_cycle([_full() if a else {"kind": "linear"} for a in attends])
    inner = cfg.integer("mamba_expand", 2) * hidden
    state, rank = cfg.integer("mamba_d_state", 16), _dt_rank(cfg, "mamba_dt_rank", hidden)
    linear = _mamba1_shape(inner, state, cfg.integer("mamba_d_conv", 4), rank)
    _layer_flags(cfg, n, "expert_layer_period", "expert_layer_offset", 2, 1)  # checks the pair
    moe = {"num_experts": cfg.integer("num_experts"), "experts_per_token": cfg.integer("num_experts_per_tok"),
           "expert_intermediate_size": fields["intermediate_size"],
           "layer_period": cfg.integer("expert_layer_period", 2),
           "layer_offset": cfg.integer("expert_layer_offset", 1, minimum=0)}
    if cfg.has("sliding_window"):
        raise cfg.error("sliding_window", "not supported for Jamba (only null: full attention)")
    norms = (n - sum(attends)) * (rank + 2 * state)  # the mixers' dt / B / C RMSNorm weights
    return fields | {"attention": attention, "linear_attention": linear, "moe": moe, "model_extra_params": norms}


def _falcon_h1(cfg: _Config) -> dict[str, Any]:
    """Falcon-H1: every layer runs GQA attention and a Mamba-2 mixer side by side on one normed input
    (FalconH1DecoderLayer: input_layernorm, then self_attn + mamba, summed; pre_ff_layernorm, SwiGLU MLP).
    The mixer: mamba_n_heads heads of mamba_d_head (mamba_d_ssm = their product, default expand x hidden),
    mamba_n_groups of B and C of mamba_d_state, conv mamba_d_conv; explicit head_dim for attention. The mixer's
    gated RMSNorm exists only with mamba_rms_norm (default false: FalconH1Mixer's norm is nn.Identity and the gate
    multiplies the scan output)."""
    fields = _core(cfg, kv_default_heads=True)  # head_dim absent: hidden / heads (FalconH1Attention)
    heads = cfg.integer("mamba_n_heads")
    inner = cfg.integer("mamba_d_ssm", cfg.integer("mamba_expand", 2) * fields["hidden_size"])
    head_dim = cfg.integer("mamba_d_head", inner // heads) if cfg.data.get("mamba_d_head") != "auto" \
        else inner // heads
    if heads * head_dim != inner:
        raise cfg.error("mamba_d_head", f"{head_dim} x mamba_n_heads {heads} != mamba_d_ssm {inner}")
    groups = cfg.integer("mamba_n_groups", 1)
    if heads % groups:
        raise cfg.error("mamba_n_groups", f"{groups} does not divide mamba_n_heads {heads}")
    linear = {"kind": "mamba2", "key_heads": groups, "value_heads": heads,
              "key_head_dim": cfg.integer("mamba_d_state", 256), "value_head_dim": head_dim,
              "conv_kernel": cfg.integer("mamba_d_conv", 4), "gated_norm": cfg.flag("mamba_rms_norm", False)}
    return fields | {"attention": [_full()], "linear_attention": linear, "linear_parallel": True,
                     "qkv_bias": cfg.flag("projectors_bias", False)}


ARCHITECTURES_SSM: dict[str, Callable[[_Config], dict[str, Any]]] = {
    "MambaForCausalLM": _mamba,
    "Mamba2ForCausalLM": _mamba2,
    "JambaForCausalLM": _jamba,
    "FalconH1ForCausalLM": _falcon_h1,
}

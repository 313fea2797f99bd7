"""A gpt-fast-style decoder in plain torch, built from roofline's Model spec with random bf16 weights.

Fused QKV and gate/up weights, RMSNorm, RoPE, scaled_dot_product_attention with enable_gqa=True over a
static KV cache, SiLU x up, and (MoE) top-k routing through torch._grouped_mm over experts sorted by token.
The residual stream is carried vLLM-style: each layer starts with `residual += x; h = norm(residual)`, so
a compiled layer fuses the add into the norm. One decoder layer is one function of (activations, weights,
caches): compiled once (dynamic shapes) and reused for every layer, or run eagerly, each aten op its own
kernel. A whole step (embedding, layers, final norm, LM head of the last position) is captured in a CUDA
graph and timed by its replays.

Shapes: x [B, S, d]; caches [B, Hkv, Lc, Dh]; decode S = 1 at position Lc - 1 (the cache holds exactly
the context, so attention reads all of it, no mask); prefill S = P into a cache of P, causal.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

ROPE_THETA = 500_000.0
EPS = 1e-5
INIT_STD = 0.02


@dataclass(frozen=True)
class Dims:
    """The decoder shapes, from a roofline Model (or the same fields in a dict)."""

    layers: int
    d: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int
    tie: bool
    qkv_bias: bool
    qk_norm: bool
    experts: int = 0
    top_k: int = 0
    expert_inter: int = 0

    @classmethod
    def of(cls, model, layers: int | None = None) -> Dims:
        """Dims of a roofline Model (pydantic) or its model_dump(); `layers` overrides the layer count."""
        m = model if isinstance(model, dict) else model.model_dump()
        if m.get("mla") is not None:
            raise ValueError("model: MLA models are not built by this client")
        moe = m.get("moe") or {}
        return cls(layers=layers or m["num_layers"], d=m["hidden_size"], heads=m["num_heads"],
                   kv_heads=m["num_kv_heads"], head_dim=m["head_dim"], inter=m["intermediate_size"],
                   vocab=m["vocab_size"], tie=m["tie_word_embeddings"], qkv_bias=m.get("qkv_bias", False),
                   qk_norm=m.get("qk_norm", False), experts=moe.get("num_experts", 0),
                   top_k=moe.get("experts_per_token", 0), expert_inter=moe.get("expert_intermediate_size", 0))

    @property
    def q(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv(self) -> int:
        return self.kv_heads * self.head_dim


def _rand(*shape, device, dtype, std=INIT_STD) -> torch.Tensor:
    return torch.empty(*shape, device=device, dtype=dtype).normal_(0.0, std)


def layer_weights(dims: Dims, device, dtype=torch.bfloat16) -> dict[str, torch.Tensor]:
    """One layer's weights ([out, in] as F.linear takes them; MoE experts [E, out, in])."""
    w = {"attn_norm": 1 + _rand(dims.d, device=device, dtype=dtype),
         "wqkv": _rand(dims.q + 2 * dims.kv, dims.d, device=device, dtype=dtype),
         "wo": _rand(dims.d, dims.q, device=device, dtype=dtype),
         "mlp_norm": 1 + _rand(dims.d, device=device, dtype=dtype)}
    if dims.qkv_bias:
        w["bqkv"] = _rand(dims.q + 2 * dims.kv, device=device, dtype=dtype)
    if dims.qk_norm:
        w["q_norm"] = 1 + _rand(dims.head_dim, device=device, dtype=dtype)
        w["k_norm"] = 1 + _rand(dims.head_dim, device=device, dtype=dtype)
    if dims.experts:
        w["router"] = _rand(dims.experts, dims.d, device=device, dtype=dtype)
        w["w13"] = _rand(dims.experts, 2 * dims.expert_inter, dims.d, device=device, dtype=dtype)
        w["w2"] = _rand(dims.experts, dims.d, dims.expert_inter, device=device, dtype=dtype)
    else:
        w["w13"] = _rand(2 * dims.inter, dims.d, device=device, dtype=dtype)
        w["w2"] = _rand(dims.d, dims.inter, device=device, dtype=dtype)
    return w


def model_weights(dims: Dims, device, dtype=torch.bfloat16) -> dict:
    """Embedding, layers, final norm and LM head (the embedding itself when tied)."""
    emb = _rand(dims.vocab, dims.d, device=device, dtype=dtype)
    return {"embedding": emb, "layers": [layer_weights(dims, device, dtype) for _ in range(dims.layers)],
            "final_norm": 1 + _rand(dims.d, device=device, dtype=dtype),
            "lm_head": emb if dims.tie else _rand(dims.vocab, dims.d, device=device, dtype=dtype)}


def weight_bytes(weights: dict) -> int:
    """Bytes of distinct weight tensors (a tied LM head counted once)."""
    seen, total = set(), 0
    tensors = [weights["embedding"], weights["final_norm"], weights["lm_head"]]
    tensors += [t for layer in weights["layers"] for t in layer.values()]
    for t in tensors:
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            total += t.numel() * t.element_size()
    return total


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """gpt-fast / Hugging Face RMSNorm: in fp32, back to the input dtype, times the weight."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).type_as(x) * weight


def rope_tables(positions: torch.Tensor, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [S, head_dim] in bf16 for integer `positions` [S] (rotate-half convention)."""
    inv = 1.0 / (ROPE_THETA ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
    angles = positions.float()[:, None] * inv[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(torch.bfloat16), angles.sin().to(torch.bfloat16)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [B, H, S, Dh] rotated: x cos + rotate_half(x) sin."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def moe_mlp(dims: Dims, w: dict, h: torch.Tensor) -> torch.Tensor:
    """Top-k routing; the T*k token copies sorted by expert go through one grouped GEMM per matrix
    (experts with no token read no weights), weighted and added back to their tokens."""
    shape = h.shape
    x = h.reshape(-1, dims.d)  # [T, d]
    scores, experts = torch.topk(F.linear(x, w["router"]), dims.top_k, dim=-1)  # [T, k]
    gates = torch.softmax(scores.float(), dim=-1).to(x.dtype)
    flat = experts.reshape(-1)
    order = torch.argsort(flat, stable=True)
    token = order // dims.top_k
    # counts by scatter (bincount would read its maximum back to the host: not capturable in a graph)
    counts = torch.zeros(dims.experts, device=x.device, dtype=torch.int32).scatter_add_(
        0, flat, torch.ones_like(flat, dtype=torch.int32))
    offs = torch.cumsum(counts, 0, dtype=torch.int32)
    xs = x[token]  # [T*k, d]
    gu = torch._grouped_mm(xs, w["w13"].transpose(-2, -1), offs=offs)  # [T*k, 2 I_e]
    gate, up = gu.chunk(2, dim=-1)
    ys = torch._grouped_mm(F.silu(gate) * up, w["w2"].transpose(-2, -1), offs=offs)  # [T*k, d]
    ys = ys * gates.reshape(-1)[order][:, None]
    out = torch.zeros_like(x).index_add_(0, token, ys)
    return out.reshape(shape)


def layer(dims: Dims, x, residual, w: dict, k_cache, v_cache, pos, cos, sin, decode: bool):
    """One decoder layer. x, residual [B, S, d]; returns (mlp output, residual) for the next layer."""
    b, s, _ = x.shape
    residual = x + residual
    h = rms_norm(residual, w["attn_norm"])
    qkv = F.linear(h, w["wqkv"], w.get("bqkv"))
    q, k, v = qkv.split([dims.q, dims.kv, dims.kv], dim=-1)
    q = q.view(b, s, dims.heads, dims.head_dim).transpose(1, 2)
    k = k.view(b, s, dims.kv_heads, dims.head_dim).transpose(1, 2)
    v = v.view(b, s, dims.kv_heads, dims.head_dim).transpose(1, 2)
    if dims.qk_norm:
        q, k = rms_norm(q, w["q_norm"]), rms_norm(k, w["k_norm"])
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    k_cache[:, :, pos] = k
    v_cache[:, :, pos] = v
    if decode:
        o = F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=True)
    else:
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    o = F.linear(o.transpose(1, 2).reshape(b, s, dims.q), w["wo"])
    residual = o + residual
    h = rms_norm(residual, w["mlp_norm"])
    if dims.experts:
        return moe_mlp(dims, w, h), residual
    gate, up = F.linear(h, w["w13"]).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, w["w2"]), residual


class Decoder:
    """The step function of a decoder: compiled (`compiled=True`, one torch.compile of the layer, dynamic
    shapes) or eager, over weights and per-layer caches."""

    def __init__(self, dims: Dims, weights: dict, compiled: bool):
        self.dims, self.weights, self.compiled = dims, weights, compiled
        fn = layer
        if compiled:
            fn = torch.compile(layer, dynamic=True, fullgraph=True)
        self.layer_fn = fn

    def step(self, tokens: torch.Tensor, caches: list[tuple[torch.Tensor, torch.Tensor]], pos: torch.Tensor,
             decode: bool) -> torch.Tensor:
        """Logits [B, vocab] of the last position; K, V of `tokens` [B, S] written at `pos` [S]."""
        dims, w = self.dims, self.weights
        x = F.embedding(tokens, w["embedding"])
        residual = torch.zeros_like(x)
        cos, sin = rope_tables(pos, dims.head_dim)
        for lw, (kc, vc) in zip(w["layers"], caches, strict=True):
            x, residual = self.layer_fn(dims, x, residual, lw, kc, vc, pos, cos, sin, decode)
        h = rms_norm((x + residual)[:, -1], w["final_norm"])
        return F.linear(h, w["lm_head"])


def make_caches(dims: Dims, batch: int, length: int, device, dtype=torch.bfloat16) -> list:
    """Per-layer (K, V) [B, Hkv, length, Dh], filled with random values (never zeros)."""
    shape = (batch, dims.kv_heads, length, dims.head_dim)
    return [(_rand(*shape, device=device, dtype=dtype, std=1.0), _rand(*shape, device=device, dtype=dtype, std=1.0))
            for _ in range(dims.layers)]


def cache_bytes(dims: Dims, batch: int, length: int) -> int:
    return 2 * dims.layers * batch * dims.kv_heads * length * dims.head_dim * 2

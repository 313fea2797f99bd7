"""The attention half of a decoder layer, decode and prefill, standard (MHA/GQA/MQA) and MLA.

The KV side comes from the method's LayerCache: bytes read and written, dequantization FLOPs, tokens
attended and per-head dims (all per sequence, times the batch and this GPU's share of the KV heads).
"""

from __future__ import annotations

from dataclasses import replace

from roofline.accounting import indexer_bytes_per_token_layer
from roofline.costmodel.blocks import (
    GATED_ACT_FLOPS,
    NORM_FLOPS,
    ROPE_FLOPS,
    SOFTMAX_FLOPS,
    Ctx,
    Shard,
    allreduce,
    elementwise,
    linear,
    norm,
)
from roofline.costmodel.linear import linear_block
from roofline.costmodel.ops import COPY, Op, traffic
from roofline.kv.layout import ExtraOp, LayerCache
from roofline.lazy import sp
from roofline.units import ceildiv

SCORE_BYTES = 4  # unfused attention keeps fp32 scores in memory
# Flash-decoding splits the context so enough programs run: one split per SPLIT_TOKENS cached tokens, whose
# fp32 partial state (max, sum, d_v accumulators per query head) a second, reduce kernel merges.
SPLIT_TOKENS = 2048


def causal_pairs(prompt, attention, topk: int | None = None) -> sp.Expr:
    """(query, key) pairs of causal attention over `prompt` tokens: P(P+1)/2, or with a window W (or DSA's
    top-k): m(m+1)/2 + (P - m) W where m = min(P, W); chunked local attention (chunk C, Llama-4): each query
    sees its own chunk so far, m(m+1)/2 + (P - m)(C+1)/2 (exact when P is a multiple of C)."""
    window = attention.window if attention.kind == "sliding" else topk
    if window is not None:
        m = sp.Min(prompt, window)
        return m * (m + 1) / 2 + (prompt - m) * window
    if attention.kind == "chunked":
        m = sp.Min(prompt, attention.window)
        return m * (m + 1) / 2 + (prompt - m) * sp.Rational(attention.window + 1, 2)
    return prompt * (prompt + 1) / 2


def _head_dim(qk) -> int:
    """The query/key head dim as an integer (0 when a method makes it fractional or symbolic)."""
    value = sp.sympify(qk)
    return int(value) if value.is_Integer else 0


def method_op(ctx: Ctx, e: ExtraOp, seqs, kvf, method: str) -> Op:
    """A method's per-sequence ExtraOp for `seqs` sequences on this GPU's share `kvf` of the KV heads."""
    return ctx.op(e.name, source=method, int_ops=seqs * kvf * e.int_ops,
                  matmul_flops=seqs * kvf * e.matmul_flops, vector_flops=seqs * kvf * e.vector_flops,
                  traffic=traffic(weights=kvf * e.weight_bytes, act_read=seqs * kvf * e.act_read_bytes,
                                  act_write=seqs * kvf * e.act_write_bytes, kv_read=seqs * kvf * e.kv_read_bytes,
                                  kv_write=seqs * kvf * e.kv_write_bytes))


def merge(base: Op, extra: list[Op]) -> Op:
    """Fuse ops into `base` (one kernel): FLOPs and bytes add up."""
    t = dict(base.traffic)
    for e in extra:
        for k, v in e.traffic.items():
            t[k] = t.get(k, 0) + v
    return Op(base.name, base.group, base.count, base.matmul_flops + sum(e.matmul_flops for e in extra),
              base.vector_flops + sum(e.vector_flops for e in extra), t, base.dtype, base.source,
              int_ops=base.int_ops + sum(e.int_ops for e in extra), kernels=base.kernels, kind=base.kind,
              head_dim=base.head_dim, shared_bytes=base.shared_bytes + sum(e.shared_bytes for e in extra),
              programs=base.programs, aten=base.aten, fused=base.fused)


def _tensor_sum(layer: LayerCache, role: str, attr: str) -> sp.Expr:
    """Sum of `attr` over the layer's tensors of `role` (TensorLayout.role: "key", "value")."""
    return sp.Add(*(getattr(t, attr) for t in layer.tensors if t.role == role))


def decode_attention_core(ctx: Ctx, layer: LayerCache, method: str, fused: bool) -> list[Op]:
    """QK^T, softmax, PV over the cache for one new token per sequence (flash-decoding when fused)."""
    from roofline.units import B
    h, kvf, ab = ctx.shard.heads, ctx.shard.kv_fraction, ctx.act_bytes
    n, qk, vd = layer.tokens, layer.qk_head_dim, layer.v_head_dim
    extras = [method_op(ctx, e, B, kvf, method) for e in layer.decode_ops if e.fused]
    # learned sinks (gpt-oss): one more logit per head in the softmax
    n_soft = n + 1 if layer.attention.sinks else n
    if fused:
        splits = sp.Max(1, ceildiv(n, SPLIT_TOKENS))
        # one program per (sequence, KV head, split): the query heads of a KV head share its tiles
        core = ctx.op("attention", kind="attention", head_dim=_head_dim(qk),
                      shared_bytes=B * kvf * layer.attention_shared_bytes, programs=B * ctx.shard.kv_heads * splits,
                      matmul_flops=2 * B * h * n * (qk + vd), int_ops=B * kvf * layer.attention_int_ops,
                      vector_flops=SOFTMAX_FLOPS * B * h * n_soft + B * kvf * layer.attention_dequant,
                      traffic=traffic(kv_read=B * kvf * layer.attention_reads, act_read=B * h * qk * ab,
                                      act_write=B * h * vd * ab))
        partials = B * h * splits * (vd + 2) * 4
        reduce = ctx.op("attention_reduce", vector_flops=3 * B * h * splits * vd,
                        traffic=traffic(act_read=partials, act_write=B * h * vd * ab))
        core = Op(core.name, core.group, core.count, core.matmul_flops, core.vector_flops,
                  {**core.traffic, "act_write": core.traffic.get("act_write", 0) - B * h * vd * ab + partials},
                  core.dtype, core.source, int_ops=core.int_ops, kind=core.kind, head_dim=core.head_dim,
                  shared_bytes=core.shared_bytes, programs=core.programs)
        return [merge(core, extras), reduce]
    scores = B * h * n * SCORE_BYTES
    qk_op = ctx.op("attn_qk", matmul_flops=2 * B * h * n * qk,
                   int_ops=B * kvf * _tensor_sum(layer, "key", "dequant_int_ops"),
                   vector_flops=B * kvf * _tensor_sum(layer, "key", "dequant_flops"),
                   traffic=traffic(kv_read=B * kvf * _tensor_sum(layer, "key", "read_bytes"),
                                   act_read=B * h * qk * ab, act_write=scores))
    softmax = ctx.op("attn_softmax", vector_flops=SOFTMAX_FLOPS * B * h * n_soft,
                     traffic=traffic(act_read=scores, act_write=scores))
    # no "value" tensor (MLA): PV reads the latent again
    pv_role = "value" if any(t.role == "value" for t in layer.tensors) else "key"
    pv = ctx.op("attn_pv", matmul_flops=2 * B * h * n * vd,
                int_ops=B * kvf * _tensor_sum(layer, "value", "dequant_int_ops"),
                vector_flops=B * kvf * _tensor_sum(layer, "value", "dequant_flops"),
                traffic=traffic(kv_read=B * kvf * _tensor_sum(layer, pv_role, "read_bytes"),
                                act_read=scores, act_write=B * h * vd * ab))
    return [merge(qk_op, extras), softmax, pv]


def kv_update(ctx: Ctx, layer: LayerCache, tokens_per_seq, seqs, resident=None) -> Op:
    """Write new tokens to the cache (and quantize those leaving the full-precision window)."""
    kvf = ctx.shard.kv_fraction
    written = layer.written_bytes * tokens_per_seq if resident is None else resident
    return ctx.op("kv_update", vector_flops=seqs * kvf * layer.quantize_flops * tokens_per_seq,
                  traffic=traffic(kv_write=seqs * kvf * written))


def _q_and_kv_projections(ctx: Ctx, tokens, layer: LayerCache) -> list[Op]:
    m, s = ctx.model, ctx.shard
    head_dim = m.at_layer(layer.attention).head_dim  # the layer's own (Gemma-4's global layers)
    q, k = s.heads * head_dim, s.kv_heads * head_dim
    v = k if layer.v_out_width is None else s.kv_fraction * layer.v_out_width
    kv_out = k + v if layer.kv_projection else 0
    gate = q if m.attn_output_gate else 0  # Qwen3-Next: q_proj also yields a per-channel output gate
    gate += s.heads if m.attn_head_gate else 0  # LFM3: g_proj yields one gate per head
    ops = [linear(ctx, "qkv_proj" if kv_out else "q_proj", tokens, m.hidden_size, q + gate + kv_out,
                  bias=m.qkv_bias)]
    k_roped = k if layer.kv_projection else 0
    if m.qk_norm:
        ops.append(elementwise(ctx, "qk_norm", tokens, q + k_roped, NORM_FLOPS))
    ops.append(elementwise(ctx, "rope", tokens, q + k_roped, ROPE_FLOPS))
    return ops


def _mla_projections(ctx: Ctx, tokens, prefill: bool) -> list[Op]:
    """MLA: low-rank Q, the shared latent c_kv (+ RoPE key), an output gate's projection where the model has one;
    decode absorbs W_UK into the query."""
    m, s, mla = ctx.model, ctx.shard, ctx.model.mla
    h, d = s.heads, m.hidden_size
    qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank:
        ops = [linear(ctx, "q_a_proj", tokens, d, mla.q_lora_rank), norm(ctx, "q_a_norm", tokens, mla.q_lora_rank),
               linear(ctx, "q_b_proj", tokens, mla.q_lora_rank * (1 + mla.q_gate),
                      h * (qk + mla.v_head_dim * mla.q_gate))]  # q_gate: [norm(c_q), c_q] -> q and gate
    else:
        ops = [linear(ctx, "q_proj", tokens, d, h * qk)]
    if m.attn_output_gate:  # HY-V4's gate_proj: one sigmoid gate per output channel, from the layer input
        ops.append(linear(ctx, "gate_proj", tokens, d, h * mla.v_head_dim))
    ops += [linear(ctx, "kv_a_proj", tokens, d, mla.kv_lora_rank + mla.qk_rope_head_dim),
            norm(ctx, "kv_a_norm", tokens, mla.kv_lora_rank),
            elementwise(ctx, "rope", tokens, h * mla.qk_rope_head_dim + mla.qk_rope_head_dim, ROPE_FLOPS)]
    if prefill:
        ops.append(linear(ctx, "kv_b_proj", tokens, mla.kv_lora_rank, h * (mla.qk_nope_head_dim + mla.v_head_dim)))
    else:
        # absorbed decode: q_nope (per head) times W_UK maps the query into the latent space
        ops.append(ctx.op("q_absorb", matmul_flops=2 * tokens * h * mla.qk_nope_head_dim * mla.kv_lora_rank,
                          traffic=traffic(weights=h * mla.qk_nope_head_dim * mla.kv_lora_rank * ctx.wb,
                                          act_read=tokens * h * mla.qk_nope_head_dim * ctx.act_bytes,
                                          act_write=tokens * h * mla.kv_lora_rank * ctx.act_bytes)))
    return ops


def indexer_ops(ctx: Ctx, tokens, phase: str) -> list[Op]:
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2 report §2.1, Eq. 1): projections
    q (r_q -> H_i d_i), k (d -> d_i), head weights (d -> H_i); then fp8 scores I = sum_j w_j ReLU(q_j . k) over
    every cached token (2 H_i d_i FLOPs per token pair, reading the indexer cache once per step in decode) and a
    top-k selection; prefill scores all causal pairs. Index keys at the model dtype (SparseAttention.key_dtype
    'model') are read as bf16, the planner's model dtype."""
    from roofline.units import B, L, P
    m, dsa = ctx.model, ctx.model.sparse_attention
    q_in = m.mla.q_lora_rank or m.hidden_size
    width = dsa.index_heads * dsa.index_head_dim
    ops = [linear(ctx, "indexer_q", tokens, q_in, width), linear(ctx, "indexer_k", tokens, m.hidden_size,
                                                                  dsa.index_head_dim),
           linear(ctx, "indexer_weights", tokens, m.hidden_size, dsa.index_heads)]
    pairs = B * L if phase == "decode" else B * P * (P + 1) / 2
    read = B * L * indexer_bytes_per_token_layer(m, "bf16") if phase == "decode" else B * P * dsa.index_head_dim
    ops.append(ctx.op("indexer", matmul_flops=2 * dsa.index_heads * dsa.index_head_dim * pairs,
                      vector_flops=3 * dsa.index_heads * pairs + 2 * pairs,
                      traffic=traffic(kv_read=read, act_read=tokens * width * ctx.act_bytes,
                                      act_write=B * dsa.index_topk * 4)))
    return ops


def _at_layer_heads(ctx: Ctx, layer: LayerCache) -> Ctx:
    """The block's context for a layer whose head counts differ from the model's (Inkling's sliding layers,
    AttentionLayer.num_heads / num_kv_heads): the model at that layer and its shard at the same tp, so that the
    projections, the cache share and the attention read the layer's own heads; ctx itself otherwise."""
    kind = layer.attention
    if kind.num_heads in (None, ctx.model.num_heads) and kind.num_kv_heads in (None, ctx.model.num_kv_heads):
        return ctx
    model = ctx.model.at_layer(kind)
    return replace(ctx, model=model, shard=Shard.of(model, ctx.shard.tp))


def attention_block(ctx: Ctx, layer: LayerCache, method: str, phase: str, fused: bool = True) -> list[Op]:
    """Norm, projections, RoPE, cache write, attention, (MLA absorption), output projection, all-reduce, add;
    a recurrent layer's ops (costmodel.linear) for layers of kind 'linear'."""
    from roofline.units import B, L, P
    if layer.attention.kind == "linear":
        return linear_block(ctx, layer, phase)
    ctx = _at_layer_heads(ctx, layer)
    m, s = ctx.model, ctx.shard
    tokens = B if phase == "decode" else B * P
    ops = [norm(ctx, "attn_norm", tokens, m.hidden_size)]
    ops += _mla_projections(ctx, tokens, phase == "prefill") if m.mla else _q_and_kv_projections(ctx, tokens, layer)
    if any(t.name == "indexer" for t in layer.tensors):  # layers reusing another's top-k run no indexer
        ops += indexer_ops(ctx, tokens, phase)
    kvf = s.kv_fraction
    if phase == "decode":
        ops.append(kv_update(ctx, layer, 1, B))
        ops += [method_op(ctx, e, B, kvf, method) for e in layer.decode_ops if not e.fused]
        ops += decode_attention_core(ctx, layer, method, fused)
    else:
        ops.append(kv_update(ctx, layer, P, B, resident=layer.resident_bytes.subs(L, P)))
        ops += [method_op(ctx, e, B, kvf, method) for e in layer.prefill_ops]
        ops.append(prefill_attention_core(ctx, layer))
    out_width = s.heads * (m.mla.v_head_dim if m.mla else m.at_layer(layer.attention).head_dim)
    if layer.o_in_width is not None:
        out_width = sp.Rational(layer.o_in_width, s.tp)
    if m.mla and phase == "decode":
        mla = m.mla
        ops.append(ctx.op("o_absorb", matmul_flops=2 * tokens * s.heads * mla.kv_lora_rank * mla.v_head_dim,
                          traffic=traffic(weights=s.heads * mla.kv_lora_rank * mla.v_head_dim * ctx.wb,
                                          act_read=tokens * s.heads * mla.kv_lora_rank * ctx.act_bytes,
                                          act_write=tokens * out_width * ctx.act_bytes)))
    if m.attn_output_gate or m.attn_head_gate or (m.mla and m.mla.q_gate):
        ops.append(elementwise(ctx, "attn_gate", tokens, out_width, GATED_ACT_FLOPS, reads=2))
    ops.append(linear(ctx, "o_proj", tokens, out_width, m.hidden_size))
    ar = allreduce(ctx, "attn_allreduce", tokens)
    return ops + ([ar] if ar else [])


def prefill_attention_core(ctx: Ctx, layer: LayerCache) -> Op:
    """Causal flash attention over the prompt: Q, K, V read once, O written once (scores stay on chip)."""
    from roofline.units import B, P
    m, s, ab = ctx.model, ctx.shard, ctx.act_bytes
    pairs = causal_pairs(P, layer.attention, m.sparse_attention.index_topk if m.sparse_attention else None)
    if m.mla:
        qk, vd = m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim, m.mla.v_head_dim
        kv_width = s.heads * (qk + vd)
    else:
        qk, vd = layer.qk_head_dim, layer.v_head_dim
        kv_width = s.kv_heads * (qk + vd)
    return ctx.op("attention", kind="attention", head_dim=_head_dim(qk),
                  matmul_flops=2 * B * s.heads * pairs * (qk + vd),
                  vector_flops=SOFTMAX_FLOPS * B * s.heads * pairs,
                  traffic=traffic(act_read=B * P * (s.heads * qk + kv_width) * ab,
                                  act_write=B * P * s.heads * vd * ab), query_rows=B * P * s.heads)


def q_copy(ctx: Ctx, layer: LayerCache, tokens) -> Op:
    """An engine's copy of q out of the fused qkv output (SGLang 0.5.17: q is a strided view of qkv,
    srt/models/qwen3_moe.py:627 and the Llama family's split alike, made contiguous before FA3,
    srt/layers/attention/flashattention_backend.py:1454 extend, :1910 decode): tokens x heads x head dim
    activations read and written. A view of one row is contiguous already (torch skips the strides of size-1 dims), so
    a step of one token copies nothing: run 2c's census of Qwen3-30B-A3B's decode step has the copy kernel 48 times at
    B 16 and never at B 1. `query_rows` carries the rows copied (the tokens), on which Roofline prices it 0 at one."""
    ctx = _at_layer_heads(ctx, layer)
    width = ctx.shard.heads * ctx.model.at_layer(layer.attention).head_dim
    moved = tokens * width * ctx.act_bytes
    return ctx.op("q_copy", kind=COPY, traffic=traffic(act_read=moved, act_write=moved), query_rows=tokens)

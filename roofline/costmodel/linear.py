"""A recurrent layer (Gated DeltaNet, Mamba-2) as ops, decode and prefill, per GPU (value heads split over tp;
key heads split, or replicated one per GPU when tp exceeds them: accounting.state_heads_per_rank).

in_proj   d -> conv_channels + H_v d_v (+ 2 H_v gates for Gated DeltaNet: beta, g; + H_v dt for Mamba-2)
conv1d    causal depthwise conv of width K over conv_channels: 2 K FLOPs per channel per token; decode reads
          and rewrites the (K - 1) x conv_channels conv state
recurrence per head and token, on the d_k x d_v state S:
          Gated DeltaNet (Yang et al. 2025, "Gated Delta Networks", Eq. 10): S <- g S (I - beta k k^T) + beta v k^T,
          o = S q: decay (1), S^T k (2), rank-1 update (2), output (2) = 7 d_k d_v FLOPs;
          Mamba-2 (Dao & Gu 2024, SSD recurrence, Eq. 2): S <- exp(dt A) S + dt x B^T, y = S C = 5 d_k d_v FLOPs.
          Decode reads and writes S once per sequence. Prefill runs the chunked form (chunk C = 64): per token
          and head 2 C (d_k + d_v) FLOPs inside the chunk plus 4 d_k d_v for the state hand-off (+ 2 C d_k for
          Gated DeltaNet's WY / UT transform), and writes the final state once.
gated norm  RMSNorm(o) x SiLU(z) over H_v d_v; out_proj H_v d_v -> d; all-reduce under tp.
"""

from __future__ import annotations

from roofline.accounting import dtype_bytes, state_heads_per_rank
from roofline.costmodel.blocks import GATED_ACT_FLOPS, NORM_FLOPS, Ctx, allreduce, elementwise, linear, norm
from roofline.costmodel.ops import Op, traffic
from roofline.kv.layout import LayerCache
from roofline.units import B, P

CHUNK = 64
STEP_FLOPS = {"gated_deltanet": 7, "mamba2": 5}


def linear_block(ctx: Ctx, layer: LayerCache, phase: str) -> list[Op]:
    """Norm, in_proj, conv1d, recurrence, gated norm, out_proj, all-reduce of `layer.count` recurrent layers."""
    m, tp = ctx.model, ctx.shard.tp
    la = m.linear_attention
    assert la is not None
    hk, hv = state_heads_per_rank(m, tp)  # key heads replicated when tp exceeds them
    dk, dv = la.key_head_dim, la.value_head_dim
    conv_ch, inner = 2 * hk * dk + hv * dv, hv * dv
    gates = 2 * hv if la.kind == "gated_deltanet" else hv
    tokens = B if phase == "decode" else B * P
    sb = dtype_bytes(la.state_dtype)
    state = hv * dk * dv * sb
    conv_state = (la.conv_kernel - 1) * conv_ch * sb
    ops = [norm(ctx, "attn_norm", tokens, m.hidden_size),
           linear(ctx, "in_proj", tokens, m.hidden_size, conv_ch + inner + gates)]
    conv_io = {"kv_read": B * conv_state, "kv_write": B * conv_state} if phase == "decode" else {
        "kv_write": B * conv_state}
    ops.append(ctx.op("conv1d", vector_flops=2 * la.conv_kernel * conv_ch * tokens,
                      traffic=traffic(weights=la.conv_kernel * conv_ch * ctx.wb,
                                      act_read=tokens * conv_ch * ctx.act_bytes,
                                      act_write=tokens * conv_ch * ctx.act_bytes, **conv_io)))
    if phase == "decode":
        ops.append(ctx.op("recurrence", matmul_flops=STEP_FLOPS[la.kind] * B * hv * dk * dv,
                          traffic=traffic(kv_read=B * state, kv_write=B * state,
                                          act_read=B * conv_ch * ctx.act_bytes, act_write=B * inner * ctx.act_bytes)))
    else:
        per_token = 2 * CHUNK * (dk + dv) + 4 * dk * dv + (2 * CHUNK * dk if la.kind == "gated_deltanet" else 0)
        ops.append(ctx.op("recurrence", matmul_flops=tokens * hv * per_token,
                          traffic=traffic(kv_write=B * state, act_read=tokens * conv_ch * ctx.act_bytes,
                                          act_write=tokens * inner * ctx.act_bytes)))
    ops += [elementwise(ctx, "gated_norm", tokens, inner, NORM_FLOPS + GATED_ACT_FLOPS, reads=2),
            linear(ctx, "out_proj", tokens, inner, m.hidden_size)]
    ar = allreduce(ctx, "attn_allreduce", tokens)
    return ops + ([ar] if ar else [])

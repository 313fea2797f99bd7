"""A recurrent layer (Gated DeltaNet, Mamba-2, Mamba-1) as ops, decode and prefill, per GPU (value heads split over tp;
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

Mamba-1 (Gu & Dao 2023, "Mamba", Alg. 2 and Eq. 2a-2b; transformers MambaMixer): in_proj d -> 2 d_inner (x, z),
conv1d over d_inner, x_proj d_inner -> dt_rank + 2 d_state, dt_proj dt_rank -> d_inner, then per channel and
state element h <- exp(dt A) h + dt B x, y = C h: dA (1 multiply + 1 exp, counted as 1), dt B x (1), update (2),
output (2) = 6 FLOPs per element of the d_inner x d_state state, elementwise (no matmul), the same per token in
prefill (the selective scan is sequential in the state); y x SiLU(z) (no norm), out_proj d_inner -> d.
Kimi Delta Attention (Kimi Linear report 2025, §3; transformers KimiLinearDeltaAttention): Gated DeltaNet's
recurrence with a per-channel decay (the same 7 d_k d_v FLOPs: the decay is one multiply per state element either
way) and chunked prefill; in_proj d -> 3 H d_h (q, k, v) + H (beta) + 2 d_h (the low-rank f_a and g_a), then
gate_b_proj d_h -> 2 H d_h (f_b and g_b as one op: the same FLOPs and weights).
Griffin's recurrent block (De et al. 2024, "Griffin", §2.4; transformers RecurrentGemmaRecurrentBlock): in_proj
d -> 2 w (x, y), conv1d over w, gate_proj: the input and recurrence gates, block-diagonal (2 x 2 w^2 / H FLOPs per
token), then per channel a = exp(-8 softplus(Lambda) r), h <- a h + sqrt(1 - a^2) (i x): 8 FLOPs per state element
(elementwise, no matmul), the same per token in prefill (a scan); GeLU(y) x h, out_proj w -> d.
Lightning attention (MiniMax-01, §2.2; transformers MiniMaxLightningAttention): in_proj d -> 3 H d_h (q, k, v) +
H d_h (the output gate), no convolution, per head and token S <- lambda S + k^T v, o = q S: decay (1), update (2),
output (2) = 5 d_h^2 FLOPs as Mamba-2's, prefill in the same chunked form; RMSNorm(o) x sigmoid(gate), out_proj.
A short convolution (LFM2, transformers Lfm2ShortConv): in_proj d -> 3 d_c (B, C, x), B * x (1 FLOP per channel),
the conv1d over d_c, C * y (1 FLOP per channel), out_proj d_c -> d; no recurrence and no state beyond the conv's.
RWKV-4 (Peng et al. 2023, "RWKV", Eq. 14-17; transformers RwkvSelfAttention and rwkv_linear_attention_cpu): the
token shift as a conv of kernel 2 over the two shifted inputs (time and channel mixing), in_proj d -> 4 d (key,
value, receptance, and the channel mixing's receptance, which the plain MLP does not carry), then per channel the
WKV step over its 3 state elements (a, b, running max p; rwkv_linear_attention_cpu): the output (k + u, a max, two
exponents' arguments and exps, a and b, a divide: 13 FLOPs, an exp as 1) and the update (p + w, a max, two
exponents' arguments and exps, a and b: 12), counted as 8 per state element (24 per channel, 4 % under),
elementwise, the same per token in prefill (a scan); sigmoid(r) x wkv (no norm), out_proj d -> d.
xLSTM's mLSTM (Beck et al. 2024, "xLSTM", Eq. 19-27; transformers xLSTMLayer): in_proj d -> 2 H d_k (q, k) + 2 H
d_v (v, output gate) + 2 H (input and forget gates), no convolution, per head and token C <- f C + i v k^T,
n <- f n + i k, h = C q / max(|n . q|, exp(-m)): decay (1), update (2), output (2) = 5 d_k d_v FLOPs as Mamba-2's,
prefill in the same chunked form; the per-head LayerNorm x sigmoid(output gate), out_proj H d_v -> d.
A parallel hybrid (Model.linear_parallel, Falcon-H1) shares the attention's input norm: no norm op here.
"""

from __future__ import annotations

from roofline.accounting import dtype_bytes, state_heads_per_rank
from roofline.costmodel.blocks import GATED_ACT_FLOPS, NORM_FLOPS, Ctx, allreduce, elementwise, linear, norm
from roofline.costmodel.ops import Op, traffic
from roofline.kv.layout import LayerCache

CHUNK = 64
STEP_FLOPS = {"gated_deltanet": 7, "kda": 7, "mamba2": 5, "mamba1": 6, "lightning": 5, "rglru": 8, "rwkv4": 8,
              "mlstm": 5}
NO_CONV = ("lightning", "mlstm")
SCANS = ("mamba1", "rglru", "rwkv4")  # elementwise recurrences, run as a sequential scan in prefill too


def linear_block(ctx: Ctx, layer: LayerCache, phase: str) -> list[Op]:
    """Norm, in_proj, conv1d, recurrence, gated norm, out_proj, all-reduce of `layer.count` recurrent layers."""
    from roofline.units import B, P
    m, tp = ctx.model, ctx.shard.tp
    la = m.linear_attention
    assert la is not None
    hk, hv = state_heads_per_rank(m, tp)  # key heads replicated when tp exceeds them
    dv = la.value_head_dim
    conv_ch, inner = la.conv_channels_for(hk, hv), hv * dv
    tokens = B if phase == "decode" else B * P
    sb = dtype_bytes(la.state_dtype)
    state = la.state_elements_for(hv) * dtype_bytes(la.recurrent_state_dtype)
    conv_state = (la.conv_kernel - 1) * conv_ch * sb
    ops = [] if m.linear_parallel else [norm(ctx, "attn_norm", tokens, m.hidden_size)]
    ops += _projections_in(ctx, tokens, conv_ch, inner)
    if la.kind == "short_conv":
        ops.append(elementwise(ctx, "conv_in_gate", tokens, inner, 1, reads=2))
    conv_io = {"kv_read": B * conv_state, "kv_write": B * conv_state} if phase == "decode" else {
        "kv_write": B * conv_state}
    ops += [] if la.kind in NO_CONV else [ctx.op("conv1d", vector_flops=2 * la.conv_kernel * conv_ch * tokens,
                      traffic=traffic(weights=la.conv_kernel * conv_ch * ctx.wb,
                                      act_read=tokens * conv_ch * ctx.act_bytes,
                                      act_write=tokens * conv_ch * ctx.act_bytes, **conv_io))]
    if la.kind == "mamba1":
        ops += _mamba1_dt(ctx, tokens, inner)
    if la.kind == "short_conv":
        ops.append(elementwise(ctx, "conv_out_gate", tokens, inner, 1, reads=2))
    else:
        ops.append(_recurrence(ctx, phase, tokens, hv, state, conv_ch, inner))
        gate_flops = GATED_ACT_FLOPS + (0 if la.kind in SCANS else NORM_FLOPS)
        ops.append(elementwise(ctx, "gated_norm", tokens, inner, gate_flops, reads=2))
    ops.append(linear(ctx, "out_proj", tokens, inner, m.hidden_size))
    ar = allreduce(ctx, "attn_allreduce", tokens)
    return ops + ([ar] if ar else [])


def _projections_in(ctx: Ctx, tokens, conv_ch, inner) -> list[Op]:
    """in_proj: Gated DeltaNet q, k, v, z + beta, g; Mamba-2 z, x, B, C + dt; Mamba-1 x, z; short conv B, C, x."""
    la = ctx.model.linear_attention
    assert la is not None
    if la.kind == "rwkv4":  # key, value, receptance of the time mixing and the channel mixing's receptance
        return [linear(ctx, "in_proj", tokens, ctx.model.hidden_size, 4 * inner)]
    if la.kind in ("mamba1", "short_conv", "rglru"):
        width = (3 if la.kind == "short_conv" else 2) * inner
        ops = [linear(ctx, "in_proj", tokens, ctx.model.hidden_size, width)]
        if la.kind == "rglru":  # the input and recurrence gates: H blocks of (w/H)^2 each
            ops.append(ctx.op("gate_proj", matmul_flops=2 * 2 * tokens * inner * la.value_head_dim,
                              traffic=traffic(weights=2 * inner * la.value_head_dim * ctx.wb,
                                              act_read=tokens * inner * ctx.act_bytes,
                                              act_write=2 * tokens * inner * ctx.act_bytes)))
        return ops
    hv = inner // la.value_head_dim
    if la.kind == "lightning":  # q, k, v and the output gate
        return [linear(ctx, "in_proj", tokens, ctx.model.hidden_size, 4 * inner)]
    if la.kind == "mlstm":  # q, k, v, the output gate, the input and forget gates
        return [linear(ctx, "in_proj", tokens, ctx.model.hidden_size, 2 * hv * la.key_head_dim + 2 * inner + 2 * hv)]
    if la.kind == "kda":  # q, k, v, beta and the low-rank gates' first halves; then their second halves
        rank = la.value_head_dim
        return [linear(ctx, "in_proj", tokens, ctx.model.hidden_size, conv_ch + hv + 2 * rank),
                linear(ctx, "gate_b_proj", tokens, rank, 2 * inner)]
    gates = 2 * hv if la.kind == "gated_deltanet" else hv
    return [linear(ctx, "in_proj", tokens, ctx.model.hidden_size, conv_ch + inner + gates)]


def _mamba1_dt(ctx: Ctx, tokens, inner) -> list[Op]:
    """Mamba-1's x_proj (this GPU's channels -> dt_rank + 2 d_state) and dt_proj (dt_rank -> its channels)."""
    la = ctx.model.linear_attention
    assert la is not None and la.dt_rank is not None
    return [linear(ctx, "x_proj", tokens, inner, la.dt_rank + 2 * la.key_head_dim),
            linear(ctx, "dt_proj", tokens, la.dt_rank, inner)]


def _recurrence(ctx: Ctx, phase: str, tokens, hv, state, conv_ch, inner) -> Op:
    """The state update: decode reads and rewrites the state; prefill runs the chunked form (Mamba-1: the scan)
    and writes the final state once."""
    from roofline.units import B

    la = ctx.model.linear_attention
    assert la is not None
    dk, dv = la.key_head_dim, la.value_head_dim
    read = {"lightning": 3 * inner, "mlstm": 2 * hv * dk + inner}.get(la.kind, conv_ch)  # q, k, v or the conv's
    io = traffic(act_read=tokens * read * ctx.act_bytes, act_write=tokens * inner * ctx.act_bytes)
    if phase == "decode":
        io = io | traffic(kv_read=B * state, kv_write=B * state)
        work = STEP_FLOPS[la.kind] * B * hv * dk * dv
    else:
        io = io | traffic(kv_write=B * state)
        if la.kind in SCANS:
            work = tokens * hv * STEP_FLOPS[la.kind] * dk * dv
        else:
            wy = 2 * CHUNK * dk if la.kind in ("gated_deltanet", "kda") else 0  # the delta rule's WY / UT transform
            per_token = 2 * CHUNK * (dk + dv) + 4 * dk * dv + wy
            work = tokens * hv * per_token
    if la.kind in SCANS:
        return ctx.op("recurrence", vector_flops=work, traffic=io)
    return ctx.op("recurrence", matmul_flops=work, traffic=io)

"""Building blocks of the op graph: linear layers, norms, elementwise ops, the MLP / MoE, sharding.

Conventions: `tokens` is the number of token rows an op processes (B in decode, B*P in prefill);
weights are read once per pass whatever the batch; a MAC is 2 FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from roofline.accounting import dtype_bytes, state_fraction
from roofline.costmodel.ops import EXPERTS, ROUTING, Op, traffic
from roofline.lazy import sp
from roofline.specs import Model
from roofline.units import ADD_FLOPS, GATED_ACT_FLOPS, NORM_FLOPS, ROPE_FLOPS, SOFTMAX_FLOPS, ceildiv

__all__ = ["ADD_FLOPS", "GATED_ACT_FLOPS", "NORM_FLOPS", "ROPE_FLOPS", "SOFTMAX_FLOPS"]


@dataclass(frozen=True)
class Shard:
    """What one GPU of a tensor-parallel group holds (Megatron-style: heads and MLP columns split)."""

    tp: int
    heads: int
    kv_heads: int
    intermediate: int
    expert_intermediate: int
    vocab: int
    model_kv_heads: int
    shared_intermediate: int = 0
    # share of a recurrent layer's state on this GPU (accounting.state_heads_per_rank: value heads split, key
    # heads split or replicated); 1 without recurrent layers
    state_fraction: Fraction = Fraction(1)  # of a recurrent layer's state (accounting.state_fraction)

    @property
    def kv_fraction(self) -> sp.Rational:
        """Share of the model's K/V heads cached on this GPU (> 1/tp when heads are replicated)."""
        return sp.Rational(self.kv_heads, self.model_kv_heads)

    @property
    def kv_share(self) -> float:
        """kv_fraction as a float (no sympy: for numeric callers)."""
        return self.kv_heads / self.model_kv_heads

    @classmethod
    def of(cls, model: Model, tp: int) -> Shard:
        """This GPU's shard at `tp`; ValueError naming `tp` when it does not divide heads, KV heads or the MLP."""
        if model.num_heads % tp:
            raise ValueError(f"tp: {tp} does not divide the {model.num_heads} attention heads of {model.name}")
        if model.intermediate_size % tp:
            raise ValueError(f"tp: {tp} does not divide intermediate_size {model.intermediate_size}")
        if model.mla is not None:
            kv_heads = 1  # the latent is shared by all heads: every GPU keeps all of it
        elif tp <= model.num_kv_heads:
            if model.num_kv_heads % tp:
                raise ValueError(f"tp: {tp} does not divide the {model.num_kv_heads} KV heads of {model.name}")
            kv_heads = model.num_kv_heads // tp
        else:
            kv_heads = 1  # tp > kv heads: each GPU holds a replica of the one KV head its queries need
        expert = model.moe.expert_intermediate_size if model.moe else 0
        if expert % tp:
            raise ValueError(f"tp: {tp} does not divide expert_intermediate_size {expert}")
        shared = model.moe.shared_width if model.moe else 0
        if shared % tp:
            raise ValueError(f"tp: {tp} does not divide the shared expert width {shared}")
        return cls(tp=tp, heads=model.num_heads // tp, kv_heads=kv_heads,
                   intermediate=model.intermediate_size // tp, expert_intermediate=expert // tp,
                   vocab=ceildiv(model.vocab_size, tp),
                   model_kv_heads=1 if model.mla is not None else model.num_kv_heads,
                   shared_intermediate=shared // tp, state_fraction=state_fraction(model, tp))


@dataclass(frozen=True)
class Ctx:
    """What every block needs: the model, its shard, dtype sizes, the op group and its layer count."""

    model: Model
    shard: Shard
    weight_dtype: str
    act_bytes: int
    compute_dtype: str
    group: str
    count: int
    ep: int = 1  # expert-parallel degree (check_ep): replicas sharing the routed experts
    expert_dtype: str = ""  # storage dtype of the routed experts; "": weight_dtype
    # a GGUF preset's exact bytes per weight of this group's tensors (gguf_quant.group_bytes_per_weight); None: dtype's
    weight_bytes: Fraction | None = None
    # the group's GEMMs' ggml type where a GGUF preset quantizes them (gguf_quant.group_types); "" otherwise
    weight_type: str = ""

    @property
    def wb(self) -> sp.Expr:
        """Bytes per weight element of the weight dtype (a GGUF preset: its group's own mix of types)."""
        if self.weight_bytes is not None:
            return sp.Rational(self.weight_bytes.numerator, self.weight_bytes.denominator)
        return dtype_bytes(self.weight_dtype)

    @property
    def ewb(self) -> sp.Expr:
        """Bytes per weight element of the routed experts (expert_dtype, else the weight dtype)."""
        if self.weight_bytes is not None:
            return self.wb
        return dtype_bytes(self.expert_dtype or self.weight_dtype)

    def op(self, name: str, **kwargs) -> Op:
        """An Op of this context's group, layer count and compute dtype."""
        return Op(name=name, group=self.group, count=self.count, dtype=self.compute_dtype, **kwargs)


def linear(ctx: Ctx, name: str, tokens, d_in, d_out, bias: bool = False) -> Op:
    """y = x W (+ b): 2*tokens*d_in*d_out FLOPs; weights d_in*d_out (+ d_out) read once."""
    weights = (d_in * d_out + (d_out if bias else 0)) * ctx.wb
    return ctx.op(name, kind="gemm", matmul_flops=2 * tokens * d_in * d_out,
                  vector_flops=tokens * d_out if bias else 0,
                  traffic=traffic(weights=weights, act_read=tokens * d_in * ctx.act_bytes,
                                  act_write=tokens * d_out * ctx.act_bytes), query_rows=tokens,
                  weight_type=ctx.weight_type)


def norm(ctx: Ctx, name: str, tokens, width) -> Op:
    """RMSNorm over `width`: NORM_FLOPS x tokens x width vector FLOPs; weights and input read, output written."""
    return ctx.op(name, vector_flops=NORM_FLOPS * tokens * width,
                  traffic=traffic(weights=width * ctx.wb, act_read=tokens * width * ctx.act_bytes,
                                  act_write=tokens * width * ctx.act_bytes))


def elementwise(ctx: Ctx, name: str, tokens, width, flops_per_element, reads: int = 1, rows=0) -> Op:
    """Elementwise: flops_per_element x tokens x width FLOPs, `reads` inputs read, one output written; `rows` its
    token rows where an engine may fuse it into the GEMM before it at one row (Roofline.EPILOGUE_OPS), else 0."""
    return ctx.op(name, vector_flops=flops_per_element * tokens * width,
                  traffic=traffic(act_read=reads * tokens * width * ctx.act_bytes,
                                  act_write=tokens * width * ctx.act_bytes), query_rows=rows)


def residual_add(ctx: Ctx, name: str, tokens) -> Op:
    """x + f(x) over the hidden size: 1 FLOP per element, two inputs read, one output written (its rows carried:
    ggml-cuda adds it in the output projection's mat-vec at one row)."""
    return elementwise(ctx, name, tokens, ctx.model.hidden_size, ADD_FLOPS, reads=2, rows=tokens)


def dense_mlp(ctx: Ctx, tokens, intermediate: int, prefix: str = "mlp") -> list[Op]:
    """Gated: gate+up (d -> 2I), act (SiLU x up), down (I -> d). Plain: up (d -> I), act, down."""
    d = ctx.model.hidden_size
    up_width = 2 * intermediate if ctx.model.mlp == "gated" else intermediate
    return [
        linear(ctx, f"{prefix}_up", tokens, d, up_width),
        elementwise(ctx, f"{prefix}_act", tokens, intermediate, GATED_ACT_FLOPS, reads=2, rows=tokens),
        linear(ctx, f"{prefix}_down", tokens, intermediate, d),
    ]


def experts_touched(num_experts: int, top_k: int, tokens) -> sp.Expr:
    """Expected distinct experts that `tokens` routed tokens touch, uniform top-k routing:
    E * (1 - (1 - k/E)^tokens). Their weights are what a step must read."""
    return num_experts * (1 - (1 - sp.Rational(top_k, num_experts)) ** tokens)


def check_ep(model: Model, ep: int) -> None:
    """ValueError naming `ep` unless ep is 1, or the model has routed experts and ep divides their number (each
    replica holds E/ep whole experts)."""
    if ep == 1:
        return
    if model.moe is None:
        raise ValueError(f"ep: {ep} needs a mixture-of-experts model; {model.name} has no routed experts (use ep 1)")
    if model.moe.num_experts % ep:
        raise ValueError(f"ep: {ep} does not divide the {model.moe.num_experts} routed experts of {model.name}")


def moe_mlp(ctx: Ctx, tokens) -> list[Op]:
    """Router (d -> E); routing (top-k of the router logits and softmax of the k scores: reads tokens x E logits,
    writes the routed tokens' int64 expert ids and gate weights; its kernels by fusion level); dispatch all-to-all
    (ep > 1); routed experts (two grouped GEMM calls); combine all-to-all (ep > 1); shared experts.

    Routed experts on one GPU (tokens: this replica's rows; ep replicas share the E experts, E/ep each, uniform
    top-k routing): weights of the local experts that the ep x tokens rows of all replicas touch,
    (E/ep) (1 - (1 - k/E)^(ep tokens)) x (3 d I_e / tp) x expert dtype bytes; FLOPs of tokens x k routed rows (the
    group's ep tokens k rows spread over ep replicas), 2 (d up + I_e d) each. Shared experts stay dense and
    tensor-parallel, replicated on every expert-parallel replica, at the weight dtype."""
    moe = ctx.model.moe
    assert moe is not None
    d, i_e, ep = ctx.model.hidden_size, ctx.shard.expert_intermediate, ctx.ep
    per_expert_weights = (3 if ctx.model.mlp == "gated" else 2) * d * i_e * ctx.ewb
    touched = experts_touched(moe.num_experts, moe.experts_per_token, tokens)
    if ep > 1:
        touched = experts_touched(moe.num_experts, moe.experts_per_token, ep * tokens) / ep
    routed_tokens = tokens * moe.experts_per_token
    up = 2 * i_e if ctx.model.mlp == "gated" else i_e
    routing = ctx.op("routing", kind=ROUTING, vector_flops=SOFTMAX_FLOPS * routed_tokens,
                     traffic=traffic(act_read=tokens * moe.num_experts * ctx.act_bytes,
                                     act_write=routed_tokens * (8 + ctx.act_bytes)))
    experts = ctx.op(EXPERTS, kind="gemm", matmul_flops=2 * routed_tokens * (d * up + i_e * d),
                     grouped=(tokens, routed_tokens, touched),
                     vector_flops=GATED_ACT_FLOPS * routed_tokens * i_e,
                     traffic=traffic(weights=touched * per_expert_weights,
                                     act_read=routed_tokens * d * ctx.act_bytes,
                                     act_write=routed_tokens * d * ctx.act_bytes))
    ops = [linear(ctx, "router", tokens, d, moe.num_experts), routing]
    ops += [op for op in (alltoall(ctx, "moe_dispatch", tokens), experts, alltoall(ctx, "moe_combine", tokens)) if op]
    if moe.num_shared_experts:
        ops += dense_mlp(ctx, tokens, ctx.shard.shared_intermediate, prefix="shared_expert")
    return ops


def block_m(tokens, table: dict[int, int]):
    """The tile height (BLOCK_SIZE_M) a tuned fused-MoE config gives a call of `tokens` tokens: the config's key
    nearest the tokens, the smaller on a tie (sglang 0.5.17 srt/layers/moe/moe_runner/triton_utils/
    fused_moe_triton_config.py:300, min(keys, key=|key - M|)); `table` maps each key to its BLOCK_SIZE_M. A number
    for a number of tokens, else a Piecewise in them."""
    keys = sorted(table)
    pieces, value = [], table[keys[0]]
    for low, high in zip(keys, keys[1:], strict=False):
        if table[high] != value:
            pieces.append((value, sp.sympify(tokens) <= sp.Rational(low + high, 2)))
            value = table[high]
    pieces.append((value, True))
    return sp.Piecewise(*pieces)


def padded_rows(rows, experts, block):
    """Rows a fused MoE's GEMMs run when each expert's routed rows are padded to a multiple of the tile height
    `block` (moe_align_block_size: sglang 0.5.17 srt/layers/moe/moe_runner/triton_utils/fused_moe.py:418-419; each
    expert's count rounded up to a multiple of BLOCK_SIZE_M), `rows` spread uniformly over `experts` experts,
    r = rows / experts each on average:
        padded = max(experts x block x ceil(r / block), rows + experts x (block - 1) / 2)
    the first where an expert's rows stay well within one multiple (every expert rounds up alike: 64 rows an expert
    in tiles of 128 run 128), the second where they spread over more than a tile (the remainder is uniform over
    0 .. block - 1 rows and pads (block - 1) / 2 on average)."""
    # a real ratio (the experts touched are an expectation), so the float ceiling
    whole = experts * block * sp.ceiling(rows / (experts * block))
    return sp.Max(whole, rows + experts * (block - 1) / 2, evaluate=False)


def alltoall(ctx: Ctx, name: str, tokens) -> Op | None:
    """Expert parallelism (ep > 1): the all-to-all that sends each token's hidden state to its k experts (dispatch)
    or brings the k outputs back (combine). Message per GPU, uniform routing: the (ep - 1)/ep of its tokens x k rows
    whose expert lives on another replica, tokens x k x d x act bytes x (ep - 1)/ep (one copy per routed expert, as
    DeepEP's low-latency kernels send; DeepSeek-V3 paper, Sec. 3.4: dispatch and combine by all-to-all). Its time:
    costmodel.collectives.alltoall_time."""
    if ctx.ep == 1:
        return None
    moe = ctx.model.moe
    assert moe is not None
    message = tokens * moe.experts_per_token * ctx.model.hidden_size * ctx.act_bytes * sp.Rational(ctx.ep - 1, ctx.ep)
    return ctx.op(name, comm_bytes=message, collective="alltoall", ranks=ctx.ep)


def allreduce(ctx: Ctx, name: str, tokens) -> Op | None:
    """Tensor parallelism: the hidden state of each token is all-reduced after attention and after the MLP."""
    if ctx.shard.tp == 1:
        return None
    return ctx.op(name, comm_bytes=tokens * ctx.model.hidden_size * ctx.act_bytes)

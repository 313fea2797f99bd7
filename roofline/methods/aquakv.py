"""AQUA-KV (Shutova et al., ICML 2025; docs/papers/aquakv.md): per-layer predictors guess K and V from the
cache entries of the layer before, and only the residual is quantized (HIGGS by default).

For layer i >= 1 (§3.2, Alg. 1): K_i is stored as Q(K_i - f_key(K^_{i-1})), V_i as
Q(V_i - f_value([V^_{i-1}; K^_i])); f_key maps d_kv -> d_kv, f_value 2 d_kv -> d_kv, both with a bias
(reference code: fit_intercept=True). Layer 0 has no predictor and is kept at `first_layer_bits`
(§4.1: 4-bit HIGGS "as our default configuration for Llama models"; 16 for Qwen, Tables 13-14).
4 fp16 sink tokens (§3.3) and a 128-token fp16 buffer, flushed when full (§3.3: "When the buffer is
filled, its contents are quantized incrementally"). Predictor weights are 2 B each (the paper does not
state the dtype; 2 B reproduces Table 1's 162 / 68 MiB, 540 MiB of MLP matrices, and 41 MiB for GPTQ-4).

Decode cost (Alg. 3-4): reconstructing K^_i for a cached token needs K^_{i-1} of the same token, so the
reference runs both predictors over every quantized token l_q of every layer at every step:
2 x (3 d_kv^2) x l_q = 6 d_kv^2 l_q FLOPs per layer (linear). `decode="incremental"` charges only the
token being encoded (6 d_kv^2 per layer per step): a LOWER BOUND that assumes the reconstruction of cached
tokens is free (amortized), which only holds if dequantized copies were kept (undoing the compression).
Memory: the reference decode materializes one layer's K^ and V^ for every cached token in bf16 before
attention ("materialize (de-quantize) a single layer at a time", §3.3): a per-sequence workspace of
tokens x 2 d_kv x 2 B beside the compressed cache (0.5 GiB at 131,072 tokens on Llama-3.1-70B).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import ClassVar, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from roofline.kv.builder import LayerOverride, QuantPlan, standard_cache
from roofline.kv.layout import CacheModel, ExtraOp, LayerCache
from roofline.kv.quant import TensorQuant, full_precision_tokens
from roofline.lazy import sp
from roofline.methods.base import MethodConfig, preset
from roofline.methods.baseline import Baseline
from roofline.specs import Model

PREDICTOR_BYTES = 2  # bf16/fp16 predictor weights (§5 of the notes: reproduces Table 1 and Table 2)
BASELINE = Baseline()  # the model's own cache, for the predictors' overhead against the model's FLOPs
ACT_BYTES = 2  # reconstructed K^, V^ are materialized in the activation dtype (bf16)
FP16_PARTS = ("window", "sinks")  # cache parts stored unquantized: read as they are, never reconstructed


class AquaKV(MethodConfig):
    """AQUA-KV (seed 001, §3): per-layer linear (or reduced-rank, MLP, GPTQ) predictors guess K_i and V_i
    from layer i-1, and only the residual is quantized (HIGGS by default); layer 0 at `first_layer_bits`."""
    method: ClassVar[str] = "aquakv"
    summary: ClassVar[str] = "cross-layer K/V predictors + HIGGS-quantized residual, 4-bit first layer"

    predictor: Literal["linear", "reduced_rank", "mlp", "quantized"] = Field(
        "linear", description="Predictor type (§4.1, Table 1): linear regression (default), reduced-rank "
        "regression, 2-layer MLP with hidden 2 d_kv and LayerNorm, or linear weights quantized (GPTQ).")
    rank: PositiveInt = Field(256, description="Rank of reduced-rank predictors (Table 1: 256); below d_kv.")
    predictor_bits: float = Field(4, gt=0, lt=16, description="Weight bits of 'quantized' predictors (GPTQ 4).")
    predictor_group_size: PositiveInt | None = Field(
        None, description="Input weights per fp16 scale+zero of 'quantized' predictors; None: one per output "
        "row (GPTQ's default groupsize -1, which reproduces Table 1's 41 MiB).")
    quantizer: Literal["higgs", "uniform"] = Field(
        "higgs", description="Residual quantizer: HIGGS (RHT + d-dim grid, one fp16 norm per Hadamard group) "
        "or uniform per-token min-max ('Quant', fp16 scale and zero per group).")
    bits: float = Field(2, gt=0, lt=16, description="Residual bits per value; HIGGS: log2(n)/d.")
    grid_dim: PositiveInt = Field(2, description="HIGGS grid dimension d; n = 2^(bits x d) codewords.")
    hadamard_group: PositiveInt = Field(1024, description="HIGGS Hadamard group (§4.1: 1024), capped at d_kv.")
    group_size: PositiveInt = Field(64, description="Uniform quantizer: channels per group (§4.1: 64).")
    first_layer_bits: Literal[16, 4, 3, 2] = Field(
        4, description="Layer 0 (no predictor) bits: 16 = bf16 (Qwen), 4 = HIGGS-4 (Llama default, §4.1).")
    sinks: NonNegativeInt = Field(4, description="First tokens kept in fp16 (§3.3: 4).")
    buffer: NonNegativeInt = Field(128, description="Recent fp16 token buffer r (§3.3: 128).")
    buffer_mode: Literal["block", "sliding"] = Field(
        "block", description="'block': the buffer fills to r tokens and is then quantized at once (§3.3); "
        "'sliding': the oldest buffered token is quantized each step.")
    decode: Literal["reference", "incremental"] = Field(
        "reference", description="'reference': predict every cached token every step (Alg. 4, reference "
        "code); 'incremental': only the token being encoded (a lower bound).")

    @model_validator(mode="after")
    def _grid_is_whole(self) -> AquaKV:
        if self.quantizer == "higgs" and not float(self.bits * self.grid_dim).is_integer():
            raise ValueError(f"bits: {self.bits} x grid_dim {self.grid_dim} is not a whole number of index "
                             "bits (HIGGS stores log2(n) bits per d-dim codeword)")
        return self

    def residual_quant(self, kv_dim: int) -> TensorQuant:
        """The residual's storage. HIGGS: log2(n)/d bits per value + one fp16 norm per G = min(1024, d_kv)
        values (b = log2(n)/d + 16/G: 2.0156 at d_kv = 1024, Table 2's 2.02); uniform: b + 32/G."""
        common = dict(group_along="channels", sinks=self.sinks, window=self.buffer, window_mode=self.buffer_mode)
        if self.quantizer == "higgs":
            return TensorQuant(bits=self.bits, number_format="codebook", group_size=min(self.hadamard_group, kv_dim),
                               mode="symmetric", scale_dtype="fp16", zero_dtype="none", **common)
        return TensorQuant(bits=self.bits, group_size=self.group_size, mode="asymmetric", **common)

    def not_applicable(self, model: Model) -> str | None:
        """Why AQUA-KV cannot apply to `model` (recurrent layers between attention layers), or None."""
        if model.layer_counts().get("linear"):
            return "aquakv predicts layer i's K,V from layer i-1's; recurrent layers sit between the attention layers"
        return None

    def cache(self, model: Model, bits: sp.Expr | None = None) -> CacheModel:
        """Layer 0 at `first_layer_bits`, every other layer's residual per `residual_quant` with predictor
        ops (decode: 6·d_kv^2·l_q FLOPs per layer for linear in the reference decode, Alg. 3-4; prefill: encode
        l_q tokens), fixed predictor bytes (layers - 1)·`predictor_bytes` and the reconstruction workspace.
        Raises ValueError on an MLA or one-layer model, or a reduced rank not below d_kv."""
        if model.mla is not None:
            raise ValueError("method: aquakv predicts per-layer K and V; MLA latents are not modelled")
        if model.num_layers < 2:
            raise ValueError(f"num_layers: aquakv predicts layer i from layer i-1; {model.name} has "
                             f"{model.num_layers} layer, so there is nothing to predict")
        d = model.kv_dim
        if self.predictor == "reduced_rank" and self.rank >= d:
            raise ValueError(f"rank: {self.rank} must be below d_kv = {d} (else use predictor=linear)")
        q = self.residual_quant(d)
        first = LayerOverride(start=0, stop=1, k_bits=self.first_layer_bits, v_bits=self.first_layer_bits)
        base = standard_cache(self.method, model, QuantPlan(q, q, (first,)), bits)
        if base.layers[0].count != 1:  # group_layers keeps first-seen order: layer 0 (own override) comes first
            raise ValueError("overrides: layer 0 must form its own layer group")
        weight = predictor_bytes(self, d)
        layers = (base.layers[0],) + tuple(_with_predictors(self, layer, q, d, weight) for layer in base.layers[1:])
        fixed = dict(base.fixed_bytes, predictors=(model.num_layers - 1) * weight)
        return replace(base, layers=layers, fixed_bytes=fixed, workspace_bytes=self.decode_workspace_bytes(base, d))

    def decode_workspace_bytes(self, cache: CacheModel, kv_dim: int) -> sp.Expr:
        """Per-sequence bytes of the reference decode's reconstructed layer: K^ and V^ of every token of one
        layer in bf16, tokens x 2 d_kv x 2 B (the largest layer group; one layer at a time, §3.3, Alg. 4).
        The incremental lower bound reconstructs nothing: 0."""
        if self.decode == "incremental":
            return sp.Integer(0)
        tokens = sorted({layer.tokens for layer in cache.layers[1:]}, key=sp.default_sort_key)
        return (tokens[0] if len(tokens) == 1 else sp.Max(*tokens)) * 2 * kv_dim * ACT_BYTES

    def plan_notes(self, model: Model, probe, data: dict) -> list[str]:
        """Why the plan's row looks as it does: the predictors' cost per new token against the model's (§3.2),
        and what the reference decode pays by re-predicting every cached token each step (Alg. 4)."""
        context = probe.context
        base = probe.model_flops_per_token(BASELINE)
        per_token = base / predictor_flops_per_token(model, self)
        if self.decode == "incremental":
            return [f"predictors cost 1/{per_token:,.0f} of the model's FLOPs per new token (incremental: a lower "
                    "bound that assumes cached tokens are never re-predicted)"]
        step = probe.cached(self, "reference_predictor_flops",
                            lambda: reference_predictor_flops(model, self, context)) / base
        decode = data["decode"]
        share = decode["dominant_share"] if decode["dominant_op"] == "aquakv_reconstruct" else None
        where = f"; reconstructing takes {share:.0%} of the step" if share is not None else ""
        return [f"predictors cost 1/{per_token:,.0f} of the model's FLOPs per new token, but the reference decode "
                f"re-predicts every cached token each step: {step:,.0f}x the model's own FLOPs at {context:,} "
                f"tokens{where}"]

    def limits(self, model: Model, probe) -> dict:
        """The predictor's FLOPs per new token against the model's own decode FLOPs at the plan's context
        (§3.2's "at least 500x"; per new token only: the reference decode re-predicts every cached token)."""
        base = probe.model_flops_per_token(BASELINE)
        return {"predictor_overhead_ratio": base / predictor_flops_per_token(model, self)}


def predictor_params(config: AquaKV, kv_dim: int) -> dict[str, int]:
    """Parameters of one layer's K and V predictors, as weight 'matrices' and 'vectors' (biases, LayerNorm).

    linear:       K d x d,  V 2d x d                      -> 3 d^2 + 2d (biases)
    reduced_rank: K d x r + r x d, V 2d x r + r x d       -> 5 d r + 2d
    mlp (h = 2d): K d x h + h x d, V 2d x h + h x d       -> 10 d^2 + 2 (h + 2h + d) (biases, LN scale/shift)
    Table 1 (Llama-3.2-3B, d = 1024, 27 predicted layers, 2 B): 162.0 / 67.5 / 540.0 MiB of matrices.
    """
    d, r, h = kv_dim, config.rank, 2 * kv_dim
    if config.predictor == "reduced_rank":
        return {"matrices": 5 * d * r, "vectors": 2 * d}
    if config.predictor == "mlp":
        return {"matrices": 10 * d * d, "vectors": 2 * (3 * h + d)}
    return {"matrices": 3 * d * d, "vectors": 2 * d}


def predictor_bytes(config: AquaKV, kv_dim: int) -> int:
    """Bytes of one layer's predictors: 2 B per parameter, or for 'quantized' (GPTQ) matrices at
    predictor_bits plus one fp16 scale and zero per group (default one group per output row: 2 d rows)."""
    p = predictor_params(config, kv_dim)
    if config.predictor != "quantized":
        return PREDICTOR_BYTES * (p["matrices"] + p["vectors"])
    groups = 2 * kv_dim if config.predictor_group_size is None else math.ceil(
        p["matrices"] / config.predictor_group_size)
    return math.ceil(p["matrices"] * config.predictor_bits / 8) + 4 * groups + PREDICTOR_BYTES * p["vectors"]


def _quantized_tokens(q: TensorQuant, tokens: sp.Expr) -> sp.Expr:
    sinks, recent = full_precision_tokens(q, tokens)
    return tokens - sinks - recent


def _predict(config: AquaKV, name: str, n: sp.Expr, q: TensorQuant, kv_dim: int, weight: sp.Expr) -> ExtraOp:
    """Both predictors over `n` tokens of one layer, per sequence (encode or reconstruct).

    matmul  = 2 x matrix params x n              (6 d_kv^2 n for linear; MAC = 2 FLOPs)
    vector  = (vector params + 2 d_kv + 2 d_kv log2 G [HIGGS Hadamard]) x n: bias/LN, residual add, RHT
    act     = read K^_{i-1}, V^_{i-1}, K^_i (3 d_kv), write K^_i, V^_i (2 d_kv), bf16, per token
    RoPE re-applied to pre-RoPE keys (3 FLOPs per element) is left out: < 0.1% of the matmul.
    """
    p = predictor_params(config, kv_dim)
    rht = 2 * kv_dim * int(math.log2(q.group_size)) if config.quantizer == "higgs" else 0
    return ExtraOp(name, matmul_flops=2 * p["matrices"] * n, vector_flops=(p["vectors"] + 2 * kv_dim + rht) * n,
                   weight_bytes=weight, act_read_bytes=3 * kv_dim * ACT_BYTES * n,
                   act_write_bytes=2 * kv_dim * ACT_BYTES * n)


def _with_predictors(config: AquaKV, layer: LayerCache, q: TensorQuant, d: int, weight: int) -> LayerCache:
    """A predicted layer group with its decode and prefill predictor ops.

    decode reference (Alg. 3-4, §3.3 "materialize (de-quantize) a single layer at a time"): one kernel reads
        the compressed K, V (data + norms), dequantizes them and adds the predictions for the l_q quantized
        tokens (tokens - sinks - buffered), writing K^, V^ in bf16; attention then reads bf16 K^, V^ of all
        the layer's tokens (2 d_kv x 2 B each) with no dequantization of its own. Weights: once per step.
    decode incremental (lower bound): n = 1, the token leaving the buffer; attention dequantizes in its
        kernel as for a plain quantized cache. A block buffer of r tokens reads the weights once per flush.
    prefill: encode the l_q quantized tokens at L = P.
    """
    from roofline.units import L, P
    prefill = _predict(config, "aquakv_encode", _quantized_tokens(q, layer.tokens.subs(L, P)), q, d,
                       sp.Integer(weight))
    if config.decode == "incremental":
        flush = config.buffer if config.buffer_mode == "block" and config.buffer else 1
        decode = _predict(config, "aquakv_encode", sp.Integer(1), q, d, sp.Rational(weight, flush))
        return replace(layer, decode_ops=layer.decode_ops + (decode,), prefill_ops=layer.prefill_ops + (prefill,))
    op = _predict(config, "aquakv_reconstruct", _quantized_tokens(q, layer.tokens), q, d, sp.Integer(weight))
    compressed = sp.Add(*(v for t in layer.tensors for part, v in t.resident.items() if part not in FP16_PARTS))
    decode = replace(op, vector_flops=op.vector_flops + layer.dequant_flops, kv_read_bytes=compressed,
                     int_ops=layer.dequant_int_ops)
    return replace(layer, decode_ops=layer.decode_ops + (decode,), prefill_ops=layer.prefill_ops + (prefill,),
                   attention_read_bytes=layer.tokens * 2 * d * ACT_BYTES, attention_dequant_flops=sp.Integer(0),
                   attention_dequant_int_ops=sp.Integer(0))


def predictor_flops_per_token(model: Model, config: AquaKV) -> int:
    """Predictor FLOPs to encode one new token: 2 x matrix params x (layers - 1); linear: 6 d_kv^2 (layers - 1)
    (§3.2; 497.0 MFLOPs for Llama-3.1-70B)."""
    return 2 * predictor_params(config, model.kv_dim)["matrices"] * (model.num_layers - 1)


def reference_predictor_flops(model: Model, config: AquaKV, context: int) -> int:
    """Predictor matmul FLOPs of one reference decode step, one sequence: 2 x matrix params x l_q x
    (layers - 1), l_q = the quantized tokens at `context` (context - sinks - buffered; Alg. 4)."""
    from roofline.units import L
    l_q = int(_quantized_tokens(config.residual_quant(model.kv_dim), L).subs(L, context))
    return predictor_flops_per_token(model, config) * l_q


PRESETS = (
    *(preset(f"aquakv-{_b}", "aquakv", f"AQUA-KV: linear predictors, HIGGS-{_b} residual (d=2, n={4 ** _b}), "
           "layer 0 HIGGS-4, 4 sinks, 128-token buffer (Table 2)", bits=_b)
    for _b in (2, 3, 4)),
)

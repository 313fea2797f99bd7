"""XQuant and XQuant-CL (seed 000, §3): cache the quantized post-norm layer input X (MHA) or its SVD
latents X U_k, X U_v (GQA), and rematerialize K and V every decode step (docs/papers/xquant.md).

Per layer, per sequence, per decode step at context l (MAC = 2 FLOPs):
  MHA      cache X (d wide, per-token groups of 128);        remat 2·2·l·d·d_kv  (= 4 l d^2, §3.4)
  GQA      cache X U_k (per-channel) and X U_v (per-token),  remat 2·2·l·(d/g)^2 with the fused
           d/g wide each;                                     Σ B^T matrices (2 (d/g)^2 extra weights)
  CL MHA   layers >= k cache e-bit deltas ΔX; the accumulator (l x d at e_b bits) is read and written
           every layer (accumulator_rw, paper counts it once): +2·l·d adds, same remat as MHA
  CL GQA   deltas ΔX U_kv (2d/g wide): up-projection 2·l·(2d/g)·d, accumulate 2·l·d, remat through
           W_kv 2·l·d·(2d/g): 8·l·d^2/g + 2·l·d (§3.3.2); U_kv (d x 2d/g) is an extra weight
RoPE is re-applied to the l rematerialized keys (3 FLOPs per element; the paper does not cost it).
Fused: dequant + remat + attention in one kernel, K and V never in HBM. Materialized: the remat kernel
writes K, V in fp16 and attention reads them back. First `high_precision_layers` layers keep 4 bits
(Table 4); in CL the last of them is the base (accumulator start, §4.3).
"""

from __future__ import annotations

import functools
from typing import ClassVar, Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from roofline.accounting import cached_tokens, dtype_size, kv_elements_per_token_layer
from roofline.kv.builder import baseline_elements
from roofline.kv.layout import CacheModel, ExtraOp, LayerCache, TensorLayout
from roofline.kv.quant import TensorQuant, tensor_layout
from roofline.lazy import sp
from roofline.methods.base import MethodConfig, preset
from roofline.numbers import codegen
from roofline.specs import Model
from roofline.units import ROPE_FLOPS, nsimplified

WB = int(dtype_size("bf16"))  # bytes per bf16 element


class XQuant(MethodConfig):
    """XQuant / XQuant-CL (seed 000, §3): caches e-bit X (MHA) or its SVD latents X U_k, X U_v (GQA), or
    cross-layer deltas (CL), and rematerializes K and V every decode step (costs: module docstring)."""
    method: ClassVar[str] = "xquant"
    family: ClassVar[str] = "rematerialization"
    summary: ClassVar[str] = "cache quantized X (or SVD latents), rematerialize K,V each step"

    bits: float = Field(2, gt=0, le=16, description="e: bits of X / latents / deltas.")
    group_size: PositiveInt = Field(128, description="Quantization group (§4: 128 everywhere).")
    latent: Literal["auto", "x", "svd"] = Field(
        "auto", description="'x': cache X; 'svd': cache X U_k, X U_v (GQA); 'auto': x for MHA, svd for GQA.")
    cross_layer: bool = Field(False, description="XQuant-CL: cache cross-layer deltas with an accumulator.")
    high_precision_layers: NonNegativeInt = Field(0, description="First layers kept at high_precision_bits.")
    high_precision_bits: float = Field(4, gt=0, le=16, description="Bits of those layers (Table 4: 4).")
    accumulator_bits: float = Field(4, gt=0, le=16, description="e_b: accumulator precision (§3.4: 4).")
    accumulator_rw: Literal[1, 2] = Field(2, description="Accumulator passes per layer: 2 = load and store.")
    fp16_first_channel: bool = Field(False, description="Keep channel 0 of X U_k in fp16 (App. B).")
    fused: bool = Field(True, description="Fused remat + attention (K,V never in HBM) or materialized.")

    @model_validator(mode="after")
    def _cl_has_a_base(self) -> XQuant:
        if self.cross_layer and self.high_precision_layers == 0:
            raise ValueError("high_precision_layers: XQuant-CL needs at least one base layer (paper: 3)")
        return self

    def uses_svd(self, model: Model) -> bool:
        """True if the model caches SVD latents (GQA, §3.3.1): 'svd', or 'auto' with d_kv < d. Raises
        ValueError when 'svd' is asked of a model whose d_kv is not below d."""
        if self.latent == "x" or (self.latent == "auto" and model.kv_dim >= model.hidden_size):
            return False
        if model.kv_dim >= model.hidden_size:
            raise ValueError(f"latent: SVD latents need kv dims ({model.kv_dim}) below d ({model.hidden_size})")
        return True

    def quant_for(self, bits: float, along: str) -> TensorQuant:
        """The storage of a latent quantized to `bits` with groups along "tokens" (XK: per channel, the last
        L mod G tokens in an fp16 block window) or "channels" (X, XV, the deltas: per token, no window)."""
        window = self.group_size if along == "tokens" else 0  # §4: residual up to a group for per-channel
        return TensorQuant(bits=bits, group_along=along, group_size=self.group_size, mode="asymmetric",
                           scale_dtype="fp16", zero_dtype="fp16", window=window, window_mode="block")

    def _tensors(self, model: Model, tokens, bits, sym_bits, delta: bool) -> tuple[TensorLayout, ...]:
        d, kv = model.hidden_size, model.kv_dim
        if delta:
            width = 2 * kv if self.uses_svd(model) else d
            return (tensor_layout(self.quant_for(bits, "channels"), "dX", tokens, width, None, 1, sym_bits),)
        if not self.uses_svd(model):
            return (tensor_layout(self.quant_for(bits, "channels"), "X", tokens, d, None, 1, sym_bits, "key"),)
        k_channels = kv - 1 if self.fp16_first_channel else kv
        tensors = (tensor_layout(self.quant_for(bits, "tokens"), "XK", tokens, k_channels, None, 1, sym_bits, "key"),
                   tensor_layout(self.quant_for(bits, "channels"), "XV", tokens, kv, None, 1, sym_bits, "value"))
        if self.fp16_first_channel:
            tensors += (tensor_layout(self.quant_for(16, "channels"), "XK0", tokens, 1, None, 1),)
        return tensors

    def _remat(self, model: Model, tokens, delta: bool) -> ExtraOp:
        """Rematerialization of K and V for all `tokens` (per layer, per sequence)."""
        d, kv = model.hidden_size, model.kv_dim
        rope = ROPE_FLOPS * tokens * kv
        if delta:
            acc = tokens * d * nsimplified(self.accumulator_bits) / 8
            inner = 2 * kv if self.uses_svd(model) else d
            matmul = 2 * tokens * d * 2 * kv + (2 * tokens * inner * d if self.uses_svd(model) else 0)
            weights = d * 2 * kv * WB + (inner * d * WB if self.uses_svd(model) else 0)
            return ExtraOp("remat", matmul_flops=matmul, vector_flops=rope + 2 * tokens * d,
                           weight_bytes=weights, kv_read_bytes=acc * (self.accumulator_rw - 1),
                           kv_write_bytes=acc, fused=self.fused)
        if self.uses_svd(model):
            return ExtraOp("remat", matmul_flops=2 * 2 * tokens * kv * kv, vector_flops=rope,
                           weight_bytes=2 * kv * kv * WB, fused=self.fused)
        return ExtraOp("remat", matmul_flops=2 * 2 * tokens * d * kv, vector_flops=rope,
                       weight_bytes=d * 2 * kv * WB, fused=self.fused)

    def _layer(self, model, kind, count, bits, sym_bits, delta) -> LayerCache:
        tokens = cached_tokens(kind)
        tensors = self._tensors(model, tokens, bits, sym_bits, delta) if kind.kind != "none" else ()
        remat = self._remat(model, tokens, delta)
        layer = LayerCache(count=count, attention=kind, tensors=tensors, tokens=tokens,
                           qk_head_dim=sp.Integer(model.head_dim), v_head_dim=sp.Integer(model.head_dim),
                           kv_heads=model.num_kv_heads, decode_ops=(remat,),
                           kv_projection=self.uses_svd(model) or delta)
        if self.fused:
            return layer
        # materialized: the remat kernel reads the cache, dequantizes, writes fp16 K,V; attention reads them
        fp16_kv = 2 * tokens * model.kv_dim * WB
        reads = sp.Add(*(t.read_bytes for t in tensors))
        dequant = sp.Add(*(t.dequant_flops for t in tensors))
        remat = ExtraOp("remat", remat.matmul_flops, remat.vector_flops + dequant, remat.weight_bytes,
                        kv_read_bytes=remat.kv_read_bytes + reads, kv_write_bytes=remat.kv_write_bytes + fp16_kv,
                        int_ops=sp.Add(*(t.dequant_int_ops for t in tensors)))
        return LayerCache(**{**layer.__dict__, "decode_ops": (remat,), "attention_read_bytes": fp16_kv,
                             "attention_dequant_flops": sp.Integer(0), "attention_dequant_int_ops": sp.Integer(0)})

    def not_applicable(self, model: Model) -> str | None:
        """Why this config cannot apply to `model` (XQuant-CL across recurrent layers), or None."""
        if self.cross_layer and model.layer_counts().get("linear"):
            return "XQuant-CL accumulates deltas of X across adjacent layers; recurrent layers sit between them"
        return None

    def cache(self, model: Model, bits: sp.Expr | None = None) -> CacheModel:
        """Per layer group: the quantized X, latents or deltas (groups of 128, fp16 scale and zero) and the
        remat op (4·l·d^2 FLOPs MHA, 4·l·(d/g)^2 GQA, 8·l·d^2/g + 2·l·d CL GQA; §3.3-3.4); fixed SVD factors
        (2·d_kv^2·2 B per layer) and U_kv for CL GQA; the CL accumulator as workspace (l·d·e_b/8 bytes).
        `bits` replaces the main bits (not the high-precision layers'). Raises ValueError on an MLA model."""
        if model.mla is not None:
            raise ValueError("method: xquant caches X for MHA/GQA layers; MLA is not modelled")
        self.uses_svd(model)
        k = min(self.high_precision_layers, model.num_layers)
        groups: dict[tuple, int] = {}
        for i in range(model.num_layers):
            high = i < k
            key = (model.layer_attention(i), self.high_precision_bits if high else self.bits,
                   self.cross_layer and not high)
            groups[key] = groups.get(key, 0) + 1
        layers = tuple(self._layer(model, kind, n, b, None if (bits is None or b != self.bits) else bits, delta)
                       for (kind, b, delta), n in groups.items())
        fixed = {}
        if self.uses_svd(model):
            fixed["svd_factors"] = model.num_layers * 2 * model.kv_dim * model.kv_dim * int(WB)
        if self.cross_layer and self.uses_svd(model):
            fixed["u_kv"] = model.num_layers * model.hidden_size * 2 * model.kv_dim * int(WB)
        workspace = sp.Integer(0)
        if self.cross_layer:
            workspace = cached_tokens(model.layer_attention(0)) * model.hidden_size * nsimplified(
                self.accumulator_bits) / 8
        return CacheModel(method=self.method, layers=layers, fixed_bytes=fixed,
                          baseline_elements=baseline_elements(model),
                          baseline_width=kv_elements_per_token_layer(model), workspace_bytes=workspace)

    def limits(self, model: Model, probe) -> dict:
        """The rematerialization limit l* (§3.4, Eq. 3-4, catalogue form) of XQuant at this config's bits."""
        return {"remat_limit_tokens": probe.remat_limit(_catalogue_form(self.bits))["limit_tokens"]}

    def plan_notes(self, model: Model, probe, data: dict) -> list[str]:
        """Why a 3-bit row is slower than the 2- and 4-bit ones: codes that straddle bytes unpack with a second
        bit plane, 9 integer ops per 4 elements against 3 (kv.quant.dequant_int_ops_per_element); the extra
        is the step's integer work above the same cache at 4 bits (same elements, 3 ops per 4)."""
        def int_ops(cache: CacheModel) -> sp.Expr:
            return sp.Add(*(layer.count * layer.dequant_int_ops for layer in cache.layers))

        def build():
            from roofline.units import L

            return [L], {"extra": int_ops(self.cache(model)) - int_ops(self.cache(model, bits=sp.Integer(4)))}, {}

        # compiled once per model and config (memory, then disk): a new context evaluates it in microseconds, where
        # a symbolic substitution per context imported sympy into a server that had loaded everything else compiled
        fns, _ = codegen.compiled(codegen.content_key("xquant-extra-int-ops", model, self), build)
        extra = float(fns["extra"](probe.context))
        seconds = extra * probe.batch / probe.hardware.int_ops_per_s()
        if seconds <= 0:
            return []
        shows = "the step is compute-bound, so it adds to TPOT" if data["bound"] == "compute" else \
            "hidden under the memory time"
        return [f"{self.bits:g}-bit codes straddle bytes: unpacking takes 9 integer ops per 4 elements (a second "
                f"bit plane) against 3 for 2- or 4-bit codes, +{seconds * 1e3:.2f} ms of integer work per step; "
                f"{shows}"]


PRESETS = (
    *(preset(f"xquant-{_e}", "xquant", f"XQuant {_e}-bit (X on MHA, SVD latents on GQA), group 128", bits=_e)
    for _e in (2, 3, 4)),
    *(preset(f"xquant-cl-{_e}", "xquant", f"XQuant-CL {_e}-bit deltas, first 3 layers 4-bit (Table 4)",
           bits=_e, cross_layer=True, high_precision_layers=3)
    for _e in (2, 3, 4)),
)


@functools.cache
def _catalogue_form(bits: float) -> XQuant:
    """XQuant at `bits` with every other option at its default (the config l* is stated for); one per bit width."""
    return XQuant(bits=bits)

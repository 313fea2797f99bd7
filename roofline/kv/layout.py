"""What a KV method stores and does, per layer, as sympy expressions — the method/cost-model interface.

A method turns (model, its config) into a `CacheModel`: for each group of identical layers, the cached
tensors (each a `TensorLayout`: bytes by part, FLOPs to dequantize and quantize), the attention it runs
(tokens attended, per-head dims), and the extra ops it adds; plus fixed memory (predictors, SVD factors).
All byte counts are per sequence; the op graph multiplies by the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from roofline.lazy import sp
from roofline.specs import AttentionLayer
from roofline.units import nsimplified, window_occupancy

# Parts of a cache, for breakdowns: quantized codes, scales/zeros/norms, full-precision tokens, outliers,
# the DSA indexer's keys, recurrent layers' fixed state.
PARTS = ("data", "metadata", "window", "sinks", "outliers", "indexer", "state")


@dataclass(frozen=True)
class TensorLayout:
    """One cached tensor of one layer, one sequence, at context L.

    `resident` maps a part to bytes held; `read` is what a decode step reads (default: all of it);
    `dequant_flops` are vector FLOPs per decode step to use the stored form; `quantize_*` are the
    per-step (amortized) cost of quantizing tokens that leave the full-precision window.
    """

    name: str
    elements: sp.Expr
    resident: dict[str, sp.Expr]
    channels: int = 0
    # what attention does with it: "key" (read by QK^T; also by PV when the layer caches no "value", as
    # MLA's latent), "value" (read by PV), "aux" (read by the method's own ops, not by attention), "state"
    # (a recurrent layer's fixed state, read and rewritten by its recurrence)
    role: str = "aux"
    # bits one quantized element costs with its share of metadata and outliers (16 if unquantized)
    bits_per_element: sp.Expr = field(default_factory=lambda: sp.Integer(16))
    dequant_flops: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    # integer instructions per decode step to unpack and convert codes for the tensor cores
    dequant_int_ops: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    quantize_flops: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    quantize_bytes: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    append_bytes: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    read: dict[str, sp.Expr] | None = None
    # scale/zero bytes loaded from shared memory into registers per decode step (kv.quant.metadata_loads)
    metadata_loads: sp.Expr = field(default_factory=lambda: sp.Integer(0))

    @property
    def resident_bytes(self) -> sp.Expr:
        """Bytes held per sequence at context L: the sum over parts of `resident`."""
        return sp.Add(*self.resident.values())

    @property
    def read_bytes(self) -> sp.Expr:
        """Bytes a decode step reads per sequence: the sum of `read`, or of `resident` if None."""
        return sp.Add(*(self.read if self.read is not None else self.resident).values())

    @property
    def written_bytes(self) -> sp.Expr:
        """Bytes written per decode step: the new token plus the amortized quantization of old ones."""
        return self.append_bytes + self.quantize_bytes

    @property
    def shared_bytes(self) -> sp.Expr:
        """Bytes a fused decode kernel moves through shared memory per step: every byte read once (staged by
        asynchronous copies, then loaded into the dot's operand layout) plus the metadata loads."""
        return self.read_bytes + self.metadata_loads


@dataclass(frozen=True)
class ExtraOp:
    """An op a method adds (remat GEMM, predictor, online compression), per layer, per sequence.

    `matmul_flops` run on the matrix units at the compute dtype; `vector_flops` on the vector units.
    Bytes are split by traffic class like every op: weights (shared by the batch) and per-sequence traffic.
    """

    name: str
    matmul_flops: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    vector_flops: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    weight_bytes: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    act_read_bytes: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    act_write_bytes: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    kv_read_bytes: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    kv_write_bytes: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    # Fused into the attention kernel: its time is added inside the attention op (one launch, one roofline).
    fused: bool = False
    int_ops: sp.Expr = field(default_factory=lambda: sp.Integer(0))


@dataclass(frozen=True)
class LayerCache:
    """A group of `count` identical layers: what each caches and how its decode attention runs."""

    count: int
    attention: AttentionLayer
    tensors: tuple[TensorLayout, ...]
    tokens: sp.Expr
    qk_head_dim: sp.Expr
    v_head_dim: sp.Expr
    kv_heads: int
    decode_ops: tuple[ExtraOp, ...] = ()
    prefill_ops: tuple[ExtraOp, ...] = ()
    # The baseline K,V projection of the new token still runs (False for methods that rematerialize it).
    kv_projection: bool = True
    # ZACK folds V's reduction into W_V and W_L: model-wide V projection output / O projection input widths
    v_out_width: int | None = None
    o_in_width: int | None = None
    # Bytes the attention kernel reads instead of the tensors (XQuant materialized: fp16 K,V) and the
    # dequantization FLOPs it does then; None: the tensors' read bytes and dequant FLOPs.
    attention_read_bytes: sp.Expr | None = None
    attention_dequant_flops: sp.Expr | None = None
    attention_dequant_int_ops: sp.Expr | None = None

    def resident(self) -> dict[str, sp.Expr]:
        """Bytes per sequence by part for one layer of the group, summed over its tensors."""
        parts: dict[str, sp.Expr] = {}
        for t in self.tensors:
            for part, value in t.resident.items():
                parts[part] = parts.get(part, sp.Integer(0)) + value
        return parts

    @property
    def resident_bytes(self) -> sp.Expr:
        """Bytes resident per sequence in one layer of the group: the sum over its tensors."""
        return sp.Add(*(t.resident_bytes for t in self.tensors))

    @property
    def read_bytes(self) -> sp.Expr:
        """Bytes one decode step reads per sequence from one layer's tensors."""
        return sp.Add(*(t.read_bytes for t in self.tensors))

    @property
    def attention_reads(self) -> sp.Expr:
        """Bytes the attention kernel reads per sequence and decode step in one layer:
        `attention_read_bytes` if set, else `read_bytes`."""
        return self.read_bytes if self.attention_read_bytes is None else self.attention_read_bytes

    @property
    def attention_dequant(self) -> sp.Expr:
        """Dequantization FLOPs the attention kernel does per sequence and decode step in one
        layer: `attention_dequant_flops` if set, else `dequant_flops`."""
        return self.dequant_flops if self.attention_dequant_flops is None else self.attention_dequant_flops

    @property
    def attention_int_ops(self) -> sp.Expr:
        """Integer instructions the attention kernel spends unpacking codes per sequence and
        decode step in one layer: `attention_dequant_int_ops` if set, else `dequant_int_ops`."""
        return self.dequant_int_ops if self.attention_dequant_int_ops is None else self.attention_dequant_int_ops

    @property
    def attention_shared_bytes(self) -> sp.Expr:
        """Bytes the fused attention kernel moves through shared memory per sequence and step in one layer: the
        attention reads when they replace the tensors (fp16, read once, no metadata), else the shared bytes of the
        tensors attention reads (role "key"/"value")."""
        if self.attention_read_bytes is not None:
            return self.attention_read_bytes
        return sp.Add(*(t.shared_bytes for t in self.tensors if t.role in ("key", "value")))

    @property
    def dequant_int_ops(self) -> sp.Expr:
        """Integer instructions per decode step to unpack one layer's tensors, summed."""
        return sp.Add(*(t.dequant_int_ops for t in self.tensors))

    @property
    def written_bytes(self) -> sp.Expr:
        """Bytes written per sequence and decode step in one layer: the new token plus the
        amortized quantization, summed over its tensors."""
        return sp.Add(*(t.written_bytes for t in self.tensors))

    @property
    def elements(self) -> sp.Expr:
        """Elements stored per sequence in one layer at context L, summed over its tensors."""
        return sp.Add(*(t.elements for t in self.tensors))

    @property
    def dequant_flops(self) -> sp.Expr:
        """Vector FLOPs per decode step to dequantize one layer's tensors, summed."""
        return sp.Add(*(t.dequant_flops for t in self.tensors))

    @property
    def quantize_flops(self) -> sp.Expr:
        """Amortized vector FLOPs per decode step to quantize one layer's tensors, summed."""
        return sp.Add(*(t.quantize_flops for t in self.tensors))


@dataclass(frozen=True)
class CacheModel:
    """Everything a method stores and does for one model: layer groups plus fixed extra memory."""

    method: str
    layers: tuple[LayerCache, ...]
    fixed_bytes: dict[str, int] = field(default_factory=dict)
    # Elements of the uncompressed bf16 K,V the cache stands for (the denominator of effective bits).
    baseline_elements: sp.Expr = field(default_factory=lambda: sp.Integer(0))
    # Uncompressed K,V elements per token in one attending layer (2 H_kv d_h, or the MLA latent width).
    baseline_width: int = 0
    # Per-sequence scratch a decode step needs beside the cache (XQuant-CL's accumulator), bytes at L.
    workspace_bytes: sp.Expr = field(default_factory=lambda: sp.Integer(0))

    def resident_parts(self) -> dict[str, sp.Expr]:
        """Bytes per sequence by part, summed over all layers."""
        parts: dict[str, sp.Expr] = {}
        for layer in self.layers:
            for part, value in layer.resident().items():
                parts[part] = parts.get(part, sp.Integer(0)) + layer.count * value
        return parts

    @property
    def resident_bytes(self) -> sp.Expr:
        """KV bytes resident per sequence at context L (all layers)."""
        return sp.Add(*(layer.count * layer.resident_bytes for layer in self.layers))

    @property
    def read_bytes(self) -> sp.Expr:
        """KV bytes one decode step reads per sequence (all layers)."""
        return sp.Add(*(layer.count * layer.read_bytes for layer in self.layers))

    @property
    def reserved_bytes(self) -> sp.Expr:
        """KV bytes a sequence must have reserved to reach context L: the peak over its life, with every
        residual window at its fullest. Never decreases with L (capacity planning uses this)."""
        return window_occupancy(self.resident_bytes, "peak")

    def reserved_parts(self) -> dict[str, sp.Expr]:
        """Bytes per sequence by part that reaching context L reserves: each part of
        `resident_parts` at its peak window occupancy (their sum is `reserved_bytes`)."""
        return {part: window_occupancy(v, "peak") for part, v in self.resident_parts().items()}

    @property
    def fixed_total(self) -> int:
        """Fixed bytes (predictors, SVD factors, codebooks) held once per model, summed."""
        return int(sum(self.fixed_bytes.values()))

    def effective_bits(self) -> sp.Expr:
        """Bits per baseline K/V element at context L: resident bytes x 8 / elements of the bf16 cache."""
        return 8 * self.resident_bytes / self.baseline_elements

    def asymptotic_bits(self) -> sp.Expr:
        """Bits per uncompressed K/V element of each stored token, as L grows: full-precision windows and
        sinks vanish, so it is sum over tensors of (bits per quantized element, metadata and outliers
        included) x (channels stored) / (K,V elements per token), averaged over the layers whose cache
        grows with L. Token-count effects (eviction) are not in it. This is what the papers' bit-width
        tables report (XQuant's normalized sizes are it / 16)."""
        growing = [layer for layer in self.layers if layer.attention.kind == "full"] or list(self.layers)
        num = sp.Add(*(layer.count * t.bits_per_element * t.channels for layer in growing for t in layer.tensors))
        den = sp.Add(*(layer.count * self.baseline_width for layer in growing))
        return nsimplified(num / den) if den else sp.Integer(0)

    def compression_ratio(self) -> sp.Expr:
        """bf16 bytes over this method's bytes, asymptotically (16 / asymptotic bits)."""
        return 16 / self.asymptotic_bits()

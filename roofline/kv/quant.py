"""The one quantized-storage mechanism every quantizing method shares.

A `TensorQuant` says how one cached tensor (K, V, XQuant's X, a latent) is stored: bits (fractional
allowed) and how they are physically packed, the grouping axis and group size, scale/zero-point dtypes,
symmetric / asymmetric / hybrid mode, full-precision sink and recent-window tokens with the method's
residual semantics, sparse outliers, and a non-uniform codebook. `tensor_layout` turns it into bytes by
part and FLOPs, as sympy expressions of the tokens the layer holds. What a decode kernel moves through shared
memory and the integer work of its dequant depend on the kernel, not the method: they come from the active kernel
profile (roofline.catalogue.kernel_profiles), never from constants here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from roofline.accounting import dtype_bytes
from roofline.catalogue import kernel_profiles
from roofline.kv.layout import TensorLayout
from roofline.lazy import sp
from roofline.specs.base import Spec
from roofline.units import nsimplified

MetaDtype = Literal["fp32", "fp16", "bf16", "fp8", "none"]
Axis = Literal["channels", "tokens"]

# Vector FLOPs to quantize one element: range (min/max or absmax), scale, shift, round, clamp.
QUANTIZE_FLOPS_PER_ELEMENT = 5
def meta_bytes(dtype: str) -> sp.Expr:
    """Bytes of one metadata value of `dtype` (0 for 'none'); raises ValueError on an unknown dtype."""
    return sp.Integer(0) if dtype == "none" else dtype_bytes(dtype)


def exact(value: float) -> sp.Expr:
    """A config float (bits, fractions) as an exact rational, so 1.5 bits and 1% stay exact."""
    return nsimplified(value, rational=True) if not isinstance(value, sp.Basic) else value


class TensorQuant(Spec):
    """How one cached tensor is stored. bits >= 16 means unquantized (fp16/bf16, no metadata)."""

    bits: float = Field(gt=0, le=16, description="Bits per element of the quantized codes (1.5 allowed).")
    storage_bits: float | None = Field(
        None, gt=0, le=16, description="Bits each element occupies in memory (SKVQ stores 1.5-bit in 2); default bits."
    )
    number_format: Literal["int", "float", "codebook"] = Field(
        "int", description="Uniform integer grid, a float format (fp8), or a non-uniform codebook (lookup)."
    )
    group_along: Axis = Field(
        "channels",
        description="A group spans G channels of one token ('channels': per-token) or G tokens of one channel "
        "('tokens': per-channel).",
    )
    group_size: PositiveInt | None = Field(None, description="Elements per group G; None: no groups/metadata.")
    mode: Literal["symmetric", "asymmetric", "hybrid"] = Field(
        "asymmetric", description="Zero-point use; hybrid keeps a dense zero matrix and a per-group sign-bit flag."
    )
    scale_dtype: MetaDtype = Field("fp16", description="Dtype of one scale (or norm) per group.")
    zero_dtype: MetaDtype = Field("fp16", description="Dtype of one zero-point per group (asymmetric/hybrid).")
    codebook_dtype: MetaDtype = Field("fp16", description="Dtype of codebook entries (number_format 'codebook').")
    codebook_per_channel: bool = Field(
        False, description="One codebook per channel per layer (KVQuant) instead of one per layer."
    )
    sinks: NonNegativeInt = Field(0, description="First tokens kept in full precision (attention sinks).")
    window: NonNegativeInt = Field(0, description="Most recent tokens kept in full precision.")
    window_mode: Literal["sliding", "block"] = Field(
        "sliding",
        description="'sliding': each step the oldest window token is quantized; 'block': the window fills to "
        "`window` tokens, then all are quantized at once (KIVI's keys).",
    )
    outlier_fraction: float = Field(0.0, ge=0, lt=1, description="Fraction of elements kept as sparse outliers.")
    outlier_value_dtype: MetaDtype = Field("fp16", description="Dtype of an outlier value.")
    outlier_index_bytes: NonNegativeInt = Field(4, description="Bytes of index per outlier (int32: 4).")
    outlier_row_pointer_bytes: NonNegativeInt = Field(
        0, description="Bytes per quantized token for a CSR row pointer into the outliers (KVQuant: int32)."
    )
    window_dtype: Literal["fp16", "bf16", "fp32", "fp8"] = Field("fp16", description="Dtype of full-precision tokens.")

    @model_validator(mode="after")
    def _consistent(self) -> TensorQuant:
        if self.storage_bits is not None and self.storage_bits < self.bits:
            raise ValueError(f"storage_bits: {self.storage_bits} is below bits {self.bits}")
        if self.group_size is None and self.quantized and self.number_format == "int":
            raise ValueError("group_size: an integer quantizer needs a group size (scales per group)")
        if self.mode == "symmetric" and self.zero_dtype != "none" and self.group_size is not None:
            raise ValueError("zero_dtype: a symmetric quantizer stores no zero-point (set it to 'none')")
        if self.mode != "symmetric" and self.zero_dtype == "none" and self.quantized and self.group_size:
            raise ValueError(f"zero_dtype: mode {self.mode!r} needs a zero-point dtype")
        if (self.group_along == "tokens" and self.window_mode == "block" and self.window
                and self.group_size and self.window % self.group_size):
            raise ValueError(
                f"window: a block window of {self.window} tokens is not a multiple of group_size {self.group_size}"
            )
        return self

    @property
    def quantized(self) -> bool:
        """True below 16 bits (codes plus metadata), False for unquantized storage."""
        return self.bits < 16

    def check_channels(self, channels: int, what: str) -> None:
        """A channel group must divide the channels it spans."""
        if self.quantized and self.group_along == "channels" and self.group_size and channels % self.group_size:
            raise ValueError(
                f"group_size: {self.group_size} does not divide the {channels} channels of {what}"
            )


def full_precision_tokens(q: TensorQuant, tokens: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    """(sink tokens, recent tokens) kept in full precision out of `tokens`, per the residual semantics."""
    sinks = sp.Min(tokens, q.sinks)
    rest = sp.Max(tokens - q.sinks, 0)
    by_tokens = q.group_along == "tokens" and q.group_size and q.group_size > 1
    if q.window_mode == "block" and q.window:
        recent = sp.Mod(rest, q.window)
    else:
        recent = sp.Min(rest, q.window)
        if by_tokens:
            # a per-channel group needs G tokens: leftovers wait in full precision until G accumulate
            recent += sp.Mod(rest - recent, q.group_size)
    return sinks, recent


def tensor_layout(
    q: TensorQuant,
    name: str,
    tokens: sp.Expr,
    channels: int,
    reduction: Axis | None,
    queries_per_kv: int = 1,
    bits: sp.Expr | None = None,
    role: str = "aux",
    kv_heads: int = 0,
) -> TensorLayout:
    """Bytes and FLOPs of one tensor of `tokens` x `channels` per layer per sequence.

    data      = quantized tokens x channels x storage_bits / 8
    metadata  = groups x (scale + zero) bytes, groups = quantized elements / G
    window    = recent full-precision tokens x channels x 2;  sinks likewise
    outliers  = fraction x quantized elements x (value + index bytes)
    dequant   = per quantized element, 1 (scale) + 1 (zero) FLOPs when the group runs across the
                reduction axis of the decode GEMV; when it runs along it (InnerQ §4.1) the scale and zero
                apply once per group per query head: (1 + 1) x queries_per_kv / G per element.
    metadata_loads = `metadata_loads` (scale/zero bytes into registers per step) + `operand_loads` (the other
                operand of the fused kernel's dot, re-read from shared memory: q for K, p for V).
    `role` says what attention reads it for (TensorLayout.role). `bits` overrides q.bits symbolically
    (for sweeps). `reduction` None: the tensor is dequantized
    element by element before a GEMM (XQuant's X), so scales are never reused. `kv_heads` (the KV heads
    `channels` spans; 0: unknown, no operand loads) sizes the per-head operand tiles.
    """
    elements = tokens * channels
    full_bytes = dtype_bytes(q.window_dtype)
    if not q.quantized and bits is None:
        return TensorLayout(
            name=name, elements=elements, resident={"data": elements * full_bytes}, channels=channels, role=role,
            bits_per_element=8 * full_bytes, append_bytes=channels * full_bytes,
        )
    b = exact(q.bits) if bits is None else bits
    stored = exact(q.storage_bits) if (q.storage_bits is not None and bits is None) else b
    sinks, recent = full_precision_tokens(q, tokens)
    quant_tokens = tokens - sinks - recent
    quant_elements = quant_tokens * channels
    resident = {
        "data": quant_elements * stored / 8,
        "window": recent * channels * full_bytes,
        "sinks": sinks * channels * full_bytes,
    }
    per_group = sp.Integer(0)
    if q.group_size:
        per_group = meta_bytes(q.scale_dtype) + (meta_bytes(q.zero_dtype) if q.mode != "symmetric" else 0)
        resident["metadata"] = quant_elements / q.group_size * per_group
    fraction = exact(q.outlier_fraction)
    per_outlier = meta_bytes(q.outlier_value_dtype) + q.outlier_index_bytes
    if fraction:
        resident["outliers"] = (fraction * quant_elements * per_outlier
                                + quant_tokens * q.outlier_row_pointer_bytes)
    bits_per_element = (stored + (8 * per_group / q.group_size if q.group_size else 0)
                        + 8 * fraction * per_outlier
                        + (sp.Rational(8 * q.outlier_row_pointer_bytes, channels) if fraction else 0))

    ops_per_group = 1 + (1 if q.mode != "symmetric" and q.group_size else 0)
    if q.group_size and q.group_along == reduction:
        dequant = quant_elements * ops_per_group * queries_per_kv / q.group_size
    else:
        dequant = quant_elements * ops_per_group
    dequant += fraction * quant_elements  # scatter-add of outliers
    int_ops = quant_elements * dequant_int_ops_per_element(q, stored)

    loads = metadata_loads(q, quant_elements, per_group, reduction)
    if reduction is not None and kv_heads:
        loads += operand_loads(role, quant_tokens, channels, kv_heads, queries_per_kv)
    staged = bool(q.window or q.sinks or (q.group_along == "tokens" and q.group_size and q.group_size > 1))
    packed_token = channels * stored / 8 + (sp.Rational(channels, q.group_size) * per_group if q.group_size else 0)
    if staged:
        # each step one token enters in full precision and (amortized) one leaves the window, quantized
        append = channels * full_bytes
        quantize_bytes = channels * full_bytes + packed_token
    else:
        append, quantize_bytes = packed_token, sp.Integer(0)
    return TensorLayout(
        name=name,
        elements=elements,
        resident=resident,
        channels=channels,
        role=role,
        bits_per_element=bits_per_element,
        dequant_flops=dequant,
        dequant_int_ops=int_ops,
        quantize_flops=QUANTIZE_FLOPS_PER_ELEMENT * channels,
        quantize_bytes=quantize_bytes,
        append_bytes=append,
        metadata_loads=loads,
    )


def metadata_loads(q: TensorQuant, quant_elements: sp.Expr, per_group: sp.Expr, reduction: Axis | None) -> sp.Expr:
    """Scale/zero bytes a fused decode kernel reads from shared memory per step, by grouping axis, under the active
    kernel profile P (roofline.catalogue.kernel_profiles).

    Groups along the dot's reduction (InnerQ/SKVQ: K per token, V per channel): the kernel dots the raw codes
    over one group and scales (and shifts) the partial result once per group (InnerQ §4.4, Fig. 1b: "compute
    units processing the same channel group load the scale factor once and reuse it"): elements / G x (scale +
    zero bytes), the stored metadata, read once (the warps split the tokens of K's per-token groups and the
    channels of V's per-channel groups, so no two warps need one group).
    Groups across it (KIVI's per-channel K and per-token V): the scale changes along the reduction, so every
    element is dequantized with its own scale and zero before the dot:
        P.scale_per_element: (scale + zero bytes) x elements, in the dot's B-operand layout; else
                             (scale + zero bytes) x elements / G, each scale once per group
      + P.scale_copies x elements / G x (scale + zero bytes)   (each warp that splits the dot's N copies every
                                                              scale of the reduction, InnerQ §4.4)
    The dequantized operand is shared by the query heads of its KV head (one tensor-core operand), so it is loaded
    once, not per query row. `reduction` None (dequantized element by element before a GEMM, XQuant's X): per
    element, whatever the kernel."""
    if not q.group_size or per_group == 0:
        return sp.Integer(0)
    if q.group_along == reduction:
        return quant_elements / q.group_size * per_group
    if reduction is None:
        return quant_elements * per_group
    profile = kernel_profiles.active()
    loads = quant_elements * per_group if profile.scale_per_element else quant_elements / q.group_size * per_group
    if profile.scale_copies:
        loads += profile.scale_copies * quant_elements / q.group_size * per_group
    return loads


def operand_loads(role: str, tokens: sp.Expr, channels: int, kv_heads: int, queries_per_kv: int) -> sp.Expr:
    """Shared-memory bytes per step for the other operand of the fused kernel's dots over `tokens` quantized tokens
    of a tensor spanning `channels` (kv_heads heads of channels / kv_heads), under the active kernel profile P
    (roofline.catalogue.kernel_profiles), with the query rows of a KV head padded to M = P.mma_rows x
    ceil(queries_per_kv / P.mma_rows):
        key   (q.k^T, A = q [M x d]): q's fragments re-read from shared memory once per P.q_tokens_per_read tokens:
              tokens x kv_heads x M x d x P.operand_bytes / P.q_tokens_per_read (0 when q stays in registers)
        value (p.v, A = p [M x tokens]): p passes shared memory P.p_reads times:
              tokens x kv_heads x M x P.operand_bytes x P.p_reads
    Only a quantized tensor's fused dequant kernel is charged: unquantized attention is FlashAttention's kernel,
    measured at 88-91 % of its DRAM ceiling (issue 14). Other roles (aux): 0."""
    if not kv_heads or role not in ("key", "value"):
        return sp.Integer(0)
    profile = kernel_profiles.active()
    rows = profile.mma_rows * -(-queries_per_kv // profile.mma_rows)
    if role == "key":
        if profile.q_tokens_per_read is None:
            return sp.Integer(0)
        return tokens * sp.Rational(channels * rows * profile.operand_bytes, profile.q_tokens_per_read)
    return tokens * kv_heads * rows * profile.operand_bytes * profile.p_reads


def dequant_int_ops_per_element(q: TensorQuant, stored_bits) -> sp.Expr:
    """Integer instructions per quantized element to reach an fp16 tensor-core operand: the active kernel
    profile's count per 4 codes by stored bits (roofline.catalogue.kernel_profiles: the magic-number conversion,
    3 per 4 for 1-, 2- and 4-bit codes, 9 per 4 with a second bit plane, 2 per 4 for 8-bit codes; the scale FMA
    is counted in dequant_flops). A codebook needs the index extracted (shift + mask when packed) and looked up,
    then rounded (1 + 1); an fp8 value converts once."""
    if q.number_format == "float":
        return sp.Integer(1)
    stored = sp.sympify(stored_bits)
    if q.number_format == "codebook":
        packed = (2 if stored < 8 else 0) if stored.is_number else sp.Piecewise((2, stored < 8), (0, True))
        return packed + 1 + 1
    per_4 = kernel_profiles.active().int_ops_per_4
    if stored.is_number:
        if stored >= 8:
            return sp.Rational(per_4[8], 4)
        return sp.Rational(per_4[int(stored)], 4) if int(stored) in (1, 2, 4) else sp.Rational(per_4[3], 4)
    return sp.Piecewise((sp.Rational(per_4[8], 4), stored >= 8), (sp.Rational(per_4[4], 4), True))


def codebook_bytes(q: TensorQuant, channels: int) -> int:
    """Fixed bytes of a non-uniform codebook for one layer: 2^bits entries, per channel or shared."""
    if q.number_format != "codebook" or not q.quantized:
        return 0
    entries = 2 ** int(sp.ceiling(exact(q.bits)))
    tables = channels if q.codebook_per_channel else 1
    return int(entries * tables * meta_bytes(q.codebook_dtype))

"""The one quantized-storage mechanism every quantizing method shares.

A `TensorQuant` says how one cached tensor (K, V, XQuant's X, a latent) is stored: bits (fractional
allowed) and how they are physically packed, the grouping axis and group size, scale/zero-point dtypes,
symmetric / asymmetric / hybrid mode, full-precision sink and recent-window tokens with the method's
residual semantics, sparse outliers, and a non-uniform codebook. `tensor_layout` turns it into bytes by
part and FLOPs, as sympy expressions of the tokens the layer holds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from roofline.accounting import dtype_bytes
from roofline.kv.layout import TensorLayout
from roofline.lazy import sp
from roofline.specs.base import Spec
from roofline.units import nsimplified

MetaDtype = Literal["fp32", "fp16", "bf16", "fp8", "none"]
Axis = Literal["channels", "tokens"]

# Vector FLOPs to quantize one element: range (min/max or absmax), scale, shift, round, clamp.
QUANTIZE_FLOPS_PER_ELEMENT = 5
# The fused dequant-attention decode kernel the on-chip terms describe (validate/ops/quant_attention, the kernel
# whose sm_90 SASS is in validate/model/structure/quant_attention.json): one program per (sequence, KV head,
# split); its query rows padded to MMA_ROWS (mma.m16n8k16's M); KERNEL_WARPS warps split each dot's N (the tokens
# of q.k^T, the channels of p.v), each warp MMA_TOKENS tokens of a q.k^T sub-tile (one m16n8k16 n-tile: 4 warps x
# 8 = the 32-token sub-tile of the tiled layouts); fp16 operands (OPERAND_BYTES).
MMA_ROWS = 16
MMA_TOKENS = 8
KERNEL_WARPS = 4
OPERAND_BYTES = 2
# q.k^T sub-tile dots of one step (NSUB) that share one read of q's A fragments: the KIVI kernel the suite launches
# (qall-r128, validate/ops/quant_attention/KIVI_NOTES.md) reads q as 2 tiles a warp-step where the earlier kernel read 8
Q_SHARED_DOTS = 4


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
    """Scale/zero bytes a fused decode kernel reads from shared memory per step, by grouping axis.

    Groups along the dot's reduction (InnerQ/SKVQ: K per token, V per channel): the kernel dots the raw codes
    over one group and scales (and shifts) the partial result once per group (InnerQ §4.4, Fig. 1b: "compute
    units processing the same channel group load the scale factor once and reuse it"; the measured kernel scales
    after the dot, validate/families/QUANT_NOTES.md): elements / G x (scale + zero bytes), the stored metadata,
    read once (the warps split the tokens of K's per-token groups and the channels of V's per-channel groups, so
    no two warps need one group).
    Groups across it (KIVI's per-channel K and per-token V): the scale changes along the reduction, so every
    element is dequantized with its own scale and zero before the dot, in the dot's B-operand layout:
        (scale + zero bytes) x elements                      (the dequant layout's reads)
      + KERNEL_WARPS x elements / G x (scale + zero bytes)   (each warp that splits the dot's N copies every
                                                              scale of the reduction: "each loads its own scale",
                                                              InnerQ §4.4)
    The ncu reading of the measured KIVI-2 kernel (QUANT_NOTES.md, H200, b8 L64K: L1/TEX 91 %) counts these as
    ~250 + ~190 wavefronts per warp-step of 128 tokens (4 warps): ~1000 B per token and KV head for the first term
    (this formula: 1024) and ~760 B for the copies, of which Triton's slice layouts replicate 4x more across lane
    rows than this formula's 64 B (a layout artefact, not something the layout requires). The dequantized operand
    is shared by the query heads of its KV head (one tensor-core operand), so it is loaded once, not per query
    row. `reduction` None (dequantized element by element before a GEMM, XQuant's X): per element."""
    if not q.group_size or per_group == 0:
        return sp.Integer(0)
    if q.group_along == reduction:
        return quant_elements / q.group_size * per_group
    if reduction is None:
        return quant_elements * per_group
    return quant_elements * per_group + KERNEL_WARPS * quant_elements / q.group_size * per_group


def operand_loads(role: str, tokens: sp.Expr, channels: int, kv_heads: int, queries_per_kv: int) -> sp.Expr:
    """Shared-memory bytes per step for the other operand of the fused kernel's dots over `tokens` quantized tokens
    of a tensor spanning `channels` (kv_heads heads of channels / kv_heads), with the query rows of a KV head
    padded to M = MMA_ROWS x ceil(queries_per_kv / MMA_ROWS):
        key   (q.k^T, A = q [M x d]): every warp re-reads its q fragments from shared memory once per step for
              the Q_SHARED_DOTS sub-tile dots of MMA_TOKENS tokens each that share them (q is not held in
              registers across steps):
              tokens x kv_heads x M x d x OPERAND_BYTES / (MMA_TOKENS x Q_SHARED_DOTS) = tokens x channels x M x 2 / 32
        value (p.v, A = p [M x tokens]): p leaves the softmax in registers, is staged once through shared memory
              and read back by each of the KERNEL_WARPS warps that split the channels:
              tokens x kv_heads x M x OPERAND_BYTES x (1 + KERNEL_WARPS)
    Source: the SASS of the KIVI kernel the suite launches (qall-r128, validate/model/structure/
    quant_attention.json: 4 x 570 wavefronts per 128 tokens; KIVI_NOTES.md): q read as 2 tiles x 4 LDSM = 32
    wavefronts per warp-step = 128 B per token and KV head, the formula's 16 x 128 x 2 / 32 = 128 (the earlier kernel
    re-read it per sub-tile: 8 tiles, 128 wavefronts, 512 B: the ncu reading of QUANT_NOTES.md); p staging ~36 per
    warp-step = 144 B, the formula's 16 x 2 x 5 = 160. Measured on both GPUs: KIVI-2 over InnerQ-Base 1.15-1.30x
    (validate/results/nvidia-h{100,200}.json).
    Only a quantized tensor's fused dequant kernel is charged: unquantized attention is FlashAttention's kernel,
    measured at 88-91 % of its DRAM ceiling (issue 14). Other roles (aux): 0."""
    if not kv_heads or role not in ("key", "value"):
        return sp.Integer(0)
    rows = MMA_ROWS * -(-queries_per_kv // MMA_ROWS)
    if role == "key":
        return tokens * sp.Rational(channels * rows * OPERAND_BYTES, MMA_TOKENS * Q_SHARED_DOTS)
    return tokens * kv_heads * rows * OPERAND_BYTES * (1 + KERNEL_WARPS)


def dequant_int_ops_per_element(q: TensorQuant, stored_bits) -> sp.Expr:
    """Integer instructions per quantized element to reach an fp16 tensor-core operand, with the
    magic-number conversion fast dequant kernels use (validate/ops/quant_attention/tiled_dequant.py, and the
    lop3/prmt kernels it follows): a 32-bit word of four code bytes is masked once (`and`) and two
    `prmt`s drop field f of each byte into the mantissa of an fp16 whose exponent makes it 1024 + 2^(af) u
    (the 1024 and 2^(af) fold into the scale FMA, counted in dequant_flops): 3 per 4 elements for 1-, 2- and
    4-bit codes; a second bit plane (3-bit codes) adds shl, and, or per fp16 pair: 9 per 4; 8-bit codes
    need only the two prmts: 2 per 4. No shifts, no int-to-float conversion, no rounding. A codebook
    needs the index extracted (shift + mask when packed) and looked up, then rounded (1 + 1); an fp8
    value converts once."""
    if q.number_format == "float":
        return sp.Integer(1)
    stored = sp.sympify(stored_bits)
    if q.number_format == "codebook":
        packed = (2 if stored < 8 else 0) if stored.is_number else sp.Piecewise((2, stored < 8), (0, True))
        return packed + 1 + 1
    if stored.is_number:
        if stored >= 8:
            return sp.Rational(2, 4)
        return sp.Rational(3, 4) if int(stored) in (1, 2, 4) else sp.Rational(9, 4)
    return sp.Piecewise((sp.Rational(2, 4), stored >= 8), (sp.Rational(3, 4), True))


def codebook_bytes(q: TensorQuant, channels: int) -> int:
    """Fixed bytes of a non-uniform codebook for one layer: 2^bits entries, per channel or shared."""
    if q.number_format != "codebook" or not q.quantized:
        return 0
    entries = 2 ** int(sp.ceiling(exact(q.bits)))
    tables = channels if q.codebook_per_channel else 1
    return int(entries * tables * meta_bytes(q.codebook_dtype))

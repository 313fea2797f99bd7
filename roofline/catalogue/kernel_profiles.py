"""Kernel profiles: what the planner assumes about the fused dequant-attention decode kernel, as named data.

A quantized cache's decode step moves more than its DRAM bytes through an SM: the kernel stages the codes and their
scales through shared memory and re-reads the other operand of each dot (q for q.k^T, p for p.v). How much depends
on the kernel, not on the method, so it is a profile the user chooses (`roofline plan --kernel-profile NAME`),
never a constant of kv/ or methods/ (DESIGN.md, "costmodel/ ... kernel profiles as named data"). kv.quant reads the
active profile (`active`, default DEFAULT) when it builds a tensor's layout; every cache key of the planner
(numbers.codegen.content_key through `keyed`, methods.registry.shared_cache, costmodel.graph) carries a profile
other than the default.

A profile's fields (per KV head; M = query rows of the head padded to `mma_rows`):
    mma_rows          rows one tensor-core MMA takes (mma.m16n8k16: M = 16), the padding of a head's query rows
    operand_bytes     bytes of one dot operand element (fp16 / bf16: 2)
    q_tokens_per_read K tokens whose q.k^T dots share one shared-memory read of q's fragments; None: q is held in
                      registers for the whole KV loop (read once per program: nothing per token)
    p_reads           passes of p [M x tokens] through shared memory per step (written once, read by each warp that
                      splits p.v's channels); 0: p stays in registers as the next dot's A operand
    scale_copies      warps that each copy every scale of a group running across the dot's reduction (KIVI's
                      per-channel K, per-token V); 0: none
    scale_per_element True: such a scale is read per element, in the dot's operand layout; False: once per group
    int_ops_per_4     integer instructions per 4 codes to reach an fp16 operand, by stored bits (magic-number
                      conversion: mask, then prmt each byte into an fp16 mantissa; a second bit plane adds 3)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from roofline.errors import SpecError
from roofline.numbers import codegen

# Integer instructions per 4 codes, by stored bits (3 = a second bit plane; 8 = two prmt): the magic-number
# conversion of fast dequant kernels (lop3 / prmt: FastInterleavedAndBiasedNumericArrayConverter, pytorch/pytorch
# aten/src/ATen/native/cuda/cutlass_extensions/interleaved_numeric_conversion.h, from NVIDIA FasterTransformer), as
# the lab's validate/ops/quant_attention/tiled_dequant.py implements it.
MAGIC_NUMBER_INT_OPS_PER_4 = {1: 3, 2: 3, 4: 3, 3: 9, 8: 2}


@dataclass(frozen=True)
class KernelProfile:
    """One decode kernel's shared-memory and integer work per quantized token (module docstring)."""

    name: str
    description: str
    source: str
    mma_rows: int = 16
    operand_bytes: int = 2
    q_tokens_per_read: int | None = None
    p_reads: int = 0
    scale_copies: int = 0
    scale_per_element: bool = False
    int_ops_per_4: dict[int, int] = field(default_factory=lambda: dict(MAGIC_NUMBER_INT_OPS_PER_4))


LAB_TRITON = KernelProfile(
    name="lab-triton",
    description="the lab's fused Triton dequant-attention decode kernel (validate/ops/quant_attention, qall-r128): "
    "4 warps split each dot's N, 8 tokens a warp per m16n8k16 n-tile, q's fragments re-read once per 4 sub-tile "
    "dots, p staged once and read by each warp, every scale of a group across the reduction read per element "
    "and copied by each warp",
    source="the sm_90 SASS of validate/ops/quant_attention (validate/model/structure/quant_attention.json: q read as "
    "2 tiles x 4 LDSM = 32 wavefronts a warp-step = 128 B per token and KV head; p staging ~36 wavefronts a "
    "warp-step; validate/notes/2026-11-23-kivi-kernel-variants.md) and the ncu reading of the KIVI-2 kernel on "
    "the H200",
    q_tokens_per_read=8 * 4,
    p_reads=1 + 4,
    scale_copies=4,
    scale_per_element=True,
)

ENGINE = KernelProfile(
    name="engine",
    description="a FlashAttention-2-style decode kernel as serving engines run it: q loaded once per program and "
    "held in registers across the KV loop, p kept in registers as the A operand of p.v, each scale read once per "
    "group",
    source="Dao, 'FlashAttention-2', arXiv:2307.08691, Algorithm 1 (Q_i loaded to SRAM once, outside the loop over "
    "K_j, V_j) and Sec. 3.3 (split-Q: each warp keeps its slice of P in registers, no shared-memory exchange); the "
    "scale read once per group: InnerQ Sec. 4.4, Fig. 1b ('compute units processing the same channel group load "
    "the scale factor once and reuse it')",
)

PROFILES: dict[str, KernelProfile] = {p.name: p for p in (LAB_TRITON, ENGINE)}
DEFAULT = LAB_TRITON.name

_ACTIVE: ContextVar[KernelProfile] = ContextVar("kernel_profile", default=LAB_TRITON)


def get(name: str) -> KernelProfile:
    """The profile named `name`; SpecError naming the valid names otherwise."""
    if name not in PROFILES:
        raise SpecError(f"kernel-profile: unknown {name!r}; valid: {', '.join(PROFILES)}")
    return PROFILES[name]


def active() -> KernelProfile:
    """The profile kv.quant uses now (DEFAULT unless inside `use`)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def use(name: str) -> Iterator[KernelProfile]:
    """Within the block, kv.quant builds layouts with the profile `name` (and every cache key carries it)."""
    token = _ACTIVE.set(get(name))
    try:
        with codegen.keyed(*(() if name == DEFAULT else ("kernel_profile", name))):
            yield _ACTIVE.get()
    finally:
        _ACTIVE.reset(token)

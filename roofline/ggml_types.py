"""ggml's tensor types: elements per block and bytes per block, exact (one table for weights and the KV cache).

From llama.cpp at commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f (the tree llama-cpp-python 0.3.36's sdist vendors):
ggml/src/ggml.c `type_traits[]` (.blck_size, .type_size = sizeof(block_*)) and ggml/src/ggml-common.h, whose
static_asserts state each block's bytes (QK_K = 256):

    q4_0  half d + QK4_0/2 nibbles                     = 2 + 16            = 18 B / 32
    q4_1  2 half (d, m) + 16                           = 20 B / 32
    q5_0  half + uint32 qh + 16                        = 22 B / 32
    q5_1  2 half + uint32 + 16                         = 24 B / 32
    q8_0  half + 32 int8                               = 34 B / 32
    q2_K  2 half + QK_K/16 scales + QK_K/4 quants      = 4 + 16 + 64       = 84 B / 256
    q3_K  half + QK_K/4 qs + QK_K/8 hmask + 12 scales  = 2 + 64 + 32 + 12  = 110 B / 256
    q4_K  2 half + K_SCALE_SIZE 12 + QK_K/2            = 4 + 12 + 128      = 144 B / 256
    q5_K  2 half + 12 + QK_K/2 + QK_K/8                = 4 + 12 + 128 + 32 = 176 B / 256
    q6_K  half + QK_K/16 scales + 3 QK_K/4 (ql + qh)   = 2 + 16 + 192      = 210 B / 256
    q8_K  float d + QK_K int8 + QK_K/16 int16 bsums    = 4 + 256 + 32      = 292 B / 256
    iq4_nl half + 16 = 18 B / 32; mxfp4 e8m0 + 16 = 17 B / 32; and the i-quants below.

A row of n elements of a block type holds n / block elements (ggml_row_size: n a multiple of the block; llama-quantize
falls back to another type when it is not, roofline.gguf_quant).
"""

from __future__ import annotations

from fractions import Fraction

QK_K = 256
# ggml type name (lower case, as ggml_type_name and llama.cpp's -ctk / -ctv spell it) -> (elements, bytes) per block
GGML_TYPES: dict[str, tuple[int, int]] = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2),
    "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34), "q8_1": (32, 36),
    "q2_K": (QK_K, 84), "q3_K": (QK_K, 110), "q4_K": (QK_K, 144), "q5_K": (QK_K, 176), "q6_K": (QK_K, 210),
    "q8_K": (QK_K, 292),
    "iq2_xxs": (QK_K, 66), "iq2_xs": (QK_K, 74), "iq2_s": (QK_K, 82), "iq3_xxs": (QK_K, 98), "iq3_s": (QK_K, 110),
    "iq1_s": (QK_K, 50), "iq1_m": (QK_K, 56), "iq4_nl": (32, 18), "iq4_xs": (QK_K, 136),
    "tq1_0": (QK_K, 54), "tq2_0": (QK_K, 66), "mxfp4": (32, 17), "nvfp4": (64, 36), "q1_0": (128, 18),
    "q2_0": (64, 18), "i8": (1, 1), "i16": (1, 2), "i32": (1, 4), "i64": (1, 8), "f64": (1, 8),
}
# enum ggml_type (ggml/include/ggml.h): the id a GGUF file stores for each tensor's type (4, 5, 31-33, 36-38 removed)
GGML_TYPE_IDS: dict[int, str] = {
    0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 9: "q8_1", 10: "q2_K", 11: "q3_K",
    12: "q4_K", 13: "q5_K", 14: "q6_K", 15: "q8_K", 16: "iq2_xxs", 17: "iq2_xs", 18: "iq3_xxs", 19: "iq1_s",
    20: "iq4_nl", 21: "iq3_s", 22: "iq2_s", 23: "iq4_xs", 24: "i8", 25: "i16", 26: "i32", 27: "i64", 28: "f64",
    29: "iq1_m", 30: "bf16", 34: "tq1_0", 35: "tq2_0", 39: "mxfp4", 40: "nvfp4", 41: "q1_0", 42: "q2_0",
}


def _key(name: str) -> str:
    """A type name in either case (Q4_K, q4_k, F16) -> the table's spelling; ValueError naming the valid ones."""
    for key in GGML_TYPES:
        if key.lower() == name.lower():
            return key
    raise ValueError(f"ggml type: unknown {name!r}; valid: {', '.join(GGML_TYPES)}")


def block(name: str) -> tuple[int, int]:
    """(elements, bytes) of one block of ggml type `name` (any case)."""
    return GGML_TYPES[_key(name)]


def bytes_per_element(name: str) -> Fraction:
    """Bytes per element of ggml type `name`, exact (q4_K: 144/256 = 9/16)."""
    elements, size = block(name)
    return Fraction(size, elements)


def row_bytes(name: str, n: int) -> int:
    """ggml_row_size: bytes of a row of `n` elements; ValueError when n is not a multiple of the block."""
    elements, size = block(name)
    if n % elements:
        raise ValueError(f"ggml type {name}: a row of {n} elements is not a multiple of its block of {elements}")
    return n // elements * size


def tensor_bytes(name: str, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor of ggml type `name`, shape (ne0 = the row, ne1, ...) as ggml orders it."""
    rows = 1
    for n in shape[1:]:
        rows *= n
    return row_bytes(name, shape[0]) * rows


# ggml-cuda's kernel family for the quantized types whose own matmul laws were not measured (roofline.engines.timing
# 16. measured q8_0, q4_0, q4_K, q6_K on the H200): the K-quants run the same MMVQ / MMQ templates over super-blocks
# of 256 as q4_K, the legacy 32-element blocks as q4_0. A type with neither measured nor a family keeps the 16-bit laws.
LAW_FAMILY = {"q2_K": "q4_K", "q3_K": "q4_K", "q5_K": "q4_K", "q4_1": "q4_0", "q5_0": "q4_0", "q5_1": "q4_0",
              "iq4_nl": "q4_0", "iq4_xs": "q4_K"}
# ggml-cuda's MMVQ_MAX_BATCH_SIZE (ggml/src/ggml-cuda/mmvq.cuh): a quantized matmul of at most 8 columns runs the
# mat-vec kernel over the columns, more the MMQ tile kernel (ggml_cuda_mul_mat)
MMVQ_MAX_COLUMNS = 8


def law_type(name: str, measured) -> str | None:
    """The ggml type whose measured matmul laws time `name`'s kernels (`measured`: the types an engine timed)."""
    if name in measured:
        return name
    family = LAW_FAMILY.get(name)
    return family if family in measured else None

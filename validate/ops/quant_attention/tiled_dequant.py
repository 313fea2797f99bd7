"""The fast kernel's code-word helpers (tiled layouts, common/tiling.py): int16 words of 8/a-code bytes to fp16
values in one inline-asm instruction group, per-group metadata in the dot's layout, dot operands.

  * and (field f kept in place) + prmt with 0x64 -> 1024 + 2^(a f) u exactly (3-bit: plane B's bit or-ed
    in at 2f + 2), no shifts, no int->float conversion, no shared-memory round trip of dequantized data
    (the dot reads the words in its operand layout; 16-bit words keep kWidth = 2, so no register moves);
  * groups along the dot's reduction: per element x = a (v 2^(-af) - 1024 2^(-af)) + c in two f16x2 FMAs.
Under the interpreter (EMU) the same values come from integer arithmetic.
"""

from __future__ import annotations

import triton
import triton.language as tl

TK, CK, TV, CVT, CVC = (tl.constexpr(i) for i in range(5))  # common.tiling.Tiling kinds
KINDS = {"TK": 0, "CK": 1, "TV": 2, "CVT": 3, "CVC": 4}


@triton.jit
def field_consts(shape, A: tl.constexpr, F: tl.constexpr):
    """Constant tiles of field F of a-bit codes: byte mask (x4), f16x2 2^(-aF), f16x2 -1024 * 2^(-aF)."""
    M: tl.constexpr = ((1 << A) - 1) * 0x01010101 << (A * F)
    S: tl.constexpr = ((15 - A * F) << 10) * 0x10001
    N: tl.constexpr = (0x8000 | ((25 - A * F) << 10)) * 0x10001 - (1 << 32)  # as int32
    mask = tl.full(shape, M - (1 << 32) if M >= (1 << 31) else M, tl.int32)
    return mask, tl.full(shape, S, tl.int32), tl.full(shape, N, tl.int32)


@triton.jit
def raw_pair(w, hb, A: tl.constexpr, B: tl.constexpr, F: tl.constexpr, EMU: tl.constexpr):
    """Words w (int16: bytes 0 and 1) -> (v0, v1), v = 1024 + 2^(aF) u of field F of each byte; with a 1-bit
    plane B (B = 1), its bit 2F + byte of `hb` is u's bit a. Under the interpreter `hb` is plane B's byte."""
    mask, _, _ = field_consts(w.shape, A, F)
    if EMU:
        x = w.to(tl.int32) & 0xFFFF
        m = (((1 << A) - 1) << (A * F))
        v0 = x & m
        v1 = (x >> 8) & m
        if B:
            v0 |= ((hb >> (2 * F)) & 1) << (2 * F + 2)
            v1 |= ((hb >> (2 * F + 1)) & 1) << (2 * F + 2)
        return v0.to(tl.float32) + 1024.0, v1.to(tl.float32) + 1024.0
    if B:
        bit = tl.full(w.shape, 0x00040004 << (2 * F), tl.int32)
        return tl.inline_asm_elementwise(
            "{ .reg .b32 t, u, x; and.b32 t, $2, $3; prmt.b32 u, t, 0x64646464, 0x6240; shl.b32 x, $5, 2;"
            " and.b32 x, x, $7; or.b32 $0, u, x; prmt.b32 u, t, 0x64646464, 0x6341; shl.b32 x, $5, 1;"
            " and.b32 x, x, $7; or.b32 $1, u, x; }",
            "=r,=r,r,r,r,r,r,r,r", [w, mask, hb, bit], dtype=(tl.float16, tl.float16), is_pure=True, pack=2)
    return tl.inline_asm_elementwise(
        "{ .reg .b32 t; and.b32 t, $2, $3; prmt.b32 $0, t, 0x64646464, 0x6240; prmt.b32 $1, t, 0x64646464, 0x6341; }",
        "=r,=r,r,r,r", [w, mask], dtype=(tl.float16, tl.float16), is_pure=True, pack=2)


@triton.jit
def spread_b(hb16, EMU: tl.constexpr):
    """Plane B words, each given twice (join): int32 with the word's low byte at bits 0-7, high at 16-23."""
    if EMU:
        return hb16
    return tl.inline_asm_elementwise("{ prmt.b32 $0, $2, 0, 0x4140; mov.b32 $1, $0; }", "=r,=r,r", [hb16],
                                     dtype=tl.int32, is_pure=True, pack=2)


@triton.jit
def deq_pair(w, a0, c0, a1, c1, A: tl.constexpr, F: tl.constexpr, EMU: tl.constexpr):
    """Words w -> (x0, x1) = a * u + c of field F of byte 0 (scale a0, zero c0) and byte 1 (a1, c1), fp16."""
    mask, s, n = field_consts(w.shape, A, F)
    if EMU:
        x = w.to(tl.int32) & 0xFFFF
        m = (((1 << A) - 1) << (A * F))
        u0 = ((x & m) >> (A * F)).to(tl.float32)
        u1 = (((x >> 8) & m) >> (A * F)).to(tl.float32)
        return ((u0 * a0.to(tl.float32) + c0.to(tl.float32)).to(tl.float16).to(tl.float32),
                (u1 * a1.to(tl.float32) + c1.to(tl.float32)).to(tl.float16).to(tl.float32))
    return tl.inline_asm_elementwise(
        "{ .reg .b32 t, v; and.b32 t, $2, $3; prmt.b32 v, t, 0x64646464, 0x6240; fma.rn.f16x2 v, v, $5, $7;"
        " fma.rn.f16x2 $0, v, $9, $10; prmt.b32 v, t, 0x64646464, 0x6341; fma.rn.f16x2 v, v, $5, $7;"
        " fma.rn.f16x2 $1, v, $11, $12; }",
        "=r,=r,r,r,r,r,r,r,r,r,r,r,r", [w, mask, s, n, a0, c0, a1, c1], dtype=(tl.float16, tl.float16),
        is_pure=True, pack=2)


@triton.jit
def affine(scale, zero, off, MODE: tl.constexpr, OFFSET: tl.constexpr):
    """(a, c) fp32 with x = a*u + c: symmetric (s, -s*OFFSET), asymmetric (s, z), hybrid (|s|, z if the
    scale's sign bit is set else -|s|*OFFSET)."""
    raw = tl.load(scale + off)
    a = raw.to(tl.float32)
    if MODE == 0:
        c = -a * OFFSET  # (symmetric and asymmetric scales are positive)
    elif MODE == 1:
        c = tl.load(zero + off).to(tl.float32)
    else:
        a = tl.abs(a)
        c = tl.where(raw.to(tl.int16, bitcast=True) < 0, tl.load(zero + off).to(tl.float32), -a * OFFSET)
    return a, c


@triton.jit
def row_affine(scale, zero, off, ok, kb, MODE: tl.constexpr, OFFSET: tl.constexpr, KP: tl.constexpr, EMU: tl.constexpr):
    """(a, c) [ROWS, N] fp32 in the dot-output layout, row r taking row kb[r] of the [KP, N] metadata at `off`
    (rows past NSUB masked by `ok`): a one-hot [ROWS, KP] by [KP, N] dot, exact (one nonzero term)."""
    raw = tl.load(scale + off, mask=ok, other=0.0)
    a = raw.to(tl.float32)
    if MODE == 0:
        c = -a * OFFSET
    elif MODE == 1:
        c = tl.load(zero + off, mask=ok, other=0.0).to(tl.float32)
    else:
        a = tl.abs(a)
        c = tl.where(raw.to(tl.int16, bitcast=True) < 0, tl.load(zero + off, mask=ok, other=0.0).to(tl.float32),
                     -a * OFFSET)
    hot = op(kb[:, None] == tl.arange(0, KP)[None, :], EMU)
    return tl.dot(hot, op(a, EMU)), tl.dot(hot, op(c, EMU))


@triton.jit
def affine16(scale, zero, off, MODE: tl.constexpr, OFFSET: tl.constexpr, EMU: tl.constexpr):
    a, c = affine(scale, zero, off, MODE, OFFSET)
    if EMU:
        return a, c
    return a.to(tl.float16), c.to(tl.float16)


@triton.jit
def op(x, EMU: tl.constexpr):
    """A dot operand: fp32 under the interpreter (no fp16 dot there), fp16 on the GPU."""
    if EMU:
        return x.to(tl.float32)
    return x.to(tl.float16)


@triton.jit
def plane_b(c8, c16, byte_row, word_row, shape0: tl.constexpr, n: tl.constexpr, EMU: tl.constexpr):
    """Plane B of a [shape0, n] word tile, one byte per word, rows starting at bytes byte_row ([shape0, 1]):
    the bytes (interpreter), else the int16 words at word_row, each given twice and spread (see _spread)."""
    if EMU:
        return tl.load(c8 + byte_row + tl.arange(0, n)[None, :]).to(tl.int32)
    half = tl.load(c16 + word_row + tl.arange(0, n // 2)[None, :])
    return spread_b(tl.reshape(tl.broadcast_to(half[:, :, None], [shape0, n // 2, 2]), [shape0, n]), EMU)


@triton.jit
def put(t, i: tl.constexpr, x):
    """Tuple t with item i replaced by x."""
    out = ()
    for j in tl.static_range(len(t)):
        if j == i:
            out = out + (x,)
        else:
            out = out + (t[j],)
    return out


@triton.jit
def slab(bh, kc, kc16, ks, kz, vc, vc16, vs, vz, nq_k, nq_v, D: tl.constexpr, K_A: tl.constexpr, K_B: tl.constexpr,
         K_G: tl.constexpr, V_A: tl.constexpr, V_B: tl.constexpr, V_G: tl.constexpr):
    """The eight cache pointers moved to this (sequence b, KV head h) slab: every tensor is [B, H, ...] contiguous
    (codes in bytes and in 16-bit words, scales and zeros per group)."""
    return (kc + bh * (nq_k * D * (K_A + K_B) // 8), kc16 + bh * (nq_k * D * (K_A + K_B) // 16),
            ks + bh * (nq_k * D // K_G), kz + bh * (nq_k * D // K_G),
            vc + bh * (nq_v * D * (V_A + V_B) // 8), vc16 + bh * (nq_v * D * (V_A + V_B) // 16),
            vs + bh * (nq_v * D // V_G), vz + bh * (nq_v * D // V_G))

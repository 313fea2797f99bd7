"""Triton helpers of the quantized families: unpacking codes, codes to floats, per-group metadata."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def unpack(x, BITS: tl.constexpr):
    """Bytes [R, C] (int32) -> BITS-bit codes [R, C*8/BITS]: code k of byte c (bits k*BITS..) to column
    c*8/BITS + k, by halving the field width with tl.interleave (no gathers, no shared memory)."""
    if BITS <= 4:
        x = tl.interleave(x & 15, x >> 4)
    if BITS <= 2:
        x = tl.interleave(x & 3, x >> 2)
    if BITS == 1:
        x = tl.interleave(x & 1, x >> 1)
    return x


@triton.jit
def code_float(u):
    """Codes (0 <= u < 2^23) to fp32 without the quarter-rate int->float unit: the bits of 2^23 + u, less 2^23."""
    return (u | 0x4B000000).to(tl.float32, bitcast=True) - 8388608.0


@triton.jit
def repeat(x, N: tl.constexpr):
    """[R, C] -> [R, C*N], each column repeated N times (one group's scale over its G elements)."""
    return tl.reshape(tl.broadcast_to(x[:, :, None], [x.shape[0], x.shape[1], N]), [x.shape[0], x.shape[1] * N])


@triton.jit
def channel_codes(codes, toks, ok, c0, C: tl.constexpr, D: tl.constexpr, BITS_A: tl.constexpr,
                   BITS_B: tl.constexpr):
    """Codes [BLOCK, C] of channels c0..c0+C of tokens `toks`, packed along channels in token-major rows
    of D*b/8 bytes (plane A's D*A/8 bytes, then plane B's)."""
    rows = codes + toks[:, None].to(tl.int64) * (D * (BITS_A + BITS_B) // 8)  # [BLOCK, 1]
    ja = tl.arange(0, C * BITS_A // 8)
    u = unpack(tl.load(rows + c0 * BITS_A // 8 + ja[None, :], mask=ok[:, None], other=0).to(tl.int32), BITS_A)
    if BITS_B > 0:
        jb = tl.arange(0, C * BITS_B // 8)
        wb = tl.load(rows + D * BITS_A // 8 + c0 * BITS_B // 8 + jb[None, :], mask=ok[:, None], other=0)
        u = u | (unpack(wb.to(tl.int32), BITS_B) << BITS_A)
    return u


@triton.jit
def affine_masked(scale, zero, off, mask, MODE: tl.constexpr, OFFSET: tl.constexpr):
    """(a, c) with x = a*u + c, loads masked: symmetric (s, -s*OFFSET), asymmetric (s, z), hybrid (|s|, z if the
    scale's sign bit is set else -|s|*OFFSET)."""
    raw = tl.load(scale + off, mask=mask, other=0.0)
    a = tl.abs(raw.to(tl.float32))
    if MODE == 0:
        c = -a * OFFSET
    else:
        z = tl.load(zero + off, mask=mask, other=0.0).to(tl.float32)
        if MODE == 1:
            c = z
        else:
            c = tl.where(raw.to(tl.int16, bitcast=True) < 0, z, -a * OFFSET)
    return a, c

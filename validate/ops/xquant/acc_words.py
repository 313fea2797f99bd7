"""XQuant-CL's 4-bit accumulator update on packed words (launch.acc_update(variant="words")): the same update as
kernel.acc_update_kernel's 4-bit branch, with a fraction of its instructions per element.

acc_update_kernel unpacks every 2-bit delta code and every 4-bit accumulator code to its own fp32 lane,
dequantizes, adds, floors, clamps and repacks (~30 lane instructions per element): issue-bound, 42 % of the
DRAM roof on an H100. Here the update is done in the integer domain, on 32-bit words of eight 4-bit codes:

  code' = clamp(floor((step (u - 8) + delta) / step + 8.5), 0, 15) = clamp(u + k, 0, 15),
  k = floor(delta / step + 0.5),   delta = s q + z   (q the 2-bit delta code, s, z its group's scale and zero)

(u is an integer, so it leaves the floor). k takes only four values per (token, group), one per q, so each
program computes them once per group in fp32 (`_lut`: four FMAs, floor, clamped to [-16, 16], which cannot change
clamp(u + k, 0, 15) for u in [0, 15]) and packs them into the bytes of one word, biased by BIAS. Per accumulator
word (8 channels, `_update`, the body of one inline-PTX block on the GPU):
  the word's 16 delta bits are 4 nibbles (q of channel 2n at bits 4n..4n+1, of 2n + 1 at 4n+2..4n+3): masked
  with 0x3333 they are prmt selectors that pick, per byte, lut[q] of the even channels; shifted by 2, of the odd;
  the even codes (word & 0x0F0F0F0F) and odd codes ((word >> 4) & 0x0F0F0F0F) sit one per byte: + the picked
  bytes gives x = u + k + 112 in [96, 143] per byte, no carry between bytes; clamp per byte: x >= 128 (the
  byte's sign, replicated by prmt) -> 15; bit 4 clear (x < 112) -> 0; else x & 15; repack.
About 20 SASS instructions per 8 channels (validate/notes/2026-11-23-xquant-cl-accumulator-update.md). Under the
interpreter (no inline
assembly) `_update` runs the same steps as Triton integer ops with prmt emulated (EMU).

Rounding: the reference computes floor(fl(fl(step (u - 8) + delta) / step) + 8.5), this kernel
floor(fl(fl(delta / step) + 0.5)) (the FMA may fuse it); both are exact, hence equal, when step is a power of two
and the sums fit in fp32's 24 bits; otherwise they differ only where delta / step + 0.5 lies within a few fp32
ulps (of values up to ~40: ~1e-5) of an integer, by one code.
Memory: per token the delta's D/4 bytes (loaded as D/8 int16, one per accumulator word), its fp16 scale and zero
per group, the accumulator's D/2 bytes (D/8 int32) read and written: what roofline counts, nothing else.
"""

from __future__ import annotations

import triton
import triton.language as tl

BIAS = tl.constexpr(112)  # k + BIAS in [96, 128]: u + k + BIAS in [96, 143], a byte with no carry out
SIGN = tl.constexpr(0xBA98)  # prmt selector: byte i <- byte i's sign (bit 7) replicated over 8 bits


@triton.jit
def _lut(s, z, inv_step):
    """Scale and zero [..] -> int32 whose byte q (0..3) is clamp(floor((s q + z) inv_step + 0.5), -16, 16) + BIAS."""
    s, z = s.to(tl.float32), z.to(tl.float32)
    out = tl.zeros(s.shape, dtype=tl.int32)
    for q in tl.static_range(4):
        k = tl.floor((s * q + z) * inv_step + 0.5)
        k = tl.minimum(tl.maximum(k, -16.0), 16.0) + BIAS
        out |= k.to(tl.int32) << (8 * q)
    return out


@triton.jit
def _prmt_emu(x, sel):
    """prmt.b32 d, x, x, sel under the interpreter: byte i of d is byte (sel >> 4i) & 3 of x (bit 3 of each
    selector nibble clear: no sign mode)."""
    out = tl.zeros(x.shape, dtype=tl.int32)
    for i in tl.static_range(4):
        q = (sel >> (4 * i)) & 3
        out |= ((x >> (8 * q)) & 0xFF) << (8 * i)
    return out


@triton.jit
def _sign_emu(x):
    """prmt.b32 d, x, 0, SIGN under the interpreter: each byte's bit 7 replicated over the byte."""
    out = tl.zeros(x.shape, dtype=tl.int32)
    for i in tl.static_range(4):
        out |= (((x >> (8 * i + 7)) & 1) * 0xFF) << (8 * i)
    return out


@triton.jit
def _clamp_emu(x):
    """Bytes x = u + k + BIAS -> clamp(u + k, 0, 15) in each byte's low nibble (high nibble undefined)."""
    return (x & _sign_emu(x << 3)) | _sign_emu(x)


@triton.jit
def _update(h, a, lut, EMU: tl.constexpr):
    """Accumulator words a (int32, 8 codes) with their delta bits h (int16) and lut (`_lut`) -> updated words."""
    if EMU:
        se = h.to(tl.int32) & 0x3333
        so = (h.to(tl.int32) >> 2) & 0x3333
        e = _clamp_emu((a & 0x0F0F0F0F) + _prmt_emu(lut, se))
        o = _clamp_emu(((a >> 4) & 0x0F0F0F0F) + _prmt_emu(lut, so))
        return (e & 0x0F0F0F0F) | ((o << 4) & -252645136)  # 0xF0F0F0F0 as int32
    # pack=2: $2 holds two words' delta bits (low half: word 0), $3 $4 the words, $5 $6 their luts
    return tl.inline_asm_elementwise(
        "{ .reg .b32 se, so, k, e, o, m, t;"
        " and.b32 se, $2, 0x33333333; shr.u32 so, $2, 2; and.b32 so, so, 0x33333333;"
        " prmt.b32 k, $5, 0, se; and.b32 e, $3, 0x0F0F0F0F; add.u32 e, e, k;"
        " prmt.b32 m, e, 0, 0xBA98; shl.b32 t, e, 3; prmt.b32 t, t, 0, 0xBA98; and.b32 e, e, t; or.b32 e, e, m;"
        " prmt.b32 k, $5, 0, so; shr.u32 o, $3, 4; and.b32 o, o, 0x0F0F0F0F; add.u32 o, o, k;"
        " prmt.b32 m, o, 0, 0xBA98; shl.b32 t, o, 3; prmt.b32 t, t, 0, 0xBA98; and.b32 o, o, t; or.b32 o, o, m;"
        " shl.b32 o, o, 4; lop3.b32 $0, e, o, 0x0F0F0F0F, 0xE4;"
        " shr.u32 se, se, 16; shr.u32 so, so, 16;"
        " prmt.b32 k, $6, 0, se; and.b32 e, $4, 0x0F0F0F0F; add.u32 e, e, k;"
        " prmt.b32 m, e, 0, 0xBA98; shl.b32 t, e, 3; prmt.b32 t, t, 0, 0xBA98; and.b32 e, e, t; or.b32 e, e, m;"
        " prmt.b32 k, $6, 0, so; shr.u32 o, $4, 4; and.b32 o, o, 0x0F0F0F0F; add.u32 o, o, k;"
        " prmt.b32 m, o, 0, 0xBA98; shl.b32 t, o, 3; prmt.b32 t, t, 0, 0xBA98; and.b32 o, o, t; or.b32 o, o, m;"
        " shl.b32 o, o, 4; lop3.b32 $1, e, o, 0x0F0F0F0F, 0xE4; }",
        "=r,=r,r,r,r,r,r", [h, a, lut], dtype=tl.int32, is_pure=True, pack=2)


@triton.jit
def _load(dw_ptr, ds, dz, aw_ptr, inv_step, words0, meta0, toks0, i, tokens, D: tl.constexpr, STEP_T: tl.constexpr,
          G: tl.constexpr):
    """Step i's (delta bits, accumulator words, luts, word offsets, mask): the first step's offsets plus a constant."""
    ok = (toks0 + i * STEP_T) < tokens
    meta = meta0 + i * STEP_T * (D // G)
    words = words0 + i * STEP_T * (D // 8)
    lut = _lut(tl.load(ds + meta, mask=ok[:, None], other=0.0), tl.load(dz + meta, mask=ok[:, None], other=0.0),
               inv_step)
    mask = ok[:, None, None]
    h = tl.load(dw_ptr + words, mask=mask, other=0)
    a = tl.load(aw_ptr + words, mask=mask, other=0)
    return h, a, tl.broadcast_to(lut[:, :, None], h.shape), words, mask


@triton.jit
def acc4_words_kernel(dw_ptr, ds, dz, aw_ptr, inv_step, tokens, D: tl.constexpr, BLOCK_T: tl.constexpr,
                      STEP_T: tl.constexpr, BLOCK_D: tl.constexpr, G: tl.constexpr, EMU: tl.constexpr):
    """One program: BLOCK_T tokens x BLOCK_D channels of one sequence, in BLOCK_T / STEP_T unrolled steps of
    STEP_T tokens, the next step's loads issued before this step's stores. dw_ptr: the 2-bit delta codes as int16
    [B, L, D/8] (one per accumulator word), ds, dz: fp16 [B, L, D/G], aw_ptr: the 4-bit accumulator as int32
    [B, L, D/8]; a step holds [STEP_T, BLOCK_D/G groups, G/8 words], so each thread computes the lut of a group
    once for the words it holds of it."""
    NG: tl.constexpr = BLOCK_D // G
    WG: tl.constexpr = G // 8
    toks0 = tl.program_id(0) * BLOCK_T + tl.arange(0, STEP_T)
    rows = tl.program_id(2).to(tl.int64) * tokens + toks0  # [STEP_T]
    g0 = tl.program_id(1) * NG
    meta0 = rows[:, None] * (D // G) + g0 + tl.arange(0, NG)[None, :]  # [STEP_T, NG]
    words0 = (rows[:, None, None] * (D // 8) + (g0 + tl.arange(0, NG))[None, :, None] * WG
              + tl.arange(0, WG)[None, None, :])  # [STEP_T, NG, WG]
    h, a, lut, words, mask = _load(dw_ptr, ds, dz, aw_ptr, inv_step, words0, meta0, toks0, 0, tokens, D, STEP_T, G)
    for i in tl.static_range(1, BLOCK_T // STEP_T + 1):
        if i < BLOCK_T // STEP_T:
            nxt = _load(dw_ptr, ds, dz, aw_ptr, inv_step, words0, meta0, toks0, i, tokens, D, STEP_T, G)
        tl.store(aw_ptr + words, _update(h, a, lut, EMU), mask=mask)
        if i < BLOCK_T // STEP_T:
            h, a, lut, words, mask = nxt

"""XQuant's latent dequantization two bf16 to a 32-bit register (kernel.py's PACKED path, launch's dequant="pairs"):
2-bit codes straight to the bf16 MMA operand, for both latent layouts: per-token groups along channels (GQA's
X U_v, MHA's X: `x_pairs`) and GQA's X U_k, packed along tokens with per-channel groups (`xt_pairs`).

The fp32 path (kernel._dequant) unpacks every code to its own 32-bit lane by tl.interleave, forms 2^23 + u by an OR,
subtracts, FMAs in fp32 and packs pairs to bf16x2: 6.1-8.4 lane instructions per latent element on sm_90
(validate/notes/2026-11-23-xquant-remat-dequant.md). Here a 32-bit word of 16 codes (4 bytes x 4 fields) becomes 8
bf16x2 registers in one inline-asm
block, a per-element map (its outputs depend on its own word only, as inline_asm_elementwise requires):
  field F of every byte isolated by one AND (field 0 shifted left by 1, field 3 right by 1): a byte < 128 whose
  prmt with the exponent byte 0x43 is bf16 128 + 2^e u exactly (e = 1, 2, 4, 5; 7 mantissa bits, ulp 1 on
  [128, 256)) - the magic-number int->float conversion of NVIDIA FasterTransformer v5.3
  (src/fastertransformer/cutlass_extensions/include/cutlass_extensions/interleaved_numeric_conversion.h,
  L215-287) and Marlin's `dequant` (IST-DASLab/marlin, lop3 with 0x6400, after that file), here in bf16;
  fma.rn.bf16x2 (v, 2^-e, -(128 2^-e + 1.5)) gives u - 1.5 exactly, then, with m = c + 1.5 a the group's centre,
  x = hi (u - 1.5) + (lo (u - 1.5) + m) in two more for per-token groups (the fp16 scale a = hi + lo split
  exactly into two bf16), x = a (u - 1.5) + m in one for GQA's per-channel groups.
About 38 (per-token) / 30 (per-channel) instructions per 16 codes plus the per-row / per-channel metadata.
In `x_pairs` a register holds channels (4i + F, 4(i + 1) + F) of a word:
the operand's columns are a fixed permutation of the tile's channels (`pair_channels`), and the kernels load W's
rows (and the fp16 window's columns) in that order, which leaves x W unchanged. In `xt_pairs` a word holds 4
channels x 4 tokens, so a register pairs two channels of one token, as the operand wants: no permutation.
Precision (validate/notes/2026-11-23-xquant-remat-dequant.md): for per-token groups a single FMA, a u + c or a (u -
1.5) + m with a in bf16, put the
MHA test 1.2e-2 from the float32 reference (the fp32 tests' bound is 1e-2); with the split and the centre (m, rounded
to bf16, is small where the group is centred) the fused results lie 5-7e-3 from it. Under the
interpreter (EMU) the same bf16 values come from fp32 arithmetic with round-to-nearest (`_rn`: the interpreter's
own .to(tl.bfloat16) truncates), in the same column order.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def pair_channels(R: tl.constexpr):
    """Channel (0..R) of each of the operand's R columns: column 16m + 2j + s (j = 4p + 2t + v, field F = 2v + t,
    byte 2p + s of word m) holds channel 16m + 4(2p + s) + F (`_nest`, then `_halves`)."""
    col = tl.arange(0, R)
    j = (col % 16) // 2
    f = 2 * (j % 2) + (j // 2) % 2
    return (col // 16) * 16 + 4 * (2 * (j // 4) + col % 2) + f


@triton.jit
def _nest(o):
    """8 tensors [N, W] (item 2F + p) -> [N, 8 W], item 2F + p at column 8w + 4p + 2t + v (F = 2v + t)."""
    j = tl.join(tl.join(tl.join(o[0], o[1]), tl.join(o[2], o[3])),
                tl.join(tl.join(o[4], o[5]), tl.join(o[6], o[7])))  # [N, W, p, t, v]
    return tl.reshape(j, [j.shape[0], j.shape[1] * 8])


@triton.jit
def _nest_rows(o):
    """8 tensors [N, W] (item 2F + p) -> [4 N, 2 W], item 2F + p at row 4n + F, column 2w + p."""
    j = tl.join(tl.join(tl.join(o[0], o[1]), tl.join(o[2], o[3])),
                tl.join(tl.join(o[4], o[5]), tl.join(o[6], o[7])))  # [N, W, p, t, v]
    return tl.reshape(tl.permute(j, (0, 4, 3, 1, 2)), [j.shape[0] * 4, j.shape[1] * 2])


@triton.jit
def _halves(pairs):
    """int32 [N, C] of bf16x2 -> bf16 [N, 2C], low half first."""
    lo = pairs.to(tl.int16).to(tl.bfloat16, bitcast=True)
    hi = (pairs >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    return tl.reshape(tl.join(lo, hi), [pairs.shape[0], pairs.shape[1] * 2])


@triton.jit
def _bf16x2(x):
    """fp32 -> int32 holding bf16(x) in both halves."""
    b = x.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
    return b | (b << 16)


@triton.jit
def _join_halves(lo, hi):
    """Interpreter: [N, C] low and high halves -> [N, 2C], as `_halves`."""
    x = tl.join(lo, hi)
    return tl.reshape(x, [x.shape[0], x.shape[1] * 2])


@triton.jit
def _rn(x):
    """Interpreter: fp32 -> the nearest bf16 (ties to even; the GPU's cvt.rn), as fp32. The interpreter's own
    .to(tl.bfloat16) truncates."""
    b = x.to(tl.int32, bitcast=True)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & -65536  # 0xFFFF0000 as int32
    return b.to(tl.float32, bitcast=True)


@triton.jit
def _emu_items(w, a, c, SPLIT: tl.constexpr):
    """Interpreter: `_words`' (SPLIT) or `_words_bytes`' 8 items as their low and high halves (two 8-tuples of fp32
    holding bf16 values); a, c: 4-tuples, (scale, zero) of byte 0..3 of each word."""
    lo = ()
    hi = ()
    for f in tl.static_range(4):
        for p in tl.static_range(2):
            u0 = ((w >> (16 * p + 2 * f)) & 3).to(tl.float32)
            u1 = ((w >> (16 * p + 8 + 2 * f)) & 3).to(tl.float32)
            a0, a1 = a[2 * p], a[2 * p + 1]
            m0, m1 = _rn(c[2 * p] + 1.5 * a0), _rn(c[2 * p + 1] + 1.5 * a1)
            h0, h1 = _rn(a0), _rn(a1)
            t0, t1 = m0, m1
            if SPLIT:
                t0, t1 = _rn((a0 - h0) * (u0 - 1.5) + m0), _rn((a1 - h1) * (u1 - 1.5) + m1)
            lo = lo + (_rn(h0 * (u0 - 1.5) + t0),)
            hi = hi + (_rn(h1 * (u1 - 1.5) + t1),)
    return lo, hi


def _asm(ops: tuple) -> str:
    """The inline PTX of `_words` / `_words_bytes`: $8 the word; `ops`: per byte pair p (bytes 2p, 2p + 1), the
    operands of the bf16x2 scale's high and low parts (a = hi + lo exactly) and of the centres."""
    out = ["{ .reg .b32 t0, t1, t2, t3, v, s, k, x;",
           " shl.b32 t0, $8, 1; and.b32 t0, t0, 0x06060606; and.b32 t1, $8, 0x0C0C0C0C;",
           " and.b32 t2, $8, 0x30303030; shr.u32 t3, $8, 1; and.b32 t3, t3, 0x60606060;"]
    for f, (scale, off) in enumerate(FIELDS):
        out.append(f" mov.b32 s, {scale}; mov.b32 k, {off};")
        for p, sel in enumerate(("0x4140", "0x4342")):
            hi, lo, c = ops[p]
            fma = (f" fma.rn.bf16x2 x, v, {lo}, {c}; fma.rn.bf16x2 ${2 * f + p}, v, {hi}, x;" if lo else
                   f" fma.rn.bf16x2 ${2 * f + p}, v, {hi}, {c};")
            out.append(f" prmt.b32 v, t{f}, 0x43434343, {sel}; fma.rn.bf16x2 v, v, s, k;" + fma)
    return "".join(out) + " }"


# per field F: bf16x2 (2^-e, -(128 2^-e + 1.5)) turning the magic word 128 + 2^e u into u - 1.5 exactly
# (e = 1, 2, 4, 5: field 0 shifted left by 1, field 3 right by 1, so that 128 2^-e + 1.5 is a bf16)
FIELDS = (("0x3F003F00", "0xC283C283"), ("0x3E803E80", "0xC206C206"), ("0x3D803D80", "0xC118C118"),
          ("0x3D003D00", "0xC0B0C0B0"))
ASM_ROW = tl.constexpr(_asm((("$9", "$10", "$11"),) * 2))
ASM_BYTES = tl.constexpr(_asm((("$9", None, "$11"), ("$10", None, "$12"))))


@triton.jit
def _words(w, a, c):
    """Words w (int32, 16 2-bit codes) with their row's (a, c) fp32 (converted to bf16x2, then broadcast to w's
    shape) -> 8 int32 of bf16x2: item 2F + p holds x of field F of bytes 2p (low half), 2p + 1 (high)."""
    hi = a.to(tl.bfloat16).to(tl.float32)
    return tl.inline_asm_elementwise(
        ASM_ROW, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r",
        [w, tl.broadcast_to(_bf16x2(hi), w.shape), tl.broadcast_to(_bf16x2(a - hi), w.shape),
         tl.broadcast_to(_bf16x2(c + 1.5 * a), w.shape)], dtype=(tl.int32,) * 8, is_pure=True, pack=1)


@triton.jit
def x_pairs(codes, scale, zero, toks, ok, c0, LAT: tl.constexpr, R: tl.constexpr, G: tl.constexpr,
            EMU: tl.constexpr):
    """x [BLOCK, R] bf16 (fp32 under EMU) of channels c0 + pair_channels(R) of tokens `toks`, 2-bit codes in
    token-major rows of LAT/4 bytes, per-token groups of G channels (G and R multiples of 16; (a, c) of a tile
    inside one group [BLOCK, 1])."""
    rows = codes.to(tl.pointer_type(tl.int32)) + toks[:, None].to(tl.int64) * (LAT // 16)
    w = tl.load(rows + c0 // 16 + tl.arange(0, R // 16)[None, :], mask=ok[:, None], other=0)  # [BLOCK, R/16]
    meta = toks[:, None] * (LAT // G) + c0 // G
    if R >= G:
        meta += (tl.arange(0, R // 16)[None, :] * 16) // G
    a = tl.load(scale + meta, mask=ok[:, None], other=0.0).to(tl.float32)
    c = tl.load(zero + meta, mask=ok[:, None], other=0.0).to(tl.float32)
    if EMU:
        a, c = tl.broadcast_to(a, w.shape), tl.broadcast_to(c, w.shape)
        lo, hi = _emu_items(w, (a, a, a, a), (c, c, c, c), True)
        return _join_halves(_nest(lo), _nest(hi))
    return _halves(_nest(_words(w, a, c)))


@triton.jit
def _affine_f16x2(a, c):
    """int32 of two fp16 scales and of their zeros -> (bf16x2 of the scales, of the centres c + 1.5 a)."""
    return tl.inline_asm_elementwise(
        "{ .reg .b16 l, h; .reg .f32 al, ah, cl, ch;"
        " mov.b32 {l, h}, $2; cvt.f32.f16 al, l; cvt.f32.f16 ah, h;"
        " mov.b32 {l, h}, $3; cvt.f32.f16 cl, l; cvt.f32.f16 ch, h; fma.rn.f32 cl, al, 0f3FC00000, cl;"
        " fma.rn.f32 ch, ah, 0f3FC00000, ch; cvt.rn.bf16x2.f32 $0, ah, al; cvt.rn.bf16x2.f32 $1, ch, cl; }",
        "=r,=r,r,r", [a, c], dtype=(tl.int32, tl.int32), is_pure=True, pack=1)


@triton.jit
def _words_bytes(w, m01, m23):
    """`_words` with (a, c) per byte: m01 (m23) the `_affine_f16x2` pair of bytes 0, 1 (2, 3) of each word; one
    FMA a (u - 1.5) + m with a in bf16 (per-channel groups: m is the channel's centre, and the split of a that
    `_words` needs changed the tests' error by <= 2e-3)."""
    return tl.inline_asm_elementwise(
        ASM_BYTES, "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r",
        [w, tl.broadcast_to(m01[0], w.shape), tl.broadcast_to(m23[0], w.shape), tl.broadcast_to(m01[1], w.shape),
         tl.broadcast_to(m23[1], w.shape)],
        dtype=(tl.int32,) * 8, is_pure=True, pack=1)


@triton.jit
def xt_pairs(codes, scale, zero, j0, c0, LAT: tl.constexpr, R: tl.constexpr, BLOCK_N: tl.constexpr,
             G: tl.constexpr, EMU: tl.constexpr):
    """x [BLOCK_N, R] bf16 (fp32 under EMU) of tokens j0.. and channels c0.. in order, 2-bit codes packed along
    tokens (byte row r holds tokens 4r..4r+3 of every channel, LAT bytes a row), per-channel groups of G tokens
    holding the whole block: 32-bit words of 4 channels x 4 tokens, a byte's 4 fields = 4 tokens, so a bf16x2
    pairs two channels of one token as the MMA operand wants; (a, c) per byte."""
    rows = (j0 // 4 + tl.arange(0, BLOCK_N // 4))[:, None].to(tl.int64) * (LAT // 4)
    w = tl.load(codes.to(tl.pointer_type(tl.int32)) + rows + c0 // 4 + tl.arange(0, R // 4)[None, :])
    meta = (j0 // G) * LAT + c0 + 4 * tl.arange(0, R // 4)[None, :]  # [1, R/4]: channel 4n of word n
    if EMU:
        a = ()
        c = ()
        for b in tl.static_range(4):
            a = a + (tl.broadcast_to(tl.load(scale + meta + b).to(tl.float32), w.shape),)
            c = c + (tl.broadcast_to(tl.load(zero + meta + b).to(tl.float32), w.shape),)
        lo, hi = _emu_items(w, a, c, False)
        return _join_halves(_nest_rows(lo), _nest_rows(hi))
    s32 = scale.to(tl.pointer_type(tl.int32)) + meta // 2  # fp16 pairs (channels 4n, 4n + 1), (4n + 2, 4n + 3)
    z32 = zero.to(tl.pointer_type(tl.int32)) + meta // 2
    m01 = _affine_f16x2(tl.load(s32), tl.load(z32))
    m23 = _affine_f16x2(tl.load(s32 + 1), tl.load(z32 + 1))
    return _halves(_nest_rows(_words_bytes(w, m01, m23)))
